"""The classic placement cases, with the equality edges, and the plan around them.

Then the paths the classic cases never take (issue 18): ``check_placement`` is
shown every kind of invalid placement it must catch, one case each, next to the
exact fits it must accept (a resource or a card's VRAM filled to the unit);
``first_fit_decreasing`` places at an exact fit; ``pack`` gives up (UNKNOWN,
never "does not fit"), minimises nodes after FFD, and decides by the arithmetic
bounds before any solver runs.
"""

from __future__ import annotations

import pytest

from vfcore import FlowSpec, NodeSpec
from vfcore.cluster import ClusterSnapshot, GpuInfo, RuntimeClassInfo, Taint, node
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import GPU_TOLERATION, PodRequest, parse_resources_option, pod_requests
from vfcore.placement.packing import SolverConfig, check_placement, first_fit_decreasing, pack
from vfcore.placement.plan import plan, plan_pods

GPU = "nvidia.com/gpu"
LABELS = {"nvidia.com/gpu.present": "true"}
CONFIG = SolverConfig.deterministic()


def gpu_pods(*claims: int, name: str = "w") -> list[PodRequest]:
    return [
        PodRequest(
            f"{name}/{i}",
            name,
            i,
            ((GPU, c),),
            tuple(LABELS.items()),
            (GPU_TOLERATION,),
            slice="whole",
        )
        for i, c in enumerate(claims)
    ]


def gpu_nodes(*free: int, prefix: str = "n") -> list:
    return [node(f"{prefix}{i}", allocatable={GPU: f}, labels=LABELS) for i, f in enumerate(free)]


@pytest.mark.parametrize(
    ("claims", "free", "feasible"),
    [
        ((2, 2, 2), (3, 3), False),
        ((3, 2, 2), (4, 3), True),
        ((4,), (1, 1, 1, 1), False),
        ((2, 2, 4), (4, 4), True),
        ((3, 3, 5, 5), (8, 8), True),
        ((2, 4, 4), (4, 4, 2), True),
        ((4, 3, 3, 2, 2, 2), (8, 8), True),  # videoflow's greedy mix solver fails this one
        ((8,), (8,), True),  # request equal to free fits
        ((8,), (7,), False),
    ],
    ids=[
        "2-2-2-on-3-3-proven-infeasible",
        "3-2-2-on-4-3-fits",
        "4-gpu-pod-on-four-1-gpu-nodes",
        "2-2-4-on-4-4",
        "3-3-5-5-on-8-8",
        "k8s-68036-shape",
        "4-3-3-2-2-2-on-8-8",
        "equal-to-free-fits",
        "one-over-free",
    ],
)
def test_classic_cases(claims, free, feasible):
    pods, nodes = gpu_pods(*claims), gpu_nodes(*free)
    result = pack(pods, nodes, config=CONFIG)
    assert result.feasible is feasible
    assert check_placement(pods, nodes, result.assignments) == ()
    if not feasible:
        assert result.report.status == "INFEASIBLE"


def test_fourteen_pods_on_thirteen_nodes_decided_exactly():
    claims = (3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1)  # 28 GPUs
    free = (2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 0)  # 28 GPUs, one full node
    pods, nodes = gpu_pods(*claims), gpu_nodes(*free)
    result = pack(pods, nodes, config=CONFIG)
    assert result.feasible is True  # 4×3 on the 3s, 6×2 on six 2s, 4×1 on two 2s
    assert check_placement(pods, nodes, result.assignments) == ()
    tighter = gpu_nodes(*(2,) * 9, 3, 3, 3, 1)  # 28 GPUs, but only three 3-GPU holes
    assert pack(pods, tighter, config=CONFIG).feasible is False


def test_ffd_fails_where_the_exact_packing_fits():
    pods, nodes = gpu_pods(3, 3, 2, 2, 2, 2), gpu_nodes(7, 7)
    assert len(first_fit_decreasing(pods, nodes)) == 5  # FFD: 3+3 | 2+2+2, last 2 stranded
    result = pack(pods, nodes, config=CONFIG)
    assert result.feasible is True


