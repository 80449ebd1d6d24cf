"""JoinAssembler: example tables for every documented rule (docs/joins.md)."""

from __future__ import annotations

import json
import math

import pytest

from vfcore import BATCH, REALTIME, InvalidFlowError, InvalidInputError, VfError
from vfcore.flow.join_policy import JoinPolicy
from vfcore.routing import (
    DROP_REASONS,
    Dropped,
    Group,
    JoinAssembler,
    JoinOutput,
    Message,
    group_id_of,
)
from vfcore.routing.groups import new_group

LR = ("left", "right")


def trace_join(parents=LR, **policy) -> JoinAssembler:
    return JoinAssembler(parents, JoinPolicy(**policy))


def time_join(parents=LR, **policy) -> JoinAssembler:
    return JoinAssembler(parents, JoinPolicy(mode="time", **policy))


def reasons(out: JoinOutput) -> list[tuple[str, object, str]]:
    return [(d.parent, d.message.payload, d.reason) for d in out.dropped]


def members(out: JoinOutput) -> list[dict[str, object]]:
    return [dict(g.members) for g in out.groups]


# -- trace mode -----------------------------------------------------------------------


def test_trace_group_completes_when_every_parent_delivered():
    join = trace_join()
    first = join.offer("left", Message("t1", "L1"), now_ms=0)
    assert first.is_empty and first == JoinOutput()
    assert join.backlog_by_parent() == {"left": 1, "right": 0}
    out = join.offer("right", Message("t1", "R1"), now_ms=3)
    assert out.dropped == ()
    [group] = out.groups
    assert group.trace_id == "t1"
    assert dict(group.members) == {"left": "L1", "right": "R1"}
    assert list(group.members) == ["left", "right"]  # parent order
    assert [(p, m.payload) for p, m in group.messages] == [("left", "L1"), ("right", "R1")]
    assert group.complete and group.missing == ()
    assert (group.first_ts_ms, group.last_ts_ms, group.span_ms) == (None, None, None)
    assert group.group_id == group_id_of(group.messages)
    assert join.pending() == {"left": (), "right": ()}
    assert join.pending_group_count == 0


@pytest.mark.parametrize(
    "order",
    [("a", "b", "c"), ("c", "b", "a"), ("b", "c", "a")],
    ids=["in-parent-order", "reversed", "mixed"],
)
def test_three_parent_trace_group_emits_on_the_last_half_whatever_the_order(order):
    join = trace_join(("a", "b", "c"))
    outs = [join.offer(p, Message("t", p.upper()), now_ms=i) for i, p in enumerate(order)]
    assert [len(o.groups) for o in outs] == [0, 0, 1]
    assert dict(outs[-1].groups[0].members) == {"a": "A", "b": "B", "c": "C"}


def test_mismatched_producers_never_join():
    # two producers stamp their own trace ids: the halves never meet
    join = trace_join(timeout_ms=100)
    assert join.offer("left", Message("cam-1", "L"), now_ms=0).is_empty
    assert join.offer("right", Message("lidar-1", "R"), now_ms=1).is_empty
    assert join.pending_group_count == 2
    assert join.backlog_by_parent() == {"left": 1, "right": 1}
    out = join.expire(now_ms=101)
    assert out.groups == ()
    assert reasons(out) == [("left", "L", "timeout"), ("right", "R", "timeout")]


@pytest.mark.parametrize(
    ("missing", "reason"),
    [("drop", "timeout"), ("error", "error")],
    ids=["drop-reports-timeout", "error-reports-error"],
)
def test_timeout_drops_or_errors_the_incomplete_group(missing, reason):
    join = trace_join(timeout_ms=500, missing=missing)
    join.offer("left", Message("t1", "L1"), now_ms=1_000)
    assert join.expire(now_ms=1_499).is_empty  # waited 499 ms of 500
    out = join.expire(now_ms=1_500)  # equality edge: waited exactly 500 ms → timed out
    assert reasons(out) == [("left", "L1", reason)]
    assert out.dropped[0].detail == "trace 't1' waited 500 ms (timeout_ms=500) for ['right']"
    assert join.pending_group_count == 0


