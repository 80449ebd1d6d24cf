"""What a join takes and hands back: messages, finished groups, dropped messages, group ids.

The :class:`~vfcore.routing.joins.JoinAssembler` takes :class:`Message` s and
returns a :class:`JoinOutput` per call: finished :class:`Group` s and
:class:`Dropped` messages (each with one of :data:`DROP_REASONS`). A group's id
(:func:`group_id_of`) is a stable function of its members.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "DROP_REASONS",
    "EMPTY_OUTPUT",
    "DropReason",
    "Dropped",
    "Group",
    "JoinOutput",
    "Message",
    "group_id_of",
    "new_group",
]

DropReason = Literal["timeout", "evicted", "duplicate", "error", "stale"]
#: Why a message left a join without being emitted (``docs/joins.md``, "Reasons").
DROP_REASONS: tuple[DropReason, ...] = ("timeout", "evicted", "duplicate", "error", "stale")


@dataclass(frozen=True, slots=True)
class Message:
    """One message offered to a join.

    ``trace_id`` names the event the message belongs to (every half of one
    event carries the same one); ``event_ts_ms`` is when the event happened, in
    ms, as the producer stamped it: required in time mode, optional in trace
    mode. ``payload`` is opaque to the join.
    """

    trace_id: str
    payload: Any
    event_ts_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"trace_id": self.trace_id, "payload": self.payload, "event_ts_ms": self.event_ts_ms}


@dataclass(frozen=True, slots=True)
class Group:
    """A finished group: what the join's ``process`` (or ``consume``) receives.

    ``members`` maps every parent, in parent order, to its payload: ``None`` for
    a synchronised parent missing from a quorum group, a time-sorted tuple of
    payloads for a collected parent. ``messages`` holds the ``(parent,
    message)`` pairs behind the members (what the executor acknowledges), in
    parent order, collected samples by time. ``group_id`` is
    :func:`group_id_of` those messages (computed when read: the trace hot path
    does not pay for it). In trace mode ``trace_id`` is the members' shared
    trace id; in time mode the members come from independent sources and
    ``trace_id`` is the ``group_id``. ``missing`` names the
    synchronised parents absent from a quorum group (empty when complete).
    ``first_ts_ms`` / ``last_ts_ms`` are the earliest and latest event time of
    the synchronised members (time mode; ``None`` in trace mode).

    >>> from vfcore.flow.join_policy import JoinPolicy
    >>> from vfcore.routing.joins import JoinAssembler
    >>> a = JoinAssembler(("left", "right"), JoinPolicy())
    >>> a.offer("left", Message("t1", "L"), now_ms=0).groups
    ()
    >>> [dict(g.members) for g in a.offer("right", Message("t1", "R"), now_ms=5).groups]
    [{'left': 'L', 'right': 'R'}]
    """

    trace_id: str
    members: dict[str, Any]
    messages: tuple[tuple[str, Message], ...]
    missing: tuple[str, ...] = ()
    first_ts_ms: float | None = None
    last_ts_ms: float | None = None

    @property
    def group_id(self) -> str:
        """A stable function of the members: ``group_id_of(self.messages)``."""
        return group_id_of(self.messages)

    @property
    def complete(self) -> bool:
        """Every synchronised parent is present."""
        return not self.missing

    @property
    def span_ms(self) -> float | None:
        """``last_ts_ms - first_ts_ms`` (time mode): at most the policy's tolerance."""
        if self.first_ts_ms is None or self.last_ts_ms is None:
            return None
        return self.last_ts_ms - self.first_ts_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "trace_id": self.trace_id,
            "members": {p: list(v) if _is_sample_list(v) else v for p, v in self.members.items()},
            "messages": [{"parent": p, **m.to_dict()} for p, m in self.messages],
            "missing": list(self.missing),
            "first_ts_ms": self.first_ts_ms,
            "last_ts_ms": self.last_ts_ms,
        }


def _is_sample_list(value: object) -> bool:
    return isinstance(value, tuple)