def test_cpu_memory_and_pod_limit_are_packed_too():
    pods = [PodRequest(f"c/{i}", "c", i, (("cpu", 1500), ("memory", 2 << 30))) for i in range(4)]
    nodes = [
        node("a", allocatable={"cpu": 3000, "memory": 8 << 30, "pods": 1}),
        node("b", allocatable={"cpu": 3000, "memory": 8 << 30}),
    ]
    result = pack(pods, nodes, config=CONFIG)
    assert result.feasible is False  # a takes one pod (pods: 1), b takes two by cpu
    assert len(result.assignments) == 3


def test_taints_selectors_and_node_conditions_make_nodes_ineligible():
    pods = gpu_pods(1)
    nodes = [
        node("not-ready", allocatable={GPU: 1}, labels=LABELS, ready=False),
        node("cordoned", allocatable={GPU: 1}, labels=LABELS, unschedulable=True),
        node("unlabelled", allocatable={GPU: 1}),
        node("tainted", allocatable={GPU: 1}, labels=LABELS, taints=[Taint("dedicated", "x")]),
    ]
    result = plan_pods(pods, ClusterSnapshot.of(nodes), solver=CONFIG, predict_scheduler=False)
    assert result.verdict == "does-not-fit"
    (unplaced,) = result.unplaced
    assert unplaced.kind == "unresolvable"
    assert unplaced.summary == (
        "0/4 nodes fit w/0: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) were unschedulable, 2 node(s) had untolerated taint(s)"
    )
    tolerated = [
        *nodes[:3],
        node("tainted", allocatable={GPU: 1}, labels=LABELS, taints=[Taint(GPU, "present")]),
    ]
    assert (
        plan_pods(
            pods, ClusterSnapshot.of(tolerated), solver=CONFIG, predict_scheduler=False
        ).verdict
        == "fits"
    )


def test_unresolvable_pod_says_the_largest_host():
    result = plan_pods(
        gpu_pods(16), ClusterSnapshot.of(gpu_nodes(8, 8)), solver=CONFIG, predict_scheduler=False
    )
    (unplaced,) = result.unplaced
    assert unplaced.kind == "unresolvable"
    assert "16 nvidia.com/gpu (the largest host has 8)" in (unplaced.fix or "")


def test_unschedulable_pod_gets_the_smallest_changes():
    result = plan_pods(
        gpu_pods(2, 2, 2),
        ClusterSnapshot.of(gpu_nodes(3, 3)),
        solver=CONFIG,
        predict_scheduler=False,
    )
    assert result.verdict == "does-not-fit"
    (unplaced,) = result.unplaced
    assert unplaced.kind == "unschedulable"
    assert unplaced.summary == "0/2 nodes fit w/2: 2 Insufficient nvidia.com/gpu"
    assert unplaced.fix == "free 1 nvidia.com/gpu on n0"
    assert result.fix is not None and result.fix.startswith("add one more node shaped like n0")
    assert result.proofs  # proven by a sum, not by a timeout


def test_three_valued_verdict_brackets_unknown_occupancy():
    pods = gpu_pods(4, 4)
    busy_unknown = node("u", allocatable={GPU: 4}, labels=LABELS, unknown_reason="pods refused")
    fits_anyway = plan_pods(
        pods, ClusterSnapshot.of([*gpu_nodes(4, 4), busy_unknown]), solver=CONFIG
    )
    assert fits_anyway.verdict == "fits"
    assert "u" not in fits_anyway.placement.values()  # never counts on an unknown node
    depends = plan_pods(pods, ClusterSnapshot.of([*gpu_nodes(4), busy_unknown]), solver=CONFIG)
    assert depends.verdict == "unknown"
    hopeless = plan_pods(
        gpu_pods(4, 4, 4), ClusterSnapshot.of([*gpu_nodes(4), busy_unknown]), solver=CONFIG
    )
    assert hopeless.verdict == "does-not-fit"


def test_unknown_node_list_is_never_an_empty_cluster():
    cluster = ClusterSnapshot(nodes=(), nodes_unknown="the API refused the node listing: Forbidden")
    result = plan_pods(gpu_pods(1), cluster, solver=CONFIG)
    assert result.verdict == "unknown"
    assert [u.what for u in result.unknown] == ["nodes"]


