"""Example tables for vfcore.scaling: the rule's edges, diagnoses, and the KEDA/HPA model.

Every HPA case the issue names is here with its numbers (95/10 at 9 stays 9;
80 at 10 proposes 8 and the 300 s window holds it; fallback 10 at 11 stays 11;
one of two triggers failing may scale up, never down), next to the 0 ↔ 1
activation, the fallback behaviours, rate policies and the capacity cap on an
example cluster. Then the laws issue 18 found unpinned, each test naming its law:
unknown propagation at flow level (a join whose parent is missing is unknown,
never known), a non-default ``target`` reaching every decision, the rule's edges
at exactly 1 and at ``max == min``, invalid capacities and counts refused, the
``fallback_for_unknown`` defaults, ``backed_up_parents`` empty whenever the join
is not starved, and ``decide_flow``'s options, documents and exact texts.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from vfcore import AutoscalingOptions, FlowSpec, InvalidFlowError, InvalidInputError, JoinPolicy
from vfcore.cluster import Unknown as ClusterUnknown
from vfcore.scaling import (
    Backlog,
    CapacityCap,
    Fallback,
    HpaBehavior,
    HpaState,
    KedaScaler,
    Recommendation,
    ScalingPolicy,
    ScalingRules,
    Trigger,
    Unobserved,
    capacity_cap,
    check_scaling_rule,
    compare_with_cluster,
    decide_flow,
    decide_replicas,
    fallback_for_unknown,
    observations_from_dict,
    predict_hpa,
    simulate_hpa,
)

REPO = Path(__file__).resolve().parents[2]
# A copy of ../shared/schemas/keda.sh_scaledobjects.yaml (kedacore/keda @8b4f083c), kept in
# the repository so that the test does not depend on a checkout's surroundings.
KEDA_CRD = REPO / "tests" / "data" / "keda.sh_scaledobjects.yaml"


def decide(observations: dict[str, Any], **kw: Any) -> Any:
    """decide_replicas with the defaults of the tables, checking the input is not mutated."""
    before = copy.deepcopy(observations)
    kw.setdefault("target", 10)
    kw.setdefault("min_replicas", 1)
    kw.setdefault("max_replicas", 10)
    out = decide_replicas(observations, **kw)
    assert observations == before
    json.dumps(out.to_dict(), allow_nan=False)
    return out


def lag(n: int) -> Backlog:
    return Backlog(n, 0)


# -- the rule: ceil and clamp ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lag_", "min_", "max_", "replicas", "diagnosis"),
    [
        pytest.param(0, 1, 10, 1, "idle", id="lag 0 holds min"),
        pytest.param(0, 3, 10, 3, "idle", id="lag 0 holds a min above 1"),
        pytest.param(1, 1, 10, 1, "backlog", id="one message asks for one replica"),
        pytest.param(10, 1, 10, 1, "backlog", id="lag equal to target asks for one"),
        pytest.param(11, 1, 10, 2, "backlog", id="one above target asks for two"),
        pytest.param(100, 1, 10, 10, "backlog", id="ten targets fill max exactly"),
        pytest.param(101, 1, 10, 10, "backlog", id="beyond max clamps to max"),
        pytest.param(25, 4, 10, 4, "backlog", id="below min clamps to min"),
        pytest.param(10_000, 2, 2, 2, "backlog", id="min equal to max pins it"),
    ],
)
def test_ceil_and_clamp_edges(lag_: int, min_: int, max_: int, replicas: int, diagnosis: str):
    d = decide({"a": lag(lag_)}, min_replicas=min_, max_replicas=max_)
    assert (d.status, d.replicas, d.diagnosis) == ("known", replicas, diagnosis)
    assert d.floor == replicas


def test_lag_counts_pending_and_ack_pending():
    d = decide({"a": Backlog(pending=6, ack_pending=5)})
    assert d.replicas == 2
    assert d.parents[0].lag == 11


def test_three_parents_15_42_3_at_target_10_give_5():
    d = decide({"a": lag(15), "b": lag(42), "c": lag(3)})
    assert d.replicas == 5
    assert [p.wants for p in d.parents] == [2, 5, 1]
    assert "= 5" in d.message


def test_the_decision_is_the_same_for_any_parent_order():
    a = decide({"a": lag(15), "b": lag(42), "c": lag(3)})
    b = decide({"c": lag(3), "a": lag(15), "b": lag(42)})
    assert a == b
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())


# -- starved joins ------------------------------------------------------------------------------


def test_a_drained_first_parent_and_a_backed_up_second_starve_the_join_in_either_order():
    one = decide({"left": lag(0), "right": Backlog(120, 5)})
    two = decide({"right": Backlog(120, 5), "left": lag(0)})
    assert one == two
    assert one.diagnosis == "starved"
    assert one.starved_parents == ("left",)
    assert one.backed_up_parents == ("right",)
    assert (
        one.replicas == 10
    )  # the number still follows the rule; the diagnosis says why it won't help
    assert "left has nothing pending while right backs up" in one.message
    assert "timeout" in (one.hint or "")


def test_six_parents_with_two_empty_starve_naming_both():
    obs = {
        "p1": lag(30),
        "p2": lag(0),
        "p3": lag(55),
        "p4": lag(12),
        "p5": lag(0),
        "p6": lag(10),
    }
    d = decide(obs)
    assert d.diagnosis == "starved"
    assert d.starved_parents == ("p2", "p5")
    assert d.backed_up_parents == ("p1", "p3", "p4", "p6")
    assert "p2, p5 have nothing pending" in d.message


def test_small_lags_beside_an_empty_parent_are_a_backlog_not_a_starved_join():
    d = decide({"left": lag(0), "right": lag(9)})
    assert d.diagnosis == "backlog"
    assert d.starved_parents == ()


def test_a_join_with_every_parent_empty_is_idle():
    assert decide({"left": lag(0), "right": lag(0)}).diagnosis == "idle"


def test_a_starved_join_with_a_timeout_policy_says_it_already_has_one():
    policy = JoinPolicy(mode="trace", timeout_ms=10_000, missing="drop")
    d = decide({"a": lag(0), "b": lag(50)}, join_policy=policy)
    assert "already has a repairing policy" in (d.hint or "")
    waits = JoinPolicy(mode="trace", timeout_ms=None, missing="wait")
    d = decide({"a": lag(0), "b": lag(50)}, join_policy=waits)
    assert "give it a join policy with a timeout" in (d.hint or "")
    assert "waits forever" in (d.hint or "")


# -- unknown -----------------------------------------------------------------------------------


def test_one_parent_timed_out_makes_it_unknown_and_keeps_the_other_parents_numbers():
    d = decide({"cams": Backlog(60, 2), "lidar": Unobserved("nats /jsz timed out after 5 s")})
    assert (d.status, d.replicas, d.diagnosis) == ("unknown", None, "unknown")
    assert d.unknown_parents == ("lidar",)
    assert d.floor == 7
    cams = d.to_dict()["parents"]["cams"]
    assert cams == {"pending": 60, "ack_pending": 2, "lag": 62, "wants": 7}
    assert d.to_dict()["parents"]["lidar"] == {"unknown": "nats /jsz timed out after 5 s"}
    assert d.next_replicas(9) == 9  # hold
    assert d.next_replicas(3) == 3
    assert d.next_replicas(3, policy="up-only") == 7
    assert d.next_replicas(9, policy="up-only") == 9


def test_a_required_parent_that_is_missing_makes_it_unknown():
    d = decide({"cams": lag(30)}, required=("cams", "lidar"))
    assert d.status == "unknown"
    assert d.unknown_parents == ("lidar",)
    assert d.to_dict()["parents"]["lidar"] == {"unknown": "required but not observed"}


def test_no_observation_at_all_is_unknown_not_idle():
    d = decide({})
    assert d.status == "unknown"
    assert d.floor == 1
    assert "no parent was observed" in d.message


def test_the_clusters_unknown_is_accepted_as_an_unobserved_parent():
    d = decide({"a": lag(5), "b": ClusterUnknown("nats", "connection refused")})
    assert d.status == "unknown"
    assert d.to_dict()["parents"]["b"] == {"unknown": "connection refused"}


# -- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        pytest.param({"target": 0}, "target=0 must be an int >= 1", id="target 0"),
        pytest.param({"target": True}, "target=True", id="target bool"),
        pytest.param({"min_replicas": 0}, "min_replicas=0 must be an int >= 1", id="min 0"),
        pytest.param(
            {"min_replicas": 5, "max_replicas": 3},
            "max_replicas=3 is below min_replicas=5",
            id="max below min",
        ),
        pytest.param({"max_replicas": 2.5}, "max_replicas=2.5", id="max float"),
    ],
)
def test_an_invalid_rule_is_refused_with_numbers_and_a_fix(kw: dict[str, Any], fragment: str):
    with pytest.raises(InvalidInputError) as info:
        decide({"a": lag(1)}, **kw)
    assert info.value.rule == "invalid-scaling-rule"
    assert fragment in info.value.message
    assert info.value.hint


def test_every_problem_of_the_rule_is_named_at_once():
    with pytest.raises(InvalidInputError) as info:
        decide({"a": lag(1)}, target=0, min_replicas=0)
    assert "target=0" in info.value.message and "min_replicas=0" in info.value.message


@pytest.mark.parametrize("bad", [-1, True, 1.5, "3"])
def test_a_backlog_count_must_be_a_whole_number(bad: object):
    with pytest.raises(InvalidInputError) as info:
        Backlog(bad, 0)  # type: ignore[arg-type]
    assert info.value.rule == "invalid-backlog"


def test_an_observation_of_another_type_is_refused():
    with pytest.raises(InvalidInputError) as info:
        decide({"a": 12})
    assert info.value.rule == "invalid-observation"


# -- the capacity cap ----------------------------------------------------------------------------


def test_a_capacity_below_the_decision_caps_it_and_says_so():
    d = decide({"a": lag(80)}, capacity=5)
    assert (d.replicas, d.floor, d.diagnosis) == (5, 8, "capacity-capped")
    assert d.is_capped
    assert "capped at 5" in d.message


def test_a_capacity_at_or_above_the_decision_changes_nothing():
    assert decide({"a": lag(80)}, capacity=8).diagnosis == "backlog"
    assert decide({"a": lag(80)}, capacity=8).replicas == 8


def test_a_capacity_never_takes_a_decision_below_min():
    d = decide({"a": lag(80)}, min_replicas=3, capacity=1)
    assert d.replicas == 3
    assert d.diagnosis == "capacity-capped"


def test_an_unknown_capacity_caps_nothing():
    cap = CapacityCap("a", placeable=2, limit=None, checked_up_to=8, verdicts=((8, "unknown"),))
    d = decide({"a": lag(80)}, capacity=cap)
    assert d.replicas == 8


def _realtime_flow() -> Any:
    """examples/realtime_scaling.py: frames -> detector (GPU, 2 tasks), plates -> fuse (join)."""
    from vfadapters.loading import load_flow

    return load_flow(str(REPO / "examples" / "realtime_scaling.py")).spec()


def test_capacity_cap_on_the_gpu_pool_example_places_five_two_gpu_detectors():
    """gpu-pool has 3, 5, 1 and 4 GPUs free; 2 GPUs per replica → 1 + 2 + 0 + 2 = 5."""
    from vfadapters.clusterload import load_cluster

    cluster = load_cluster(REPO / "examples" / "clusters" / "gpu-pool")
    cap = capacity_cap(_realtime_flow(), cluster, "detector", up_to=8)
    assert (cap.placeable, cap.limit) == (5, 5)
    assert dict(cap.verdicts)[5] == "fits" and dict(cap.verdicts)[6] == "does-not-fit"
    assert "add one more node shaped like" in (cap.unlock or "")
    assert "detector/5" in (cap.blocker or "")
    d = decide({"frames": Backlog(73, 4)}, min_replicas=2, capacity=cap)
    assert (d.replicas, d.diagnosis) == (5, "capacity-capped")
    assert d.hint == cap.unlock
    fits = capacity_cap(_realtime_flow(), cluster, "detector", up_to=4)
    assert (fits.placeable, fits.limit) == (4, None)


def test_capacity_cap_with_unknown_occupancy_does_not_cap():
    from vfcore.cluster import ClusterSnapshot, node

    gpu = {"nvidia.com/gpu": 4, "cpu": 64_000, "memory": 2**40}
    labels = {"nvidia.com/gpu.present": "true"}
    cluster = ClusterSnapshot.of(
        [
            node("cpu", allocatable={"cpu": 64_000, "memory": 2**40}),
            node("known", allocatable=gpu, labels=labels),
            node("dark", allocatable=gpu, labels=labels, unknown_reason="pods: Forbidden"),
        ]
    )
    cap = capacity_cap(_realtime_flow(), cluster, "detector", up_to=6)
    assert cap.placeable == 2  # proven on the known node alone
    assert cap.limit is None  # 3 may fit on the node of unknown occupancy
    assert "unknown" in (cap.unlock or "")


# -- the HPA: the issue's cases --------------------------------------------------------------------


def scaler(*parents: str, **kw: Any) -> KedaScaler:
    kw.setdefault("min_replica_count", 1)
    kw.setdefault("max_replica_count", 20)
    return KedaScaler(tuple(Trigger(p, 10) for p in parents), **kw)


def test_hpa_lag_95_threshold_10_at_9_replicas_stays_9():
    p = predict_hpa({"a": lag(95)}, scaler=scaler("a"), state=HpaState(9), now_s=0)
    assert p.replicas == 9
    assert p.readings[0].raw == 10 and p.readings[0].proposal == 9
    assert p.readings[0].ratio == pytest.approx(95 / 90)
    assert p.readings[0].within_tolerance is True
    ours = decide({"a": lag(95)}, max_replicas=20)
    cmp = compare_with_cluster(ours, p, current=9)
    assert (cmp.ours, cmp.cluster, cmp.agree) == (10, 9, False)
    assert cmp.differences[0].startswith("tolerance: a asks for 10")


def test_hpa_lag_96_at_8_replicas_leaves_the_tolerance_and_proposes_10():
    p = predict_hpa({"a": lag(96)}, scaler=scaler("a"), state=HpaState(8), now_s=0)
    assert p.replicas == 10  # 96 / 80 = 1.2 > 1.1


def test_hpa_lag_80_at_10_replicas_proposes_8_held_by_the_300_s_window():
    samples = [(t, {"a": lag(80)}) for t in (0, 15, 150, 285, 300, 315, 330)]
    out = simulate_hpa(samples, scaler=scaler("a"), state=HpaState(10))
    assert [p.metric_replicas for p in out] == [8] * 7
    assert [p.replicas for p in out] == [10, 10, 10, 10, 10, 8, 8]
    assert out[0].reason == "ScaleDownStabilized"
    assert out[0].stabilized == 10


def test_hpa_scale_down_window_with_a_behavior_drops_the_sample_exactly_at_the_cutoff():
    """The behaviour path keeps samples strictly *after* now - 300 s; the legacy one keeps equal."""
    samples = [(t, {"a": lag(80)}) for t in (0, 15, 300)]
    out = simulate_hpa(samples, scaler=scaler("a", behavior=HpaBehavior()), state=HpaState(10))
    assert [p.replicas for p in out] == [10, 10, 8]


def test_hpa_fallback_10_at_11_replicas_stays_11():
    fb = Fallback(failure_threshold=3, replicas=10)
    state = HpaState(11, failures=(("a", 3),))
    p = predict_hpa(
        {"a": Unobserved("timeout")}, scaler=scaler("a", fallback=fb), state=state, now_s=0
    )
    assert p.readings[0].source == "fallback"
    assert p.readings[0].value_milli == 100_000
    assert p.readings[0].ratio == pytest.approx(10 / 11)
    assert p.replicas == 11


def test_hpa_fallback_10_at_12_replicas_leaves_the_tolerance_and_sets_10_after_the_window():
    fb = Fallback(failure_threshold=0, replicas=10)
    samples = [(t, {"a": Unobserved("down")}) for t in (0, 15, 301, 316)]
    out = simulate_hpa(samples, scaler=scaler("a", fallback=fb), state=HpaState(12))
    assert [p.metric_replicas for p in out] == [10, 10, 10, 10]
    assert [p.replicas for p in out] == [12, 12, 10, 10]


def test_hpa_before_the_failure_threshold_a_failing_metric_is_an_error():
    fb = Fallback(failure_threshold=3, replicas=10)
    out = simulate_hpa(
        [(t, {"a": Unobserved("down")}) for t in (0, 15, 30, 45)],
        scaler=scaler("a", fallback=fb),
        state=HpaState(4),
    )
    assert [p.readings[0].source for p in out] == ["error", "error", "error", "fallback"]
    assert [p.readings[0].failures for p in out] == [1, 2, 3, 4]
    assert [p.replicas for p in out] == [4, 4, 4, 8]  # F = 10, limited to 2 × 4
    assert out[0].reason == "FailedGetExternalMetric"


def test_keda_keeps_the_failure_count_untouched_without_a_fallback():
    """KEDA's GetMetricsWithFallback tracks health only with a valid fallback configured."""
    held = HpaState(4, failures=(("a", 2),))
    failed = predict_hpa({"a": Unobserved("down")}, scaler=scaler("a"), state=held, now_s=0)
    assert failed.readings[0].source == "error"
    assert dict(failed.state.failures) == {"a": 2}  # not 3
    assert failed.readings[0].failures == 2
    healthy = predict_hpa({"a": lag(40)}, scaler=scaler("a"), state=held, now_s=0)
    assert dict(healthy.state.failures) == {"a": 2}  # not reset either
    fresh = simulate_hpa(
        [(t, {"a": Unobserved("down")}) for t in (0, 15, 30)],
        scaler=scaler("a"),
        state=HpaState(4),
    )
    assert [dict(p.state.failures) for p in fresh] == [{}, {}, {}]
    # with a fallback, the count moves both ways
    fb = scaler("a", fallback=Fallback(failure_threshold=3, replicas=10))
    counted = predict_hpa({"a": Unobserved("down")}, scaler=fb, state=held, now_s=0)
    assert dict(counted.state.failures) == {"a": 3}
    reset = predict_hpa({"a": lag(40)}, scaler=fb, state=held, now_s=0)
    assert dict(reset.state.failures) == {"a": 0}


