"""What the parts of a local run share: its nodes, replicas, buffers, control fields and voice.

The coordinator (:mod:`vfadapters.local.executor`) builds one :class:`RunState`
from the run's :class:`~vfcore.runtime.LocalLayout`; supervision, progress and
autoscaling read and update it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vfadapters.local.config import WorkerConfig, slot_base
from vfadapters.local.options import RunOptions
from vfadapters.local.ring import Ring
from vfcore import FlowSpec, NodeSpec
from vfcore.runtime.layout import LocalLayout, NodeLayout

__all__ = ["LiveNode", "Replica", "RunState", "Voice"]


@dataclass(slots=True)
class Replica:
    """One replica slot and the process running it (if any)."""

    node: str
    index: int
    slot: int
    pod: str  # its name, e.g. "detector/0"
    cfg: WorkerConfig
    proc: Any = None
    conn: Any = None
    state: str = "idle"  # idle starting running done failed aborted retiring
    restarts: int = 0
    pids: list[int] = field(default_factory=list)


@dataclass(slots=True)
class LiveNode:
    """One node during the run: its layout, how many replicas run, its input buffers."""

    spec: NodeSpec
    layout: NodeLayout
    slots: tuple[int, ...] = ()
    active: int = 0
    complete: bool = False
    peak: int = 0
    in_rings: list[list[Any]] = field(default_factory=list)  # [parent][owner]: rings
    doorbells: list[Any] = field(default_factory=list)  # [owner]
    latency: dict[int, int] = field(default_factory=dict)  # consumers: merged histograms
    latency_max_ns: int = 0

    def __post_init__(self) -> None:
        self.slots = self.layout.slots

    @property
    def name(self) -> str:
        return self.spec.name

    def inputs_of(self, replica: int) -> list[Ring]:
        """The rings one replica reads, in parent order."""
        owner = self.layout.pods[replica].owner
        return [per_owner[owner] for per_owner in self.in_rings]

    def all_inputs(self) -> list[Ring]:
        return [ring for per_owner in self.in_rings for ring in per_owner]

    def backlog(self) -> int:
        return sum(ring.unsettled() for ring in self.all_inputs())


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
    rings: dict[tuple[str, str], list[Any]]  # (parent, child) → the child's rings on it
    children: dict[str, tuple[str, ...]]
    ctl: Any  # the control segment as u64 fields
    t0: float = 0.0  # monotonic start of the run

    def field_sum(self, node: LiveNode, f: int) -> int:
        """A per-replica control field summed over a node's slots."""
        ctl = self.ctl
        return int(sum(ctl[slot_base(s) + f] for s in node.slots))