def _flow(nb_tasks=2, gpu_count=1, memory=None):
    return FlowSpec(
        "f",
        "realtime",
        (
            NodeSpec("src", "producer"),
            NodeSpec(
                "det",
                "processor",
                ("src",),
                nb_tasks=nb_tasks,
                device_type="gpu",
                gpu_count=gpu_count,
                gpu_memory_gib=memory,
                requests=(("cpu", "2"), ("memory", "8Gi")),
            ),
            NodeSpec("sink", "consumer", ("det",)),
        ),
    )


def test_pod_claims_carry_requests_selector_and_toleration():
    pods = pod_requests(_flow(), resources={"src": {"cpu": "500m"}})
    det = [p for p in pods if p.node == "det"]
    assert [p.pod for p in det] == ["det/0", "det/1"]
    assert det[0].requests == (("cpu", 2000), ("memory", 8 << 30), (GPU, 1))
    assert det[0].node_selector == (("nvidia.com/gpu.present", "true"),)
    assert det[0].tolerations == (GPU_TOLERATION,)
    src = next(p for p in pods if p.node == "src")
    assert (src.requests, src.node_selector) == ((("cpu", 500),), ())


def test_resources_option_parsing_and_errors():
    assert parse_resources_option("det=cpu:2,memory:8Gi;src=cpu:500m") == {
        "det": {"cpu": "2", "memory": "8Gi"},
        "src": {"cpu": "500m"},
    }
    for bad in ("det", "det=", "det=cpu", "=cpu:1"):
        with pytest.raises(InvalidInputError, match="invalid-resources-option"):
            parse_resources_option(bad)
    with pytest.raises(InvalidInputError, match="unknown-node"):
        pod_requests(_flow(), resources={"nope": {"cpu": "1"}})


def _gpu_node(name, cards=2, mib=16384, **kw):
    return node(
        name,
        allocatable={"cpu": 16000, "memory": 64 << 30, GPU: cards},
        labels=LABELS,
        gpu=GpuInfo(product="T4", memory_mib=mib, count=cards),
        **kw,
    )


def test_shared_mode_fits_vram_per_card_and_reports_cards():
    spec = _flow(nb_tasks=3, memory=10)  # 3 × 10 GiB on one node with two 16 GiB cards: no
    cluster = ClusterSnapshot.of(
        [_gpu_node("g1")], runtime_classes=[RuntimeClassInfo("nvidia", "nvidia")]
    )
    result = plan(spec, cluster, gpu_mode="shared", gpu_runtime_class="nvidia", solver=CONFIG)
    assert result.verdict == "does-not-fit"
    roomy = ClusterSnapshot.of([_gpu_node("g1", cards=4)])
    ok = plan(spec, roomy, gpu_mode="shared", gpu_runtime_class="nvidia", solver=CONFIG)
    assert ok.verdict == "fits"
    cards = dict(ok.cards)
    assert sorted(cards) == ["det/0", "det/1", "det/2"]
    assert len(set(cards.values())) == 3  # 10 GiB each: one per 16 GiB card
    assert ok.problems == ()


def test_shared_mode_without_runtime_class_is_a_problem():
    result = plan(
        _flow(memory=4), ClusterSnapshot.of([_gpu_node("g1")]), gpu_mode="shared", solver=CONFIG
    )
    assert [p.code for p in result.problems] == ["shared-without-runtime-class"]


def test_nvidia_runtime_class_exists_but_none_requested():
    cluster = ClusterSnapshot.of(
        [_gpu_node("g1")], runtime_classes=[RuntimeClassInfo("nvidia", "nvidia")]
    )
    result = plan(_flow(), cluster, solver=CONFIG)
    assert [p.code for p in result.problems] == ["runtime-class-not-requested"]


def test_resource_nobody_advertises():
    pods = [PodRequest("f/0", "f", 0, (("example.com/fpga", 1),))]
    result = plan_pods(pods, ClusterSnapshot.of(gpu_nodes(2)), solver=CONFIG)
    assert result.verdict == "does-not-fit"
    assert [p.code for p in result.problems] == ["resource-not-advertised"]