def test_hpa_one_of_two_triggers_failing_may_scale_up_never_down():
    s = scaler("a", "b")
    up = predict_hpa({"a": lag(70), "b": Unobserved("x")}, scaler=s, state=HpaState(4), now_s=0)
    assert up.replicas == 7
    down = predict_hpa({"a": lag(10), "b": Unobserved("x")}, scaler=s, state=HpaState(4), now_s=0)
    assert down.replicas == 4
    assert down.reason == "FailedGetExternalMetric"
    assert any("scale-down skipped" in step for step in down.steps)
    same = predict_hpa({"a": lag(40), "b": Unobserved("x")}, scaler=s, state=HpaState(4), now_s=0)
    assert same.replicas == 4


def test_hpa_every_trigger_failing_means_no_scaling():
    s = scaler("a", "b")
    p = predict_hpa(
        {"a": Unobserved("x"), "b": Unobserved("y")}, scaler=s, state=HpaState(6), now_s=0
    )
    assert (p.replicas, p.actor, p.reason) == (6, "none", "FailedGetExternalMetric")
    assert p.state.recommendations == (Recommendation(0, 6),)


def test_hpa_multiple_triggers_take_the_max():
    p = predict_hpa(
        {"a": lag(15), "b": lag(42), "c": lag(3)},
        scaler=scaler("a", "b", "c"),
        state=HpaState(1),
        now_s=0,
    )
    assert p.metric_replicas == 5
    assert p.replicas == 4  # no behavior: at most max(2 × 1, 4) from 1


