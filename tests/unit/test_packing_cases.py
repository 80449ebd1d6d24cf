"""The classic placement cases, with the equality edges, and the plan around them."""

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


def gpu_pods(*claims, name="w"):
    return [
        PodRequest(
            f"{name}/{i}",
            name,
            i,
            ((GPU, c),),
            ((*LABELS.items(),)),
            (GPU_TOLERATION,),
            slice="whole",
        )
        for i, c in enumerate(claims)
    ]


def gpu_nodes(*free, prefix="n"):
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
