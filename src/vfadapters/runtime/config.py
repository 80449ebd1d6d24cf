"""What one replica needs to run, whatever its transport, and its control fields.

:class:`NodeConfig` is built from vfcore's decisions (the run's layout: replica
counts, pod names, routing, the runtime join policy, which children share
work); a transport adds only where its buffers are. :class:`SLOT` and
:class:`CTL` name the u64 control fields a replica keeps: the run's flags
(stop producing, abort) and, per replica, its state and counters. The
shared-memory transport keeps them in one segment the coordinator reads; the
broker worker keeps them in its own process and publishes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from vfcore import JoinPolicy, NodeSpec
from vfcore.routing import Strategy
from vfcore.runtime import Routing

__all__ = ["CTL", "SLOT", "EdgePlan", "NodeConfig", "slot_base"]


class CTL:
    """Global u64 fields at the start of the control fields."""

    STOP_PRODUCERS: Final = 0
    ABORT: Final = 1
    BASE: Final = 16  # the first slot's fields start here


class SLOT:
    """Per-replica u64 fields (``FIELDS`` of them per slot).

    The *tally* fields (``RECEIVED`` … ``PRODUCED``, ``DEAD_LETTERS``) change
    only together with the settlement of what they count
    (:class:`vfcore.runtime.delivery.NodeTally`); the others are live gauges.
    """

    STATE: Final = 0
    PROCESSED: Final = 1  # producers: items produced; others: items (groups) handled
    ERRORS: Final = 2  # exceptions raised by the node's code (every attempt)
    RETRIES: Final = 3
    DEAD_LETTERS: Final = 4
    JOIN_DROPPED: Final = 5
    COST_NS: Final = 6  # EWMA of the time one item takes, in ns
    ACTIVE: Final = 7  # 0: retired by autoscaling
    PID: Final = 8
    RECEIVED: Final = 9
    EMITTED: Final = 10  # items written to children (live)
    FILTERED: Final = 11
    NONES: Final = 12  # producers: next() calls that returned None ("nothing now")
    OUTPUTS: Final = 13
    GROUPED: Final = 14
    GROUPS: Final = 15
    DUPLICATES: Final = 16
    PRODUCED: Final = 17
    POSITION: Final = 18  # producers: items written to every child (resume from here)
    HALVES_DROPPED: Final = 19  # join halves a policy dropped without a letter (tally)
    FIELDS: Final = 24

    # STATE values
    IDLE, STARTING, RUNNING, DONE, FAILED = range(5)


def slot_base(slot: int) -> int:
    return CTL.BASE + slot * SLOT.FIELDS


@dataclass(frozen=True, slots=True)
class EdgePlan:
    """One output edge as the replica sees it (from vfcore's layout or topology).

    ``outlets``: buffers on the edge (the child's partitions, else 1);
    ``shared``: the child's replicas share work (chunks sized to the child's
    cost, :func:`vfcore.runtime.delivery.batch_limit`); ``keep``: REALTIME, how
    many messages each of the child's buffers keeps.
    """

    child: str
    child_spec: NodeSpec
    routing: Routing
    strategy: Strategy
    outlets: int
    shared: bool
    keep: int | None = None


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Everything one replica needs to run, whatever its transport."""

    run_id: str
    node: str
    token: str  # the node's physical token (vfcore.physical_name): safe in ids and subjects
    replica: int
    pod: str  # vfcore.pod_name(node, replica)
    replicas: int  # ctx.replicas: the node's replica count as laid out
    spec: NodeSpec
    flow_type: str
    join_policy: JoinPolicy | None  # vfcore.runtime.layout.runtime_join_policy
    retries: int
    edges: tuple[EdgePlan, ...]
    parents: tuple[str, ...]  # in parent order
    env: dict[str, str] = field(default_factory=dict)
    device: str | None = None  # "cuda" / "cpu" for GPU nodes, None for CPU nodes
    devices: tuple[int, ...] = ()
    linger_s: float = 0.002
    batch_max: int = 1024
    batch_target_s: float = 0.002
    batch_bytes: int = 1 << 20
    log_level: int = 20