def test_time_sliced_pool_cannot_serve_multi_gpu_pods():
    shared = GpuInfo(product="T4", memory_mib=16384, count=1, sharing="time-slicing", replicas=4)
    nodes = [node("ts", allocatable={GPU: 4}, labels=LABELS, gpu=shared)]
    result = plan_pods(gpu_pods(2), ClusterSnapshot.of(nodes), solver=CONFIG)
    assert result.verdict == "does-not-fit"
    assert "share GPUs by time-slicing" in result.unplaced[0].summary
    assert [p.code for p in result.problems] == ["shared-pool-multi-gpu"]
    assert (
        plan_pods(gpu_pods(1, 1, 1, 1), ClusterSnapshot.of(nodes), solver=CONFIG).verdict == "fits"
    )


def test_plan_refuses_an_invalid_flow():
    spec = FlowSpec("f", "batch", (NodeSpec("p", "processor"),))
    with pytest.raises(ValueError, match="root-not-producer"):
        plan(spec, ClusterSnapshot.of(gpu_nodes(1)))


def test_solver_report_is_deterministic_and_says_so():
    result = pack(gpu_pods(3, 2, 2), gpu_nodes(4, 3), config=CONFIG)
    assert result.report.deterministic is True
    again = pack(gpu_pods(3, 2, 2), gpu_nodes(4, 3), config=CONFIG)
    assert again.assignments == result.assignments
    assert result.report.to_dict()["status"] in ("OPTIMAL", "FEASIBLE")


# -- shared GPU slices ------------------------------------------------------------------------------


def shared_pods(*gib: int, name: str = "s") -> list[PodRequest]:
    return [
        PodRequest(
            f"{name}/{i}",
            name,
            i,
            (),
            tuple(LABELS.items()),
            (GPU_TOLERATION,),
            gpu_memory_mib=g * 1024,
            slice="shared",
        )
        for i, g in enumerate(gib)
    ]


def shared_node(name: str = "g", cards: int = 2, mib: int = 16384):
    return node(
        name,
        allocatable={"cpu": 16000, "memory": 64 << 30, GPU: cards},
        labels=LABELS,
        gpu=GpuInfo(product="T4", memory_mib=mib, count=cards),
    )


# -- check_placement: every kind of violation, one case each ----------------------------------------


def test_check_placement_accepts_a_valid_placement_and_an_exact_fit():
    pods, nodes = gpu_pods(2, 1), gpu_nodes(3)
    assert check_placement(pods, nodes, {"w/0": "n0", "w/1": "n0"}) == ()
    assert check_placement(pods, nodes, [("w/0", "n0")]) == ()  # pairs are accepted too
    assert check_placement(pods, nodes, {}) == ()


def test_check_placement_catches_a_pod_that_is_not_of_the_flow():
    pods, nodes = gpu_pods(1), gpu_nodes(2)
    assert check_placement(pods, nodes, {"ghost/0": "n0"}) == ("ghost/0: not a pod of the flow",)


def test_check_placement_catches_an_unknown_node():
    pods, nodes = gpu_pods(1), gpu_nodes(2)
    assert check_placement(pods, nodes, {"w/0": "nowhere"}) == (
        "w/0: placed on unknown node 'nowhere'",
    )


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        pytest.param(
            lambda: node("cpu", allocatable={GPU: 4}),
            "affinity/selector",
            id="selector not matched",
        ),
        pytest.param(
            lambda: node(
                "t",
                allocatable={GPU: 4},
                labels=LABELS,
                taints=(Taint("dedicated", "db", "NoSchedule"),),
            ),
            "taint",
            id="untolerated taint",
        ),
        pytest.param(
            lambda: node("c", allocatable={GPU: 4}, labels=LABELS, unschedulable=True),
            "unschedulable",
            id="cordoned",
        ),
    ],
)
def test_check_placement_catches_an_ineligible_node(make, fragment: str):
    pods, target = gpu_pods(1), make()
    problems = check_placement(pods, [target], {"w/0": target.name})
    assert len(problems) == 1
    assert problems[0].startswith(f"w/0 on {target.name}: ")
    assert fragment in problems[0].lower()


