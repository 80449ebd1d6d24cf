"""What the parts of a run share: its nodes, replicas, edges, control fields and voice.

A coordinator (the local executor's, or ``vf run --broker``'s) builds one
:class:`RunState` from the run's :class:`~vfcore.runtime.LocalLayout`; the
supervisor, progress and autoscaling read and update it, whatever the
transport. Each edge is seen through :class:`EdgeView`: a shared-memory ring's
counters, or a broker consumer's lag and the run's ledger.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from vfadapters.runtime.config import slot_base
from vfadapters.runtime.options import RunOptions
from vfcore import FlowSpec, NodeSpec
from vfcore.runtime import LocalLayout, NodeLayout

__all__ = ["EdgeCounts", "EdgeView", "LiveNode", "Replica", "RunState", "Voice"]


@dataclass(frozen=True, slots=True)
class EdgeCounts:
    """What one buffer of an edge has seen, in items: written into it, settled by its
    reader (evicted ones included), evicted (REALTIME), redelivered after a crash, and
    how many times a writer waited for room (backpressure)."""

    written: int = 0
    settled: int = 0
    evicted: int = 0
    redelivered: int = 0
    waits: int = 0


class EdgeView(Protocol):
    """One buffer of an edge as the run observes it (a ring; a broker consumer).

    ``unobserved``: why its backlog cannot be read right now (None when it can):
    an unobservable backlog is unknown, never zero.
    """

    keep: int
    unobserved: str | None

    def counts(self) -> EdgeCounts: ...

    def pending(self) -> int: ...

    def unsettled(self) -> int: ...


@dataclass(slots=True)
class Replica:
    """One replica slot and the process running it (if any)."""

    node: str
    index: int
    slot: int
    pod: str  # its name, e.g. "detector/0"
    cfg: Any  # what its process is started with (the transport's plan)
    proc: Any = None
    conn: Any = None
    state: str = "idle"  # idle starting running done failed aborted retiring
    restarts: int = 0
    pids: list[int] = field(default_factory=list)
    told: bool = False  # retiring: the transport has told it to stop


@dataclass(slots=True)
class LiveNode:
    """One node during the run: its layout, how many replicas run, its input edges."""

    spec: NodeSpec
    layout: NodeLayout
    slots: tuple[int, ...] = ()
    active: int = 0
    complete: bool = False
    peak: int = 0
    in_edges: list[list[EdgeView]] = field(default_factory=list)  # [parent][owner]
    wakers: list[Any] = field(default_factory=list)  # [owner]: wake a waiting replica
    latency: dict[int, int] = field(default_factory=dict)  # consumers: merged histograms
    latency_max_ns: int = 0

    def __post_init__(self) -> None:
        self.slots = self.layout.slots

    @property
    def name(self) -> str:
        return self.spec.name

    def inputs_of(self, replica: int) -> list[EdgeView]:
        """The buffers one replica reads, in parent order."""
        owner = self.layout.pods[replica].owner
        return [per_owner[owner] for per_owner in self.in_edges]

    def all_inputs(self) -> list[EdgeView]:
        return [view for per_owner in self.in_edges for view in per_owner]

    def backlog(self) -> int:
        return sum(view.unsettled() for view in self.all_inputs())


class Voice:
    """How the run speaks to the user: the log sink, the live table's console, or stderr."""

    def __init__(self, sink: Callable[[int, str], None] | None) -> None:
        self.sink = sink
        self.console: Any = None  # set while the live table shows
        self.warnings: list[str] = []

    def say(self, level: int, text: str) -> None:
        if self.sink is not None:
            self.sink(level, text)
        elif self.console is not None:
            self.console.print(text, markup=False, highlight=False)
        else:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def warn(self, text: str) -> None:
        self.warnings.append(text)
        self.say(logging.WARNING, f"warning: {text}")


@dataclass(slots=True)
class RunState:
    """Everything a run's parts share once its buffers exist."""

    spec: FlowSpec
    opts: RunOptions
    layout: LocalLayout
    voice: Voice
    nodes: dict[str, LiveNode]
    replicas: dict[int, Replica]  # by control slot
    edges: dict[tuple[str, str], list[EdgeView]]  # (parent, child) → the child's buffers
    children: dict[str, tuple[str, ...]]
    ctl: Any  # the control fields (u64), per CTL and SLOT
    t0: float = 0.0  # monotonic start of the run

    def field_sum(self, node: LiveNode, f: int) -> int:
        """A per-replica control field summed over a node's slots."""
        ctl = self.ctl
        return int(sum(ctl[slot_base(s) + f] for s in node.slots))

    def node_sum(self, node: LiveNode, f: int) -> int:
        return self.field_sum(node, f)