def test_a_message_arriving_at_the_deadline_finds_its_group_already_timed_out():
    # offer(now) = expire(now), then placement: the clock moves first
    join = trace_join(timeout_ms=500)
    join.offer("left", Message("t1", "L1"), now_ms=0)
    out = join.offer("right", Message("t1", "R1"), now_ms=500)
    assert out.groups == ()
    assert reasons(out) == [("left", "L1", "timeout")]
    assert join.pending() == {"left": (), "right": (Message("t1", "R1"),)}


def test_timeouts_run_from_first_arrival_not_from_the_latest_half():
    join = trace_join(("a", "b", "c"), timeout_ms=100)
    join.offer("a", Message("t", 1), now_ms=0)
    join.offer("b", Message("t", 2), now_ms=90)
    assert reasons(join.expire(now_ms=100)) == [("a", 1, "timeout"), ("b", 2, "timeout")]


def test_timeouts_are_checked_on_every_offer():
    join = trace_join(timeout_ms=10)
    join.offer("left", Message("old", "L0"), now_ms=0)
    out = join.offer("left", Message("new", "L1"), now_ms=10)
    assert reasons(out) == [("left", "L0", "timeout")]


@pytest.mark.parametrize(
    ("flow_type", "expired_at_10s"),
    [(BATCH, False), (REALTIME, True)],
    ids=["batch-waits-forever", "realtime-drops-after-10s"],
)
def test_flow_type_defaults(flow_type, expired_at_10s):
    join = JoinAssembler(LR, JoinPolicy.default_for(flow_type))
    join.offer("left", Message("t1", "L1"), now_ms=0)
    assert join.expire(now_ms=9_999).is_empty
    out = join.expire(now_ms=10_000)
    assert reasons(out) == ([("left", "L1", "timeout")] if expired_at_10s else [])
    assert join.expire(now_ms=1e15).is_empty


def test_max_pending_evicts_the_oldest_group_by_first_arrival():
    join = trace_join(max_pending=2)
    assert join.offer("left", Message("t1", 1), now_ms=0).is_empty
    assert join.offer("right", Message("t2", 2), now_ms=0).is_empty  # same time: arrival order
    assert join.offer("left", Message("t1", 1.5), now_ms=1).dropped[0].reason == "duplicate"
    out = join.offer("left", Message("t3", 3), now_ms=2)
    # t1 is still the oldest group: replacing its half did not make it younger
    assert reasons(out) == [("left", 1.5, "evicted")]
    assert "3 pending groups exceed max_pending=2" in out.dropped[0].detail
    assert reasons(join.offer("left", Message("t4", 4), now_ms=3)) == [("right", 2, "evicted")]
    assert join.pending() == {"left": (Message("t3", 3), Message("t4", 4)), "right": ()}


def test_a_completed_group_does_not_count_against_max_pending():
    join = trace_join(max_pending=1)
    join.offer("left", Message("t1", 1), now_ms=0)
    assert len(join.offer("right", Message("t1", 2), now_ms=0).groups) == 1
    assert join.offer("left", Message("t2", 3), now_ms=0).is_empty


def test_a_redelivered_half_replaces_the_pending_one():
    join = trace_join()
    join.offer("left", Message("t1", "first copy"), now_ms=0)
    out = join.offer("left", Message("t1", "second copy"), now_ms=1)
    assert reasons(out) == [("left", "first copy", "duplicate")]
    assert join.pending()["left"] == (Message("t1", "second copy"),)
    out = join.offer("right", Message("t1", "R"), now_ms=2)
    assert members(out) == [{"left": "second copy", "right": "R"}]


def test_a_half_for_an_emitted_trace_is_dropped_as_duplicate():
    join = trace_join()
    join.offer("left", Message("t1", "L"), now_ms=0)
    join.offer("right", Message("t1", "R"), now_ms=0)
    out = join.offer("right", Message("t1", "R again"), now_ms=1)
    assert reasons(out) == [("right", "R again", "duplicate")]
    assert join.pending_group_count == 0