def test_check_placement_applies_the_callers_extra_reasons():
    pods, nodes = gpu_pods(1), gpu_nodes(2)
    problems = check_placement(
        pods,
        nodes,
        {"w/0": "n0"},
        extra_reasons=lambda pod, n: (f"{pod.pod} is banned from {n.name}", "and a second reason"),
    )
    assert problems == ("w/0 on n0: w/0 is banned from n0; and a second reason",)
    assert check_placement(pods, nodes, {"w/0": "n0"}, extra_reasons=lambda p, n: ()) == ()


def test_check_placement_catches_a_resource_over_capacity_summing_every_pod():
    pods, nodes = gpu_pods(2, 2, 1), gpu_nodes(4, 8)
    problems = check_placement(pods, nodes, {"w/0": "n0", "w/1": "n0", "w/2": "n0"})
    assert problems == (f"n0: {GPU} over capacity (5 requested > 4 free)",)
    assert check_placement(pods, nodes, {"w/0": "n0", "w/1": "n0", "w/2": "n1"}) == ()


def test_check_placement_counts_what_is_already_bound():
    busy = node("b", allocatable={GPU: 4}, requested={GPU: 3}, labels=LABELS)
    pods = gpu_pods(1, 1)
    assert check_placement(pods, [busy], {"w/0": "b"}) == ()
    assert check_placement(pods, [busy], {"w/0": "b", "w/1": "b"}) == (
        f"b: {GPU} over capacity (2 requested > 1 free)",
    )


def test_check_placement_catches_the_pod_limit():
    pods = [PodRequest(f"c/{i}", "c", i, (("cpu", 100),)) for i in range(3)]
    small = node("a", allocatable={"cpu": 4000, "memory": 8 << 30, "pods": 2})
    assert check_placement(pods, [small], {"c/0": "a", "c/1": "a"}) == ()
    assert check_placement(pods, [small], {"c/0": "a", "c/1": "a", "c/2": "a"}) == (
        "a: pods over capacity (3 requested > 2 free)",
    )


def test_check_placement_reports_every_problem_sorted():
    pods, nodes = gpu_pods(4, 4), gpu_nodes(3)
    problems = check_placement(pods, nodes, {"w/1": "n0", "w/0": "n0", "x/0": "n0"})
    assert problems == (
        "x/0: not a pod of the flow",
        f"n0: {GPU} over capacity (8 requested > 3 free)",
    )


@pytest.mark.parametrize(
    ("card", "shown"),
    [(None, "None"), (2, "2"), (-1, "-1")],
)
def test_check_placement_catches_a_shared_pod_without_a_valid_card(card: int | None, shown: str):
    pods, g = shared_pods(4), shared_node(cards=2)
    cards = {} if card is None else {"s/0": card}
    assert check_placement(pods, [g], {"s/0": "g"}, cards=cards) == (
        f"s/0 on g: no valid card index ({shown})",
    )
    assert check_placement(pods, [g], {"s/0": "g"}, cards={"s/0": 1}) == ()
    assert check_placement(pods, [g], {"s/0": "g"}) == ()  # without cards VRAM is not checked


def test_check_placement_catches_vram_over_a_card_and_accepts_it_exactly_full():
    pods, g = shared_pods(10, 8, 8, 6), shared_node(cards=2, mib=16384)
    over = check_placement(
        pods, [g], {"s/0": "g", "s/1": "g"}, cards={"s/0": 0, "s/1": 0}
    )  # 10 + 8 GiB on one 16 GiB card
    assert over == ("g card 0: VRAM over capacity (18432 MiB > 16384 MiB)",)
    full = {"s/0": 0, "s/3": 0, "s/1": 1, "s/2": 1}  # 10 + 6 and 8 + 8: both cards exactly full
    assert check_placement(pods, [g], dict.fromkeys(full, "g"), cards=full) == ()


# -- first-fit-decreasing at an exact fit ------------------------------------------------------------