# -- fallback behaviours ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("behavior", "current", "f"),
    [
        ("static", 4, 6),
        ("currentReplicas", 4, 4),
        ("currentReplicasIfHigher", 4, 6),
        ("currentReplicasIfHigher", 9, 9),
        ("currentReplicasIfLower", 4, 4),
        ("currentReplicasIfLower", 9, 6),
    ],
)
def test_fallback_behaviours_choose_f(behavior: Any, current: int, f: int):
    fb = Fallback(failure_threshold=0, replicas=6, behavior=behavior)
    assert fb.replicas_for(current) == f
    p = predict_hpa(
        {"a": Unobserved("x")}, scaler=scaler("a", fallback=fb), state=HpaState(current), now_s=0
    )
    assert p.readings[0].value_milli == 10_000 * f


def test_fallback_for_unknown_holds_the_count_and_is_valid_for_the_keda_crd():
    fb = fallback_for_unknown(min_replicas=2)
    assert (fb.behavior, fb.replicas, fb.failure_threshold) == ("currentReplicas", 2, 3)
    s = scaler("a", fallback=fb, min_replica_count=2)
    for current in (2, 5, 20):
        out = simulate_hpa(
            [(t, {"a": Unobserved("x")}) for t in range(0, 600, 15)],
            scaler=s,
            state=HpaState(current),
        )
        assert {p.replicas for p in out} == {current}
    crd = yaml.safe_load(KEDA_CRD.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    behavior = HpaBehavior(
        scale_up=ScalingRules(tolerance=0.05),
        scale_down=ScalingRules(
            stabilization_window_s=120, policies=(ScalingPolicy("Pods", 2, 60),)
        ),
    )
    document = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "detector"},
        "spec": {
            "scaleTargetRef": {"name": "detector"},
            "minReplicaCount": 2,
            "maxReplicaCount": 10,
            "fallback": fb.to_dict(),
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": behavior.to_dict()}},
            "triggers": [
                {
                    "type": "nats-jetstream",
                    "metadata": {
                        k: str(v) for k, v in Trigger("frames").to_dict().items() if k != "parent"
                    },
                }
            ],
        },
    }
    jsonschema.validate(document, schema)