@dataclass(frozen=True, slots=True)
class Dropped:
    """A message that left the join without being emitted, and why.

    ``reason`` is one of :data:`DROP_REASONS`; ``detail`` says what happened
    with the numbers, e.g. ``trace 't7' waited 10000 ms (timeout_ms=10000) for
    ['right']``.
    """

    parent: str
    message: Message
    reason: DropReason
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "parent": self.parent,
            "reason": self.reason,
            "detail": self.detail,
            "message": self.message.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class JoinOutput:
    """What one ``offer`` or ``expire`` call produced, in the order it happened."""

    groups: tuple[Group, ...] = ()
    dropped: tuple[Dropped, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.groups and not self.dropped

    def to_dict(self) -> dict[str, Any]:
        return {
            "groups": [g.to_dict() for g in self.groups],
            "dropped": [d.to_dict() for d in self.dropped],
        }


EMPTY_OUTPUT = JoinOutput()

_GROUP_SLOTS = Group.__dict__
_set_trace_id = _GROUP_SLOTS["trace_id"].__set__
_set_members = _GROUP_SLOTS["members"].__set__
_set_messages = _GROUP_SLOTS["messages"].__set__
_set_missing = _GROUP_SLOTS["missing"].__set__
_set_first_ts = _GROUP_SLOTS["first_ts_ms"].__set__
_set_last_ts = _GROUP_SLOTS["last_ts_ms"].__set__


def new_group(
    trace_id: str, members: dict[str, Any], messages: tuple[tuple[str, Message], ...]
) -> Group:
    """``Group(trace_id, members, messages)`` for the trace hot path.

    The same object the constructor makes, in about half the time: the frozen
    dataclass's ``__init__`` goes through ``object.__setattr__`` per field; this
    sets the slots directly. ``test_joins`` checks both agree.
    """
    group: Group = object.__new__(Group)
    _set_trace_id(group, trace_id)
    _set_members(group, members)
    _set_messages(group, messages)
    _set_missing(group, ())
    _set_first_ts(group, None)
    _set_last_ts(group, None)
    return group


# -- group ids ---------------------------------------------------------------------


def _parent_code(parent: str) -> str:
    return f"{len(parent)}:{parent}"


def _trace_code(trace_id: object) -> str:
    """A prefix-free text for a trace id; its type is part of it (7 and '7' differ)."""
    tid = "s" + trace_id if type(trace_id) is str else f"o{type(trace_id).__name__}:{trace_id!r}"
    return f"{len(tid)}:{tid}"


def _ts_code(ts: object) -> str:
    """A prefix-free text for an event time; 5 and 5.0 are the same time."""
    if ts is None:
        return "1:-"
    if (type(ts) is float or type(ts) is int) and -(2**53) < ts < 2**53:
        tsc = repr(float(ts))
    else:
        tsc = f"o{type(ts).__name__}:{ts!r}"
    return f"{len(tsc)}:{tsc}"


def _message_code(message: Message) -> str:
    return _trace_code(message.trace_id) + _ts_code(message.event_ts_ms)


def _digest(codes: Iterable[str]) -> str:
    return hashlib.blake2b("".join(codes).encode(), digest_size=16).hexdigest()


def group_id_of(messages: Iterable[tuple[str, Message]]) -> str:
    """The id of a group: a stable function of its members, whatever their order.

    The BLAKE2b-128 hex digest of the members' codes, sorted; a member's code
    is its parent, trace id (with its type) and event time (as a float), each
    length-prefixed, so different members never share a code. Payloads are not
    part of it. Stable across processes, machines and Python versions (no
    ``hash()``).

    >>> ab = [("a", Message("t1", 1)), ("b", Message("t1", 2))]
    >>> group_id_of(ab) == group_id_of(reversed(ab))
    True
    >>> group_id_of(ab)
    '7507edd21994f5826034051714c95337'
    """
    return _digest(sorted(_parent_code(p) + _message_code(m) for p, m in messages))