def test_ffd_places_a_pod_that_exactly_fills_a_node():
    pods, nodes = gpu_pods(8, 4, 4), gpu_nodes(8, 8)
    assert first_fit_decreasing(pods, nodes) == {"w/0": "n0", "w/1": "n1", "w/2": "n1"}
    assert first_fit_decreasing(gpu_pods(9), gpu_nodes(8, 8)) == {}


def test_ffd_respects_the_pod_limit_at_exactly_one_free_slot():
    pods = [PodRequest(f"c/{i}", "c", i, (("cpu", 100),)) for i in range(2)]
    nodes = [
        node("a", allocatable={"cpu": 4000, "memory": 8 << 30, "pods": 1}),
        node("b", allocatable={"cpu": 4000, "memory": 8 << 30, "pods": 1}),
    ]
    assert first_fit_decreasing(pods, nodes) == {"c/0": "a", "c/1": "b"}


def test_ffd_fills_a_card_of_a_shared_node_exactly():
    pods, g = shared_pods(8, 8, 8, 8, 1), shared_node(cards=2, mib=16384)
    placed = first_fit_decreasing(pods, [g])
    assert sorted(placed) == ["s/0", "s/1", "s/2", "s/3"]  # four 8 GiB halves; the 1 GiB is left
    result = pack(pods[:4], [g], config=CONFIG)
    assert result.feasible is True
    assert check_placement(pods[:4], [g], result.assignments, cards=dict(result.cards)) == ()
    assert sorted(dict(result.cards).values()) == [0, 0, 1, 1]


# -- pack: the paths the classic cases never take -----------------------------------------------------


def test_pack_that_gives_up_answers_unknown_never_does_not_fit():
    pods, nodes = gpu_pods(3, 3, 2, 2, 2, 2), gpu_nodes(7, 7)  # FFD strands a 2; it does fit
    result = pack(pods, nodes, config=SolverConfig(max_deterministic_time=0.0, optimize=False))
    assert result.feasible is None
    assert result.report.status == "UNKNOWN"
    assert result.unplaced  # the FFD partial placement, which is valid
    assert len(result.assignments) == 5
    assert check_placement(pods, nodes, result.assignments) == ()


def test_pack_minimises_the_nodes_used_after_ffd():
    pods, nodes = gpu_pods(1, 1), gpu_nodes(1, 2)  # FFD: one pod on each node
    assert first_fit_decreasing(pods, nodes) == {"w/0": "n0", "w/1": "n1"}
    best = pack(pods, nodes, config=CONFIG)
    assert best.feasible is True
    assert {n for _, n in best.assignments} == {"n1"}
    assert best.report.method == "cp-sat"
    assert best.report.objective == 1.0
    plain = pack(pods, nodes, config=SolverConfig(optimize=False))
    assert (plain.report.method, plain.report.objective) == ("ffd", 2.0)
    assert {n for _, n in plain.assignments} == {"n0", "n1"}


def test_pack_on_one_node_keeps_the_ffd_packing():
    pods, nodes = gpu_pods(1, 1), gpu_nodes(2)
    result = pack(pods, nodes, config=CONFIG)
    assert (result.report.method, result.report.objective) == ("ffd", 1.0)


def test_pack_of_no_pod_is_an_optimal_empty_packing():
    result = pack([], gpu_nodes(1), config=CONFIG)
    assert (result.feasible, result.assignments, result.unplaced) == (True, (), ())
    assert (result.report.status, result.report.method) == ("OPTIMAL", "bounds")


def test_pack_proves_infeasibility_by_the_bounds_with_numbers():
    pods, nodes = gpu_pods(4), gpu_nodes(1, 1, 1, 1)
    result = pack(pods, nodes, config=CONFIG)
    assert (result.feasible, result.report.method, result.report.status) == (
        False,
        "bounds",
        "INFEASIBLE",
    )
    assert result.proofs == (
        "the 1 pod(s) shaped like w/0 fit at most 0 time(s) on the 4 node(s) eligible for them",
    )
    total = pack(gpu_pods(2, 2, 2), gpu_nodes(2, 2), config=CONFIG)
    assert total.report.method == "bounds"
    assert any(
        "the pods request 6 in total but eligible nodes have 4 free" in p for p in total.proofs
    )
    assert check_placement(gpu_pods(2, 2, 2), gpu_nodes(2, 2), total.assignments) == ()
    assert len(total.assignments) == 2 and len(total.unplaced) == 1


