"""Join policies: how a node with several parents groups their messages.

A *join* is a processor (or consumer) with two or more parents. Its
:class:`JoinPolicy` says how messages from the parents are grouped:

- ``mode="trace"``: one group per trace id; complete when every parent has
  delivered its half.
- ``mode="time"``: messages from independent sources whose event timestamps lie
  within ``tolerance_ms`` of each other; ``quorum`` lets a group with k of the N
  synchronised parents go out after the timeout; ``collect`` names parents whose
  every sample inside a window is attached as a list.

What happens when halves are missing after ``timeout_ms`` is ``missing``:
``drop`` (count and discard), ``error`` (dead-letter) or ``wait`` (no timeout at
all). Without a policy a join uses :meth:`JoinPolicy.default_for` its flow type:
BATCH waits forever, REALTIME drops after 10 s.

Every inconsistency is reported at construction, with rule
``invalid-join-policy`` and a fix; the checks that need the node's parents
(quorum above the synchronised parents, collect windows naming non-parents)
run in :func:`vfcore.validate`.

:class:`JoinAssembler` is the policy at work: a pure state machine (time is an
argument, never read from a clock) that takes offered messages and hands back
finished groups and dropped messages. ``docs/joins.md`` states its rules with
worked examples; the short form:

- every offered message ends in exactly one emitted :class:`Group`, or in
  ``dropped`` with a reason (:data:`DROP_REASONS`), or is still pending and
  listed by :meth:`JoinAssembler.pending` — never lost, never emitted twice;
- a time group's synchronised members span at most ``tolerance_ms``;
- at most ``max_pending`` groups wait; the oldest is evicted beyond that;
- the same calls give the same outputs, and a group's id is a stable function
  of its members (:func:`group_id_of`).
"""

from __future__ import annotations

import hashlib
import math
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.errors import ERROR, InvalidFlowError, InvalidInputError, Issue

__all__ = [
    "DROP_REASONS",
    "DropReason",
    "Dropped",
    "Group",
    "JoinAssembler",
    "JoinMode",
    "JoinOutput",
    "JoinPolicy",
    "Message",
    "MissingPolicy",
    "group_id_of",
]

JoinMode = Literal["trace", "time"]
MissingPolicy = Literal["drop", "wait", "error"]

_MODES = ("trace", "time")
_MISSING = ("drop", "wait", "error")
REALTIME_DEFAULT_TIMEOUT_MS = 10_000
RULE = "invalid-join-policy"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _positive(value: object) -> bool:
    return _is_number(value) and math.isfinite(float(value)) and float(value) > 0  # type: ignore[arg-type]


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _normalise_collect(collect: object) -> tuple[tuple[str, Any], ...] | str | None:
    """Mapping or pairs → sorted pairs; a string describing the problem if malformed."""
    if collect is None:
        return None
    items: Iterable[Any]
    if isinstance(collect, Mapping):
        items = collect.items()
    elif isinstance(collect, list | tuple):
        items = collect
    else:
        return f"collect must map parent names to windows in ms, got {type(collect).__name__}"
    pairs: list[tuple[str, Any]] = []
    for item in items:
        if not (isinstance(item, list | tuple) and len(item) == 2):
            return f"collect entries must be (parent, window_ms) pairs, got {item!r}"
        parent, window = item
        if not isinstance(parent, str) or not parent:
            return f"collect names parents by their non-empty name, got {parent!r}"
        pairs.append((parent, window))
    names = [p for p, _ in pairs]
    if len(set(names)) != len(names):
        return f"collect names a parent twice: {sorted(names)}"
    return tuple(sorted(pairs))


