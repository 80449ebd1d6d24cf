"""Laws of the scheduler model's bounds: work bounds, deadlines and kube-scheduler's scan window.

The exhaustive oracle is :func:`tests.property.test_scheduler_laws.brute_force`
(every node-level tie-break, no equivalence classes, no memo). A bounded
search may explore less than every outcome, so it may say less than the
oracle — ``at-risk`` or ``unknown`` — but never ``lands`` where some outcome
strands, and never ``lands`` at all when it was bounded.
"""

from __future__ import annotations

import itertools
import random

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.property.scheduler_strategies import GPU, brute_force, configs, instances
from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, node
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.scheduler import ScoringConfig, predict, predict_for_plan
from vfcore.placement.scheduler.engine import Budget, num_feasible_nodes_to_find

budgets = st.builds(
    lambda work, branches, samples: (work, branches, samples),
    st.integers(1, 3_000),
    st.integers(1, 40),
    st.integers(0, 3),
)


@settings(max_examples=120, deadline=None)
@given(instance=instances, config=configs, bound=budgets)
def test_the_model_never_says_lands_where_the_exhaustive_model_strands_a_pod(
    instance, config, bound
):
    pods, cluster = instance
    work, branches, samples = bound
    oracle = brute_force(pods, cluster, config)
    prediction = predict(
        pods, cluster, config=config, max_branches=branches, samples=samples, budget=Budget(work)
    )
    event(f"oracle {oracle.verdict}, bounded model {prediction.verdict}")
    event("exhaustive" if prediction.exhaustive else "bounded")
    if oracle.verdict != "lands":
        assert prediction.verdict != "lands"
    if prediction.verdict == "lands":
        assert prediction.exhaustive and oracle.verdict == "lands"


@settings(max_examples=120, deadline=None)
@given(instance=instances, config=configs, bound=budgets)
def test_bounded_exploration_never_turns_strands_into_lands(instance, config, bound):
    pods, cluster = instance
    work, branches, samples = bound
    full = predict(pods, cluster, config=config)
    bounded = predict(
        pods, cluster, config=config, max_branches=branches, samples=samples, budget=Budget(work)
    )
    event(f"{full.verdict} -> {bounded.verdict}")
    if not bounded.exhaustive:
        assert bounded.verdict != "lands"  # a sample is never a certainty
        assert "bounded search" in bounded.reason
    if full.verdict == "strands":
        assert bounded.verdict != "lands"
    if bounded.exhaustive:
        assert bounded.verdict == full.verdict  # the bound did not bite: same answer