def test_without_fallback_an_unobservable_parent_lets_the_hpa_scale_up_only():
    s = scaler("a", "b")
    obs = {"a": lag(100), "b": Unobserved("x")}
    p = predict_hpa(obs, scaler=s, state=HpaState(3), now_s=0)
    assert p.replicas == 6  # max(2 × 3, 4): up on the healthy trigger
    ours = decide(obs, max_replicas=20)
    cmp = compare_with_cluster(ours, p, current=3)
    assert cmp.ours == 3 and not cmp.agree and not cmp.violates_unknown_rule
    assert "scales up to 6" in cmp.differences[0]


# -- tolerance, rate policies and limits ------------------------------------------------------------


def test_a_per_direction_tolerance_from_the_behavior_applies():
    tight = HpaBehavior(scale_up=ScalingRules(tolerance=0.0))
    p = predict_hpa({"a": lag(95)}, scaler=scaler("a", behavior=tight), state=HpaState(9), now_s=0)
    assert p.replicas == 10
    loose = scaler("a", tolerance=0.25)
    p = predict_hpa({"a": lag(80)}, scaler=loose, state=HpaState(10), now_s=0)
    assert p.metric_replicas == 10  # 0.8 within 1 ± 0.25


def test_default_behavior_rate_policy_allows_max_of_4_pods_or_100_percent_per_15_s():
    samples = [(t, {"a": lag(400)}) for t in (0, 15, 30, 45)]
    out = simulate_hpa(
        samples,
        scaler=scaler("a", behavior=HpaBehavior(), max_replica_count=50),
        state=HpaState(2),
    )
    assert [p.replicas for p in out] == [6, 12, 24, 40]
    assert out[0].reason == "ScaleUpLimit"