def test_pack_proves_infeasibility_by_cp_sat_when_no_bound_does():
    pods, nodes = gpu_pods(4, 3, 3), gpu_nodes(5, 5)  # 10 = 10 free; each shape fits in number
    result = pack(pods, nodes, config=CONFIG)
    assert (result.feasible, result.report.method) == (False, "cp-sat")
    assert result.proofs == ("cp-sat proved it infeasible",)
    assert len(result.assignments) == 2 and len(result.unplaced) == 1
    assert check_placement(pods, nodes, result.assignments) == ()


def test_check_placement_goes_on_after_a_stranger_or_an_unknown_node():
    pods, nodes = gpu_pods(2, 2), gpu_nodes(3)
    problems = check_placement(pods, nodes, {"a/0": "n0", "w/0": "n0", "w/1": "n0"})
    assert problems == (
        "a/0: not a pod of the flow",
        f"n0: {GPU} over capacity (4 requested > 3 free)",
    )
    pods = gpu_pods(2, 2, 2)
    problems = check_placement(pods, nodes, {"w/0": "nowhere", "w/1": "n0", "w/2": "n0"})
    assert problems == (
        "w/0: placed on unknown node 'nowhere'",
        f"n0: {GPU} over capacity (4 requested > 3 free)",
    )


def test_check_placement_of_a_shared_pod_on_a_node_without_gpu_facts():
    bare = node("bare", allocatable={GPU: 2, "cpu": 1000, "memory": 1 << 30}, labels=LABELS)
    assert check_placement(shared_pods(4), [bare], {"s/0": "bare"}, cards={"s/0": 0}) == (
        "s/0 on bare: node(s) had no GPU memory facts (nvidia.com/gpu.memory, .count)",
        "s/0 on bare: no valid card index (0)",  # no card count: no card index is valid
    )
    nomem = node(
        "nomem",
        allocatable={GPU: 2, "cpu": 1000, "memory": 1 << 30},
        labels=LABELS,
        gpu=GpuInfo(product="T4", count=2),
    )
    assert check_placement(shared_pods(4), [nomem], {"s/0": "nomem"}, cards={"s/0": 0}) == (
        "s/0 on nomem: node(s) had no GPU memory facts (nvidia.com/gpu.memory, .count)",
        "nomem card 0: VRAM over capacity (4096 MiB > 0 MiB)",  # unknown card size: 0
    )


def test_an_infeasible_packing_reports_the_partial_placement_and_its_numbers():
    result = pack(gpu_pods(2, 2, 2), gpu_nodes(2, 2), config=CONFIG)
    assert (result.report.objective, result.report.bound) == (2.0, 2.0)  # 2 pods placed
    assert result.report.wall_s > 0.0  # the partial CP-SAT solve's own time
    assert result.report.deterministic is True
    assert result.report.variables == 2  # one count per (pod shape, node type) pattern
    timed = pack(gpu_pods(2, 2, 2), gpu_nodes(2, 2), config=SolverConfig.wall_clock(5.0, 1))
    assert (timed.feasible, timed.report.deterministic) == (False, False)
    assert result.report.notes == (
        "partial placement: as many pods as possible, to explain the rest",
    )
    by_cp_sat = pack(gpu_pods(4, 3, 3), gpu_nodes(5, 5), config=CONFIG)
    assert by_cp_sat.report.notes[-1] == (
        "partial placement: as many pods as possible, to explain the rest"
    )


def test_an_infeasible_packing_whose_partial_solve_gives_up_shows_the_ffd_placement():
    result = pack(
        gpu_pods(2, 2, 2), gpu_nodes(2, 2), config=SolverConfig(max_deterministic_time=0.0)
    )
    assert (result.feasible, result.report.method) == (False, "bounds")
    assert result.assignments == (("w/0", "n0"), ("w/1", "n1"))  # FFD's
    assert result.unplaced == ("w/2",)