class _Ticking:
    """A clock that advances ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@settings(max_examples=80, deadline=None)
@given(instance=instances, config=configs, step=st.sampled_from([0.001, 0.5, 10.0]))
def test_a_deadline_never_yields_lands_unless_the_search_finished(instance, config, step):
    pods, cluster = instance
    clock = _Ticking(step)
    prediction = predict(
        pods, cluster, config=config, budget=Budget(10**9, seconds=1.0, clock=clock)
    )
    oracle = brute_force(pods, cluster, config)
    event(f"{'exhaustive' if prediction.exhaustive else 'cut'}: {prediction.verdict}")
    if prediction.verdict == "lands":
        assert prediction.exhaustive and oracle.verdict == "lands"
    if not prediction.exhaustive:
        assert prediction.verdict in ("at-risk", "strands", "unknown")


def gpu_pod(workload: str, replica: int, gpus: int) -> PodRequest:
    return PodRequest(
        f"{workload}/{replica}",
        workload,
        replica,
        ((GPU, gpus),),
        (GPU_PRESENT_LABEL,),
        (GPU_TOLERATION,),
        slice="whole",
    )


def pool(n: int, gpus: int = 1) -> ClusterSnapshot:
    return ClusterSnapshot.of(
        [
            node(f"n{i:04d}", allocatable={GPU: gpus}, labels=dict([GPU_PRESENT_LABEL]))
            for i in range(n)
        ]
    )


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 260), pods=st.integers(1, 4))
def test_lands_on_more_feasible_nodes_than_the_scan_window_is_at_risk(n, pods):
    """kube-scheduler scores only numFeasibleNodesToFind feasible nodes: the model flags it."""
    batch = [gpu_pod("w", r, 1) for r in range(pods)]
    prediction = predict(batch, pool(n), config=ScoringConfig(resources=((GPU, 1),)))
    window = num_feasible_nodes_to_find(n)
    event(f"{'inside' if n <= window else 'beyond'} the window: {prediction.verdict}")
    if pods > n:
        assert prediction.verdict == "strands"
    elif n <= window:
        assert prediction.verdict == "lands"
    else:
        assert prediction.verdict == "at-risk"
        assert "numFeasibleNodesToFind" in prediction.reason


def _go_num_feasible(n: int) -> int:
    """``numFeasibleNodesToFind`` transcribed step by step (int32 arithmetic, adaptive)."""
    if n < 100:
        return n
    percentage = 50 - n // 125
    percentage = max(percentage, 5)
    found = n * percentage // 100
    return 100 if found < 100 else found


@given(n=st.integers(0, 100_000))
def test_the_scan_window_follows_kube_scheduler(n):
    found = num_feasible_nodes_to_find(n)
    assert found == _go_num_feasible(n)
    assert found <= n or n < 100
    event("all nodes" if found == n else "a sample")


def test_the_scan_window_worked_numbers():
    # 200 nodes: 50 - 1 = 49 % of 200 = 98, raised to 100; 2,000: 34 % = 680; 10,000: 5 % = 500.
    assert [num_feasible_nodes_to_find(n) for n in (99, 100, 200, 2_000, 10_000)] == [
        99,
        100,
        100,
        680,
        500,
    ]


class _Plan:
    def __init__(self, placement: dict[str, str]) -> None:
        self.verdict = "fits"
        self.placement = placement


def test_a_cut_short_scheduler_phase_is_named_and_never_lands():
    # 2,2,4 GPUs on two 4-GPU nodes: greedy strands the 4 (docs/scheduler-model.md); an exact placement exists.
    cluster = ClusterSnapshot.of(
        [node(name, allocatable={GPU: 4}, labels=dict([GPU_PRESENT_LABEL])) for name in ("a", "b")]
    )
    pods = [gpu_pod("p1", 0, 2), gpu_pod("p2", 0, 2), gpu_pod("p3", 0, 4)]
    placement = {"p1/0": "a", "p2/0": "a", "p3/0": "b"}
    report = predict_for_plan(
        pods, cluster, _Plan(placement), time_limit=0.5, clock=_Ticking(1.0), max_work=10**9
    )
    assert "scheduler model" in report.cut_short
    assert report.verdict in ("at-risk", "unknown")
    assert report.verdict_with_remedy != "lands"
    assert report.to_dict()["cut_short"] == list(report.cut_short)


def test_an_unbounded_plan_phase_is_not_cut():
    cluster = pool(2, gpus=4)
    pods = [gpu_pod("p1", 0, 2), gpu_pod("p2", 0, 2), gpu_pod("p3", 0, 4)]
    report = predict_for_plan(
        pods,
        cluster,
        _Plan({"p1/0": "n0000", "p2/0": "n0000", "p3/0": "n0001"}),
        config=ScoringConfig(resources=((GPU, 1),)),
    )
    assert report.cut_short == ()
    assert report.prediction.exhaustive
    assert report.verdict == "strands" and report.verdict_with_remedy == "lands"


def test_node_classes_ignore_labels_no_pod_selects_on():
    # every real node carries its own kubernetes.io/hostname: identical nodes must still collapse
    nodes = [
        node(
            f"n{i}",
            allocatable={GPU: 4},
            labels={"kubernetes.io/hostname": f"n{i}", **dict([GPU_PRESENT_LABEL])},
        )
        for i in range(3)
    ]
    pods = [gpu_pod("w", r, 1) for r in range(3)]
    prediction = predict(
        pods, ClusterSnapshot.of(nodes), config=ScoringConfig(resources=((GPU, 1),))
    )
    assert prediction.exhaustive and prediction.outcomes_explored == 1
    assert prediction.node_outcomes == 3 * 2 * 1  # node-level outcomes still counted


def test_random_tie_seeds_stay_reproducible_under_a_budget():
    pods = [
        gpu_pod("w", r, g) for r, g in enumerate(itertools.islice(itertools.cycle([1, 2, 4]), 9))
    ]
    cluster = ClusterSnapshot.of(
        [
            node(
                f"n{i}",
                allocatable={GPU: random.Random(i).choice([2, 4, 8])},
                labels=dict([GPU_PRESENT_LABEL]),
            )
            for i in range(8)
        ]
    )
    first = predict(pods, cluster, max_branches=1, budget=Budget(5_000))
    again = predict(pods, cluster, max_branches=1, budget=Budget(5_000))
    assert first == again and not first.exhaustive and first.verdict != "lands"
