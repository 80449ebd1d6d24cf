"""vfcore.placement.fit at the edges the first mutation run of issue 18 left untested
(docs/testing.md, "fit"): the condition-taint filter, the sharing rule's pool
resources, a ``shared`` slice's VRAM, ``extra`` in ``resource_reasons``, which of
two equal-message reasons is kept, and the messages when every node fits."""

from __future__ import annotations

import pytest

from vfcore.cluster import GpuInfo, Taint, node
from vfcore.placement.claims import PodRequest
from vfcore.placement.fit import (
    NOT_READY_TAINT,
    SHARED_POOL,
    Insufficient,
    card_vram_mib,
    distinct_reasons,
    effective_taints,
    pool_resource,
    resource_reasons,
    scheduler_message,
    sharing_reason,
    summarise,
)

GPU = "nvidia.com/gpu"
UNREACHABLE = Taint("node.kubernetes.io/unreachable", "", "NoSchedule")


def sliced(sharing: str, *, replicas: int = 4) -> GpuInfo:
    return GpuInfo(memory_mib=15360, count=1, sharing=sharing, replicas=replicas)


def gpu_pod(requests: tuple[tuple[str, int], ...], **kw: object) -> PodRequest:
    return PodRequest("p/0", "p", 0, requests, **kw)  # type: ignore[arg-type]


# -- effective_taints: the controller's taint is added once, only when it is missing ---------


@pytest.mark.parametrize("taint", [NOT_READY_TAINT, UNREACHABLE])
def test_a_not_ready_node_that_already_carries_a_condition_taint_gets_no_second_one(
    taint: Taint,
) -> None:
    n = node("a", allocatable={}, ready=False, taints=[taint])
    assert effective_taints(n) == (taint,)


@pytest.mark.parametrize(
    "taint",
    [
        Taint("dedicated", "gpu", "NoSchedule"),  # NoSchedule, but not a condition key
        Taint("node.kubernetes.io/not-ready", "", "NoExecute"),  # a condition key, other effect
        Taint("node.kubernetes.io/unreachable", "", "PreferNoSchedule"),
    ],
)
def test_a_not_ready_node_without_the_condition_no_schedule_taint_gets_it(taint: Taint) -> None:
    n = node("a", allocatable={}, ready=False, taints=[taint])
    assert effective_taints(n) == (taint, NOT_READY_TAINT)


def test_a_ready_node_keeps_its_taints_as_they_are() -> None:
    taint = Taint("dedicated", "gpu", "NoSchedule")
    assert effective_taints(node("a", allocatable={}, taints=[taint])) == (taint,)


# -- sharing_reason / pool_resource ----------------------------------------------------------


def test_more_than_one_mig_device_on_a_shared_node_is_refused_like_a_pool_resource() -> None:
    mig = "nvidia.com/mig-1g.5gb"
    n = node("t4", allocatable={mig: 8}, gpu=sliced("time-slicing"))
    assert sharing_reason(gpu_pod(((mig, 2),)), n) == SHARED_POOL.format(
        sharing="time-slicing", units=2, resource=mig
    )


def test_two_cards_on_a_node_that_does_not_share_are_not_a_sharing_refusal() -> None:
    n = node("a", allocatable={GPU: 8}, gpu=sliced("none"))
    assert sharing_reason(gpu_pod(((GPU, 2),)), n) is None


@pytest.mark.parametrize("sharing", ["time-slicing", "mps"])
def test_one_unit_and_many_units_of_a_non_pool_resource_are_no_sharing_refusal(
    sharing: str,
) -> None:
    n = node("t4", allocatable={GPU: 4, "cpu": 8000}, gpu=sliced(sharing))
    assert sharing_reason(gpu_pod((("cpu", 2000), (GPU, 1))), n) is None
    assert sharing_reason(gpu_pod(((GPU, 2),)), n) == SHARED_POOL.format(
        sharing=sharing, units=2, resource=GPU
    )


def test_a_pool_of_a_single_unit_is_still_a_pool() -> None:
    n = node("t4", allocatable={GPU: 1}, gpu=sliced("time-slicing", replicas=1))
    assert pool_resource(gpu_pod(((GPU, 1),)), n) == GPU
    assert pool_resource(gpu_pod(((GPU, 1),)), node("t4", allocatable={GPU: 0}, gpu=n.gpu)) is None


# -- card_vram_mib: a shared slice counts its own VRAM, on any node ---------------------------


def test_a_shared_slice_counts_its_declared_vram_even_where_the_node_has_no_gpu_facts() -> None:
    p = gpu_pod(((GPU, 1),), gpu_memory_mib=4096, slice="shared")
    assert card_vram_mib(p, node("a", allocatable={GPU: 1})) == 4096
    undeclared = gpu_pod(((GPU, 1),), slice="shared")
    assert card_vram_mib(undeclared, node("a", allocatable={GPU: 1})) == 0


def test_a_whole_pod_on_a_node_without_gpu_facts_counts_no_vram() -> None:
    p = gpu_pod(((GPU, 1),), gpu_memory_mib=4096, slice="whole")
    assert card_vram_mib(p, node("a", allocatable={GPU: 1})) == 0


# -- resource_reasons reads what the caller already placed -----------------------------------


def test_resource_reasons_counts_the_callers_extra_load() -> None:
    n = node("a", allocatable={"cpu": 1000, "pods": 10})
    p = gpu_pod((("cpu", 200),))
    assert resource_reasons(p, n) == ()
    assert resource_reasons(p, n, {"cpu": 800}) == ()  # exactly full fits
    assert resource_reasons(p, n, {"cpu": 801}) == ("Insufficient cpu",)
    assert resource_reasons(p, n, {"pods": 10}) == ("Too many pods",)


# -- distinct_reasons keeps the nearest miss whatever the order -------------------------------


def test_distinct_reasons_keeps_the_nearest_miss_when_a_farther_one_comes_later() -> None:
    near = Insufficient(GPU, 2, 3, 4)  # 1 short
    far = Insufficient(GPU, 2, 4, 4)  # 2 short
    assert distinct_reasons([[near], [far]]) == (near,)
    assert distinct_reasons([[far], [near]]) == (near,)
    assert distinct_reasons([[far], [near], [far]]) == (near,)


# -- the messages when every node fits --------------------------------------------------------


def test_summarise_counts_every_fitting_node_and_adds_no_colon_when_all_fit() -> None:
    assert summarise("p/0", 3, [[], [], []]) == "3/3 nodes fit p/0"
    assert summarise("p/0", 3, [[], ["Too many pods"], []]) == "2/3 nodes fit p/0: 1 Too many pods"


def test_scheduler_message_without_reasons_ends_at_the_colon() -> None:
    assert scheduler_message(2, [[], []]) == "0/2 nodes are available:"
    assert scheduler_message(0, []) == "0/0 nodes are available:"