def test_a_pods_policy_counts_the_changes_within_its_period():
    slow = HpaBehavior(
        scale_up=ScalingRules(policies=(ScalingPolicy("Pods", 2, 60),), select_policy="Max")
    )
    samples = [(t, {"a": lag(400)}) for t in (0, 15, 30, 61)]
    out = simulate_hpa(
        samples, scaler=scaler("a", behavior=slow, max_replica_count=50), state=HpaState(2)
    )
    assert [p.replicas for p in out] == [4, 4, 4, 6]


def test_a_scale_down_percent_policy_rounds_down_the_allowed_count():
    half = HpaBehavior(
        scale_down=ScalingRules(
            stabilization_window_s=0, policies=(ScalingPolicy("Percent", 50, 60),)
        )
    )
    p = predict_hpa({"a": lag(10)}, scaler=scaler("a", behavior=half), state=HpaState(9), now_s=0)
    assert p.replicas == 4  # int(9 × 0.5) = 4


def test_a_disabled_select_policy_freezes_that_direction():
    frozen = HpaBehavior(scale_up=ScalingRules(select_policy="Disabled"))
    p = predict_hpa({"a": lag(90)}, scaler=scaler("a", behavior=frozen), state=HpaState(3), now_s=0)
    assert p.replicas == 3