@dataclass(frozen=True, slots=True)
class JoinPolicy:
    """How a join groups its parents' messages (validated at construction).

    >>> JoinPolicy(mode="time", tolerance_ms=40, timeout_ms=500, quorum=2).quorum
    2
    >>> JoinPolicy(mode="trace", quorum=2)
    Traceback (most recent call last):
    ...
    vfcore.errors.InvalidFlowError: invalid-join-policy: quorum=2 applies only to mode='time' ...
    """

    mode: JoinMode = "trace"
    timeout_ms: float | None = None
    missing: MissingPolicy = "drop"
    max_pending: int = 256
    tolerance_ms: float | None = None
    quorum: int | None = None
    collect: tuple[tuple[str, float], ...] | None = None

    def __post_init__(self) -> None:
        normalised = _normalise_collect(self.collect)
        problems: list[tuple[str, str]] = []
        if isinstance(normalised, str):
            problems.append((normalised, "pass collect={'parent_name': window_ms, ...}"))
        else:
            object.__setattr__(self, "collect", normalised)
        problems.extend(_policy_problems(self))
        if problems:
            raise InvalidFlowError(Issue(RULE, ERROR, None, msg, hint) for msg, hint in problems)

    @property
    def collect_windows(self) -> dict[str, float]:
        return dict(self.collect or ())

    @property
    def collected_parents(self) -> tuple[str, ...]:
        return tuple(p for p, _ in self.collect or ())

    @classmethod
    def default_for(cls, flow_type: str) -> JoinPolicy:
        """BATCH waits forever for every half; REALTIME drops after 10 s."""
        if flow_type == "realtime":
            return cls(timeout_ms=REALTIME_DEFAULT_TIMEOUT_MS, missing="drop")
        return cls(timeout_ms=None, missing="wait")

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "timeout_ms": self.timeout_ms,
            "missing": self.missing,
            "max_pending": self.max_pending,
            "tolerance_ms": self.tolerance_ms,
            "quorum": self.quorum,
            "collect": None if self.collect is None else dict(self.collect),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JoinPolicy:
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise InvalidFlowError(
                [
                    Issue(
                        RULE,
                        ERROR,
                        None,
                        f"unknown join policy field(s) {unknown}",
                        f"use only {sorted(cls.__dataclass_fields__)}",
                    )
                ]
            )
        return cls(**dict(data))

    def describe(self) -> str:
        """A short human form, e.g. ``time ±40ms, timeout 500ms → drop, quorum 2``."""
        parts: list[str] = [self.mode]
        if self.mode == "time":
            parts[0] = f"time ±{_fmt(self.tolerance_ms)}ms"
        if self.timeout_ms is None:
            parts.append("waits forever")
        else:
            parts.append(f"timeout {_fmt(self.timeout_ms)}ms → {self.missing}")
        if self.quorum is not None:
            parts.append(f"quorum {self.quorum}")
        if self.collect:
            parts.append(
                "collect " + ", ".join(f"{p} {_fmt(w)}ms" for p, w in self.collect),
            )
        return ", ".join(parts)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() else str(value)


def _policy_problems(policy: JoinPolicy) -> list[tuple[str, str]]:
    """Every inconsistency of a policy on its own, as (message, hint) pairs."""
    out: list[tuple[str, str]] = []
    mode, timeout, tolerance = policy.mode, policy.timeout_ms, policy.tolerance_ms
    if mode not in _MODES:
        out.append((f"mode={mode!r} is not a join mode", "use mode='trace' or mode='time'"))
    if policy.missing not in _MISSING:
        out.append(
            (
                f"missing={policy.missing!r} is not a missing-half policy",
                "use missing='drop', 'wait' or 'error'",
            )
        )
    if timeout is not None and not _positive(timeout):
        out.append(
            (
                f"timeout_ms={timeout!r} must be a number > 0 (or None to wait forever)",
                "give the timeout in milliseconds, e.g. timeout_ms=500",
            )
        )
    if policy.missing == "wait" and timeout is not None:
        out.append(
            (
                f"missing='wait' waits forever, yet timeout_ms={timeout!r} is set",
                "drop timeout_ms, or choose missing='drop' or 'error' for what the timeout does",
            )
        )
    if not _positive_int(policy.max_pending):
        out.append(
            (
                f"max_pending={policy.max_pending!r} must be an int >= 1",
                "bound the pending groups, e.g. max_pending=256",
            )
        )
    time_only = [
        (name, value)
        for name, value in (
            ("tolerance_ms", tolerance),
            ("quorum", policy.quorum),
            ("collect", policy.collect),
        )
        if value is not None
    ]
    if mode == "trace":
        for name, value in time_only:
            shown = dict(value) if name == "collect" and isinstance(value, tuple) else value
            out.append(
                (
                    f"{name}={shown!r} applies only to mode='time' (this policy is mode='trace')",
                    f"set mode='time' or remove {name}",
                )
            )
    if mode == "time":
        if tolerance is None or not _positive(tolerance):
            out.append(
                (
                    f"mode='time' needs tolerance_ms > 0, got {tolerance!r}",
                    "say how far apart event timestamps of one group may lie, e.g. tolerance_ms=40",
                )
            )
        if policy.quorum is not None:
            if not _positive_int(policy.quorum):
                out.append(
                    (
                        f"quorum={policy.quorum!r} must be an int >= 1",
                        "give the number of synchronised parents a partial group needs",
                    )
                )
            elif timeout is None:
                out.append(
                    (
                        f"quorum={policy.quorum} emits partial groups after the timeout, "
                        "but timeout_ms is None",
                        "set timeout_ms (e.g. 500) with missing='drop' or 'error'",
                    )
                )
        if isinstance(policy.collect, tuple):
            for parent, window in policy.collect:
                if not _positive(window):
                    out.append(
                        (
                            f"collect window for {parent!r} is {window!r}; it must be a number > 0",
                            "give each collected parent a window in ms, e.g. {'imu': 100}",
                        )
                    )
    return out


