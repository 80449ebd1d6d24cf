"""What the coordinator hands each worker, and the layout of the control segment.

Everything here is picklable when a worker starts (semaphores may only travel
then), so every ring a worker may ever write to, including replica slots that
autoscaling may open later, is created up front and named in its config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vfadapters.local.ring import RingHandle
from vfcore import JoinPolicy, NodeSpec
from vfcore.routing.partition import Strategy
from vfcore.runtime.layout import Routing

__all__ = ["CTL", "SLOT", "EdgeOut", "WorkerConfig", "slot_base"]


class CTL:
    """Global u64 fields at the start of the control segment."""

    STOP_PRODUCERS = 0
    ABORT = 1
    BASE = 16  # the first slot's fields start here


class SLOT:
    """Per-replica-slot u64 fields (``FIELDS`` of them per slot)."""

    STATE = 0
    PROCESSED = 1
    ERRORS = 2
    RETRIES = 3
    DEAD_LETTERS = 4
    JOIN_DROPPED = 5
    COST_NS = 6  # EWMA of the time one message takes, in ns
    ACTIVE = 7  # competing senders may choose this slot
    PID = 8
    RECEIVED = 9
    EMITTED = 10
    FILTERED = 11
    NONES = 12  # producers: next() calls that returned None ("nothing now")
    FIELDS = 16

    # STATE values
    IDLE, STARTING, RUNNING, DONE, FAILED = range(5)


def slot_base(slot: int) -> int:
    return CTL.BASE + slot * SLOT.FIELDS


@dataclass(frozen=True, slots=True)
class EdgeOut:
    """One output edge of a node, as its writers see it (laid out by :class:`vfcore.runtime.EdgeLayout`).

    ``partitioned``: a message goes to ring ``vfcore.owner_of(child_spec, ...,
    strategy=strategy)``; otherwise to ring 0.
    """

    child: str
    child_spec: NodeSpec
    routing: Routing
    rings: tuple[RingHandle, ...]  # one, or one per owner when partitioned
    slots: tuple[int, ...]  # the control slot of each child replica slot
    strategy: Strategy = "modulo"


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """Everything one replica needs to run."""

    run_id: str
    control: str  # control segment name
    node: str
    replica: int
    pod: str  # "<node>/<replica>" (vfcore.pod_name, laid out by vfcore.runtime.local_layout)
    replicas: int  # the node's replica count as laid out (ctx.replicas)
    slot: int
    spec: NodeSpec
    flow_type: str
    node_blob: bytes  # the node object, pickled without its graph links
    preload: tuple[str, ...]  # flow files to import first (their classes live there)
    inputs: tuple[tuple[str, RingHandle], ...]  # (parent, ring), in parent order
    outputs: tuple[EdgeOut, ...]
    doorbell: Any
    join_policy: JoinPolicy | None
    retries: int
    dead_letter_path: str
    coordinator_pid: int = 0
    env: dict[str, str] = field(default_factory=dict)
    device: str | None = None  # "cuda" / "cpu" for GPU nodes, None for CPU nodes
    devices: tuple[int, ...] = ()
    linger_s: float = 0.002
    batch_max: int = 1024
    batch_target_s: float = 0.002
    log_level: int = 20
