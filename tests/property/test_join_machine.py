"""Laws of the join assembler, driven by a model-based state machine.

Hypothesis offers random messages (halves that meet, strangers, redeliveries,
messages without a timestamp), advances the clock (and sometimes passes an
earlier one), in trace mode and in time mode (with quorum and a collected
parent), and after every call checks:

- the output equals the reference model's: a deliberately naive re-statement
  of ``docs/joins.md`` over plain lists (linear scans, ``min`` with an explicit
  tie-break, filters instead of indices and deques);
- conservation: every offered message is in exactly one emitted group, or
  dropped once, or pending — never lost, never emitted twice;
- a time group's synchronised members span at most ``tolerance_ms``; collected
  samples are time-sorted and inside their window;
- at most ``max_pending`` groups wait;
- a trace group holds exactly one message per parent, all with its trace id.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from vfcore.flow.join_policy import JoinPolicy
from vfcore.routing import JoinAssembler, JoinOutput, Message, group_id_of

# -- the reference model -------------------------------------------------------------


@dataclass
class _Pending:
    seq: int
    first_ms: float
    trace_id: Any = None  # trace mode
    messages: dict[str, Message] = field(default_factory=dict)

    def stamps(self) -> list[float]:
        return [m.event_ts_ms for m in self.messages.values()]  # type: ignore[misc]


@dataclass
class _Sample:
    ts: float
    seq: int
    message: Message
    arrival_ms: float


def _finite(ts: object) -> bool:
    return isinstance(ts, int | float) and not isinstance(ts, bool) and math.isfinite(ts)


class ReferenceJoin:
    """docs/joins.md, read literally, with no attention to speed."""

    def __init__(self, parents, policy: JoinPolicy, remember: int, max_collected: int):
        self.parents = list(parents)
        self.policy = policy
        self.windows = policy.collect_windows
        self.synchronised = [p for p in self.parents if p not in self.windows]
        self.remember = remember
        self.max_collected = max_collected
        self.reason = "error" if policy.missing == "error" else "timeout"
        self.now = -math.inf
        self.groups: list[_Pending] = []  # in creation (= first arrival) order
        self.samples: dict[str, list[_Sample]] = {p: [] for p in self.windows}
        self.emitted_keys: list[Any] = []
        self.newest: float | None = None
        self.group_seq = 0
        self.sample_seq = 0

    # outputs are (groups, dropped) lists of plain tuples
    def offer(self, parent: str, message: Message, now_ms: float):
        groups: list[tuple] = []
        dropped: list[tuple] = []
        self.now = max(self.now, now_ms)
        self._expire(groups, dropped)
        if self.policy.mode == "trace":
            self._place_trace(parent, message, groups, dropped)
            return groups, dropped
        ts = message.event_ts_ms
        if not _finite(ts):
            dropped.append((parent, message, "error"))
        elif parent in self.windows:
            self._place_sample(parent, message, ts, dropped)
        else:
            self._place_synchronised(parent, message, ts, groups, dropped)
        self._prune(dropped)
        return groups, dropped

    def expire(self, now_ms: float):
        groups: list[tuple] = []
        dropped: list[tuple] = []
        self.now = max(self.now, now_ms)
        self._expire(groups, dropped)
        if self.policy.mode == "time":
            self._prune(dropped)
        return groups, dropped

    def pending(self) -> dict[str, tuple[Message, ...]]:
        out: dict[str, list[Message]] = {p: [] for p in self.parents}
        for g in self.groups:
            for p in self.parents:
                if p in g.messages:
                    out[p].append(g.messages[p])
        for p, samples in self.samples.items():
            out[p].extend(s.message for s in sorted(samples, key=lambda s: (s.ts, s.seq)))
        return {p: tuple(v) for p, v in out.items()}

    # -- rules ---------------------------------------------------------------------
    def _remembered(self, key) -> bool:
        return self.remember > 0 and key in self.emitted_keys[-self.remember :]

    def _expire(self, groups, dropped) -> None:
        timeout = self.policy.timeout_ms
        if timeout is None:
            return
        for g in list(self.groups):
            if self.now - g.first_ms >= timeout:
                self.groups.remove(g)
                quorum = self.policy.quorum
                if self.policy.mode == "time" and quorum is not None and len(g.messages) >= quorum:
                    groups.append(self._emit_time(g))
                else:
                    dropped.extend(
                        (p, g.messages[p], self.reason) for p in self.parents if p in g.messages
                    )

    def _evict_if_full(self, dropped) -> None:
        if len(self.groups) > self.policy.max_pending:
            victim = self.groups.pop(0)
            dropped.extend(
                (p, victim.messages[p], "evicted") for p in self.parents if p in victim.messages
            )

    def _place_trace(self, parent, message, groups, dropped) -> None:
        holder = [g for g in self.groups if g.trace_id == message.trace_id]
        if holder:
            g = holder[0]
            if parent in g.messages:
                dropped.append((parent, g.messages[parent], "duplicate"))
                g.messages[parent] = message
                return
            g.messages[parent] = message
            if len(g.messages) == len(self.parents):
                self.groups.remove(g)
                groups.append(self._emit_trace(g))
            return
        if self._remembered(message.trace_id):
            dropped.append((parent, message, "duplicate"))
            return
        g = _Pending(self.group_seq, self.now, message.trace_id, {parent: message})
        self.group_seq += 1
        if len(self.parents) == 1:
            groups.append(self._emit_trace(g))
            return
        self.groups.append(g)
        self._evict_if_full(dropped)

    def _emit_trace(self, g: _Pending) -> tuple:
        self.emitted_keys.append(g.trace_id)
        messages = tuple((p, g.messages[p]) for p in self.parents)
        members = tuple((p, g.messages[p].payload) for p in self.parents)
        return (g.trace_id, members, messages, (), None, None)

    def _place_synchronised(self, parent, message, ts, groups, dropped) -> None:
        if self._remembered((parent, message.trace_id)):
            dropped.append((parent, message, "duplicate"))
            return
        for g in self.groups:
            old = g.messages.get(parent)
            if old is not None and old.trace_id == message.trace_id:
                dropped.append((parent, old, "duplicate"))
                if old.event_ts_ms == ts:
                    g.messages[parent] = message
                    return
                del g.messages[parent]
                if not g.messages:
                    self.groups.remove(g)
                break
        self.newest = ts if self.newest is None else max(self.newest, ts)
        tolerance = self.policy.tolerance_ms
        candidates = [
            g
            for g in self.groups
            if parent not in g.messages
            and max([*g.stamps(), ts]) - min([*g.stamps(), ts]) <= tolerance
        ]
        if candidates:
            g = min(
                candidates,
                key=lambda g: (abs(2 * ts - (min(g.stamps()) + max(g.stamps()))), g.seq),
            )
        else:
            g = _Pending(self.group_seq, self.now)
            self.group_seq += 1
            self.groups.append(g)
        g.messages[parent] = message
        if len(g.messages) == len(self.synchronised):
            self.groups.remove(g)
            groups.append(self._emit_time(g))
            return
        self._evict_if_full(dropped)

    def _emit_time(self, g: _Pending) -> tuple:
        lo, hi = min(g.stamps()), max(g.stamps())
        members, messages, missing = [], [], []
        for p in self.parents:
            if p in self.windows:
                window = self.windows[p]
                taken = sorted(
                    (s for s in self.samples[p] if hi - window <= s.ts <= hi),
                    key=lambda s: (s.ts, s.seq),
                )
                for s in taken:
                    self.samples[p].remove(s)
                members.append((p, tuple(s.message.payload for s in taken)))
                messages.extend((p, s.message) for s in taken)
            elif p in g.messages:
                members.append((p, g.messages[p].payload))
                messages.append((p, g.messages[p]))
            else:
                members.append((p, None))
                missing.append(p)
        self.emitted_keys.extend((p, m.trace_id) for p, m in messages)
        gid = group_id_of(messages)
        return (gid, tuple(members), tuple(messages), tuple(missing), lo, hi)

    def _place_sample(self, parent, message, ts, dropped) -> None:
        if self._remembered((parent, message.trace_id)):
            dropped.append((parent, message, "duplicate"))
            return
        samples = self.samples[parent]
        for s in samples:
            if s.message.trace_id == message.trace_id:
                samples.remove(s)
                dropped.append((parent, s.message, "duplicate"))
                break
        samples.append(_Sample(ts, self.sample_seq, message, self.now))
        self.sample_seq += 1
        if len(samples) > self.max_collected:
            victim = min(samples, key=lambda s: (s.ts, s.seq))
            samples.remove(victim)
            dropped.append((parent, victim.message, "evicted"))

    def _prune(self, dropped) -> None:
        lowest_hi = min((max(g.stamps()) for g in self.groups), default=math.inf)
        tolerance = self.policy.tolerance_ms
        timeout = self.policy.timeout_ms
        for p in self.parents:
            if p not in self.windows:
                continue
            window = self.windows[p]
            cover = lowest_hi - window
            samples = self.samples[p]
            if self.newest is not None:
                limit = min(cover, self.newest - tolerance - window)
                stale = sorted((s for s in samples if s.ts < limit), key=lambda s: (s.ts, s.seq))
                for s in stale:
                    samples.remove(s)
                    dropped.append((p, s.message, "stale"))
            if timeout is not None:
                aged = sorted(
                    (s for s in samples if self.now - s.arrival_ms >= timeout and s.ts < cover),
                    key=lambda s: s.seq,
                )
                for s in aged:
                    samples.remove(s)
                    dropped.append((p, s.message, "timeout"))


# -- configurations -----------------------------------------------------------------


@st.composite
def trace_configs(draw):
    parents = ("a", "b", "c")[: draw(st.sampled_from([1, 2, 2, 3, 3]))]
    timeout = draw(st.one_of(st.none(), st.integers(1, 40)))
    missing = draw(st.sampled_from(["drop", "error"] if timeout else ["drop", "wait", "error"]))
    policy = JoinPolicy(timeout_ms=timeout, missing=missing, max_pending=draw(st.integers(1, 5)))
    return parents, policy, draw(st.integers(0, 4)), 4096


@st.composite
def time_configs(draw):
    synchronised = ("a", "b", "c")[: draw(st.integers(1, 3))]
    collect = draw(st.booleans())
    parents = (*synchronised, "imu") if collect else synchronised
    timeout = draw(st.one_of(st.none(), st.integers(1, 40)))
    quorum = draw(st.one_of(st.none(), st.integers(1, len(synchronised)))) if timeout else None
    policy = JoinPolicy(
        mode="time",
        tolerance_ms=draw(st.sampled_from([1, 5, 10, 12.5, 20])),
        timeout_ms=timeout,
        missing=draw(st.sampled_from(["drop", "error"])),
        max_pending=draw(st.integers(1, 5)),
        quorum=quorum,
        collect={"imu": draw(st.sampled_from([3, 10, 25]))} if collect else None,
    )
    return parents, policy, draw(st.integers(0, 4)), draw(st.sampled_from([1, 3, 8, 8]))


# -- the machine ----------------------------------------------------------------------


def _normal(out: JoinOutput):
    groups = [
        (g.trace_id, tuple(g.members.items()), g.messages, g.missing, g.first_ts_ms, g.last_ts_ms)
        for g in out.groups
    ]
    return groups, [(d.parent, d.message, d.reason) for d in out.dropped]


class JoinMachine(RuleBasedStateMachine):
    """Trace mode; TimeJoinMachine swaps the configurations and the offers."""

    @initialize(config=trace_configs())
    def setup(self, config) -> None:
        self._setup(config)

    def _setup(self, config) -> None:
        parents, policy, remember, max_collected = config
        self.policy = policy
        self.parents = parents
        self.join = JoinAssembler(
            parents, policy, remember_emitted=remember, max_collected=max_collected
        )
        self.model = ReferenceJoin(parents, policy, remember, max_collected)
        self.clock = 0.0
        self.sent: list[tuple[str, Message]] = []  # every offer, in order
        self.emitted: Counter[int] = Counter()
        self.dropped: Counter[int] = Counter()
        self.calls = 0

    # -- driving --------------------------------------------------------------------
    def _offer(self, parent: str, message: Message, now_ms: float) -> None:
        self.sent.append((parent, message))
        out = self.join.offer(parent, message, now_ms=now_ms)
        expected = self.model.offer(parent, message, now_ms)
        self._check(out, expected)

    def _payload(self) -> int:
        return len(self.sent)

    def _check(self, out: JoinOutput, expected) -> None:
        assert _normal(out) == (expected[0], expected[1])
        for group in out.groups:
            self._check_group(group)
            for _, m in group.messages:
                self.emitted[m.payload] += 1
        for d in out.dropped:
            self.dropped[d.message.payload] += 1
            assert d.detail

    def _check_group(self, group) -> None:
        assert group.group_id == group_id_of(group.messages)
        assert [p for p, _ in group.messages] == sorted(
            (p for p, _ in group.messages), key=self.parents.index
        )
        assert list(group.members) == list(self.parents)
        if self.policy.mode == "trace":
            assert [p for p, _ in group.messages] == list(self.parents)  # one per parent
            assert {m.trace_id for _, m in group.messages} == {group.trace_id}
            assert dict(group.members) == {p: m.payload for p, m in group.messages}
            assert group.complete
            return
        windows = self.policy.collect_windows
        stamps = [m.event_ts_ms for p, m in group.messages if p not in windows]
        assert max(stamps) - min(stamps) <= self.policy.tolerance_ms  # the span bound
        assert (group.first_ts_ms, group.last_ts_ms) == (min(stamps), max(stamps))
        assert group.trace_id == group.group_id
        present = [p for p, _ in group.messages if p not in windows]
        assert len(present) == len(set(present))
        if group.missing:
            assert self.policy.quorum is not None and len(present) >= self.policy.quorum
        for parent, window in windows.items():
            taken = [m.event_ts_ms for p, m in group.messages if p == parent]
            assert taken == sorted(taken)
            assert all(group.last_ts_ms - window <= ts <= group.last_ts_ms for ts in taken)

    @rule(parent=st.integers(0, 3), trace=st.integers(0, 5), dt=st.sampled_from([0, 0, 1, 3]))
    def offer_a_half(self, parent, trace, dt) -> None:
        """Trace ids from a small pool: halves meet, strangers wait, some repeat."""
        self.clock += dt
        name = self.parents[parent % len(self.parents)]
        self._offer(name, Message(f"t{trace}", self._payload()), self.clock)

    @precondition(lambda self: self.sent)
    @rule(pick=st.integers(0, 10_000), dt=st.sampled_from([0, 1, 5]))
    def redeliver(self, pick, dt) -> None:
        """An earlier message again, with the same parent and trace id."""
        self.clock += dt
        parent, old = self.sent[pick % len(self.sent)]
        self._offer(parent, Message(old.trace_id, self._payload(), old.event_ts_ms), self.clock)

    @rule(dt=st.integers(0, 25))
    def advance_the_clock(self, dt) -> None:
        self.clock += dt
        out = self.join.expire(now_ms=self.clock)
        self._check(out, self.model.expire(self.clock))

    @rule(back=st.integers(1, 10))
    def pass_an_earlier_time(self, back) -> None:
        """An earlier now_ms counts as the latest seen: nothing moves."""
        out = self.join.expire(now_ms=self.clock - back)
        self._check(out, self.model.expire(self.clock - back))

    # -- laws -------------------------------------------------------------------------
    @invariant()
    def every_message_is_in_exactly_one_place(self) -> None:
        if not hasattr(self, "join"):
            return
        pending = self.join.pending()
        assert pending == self.model.pending()
        held = Counter(m.payload for messages in pending.values() for m in messages)
        where = self.emitted + self.dropped + held
        assert set(where) == set(range(len(self.sent)))  # nothing lost, nothing invented
        assert set(where.values()) <= {1}  # nothing in two places, nothing emitted twice

    @invariant()
    def pending_groups_stay_bounded(self) -> None:
        if not hasattr(self, "join"):
            return
        assert self.join.pending_group_count <= self.policy.max_pending
        assert self.join.pending_group_count == len(self.model.groups)

    @invariant()
    def backlog_counts_the_pending_messages(self) -> None:
        if not hasattr(self, "join"):
            return
        assert self.join.backlog_by_parent() == {p: len(v) for p, v in self.join.pending().items()}


class TimeJoinMachine(JoinMachine):
    @initialize(config=time_configs())
    def setup(self, config) -> None:
        self._setup(config)

    @rule(
        parent=st.integers(0, 2),
        offset=st.sampled_from([-30, -12.5, -10, -5, -2, 0, 0, 0.5, 1, 3, 5, 10, 20, 30, None]),
        dt=st.sampled_from([0, 0, 1, 3]),
    )
    def offer_a_half(self, parent, offset, dt) -> None:
        """A fresh synchronised message whose event time wanders around the clock
        (or that has none: it must be dropped with reason error)."""
        self.clock += dt
        synchronised = [p for p in self.parents if p != "imu"]
        name = synchronised[parent % len(synchronised)]
        ts = None if offset is None else self.clock + offset
        self._offer(name, Message(f"{name}{len(self.sent)}", self._payload(), ts), self.clock)

    @precondition(lambda self: "imu" in self.parents)
    @rule(offset=st.sampled_from([-40, -25, -10, -5, -3, -1, 0, 0, 2]), dt=st.sampled_from([0, 1]))
    def offer_a_sample(self, offset, dt) -> None:
        """A collected sample, mostly a little behind the clock."""
        self.clock += dt
        message = Message(f"imu{len(self.sent)}", self._payload(), self.clock + offset)
        self._offer("imu", message, self.clock)

    @rule(ts=st.sampled_from([math.nan, math.inf, "12", True]))
    def offer_a_sample_with_a_bad_time(self, ts) -> None:
        self._offer(
            self.parents[-1], Message(f"x{len(self.sent)}", self._payload(), ts), self.clock
        )

    @precondition(lambda self: self.sent)
    @rule(pick=st.integers(0, 10_000), shift=st.sampled_from([0, 0, 0, 2, -7]))
    def redeliver_with_another_time(self, pick, shift) -> None:
        parent, old = self.sent[pick % len(self.sent)]
        ts = old.event_ts_ms
        if shift and _finite(ts):
            ts = ts + shift
        self._offer(parent, Message(old.trace_id, self._payload(), ts), self.clock)


SETTINGS = settings(max_examples=150, stateful_step_count=50)
TestTraceJoinMachine = JoinMachine.TestCase
TestTraceJoinMachine.settings = SETTINGS
TestTimeJoinMachine = TimeJoinMachine.TestCase
TestTimeJoinMachine.settings = SETTINGS