def join_policy_parent_problems(
    policy: JoinPolicy, parents: tuple[str, ...]
) -> list[tuple[str, str]]:
    """The checks that need the node's parents: collect names, quorum bounds."""
    out: list[tuple[str, str]] = []
    if policy.mode != "time":
        return out
    collected = policy.collected_parents
    strangers = sorted(set(collected) - set(parents))
    if strangers:
        out.append(
            (
                f"collect names {strangers}, which are not parents (parents: {list(parents)})",
                "name only the node's own parents in collect",
            )
        )
    synchronised = [p for p in parents if p not in collected]
    if len(parents) >= 2 and not synchronised:
        out.append(
            (
                f"every parent {list(parents)} is collected, so no parent anchors a group",
                "leave at least one parent out of collect; its messages define the groups",
            )
        )
    if (
        _positive_int(policy.quorum)
        and synchronised
        and policy.quorum is not None
        and policy.quorum > len(synchronised)
    ):
        out.append(
            (
                f"quorum={policy.quorum} exceeds the {len(synchronised)} synchronised "
                f"parent(s) {synchronised}",
                f"use a quorum between 1 and {len(synchronised)}",
            )
        )
    return out


# -- the assembler ------------------------------------------------------------------

DropReason = Literal["timeout", "evicted", "duplicate", "error", "stale"]
#: Why a message left a join without being emitted (``docs/joins.md``, "Reasons").
DROP_REASONS: tuple[DropReason, ...] = ("timeout", "evicted", "duplicate", "error", "stale")

UNKNOWN_PARENT_RULE = "unknown-join-parent"
INVALID_PARENTS_RULE = "invalid-join-parents"
INVALID_CLOCK_RULE = "invalid-join-clock"
#: How many emitted groups (trace mode) or emitted members (time mode) a join
#: remembers, so that a late redelivery is dropped as ``duplicate``.
DEFAULT_REMEMBER_EMITTED = 1024
#: How many samples a collected parent may hold before its oldest is evicted.
DEFAULT_MAX_COLLECTED = 4096

_INF = math.inf
# A pending trace group is a list: [first arrival ms, halves present, trace id,
# message per parent...]; emptied (falsy) once it leaves, so the arrival-order
# deque can skip it.
_FIRST = 0
_FILLED = 1
_TRACE = 2
_SLOT0 = 3


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


_EMPTY = JoinOutput()

_GROUP_SLOTS = Group.__dict__
_set_trace_id = _GROUP_SLOTS["trace_id"].__set__
_set_members = _GROUP_SLOTS["members"].__set__
_set_messages = _GROUP_SLOTS["messages"].__set__
_set_missing = _GROUP_SLOTS["missing"].__set__
_set_first_ts = _GROUP_SLOTS["first_ts_ms"].__set__
_set_last_ts = _GROUP_SLOTS["last_ts_ms"].__set__


