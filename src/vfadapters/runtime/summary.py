"""What a local run reports: per node, per edge, and for the whole run.

:class:`RunSummary` is what :func:`vfadapters.local.run` returns and what
``vf run --json`` prints (its ``to_dict()``, a superset of the ``run`` document
in docs/cli.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from vfadapters.runtime.latency import Latency

__all__ = ["EdgeSummary", "NodeSummary", "RunStatus", "RunSummary", "ScalingEvent", "Stall"]

RunStatus = Literal["completed", "failed", "stopped"]


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """One node's counters, summed over its replicas.

    ``processed``: messages produced (producers), handled (processors and
    consumers), or groups handled (joins). ``errors``: exceptions raised by the
    node's code (every attempt). ``dead_letters``: messages given up on.
    ``evicted``: messages evicted from the node's inputs (REALTIME).
    ``redelivered``: in-flight messages handed again to a restarted replica (an
    upper bound on the duplicates it may have emitted). ``join_dropped``:
    messages a join dropped (timeout, eviction, duplicate, end of stream).
    ``returned_none``: producers, ``next()`` calls that returned None ("nothing now").
    ``latency``: consumers, the end-to-end latency of what they consumed, from
    the producer's emit to the call of ``consume()`` (:mod:`vfadapters.runtime.latency`);
    None for other nodes and for a consumer that consumed nothing.
    """

    name: str
    kind: str
    replicas: int
    processed: int = 0
    received: int = 0
    errors: int = 0
    retries: int = 0
    dead_letters: int = 0
    evicted: int = 0
    redelivered: int = 0
    restarts: int = 0
    join_dropped: int = 0
    filtered: int = 0
    returned_none: int = 0
    backlog: int = 0
    max_replicas: int = 0
    devices: dict[str, str] = field(default_factory=dict)
    latency: Latency | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "replicas": self.replicas,
            "max_replicas_seen": self.max_replicas,
            "processed": self.processed,
            "received": self.received,
            "errors": self.errors,
            "retries": self.retries,
            "dead_letters": self.dead_letters,
            "evicted": self.evicted,
            "redelivered": self.redelivered,
            "restarts": self.restarts,
            "join_dropped": self.join_dropped,
            "filtered": self.filtered,
            "returned_none": self.returned_none,
            "backlog": self.backlog,
            "devices": dict(self.devices),
            "latency": None if self.latency is None else self.latency.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class EdgeSummary:
    """One edge ``parent → child``: messages written into it, taken, evicted.

    ``backpressure_waits``: how many times a writer found the edge's buffers
    full and waited (BATCH backpressure at work). ``realtime_keep``: REALTIME,
    how many of the freshest messages each of the child's buffers on the edge
    keeps waiting (None in BATCH).
    """

    parent: str
    child: str
    written: int
    delivered: int
    evicted: int
    redelivered: int
    backpressure_waits: int = 0
    realtime_keep: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "parent": self.parent,
            "child": self.child,
            "written": self.written,
            "delivered": self.delivered,
            "evicted": self.evicted,
            "redelivered": self.redelivered,
            "backpressure_waits": self.backpressure_waits,
            "realtime_keep": self.realtime_keep,
        }


@dataclass(frozen=True, slots=True)
class ScalingEvent:
    """An autoscaling change: when (seconds into the run), which node, why."""

    at_s: float
    node: str
    replicas_from: int
    replicas_to: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "at_s": round(self.at_s, 3),
            "node": self.node,
            "from": self.replicas_from,
            "to": self.replicas_to,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Stall:
    """A node that made no progress for at least ``stall_warning_s`` while it should have.

    A producer should always progress (it is the source); another node only
    while messages wait for it. Example: the threshold is 10 s and producer
    ``src`` returns None from its first call on: at 10.0 s into the run a
    warning names it, and if it never emits, the summary holds
    ``Stall(node="src", at_s=0.0, duration_s=<run time>, resumed=False, detail=…)``.
    ``at_s``: seconds into the run of its last progress; ``duration_s``: how long
    it went without (until it progressed again, ended, or the run ended);
    ``resumed``: whether it progressed again.
    """

    node: str
    at_s: float
    duration_s: float
    resumed: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "at_s": round(self.at_s, 3),
            "duration_s": round(self.duration_s, 3),
            "resumed": self.resumed,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The outcome of a local run.

    ``status``: ``completed`` (every consumer saw the end of the stream),
    ``stopped`` (a stop was requested: SIGINT/SIGTERM), or ``failed`` (``error``
    says why). ``dead_letters`` counts the entries this run appended to
    ``dead_letter_path`` (``None`` when it wrote none). ``stalls``: nodes that
    made no progress for ``stall_warning_s`` seconds (see :class:`Stall`).
    ``latency``: the end-to-end latency over every consumer (None when none
    consumed anything). ``books``: the run's books
    (:func:`vfcore.runtime.delivery.check_books`): every edge delivered what
    was written to it and every node accounted for what it received; a BATCH
    run whose books do not balance is ``failed``, never ``completed``.
    """

    flow: str
    flow_type: str
    status: RunStatus
    duration_s: float
    nodes: dict[str, NodeSummary]
    edges: tuple[EdgeSummary, ...] = ()
    dead_letters: int = 0
    dead_letter_path: str | None = None
    error: str | None = None
    warnings: tuple[str, ...] = ()
    gpu: dict[str, Any] | None = None
    scaling: tuple[ScalingEvent, ...] = ()
    stop: dict[str, Any] | None = None
    pids: tuple[int, ...] = ()
    stalls: tuple[Stall, ...] = ()
    stall_warning_s: float | None = None
    latency: Latency | None = None
    transport: dict[str, Any] | None = None  # vf run --broker: the broker, run id, duplicates
    books: Any = None  # vfcore.runtime.delivery.Books: whether every count balances

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def redelivered(self) -> int:
        return sum(n.redelivered for n in self.nodes.values())

    @property
    def evicted(self) -> int:
        return sum(n.evicted for n in self.nodes.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": {"name": self.flow, "flow_type": self.flow_type},
            "status": self.status,
            "duration_s": round(self.duration_s, 3),
            "nodes": {name: n.to_dict() for name, n in self.nodes.items()},
            "edges": [e.to_dict() for e in self.edges],
            "dead_letters": self.dead_letters,
            "dead_letter_path": self.dead_letter_path,
            "evicted": self.evicted,
            "redelivered": self.redelivered,
            "error": self.error,
            "warnings": list(self.warnings),
            "gpu": self.gpu,
            "scaling": [e.to_dict() for e in self.scaling],
            "stop": self.stop,
            "stall_warning_s": self.stall_warning_s,
            "stalls": [s.to_dict() for s in self.stalls],
            "latency": None if self.latency is None else self.latency.to_dict(),
            "transport": self.transport or {"kind": "local"},
            "books": None if self.books is None else self.books.to_dict(),
        }
