"""The join assembler: carries out a join's :class:`~vfcore.flow.join_policy.JoinPolicy`.

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

import math
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Sequence
from typing import Any

from vfcore.errors import ERROR, InvalidFlowError, InvalidInputError, Issue
from vfcore.flow.join_policy import RULE, JoinPolicy, format_ms, join_policy_parent_problems
from vfcore.routing.groups import (
    EMPTY_OUTPUT,
    Dropped,
    DropReason,
    Group,
    JoinOutput,
    Message,
    group_id_of,
    new_group,
)

__all__ = [
    "DEFAULT_MAX_COLLECTED",
    "DEFAULT_REMEMBER_EMITTED",
    "INVALID_CLOCK_RULE",
    "INVALID_PARENTS_RULE",
    "UNKNOWN_PARENT_RULE",
    "JoinAssembler",
]

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
        return EMPTY_OUTPUT
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
            return EMPTY_OUTPUT if dropped is None else JoinOutput((), tuple(dropped))
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
            return EMPTY_OUTPUT if dropped is None else JoinOutput((), tuple(dropped))
        del traces[trace_id]
        group = self._trace_group(trace_id, record)
        record.clear()
        return JoinOutput((group,), () if dropped is None else tuple(dropped))

    # -- trace mode ------------------------------------------------------------------

    def _trace_group(self, trace_id: Any, record: list[Any]) -> Group:
        pairs = tuple(zip(self.parents, record[_SLOT0:], strict=True))
        if self._remember:
            self._remember_emitted(trace_id)
        return new_group(trace_id, {p: m.payload for p, m in pairs}, pairs)

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
                f"trace {trace_id!r} waited {format_ms(waited)} ms "
                f"(timeout_ms={format_ms(timeout)}) for {missing}"
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
            f"trace {trace_id!r} (first arrival at {format_ms(record[_FIRST])} ms) is the oldest"
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
                f"group of {format_ms(group.lo)}..{format_ms(group.hi)} ms waited {format_ms(waited)} ms "
                f"(timeout_ms={format_ms(timeout)}) for {missing}"
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
            f"the group of {format_ms(group.lo)}..{format_ms(group.hi)} ms "
            f"(first arrival at {format_ms(group.first_ms)} ms) is the oldest"
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
                    f"max_collected={self._max_collected}; the one at {format_ms(victim[0])} ms "
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
                            f"{parent!r} sample at {format_ms(sample[0])} ms is before any window a "
                            f"group can still take: newest synchronised event "
                            f"{format_ms(self._newest)} ms - tolerance {format_ms(self._tolerance)} ms - "
                            f"window {format_ms(window)} ms = {format_ms(reach)} ms"
                            + (
                                ""
                                if cover == _INF
                                else f", pending groups from {format_ms(cover)} ms"
                            ),
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
                        f"{parent!r} sample at {format_ms(sample[0])} ms waited "
                        f"{format_ms(self._now - sample[3])} ms (timeout_ms={format_ms(self._timeout)}) "
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
