"""Exactly-once delivery as data: what an output is named after, how outputs are cut, the books.

Both transports (shared-memory rings and NATS JetStream) run one node runtime;
this module holds the decisions that make a BATCH run lose nothing and
duplicate nothing when workers die at any instant. docs/broker.md ("Exactly
once") gives the proof; in short:

* **Every output names the items it carries.** An item is caused by exactly one
  *origin*: a position of an input message (:class:`InputOrigin`: the parent,
  the message's sequence in the parent's stream or buffer), a position of a
  producer's *segment* (:class:`SegmentOrigin`: a run of consecutive items
  whose boundaries are stored before any of them is written), or a join group
  (:class:`GroupOrigin`: its trace id). The outputs of one origin toward one
  edge and partition are cut into *chunks* of consecutive input positions
  (chunk ``k`` covers positions ``k·B … (k+1)·B − 1``, ``B`` from
  :func:`batch_limit`, recorded with the origin so that a redelivery cuts the
  same way), and a chunk too large in bytes into *parts* ``j``. So
  :func:`output_id` names exactly which input positions a message holds the
  outputs of, and a redelivered input produces the same ids for the same items.
* **The books** (:func:`check_books`): counters each kept once per origin
  (:class:`NodeTally`, :class:`EdgeTally`) must balance at the end of a run —
  every edge delivers what it was written, every node accounts for each item it
  received. A run whose books do not balance never says ``completed``.

Nothing here reads a clock or does I/O; the adapters carry it out.

>>> output_id("work-abc", "sink-def", 0, InputOrigin("src-123", 42), 0, 0)
'o.work-abc.sink-def.0.i.src-123.42.0.0'
>>> batch_limit(shared=True, cost_ns=0, batch_max=1024, target_s=0.002)
8
>>> batch_limit(shared=True, cost_ns=100_000, batch_max=1024, target_s=0.002)
20
>>> batch_limit(shared=False, cost_ns=100_000, batch_max=1024, target_s=0.002)
1024
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from vfcore.errors import ERROR, Finding
from vfcore.flow.spec import REALTIME, FlowSpec

__all__ = [
    "ONE_CONSUMER_TARGET_S",
    "SHARED_START_BATCH",
    "Books",
    "EdgeTally",
    "GroupOrigin",
    "InputOrigin",
    "NodeTally",
    "Origin",
    "SegmentOrigin",
    "batch_limit",
    "check_books",
    "ledger_id",
    "letter_id",
    "output_id",
    "trace_digest",
]

#: Toward replicas that share work, chunks cover this many input positions until
#: the child has measured what one item costs it (then about ``target_s`` of work).
SHARED_START_BATCH: Final[int] = 8


def trace_digest(trace_id: object) -> str:
    """A short, stable token for a trace id (any value): 26 base-32 characters.

    >>> trace_digest("cam:7") == trace_digest("cam:7"), len(trace_digest("cam:7"))
    (True, 26)
    """
    text = trace_id if isinstance(trace_id, str) else repr(trace_id)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    return base64.b32encode(digest).decode("ascii").lower().rstrip("=")


@dataclass(frozen=True, slots=True)
class InputOrigin:
    """Outputs of an input message: ``parent`` (its token), ``seq`` (its sequence there)."""

    parent: str
    seq: int

    @property
    def text(self) -> str:
        return f"i.{self.parent}.{self.seq}"


@dataclass(frozen=True, slots=True)
class SegmentOrigin:
    """Outputs of a producer's segment starting at item ``start`` (replica ``replica``)."""

    replica: int
    start: int

    @property
    def text(self) -> str:
        return f"s.{self.replica}.{self.start}"


@dataclass(frozen=True, slots=True)
class GroupOrigin:
    """The output of a join group (its trace id)."""

    trace_id: Any

    @property
    def text(self) -> str:
        return f"g.{trace_digest(self.trace_id)}"


Origin = InputOrigin | SegmentOrigin | GroupOrigin


def output_id(node: str, child: str, partition: int, origin: Origin, chunk: int, part: int) -> str:
    """The id of the message holding chunk ``chunk`` (part ``part``) of ``origin``'s
    outputs toward ``child``'s ``partition`` (``node``/``child``: their tokens)."""
    return f"o.{node}.{child}.{partition}.{origin.text}.{chunk}.{part}"


def ledger_id(node: str, origin: Origin) -> str:
    """The id of the ledger entry counting what ``node`` did with ``origin`` (once)."""
    return f"l.{node}.{origin.text}"