def test_the_memory_of_emitted_traces_is_bounded():
    join = JoinAssembler(LR, JoinPolicy(timeout_ms=100), remember_emitted=2)
    for t in ("t1", "t2", "t3"):
        join.offer("left", Message(t, "L"), now_ms=0)
        join.offer("right", Message(t, "R"), now_ms=0)
    # t1 is forgotten (only t2, t3 remembered): its late half starts a group that times out
    assert join.offer("left", Message("t1", "late"), now_ms=1).is_empty
    assert reasons(join.offer("left", Message("t3", "late"), now_ms=1)) == [
        ("left", "late", "duplicate")
    ]
    assert reasons(join.expire(now_ms=101)) == [("left", "late", "timeout")]


def test_remember_emitted_zero_forgets_every_group():
    join = JoinAssembler(LR, JoinPolicy(), remember_emitted=0)
    join.offer("left", Message("t1", "L"), now_ms=0)
    join.offer("right", Message("t1", "R"), now_ms=0)
    assert join.offer("left", Message("t1", "L again"), now_ms=1).is_empty
    assert join.pending_group_count == 1


def test_a_single_parent_join_emits_every_message():
    join = trace_join(("only",))
    assert members(join.offer("only", Message("t1", 1), now_ms=0)) == [{"only": 1}]


# -- errors ------------------------------------------------------------------------------


def test_offer_from_an_unknown_parent_raises_and_changes_nothing():
    join = trace_join()
    join.offer("left", Message("t1", "L"), now_ms=0)
    with pytest.raises(InvalidInputError) as info:
        join.offer("lidar", Message("t1", "X"), now_ms=5)
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, VfError)
    assert err.rule == "unknown-join-parent"
    assert "'lidar' is not a parent of this join (parents: ['left', 'right'])" in str(err)
    assert join.pending() == {"left": (Message("t1", "L"),), "right": ()}
    assert join.now_ms == 0


@pytest.mark.parametrize(
    ("parents", "policy", "error", "rule", "fragment"),
    [
        ((), JoinPolicy(), InvalidInputError, "invalid-join-parents", "no parents"),
        (("a", "a"), JoinPolicy(), InvalidInputError, "invalid-join-parents", "more than once"),
        (("a", ""), JoinPolicy(), InvalidInputError, "invalid-join-parents", "non-empty"),
        ("ab", JoinPolicy(), InvalidInputError, "invalid-join-parents", "sequence"),
        (LR, {"mode": "trace"}, InvalidInputError, "invalid-join-policy", "JoinPolicy"),
        (
            LR,
            JoinPolicy(mode="time", tolerance_ms=40, collect={"imu": 100}),
            InvalidFlowError,
            "invalid-join-policy",
            "not parents",
        ),
        (
            ("imu",),
            JoinPolicy(mode="time", tolerance_ms=40, collect={"imu": 100}),
            InvalidFlowError,
            "invalid-join-policy",
            "no parent anchors",
        ),
        (
            LR,
            JoinPolicy(mode="time", tolerance_ms=40, timeout_ms=10, quorum=3),
            InvalidFlowError,
            "invalid-join-policy",
            "exceeds the 2",
        ),
    ],
    ids=[
        "no-parents",
        "parent-twice",
        "empty-name",
        "a-string-is-not-a-list",
        "not-a-policy",
        "collect-names-a-stranger",
        "every-parent-collected",
        "quorum-above-parents",
    ],
)
def test_invalid_construction(parents, policy, error, rule, fragment):
    with pytest.raises(error) as info:
        JoinAssembler(parents, policy)
    assert info.value.rule == rule
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("keyword", "value"),
    [("remember_emitted", -1), ("max_collected", 0), ("remember_emitted", True)],
)
def test_invalid_keywords(keyword, value):
    with pytest.raises(InvalidInputError, match=keyword):
        JoinAssembler(LR, JoinPolicy(), **{keyword: value})