def test_current_above_max_goes_to_max_without_stabilisation():
    p = predict_hpa(
        {"a": lag(0)}, scaler=scaler("a", max_replica_count=5), state=HpaState(9), now_s=0
    )
    assert (p.replicas, p.reason) == (5, "TooManyReplicas")


def test_the_value_metric_type_scales_the_ready_pods_by_the_ratio():
    s = KedaScaler(
        (Trigger("a", 10, metric_type="Value"),), min_replica_count=1, max_replica_count=100
    )
    p = predict_hpa({"a": lag(95)}, scaler=s, state=HpaState(9), now_s=0)
    assert p.metric_replicas == 86  # ceil(95 / 10 × 9): why KEDA defaults to AverageValue


# -- KEDA's 0 <-> 1 -------------------------------------------------------------------------------


def test_keda_activates_from_zero_when_the_lag_exceeds_the_activation_threshold():
    s = KedaScaler((Trigger("a", 10, activation_lag_threshold=5),), min_replica_count=0)
    p = predict_hpa({"a": lag(6)}, scaler=s, state=HpaState(0), now_s=0)
    assert (p.replicas, p.actor, p.active) == (1, "keda", True)
    idle = predict_hpa({"a": lag(5)}, scaler=s, state=HpaState(0), now_s=0)
    assert (idle.replicas, idle.actor, idle.reason) == (0, "none", "ScalingDisabled")