def letter_id(node: str, origin: Origin, position: int, reason: str) -> str:
    """The id of the dead letter of item ``position`` of ``origin`` at ``node``."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in reason)[:40]
    return f"d.{node}.{origin.text}.{position}.{safe}"


#: Toward a child that does not share its input: at most this much of its work a chunk.
ONE_CONSUMER_TARGET_S: Final = 5.0


def batch_limit(
    *,
    shared: bool,
    cost_ns: int,
    batch_max: int,
    target_s: float,
    keep: int | None = None,
) -> int:
    """How many input positions one output chunk covers toward an edge.

    Toward replicas that *share* work (competing, or a node that may
    autoscale), and in REALTIME flows (``keep`` given: a child should work on
    fresh items, not on a long batch of stale ones): about ``target_s`` of the
    child's work, from its measured cost per item (``cost_ns``; 0 = not
    measured yet: :data:`SHARED_START_BATCH`), so that a free replica finds
    work; otherwise ``batch_max`` (one chunk per input message in practice),
    but no more than :data:`ONE_CONSUMER_TARGET_S` of the child's work once
    its cost is known: a message is acknowledged well within a broker's ack
    wait (30 s), however slow the child and however large ``batch_max``.
    REALTIME: at most ``keep`` (a buffer keeps that many). Always within
    ``[1, batch_max]``.

    Worked example: a child taking 0.1 ms per item and ``target_s`` 2 ms gets
    chunks of 20 items when it shares work, ``batch_max`` when it does not; one
    taking 50 ms gets chunks of 1, or 100 (5 s) when it does not share.
    """
    top = max(1, batch_max if keep is None else min(batch_max, keep))
    if not shared and keep is None:
        if cost_ns <= 0:
            return top
        return max(1, min(top, int(ONE_CONSUMER_TARGET_S * 1e9 / cost_ns)))
    if cost_ns <= 0:
        return max(1, min(top, SHARED_START_BATCH))
    return max(1, min(top, int(target_s * 1e9 / cost_ns)))


# -- the books -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeTally:
    """What one node did, each origin counted once (summed over its replicas).

    ``received``: items taken from each parent (join halves included);
    ``produced``: producers, items ``next()`` returned; ``outputs``: items (or
    join groups) the node emitted, before routing; ``filtered``: calls that
    returned None; ``dead_letters``: items (groups, halves) given up on — raised
    after retries, or could not be decoded; ``grouped``: join halves that went
    into a group; ``join_dropped``: halves a join policy dropped without a
    letter; ``duplicates``: redelivered join halves whose group had already
    been emitted; ``rejected``: records on an input edge that no writer of the
    run made (they cannot be decoded: each is one dead letter, and is not counted
    as received); ``emitted``: items written to each child; ``unroutable``:
    items that could not be routed to a partitioned child (dead-lettered);
    ``span``: a producer's, how far its replicas went through their sources (the
    sum of their last positions; None: not observed) — ``produced`` must equal it,
    or a restart skipped (or repeated) items of the source.
    """

    node: str
    kind: str
    received: Mapping[str, int] = field(default_factory=dict)
    produced: int = 0
    outputs: int = 0
    filtered: int = 0
    dead_letters: int = 0
    grouped: int = 0
    groups: int = 0
    join_dropped: int = 0
    duplicates: int = 0
    rejected: int = 0
    emitted: Mapping[str, int] = field(default_factory=dict)
    unroutable: Mapping[str, int] = field(default_factory=dict)
    span: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "kind": self.kind,
            "received": dict(sorted(self.received.items())),
            "produced": self.produced,
            "outputs": self.outputs,
            "filtered": self.filtered,
            "dead_letters": self.dead_letters,
            "grouped": self.grouped,
            "groups": self.groups,
            "join_dropped": self.join_dropped,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "emitted": dict(sorted(self.emitted.items())),
            "unroutable": dict(sorted(self.unroutable.items())),
            "span": self.span,
        }


@dataclass(frozen=True, slots=True)
class EdgeTally:
    """One edge at the end: ``pending`` items still waiting on it (None: not observable);
    ``evicted``: REALTIME drops."""

    parent: str
    child: str
    pending: int | None = 0
    evicted: int = 0


@dataclass(frozen=True, slots=True)
class Books:
    """The verdict of :func:`check_books`: ``balanced`` and each imbalance with its numbers."""

    balanced: bool
    problems: tuple[Finding, ...] = ()
    checked: int = 0  # how many equations were checked

    def to_dict(self) -> dict[str, Any]:
        return {
            "balanced": self.balanced,
            "checked": self.checked,
            "problems": [p.to_dict() for p in self.problems],
        }

    @property
    def summary(self) -> str:
        if self.balanced:
            return f"books balance ({self.checked} equations)"
        return "; ".join(p.message for p in self.problems[:5]) + (
            f" (and {len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        )


def _problem(subject: str, message: str, hint: str) -> Finding:
    return Finding("books-unbalanced", ERROR, subject, message, hint)


_HINT_EDGE = (
    "an item was lost or duplicated on this edge: keep the run's streams (--keep-streams) "
    "and report it with the run document"
)
_HINT_NODE = "the node's counters disagree: report it with the run document"


def check_books(
    spec: FlowSpec,
    nodes: Mapping[str, NodeTally],
    edges: Sequence[EdgeTally] = (),
    *,
    drained: bool = True,
) -> Books:
    """Check that a run's counters balance; every imbalance as a ``books-unbalanced`` finding.

    The equations (``drained``: the run ended at the end of its streams, so
    nothing may still wait on a BATCH edge):

    * every edge ``p → c``: ``p.emitted[c] = c.received[p] + evicted + pending``;
    * a producer: ``produced = outputs``; every node with children, for each
      child ``c``: ``emitted[c] + unroutable[c] = outputs``;
    * a one-parent processor or consumer: ``received = outputs + filtered +
      dead_letters`` (a consumer's outputs are the items it consumed);
    * a join: ``received = grouped + join_dropped + (dead-lettered halves)``,
      ``groups = outputs + filtered + (dead-lettered groups)`` — the two letter
      counts add up to ``dead_letters`` (a redelivered half whose group was
      emitted before a crash is one of ``grouped`` already; ``duplicates`` counts
      it for the record).

    REALTIME runs drop by design; their edges are checked with the drops, and
    ``pending`` may be unknown (None: that edge is not checked).

    >>> from vfcore import FlowSpec, NodeSpec
    >>> spec = FlowSpec("f", "batch", (NodeSpec("s", "producer"),
    ...                                NodeSpec("k", "consumer", ("s",))))
    >>> books = check_books(spec, {
    ...     "s": NodeTally("s", "producer", produced=5, outputs=5, emitted={"k": 5}),
    ...     "k": NodeTally("k", "consumer", received={"s": 6}, outputs=6)})
    >>> books.balanced, books.problems[0].message
    (False, 'edge s → k: 5 written, 6 delivered, 0 evicted, 0 pending')
    """
    problems: list[Finding] = []
    checked = 0
    realtime = spec.flow_type == REALTIME
    pending_of = {(e.parent, e.child): e for e in edges}
    for node in spec.nodes:
        tally = nodes.get(node.name)
        if tally is None:
            problems.append(
                _problem(node.name, f"node {node.name}: no counters", "report it with the run")
            )
            continue
        for parent in node.parents:
            ptally = nodes.get(parent)
            if ptally is None:
                continue
            edge = pending_of.get((parent, node.name), EdgeTally(parent, node.name))
            written = int(ptally.emitted.get(node.name, 0))
            delivered = int(tally.received.get(parent, 0))
            if edge.pending is None:
                continue
            pending = edge.pending
            if not realtime and drained and pending:
                problems.append(
                    _problem(
                        node.name,
                        f"edge {parent} → {node.name}: {pending} item(s) still pending at the "
                        "end of the stream",
                        _HINT_EDGE,
                    )
                )
            checked += 1
            if written != delivered + edge.evicted + pending:
                problems.append(
                    _problem(
                        node.name,
                        f"edge {parent} → {node.name}: {written} written, {delivered} delivered, "
                        f"{edge.evicted} evicted, {pending} pending",
                        _HINT_EDGE,
                    )
                )
        problems.extend(_node_problems(node.name, node.kind, node.parents, tally, spec))
        checked += 1 + len(tally.emitted)
    return Books(not problems, tuple(problems), checked)


def _node_problems(
    name: str, kind: str, parents: Sequence[str], t: NodeTally, spec: FlowSpec
) -> list[Finding]:
    out: list[Finding] = []
    children = [n.name for n in spec.nodes if name in n.parents]
    for child in children:
        sent = int(t.emitted.get(child, 0)) + int(t.unroutable.get(child, 0))
        if sent != t.outputs:
            out.append(
                _problem(
                    name,
                    f"node {name}: {t.outputs} output(s) but {t.emitted.get(child, 0)} written to "
                    f"{child} and {t.unroutable.get(child, 0)} unroutable",
                    _HINT_NODE,
                )
            )
    received = sum(int(v) for v in t.received.values())
    letters = t.dead_letters - t.rejected  # those about items this node received
    if kind == "producer":
        if t.produced != t.outputs:
            out.append(
                _problem(
                    name,
                    f"producer {name}: {t.produced} produced but {t.outputs} output(s)",
                    _HINT_NODE,
                )
            )
        if t.span is not None and t.span != t.produced:
            out.append(
                _problem(
                    name,
                    f"producer {name}: its sources went through {t.span} item(s) but "
                    f"{t.produced} were written ({abs(t.span - t.produced)} "
                    f"{'skipped' if t.span > t.produced else 'written twice'})",
                    _HINT_NODE,
                )
            )
    elif len(parents) > 1:
        halves_lettered = received - t.grouped - t.join_dropped
        groups_lettered = t.groups - t.outputs - t.filtered
        if halves_lettered < 0 or groups_lettered < 0:
            out.append(
                _problem(
                    name,
                    f"join {name}: {received} half(s) received but {t.grouped} grouped and "
                    f"{t.join_dropped} dropped; {t.groups} group(s) but {t.outputs} output(s) "
                    f"and {t.filtered} filtered",
                    _HINT_NODE,
                )
            )
        elif halves_lettered + groups_lettered != letters:
            out.append(
                _problem(
                    name,
                    f"join {name}: {halves_lettered} half(s) and {groups_lettered} group(s) "
                    f"unaccounted for, but {letters} dead letter(s)",
                    _HINT_NODE,
                )
            )
    elif received != t.outputs + t.filtered + letters:
        out.append(
            _problem(
                name,
                f"node {name}: {received} received but {t.outputs} output(s), {t.filtered} "
                f"filtered, {letters} dead letter(s)",
                _HINT_NODE,
            )
        )
    return out