def test_the_clock_never_goes_backwards():
    join = trace_join(timeout_ms=100)
    join.offer("left", Message("t1", "L"), now_ms=50)
    assert join.expire(now_ms=10).is_empty  # earlier than seen: read as 50
    assert join.now_ms == 50
    assert join.offer("left", Message("t2", "L2"), now_ms=0).is_empty  # placed at 50
    assert reasons(join.expire(now_ms=150)) == [("left", "L", "timeout"), ("left", "L2", "timeout")]


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_clock_that_is_not_finite_raises(bad):
    join = trace_join()
    for call in (
        lambda: join.expire(now_ms=bad),
        lambda: join.offer("left", Message("t", 1), now_ms=bad),
    ):
        with pytest.raises(InvalidInputError) as info:
            call()
        assert info.value.rule == "invalid-join-clock"
    assert join.now_ms is None and join.pending_group_count == 0


# -- time mode -----------------------------------------------------------------------


def test_time_grouping_picks_the_nearest_candidate():
    # 30 fps cameras, 40 ms tolerance: R@1035 fits both L@1000 (span 35) and L@1033 (span 2)
    join = time_join(tolerance_ms=40)
    join.offer("left", Message("l0", "L0", 1000), now_ms=0)
    join.offer("left", Message("l1", "L1", 1033), now_ms=1)
    [group] = join.offer("right", Message("r1", "R1", 1035), now_ms=2).groups
    assert dict(group.members) == {"left": "L1", "right": "R1"}
    assert (group.first_ts_ms, group.last_ts_ms, group.span_ms) == (1033, 1035, 2)
    assert group.trace_id == group.group_id == group_id_of(group.messages)
    assert join.pending() == {"left": (Message("l0", "L0", 1000),), "right": ()}


@pytest.mark.parametrize(
    ("first", "second", "winner"),
    [(("l100", 100), ("l140", 140), "l100"), (("l140", 140), ("l100", 100), "l140")],
    ids=["older-group-at-100-wins", "older-group-at-140-wins"],
)
def test_a_tie_between_candidates_goes_to_the_older_group(first, second, winner):
    join = time_join(tolerance_ms=40)
    for i, (tid, ts) in enumerate((first, second)):
        join.offer("left", Message(tid, tid, ts), now_ms=i)
    [group] = join.offer("right", Message("r", "R", 120), now_ms=5).groups  # 20 ms from each
    assert group.members["left"] == winner


def test_a_time_group_never_spans_more_than_the_tolerance():
    # videoflow's drifting anchor would chain a@0, b@35, c@70 into one group (span 70)
    join = time_join(("a", "b", "c"), tolerance_ms=40)
    join.offer("a", Message("a0", "A0", 0), now_ms=0)
    join.offer("b", Message("b35", "B35", 35), now_ms=1)
    assert join.offer("c", Message("c70", "C70", 70), now_ms=2).is_empty
    assert join.pending_group_count == 2
    out = join.offer("a", Message("a70", "A70", 70), now_ms=3)
    assert out.is_empty  # a@70 joins c@70 (span 0), not a group holding a already
    [group] = join.offer("b", Message("b60", "B60", 60), now_ms=4).groups
    assert dict(group.members) == {"a": "A70", "b": "B60", "c": "C70"}
    assert group.span_ms == 10


@pytest.mark.parametrize(
    ("right_ts", "joined"),
    [(1040, True), (1040.5, False)],
    ids=["span-equal-to-tolerance-joins", "span-above-tolerance-does-not"],
)
def test_the_tolerance_equality_edge(right_ts, joined):
    join = time_join(tolerance_ms=40)
    join.offer("left", Message("l", "L", 1000), now_ms=0)
    out = join.offer("right", Message("r", "R", right_ts), now_ms=1)
    assert len(out.groups) == (1 if joined else 0)


def test_quorum_emits_a_partial_group_only_after_the_timeout():
    join = time_join(("left", "right", "lidar"), tolerance_ms=40, timeout_ms=500, quorum=2)
    join.offer("left", Message("l", "L", 1000), now_ms=10_000)
    join.offer("right", Message("r", "R", 1010), now_ms=10_100)
    assert join.expire(now_ms=10_499).is_empty  # quorum met, but the timeout has not passed
    [group] = join.expire(now_ms=10_500).groups
    assert dict(group.members) == {"left": "L", "right": "R", "lidar": None}
    assert group.missing == ("lidar",) and not group.complete
    assert [p for p, _ in group.messages] == ["left", "right"]