def _new_group(
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


# -- the state machine -----------------------------------------------------------


class _TimeGroup:
    """A pending time group: synchronised messages by parent index, span lo..hi."""

    __slots__ = ("count", "first_ms", "hi", "lo", "messages", "seq")

    def __init__(self, seq: int, first_ms: float, size: int, lo: float, hi: float) -> None:
        self.seq = seq
        self.first_ms = first_ms
        self.messages: list[Message | None] = [None] * size
        self.count = 0
        self.lo = lo
        self.hi = hi


# A buffered sample of a collected parent: (event ts, arrival seq, message, arrival ms).
_Sample = tuple[float, int, Message, float]


def _sample_order(sample: _Sample) -> tuple[float, int]:
    return sample[0], sample[1]


def _sample_ts(sample: _Sample) -> float:
    return sample[0]


def _is_finite_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _output(groups: list[Group], dropped: list[Dropped]) -> JoinOutput:
    if not groups and not dropped:
        return _EMPTY
    return JoinOutput(tuple(groups), tuple(dropped))


class JoinAssembler:
    """Groups the messages of a join's parents by its :class:`JoinPolicy`.

    A pure state machine: :meth:`offer` takes one message and :meth:`expire`
    only advances the clock; both take the current time ``now_ms`` (a monotonic
    reading in ms; an earlier value than one already seen counts as the latest
    one) and return a :class:`JoinOutput` of finished groups and dropped
    messages. The clock moves first (groups whose timeout has passed are
    handled), then the message is placed. Rules and worked examples:
    ``docs/joins.md``.

    Trace mode, REALTIME default (10 s, then drop):

    >>> a = JoinAssembler(("left", "right"), JoinPolicy.default_for("realtime"))
    >>> a.offer("left", Message("t1", "L1"), now_ms=1_000).is_empty
    True
    >>> a.backlog_by_parent()
    {'left': 1, 'right': 0}
    >>> [(d.parent, d.reason) for d in a.expire(now_ms=11_000).dropped]
    [('left', 'timeout')]

    Time mode: 40 ms tolerance; the right frame at 1035 joins the nearer left
    frame (1033, not 1000):

    >>> t = JoinAssembler(("left", "right"), JoinPolicy(mode="time", tolerance_ms=40))
    >>> t.offer("left", Message("l0", "L0", 1000), now_ms=0).is_empty
    True
    >>> t.offer("left", Message("l1", "L1", 1033), now_ms=1).is_empty
    True
    >>> [g.members for g in t.offer("right", Message("r1", "R1", 1035), now_ms=2).groups]
    [{'left': 'L1', 'right': 'R1'}]
    """

    def __init__(
        self,
        parents: Sequence[str],
        policy: JoinPolicy,
        *,
        remember_emitted: int = DEFAULT_REMEMBER_EMITTED,
        max_collected: int = DEFAULT_MAX_COLLECTED,
    ) -> None:
        self.parents: tuple[str, ...] = _checked_parents(parents)
        if not isinstance(policy, JoinPolicy):
            raise InvalidInputError(
                RULE,
                f"policy must be a JoinPolicy, got {type(policy).__name__}",
                "pass JoinPolicy(...) or JoinPolicy.default_for(flow_type)",
            )
        for name, value, least in (
            ("remember_emitted", remember_emitted, 0),
            ("max_collected", max_collected, 1),
        ):
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= least):
                raise InvalidInputError(
                    "invalid-parameter",
                    f"{name}={value!r} must be an int >= {least}",
                    f"pass {name} as a whole number, e.g. {name}=1024",
                )
        problems = join_policy_parent_problems(policy, self.parents)
        windows = policy.collect_windows
        synchronised = tuple(i for i, p in enumerate(self.parents) if p not in windows)
        if policy.mode == "time" and not synchronised and not problems:
            problems.append(
                (
                    f"every parent {list(self.parents)} is collected, so no parent anchors a group",
                    "leave at least one parent out of collect; its messages define the groups",
                )
            )
        if problems:
            raise InvalidFlowError(Issue(RULE, ERROR, None, msg, hint) for msg, hint in problems)
        self.policy = policy
        n = len(self.parents)
        self._n = n
        self._index: dict[str, int] = {p: i for i, p in enumerate(self.parents)}
        self._is_trace = policy.mode == "trace"
        self._timeout: float | None = policy.timeout_ms
        self._missing_reason: DropReason = "error" if policy.missing == "error" else "timeout"
        self._max_pending = policy.max_pending
        self._remember = remember_emitted
        self._max_collected = max_collected
        self._now: float = -_INF
        # Emitted keys, the last `remember_emitted` of them: trace ids (trace mode),
        # (parent index, trace id) pairs (time mode).
        self._recent: set[Any] = set()
        self._recent_order: deque[Any] = deque()
        # trace mode: trace id → record, and the records in first-arrival order
        # (so also in deadline order), left ones emptied and skipped. A dict alone
        # would do, but popping its oldest key makes next(iter(d)) scan the holes.
        self._traces: dict[Any, list[Any]] = {}
        self._order: deque[list[Any]] = deque()
        self._template: list[Any] = [0.0, 1, None] + [None] * n
        # time mode
        self._tolerance: float = policy.tolerance_ms or 0.0
        self._quorum = policy.quorum
        self._windows: tuple[float | None, ...] = tuple(windows.get(p) for p in self.parents)
        self._n_sync = len(synchronised)
        self._collected = tuple(i for i in range(n) if self._windows[i] is not None)
        self._groups: dict[int, _TimeGroup] = {}
        self._where: dict[tuple[int, Any], int] = {}
        self._seq = 0
        self._newest: float | None = None
        self._samples: dict[int, list[_Sample]] = {i: [] for i in self._collected}
        # per collected parent: trace id → sample, in arrival order
        self._sample_index: dict[int, dict[Any, _Sample]] = {i: {} for i in self._collected}

    # -- public reads ------------------------------------------------------------

    @property
    def now_ms(self) -> float | None:
        """The latest time seen by :meth:`offer` or :meth:`expire` (None before any)."""
        return None if self._now == -_INF else self._now

    @property
    def pending_group_count(self) -> int:
        """How many groups wait for members (never more than ``max_pending``)."""
        return len(self._traces) if self._is_trace else len(self._groups)

    def pending(self) -> dict[str, tuple[Message, ...]]:
        """Every message still held, per parent (every parent, in parent order).

        Group halves in first-arrival order of their groups; collected samples by
        event time. With the emitted groups and the dropped messages this
        accounts for every message ever offered.
        """
        held: dict[str, list[Message]] = {p: [] for p in self.parents}
        lists = [held[p] for p in self.parents]
        if self._is_trace:
            for record in self._order:
                if not record:
                    continue
                for i in range(self._n):
                    message = record[_SLOT0 + i]
                    if message is not None:
                        lists[i].append(message)
        else:
            for group in self._groups.values():
                for i, m in enumerate(group.messages):
                    if m is not None:
                        lists[i].append(m)
            for i in self._collected:
                lists[i].extend(s[2] for s in self._samples[i])
        return {p: tuple(v) for p, v in held.items()}

    def backlog_by_parent(self) -> dict[str, int]:
        """Pending messages per parent, zeros included: who waits for counterparts.

        A join stalls ("starved") when some parents have a backlog here while
        others have none: the halves wait for parents that deliver nothing.
        """
        counts = [0] * self._n
        if self._is_trace:
            for record in self._traces.values():
                for i in range(self._n):
                    if record[_SLOT0 + i] is not None:
                        counts[i] += 1
        else:
            for group in self._groups.values():
                for i, m in enumerate(group.messages):
                    if m is not None:
                        counts[i] += 1
            for i in self._collected:
                counts[i] = len(self._samples[i])
        return dict(zip(self.parents, counts, strict=True))

    # -- the clock -------------------------------------------------------------------

    def _advance(self, now_ms: float) -> None:
        if not now_ms < _INF:
            raise InvalidInputError(
                INVALID_CLOCK_RULE,
                f"now_ms={now_ms!r} is not a finite time in milliseconds",
                "pass a monotonic clock reading in ms, e.g. time.monotonic() * 1000",
            )
        self._now = now_ms

    def _bad_clock(self, now_ms: object) -> InvalidInputError:
        return InvalidInputError(
            INVALID_CLOCK_RULE,
            f"now_ms={now_ms!r} is not a time in milliseconds",
            "pass a monotonic clock reading in ms, e.g. time.monotonic() * 1000",
        )

    def _unknown_parent(self, parent: object) -> InvalidInputError:
        return InvalidInputError(
            UNKNOWN_PARENT_RULE,
            f"{parent!r} is not a parent of this join (parents: {list(self.parents)})",
            "offer messages only under the names the assembler was built with",
        )

    def expire(self, *, now_ms: float) -> JoinOutput:
        """Advance the clock to ``now_ms`` and handle every group whose timeout passed.

        A group times out once ``now_ms - first arrival >= timeout_ms``. In time
        mode it is emitted if it has at least ``quorum`` synchronised members;
        otherwise (and always in trace mode) its messages are dropped with reason
        ``timeout`` (``missing='drop'``) or ``error`` (``missing='error'``).
        """
        if now_ms > self._now:
            self._advance(now_ms)
        elif now_ms != now_ms:
            raise self._bad_clock(now_ms)
        groups: list[Group] = []
        dropped: list[Dropped] = []
        if self._is_trace:
            if self._timeout is not None:
                self._expire_traces(dropped)
        else:
            self._expire_groups(groups, dropped)
            if self._collected:
                self._prune_samples(dropped)
        return _output(groups, dropped)

    def offer(self, parent: str, message: Message, *, now_ms: float) -> JoinOutput:
        """Advance the clock to ``now_ms``, then place ``message`` from ``parent``.

        Returns the groups this finished and the messages it dropped (timed out,
        evicted, replaced by this redelivery, or refused), in the order it
        happened. Raises :class:`~vfcore.errors.InvalidInputError`
        (``unknown-join-parent``) for a parent the join was not built with.
        """
        index = self._index.get(parent)
        if index is None:
            raise self._unknown_parent(parent)
        if now_ms > self._now:
            self._advance(now_ms)
        elif now_ms != now_ms:
            raise self._bad_clock(now_ms)
        if not self._is_trace:
            return self._offer_time(index, parent, message)

        # trace mode: the hot path, kept to a few dict operations per offer
        traces = self._traces
        dropped: list[Dropped] | None = None
        timeout = self._timeout
        if timeout is not None and traces:
            order = self._order
            head = order[0]
            while not head:  # skip groups that already left
                order.popleft()
                head = order[0]
            if self._now - head[_FIRST] >= timeout:
                dropped = []
                self._expire_traces(dropped)
        trace_id = message.trace_id
        record = traces.get(trace_id)
        if record is None:
            if trace_id in self._recent:
                dropped = dropped or []
                dropped.append(self._already_emitted(parent, message))
                return JoinOutput((), tuple(dropped))
            record = self._template.copy()
            record[_FIRST] = self._now
            record[_TRACE] = trace_id
            record[_SLOT0 + index] = message
            if self._n == 1:
                return JoinOutput(
                    (self._trace_group(trace_id, record),),
                    () if dropped is None else tuple(dropped),
                )
            traces[trace_id] = record
            order = self._order
            order.append(record)
            if len(traces) > self._max_pending:
                dropped = dropped or []
                self._evict_trace(dropped)
            elif len(order) > 2 * len(traces) + 64:
                self._order = deque(r for r in order if r)
            return _EMPTY if dropped is None else JoinOutput((), tuple(dropped))
        slot = _SLOT0 + index
        old = record[slot]
        record[slot] = message
        if old is not None:
            dropped = dropped or []
            dropped.append(
                Dropped(
                    parent,
                    old,
                    "duplicate",
                    f"replaced by a redelivered copy from {parent!r} for trace {trace_id!r}",
                )
            )
            return JoinOutput((), tuple(dropped))
        filled = record[_FILLED] + 1
        if filled < self._n:
            record[_FILLED] = filled
            return _EMPTY if dropped is None else JoinOutput((), tuple(dropped))
        del traces[trace_id]
        group = self._trace_group(trace_id, record)
        record.clear()
        return JoinOutput((group,), () if dropped is None else tuple(dropped))

    # -- trace mode ------------------------------------------------------------------

    def _trace_group(self, trace_id: Any, record: list[Any]) -> Group:
        pairs = tuple(zip(self.parents, record[_SLOT0:], strict=True))
        if self._remember:
            self._remember_emitted(trace_id)
        return _new_group(trace_id, {p: m.payload for p, m in pairs}, pairs)

    def _remember_emitted(self, key: Any) -> None:
        self._recent.add(key)
        order = self._recent_order
        order.append(key)
        if len(order) > self._remember:
            self._recent.discard(order.popleft())

    def _already_emitted(self, parent: str, message: Message) -> Dropped:
        return Dropped(
            parent,
            message,
            "duplicate",
            f"{parent!r} already delivered trace {message.trace_id!r} in a group emitted "
            f"among the last {self._remember} this join remembers",
        )

    def _expire_traces(self, dropped: list[Dropped]) -> None:
        traces, order, timeout, now = self._traces, self._order, self._timeout, self._now
        assert timeout is not None
        while traces:
            record = order[0]
            if not record:
                order.popleft()
                continue
            waited = now - record[_FIRST]
            if waited < timeout:
                return
            order.popleft()
            trace_id = record[_TRACE]
            del traces[trace_id]
            messages = record[_SLOT0:]
            record.clear()
            missing = [p for p, m in zip(self.parents, messages, strict=True) if m is None]
            detail = (
                f"trace {trace_id!r} waited {_fmt(waited)} ms "
                f"(timeout_ms={_fmt(timeout)}) for {missing}"
            )
            for p, m in zip(self.parents, messages, strict=True):
                if m is not None:
                    dropped.append(Dropped(p, m, self._missing_reason, detail))

    def _evict_trace(self, dropped: list[Dropped]) -> None:
        order = self._order
        while not order[0]:
            order.popleft()
        record = order.popleft()
        trace_id = record[_TRACE]
        del self._traces[trace_id]
        detail = (
            f"{len(self._traces) + 1} pending groups exceed max_pending={self._max_pending}; "
            f"trace {trace_id!r} (first arrival at {_fmt(record[_FIRST])} ms) is the oldest"
        )
        for p, m in zip(self.parents, record[_SLOT0:], strict=True):
            if m is not None:
                dropped.append(Dropped(p, m, "evicted", detail))
        record.clear()

    # -- time mode -------------------------------------------------------------------

    def _offer_time(self, index: int, parent: str, message: Message) -> JoinOutput:
        groups: list[Group] = []
        dropped: list[Dropped] = []
        self._expire_groups(groups, dropped)
        ts = message.event_ts_ms
        if ts is None or not _is_finite_number(ts):
            dropped.append(
                Dropped(
                    parent,
                    message,
                    "error",
                    f"a time join needs each message's event_ts_ms as a finite number; "
                    f"{parent!r} sent trace {message.trace_id!r} with event_ts_ms={ts!r}",
                )
            )
        elif self._windows[index] is None:
            self._place_synchronised(index, parent, message, ts, groups, dropped)
        else:
            self._place_sample(index, parent, message, ts, dropped)
        if self._collected:
            self._prune_samples(dropped)
        return _output(groups, dropped)

    def _place_synchronised(
        self,
        index: int,
        parent: str,
        message: Message,
        ts: float,
        groups: list[Group],
        dropped: list[Dropped],
    ) -> None:
        key = (index, message.trace_id)
        if key in self._recent:
            dropped.append(self._already_emitted(parent, message))
            return
        seq = self._where.get(key)
        if seq is not None:
            held = self._groups[seq]
            old = held.messages[index]
            assert old is not None
            dropped.append(
                Dropped(
                    parent,
                    old,
                    "duplicate",
                    f"replaced by a redelivered copy from {parent!r} for trace "
                    f"{message.trace_id!r}",
                )
            )
            if old.event_ts_ms == ts:  # the same event: replace it in place
                held.messages[index] = message
                return
            held.messages[index] = None  # a different time: withdraw, then place anew
            held.count -= 1
            del self._where[key]
            if held.count == 0:
                del self._groups[seq]
            else:
                stamps = [
                    m.event_ts_ms
                    for m in held.messages
                    if m is not None and m.event_ts_ms is not None
                ]
                held.lo, held.hi = min(stamps), max(stamps)
        if self._newest is None or ts > self._newest:
            self._newest = ts
        best = self._nearest_group(index, ts)
        if best is None:
            best = _TimeGroup(self._seq, self._now, self._n, ts, ts)
            self._seq += 1
            if self._n_sync > 1:
                self._groups[best.seq] = best
        best.messages[index] = message
        best.count += 1
        best.lo = min(best.lo, ts)
        best.hi = max(best.hi, ts)
        if best.count == self._n_sync:
            self._remove_group(best)
            groups.append(self._time_group(best))
            return
        self._where[key] = best.seq
        if len(self._groups) > self._max_pending:
            self._evict_group(dropped)

    def _nearest_group(self, index: int, ts: float) -> _TimeGroup | None:
        """The pending group lacking ``index`` that ``ts`` fits (span ≤ tolerance) and
        whose midpoint is nearest; ties go to the older group."""
        tolerance = self._tolerance
        best: _TimeGroup | None = None
        best_distance = _INF
        for group in self._groups.values():  # in creation order: older first
            if group.messages[index] is not None:
                continue
            if max(group.hi, ts) - min(group.lo, ts) > tolerance:
                continue
            distance = abs(2 * ts - (group.lo + group.hi))  # twice the distance to the midpoint
            if distance < best_distance:
                best, best_distance = group, distance
        return best

    def _remove_group(self, group: _TimeGroup) -> None:
        self._groups.pop(group.seq, None)
        for i, m in enumerate(group.messages):
            if m is not None:
                self._where.pop((i, m.trace_id), None)

    def _time_group(self, group: _TimeGroup) -> Group:
        members: dict[str, Any] = {}
        pairs: list[tuple[str, Message]] = []
        missing: list[str] = []
        for i, parent in enumerate(self.parents):
            window = self._windows[i]
            if window is None:
                m = group.messages[i]
                if m is None:
                    members[parent] = None
                    missing.append(parent)
                else:
                    members[parent] = m.payload
                    pairs.append((parent, m))
            else:
                taken = self._take_samples(i, group.hi - window, group.hi)
                members[parent] = tuple(s[2].payload for s in taken)
                pairs.extend((parent, s[2]) for s in taken)
        if self._remember:
            for parent, m in pairs:
                self._remember_emitted((self._index[parent], m.trace_id))
        return Group(group_id_of(pairs), members, tuple(pairs), tuple(missing), group.lo, group.hi)

    def _expire_groups(self, groups: list[Group], dropped: list[Dropped]) -> None:
        timeout, now, pending = self._timeout, self._now, self._groups
        if timeout is None:
            return
        while pending:
            group = next(iter(pending.values()))
            waited = now - group.first_ms
            if waited < timeout:
                return
            self._remove_group(group)
            if self._quorum is not None and group.count >= self._quorum:
                groups.append(self._time_group(group))
                continue
            missing = [
                self.parents[i]
                for i in range(self._n)
                if self._windows[i] is None and group.messages[i] is None
            ]
            detail = (
                f"group of {_fmt(group.lo)}..{_fmt(group.hi)} ms waited {_fmt(waited)} ms "
                f"(timeout_ms={_fmt(timeout)}) for {missing}"
            )
            if self._quorum is not None:
                detail += f"; {group.count} of quorum={self._quorum} synchronised parents present"
            for i, m in enumerate(group.messages):
                if m is not None:
                    dropped.append(Dropped(self.parents[i], m, self._missing_reason, detail))

    def _evict_group(self, dropped: list[Dropped]) -> None:
        group = next(iter(self._groups.values()))
        self._remove_group(group)
        detail = (
            f"{len(self._groups) + 1} pending groups exceed max_pending={self._max_pending}; "
            f"the group of {_fmt(group.lo)}..{_fmt(group.hi)} ms "
            f"(first arrival at {_fmt(group.first_ms)} ms) is the oldest"
        )
        for i, m in enumerate(group.messages):
            if m is not None:
                dropped.append(Dropped(self.parents[i], m, "evicted", detail))

    # -- collected samples -----------------------------------------------------------

    def _place_sample(
        self, index: int, parent: str, message: Message, ts: float, dropped: list[Dropped]
    ) -> None:
        if (index, message.trace_id) in self._recent:
            dropped.append(self._already_emitted(parent, message))
            return
        entries, by_trace = self._samples[index], self._sample_index[index]
        old = by_trace.pop(message.trace_id, None)
        if old is not None:
            del entries[bisect_left(entries, _sample_order(old), key=_sample_order)]
            dropped.append(
                Dropped(
                    parent,
                    old[2],
                    "duplicate",
                    f"replaced by a redelivered copy from {parent!r} for trace "
                    f"{message.trace_id!r}",
                )
            )
        sample: _Sample = (ts, self._seq, message, self._now)
        self._seq += 1
        entries.insert(bisect_right(entries, _sample_order(sample), key=_sample_order), sample)
        by_trace[message.trace_id] = sample
        if len(entries) > self._max_collected:
            victim = entries.pop(0)
            del by_trace[victim[2].trace_id]
            dropped.append(
                Dropped(
                    parent,
                    victim[2],
                    "evicted",
                    f"{len(entries) + 1} samples of {parent!r} exceed "
                    f"max_collected={self._max_collected}; the one at {_fmt(victim[0])} ms "
                    "is the oldest",
                )
            )

    def _take_samples(self, index: int, lo: float, hi: float) -> list[_Sample]:
        """Remove and return the samples with lo <= event ts <= hi, by time."""
        entries = self._samples[index]
        start = bisect_left(entries, lo, key=_sample_ts)
        stop = bisect_right(entries, hi, key=_sample_ts)
        taken = entries[start:stop]
        del entries[start:stop]
        by_trace = self._sample_index[index]
        for sample in taken:
            del by_trace[sample[2].trace_id]
        return taken

    def _prune_samples(self, dropped: list[Dropped]) -> None:
        """Drop the samples no group can take any more (see docs/joins.md, "Collect")."""
        lowest_hi = min((g.hi for g in self._groups.values()), default=_INF)
        for index in self._collected:
            entries = self._samples[index]
            if not entries:
                continue
            window = self._windows[index]
            assert window is not None
            parent = self.parents[index]
            by_trace = self._sample_index[index]
            cover = lowest_hi - window  # the lowest window start of a pending group
            if self._newest is not None:
                reach = self._newest - self._tolerance - window
                cut = bisect_left(entries, min(cover, reach), key=_sample_ts)
                for sample in entries[:cut]:
                    del by_trace[sample[2].trace_id]
                    dropped.append(
                        Dropped(
                            parent,
                            sample[2],
                            "stale",
                            f"{parent!r} sample at {_fmt(sample[0])} ms is before any window a "
                            f"group can still take: newest synchronised event "
                            f"{_fmt(self._newest)} ms - tolerance {_fmt(self._tolerance)} ms - "
                            f"window {_fmt(window)} ms = {_fmt(reach)} ms"
                            + ("" if cover == _INF else f", pending groups from {_fmt(cover)} ms"),
                        )
                    )
                del entries[:cut]
            if self._timeout is None:
                continue
            aged: list[_Sample] = []
            for sample in by_trace.values():  # in arrival order
                waited = self._now - sample[3]
                if waited < self._timeout:
                    break
                if sample[0] < cover:
                    aged.append(sample)
            for sample in aged:
                del by_trace[sample[2].trace_id]
                del entries[bisect_left(entries, _sample_order(sample), key=_sample_order)]
                dropped.append(
                    Dropped(
                        parent,
                        sample[2],
                        "timeout",
                        f"{parent!r} sample at {_fmt(sample[0])} ms waited "
                        f"{_fmt(self._now - sample[3])} ms (timeout_ms={_fmt(self._timeout)}) "
                        "and no pending group's window covers it",
                    )
                )


def _checked_parents(parents: object) -> tuple[str, ...]:
    if isinstance(parents, str) or not isinstance(parents, Sequence):
        raise InvalidInputError(
            INVALID_PARENTS_RULE,
            f"parents must be a sequence of parent names, got {parents!r}",
            "pass the join's parents in order, e.g. ('left', 'right')",
        )
    names = tuple(parents)
    bad = [p for p in names if not isinstance(p, str) or not p]
    twice = sorted({p for p in names if isinstance(p, str) and names.count(p) > 1})
    if not names or bad or twice:
        why = (
            "no parents"
            if not names
            else f"non-empty names required, got {bad!r}"
            if bad
            else f"{twice} named more than once"
        )
        raise InvalidInputError(
            INVALID_PARENTS_RULE,
            f"a join's parents must be distinct non-empty names: {why} (parents: {list(names)})",
            "pass each parent's node name once, in the order process() takes them",
        )
    return names
