"""The scheduler model: the documented stranding tables, formulas, ties, unknowns, remedies.

Then its decision modules at the edges issue 18 found untested: every refusal of
the scoring configuration with its exact words, the configuration's document and
description, preferred-term operators at their bounds, the engine's work budget
and deadline, kube-scheduler's sample size with a percentage, and what the engine
says about a pod nothing fits.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import pytest

from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, NodeState, Taint, Toleration, node
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
from vfcore.placement.scheduler.engine import Budget, Engine, num_feasible_nodes_to_find
from vfcore.placement.scheduler.scoring import (
    DEFAULT_MILLI_CPU_REQUEST,
    PreferredTerm,
    intolerable_prefer_no_schedule,
    nonzero_request,
    normalised_totals,
    parse_kube_version,
)
from vfcore.placement.scheduler.simulation import ByPodCount, LastTie, RandomTie
from vfcore.placement.scheduler.workloads import SpreadConstraint

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


SHAPE_HINT = "write points as (utilization 0..100, score 0..10)"


def refusal(make: Callable[[], object]) -> tuple[str, str, str]:
    with pytest.raises(InvalidInputError) as caught:
        make()
    err = caught.value
    return err.rule, err.message, err.hint


# -- ScoringConfig: every refusal, in its own words ---------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"strategy": "Spread"},
            (
                "invalid-scoring-strategy",
                "scoring strategy 'Spread' is not one of LeastAllocated, MostAllocated, "
                "RequestedToCapacityRatio",
                "use LeastAllocated (the default), MostAllocated or RequestedToCapacityRatio",
            ),
        ),
        (
            {"resources": ()},
            (
                "invalid-scoring-resources",
                "the scoring strategy lists no resources",
                "list at least one, e.g. resources=(('cpu', 1), ('memory', 1))",
            ),
        ),
        (
            {"resources": (("", 1),)},
            (
                "invalid-scoring-resources",
                "a scored resource has an empty name",
                "name it, e.g. 'nvidia.com/gpu'",
            ),
        ),
        (
            {"resources": ((GPU, 0),)},
            (
                "invalid-scoring-resources",
                f"resource {GPU} has weight 0, outside 1..100",
                "give every scored resource an integer weight from 1 to 100",
            ),
        ),
        (
            {"resources": ((GPU, 101),)},
            (
                "invalid-scoring-resources",
                f"resource {GPU} has weight 101, outside 1..100",
                "give every scored resource an integer weight from 1 to 100",
            ),
        ),
        (
            {"resources": ((GPU, True),)},
            (
                "invalid-scoring-resources",
                f"resource {GPU} has weight True, outside 1..100",
                "give every scored resource an integer weight from 1 to 100",
            ),
        ),
        (
            {"resources": ((GPU, 1.5),)},
            (
                "invalid-scoring-resources",
                f"resource {GPU} has weight 1.5, outside 1..100",
                "give every scored resource an integer weight from 1 to 100",
            ),
        ),
        (
            {"resources": (("cpu", 1), (GPU, 1), ("cpu", 2))},
            (
                "invalid-scoring-resources",
                "resources ['cpu'] are listed more than once",
                "list each resource once",
            ),
        ),
        (
            {"shape": ()},
            (
                "invalid-scoring-shape",
                "the RequestedToCapacityRatio shape has no points",
                "give at least one (utilization, score) point, e.g. ((0, 0), (100, 10))",
            ),
        ),
        (
            {"shape": ((0, 0), (100, 2.5))},
            (
                "invalid-scoring-shape",
                "shape point (100, 2.5) is not a pair of integers",
                SHAPE_HINT,
            ),
        ),
        (
            {"shape": ((0.5, 0),)},
            ("invalid-scoring-shape", "shape point (0.5, 0) is not a pair of integers", SHAPE_HINT),
        ),
        (
            {"shape": ((0, 0), (101, 10))},
            (
                "invalid-scoring-shape",
                "shape point (101, 10) is outside utilization 0..100, score 0..10",
                SHAPE_HINT,
            ),
        ),
        (
            {"shape": ((0, 0), (50, 11))},
            (
                "invalid-scoring-shape",
                "shape point (50, 11) is outside utilization 0..100, score 0..10",
                SHAPE_HINT,
            ),
        ),
        (
            {"shape": ((0, 0), (50, 5), (50, 10))},
            (
                "invalid-scoring-shape",
                "shape utilizations [0, 50, 50] are not strictly increasing",
                "sort the points by utilization, each once",
            ),
        ),
        (
            {"balanced_resources": ("cpu", "cpu")},
            (
                "invalid-balanced-resources",
                "balanced_resources ['cpu', 'cpu'] has an empty or repeated name",
                "list each resource once, e.g. ('cpu', 'memory')",
            ),
        ),
        (
            {"balanced_resources": ("cpu", "")},
            (
                "invalid-balanced-resources",
                "balanced_resources ['cpu', ''] has an empty or repeated name",
                "list each resource once, e.g. ('cpu', 'memory')",
            ),
        ),
        (
            {"kube_version": "1.28"},
            (
                "unsupported-kube-version",
                "Kubernetes 1.28 is not modelled: the model predicts 1.29 to 1.36",
                "give one of 1.29, 1.30, 1.31, 1.32, 1.33, 1.34, 1.35, 1.36; a newer cluster "
                "is closest to 1.36, an older one to 1.29",
            ),
        ),
        (
            {"kube_version": "one.36"},
            (
                "invalid-kube-version",
                "kube version 'one.36' is not a Kubernetes minor version such as 1.36",
                "give MAJOR.MINOR, e.g. --kube-version 1.36 (a v prefix and a patch number "
                "are accepted)",
            ),
        ),
    ],
)
def test_scoring_config_refusals_say_what_and_why(
    kwargs: dict[str, Any], expected: tuple[str, str, str]
) -> None:
    assert refusal(lambda: ScoringConfig(**kwargs)) == expected


@pytest.mark.parametrize(
    "label", ["fit_weight", "balanced_weight", "taint_weight", "node_affinity_weight"]
)
@pytest.mark.parametrize("bad", [-1, 1.0, True])
def test_each_plugin_weight_is_refused_by_its_own_name(label: str, bad: object) -> None:
    assert refusal(lambda: ScoringConfig(**{label: bad})) == (  # type: ignore[arg-type]
        "invalid-plugin-weight",
        f"{label} is {bad!r}; a plugin weight is an integer >= 0",
        "use 1 (the default), a larger integer, or 0 to turn the plugin off",
    )


def test_scoring_config_accepts_its_bounds() -> None:
    cfg = ScoringConfig(
        resources=((GPU, 100), ("cpu", 1)),
        shape=((0, 10), (100, 0)),
        fit_weight=0,
        balanced_weight=0,
        taint_weight=0,
        node_affinity_weight=0,
        kube_version="v1.29.3",
    )
    assert cfg.kube_version == "1.29"
    assert ScoringConfig(shape=((0, 0),)).shape == ((0, 0),)
    assert parse_kube_version("1.36") == "1.36"


def test_scoring_config_document_and_description() -> None:
    cfg = ScoringConfig(
        strategy="RequestedToCapacityRatio",
        resources=((GPU, 3), ("cpu", 1)),
        shape=((0, 0), (50, 4), (100, 10)),
        fit_weight=2,
        balanced_weight=0,
        balanced_resources=("cpu", "memory", GPU),
        kube_version="1.35",
        taint_weight=5,
        node_affinity_weight=7,
        spread_weight=4,
        interpod_weight=6,
        image_weight=8,
        default_spread=(SpreadConstraint(2, "zone", "DoNotSchedule"),),
        percentage_of_nodes_to_score=30,
    )
    assert cfg.to_dict() == {
        "strategy": "RequestedToCapacityRatio",
        "resources": [{"name": GPU, "weight": 3}, {"name": "cpu", "weight": 1}],
        "shape": [
            {"utilization": 0, "score": 0},
            {"utilization": 50, "score": 4},
            {"utilization": 100, "score": 10},
        ],
        "fit_weight": 2,
        "balanced_weight": 0,
        "balanced_resources": ["cpu", "memory", GPU],
        "kube_version": "1.35",
        "taint_weight": 5,
        "node_affinity_weight": 7,
        "spread_weight": 4,
        "interpod_weight": 6,
        "image_weight": 8,
        "default_spread": [
            {
                "max_skew": 2,
                "topology_key": "zone",
                "when_unsatisfiable": "DoNotSchedule",
                "selector": None,
            }
        ],
        "percentage_of_nodes_to_score": 30,
    }
    assert cfg.describe() == (
        f"RequestedToCapacityRatio on {GPU}×3, cpu×1 (weight 2) shape [[0, 0], [50, 4], [100, 10]]"
        f" + BalancedAllocation on cpu, memory, {GPU} (weight 0)"
    )
    assert ScoringConfig(strategy="MostAllocated").describe() == (
        "MostAllocated on cpu×1, memory×1 (weight 1) + BalancedAllocation on cpu, memory (weight 1)"
    )


# -- PreferredTerm: weights and operators at their bounds ---------------------------------------


@pytest.mark.parametrize("weight", [1, 100])
def test_a_preferred_term_weight_of_1_or_100_is_accepted(weight: int) -> None:
    assert PreferredTerm(weight, ()).weight == weight


@pytest.mark.parametrize("weight", [0, 101, True, 2.0])
def test_a_preferred_term_weight_outside_1_to_100_is_refused(weight: object) -> None:
    assert refusal(lambda: PreferredTerm(weight, ())) == (  # type: ignore[arg-type]
        "invalid-preferred-term",
        f"a preferred node-affinity term has weight {weight!r}, outside 1..100",
        "give each preferred term an integer weight from 1 to 100",
    )


def test_a_preferred_term_operator_is_refused_by_name() -> None:
    assert refusal(lambda: PreferredTerm(1, (("zone", "Near", ("a",)),))) == (
        "invalid-preferred-term",
        "requirement on 'zone' has operator 'Near'",
        "use one of In, NotIn, Exists, DoesNotExist, Gt, Lt",
    )


@pytest.mark.parametrize(
    ("expression", "labels", "matches"),
    [
        (("zone", "NotIn", ("a",)), {}, True),
        (("zone", "NotIn", ("a",)), {"zone": "b"}, True),
        (("zone", "NotIn", ("a",)), {"zone": "a"}, False),
        (("zone", "DoesNotExist", ()), {}, True),
        (("zone", "DoesNotExist", ()), {"zone": "a"}, False),
        (("gpus", "Gt", ("4",)), {"gpus": "5"}, True),
        (("gpus", "Gt", ("4",)), {"gpus": "4"}, False),
        (("gpus", "Lt", ("4",)), {"gpus": "3"}, True),
        (("gpus", "Lt", ("4",)), {"gpus": "4"}, False),
        (("gpus", "Lt", ("4",)), {"gpus": "5"}, False),
        (("gpus", "Lt", ("4",)), {}, False),  # no label: never a number
        (("gpus", "Gt", ("4",)), {"gpus": "many"}, False),
        (("gpus", "Gt", ()), {"gpus": "5"}, False),  # no bound given
    ],
)
def test_preferred_term_operators_at_their_bounds(
    expression: tuple[str, str, tuple[str, ...]], labels: dict[str, str], matches: bool
) -> None:
    assert PreferredTerm(1, (expression,)).matches(labels) is matches


# -- small scoring rules ------------------------------------------------------------------------


def test_nonzero_request_defaults_per_resource() -> None:
    assert nonzero_request({}, "cpu") == DEFAULT_MILLI_CPU_REQUEST
    assert nonzero_request({}, "memory") == DEFAULT_MEMORY_REQUEST
    assert nonzero_request({"memory": 5}, "memory") == 5
    assert nonzero_request({"cpu": 0}, "cpu") == DEFAULT_MILLI_CPU_REQUEST


def test_only_a_toleration_for_every_effect_or_prefer_no_schedule_counts_for_the_score() -> None:
    soft = Taint(GPU, "present", "PreferNoSchedule")
    assert intolerable_prefer_no_schedule([soft], [Toleration(GPU, "Exists", effect=None)]) == 0
    assert (
        intolerable_prefer_no_schedule(
            [soft], [Toleration(GPU, "Exists", effect="PreferNoSchedule")]
        )
        == 0
    )
    assert (
        intolerable_prefer_no_schedule([soft], [Toleration(GPU, "Exists", effect="NoSchedule")])
        == 1
    )
    hard = Taint(GPU, "present", "NoSchedule")
    assert intolerable_prefer_no_schedule([hard, soft, soft], []) == 2


def test_normalised_totals_weight_1_counts_and_each_plugin_is_judged_on_its_own() -> None:
    cfg = ScoringConfig(taint_weight=1, node_affinity_weight=1)
    assert normalised_totals(cfg, [10, 10], [0, 1], [0, 0]) == [110, 10]
    # taints the same everywhere (left out), affinity differs (still added)
    assert normalised_totals(ScoringConfig(), [10, 10], [1, 1], [0, 50]) == [10, 210]


# -- Budget ---------------------------------------------------------------------------------------


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_budget_spends_exactly_its_work() -> None:
    budget = Budget(5)
    assert budget.charge(2) and budget.used == 2
    assert budget.charge(3) and budget.used == 5  # exactly the bound: still within
    assert not budget.charge(1)
    assert budget.used == 6


def test_a_budget_of_zero_allows_a_free_charge_only() -> None:
    assert Budget(0).charge(0)
    assert not Budget(0).charge(1)


def test_a_budget_deadline_is_seconds_after_now_and_inclusive() -> None:
    clock = Clock(100.0)
    budget = Budget(10, seconds=5.0, clock=clock)
    assert budget.deadline == 105.0
    assert not budget.out_of_time()
    clock.now = 105.0
    assert not budget.out_of_time() and budget.charge(1)
    clock.now = 105.5
    assert budget.out_of_time() and not budget.charge(1)


def test_a_budget_without_both_seconds_and_clock_has_no_deadline() -> None:
    assert Budget(10, seconds=5.0).deadline is None
    clocked = Budget(10, clock=Clock())
    assert clocked.deadline is None and not clocked.out_of_time() and clocked.charge(10)


def test_a_shared_budget_keeps_the_deadline_and_has_its_own_work() -> None:
    clock = Clock(0.0)
    parent = Budget(100, seconds=1.0, clock=clock)
    child = parent.share(3)
    assert (child.work, child.used, child.deadline) == (3, 0, 1.0)
    assert child.charge(3) and not child.charge(1)
    clock.now = 2.0
    assert child.out_of_time()


# -- num_feasible_nodes_to_find with a percentage --------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "percentage", "found"),
    [
        (20_000, 1, 200),  # 1 % is taken as given (kube-scheduler's floor of 5 % is for adaptive)
        (20_000, 2, 400),
        (5_000, 1, 100),  # never fewer than 100
        (1_000, 10, 100),
        (1_000, 100, 1_000),
        (99, 10, 99),
        (100, 0, 100),
        (20_000, 0, 1_000),  # adaptive: 50 - 160 → 5 %
    ],
)
def test_num_feasible_nodes_to_find_with_a_percentage(
    nodes: int, percentage: int, found: int
) -> None:
    assert num_feasible_nodes_to_find(nodes, percentage) == found


# -- the engine ---------------------------------------------------------------------------------


def pod(name: str, workload: str = "w", **requests: int) -> PodRequest:
    return PodRequest(name, workload, 0, tuple(sorted(requests.items())))


def test_best_of_nothing_that_fits_is_none_and_no_states() -> None:
    cluster = ClusterSnapshot.of([node("a", allocatable={"cpu": 1000})])
    engine = Engine([pod("w/0", cpu=2000)], cluster, ScoringConfig(), {}, "empty")
    classes = engine.initial_classes()
    assert engine.best(0, classes) == (None, [])


def test_a_resource_the_pod_does_not_request_may_be_overcommitted() -> None:
    # bound pods take more memory than the node has left allocatable (allocatable shrank);
    # a pod asking for none is not refused for it (only requested resources are checked)
    n = node("a", allocatable={"cpu": 4000, "memory": 8 * GIB}, requested={"memory": 9 * GIB})
    sim = simulate([pod("w/0", cpu=1000)], ClusterSnapshot.of([n]))
    assert sim.placements == (("w/0", "a"),)
    assert sim.stranded == ()


def test_the_reasons_line_counts_what_the_run_placed_on_top_of_what_is_bound() -> None:
    # 4 cpu / 16 GiB, 1 cpu + 8 GiB bound; the run places 2 cpu + 4 GiB; the next pod
    # (2 cpu + 2 GiB) is short of cpu only: 12 GiB of 16 are taken, not 8 + 12 + 4
    n = node(
        "a",
        allocatable={"cpu": 4000, "memory": 16 * GIB, "pods": 3},
        requested={"cpu": 1000, "memory": 8 * GIB, "pods": 1},
    )
    first = pod("w/0", cpu=2000, memory=4 * GIB)
    second = pod("w/1", cpu=2000, memory=2 * GIB)
    sim = simulate([first, second], ClusterSnapshot.of([n]))
    assert sim.placements == (("w/0", "a"),)
    assert [(s.pod, s.reason) for s in sim.stranded] == [
        ("w/1", "0/1 nodes fit w/1: 1 Insufficient cpu")
    ]


def test_pods_of_one_shape_keep_their_own_remedy_affinity() -> None:
    # equal shapes, workloads pinned by a remedy's affinity: their kinds must not merge
    cluster = ClusterSnapshot.of(
        [node("a", allocatable={"cpu": 4000}), node("b", allocatable={"cpu": 4000})]
    )

    def w(workload: str, cpu: int = 1000) -> PodRequest:
        return pod(f"{workload}/0", workload=workload, cpu=cpu)

    # free/0 takes a (first of a tie); pinned/0 must follow it although b scores higher
    sim = simulate([w("free"), w("pinned")], cluster, affinity={"pinned": ["a"]})
    assert sim.placements == (("free/0", "a"), ("pinned/0", "a"))
    # pinned/0 to b; free/0 is not pinned with it and takes the emptier a
    sim = simulate([w("pinned"), w("free")], cluster, affinity={"pinned": ["b"]})
    assert sim.placements == (("pinned/0", "b"), ("free/0", "a"))
    # two workloads pinned to different nodes
    sim = simulate([w("p1"), w("p2")], cluster, affinity={"p1": ["a"], "p2": ["b"]})
    assert sim.placements == (("p1/0", "a"), ("p2/0", "b"))
    sim = simulate([w("p1"), w("p2")], cluster, affinity={"p1": ["b"], "p2": ["b"]})
    assert sim.placements == (("p1/0", "b"), ("p2/0", "b"))
    stranded = simulate([w("pinned", 5000)], cluster, affinity={"pinned": ["b"]})
    assert stranded.stranded[0].reason == (
        "0/2 nodes fit pinned/0: 1 Insufficient cpu, "
        "1 node(s) didn't match Pod's node affinity/selector"
    )


@pytest.mark.parametrize("bracket", ["empty", "full"])
def test_the_simulation_says_how_unknown_nodes_were_bracketed(bracket: str) -> None:
    n = node("a", allocatable={"cpu": 4000}, unknown_reason="no pods listed")
    sim = simulate([pod("w/0", cpu=1000)], ClusterSnapshot.of([n]), unknown_as=bracket)  # type: ignore[arg-type]
    assert sim.unknown_as == bracket
    assert sim.unknown_nodes == ("a",)
    assert bool(sim.placements) is (bracket == "empty")


# -- the simulation: tie policies, refusals, stranded steps ------------------------------------


def test_last_tie_takes_the_node_whose_name_sorts_last_not_the_highest_state() -> None:
    # state 0 holds "z", state 1 holds "a" and "b": the last name is z, in state 0
    assert LastTie().choose([0, 1], {0: ["z"], 1: ["a", "b"]}) == (0, 0)
    assert LastTie().choose([0, 1], {0: ["a"], 1: ["b", "c"]}) == (1, 1)


def test_random_tie_draws_over_the_tied_nodes_in_name_order() -> None:
    classes = {0: ["c", "d"], 1: ["a"]}
    names = ["a", "c", "d"]  # the states ordered by their first member's name
    where = {"a": (1, 0), "c": (0, 0), "d": (0, 1)}
    for seed in range(6):
        pick = random.Random(seed).randrange(3)
        assert RandomTie(random.Random(seed)).choose([0, 1], classes) == where[names[pick]]


def test_random_tie_draws_between_two_single_nodes_and_not_for_one() -> None:
    rng = random.Random(7)
    before = rng.getstate()
    assert RandomTie(rng).choose([3], {3: ["a"]}) == (3, 0)
    assert rng.getstate() == before  # one tied node: nothing drawn
    seen = {RandomTie(rng).choose([0, 1], {0: ["a"], 1: ["b"]}) for _ in range(40)}
    assert seen == {(0, 0), (1, 0)}
    seen = {RandomTie(rng).choose([0], {0: ["a", "b"]}) for _ in range(40)}
    assert seen == {(0, 0), (0, 1)}


def test_spread_and_pack_take_the_fewest_and_the_most_pods() -> None:
    cluster = ClusterSnapshot.of([node(n, allocatable={"cpu": 8000}) for n in ("a", "b", "c")])
    engine = Engine([pod("w/0", cpu=1000)], cluster, ScoringConfig(), {}, "empty")
    (empty,) = engine.initial_classes()
    one = engine.successor(0, empty)
    two = engine.successor(0, one)
    classes = {empty: ["c"], one: ["b"], two: ["a"]}
    spread = ByPodCount(engine, fewest=True)
    pack = ByPodCount(engine, fewest=False)
    assert (spread.name, pack.name) == ("spread", "pack")
    assert spread.choose([two, one, empty], classes) == (empty, 0)
    assert pack.choose([empty, one, two], classes) == (two, 0)
    assert pack.choose([empty, one], classes) == (one, 0)


def test_a_stranded_pod_step_has_no_node_score_or_tie() -> None:
    sim = simulate(
        [pod("w/0", cpu=9000)], ClusterSnapshot.of([node("a", allocatable={"cpu": 1000})])
    )
    assert [(s.pod, s.node, s.score, s.tied_nodes, s.tied_states) for s in sim.steps] == [
        ("w/0", None, None, 0, 0)
    ]


def test_simulation_refusals_say_what_and_why() -> None:
    cluster = ClusterSnapshot.of([node("a", allocatable={"cpu": 1000})])
    p0, p1 = pod("w/0", cpu=1), pod("w/1", cpu=1)
    assert refusal(lambda: simulate([p0], cluster, tie="middle")) == (  # type: ignore[arg-type]
        "invalid-tie-policy",
        "tie policy 'middle' is not 'first', 'last' or a random.Random",
        "pass tie='first', tie='last' or tie=random.Random(<seed>)",
    )
    assert refusal(lambda: simulate([p0], cluster, unknown_as="half")) == (  # type: ignore[arg-type]
        "invalid-unknown-bracket",
        "unknown_as is 'half'",
        "use 'empty' or 'full'",
    )
    assert refusal(lambda: simulate([p0, p0], cluster)) == (
        "duplicate-pod",
        "pod w/0 is listed twice",
        "pass each pod once (pods are named <node>/<replica>)",
    )
    assert refusal(lambda: simulate([p0, p1], cluster, order=["w/0", "w/2"])) == (
        "invalid-order",
        "the apply order is not a permutation of the pods (missing ['w/1'], "
        "unknown or repeated ['w/2'])",
        "list every pod exactly once",
    )
    assert refusal(lambda: simulate([p0, p1], cluster, order=["w/0", "w/0", "w/1"]))[1] == (
        "the apply order is not a permutation of the pods (missing [], unknown or repeated ['w/0'])"
    )
    assert refusal(lambda: simulate([p0, p1], cluster, order=["w/0", "w/0"]))[1] == (
        "the apply order is not a permutation of the pods (missing ['w/1'], "
        "unknown or repeated ['w/0'])"
    )


def test_a_node_score_document_names_each_plugin() -> None:
    n = node("a", allocatable={GPU: 4})
    p = PodRequest("p/0", "p", 0, ((GPU, 2),))
    score = node_score(p, n, config=ScoringConfig(resources=((GPU, 1),), fit_weight=2))
    assert score.to_dict() == {"fit": 50, "balanced": 0, "total": 100}


def test_taint_toleration_counts_when_every_node_has_a_soft_taint() -> None:
    # no node is free of PreferNoSchedule taints; the one with fewer still wins
    soft = [Taint(f"soft-{i}", "", "PreferNoSchedule") for i in range(2)]
    cluster = ClusterSnapshot.of(
        [
            node("a", allocatable={"cpu": 4000}, taints=soft),
            node("b", allocatable={"cpu": 4000}, taints=soft[:1]),
        ]
    )
    assert simulate([pod("w/0", cpu=1000)], cluster).placements == (("w/0", "b"),)