@pytest.mark.parametrize(
    ("missing", "reason"),
    [("drop", "timeout"), ("error", "error")],
    ids=["below-quorum-drop", "below-quorum-error"],
)
def test_a_group_below_quorum_is_handled_per_missing(missing, reason):
    join = time_join(
        ("left", "right", "lidar"), tolerance_ms=40, timeout_ms=500, quorum=2, missing=missing
    )
    join.offer("left", Message("l", "L", 1000), now_ms=0)
    out = join.expire(now_ms=500)
    assert out.groups == ()
    assert reasons(out) == [("left", "L", reason)]
    assert "1 of quorum=2" in out.dropped[0].detail


def test_a_time_message_without_event_time_is_dropped_as_error():
    join = time_join(tolerance_ms=40)
    for i, bad in enumerate([None, math.nan, "12", True]):
        out = join.offer("left", Message(f"x{i}", i, bad), now_ms=i)
        assert reasons(out) == [("left", i, "error")]
        assert "event_ts_ms" in out.dropped[0].detail
    assert join.pending_group_count == 0


def test_a_redelivered_time_message_replaces_the_pending_one():
    join = time_join(tolerance_ms=40)
    join.offer("left", Message("l", "first", 1000), now_ms=0)
    out = join.offer("left", Message("l", "second", 1000), now_ms=1)
    assert reasons(out) == [("left", "first", "duplicate")]
    assert join.pending()["left"] == (Message("l", "second", 1000),)
    # a copy with another timestamp is withdrawn and placed anew
    out = join.offer("left", Message("l", "moved", 2000), now_ms=2)
    assert reasons(out) == [("left", "second", "duplicate")]
    assert join.pending()["left"] == (Message("l", "moved", 2000),)
    assert members(join.offer("right", Message("r", "R", 2010), now_ms=3)) == [
        {"left": "moved", "right": "R"}
    ]
    assert reasons(join.offer("right", Message("r", "again", 2010), now_ms=4)) == [
        ("right", "again", "duplicate")
    ]


def test_time_mode_evicts_the_oldest_group_beyond_max_pending():
    join = time_join(tolerance_ms=10, max_pending=2)
    join.offer("left", Message("l1", 1, 100), now_ms=0)
    join.offer("left", Message("l2", 2, 200), now_ms=1)
    out = join.offer("left", Message("l3", 3, 50), now_ms=2)  # oldest by arrival, not by ts
    assert reasons(out) == [("left", 1, "evicted")]


# -- collect -------------------------------------------------------------------------


def imu_join(**policy) -> JoinAssembler:
    return JoinAssembler(
        ("cam", "imu"), JoinPolicy(mode="time", tolerance_ms=40, collect={"imu": 100}, **policy)
    )


def test_collect_delivers_the_window_as_a_time_sorted_tuple():
    join = imu_join()
    for i, ts in enumerate([50, 10, 30, 0, 100, 120, -1]):  # out of order
        assert join.offer("imu", Message(f"i{ts}", ts, ts), now_ms=i).is_empty
    [group] = join.offer("cam", Message("c", "C", 100), now_ms=10).groups
    # window [100 - 100, 100]: both ends included; -1 and 120 lie outside
    assert group.members == {"cam": "C", "imu": (0, 10, 30, 50, 100)}
    assert [p for p, _ in group.messages] == ["cam"] + ["imu"] * 5
    assert group.to_dict()["members"] == {"cam": "C", "imu": [0, 10, 30, 50, 100]}
    assert (group.first_ts_ms, group.last_ts_ms) == (100, 100)
    # -1 is not stale yet: a future group reaches back to 100 - 40 - 100 = -40; it is
    # kept until the newest camera frame passes -1 + 40 + 100 = 139
    assert join.pending()["imu"] == (Message("i-1", -1, -1), Message("i120", 120, 120))


def test_collected_samples_go_to_one_group_only():
    join = imu_join()
    for ts in range(0, 140, 10):
        join.offer("imu", Message(f"i{ts}", ts, ts), now_ms=0)
    first = join.offer("cam", Message("c100", "C100", 100), now_ms=1).groups[0]
    second = join.offer("cam", Message("c133", "C133", 133), now_ms=2).groups[0]
    assert first.members["imu"] == tuple(range(0, 110, 10))
    assert second.members["imu"] == (110, 120, 130)  # 33..133 minus what the first took


