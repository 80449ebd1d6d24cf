"""Cases that kill mutants of vfcore.scaling's decision code (issue 18, docs/testing.md).

Each test names the law it pins: unknown propagation at flow level (a join whose
parent is missing is unknown, never known), a non-default ``target`` reaching
every decision, the rule's edges at exactly 1 and at ``max == min``, invalid
capacities and counts refused, the ``fallback_for_unknown`` defaults, and
``backed_up_parents`` empty whenever the join is not starved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vfcore import AutoscalingOptions, FlowSpec, InvalidFlowError, InvalidInputError, JoinPolicy
from vfcore.scaling import (
    Backlog,
    CapacityCap,
    Unobserved,
    check_scaling_rule,
    decide_flow,
    decide_replicas,
    fallback_for_unknown,
    observations_from_dict,
)

REPO = Path(__file__).resolve().parents[2]


def _realtime_flow() -> Any:
    """examples/realtime_scaling.py: frames -> detector (GPU, 2 tasks), plates -> fuse (join)."""
    from vfadapters.loading import load_flow

    return load_flow(str(REPO / "examples" / "realtime_scaling.py")).spec()


def _obs(**parents: int) -> dict[str, Any]:
    return {"parents": {p: {"pending": n, "ack_pending": 0} for p, n in parents.items()}}


# -- 1. unknown propagation at flow level ----------------------------------------------------------


def test_a_join_with_a_parent_missing_from_the_observations_is_unknown_naming_it():
    result = decide_flow(_realtime_flow(), {"fuse": _obs(plates=100)})
    fuse = result.node("fuse").decision
    assert (fuse.status, fuse.replicas, fuse.diagnosis) == ("unknown", None, "unknown")
    assert fuse.unknown_parents == ("detector",)
    assert fuse.floor == 10  # plates alone justify ceil(100 / 10), clamped to [2, 10]
    assert [name for name, _ in fuse.observed] == ["detector", "plates"]
    d = result.to_dict()["decisions"]["fuse"]
    assert d["parents"]["detector"] == {"unknown": "required but not observed"}
    assert d["message"].startswith("unknown: 1 of 2 parent(s) unobserved")


def test_a_node_observed_with_no_parent_at_all_is_unknown_for_its_single_parent():
    result = decide_flow(_realtime_flow(), {"detector": {"current": 3, "parents": {}}})
    det = result.node("detector")
    assert det.current == 3
    assert (det.decision.status, det.decision.unknown_parents) == ("unknown", ("frames",))
    assert det.decision.floor == 2  # min_replicas = nb_tasks
    # nodes absent from the document are unknown too, their current count unknown
    plates = result.node("plates")
    assert (plates.current, plates.decision.unknown_parents) == (None, ("frames",))


def test_a_fully_observed_join_is_known():
    result = decide_flow(_realtime_flow(), {"fuse": _obs(plates=35, detector=12)})
    fuse = result.node("fuse").decision
    assert (fuse.status, fuse.replicas, fuse.diagnosis) == ("known", 4, "backlog")
    assert fuse.unknown_parents == ()
    assert fuse.backed_up_parents == ()
    assert fuse.min_replicas == 2  # nb_tasks of the join


def test_decide_flow_with_a_non_default_target_uses_it_in_every_decision():
    doc = {
        "detector": _obs(frames=12),
        "plates": _obs(frames=12),
        "fuse": _obs(detector=12, plates=12),
    }
    result = decide_flow(_realtime_flow(), doc, target=3)
    assert result.target == 3
    assert result.to_dict()["target"] == 3
    got = {n.node: (n.decision.target, n.decision.replicas) for n in result.nodes}
    assert got == {"detector": (3, 4), "plates": (3, 4), "fuse": (3, 4)}
    default = decide_flow(_realtime_flow(), doc)
    assert {n.node: n.decision.replicas for n in default.nodes} == {
        "detector": 2,
        "plates": 2,
        "fuse": 2,
    }


def test_decide_flow_refuses_an_invalid_target():
    with pytest.raises(InvalidInputError) as info:
        decide_flow(_realtime_flow(), {}, target=0)
    assert info.value.rule == "invalid-scaling-rule"
    assert "target=0" in info.value.message


def test_decide_flow_reports_a_starved_join_with_its_policy_and_without_a_prediction():
    result = decide_flow(_realtime_flow(), {"fuse": _obs(detector=0, plates=240)})
    fuse = result.node("fuse")
    assert fuse.decision.diagnosis == "starved"
    assert fuse.decision.starved_parents == ("detector",)
    assert fuse.decision.backed_up_parents == ("plates",)
    assert fuse.decision.join_policy is not None  # the flow type's default policy
    assert "starved join" in fuse.decision.message


# -- 3. the rule at exactly 1 and at max == min -------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "lo", "hi"),
    [(1, 1, 1), (1, 1, 5), (10, 3, 3), (7, 1, 1)],
)
def test_the_rule_accepts_its_edges(target: int, lo: int, hi: int):
    check_scaling_rule(target, lo, hi)  # no error
    for lag in (0, 1, target, target + 1, 50 * target):
        d = decide_replicas({"a": Backlog(lag, 0)}, target=target, min_replicas=lo, max_replicas=hi)
        assert lo <= d.replicas <= hi
        if lo == hi:
            assert d.replicas == lo


def test_target_1_asks_one_replica_per_message():
    d = decide_replicas({"a": Backlog(3, 4)}, target=1, min_replicas=1, max_replicas=10)
    assert (d.replicas, d.floor, d.parents[0].wants) == (7, 7, 7)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        ((0, 1, 1), ["target=0 must be an int >= 1"]),
        ((1, 0, 1), ["min_replicas=0 must be an int >= 1"]),
        ((1, 1, 0), ["max_replicas=0 must be an int >= 1"]),
        ((1, 4, 3), ["max_replicas=3 is below min_replicas=4", "raise max_replicas to at least 4"]),
        ((True, 1, 1), ["target=True"]),
        ((1, 1.0, 1), ["min_replicas=1.0"]),
        ((1, 1, "2"), ["max_replicas='2'"]),
        ((0, 0, 0), ["target=0", "min_replicas=0", "max_replicas=0"]),
    ],
)
def test_the_rule_refuses_each_problem_with_its_numbers(
    args: tuple[Any, ...], fragments: list[str]
):
    with pytest.raises(InvalidInputError) as info:
        check_scaling_rule(*args)
    assert info.value.rule == "invalid-scaling-rule"
    for fragment in fragments:
        assert fragment in info.value.message + " " + (info.value.hint or "")


# -- 4. capacities, counts and the fallback -------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_an_invalid_capacity_is_refused(bad: object):
    with pytest.raises(InvalidInputError) as info:
        decide_replicas({"a": Backlog(50, 0)}, capacity=bad)  # type: ignore[arg-type]
    assert info.value.rule == "invalid-capacity"
    assert f"capacity={bad!r}" in info.value.message


def test_a_capacity_of_zero_is_valid_and_caps_at_min():
    d = decide_replicas({"a": Backlog(50, 0)}, target=10, min_replicas=2, capacity=0)
    assert (d.replicas, d.floor, d.capacity, d.diagnosis) == (2, 5, 0, "capacity-capped")
    assert d.is_capped
    assert "capped at 2: only 0 replica(s)" in d.message
    assert d.hint == "free GPU capacity or add a GPU node to place more replicas"


def test_a_capacity_equal_to_the_decision_caps_nothing():
    d = decide_replicas({"a": Backlog(50, 0)}, target=10, capacity=5)
    assert (d.replicas, d.diagnosis, d.is_capped, d.hint) == (5, "backlog", False, None)
    d = decide_replicas({"a": Backlog(50, 0)}, target=10, capacity=4)
    assert (d.replicas, d.diagnosis, d.is_capped) == (4, "capacity-capped", True)


def test_a_capacity_equal_to_min_caps_at_min():
    d = decide_replicas({"a": Backlog(50, 0)}, target=10, min_replicas=3, capacity=3)
    assert (d.replicas, d.diagnosis) == (3, "capacity-capped")


def test_a_capacity_cap_result_gives_its_limit_and_detail():
    cap = CapacityCap("a", 3, 3, 5, ((3, "fits"), (4, "does-not-fit")), "add a node", "0/4")
    d = decide_replicas({"p": Backlog(50, 0)}, target=10, capacity=cap)
    assert (d.replicas, d.capacity, d.capacity_detail) == (3, 3, cap)
    assert d.hint == "add a node"
    assert d.to_dict()["capacity_detail"]["limit"] == 3
    free = CapacityCap("a", 5, None, 5, ((5, "fits"),))
    d = decide_replicas({"p": Backlog(50, 0)}, target=10, capacity=free)
    assert (d.replicas, d.capacity, d.diagnosis) == (5, None, "backlog")


def test_an_unknown_decision_keeps_the_capacity_it_was_given():
    d = decide_replicas({"p": Unobserved("timeout")}, capacity=2)
    assert (d.status, d.capacity, d.replicas) == ("unknown", 2, None)


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_next_replicas_refuses_an_invalid_current_count(bad: object):
    d = decide_replicas({"a": Backlog(5, 0)})
    with pytest.raises(InvalidInputError) as info:
        d.next_replicas(bad)  # type: ignore[arg-type]
    assert info.value.rule == "invalid-current-replicas"


def test_next_replicas_accepts_zero_and_refuses_an_unknown_policy():
    d = decide_replicas({"a": Backlog(60, 0), "b": Unobserved("x")})
    assert (d.next_replicas(0), d.next_replicas(0, policy="up-only")) == (0, 6)
    assert d.next_replicas(9, policy="up-only") == 9
    with pytest.raises(InvalidInputError) as info:
        d.next_replicas(2, policy="down")  # type: ignore[arg-type]
    assert info.value.rule == "invalid-unknown-policy"
    known = decide_replicas({"a": Backlog(60, 0)})
    assert known.next_replicas(0) == known.next_replicas(20, policy="up-only") == 6


def test_fallback_for_unknown_defaults():
    fb = fallback_for_unknown()
    assert (fb.failure_threshold, fb.replicas, fb.behavior) == (3, 1, "currentReplicas")
    assert fb.to_dict() == {"failureThreshold": 3, "replicas": 1, "behavior": "currentReplicas"}
    assert fallback_for_unknown(failure_threshold=5).failure_threshold == 5


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_fallback_for_unknown_refuses_a_min_below_one(bad: object):
    with pytest.raises(InvalidInputError) as info:
        fallback_for_unknown(min_replicas=bad)  # type: ignore[arg-type]
    assert info.value.rule == "invalid-fallback"


# -- 5. backed_up_parents and the diagnosis --------------------------------------------------------


@pytest.mark.parametrize(
    ("lags", "starved", "backed", "diagnosis"),
    [
        ({"a": 0, "b": 9}, (), (), "backlog"),  # b below one replica's worth: not starved
        ({"a": 0, "b": 10}, ("a",), ("b",), "starved"),  # exactly a replica's worth
        ({"a": 20, "b": 30}, (), (), "backlog"),  # nobody empty
        ({"a": 0, "b": 0}, (), (), "idle"),
        ({"a": 0}, (), (), "idle"),
        ({"a": 50}, (), (), "backlog"),  # a single parent is never a starved join
        ({"a": 0, "b": 10, "c": 5, "d": 0}, ("a", "d"), ("b",), "starved"),
    ],
)
def test_backed_up_parents_are_named_only_when_the_join_is_starved(
    lags: dict[str, int], starved: tuple[str, ...], backed: tuple[str, ...], diagnosis: str
):
    d = decide_replicas({p: Backlog(n, 0) for p, n in lags.items()}, target=10)
    assert (d.starved_parents, d.backed_up_parents, d.diagnosis) == (starved, backed, diagnosis)
    assert d.to_dict()["backed_up_parents"] == list(backed)
    assert d.is_join == (len(lags) >= 2)


def test_a_starved_join_with_an_unobserved_parent_is_unknown_but_keeps_the_names():
    d = decide_replicas({"a": Backlog(0, 0), "b": Backlog(30, 0), "c": Unobserved("x")})
    assert (d.status, d.diagnosis) == ("unknown", "unknown")
    assert (d.starved_parents, d.backed_up_parents, d.unknown_parents) == (("a",), ("b",), ("c",))


def test_starved_wins_over_capacity_capped():
    d = decide_replicas({"a": Backlog(0, 0), "b": Backlog(80, 0)}, capacity=3)
    assert (d.replicas, d.floor, d.diagnosis) == (3, 8, "starved")


def test_a_starved_join_hint_depends_on_whether_the_policy_repairs_it():
    obs = {"a": Backlog(0, 0), "b": Backlog(80, 0)}
    waits = JoinPolicy(mode="trace", missing="wait")
    drops = JoinPolicy(mode="trace", timeout_ms=1000, missing="drop")
    plain = decide_replicas(obs).hint or ""
    assert "more replicas cannot drain a starved join" in plain and "(now:" not in plain
    hint = decide_replicas(obs, join_policy=waits).hint or ""
    assert "more replicas cannot drain" in hint and "(now: " in hint
    assert "already has a repairing policy" in (decide_replicas(obs, join_policy=drops).hint or "")
    quorum = JoinPolicy(mode="time", tolerance_ms=40, timeout_ms=500, quorum=2)
    assert "already has a repairing policy" in (decide_replicas(obs, join_policy=quorum).hint or "")
    assert "a has nothing pending while b backs up" in decide_replicas(obs).message
    two = decide_replicas({"a": Backlog(0, 0), "c": Backlog(0, 0), "b": Backlog(80, 0)})
    assert "a, c have nothing pending while b backs up" in two.message
    assert "find out why a, c produce nothing" in (two.hint or "")


def test_no_parent_at_all_is_unknown_with_its_own_message():
    d = decide_replicas({}, min_replicas=2)
    assert (d.status, d.replicas, d.floor, d.unknown_parents) == ("unknown", None, 2, ())
    assert d.message == "no parent was observed: the backlog is unknown"


# -- decide_flow: its options and its document ------------------------------------------------------


def _one_gpu_flow() -> Any:
    return FlowSpec.from_dict(
        {
            "name": "one-gpu",
            "flow_type": "realtime",
            "nodes": [
                {"name": "src", "kind": "producer"},
                {
                    "name": "det",
                    "kind": "processor",
                    "parents": ["src"],
                    "device_type": "gpu",
                    "gpu_count": 1,
                },
                {"name": "sink", "kind": "consumer", "parents": ["det"]},
            ],
        }
    )


def test_decide_flow_validates_the_flow_in_the_gpu_mode_and_resource_it_is_given():
    decide_flow(_one_gpu_flow(), {}, gpu_mode="shared")  # undeclared VRAM: a warning only
    with pytest.raises(InvalidInputError) as mode:
        decide_flow(_one_gpu_flow(), {}, gpu_mode="whole")
    assert mode.value.rule == "invalid-gpu-mode"
    with pytest.raises(InvalidFlowError) as mig:
        decide_flow(_realtime_flow(), {}, gpu_resource_name="nvidia.com/mig-1g.10gb")
    assert "mig-cannot-span" in str(mig.value)


def test_decide_flow_accepts_parsed_observations_as_well_as_the_document():
    doc = {"detector": {"current": 3, **_obs(frames=44)}, "fuse": _obs(detector=0, plates=30)}
    raw = decide_flow(_realtime_flow(), doc)
    parsed = decide_flow(_realtime_flow(), observations_from_dict(doc))
    assert raw == parsed
    assert parsed.node("detector").decision.replicas == 5
    assert parsed.node("detector").current == 3


def test_decide_flow_with_max_replicas_1_keeps_each_nodes_nb_tasks_as_its_range():
    result = decide_flow(
        _realtime_flow(),
        {"plates": _obs(frames=500), "detector": _obs(frames=500)},
        options=AutoscalingOptions(enabled=True, max_replicas=1),
    )
    assert (result.node("plates").decision.replicas, result.node("plates").eligible) == (1, True)
    det = result.node("detector").decision
    assert (det.min_replicas, det.max_replicas, det.replicas) == (2, 2, 2)


def test_decide_flow_default_options_enable_autoscaling_and_predict_nothing():
    result = decide_flow(_realtime_flow(), {"plates": _obs(frames=30)})
    plates = result.node("plates")
    assert (plates.eligible, plates.reasons) == (True, ())
    assert all(n.prediction is None and n.scaler is None for n in result.nodes)
    assert "hpa" not in plates.to_dict()
    assert not any(note.startswith("hpa:") for note in result.notes)


def test_the_flow_scaling_document_has_every_key():
    doc = {"plates": {"current": 2, **_obs(frames=30)}, "fuse": _obs(detector=0, plates=240)}
    result = decide_flow(_realtime_flow(), doc, predict=True)
    out = result.to_dict()
    assert set(out) == {"flow", "target", "decisions", "notes"}
    assert out["flow"] == {"name": "realtime-scaling", "flow_type": "realtime"}
    assert out["notes"] == list(result.notes)
    assert any(note.startswith("hpa: the next evaluation") for note in out["notes"])
    plates = out["decisions"]["plates"]
    assert (plates["eligible"], plates["reasons"], plates["reason_codes"], plates["current"]) == (
        True,
        [],
        [],
        2,
    )
    hpa = plates["hpa"]
    node = result.node("plates")
    assert node.scaler is not None and node.comparison is not None
    assert hpa["scaler"] == node.scaler.to_dict()
    assert hpa["comparison"] == node.comparison.to_dict()
    assert hpa["replicas"] == 3
    fuse = out["decisions"]["fuse"]
    assert fuse["eligible"] is False
    assert fuse["reason_codes"] == [r.code for r in result.node("fuse").reasons]
    assert fuse["reason_codes"]
    assert "hpa" not in fuse  # not autoscaled: nothing to predict
    assert out["decisions"]["detector"]["current"] is None


def test_flow_scaling_node_names_a_missing_node():
    result = decide_flow(_realtime_flow(), {})
    with pytest.raises(KeyError, match="nope"):
        result.node("nope")


def test_decide_flow_names_the_strangers_and_the_nodes_it_has():
    with pytest.raises(InvalidInputError) as info:
        decide_flow(_realtime_flow(), {"zz": {"parents": {}}, "aa": {"parents": {}}})
    assert info.value.message == (
        "the observations name ['aa', 'zz'], which the flow does not have "
        "(nodes: ['detector', 'frames', 'fuse', 'plates', 'sink'])"
    )
    assert info.value.hint == "name nodes as the flow declares them"


def test_a_join_policy_without_a_timeout_does_not_repair_starvation():
    obs = {"a": Backlog(0, 0), "b": Backlog(80, 0)}
    hint = decide_replicas(obs, join_policy=JoinPolicy(mode="trace")).hint or ""
    assert "more replicas cannot drain a starved join" in hint
    assert "(now: " in hint


# -- exact texts and documents of the rule ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (
            (1, 0, 1),
            "min_replicas=0 must be an int >= 1",
            "use the node's nb_tasks (at least 1); KEDA alone handles 0 <-> 1",
        ),
        (
            (0, 1, 1),
            "target=0 must be an int >= 1 (messages per replica)",
            "use the trigger's lagThreshold, e.g. target=10",
        ),
        (
            (1, 1, 0),
            "max_replicas=0 must be an int >= 1",
            "pass --max-replicas with a positive count, e.g. 10",
        ),
        (
            (1, 2, 1),
            "max_replicas=1 is below min_replicas=2",
            "raise max_replicas to at least 2, or lower min_replicas",
        ),
        (
            (1, 1.5, 1),
            "min_replicas=1.5 must be an int >= 1",
            "use the node's nb_tasks (at least 1); KEDA alone handles 0 <-> 1",
        ),
        (
            (2.0, 1, 1),
            "target=2.0 must be an int >= 1 (messages per replica)",
            "use the trigger's lagThreshold, e.g. target=10",
        ),
        (
            (0, 0, 0),
            "target=0 must be an int >= 1 (messages per replica); "
            "min_replicas=0 must be an int >= 1; max_replicas=0 must be an int >= 1",
            "use the trigger's lagThreshold, e.g. target=10; use the node's nb_tasks (at least "
            "1); KEDA alone handles 0 <-> 1; pass --max-replicas with a positive count, e.g. 10",
        ),
        (
            (1, 3, 3.5),
            "max_replicas=3.5 must be an int >= 1",
            "pass --max-replicas with a positive count, e.g. 10",
        ),
    ],
)
def test_the_rule_names_exactly_the_problems_there_are(
    args: tuple[Any, ...], message: str, hint: str
):
    with pytest.raises(InvalidInputError) as info:
        check_scaling_rule(*args)
    assert (info.value.message, info.value.hint) == (message, hint)


def test_decide_replicas_defaults_to_a_minimum_of_one():
    assert decide_replicas({"a": Backlog(0, 0)}).replicas == 1
    assert decide_replicas({"a": Backlog(101, 0)}).replicas == 10  # default target 10, max 10


def test_an_observation_of_another_type_names_its_parent():
    with pytest.raises(InvalidInputError) as info:
        decide_replicas({"frames": 5})  # type: ignore[dict-item]
    assert info.value.message == "parent 'frames' is observed as int 5"


def test_an_invalid_capacity_has_its_hint():
    with pytest.raises(InvalidInputError) as info:
        decide_replicas({"a": Backlog(5, 0)}, capacity=-2)
    assert info.value.hint == "pass the largest placeable count, e.g. from capacity_cap(...)"


def test_an_unknown_decision_keeps_its_range_capacity_detail_and_policy():
    cap = CapacityCap("j", 3, 3, 6, ((3, "fits"), (4, "does-not-fit")), "add a node")
    policy = JoinPolicy(mode="trace")
    d = decide_replicas(
        {"a": Backlog(0, 0), "b": Unobserved("x")},
        min_replicas=2,
        max_replicas=7,
        capacity=cap,
        join_policy=policy,
    )
    assert d.status == "unknown"
    assert (d.min_replicas, d.max_replicas, d.capacity, d.capacity_detail, d.join_policy) == (
        2,
        7,
        3,
        cap,
        policy,
    )
    known = decide_replicas(
        {"a": Backlog(0, 0), "b": Backlog(90, 0)}, capacity=cap, join_policy=policy
    )
    assert (known.capacity_detail, known.join_policy) == (cap, policy)


def test_next_replicas_errors_say_what_and_how():
    d = decide_replicas({"a": Unobserved("x")})
    with pytest.raises(InvalidInputError) as info:
        d.next_replicas(-3)
    assert (info.value.message, info.value.hint) == (
        "current=-3 must be a replica count >= 0",
        "pass the number of replicas the node runs now",
    )
    with pytest.raises(InvalidInputError) as info:
        d.next_replicas(1, policy="sideways")  # type: ignore[arg-type]
    assert (info.value.message, info.value.hint) == (
        "policy='sideways' is not a way to act on an unknown decision",
        "use policy='hold' (keep the count) or policy='up-only' (rise to the floor)",
    )


def test_a_decision_document_has_every_field():
    d = decide_replicas(
        {"b": Backlog(30, 2), "a": Unobserved("timeout")}, target=10, min_replicas=2, max_replicas=6
    )
    assert d.to_dict() == {
        "status": "unknown",
        "replicas": None,
        "floor": 4,
        "diagnosis": "unknown",
        "target": 10,
        "min_replicas": 2,
        "max_replicas": 6,
        "parents": {
            "a": {"unknown": "timeout"},
            "b": {"pending": 30, "ack_pending": 2, "lag": 32, "wants": 4},
        },
        "unknown_parents": ["a"],
        "starved_parents": [],
        "backed_up_parents": [],
        "capacity": None,
        "capacity_detail": None,
        "message": "unknown: 1 of 2 parent(s) unobserved (a unknown (timeout), b lag 32 → 4); "
        "the known parents alone justify 4 (clamped to [2, 6])",
        "hint": "restore the broker's monitoring for a; meanwhile hold the current count "
        "(KEDA: fallback.behavior currentReplicas)",
    }
    known = decide_replicas({"b": Backlog(30, 2)}, target=10, min_replicas=2, max_replicas=6)
    assert known.to_dict()["message"] == (
        "max over parents of ceil(lag / 10) clamped to [2, 6] = 4 (b lag 32 → 4)"
    )


# -- decide_flow with a cluster, a prediction, a batch flow, a join policy -------------------------


def _small_flow(flow_type: str = "realtime", name: str = "small", policy: Any = None) -> Any:
    join: dict[str, Any] = {"name": "j", "kind": "processor", "parents": ["a", "b"]}
    if policy is not None:
        join["join_policy"] = policy
    return FlowSpec.from_dict(
        {
            "name": name,
            "flow_type": flow_type,
            "nodes": [
                {"name": "src", "kind": "producer"},
                {"name": "a", "kind": "processor", "parents": ["src"]},
                {"name": "b", "kind": "processor", "parents": ["src"]},
                join,
                {"name": "sink", "kind": "consumer", "parents": ["j"]},
            ],
        }
    )


def _gpu_pool() -> Any:
    from vfadapters.clusterload import load_cluster

    return load_cluster(REPO / "examples" / "clusters" / "gpu-pool")


GPU_OPTIONS = AutoscalingOptions(enabled=True, gpu_autoscaling=True, max_replicas=12)


def test_a_capped_decision_keeps_the_target_and_the_range_of_the_node():
    result = decide_flow(
        _realtime_flow(),
        {"detector": _obs(frames=77)},
        target=7,
        options=GPU_OPTIONS,
        cluster=_gpu_pool(),
    )
    d = result.node("detector").decision
    assert (d.replicas, d.floor, d.diagnosis, d.capacity) == (5, 11, "capacity-capped", 5)
    assert (d.target, d.min_replicas, d.max_replicas) == (7, 2, 12)
    assert d.capacity_detail is not None and d.capacity_detail.checked_up_to == 11


def test_the_capacity_cap_counts_the_replicas_other_nodes_run_now():
    doc = {"detector": _obs(frames=77), "plates": {"current": 300, **_obs(frames=1)}}
    result = decide_flow(_realtime_flow(), doc, target=7, options=GPU_OPTIONS, cluster=_gpu_pool())
    d = result.node("detector").decision
    assert (d.replicas, d.capacity) == (2, 0)  # 300 plate readers leave no room: held at min
    assert d.capacity_detail is not None
    assert "rest of the flow does not fit" in (d.capacity_detail.unlock or "")


def test_no_cap_is_computed_when_the_backlog_asks_for_no_more_than_nb_tasks():
    doc = {"detector": _obs(frames=20), "plates": {"current": 300, **_obs(frames=1)}}
    result = decide_flow(_realtime_flow(), doc, options=GPU_OPTIONS, cluster=_gpu_pool())
    d = result.node("detector").decision
    assert (d.replicas, d.floor, d.capacity, d.capacity_detail) == (2, 2, None, None)


def test_the_prediction_starts_from_the_current_count_and_renders_the_nodes_rule():
    doc = {"plates": {"current": 4, **_obs(frames=30)}}
    result = decide_flow(_realtime_flow(), doc, target=5, options=GPU_OPTIONS, predict=True)
    plates = result.node("plates")
    assert plates.prediction is not None and plates.scaler is not None
    assert plates.prediction.previous == 4
    assert (
        plates.comparison is not None
        and plates.comparison.to_dict() == (plates.to_dict()["hpa"]["comparison"])
    )
    scaler = plates.scaler.to_dict()
    assert (scaler["minReplicaCount"], scaler["maxReplicaCount"]) == (1, 12)
    assert [t["lagThreshold"] for t in scaler["triggers"]] == [5]
    fresh = decide_flow(_realtime_flow(), {"plates": _obs(frames=30)}, predict=True)
    assert fresh.node("plates").prediction.previous == 1  # type: ignore[union-attr]  # min


def test_a_join_without_a_policy_gets_its_flow_types_default_and_an_explicit_one_is_kept():
    obs = {"j": _obs(a=0, b=40)}
    realtime = decide_flow(_small_flow(), obs).node("j").decision
    assert realtime.join_policy == JoinPolicy.default_for("realtime")
    batch = decide_flow(_small_flow("batch"), obs).node("j").decision
    assert batch.join_policy == JoinPolicy.default_for("batch")
    mine = {"mode": "trace", "timeout_ms": 500, "missing": "error"}
    kept = decide_flow(_small_flow(policy=mine), obs).node("j").decision
    assert kept.join_policy == JoinPolicy.from_dict(mine)
    assert decide_flow(_small_flow(), {"a": _obs(src=5)}).node("a").decision.join_policy is None


def test_the_notes_of_a_batch_flow_and_of_a_prediction():
    batch = decide_flow(_small_flow("batch"), {})
    assert batch.notes == (
        "a BATCH flow's nodes are Jobs: nothing is autoscaled; the decisions say what the "
        "backlog calls for",
    )
    assert decide_flow(_small_flow(), {}).notes == ()
    predicted = decide_flow(_small_flow(), {}, predict=True)
    assert predicted.notes == (
        "hpa: the next evaluation of a fresh controller (no recommendation history, no "
        "failure counts): a scale-down is held by the 300 s window from the current count",
    )


def test_an_observed_stray_parent_has_its_hint():
    with pytest.raises(InvalidInputError) as info:
        decide_flow(_small_flow(), {"j": _obs(a=1, c=2)})
    assert (
        info.value.message == "the observations give j parent(s) ['c']; its parents are ['a', 'b']"
    )
    assert info.value.hint == "observe each parent stream the node consumes, by the parent's name"


def test_the_rendered_rule_of_a_predicted_node_starts_at_its_nb_tasks():
    result = decide_flow(
        _realtime_flow(), {"detector": _obs(frames=30)}, options=GPU_OPTIONS, predict=True
    )
    scaler = result.node("detector").scaler
    assert scaler is not None
    assert (scaler.min_replica_count, scaler.max_replica_count) == (2, 12)


def test_the_prediction_is_made_at_time_zero_unless_told():
    doc = {"plates": _obs(frames=30)}
    assert decide_flow(_realtime_flow(), doc, predict=True).node("plates").prediction.now_s == 0.0  # type: ignore[union-attr]
    later = decide_flow(_realtime_flow(), doc, predict=True, now_s=60.0).node("plates")
    assert later.prediction is not None and later.prediction.now_s == 60.0
