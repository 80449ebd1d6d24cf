"""The scheduler model: the documented stranding tables, formulas, ties, unknowns, remedies."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Mapping, Sequence
from fractions import Fraction

import pytest

from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, NodeState, Taint, node
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.fit import SELECTOR_MISMATCH, fits
from vfcore.placement.scheduler import (
    DEFAULT_MEMORY_REQUEST,
    Remedy,
    SchedulerPrediction,
    ScoringConfig,
    claim_size,
    node_score,
    predict,
    predict_for_plan,
    remedy,
    simulate,
    waves_of,
)

GPU = "nvidia.com/gpu"
FOO = "intel.com/foo"
GIB = 2**30
GPU_SCORED = ScoringConfig(resources=((GPU, 1),))
GPU_MOST = ScoringConfig(strategy="MostAllocated", resources=((GPU, 1),))
FOO_SCORED = ScoringConfig(resources=((FOO, 1),))


def gpu_pod(workload: str, replica: int, gpus: int, **extra: int) -> PodRequest:
    return PodRequest(
        pod=f"{workload}/{replica}",
        node=workload,
        replica=replica,
        requests=tuple(sorted({GPU: gpus, **extra}.items())),
        node_selector=(GPU_PRESENT_LABEL,),
        tolerations=(GPU_TOLERATION,),
        slice="whole",
    )


def gpu_node(name: str, gpus: int, **kw: object) -> NodeState:
    alloc = {GPU: gpus, **kw.pop("alloc", {})}  # type: ignore[dict-item]
    return node(name, allocatable=alloc, labels=dict([GPU_PRESENT_LABEL]), **kw)  # type: ignore[arg-type]


def snapshot(*nodes: NodeState) -> ClusterSnapshot:
    return ClusterSnapshot.of(nodes)


def check_exact(pods: Sequence[PodRequest], cluster: ClusterSnapshot, placement: Mapping[str, str]):
    """An independent check that a hand-written placement is an exact packing."""
    extra: dict[str, dict[str, int]] = {n.name: {} for n in cluster.nodes}
    for pod in pods:
        where = placement[pod.pod]
        assert fits(pod, cluster.node(where), extra[where]), (pod.pod, where)
        for r, units in pod.requests:
            extra[where][r] = extra[where].get(r, 0) + units
        extra[where]["pods"] = extra[where].get("pods", 0) + 1


def unmutated(fn, *args, **kwargs):
    """Call ``fn`` and check that it mutated none of its arguments."""
    before = copy.deepcopy((args, kwargs))
    out = fn(*args, **kwargs)
    assert (args, kwargs) == before, "inputs must never be mutated"
    return out


# -- the documented cases (docs/scheduler-model.md, worked example) ------------------------------

TWO_FOUR_GPU = snapshot(gpu_node("a", 4), gpu_node("b", 4))
PODS_224 = [gpu_pod("p1", 0, 2), gpu_pod("p2", 0, 2), gpu_pod("p3", 0, 4)]
EXACT_224 = {"p1/0": "a", "p2/0": "a", "p3/0": "b"}

# The same with proportional cpu/memory and default scoring (no GPU weight).
CPU_MEM_NODE = {"cpu": 16_000, "memory": 64 * GIB}
TWO_FOUR_GPU_CPU = snapshot(
    gpu_node("a", 4, alloc=CPU_MEM_NODE), gpu_node("b", 4, alloc=CPU_MEM_NODE)
)
PODS_224_PROPORTIONAL = [
    gpu_pod("p1", 0, 2, cpu=8_000, memory=32 * GIB),
    gpu_pod("p2", 0, 2, cpu=8_000, memory=32 * GIB),
    gpu_pod("p3", 0, 4, cpu=16_000, memory=64 * GIB),
]

TWO_EIGHT_GPU = snapshot(gpu_node("a", 8), gpu_node("b", 8))
PODS_3355 = [gpu_pod("x", 0, 3), gpu_pod("x", 1, 3), gpu_pod("y", 0, 5), gpu_pod("y", 1, 5)]
EXACT_3355 = {"x/0": "a", "y/0": "a", "x/1": "b", "y/1": "b"}

K68036 = snapshot(
    node("n1", allocatable={FOO: 4}),
    node("n2", allocatable={FOO: 4}),
    node("n3", allocatable={FOO: 2}),
)
JOBS_244 = [
    PodRequest("job1/0", "job1", 0, ((FOO, 2),)),
    PodRequest("job2/0", "job2", 0, ((FOO, 4),)),
    PodRequest("job3/0", "job3", 0, ((FOO, 4),)),
]
EXACT_244 = {"job1/0": "n3", "job2/0": "n1", "job3/0": "n2"}

CASES = {
    "2,2,4 GPUs on two 4-GPU nodes strand under LeastAllocated when GPUs are scored": (
        PODS_224,
        TWO_FOUR_GPU,
        GPU_SCORED,
        EXACT_224,
        ("p3/0",),
        "0/2 nodes fit p3/0: 2 Insufficient nvidia.com/gpu",
    ),
    "2,2,4 GPUs with proportional cpu/memory strand under default scoring (no GPU weight)": (
        PODS_224_PROPORTIONAL,
        TWO_FOUR_GPU_CPU,
        ScoringConfig(),
        EXACT_224,
        ("p3/0",),
        "0/2 nodes fit p3/0: 2 Insufficient cpu, 2 Insufficient memory, 2 Insufficient nvidia.com/gpu",
    ),
    "3,3,5,5 GPUs on two 8-GPU nodes strand under MostAllocated": (
        PODS_3355,
        TWO_EIGHT_GPU,
        GPU_MOST,
        EXACT_3355,
        ("y/1",),
        "0/2 nodes fit y/1: 2 Insufficient nvidia.com/gpu",
    ),
    "kubernetes#68036: nodes 4,4,2 and jobs 2,4,4 strand under LeastAllocated": (
        JOBS_244,
        K68036,
        FOO_SCORED,
        EXACT_244,
        ("job3/0",),
        "0/3 nodes fit job3/0: 3 Insufficient intel.com/foo",
    ),
}


@pytest.mark.parametrize(
    ("pods", "cluster", "config", "exact", "stranded", "line"), CASES.values(), ids=CASES.keys()
)
def test_documented_case_strands_in_every_outcome_and_the_remedy_lands(
    pods, cluster, config, exact, stranded, line
):
    check_exact(pods, cluster, exact)
    prediction = unmutated(predict, pods, cluster, config=config)
    assert prediction.verdict == "strands"
    assert prediction.exhaustive
    assert prediction.stranded_always == stranded == prediction.stranded_sometimes
    assert prediction.strand_probability == 1
    example = prediction.example_stranding
    assert example is not None and [s.pod for s in example.stranded] == list(stranded)
    assert example.stranded[0].reason == line

    fix = unmutated(remedy, pods, cluster, exact, config=config)
    assert fix.verdict_before == "strands"
    assert fix.verdict_after == "lands"
    assert fix.kind == "waves"
    assert fix.prediction.exhaustive and fix.prediction.strand_probability == 0
    # The remedy's order, re-checked independently: largest claims first.
    assert fix.order == tuple(name for wave in fix.waves for name in wave)
    sizes = [claim_size(p) for p in sorted(pods, key=lambda p: fix.order.index(p.pod))]
    assert sizes == sorted(sizes, reverse=True)
    again = simulate(pods, cluster, config=config, order=fix.order)
    assert again.lands
    check_exact(pods, cluster, again.placement)
    json.dumps(fix.to_dict())


def test_the_224_case_matches_the_reference_table_step_by_step():
    sim = simulate(PODS_224, TWO_FOUR_GPU, config=GPU_SCORED, tie="first")
    assert [(s.pod, s.node, s.score) for s in sim.steps] == [
        ("p1/0", "a", 50),  # tie: 50 on both
        ("p2/0", "b", 50),  # (4-4)*100//4 = 0 on a, (4-2)*100//4 = 50 on b
        ("p3/0", None, None),
    ]
    assert sim.steps[0].tied_nodes == 2 and sim.steps[0].tied_states == 1
    prediction = predict(PODS_224, TWO_FOUR_GPU, config=GPU_SCORED)
    # Two node-level outcomes (a or b first), one up to swapping the identical nodes.
    assert (prediction.node_outcomes, prediction.outcomes_explored) == (2, 1)


def test_least_allocated_places_the_3355_case_that_most_allocated_strands():
    assert predict(PODS_3355, TWO_EIGHT_GPU, config=GPU_SCORED).verdict == "lands"


def test_default_scoring_ignores_gpu_occupancy():
    pod = gpu_pod("d", 0, 1, cpu=1_000, memory=4 * GIB)
    empty = gpu_node("a", 4, alloc=CPU_MEM_NODE)
    busy = gpu_node("b", 4, alloc=CPU_MEM_NODE, requested={GPU: 3})
    assert node_score(pod, empty) == node_score(pod, busy)
    assert node_score(pod, empty, config=GPU_SCORED) != node_score(pod, busy, config=GPU_SCORED)


BIG_NODE = {"cpu": 32_000, "memory": 128 * GIB}
TWO_FOUR_GPU_BIG = snapshot(gpu_node("a", 4, alloc=BIG_NODE), gpu_node("b", 4, alloc=BIG_NODE))


def test_default_scoring_with_no_requests_spreads_on_small_nodes():
    # GPU pods with no cpu/memory requests count as 100m / 200 MiB: on 16-core nodes
    # (16000-200)*100//16000 = 98 < 99, so P2 goes to the empty node and P3 strands.
    prediction = predict(PODS_224, TWO_FOUR_GPU_CPU)
    assert prediction.verdict == "strands" and prediction.stranded_always == ("p3/0",)


def test_default_scoring_with_no_requests_makes_the_224_case_a_coin_toss_on_big_nodes():
    # On 32-core, 128 GiB nodes the defaults do not move the integer score (99 either way),
    # so P2 ties between the loaded and the empty node.
    prediction = predict(PODS_224, TWO_FOUR_GPU_BIG)
    assert prediction.verdict == "at-risk"
    assert prediction.stranded_sometimes == ("p3/0",) and prediction.stranded_always == ()
    assert prediction.strand_probability == Fraction(1, 2)  # the uniform-ties figure
    assert prediction.example_landing is not None and prediction.example_landing.lands
    assert prediction.example_stranding is not None
    assert not prediction.example_stranding.lands
    # 1.36 gives a tie to the earliest node, not a random one: no probability is printed,
    # only the outcomes explored. Up to 1.35 the scheduler draws uniformly and it is.
    assert "P(strand)" not in prediction.reason and "2 tie-break outcome(s)" in prediction.reason
    assert prediction.scheduler_strand_probability is None
    assert prediction.tie_break == "earliest-node"
    old = predict(PODS_224, TWO_FOUR_GPU_BIG, config=ScoringConfig(kube_version="1.35"))
    assert old.verdict == "at-risk" and old.tie_break == "uniform-random"
    assert "P(strand) = 1/2 with uniform ties (up to 1.35)" in old.reason


# -- remedies beyond waves --------------------------------------------------------------

SIX_SIX = snapshot(gpu_node("a", 6), gpu_node("b", 6))
PODS_33222 = [gpu_pod("big", i, 3) for i in range(2)] + [gpu_pod("small", i, 2) for i in range(3)]
EXACT_33222 = {"big/0": "a", "big/1": "a", "small/0": "b", "small/1": "b", "small/2": "b"}


def test_when_waves_are_not_enough_node_affinity_groups_land():
    check_exact(PODS_33222, SIX_SIX, EXACT_33222)
    waves_only = predict(
        PODS_33222, SIX_SIX, config=GPU_SCORED, order=[n for w in waves_of(PODS_33222) for n in w]
    )
    assert waves_only.verdict == "strands"
    fix = remedy(PODS_33222, SIX_SIX, EXACT_33222, config=GPU_SCORED)
    assert fix.kind == "affinity"
    assert fix.affinity == (("big", ("a",)), ("small", ("b",)))
    assert fix.affinity_map == {"big": ("a",), "small": ("b",)}
    assert fix.verdict_after == "lands"
    assert "kubernetes.io/hostname" in fix.describe() and "big → a" in fix.describe()
    assert fix.to_dict()["affinity"] == {"big": ["a"], "small": ["b"]}


def test_a_remedy_is_not_needed_when_the_model_lands():
    fix = remedy(PODS_3355, TWO_EIGHT_GPU, EXACT_3355, config=GPU_SCORED)
    assert (fix.kind, fix.verdict_before, fix.verdict_after) == ("none", "lands", "lands")
    assert "No remedy is needed" in fix.describe()


def test_the_best_remedy_is_reported_when_none_lands():
    # One workload for every pod: affinity derived from the placement allows both nodes.
    pods = [gpu_pod("w", i, g) for i, g in enumerate([3, 3, 2, 2, 2])]
    placement = {"w/0": "a", "w/1": "a", "w/2": "b", "w/3": "b", "w/4": "b"}
    fix = remedy(pods, SIX_SIX, placement, config=GPU_SCORED)
    assert fix.verdict_after == "strands"
    assert fix.kind == "none"
    assert "does better" in fix.describe()


def test_waves_group_equal_claims_largest_first():
    pods = [gpu_pod("s", 0, 1), gpu_pod("b", 1, 4), gpu_pod("b", 0, 4), gpu_pod("m", 0, 2)]
    cpu_only = PodRequest("c/0", "c", 0, (("cpu", 500),))
    assert waves_of([*pods, cpu_only]) == (("b/0", "b/1"), ("m/0",), ("s/0",), ("c/0",))
    assert claim_size(cpu_only) == (0, 500, 0)


def test_predict_for_plan_adds_a_remedy_only_when_greedy_misses_an_exact_packing():
    class FakePlan:
        verdict = "fits"
        placement = EXACT_224

    report = predict_for_plan(PODS_224, TWO_FOUR_GPU, FakePlan(), config=GPU_SCORED)
    assert report.verdict == "strands" and report.stranded == ("p3/0",)
    assert report.remedy is not None and report.remedy.verdict_after == "lands"
    data = json.loads(json.dumps(report.to_dict()))
    assert data["verdict"] == "strands" and data["remedy"]["kind"] == "waves"

    FakePlan.verdict = "does-not-fit"
    assert predict_for_plan(PODS_224, TWO_FOUR_GPU, FakePlan(), config=GPU_SCORED).remedy is None


# -- score formulas, with numbers -------------------------------------------------------


def one(gpus: int = 0, **requests: int) -> PodRequest:
    req = dict(requests)
    if gpus:
        req[GPU] = gpus
    return PodRequest("p/0", "p", 0, tuple(sorted(req.items())))


SCORES = {
    "LeastAllocated: (4-2)*100//4 = 50": (GPU_SCORED, one(2), gpu_node("a", 4), 50),
    "LeastAllocated: 0 when requested exceeds capacity": (
        GPU_SCORED,
        one(2),
        gpu_node("a", 4, requested={GPU: 3}),
        0,
    ),
    "LeastAllocated: integer division, (8-3)*100//8 = 62": (
        GPU_SCORED,
        one(3),
        gpu_node("a", 8),
        62,
    ),
    "MostAllocated: 3*100//8 = 37": (GPU_MOST, one(3), gpu_node("a", 8), 37),
    "MostAllocated: requested capped at capacity": (
        GPU_MOST,
        one(3),
        gpu_node("a", 8, requested={GPU: 7}),
        100,
    ),
    "weighted mean of gpu 50 (w3) and cpu 90 (w1): (150+90)//4 = 60": (
        ScoringConfig(resources=((GPU, 3), ("cpu", 1))),
        one(2, cpu=100),
        gpu_node("a", 4, alloc={"cpu": 1_000}),
        60,
    ),
    "cpu with no request counts 100 millicores: (1000-100)*100//1000 = 90": (
        ScoringConfig(resources=(("cpu", 1),)),
        one(1),
        gpu_node("a", 4, alloc={"cpu": 1_000}),
        90,
    ),
    "memory with no request counts 200 MiB": (
        ScoringConfig(resources=(("memory", 1),)),
        one(1),
        node("a", allocatable={"memory": 2 * DEFAULT_MEMORY_REQUEST}),
        50,
    ),
    "an extended resource the pod does not request is not scored": (
        GPU_SCORED,
        one(cpu=500),
        gpu_node("a", 4, alloc={"cpu": 1_000}),
        0,
    ),
    "a resource the node lacks is skipped": (
        ScoringConfig(resources=((GPU, 1), ("cpu", 1))),
        one(2, cpu=500),
        node("a", allocatable={GPU: 4}),
        50,
    ),
    "the pods resource is not scored": (
        ScoringConfig(resources=(("pods", 1), (GPU, 1))),
        one(2),
        gpu_node("a", 4),
        50,
    ),
    "RequestedToCapacityRatio bin-packing: utilization 37 → 37": (
        ScoringConfig(strategy="RequestedToCapacityRatio", resources=((GPU, 1),)),
        one(3),
        gpu_node("a", 8),
        37,
    ),
    "RequestedToCapacityRatio rounds the mean half away from zero: (37+50)/2 → 44": (
        ScoringConfig(strategy="RequestedToCapacityRatio", resources=((GPU, 1), ("cpu", 1))),
        one(3, cpu=500),
        gpu_node("a", 8, alloc={"cpu": 1_000}),
        44,
    ),
    "RequestedToCapacityRatio divides like Go: 100 + trunc(-1000/30) = 67": (
        ScoringConfig(
            strategy="RequestedToCapacityRatio", resources=((GPU, 1),), shape=((0, 10), (30, 0))
        ),
        one(1),
        gpu_node("a", 10),
        67,
    ),
    "RequestedToCapacityRatio leaves zero scores out of the mean": (
        ScoringConfig(strategy="RequestedToCapacityRatio", resources=((GPU, 1), ("cpu", 1))),
        one(4, cpu=0),
        gpu_node("a", 8, alloc={"cpu": 100_000}),
        50,  # cpu: 100m of 100 cores → utilization 0 → score 0, left out
    ),
}


@pytest.mark.parametrize(("config", "pod", "on", "expected"), SCORES.values(), ids=SCORES.keys())
def test_fit_score(config, pod, on, expected):
    assert node_score(pod, on, config=config).fit == expected


#: (pod, allocatable, balanced resources, score up to 1.35, score from 1.36) on an empty node.
#: Up to 1.35 the score is the balance with the pod, ``int((1 - std) * 100)``. From 1.36
#: it is ``50 + (50 + with - without) // 2``; on an empty node every fraction is 0, so
#: ``without`` is 100 and the 1.36 score is ``50 + (with - 50) // 2``.
BALANCED = {
    "cpu 50% and memory 25%: 100 - |0.5-0.25|/2*100 = 87; 1.36: 50 + 37 // 2 = 68": (
        one(cpu=500, memory=256),
        {"cpu": 1_000, "memory": 1024},
        ("cpu", "memory"),
        87,
        68,
    ),
    "equal fractions are perfectly balanced; 1.36: no change in balance = 75": (
        one(cpu=500, memory=512),
        {"cpu": 1_000, "memory": 1024},
        ("cpu", "memory"),
        100,
        75,
    ),
    "three resources: std of (0.5, 0.25, 1.0); 1.36: 50 + 18 // 2 = 59": (
        one(2, cpu=500, memory=256),
        {"cpu": 1_000, "memory": 1024, GPU: 2},
        ("cpu", "memory", GPU),
        68,  # int((1 - 0.3118...) * 100)
        59,
    ),
    "fractions are capped at 1; 1.36: 75": (
        one(cpu=2_000, memory=1024),
        {"cpu": 1_000, "memory": 1024},
        ("cpu", "memory"),
        100,
        75,
    ),
    "a pod requesting none of the resources is skipped (both versions)": (
        one(2),
        {"cpu": 1_000, "memory": 1024},
        ("cpu", "memory"),
        0,
        0,
    ),
}


@pytest.mark.parametrize(
    ("pod", "alloc", "resources", "before", "since"), BALANCED.values(), ids=BALANCED.keys()
)
def test_balanced_allocation_score(pod, alloc, resources, before, since):
    on = node("a", allocatable=alloc)
    old = ScoringConfig(balanced_resources=resources, kube_version="1.35")
    new = ScoringConfig(balanced_resources=resources)  # the default: 1.36
    assert node_score(pod, on, config=old).balanced == before
    assert node_score(pod, on, config=new).balanced == since


def test_total_is_the_weighted_sum_and_placed_pods_count():
    pod = one(2, cpu=500, memory=256)
    n = node("a", allocatable={GPU: 4, "cpu": 1_000, "memory": 1024})
    config = ScoringConfig(resources=((GPU, 1),), fit_weight=3, balanced_weight=2)
    score = node_score(pod, n, config=config)
    assert score.total == 3 * score.fit + 2 * score.balanced
    assert node_score(pod, n, config=config, placed=[one(2)]).fit == 0


# -- ties, filters and policies -----------------------------------------------------------


def test_two_identical_empty_nodes_tie_but_the_memo_collapses_them():
    cluster = snapshot(gpu_node("a", 4), gpu_node("b", 4))
    pods = [gpu_pod("w", 0, 1)]
    sim = simulate(pods, cluster, config=GPU_SCORED)
    assert (sim.steps[0].tied_nodes, sim.steps[0].tied_states) == (2, 1)
    assert sim.ties == ()  # no branching: both choices lead to the same state
    prediction = predict(pods, cluster, config=GPU_SCORED)
    assert (prediction.outcomes_explored, prediction.node_outcomes) == (1, 2)
    assert prediction.search_nodes == 1


def test_identical_nodes_make_a_large_search_small():
    cluster = snapshot(*(gpu_node(f"n{i:02d}", 4) for i in range(40)))
    pods = [gpu_pod("w", i, 1) for i in range(60)]
    prediction = predict(pods, cluster, config=GPU_SCORED)
    assert prediction.exhaustive and prediction.verdict == "lands"
    assert prediction.outcomes_explored == 1
    assert prediction.search_nodes == 60


@pytest.mark.parametrize(("tie", "first_node"), [("first", "a"), ("last", "c")])
def test_tie_policies_first_and_last(tie, first_node):
    cluster = snapshot(gpu_node("a", 4), gpu_node("b", 4), gpu_node("c", 4))
    sim = simulate([gpu_pod("w", 0, 1)], cluster, config=GPU_SCORED, tie=tie)
    assert sim.placements == (("w/0", first_node),)


def test_a_seeded_random_tie_policy_is_deterministic_and_uniform_over_nodes():
    cluster = snapshot(*(gpu_node(n, 4) for n in "abcd"))
    pods = [gpu_pod("w", 0, 1)]
    picks = [
        simulate(pods, cluster, config=GPU_SCORED, tie=random.Random(seed)).placements[0][1]
        for seed in range(200)
    ]
    again = [
        simulate(pods, cluster, config=GPU_SCORED, tie=random.Random(seed)).placements[0][1]
        for seed in range(200)
    ]
    assert picks == again
    assert set(picks) == set("abcd")


def test_filters_keep_pods_off_tainted_unlabelled_cordoned_and_not_ready_nodes():
    cluster = snapshot(
        node("plain", allocatable={GPU: 8}),
        gpu_node("cordoned", 8, unschedulable=True),
        gpu_node("down", 8, ready=False),
        gpu_node("tainted", 8, taints=[Taint("dedicated", "infra", "NoSchedule")]),
        gpu_node("ok", 1),
    )
    pods = [gpu_pod("w", 0, 1), gpu_pod("w", 1, 1)]
    sim = simulate(pods, cluster)
    assert sim.placements == (("w/0", "ok"),)
    assert sim.stranded[0].reason == (
        "0/5 nodes fit w/1: 1 Insufficient nvidia.com/gpu, "
        "1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) were unschedulable, 2 node(s) had untolerated taint(s)"
    )


def test_the_pods_limit_is_a_filter():
    cluster = snapshot(node("a", allocatable={"cpu": 10_000, "pods": 3}, requested={"pods": 1}))
    pods = [PodRequest(f"w/{i}", "w", i, (("cpu", 100),)) for i in range(3)]
    sim = simulate(pods, cluster)
    assert [p for p, _ in sim.placements] == ["w/0", "w/1"]
    assert sim.stranded[0].reason == "0/1 nodes fit w/2: 1 Too many pods"
    assert predict(pods, cluster).verdict == "strands"


def test_request_equal_to_free_fits():
    cluster = snapshot(gpu_node("a", 4, requested={GPU: 2}))
    assert simulate([gpu_pod("w", 0, 2)], cluster).lands
    assert not simulate([gpu_pod("w", 0, 3)], cluster).lands


def test_affinity_restricts_a_workload_to_its_nodes():
    cluster = snapshot(gpu_node("a", 4), gpu_node("b", 4))
    pods = [gpu_pod("w", 0, 1), gpu_pod("w", 1, 4)]
    sim = simulate(pods, cluster, config=GPU_SCORED, affinity={"w": ["b"]})
    assert sim.placements == (("w/0", "b"),)
    assert SELECTOR_MISMATCH in sim.stranded[0].reason


def test_an_explicit_order_is_the_apply_order():
    sim = simulate(PODS_224, TWO_FOUR_GPU, config=GPU_SCORED, order=["p3/0", "p1/0", "p2/0"])
    assert sim.order == ("p3/0", "p1/0", "p2/0") and sim.lands


def test_a_tiny_search_budget_falls_back_to_the_documented_bounded_search():
    prediction = predict(PODS_224, TWO_FOUR_GPU_BIG, max_branches=1, samples=4)
    assert not prediction.exhaustive
    # first, last, spread, pack and four seeded random policies
    assert prediction.outcomes_explored == 4 + 4
    # "first" packs P1, P2 on a and lands; "spread" puts P2 on the empty node and strands P3.
    assert prediction.verdict == "at-risk"
    assert prediction.example_stranding is not None
    assert prediction.example_stranding.tie == "spread"
    assert prediction.strand_probability is None
    assert predict(PODS_224, TWO_FOUR_GPU_BIG, max_branches=1, samples=4) == prediction


# -- unknown occupancy --------------------------------------------------------------------


def test_unknown_occupancy_that_matters_makes_the_verdict_unknown():
    cluster = snapshot(
        gpu_node("known", 4, requested={GPU: 4}), gpu_node("dark", 4, unknown_reason="Forbidden")
    )
    prediction = predict([gpu_pod("w", 0, 1)], cluster)
    assert prediction.verdict == "unknown"
    assert prediction.unknown_nodes == ("dark",)
    assert dict(prediction.brackets) == {"unknown-full": "strands", "unknown-empty": "lands"}
    assert "dark" in prediction.reason


def test_unknown_occupancy_brackets_agreeing_on_lands_give_lands():
    cluster = snapshot(gpu_node("known", 4), gpu_node("dark", 4, unknown_reason="Forbidden"))
    prediction = predict([gpu_pod("w", 0, 1)], cluster)
    assert prediction.verdict == "lands"
    assert dict(prediction.brackets) == {"unknown-full": "lands", "unknown-empty": "lands"}


def test_unknown_occupancy_brackets_agreeing_on_strands_give_strands():
    cluster = snapshot(gpu_node("known", 4), gpu_node("dark", 4, unknown_reason="Forbidden"))
    prediction = predict([gpu_pod("w", 0, 8)], cluster)
    assert prediction.verdict == "strands"


def test_unknown_nodes_no_pod_could_use_do_not_matter():
    cluster = snapshot(
        gpu_node("known", 4),
        node("cpu-dark", allocatable={"cpu": 1_000}, unknown_reason="Forbidden"),
    )
    prediction = predict([gpu_pod("w", 0, 1)], cluster)
    assert prediction.verdict == "lands" and prediction.unknown_nodes == ()


def test_an_unknown_node_list_is_unknown():
    cluster = ClusterSnapshot(nodes=(), nodes_unknown="nodes is forbidden")
    prediction = predict([gpu_pod("w", 0, 1)], cluster)
    assert prediction.verdict == "unknown" and "forbidden" in prediction.reason


def test_simulate_treats_unknown_nodes_as_asked():
    cluster = snapshot(gpu_node("dark", 4, unknown_reason="Forbidden"))
    assert simulate([gpu_pod("w", 0, 1)], cluster).lands
    full = simulate([gpu_pod("w", 0, 1)], cluster, unknown_as="full")
    assert not full.lands and full.unknown_nodes == ("dark",)


# -- results are data ---------------------------------------------------------------------


def test_results_are_json_safe_and_deterministic():
    a = predict(PODS_224, TWO_FOUR_GPU_BIG).to_dict()
    b = predict(PODS_224, TWO_FOUR_GPU_BIG).to_dict()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (a["strand_probability"], a["tie_break"]) == (None, "earliest-node")  # 1.36
    old = predict(PODS_224, TWO_FOUR_GPU_BIG, config=ScoringConfig(kube_version="1.35")).to_dict()
    assert (old["strand_probability"], old["tie_break"]) == ("1/2", "uniform-random")
    sim = simulate(PODS_224, TWO_FOUR_GPU, config=GPU_SCORED).to_dict()
    assert sim["stranded"] == [
        {"pod": "p3/0", "reason": "0/2 nodes fit p3/0: 2 Insufficient nvidia.com/gpu"}
    ]
    json.dumps(sim)
    assert isinstance(predict(PODS_224, TWO_FOUR_GPU), SchedulerPrediction)
    assert isinstance(remedy(PODS_224, TWO_FOUR_GPU, EXACT_224, config=GPU_SCORED), Remedy)


def test_config_describes_itself_and_round_trips_to_dict():
    config = ScoringConfig(strategy="RequestedToCapacityRatio", resources=((GPU, 2),))
    assert config.to_dict()["resources"] == [{"name": GPU, "weight": 2}]
    assert "RequestedToCapacityRatio on nvidia.com/gpu×2" in config.describe()


# -- invalid input --------------------------------------------------------------------------

BAD_CONFIGS = {
    "unknown strategy": ({"strategy": "Spread"}, "invalid-scoring-strategy"),
    "no resources": ({"resources": ()}, "invalid-scoring-resources"),
    "weight 0": ({"resources": (("cpu", 0),)}, "invalid-scoring-resources"),
    "weight 101": ({"resources": (("cpu", 101),)}, "invalid-scoring-resources"),
    "repeated resource": ({"resources": (("cpu", 1), ("cpu", 2))}, "invalid-scoring-resources"),
    "empty shape": ({"shape": ()}, "invalid-scoring-shape"),
    "shape not increasing": ({"shape": ((50, 1), (50, 2))}, "invalid-scoring-shape"),
    "shape score over 10": ({"shape": ((0, 0), (100, 11))}, "invalid-scoring-shape"),
    "negative plugin weight": ({"fit_weight": -1}, "invalid-plugin-weight"),
    "repeated balanced resource": (
        {"balanced_resources": ("cpu", "cpu")},
        "invalid-balanced-resources",
    ),
}


@pytest.mark.parametrize(("kwargs", "rule"), BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_invalid_config_is_rejected_with_a_rule(kwargs, rule):
    with pytest.raises(InvalidInputError) as err:
        ScoringConfig(**kwargs)
    assert err.value.rule == rule


BAD_CALLS = {
    "order missing a pod": (
        lambda: simulate(PODS_224, TWO_FOUR_GPU, order=["p1/0"]),
        "invalid-order",
    ),
    "duplicate pod": (lambda: simulate([*PODS_224, PODS_224[0]], TWO_FOUR_GPU), "duplicate-pod"),
    "bad tie policy": (
        lambda: simulate(PODS_224, TWO_FOUR_GPU, tie="middle"),
        "invalid-tie-policy",
    ),
    "bad budget": (
        lambda: predict(PODS_224, TWO_FOUR_GPU, max_branches=0),
        "invalid-search-budget",
    ),
    "incomplete placement": (
        lambda: remedy(PODS_224, TWO_FOUR_GPU, {"p1/0": "a"}),
        "placement-incomplete",
    ),
    "placement names an unknown pod": (
        lambda: remedy(PODS_224, TWO_FOUR_GPU, {**EXACT_224, "zz/0": "a"}),
        "placement-unknown-pod",
    ),
    "placement names an unknown node": (
        lambda: remedy(PODS_224, TWO_FOUR_GPU, {**EXACT_224, "p3/0": "zz"}),
        "placement-unknown-node",
    ),
}


@pytest.mark.parametrize(("call", "rule"), BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_invalid_calls_are_rejected_with_a_rule(call, rule):
    with pytest.raises(InvalidInputError) as err:
        call()
    assert err.value.rule == rule