def test_collect_prunes_samples_no_group_can_take():
    join = imu_join()
    for ts in (100, 120, 150):
        join.offer("imu", Message(f"i{ts}", ts, ts), now_ms=0)
    out = join.offer("cam", Message("c300", "C300", 300), now_ms=1)
    # the group takes 200..300 (nothing); the newest frame is 300, so a future group
    # reaches back to 300 - 40 - 100 = 160 at most: 100, 120 and 150 are stale
    assert members(out) == [{"cam": "C300", "imu": ()}]
    assert reasons(out) == [("imu", 100, "stale"), ("imu", 120, "stale"), ("imu", 150, "stale")]
    assert "300 ms - tolerance 40 ms - window 100 ms = 160 ms" in out.dropped[0].detail
    assert join.offer("imu", Message("i160", 160, 160), now_ms=2).is_empty  # equality edge
    assert reasons(join.offer("imu", Message("i159", 159, 159), now_ms=3)) == [
        ("imu", 159, "stale")
    ]


def test_collect_keeps_samples_a_pending_group_may_still_take():
    join = JoinAssembler(
        ("left", "right", "imu"), JoinPolicy(mode="time", tolerance_ms=40, collect={"imu": 100})
    )
    join.offer("imu", Message("i50", 50, 50), now_ms=0)
    join.offer("left", Message("l100", "L", 100), now_ms=1)  # pending group reaches back to 0
    assert join.offer("left", Message("l400", "L4", 400), now_ms=2).is_empty  # reach is 260
    [group] = join.offer("right", Message("r120", "R", 120), now_ms=3).groups
    assert group.members == {"left": "L", "right": "R", "imu": (50,)}  # window 20..120


def test_collected_samples_time_out_when_no_group_covers_them():
    join = imu_join(timeout_ms=1_000)
    join.offer("imu", Message("i1", 1, 1_000_000), now_ms=0)
    assert join.expire(now_ms=999).is_empty
    out = join.expire(now_ms=1_000)
    assert reasons(out) == [("imu", 1, "timeout")]


def test_collect_buffers_are_bounded():
    join = JoinAssembler(
        ("cam", "imu"),
        JoinPolicy(mode="time", tolerance_ms=40, collect={"imu": 100}),
        max_collected=2,
    )
    join.offer("imu", Message("a", "a", 20), now_ms=0)
    join.offer("imu", Message("b", "b", 10), now_ms=0)
    assert reasons(join.offer("imu", Message("c", "c", 30), now_ms=0)) == [("imu", "b", "evicted")]


def test_a_redelivered_sample_replaces_the_buffered_one():
    join = imu_join()
    join.offer("imu", Message("i", "old", 10), now_ms=0)
    assert reasons(join.offer("imu", Message("i", "new", 10), now_ms=1)) == [
        ("imu", "old", "duplicate")
    ]
    assert join.backlog_by_parent() == {"cam": 0, "imu": 1}
    join.offer("cam", Message("c", "C", 50), now_ms=2)
    assert reasons(join.offer("imu", Message("i", "late", 10), now_ms=3)) == [
        ("imu", "late", "duplicate")
    ]


# -- ids, records, determinism ------------------------------------------------------


def test_regrouping_the_same_members_gives_the_same_id():
    one, two = trace_join(), trace_join()
    one.offer("left", Message("t1", "L"), now_ms=0)
    [a] = one.offer("right", Message("t1", "R"), now_ms=1).groups
    two.offer("right", Message("t1", "other payload"), now_ms=50)
    [b] = two.offer("left", Message("t1", "L"), now_ms=60).groups
    assert a.group_id == b.group_id
    assert a.group_id == group_id_of(reversed(a.messages))


