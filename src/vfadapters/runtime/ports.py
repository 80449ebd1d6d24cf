"""The protocols between the one node runtime and a transport.

:class:`vfadapters.runtime.worker.Worker` runs every node (producer, one
parent, join) the same way over any transport; a transport gives it four kinds
of port and decides nothing a node's semantics depend on:

* :class:`InputPort` — one per parent: ``claim()`` a :class:`Batch` (an input
  record or message), ``settle()`` it once every output it caused is stored,
  with the :class:`Tally` of what the node did with it (so the counters are
  kept exactly once per input, whatever crashes happen);
* :class:`Outlet` — one per buffer of an output edge (one, or one per
  partition): ``write()`` a chunk of envelopes under an :class:`OutputKey`
  that names exactly the input positions it carries the outputs of
  (:mod:`vfcore.runtime.delivery`); a transport drops a chunk it already
  stored for that key (and says so);
* :class:`Control` — the run's voice to the replica: stop producing, abort,
  retired (not active), and the live counters the run's table reads;
* :class:`DeadLetterSink` — where an item the node gave up on goes, as one
  :class:`~vfadapters.runtime.letters.DeadLetter` record for both transports.

Envelopes are tuples ``(trace_id, event_ts_ms, metadata or None, payload,
emitted_ns)``; a transport never looks inside one (it moves records made by
:mod:`vfadapters.runtime.codec`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from vfadapters.runtime.columns import Columns
from vfadapters.runtime.letters import DeadLetter
from vfcore.runtime import Origin

__all__ = [
    "Batch",
    "Control",
    "DeadLetterSink",
    "Envelope",
    "InputPort",
    "LetterNotWritten",
    "Outlet",
    "OutputKey",
    "RecordRefused",
    "Tally",
]

Envelope = tuple[Any, ...]


@dataclass(slots=True)
class Tally:
    """What a node did with one origin (an input batch, a producer's segment, a join group).

    The transport keeps it with the settlement, exactly once per origin: the
    shared-memory transport in the same atomic step as the settle, the broker
    as a ledger entry named after the origin (:func:`vfcore.runtime.delivery.ledger_id`).
    Field meanings: :class:`vfcore.runtime.delivery.NodeTally`.
    """

    received: int = 0
    produced: int = 0
    outputs: int = 0
    filtered: int = 0
    dead_letters: int = 0
    grouped: int = 0
    groups: int = 0
    join_dropped: int = 0
    duplicates: int = 0
    rejected: int = 0
    emitted: dict[str, int] = field(default_factory=dict)
    unroutable: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in (
            "received",
            "produced",
            "outputs",
            "filtered",
            "dead_letters",
            "grouped",
            "groups",
            "join_dropped",
            "duplicates",
            "rejected",
        ):
            value = getattr(self, name)
            if value:
                out[name] = value
        if self.emitted:
            out["emitted"] = dict(self.emitted)
        if self.unroutable:
            out["unroutable"] = dict(self.unroutable)
        return out


class Batch(Protocol):
    """A claimed input: a ring record or a NATS message holding ``count`` envelopes.

    ``origin``: what names it (:class:`vfcore.runtime.delivery.InputOrigin`);
    ``redelivered``: it was handed out before (its first claimant died, or its
    ack wait ran out), so some of its outputs may already be stored;
    ``outstanding``: joins, halves not yet in an emitted or dropped group.
    """

    count: int
    redelivered: bool
    outstanding: int
    settled: bool
    tally: Tally | None  # joins: what became of its halves, settled with it

    @property
    def origin(self) -> Origin: ...

    def envelopes(self) -> Columns: ...


class InputPort(Protocol):
    """One parent's input to this replica (a ring, or a durable pull consumer)."""

    parent: str

    def claim(self) -> Batch | Literal[False] | None:
        """The next batch; None when there is none now; False at the end of the stream."""

    def settle(self, batches: Sequence[Batch], tally: Tally | None) -> None:
        """Done with ``batches``: every output they caused has been written."""

    def chunking(self, batch: Batch, proposed: Sequence[int]) -> tuple[int, ...]:
        """How ``batch``'s outputs are cut per output edge: ``proposed`` on a first
        attempt, what the first attempt recorded on a redelivery."""

    def already_done(self, batch: Batch) -> bool:
        """Whether a redelivered batch was finished (settled with its tally) before."""

    def wait(self, timeout_s: float) -> None:
        """Until something may have arrived (a doorbell, or a fetch that waited)."""

    def wake(self) -> None:
        """At the end of the stream: let a sibling replica waiting on this input look."""


@dataclass(frozen=True, slots=True)
class OutputKey:
    """What a written chunk carries the outputs of.

    ``origin``, ``chunk`` and ``part``: :func:`vfcore.runtime.delivery.output_id`;
    ``index``: how many chunks this origin wrote to the same outlet before
    (a redelivered batch skips as many as its first attempt recorded);
    ``batch``: the claimed input (None for producers); ``groups``: joins, the
    origin of each envelope (one group each); ``positions``: producers, each
    envelope's item number.
    """

    origin: Origin | None
    chunk: int = 0
    part: int = 0
    index: int = 0
    batch: Any = None
    groups: tuple[Origin, ...] = ()  # joins: GroupOrigin each
    positions: Sequence[int] = ()


class Outlet(Protocol):
    """One buffer of an output edge (one per partition of a partitioned child)."""

    def write(self, envelopes: Sequence[Envelope], key: OutputKey) -> int:
        """Store ``envelopes``; how many were new (the rest were already stored for ``key``)."""


class Control(Protocol):
    """The run's flags and this replica's live counters (``ctl``: u64 fields, ``base``: its slot)."""

    ctl: Any
    base: int

    def stop_requested(self) -> bool: ...

    def aborting(self) -> bool: ...

    def active(self) -> bool: ...


class RecordRefused(ValueError):
    """An input record its transport refuses to decode; ``reason`` is the dead letter's
    (``record-unauthenticated``: its seal does not verify under the run's key)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class LetterNotWritten(Exception):
    """A dead letter could not be stored (a full disk, a failing server).

    The replica fails, naming it (phase ``dead-letter``); the batch that held the
    item stays unsettled, so the item is not lost: a later life reads it again.
    """


class DeadLetterSink(Protocol):
    """Where given-up items go; ``put`` of a letter id already stored stores nothing.

    ``put`` raises :class:`LetterNotWritten` when the letter could not be stored.
    """

    def put(self, letter: DeadLetter, envelope: Envelope | None) -> None: ...