def test_keda_activates_to_min_replica_count_when_it_is_above_one():
    s = KedaScaler((Trigger("a"),), min_replica_count=3)
    assert predict_hpa({"a": lag(1)}, scaler=s, state=HpaState(0), now_s=0).replicas == 3


def test_keda_scales_to_zero_only_after_the_cooldown():
    s = KedaScaler((Trigger("a"),), min_replica_count=0, cooldown_period_s=300)
    state = HpaState(2, last_active_s=100.0)
    cooling = predict_hpa({"a": lag(0)}, scaler=s, state=state, now_s=399)
    assert cooling.replicas == 2 and cooling.actor != "keda"
    at_edge = predict_hpa({"a": lag(0)}, scaler=s, state=state, now_s=400)
    assert at_edge.replicas == 2  # strictly after last active + cooldown
    gone = predict_hpa({"a": lag(0)}, scaler=s, state=state, now_s=401)
    assert (gone.replicas, gone.actor) == (0, "keda")


def test_keda_keeps_an_erroring_target_with_fallback_off_zero():
    fb = Fallback(failure_threshold=3, replicas=2)
    s = KedaScaler((Trigger("a"),), min_replica_count=0, fallback=fb)
    p = predict_hpa({"a": Unobserved("x")}, scaler=s, state=HpaState(2), now_s=1000)
    assert p.replicas == 2
    bare = KedaScaler((Trigger("a"),), min_replica_count=0)
    p = predict_hpa({"a": Unobserved("x")}, scaler=bare, state=HpaState(2), now_s=1000)
    assert (p.replicas, p.actor) == (0, "keda")  # the hazard: min 0 and no fallback
    ours = decide({"a": Unobserved("x")})
    assert compare_with_cluster(ours, p, current=2).violates_unknown_rule


# -- observations documents and whole flows ---------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        pytest.param([], "must be a JSON object of nodes", id="not an object"),
        pytest.param(
            {"d": {"parents": {"a": {"pending": 3}}}}, "missing ['ack_pending']", id="no ack"
        ),
        pytest.param(
            {"d": {"parents": {"a": {"pending": 3, "ack_pending": True}}}},
            "ack_pending=True",
            id="bool count",
        ),
        pytest.param(
            {"d": {"parents": {"a": {"pending": -1, "ack_pending": 0}}}},
            "pending=-1",
            id="negative",
        ),
        pytest.param(
            {"d": {"parents": {"a": {"pending": 1, "ack_pending": 0, "lag": 1}}}},
            "unknown key(s) ['lag']",
            id="extra key",
        ),
        pytest.param({"d": {"current": -2, "parents": {}}}, "current=-2", id="bad current"),
        pytest.param(
            {"d": {"replicas": 2, "parents": {}}}, "unknown key(s) ['replicas']", id="typo"
        ),
        pytest.param({"d": {"parents": {"a": {"unknown": 5}}}}, "alone", id="unknown not text"),
    ],
)
def test_a_malformed_observations_document_is_refused_with_its_place(doc: Any, fragment: str):
    with pytest.raises(InvalidInputError) as info:
        observations_from_dict(doc)
    assert info.value.rule == "invalid-observations"
    assert fragment in info.value.message
    assert '"pending": 120' in info.value.hint


