"""A node that cannot be read is unknown: bracketed, named, and never the basis of a fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, snapshot_from_kubernetes
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.packing import SolverConfig
from vfcore.placement.plan import plan_pods

GPU = "nvidia.com/gpu"
CONFIG = SolverConfig.deterministic(max_deterministic_time=10.0)
NO_PODS = {"kind": "PodList", "items": []}


def k_node(
    name: str, gpus: int, *, capacity: int | None = None, pods: str = "110"
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "allocatable": {"cpu": "32", "memory": "128Gi", "pods": pods, GPU: str(gpus)},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    if capacity is not None:
        status["capacity"] = {"cpu": "32", "memory": "128Gi", "pods": pods, GPU: str(capacity)}
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
        "spec": {},
        "status": status,
    }


def gpu_pod(name: str, gpus: int) -> PodRequest:
    return PodRequest(
        name,
        name.split("/")[0],
        0,
        (("cpu", 1000), (GPU, gpus)),
        node_selector=(GPU_PRESENT_LABEL,),
        tolerations=(GPU_TOLERATION,),
    )


def plan_on(items: list[Any], pods: list[PodRequest], pod_items: list[Any] | None = None):
    snap = snapshot_from_kubernetes(
        {"kind": "NodeList", "items": items}, {"kind": "PodList", "items": pod_items or []}
    )
    return snap, plan_pods(pods, snap, solver=CONFIG)


def _no_alloc(node: dict[str, Any]) -> dict[str, Any]:
    """Allocatable unreadable as a whole (a missing one is read as capacity, as the API server does)."""
    node = copy.deepcopy(node)
    node["status"]["allocatable"] = ["unreadable"]
    return node


def _set_gpu(value: object):
    def mutate(node: dict[str, Any]) -> dict[str, Any]:
        node = copy.deepcopy(node)
        node["status"]["allocatable"][GPU] = value
        return node

    return mutate


@pytest.mark.parametrize(
    "mutate",
    [
        _no_alloc,
        _set_gpu("9999999999999999999Ei"),
        _set_gpu("9" * 5001),
        _set_gpu("abc"),
        _set_gpu("-4"),
    ],
    ids=["no allocatable", "absurd quantity", "5001 digits", "unparsable", "negative"],
)
def test_an_unreadable_node_with_nothing_bounding_it_makes_a_shortfall_unknown(mutate) -> None:
    # one readable 4-GPU node; the unreadable one could hold the 8-GPU pod: unknown, not a proof
    snap, result = plan_on([k_node("a", 4), mutate(k_node("b", 8))], [gpu_pod("big/0", 8)])
    assert [u.name for u in snap.unreadable_nodes] == ["b"]
    assert result.verdict == "unknown"
    assert result.fix is None
    (unplaced,) = result.unplaced
    assert unplaced.kind == "unknown" and unplaced.fix is None
    assert "(b)" in unplaced.summary
    assert any(u.what == "node/b" and "status.allocatable" in u.reason for u in result.unknown)
    assert "resource-not-advertised" not in {p.code for p in result.problems}
    assert result.scheduler.verdict == "unknown"


def test_a_flow_that_fits_without_the_unreadable_node_fits() -> None:
    _, result = plan_on([k_node("a", 8), _no_alloc(k_node("b", 8))], [gpu_pod("big/0", 8)])
    assert result.verdict == "fits"
    assert result.placement == {"big/0": "a"}
    assert any(u.what == "node/b" for u in result.unknown)  # still named


@pytest.mark.parametrize(
    ("capacity", "verdict"),
    [(7, "does-not-fit"), (8, "unknown"), (9, "unknown")],
    ids=["capacity one short: proven", "capacity equal to the need: unknown", "capacity above"],
)
def test_status_capacity_bounds_an_unreadable_allocatable(capacity: int, verdict: str) -> None:
    broken = _no_alloc(k_node("b", 8, capacity=capacity))
    snap, result = plan_on([k_node("a", 4), broken], [gpu_pod("big/0", 8)])
    (unreadable,) = snap.unreadable_nodes
    assert unreadable.bound is not None and unreadable.bound.allocatable_of(GPU) == capacity
    assert result.verdict == verdict
    assert result.fix is None  # never "add a node shaped like …" on a guess
    if verdict == "does-not-fit":
        (unplaced,) = result.unplaced
        assert unplaced.kind == "unresolvable"
        assert f"the largest host has {capacity}" in (unplaced.fix or "")


def test_an_unreadable_entry_is_bounded_by_its_capacity_and_the_rest_stands() -> None:
    broken = _set_gpu("abc")(k_node("b", 8, capacity=6))
    snap, result = plan_on([broken], [gpu_pod("big/0", 7)])
    bound = snap.unreadable_nodes[0].bound
    assert bound is not None
    assert (bound.allocatable_of(GPU), bound.allocatable_of("cpu")) == (6, 32000)
    assert result.verdict == "does-not-fit"


@pytest.mark.parametrize(
    ("capacity_pods", "flow_pods", "verdict"),
    [(None, 3, "unknown"), ("2", 3, "does-not-fit"), ("3", 3, "unknown")],
    ids=["no pods anywhere: unbounded", "capacity pods one short", "capacity pods equal"],
)
def test_an_allocatable_without_pods_is_unknown_never_a_free_a_pod_slot_fix(
    capacity_pods: str | None, flow_pods: int, verdict: str
) -> None:
    node = k_node("a", 8)
    del node["status"]["allocatable"]["pods"]
    if capacity_pods is not None:
        node["status"]["capacity"] = {"pods": capacity_pods, GPU: "8", "cpu": "32"}
    pods = [gpu_pod(f"p{i}/0", 1) for i in range(flow_pods)]
    snap, result = plan_on([node], pods)
    assert snap.nodes == ()
    assert "no pods entry" in snap.unreadable_nodes[0].reason
    assert result.verdict == verdict
    assert all("pod slot" not in (u.fix or "") for u in result.unplaced)
    assert result.fix is None


def test_a_node_listed_twice_differently_is_never_a_proof() -> None:
    _, result = plan_on([k_node("a", 4), k_node("b", 2), k_node("b", 3)], [gpu_pod("big/0", 8)])
    assert result.verdict == "unknown"
    assert any(u.what == "node/b" and "listed twice" in u.reason for u in result.unknown)


def test_pods_bound_to_a_node_missing_from_the_list_name_it_and_keep_the_verdict_honest() -> None:
    ghost = {
        "kind": "Pod",
        "metadata": {"namespace": "ml", "name": "old"},
        "spec": {"nodeName": "ghost", "containers": [{"resources": {}}]},
        "status": {"phase": "Running"},
    }
    snap, result = plan_on([k_node("a", 4)], [gpu_pod("big/0", 8)], [ghost])
    assert [u.name for u in snap.unreadable_nodes] == ["ghost"]
    assert result.verdict == "unknown"
    (note,) = [u for u in result.unknown if u.what == "node/ghost"]
    assert "pod/ml/old" in note.reason and "not in the node list" in note.reason


def test_resource_not_advertised_stands_when_every_unreadable_node_is_bounded() -> None:
    broken = _no_alloc(k_node("b", 0, capacity=0))
    del broken["status"]["capacity"][GPU]
    _, result = plan_on([k_node("a", 0), broken], [gpu_pod("big/0", 1)])
    assert "resource-not-advertised" in {p.code for p in result.problems}
    assert result.verdict == "does-not-fit"


def test_a_snapshot_built_by_hand_brackets_the_same_way() -> None:
    from vfcore.cluster import UnreadableNode, node

    readable = node("a", allocatable={GPU: 4}, labels=dict([GPU_PRESENT_LABEL]))
    cluster = ClusterSnapshot(nodes=(readable,), unreadable_nodes=(UnreadableNode("b", "why"),))
    assert not cluster.is_fully_known
    assert cluster.to_dict()["unreadable_nodes"] == [{"name": "b", "reason": "why", "bound": None}]
    assert plan_pods([gpu_pod("big/0", 8)], cluster, solver=CONFIG).verdict == "unknown"