def test_an_optimisation_that_gives_up_keeps_the_ffd_packing_and_says_so():
    result = pack(
        gpu_pods(1, 1), gpu_nodes(1, 2), config=SolverConfig(optimize_deterministic_time=0.0)
    )
    assert result.feasible is True
    assert (result.report.method, result.report.objective) == ("ffd", 2.0)
    assert result.report.notes == (
        "cp-sat could not improve on ffd (UNKNOWN); the ffd packing stands",
    )


def test_pack_minimises_nodes_on_identical_nodes_with_the_aggregated_model():
    pods, nodes = gpu_pods(5, 4, 3, 3, 3, 2), gpu_nodes(10, 10, 10)
    assert len(set(first_fit_decreasing(pods, nodes).values())) == 3  # 5+4 | 3+3+3 | 2
    result = pack(pods, nodes, config=CONFIG)
    assert result.feasible is True
    assert len({n for _, n in result.assignments}) == 2  # 5+3+2 | 4+3+3
    assert (result.report.method, result.report.objective) == ("cp-sat", 2.0)
    assert any(note.startswith("aggregated model: 1 node type(s)") for note in result.report.notes)
    assert result.cards == ()  # whole GPUs: no card is named
    assert check_placement(pods, nodes, result.assignments) == ()


def test_pack_applies_the_callers_extra_reasons():
    pods, nodes = gpu_pods(1, 1), gpu_nodes(2, 2)
    result = pack(
        pods,
        nodes,
        config=CONFIG,
        extra_reasons=lambda pod, n: ("n0 is reserved",) if n.name == "n0" else (),
    )
    assert result.feasible is True
    assert {n for _, n in result.assignments} == {"n1"}


def test_the_reports_of_an_empty_packing_and_of_ffd_alone():
    empty = pack([], gpu_nodes(1), config=CONFIG).report
    assert (empty.objective, empty.deterministic) == (0.0, True)
    plain = pack(gpu_pods(1, 1), gpu_nodes(1, 2), config=SolverConfig(optimize=False)).report
    assert (plain.status, plain.method, plain.deterministic, plain.notes) == (
        "FEASIBLE",
        "ffd",
        True,
        (),
    )


def test_when_ffd_is_already_optimal_cp_sat_confirms_it():
    result = pack(gpu_pods(2, 2), gpu_nodes(2, 2), config=CONFIG)
    assert (result.report.method, result.report.objective) == ("cp-sat", 2.0)
    assert result.report.status in ("OPTIMAL", "FEASIBLE")
    assert result.assignments == (("w/0", "n0"), ("w/1", "n1"))


def test_ffd_counts_each_pod_once_against_the_pod_limit():
    pods = [PodRequest(f"c/{i}", "c", i, (("cpu", 100),)) for i in range(3)]
    nodes = [
        node("a", allocatable={"cpu": 4000, "memory": 8 << 30, "pods": 2}),
        node("b", allocatable={"cpu": 4000, "memory": 8 << 30, "pods": 2}),
    ]
    assert first_fit_decreasing(pods, nodes) == {"c/0": "a", "c/1": "a", "c/2": "b"}


def test_ffd_moves_on_to_the_next_node_when_every_card_is_too_full():
    pods = shared_pods(10, 10, 10)
    nodes = [shared_node(f"g{i}", cards=1) for i in range(3)]
    assert first_fit_decreasing(pods, nodes) == {"s/0": "g0", "s/1": "g1", "s/2": "g2"}


def test_ffd_counts_declared_vram_on_a_time_sliced_card():
    sliced = GpuInfo(product="T4", memory_mib=16384, count=1, sharing="time-slicing", replicas=4)
    ts = node("ts", allocatable={GPU: 4}, labels=LABELS, gpu=sliced)
    pods = [
        PodRequest(
            f"w/{i}",
            "w",
            i,
            ((GPU, 1),),
            tuple(LABELS.items()),
            (GPU_TOLERATION,),
            gpu_memory_mib=10240,
            slice="whole",
        )
        for i in range(2)
    ]
    assert first_fit_decreasing(pods, [ts]) == {"w/0": "ts"}  # 2 x 10 GiB > one 16 GiB card