def test_decide_flow_answers_for_every_processor_with_eligibility():
    doc = json.loads((REPO / "examples" / "observations.json").read_text())
    result = decide_flow(_realtime_flow(), doc)
    d = result.to_dict()["decisions"]
    assert list(d) == ["detector", "plates", "fuse"]
    for entry in d.values():
        for key in (
            "status",
            "replicas",
            "diagnosis",
            "starved_parents",
            "unknown_parents",
            "eligible",
            "reasons",
        ):
            assert key in entry
    assert (d["detector"]["replicas"], d["detector"]["eligible"]) == (8, False)
    assert "--gpu-autoscaling" in d["detector"]["reasons"][0]
    assert (d["plates"]["status"], d["plates"]["unknown_parents"]) == ("unknown", ["frames"])
    assert (d["fuse"]["diagnosis"], d["fuse"]["starved_parents"]) == ("starved", ["detector"])
    assert not d["fuse"]["eligible"]


def test_decide_flow_with_gpu_autoscaling_and_a_cluster_caps_the_detector():
    from vfadapters.clusterload import load_cluster

    doc = json.loads((REPO / "examples" / "observations.json").read_text())
    result = decide_flow(
        _realtime_flow(),
        doc,
        options=AutoscalingOptions(enabled=True, gpu_autoscaling=True),
        cluster=load_cluster(REPO / "examples" / "clusters" / "gpu-pool"),
        predict=True,
    )
    det = result.node("detector")
    assert (det.eligible, det.decision.replicas, det.decision.diagnosis) == (
        True,
        5,
        "capacity-capped",
    )
    assert det.prediction is not None and det.prediction.replicas == 4
    assert result.node("fuse").prediction is None  # not autoscaled: no ScaledObject to predict


def test_decide_flow_refuses_observations_of_nodes_or_parents_the_flow_lacks():
    spec = _realtime_flow()
    with pytest.raises(InvalidInputError) as info:
        decide_flow(spec, {"detektor": {"parents": {}}})
    assert info.value.rule == "unknown-node"
    with pytest.raises(InvalidInputError) as info:
        decide_flow(spec, {"detector": {"parents": {"cams": {"pending": 1, "ack_pending": 0}}}})
    assert info.value.rule == "unknown-parent"
    assert "['frames']" in info.value.message


def test_decide_flow_ignores_observed_consumers_with_a_note_and_reports_missing_nodes_unknown():
    result = decide_flow(
        _realtime_flow(), {"sink": {"parents": {"fuse": {"pending": 1, "ack_pending": 0}}}}
    )
    assert any("sink is a consumer" in n for n in result.notes)
    assert {n.decision.status for n in result.nodes} == {"unknown"}


# -- the docs' worked examples ---------------------------------------------------------------------


def test_the_docstring_examples_hold():
    import doctest
    import importlib
    import pkgutil

    import vfcore.scaling

    modules = [vfcore.scaling] + [
        importlib.import_module(f"vfcore.scaling.{info.name}")
        for info in pkgutil.iter_modules(vfcore.scaling.__path__)
    ]
    results = [doctest.testmod(m, optionflags=doctest.ELLIPSIS) for m in modules]
    assert sum(r.attempted for r in results) >= 19 and sum(r.failed for r in results) == 0


def test_the_examples_in_docs_scaling_md_hold():
    import doctest

    result = doctest.testfile(
        str(REPO / "docs" / "scaling.md"), module_relative=False, optionflags=doctest.ELLIPSIS
    )
    assert result.attempted > 0
    assert result.failed == 0


@pytest.mark.parametrize(
    ("up", "select", "expected"),
    [
        (True, "Max", 20),  # Pods 4 → 14, Percent 100 → 20: the largest change
        (True, "Min", 14),
        (False, "Max", 5),  # Pods 4 → 6, Percent 50 → 5: the largest change downwards
        (False, "Min", 6),
    ],
    ids=["up-max", "up-min", "down-max", "down-min"],
)
def test_rate_policies_combine_by_select_policy_in_both_directions(up, select, expected):
    from vfcore.scaling.hpa import _rate_limit

    percent = 100 if up else 50
    rules = ScalingRules(
        policies=(ScalingPolicy("Pods", 4, 60), ScalingPolicy("Percent", percent, 60)),
        select_policy=select,
    )
    assert _rate_limit(10, (), (), rules, 0.0, up=up) == expected


# -- unknown propagation at flow level ------------------------------------------------------------


def _obs(**parents: int) -> dict[str, Any]:
    return {"parents": {p: {"pending": n, "ack_pending": 0} for p, n in parents.items()}}


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


# -- the rule at exactly 1 and at max == min ------------------------------------------------------


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


# -- capacities, counts and the fallback ----------------------------------------------------------


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


# -- backed_up_parents and the diagnosis ----------------------------------------------------------


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