def test_group_id_test_vectors():
    ab = [("a", Message("t1", 1)), ("b", Message("t1", 2))]
    assert group_id_of(ab) == "7507edd21994f5826034051714c95337"
    assert group_id_of([("a", Message("t1", 0, 5))]) == group_id_of([("a", Message("t1", 0, 5.0))])
    assert group_id_of([("a", Message(7, 0))]) != group_id_of([("a", Message("7", 0))])
    # length prefixes: moving characters between parent and trace id changes the id
    assert group_id_of([("ab", Message("c", 0))]) != group_id_of([("a", Message("bc", 0))])
    assert group_id_of([("a", Message("t1", 0))]) != group_id_of([("a", Message("t2", 0))])


def test_the_fast_group_constructor_builds_the_same_record():
    pairs = (("left", Message("t", 1)), ("right", Message("t", 2)))
    fast = new_group("t", {"left": 1, "right": 2}, pairs)
    assert fast == Group("t", {"left": 1, "right": 2}, pairs)
    assert repr(fast) == repr(Group("t", {"left": 1, "right": 2}, pairs))
    with pytest.raises(AttributeError):
        fast.trace_id = "x"  # type: ignore[misc]


def test_outputs_are_json_safe():
    join = imu_join(timeout_ms=10)
    join.offer("imu", Message("i", {"g": [0, 0, 1]}, 90), now_ms=0)
    out = join.offer("cam", Message("c", {"frame": 1}, 100), now_ms=1)
    doc = json.loads(json.dumps(out.to_dict()))
    assert doc["groups"][0]["members"] == {"cam": {"frame": 1}, "imu": [{"g": [0, 0, 1]}]}
    assert doc["groups"][0]["group_id"] == out.groups[0].group_id
    join.offer("cam", Message("c2", 2, None), now_ms=2)
    dropped = join.offer("cam", Message("c3", 3, None), now_ms=3).dropped
    assert json.loads(json.dumps(dropped[0].to_dict()))["reason"] == "error"
    assert set(DROP_REASONS) == {"timeout", "evicted", "duplicate", "error", "stale"}
    assert isinstance(dropped[0], Dropped)


def test_the_same_calls_give_the_same_outputs():
    def run() -> list[dict]:
        join = JoinAssembler(
            ("a", "b", "imu"),
            JoinPolicy(mode="time", tolerance_ms=15, timeout_ms=50, quorum=1, collect={"imu": 30}),
        )
        docs = []
        for i in range(60):
            parent = ("a", "b", "imu")[i * 7 % 3]
            docs.append(join.offer(parent, Message(f"{parent}{i}", i, (i * 37) % 100), now_ms=i))
        docs.append(join.expire(now_ms=1_000))
        return [d.to_dict() for d in docs]

    assert run() == run()


def test_inputs_are_not_mutated():
    parents = ["left", "right"]
    join = JoinAssembler(parents, JoinPolicy())
    parents.append("stranger")
    assert join.parents == ("left", "right")
    payload = {"x": [1]}
    message = Message("t", payload)
    join.offer("left", message, now_ms=0)
    [group] = join.offer("right", Message("t", 2), now_ms=0).groups
    assert group.members["left"] is payload and payload == {"x": [1]}
    assert group.messages[0][1] is message


def test_backlog_by_parent_names_the_starved_join():
    join = trace_join(("a", "b", "c"))
    for i in range(3):
        join.offer("a", Message(f"t{i}", i), now_ms=i)
        join.offer("b", Message(f"t{i}", i), now_ms=i)
    # a and b wait for c, which delivers nothing
    assert join.backlog_by_parent() == {"a": 3, "b": 3, "c": 0}


def test_an_aged_sample_a_pending_group_still_covers_is_kept():
    join = JoinAssembler(
        ("left", "right", "imu"),
        JoinPolicy(mode="time", tolerance_ms=40, timeout_ms=1_000, collect={"imu": 100}),
    )
    join.offer("imu", Message("i50", 50, 50), now_ms=0)
    join.offer("left", Message("l100", "L", 100), now_ms=500)  # its window starts at 0
    assert join.expire(now_ms=1_000).is_empty  # the sample waited 1000 ms, but is covered
    [group] = join.offer("right", Message("r120", "R", 120), now_ms=1_001).groups
    assert group.members["imu"] == (50,)
