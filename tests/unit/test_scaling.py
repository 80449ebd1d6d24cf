"""Example tables for vfcore.scaling: the rule's edges, diagnoses, and the KEDA/HPA model.

Every HPA case the issue names is here with its numbers (95/10 at 9 stays 9;
80 at 10 proposes 8 and the 300 s window holds it; fallback 10 at 11 stays 11;
one of two triggers failing may scale up, never down), next to the 0 ↔ 1
activation, the fallback behaviours, rate policies and the capacity cap on an
example cluster.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from vfcore import AutoscalingOptions, InvalidInputError, JoinPolicy
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
