"""The fit rule's one home, vfcore.placement.fit: shortfalls with their numbers, free capacity
(``NodeState.free_of``), and "could this node ever hold this pod"."""

from __future__ import annotations

import pytest

from vfcore.cluster import GpuInfo, Taint, node
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.fit import (
    NO_GPU_MEMORY_FACTS,
    NOT_READY_TAINT,
    SELECTOR_MISMATCH,
    SHARED_POOL,
    TOO_MANY_PODS,
    UNSCHEDULABLE,
    UNTOLERATED_TAINT,
    Ineligible,
    Insufficient,
    card_vram_mib,
    could_ever_hold,
    distinct_reasons,
    effective_taints,
    free_units,
    never_reasons,
    pool_resource,
    reasons_on,
    resource_reasons,
    scheduler_message,
    sharing_reason,
    shortfalls,
    summarise,
)
from vfcore.placement.plan import Unplaced

GPU = "nvidia.com/gpu"
GPU_LABEL = {"nvidia.com/gpu.present": "true"}


def pod(
    gpus: int = 0,
    cpu: int = 0,
    *,
    selector: tuple[tuple[str, str], ...] = (),
    slice_: str = "whole",
    memory_mib: int | None = None,
) -> PodRequest:
    requests = tuple((r, u) for r, u in (("cpu", cpu), (GPU, gpus)) if u)
    return PodRequest(
        pod="p/0",
        node="p",
        replica=0,
        requests=requests,
        node_selector=selector,
        tolerations=(GPU_TOLERATION,),
        gpu_memory_mib=memory_mib,
        slice=slice_,  # type: ignore[arg-type]
    )


# -- Insufficient: its message and numbers --------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "message", "free", "short"),
    [
        (Insufficient(GPU, 4, 6, 8), "Insufficient nvidia.com/gpu", 2, 2),
        (Insufficient("cpu", 1500, 3000, 4000), "Insufficient cpu", 1000, 500),
        (Insufficient("memory", 1, 8, 8), "Insufficient memory", 0, 1),
        (Insufficient("pods", 1, 110, 110), TOO_MANY_PODS, 0, 1),
        (Insufficient("example.com/fpga", 3, 0, 2), "Insufficient example.com/fpga", 2, 1),
    ],
)
def test_insufficient_message_and_numbers(
    reason: Insufficient, message: str, free: int, short: int
) -> None:
    assert reason.message == message
    assert (reason.free, reason.short) == (free, short)
    assert reason.to_dict()["message"] == message
    assert reason.to_dict()["capacity"] == reason.capacity


@pytest.mark.parametrize(
    ("requested", "used", "want"),
    [
        (2, 2, ()),  # requested == free fits
        (3, 2, (Insufficient(GPU, 3, 2, 4),)),  # one more does not
        (4, 0, ()),
        (5, 0, (Insufficient(GPU, 5, 0, 4),)),
        (1, 4, (Insufficient(GPU, 1, 4, 4),)),
    ],
)
def test_shortfall_edge_requested_equal_to_free_fits(
    requested: int, used: int, want: tuple[Insufficient, ...]
) -> None:
    n = node("n", allocatable={GPU: 4}, requested={GPU: used} if used else None)
    assert shortfalls(pod(requested), n) == want
    assert resource_reasons(pod(requested), n) == tuple(s.message for s in want)


@pytest.mark.parametrize(
    ("bound", "extra", "want"),
    [
        (1, 0, ()),  # the third pod of three fits
        (2, 0, (Insufficient("pods", 1, 2, 2),)),
        (0, 2, (Insufficient("pods", 1, 2, 2),)),  # pods the caller placed count too
        (1, 1, (Insufficient("pods", 1, 2, 2),)),
    ],
)
def test_pod_limit_is_too_many_pods(bound: int, extra: int, want: tuple[Insufficient, ...]) -> None:
    n = node("n", allocatable={"cpu": 4000, "pods": 2}, requested={"pods": bound})
    found = shortfalls(pod(cpu=100), n, {"pods": extra})
    assert found == want
    assert [s.message for s in found] == [TOO_MANY_PODS] * len(want)


def test_extra_counts_as_used_and_pod_limit_comes_first() -> None:
    n = node("n", allocatable={GPU: 8, "cpu": 1000, "pods": 3}, requested={GPU: 2, "pods": 1})
    found = shortfalls(pod(4, cpu=1000), n, {GPU: 3, "pods": 2})
    assert found == (Insufficient("pods", 1, 3, 3), Insufficient(GPU, 4, 5, 8))
    assert [s.message for s in found] == [TOO_MANY_PODS, "Insufficient nvidia.com/gpu"]


# -- free capacity: NodeState.free_of and free_units -----------------------------------------


@pytest.mark.parametrize(
    ("requested", "unknown", "resource", "want"),
    [
        ({GPU: 3}, None, GPU, 5),
        ({}, None, GPU, 8),
        ({GPU: 8}, None, GPU, 0),  # known and full: zero
        ({}, None, "example.com/fpga", 0),  # not advertised: zero, known
        (None, "Forbidden", GPU, None),  # unknown occupancy: None, never 0
        (None, "Forbidden", "cpu", None),
    ],
)
def test_free_of(
    requested: dict[str, int] | None, unknown: str | None, resource: str, want: int | None
) -> None:
    n = node("n", allocatable={GPU: 8, "cpu": 4000}, requested=requested, unknown_reason=unknown)
    assert n.free_of(resource) == want


def test_free_units_judges_unknown_occupancy_empty_and_subtracts_extra() -> None:
    unknown = node("n", allocatable={GPU: 8}, unknown_reason="Forbidden")
    assert unknown.free_of(GPU) is None
    assert free_units(unknown, GPU) == 8  # the caller brackets the unknown
    assert free_units(unknown, GPU, {GPU: 3}) == 5
    known = node("k", allocatable={GPU: 8}, requested={GPU: 6})
    assert free_units(known, GPU, {GPU: 3}) == -1


# -- could this node ever hold this pod ------------------------------------------------------


TAINTED = Taint("dedicated", "infra", "NoSchedule")
CASES = [
    ("idle, big enough", node("n", allocatable={GPU: 4}, labels=GPU_LABEL), pod(4), ()),
    (
        "busy: could, once freed",
        node("n", allocatable={GPU: 4, "pods": 2}, requested={GPU: 4, "pods": 2}),
        pod(4),
        (),
    ),
    (
        "unknown occupancy: could",
        node("n", allocatable={GPU: 4}, unknown_reason="Forbidden"),
        pod(4),
        (),
    ),
    (
        "capacity below the request",
        node("n", allocatable={GPU: 2}),
        pod(4),
        (Insufficient(GPU, 4, 0, 2),),
    ),
    (
        "untolerated taint",
        node("n", allocatable={GPU: 4}, taints=[TAINTED]),
        pod(1),
        (Ineligible(UNTOLERATED_TAINT),),
    ),
    (
        "selector mismatch",
        node("n", allocatable={GPU: 4}),
        pod(1, selector=(("nvidia.com/gpu.present", "true"),)),
        (Ineligible(SELECTOR_MISMATCH),),
    ),
    (
        "not ready: its not-ready taint",
        node("n", allocatable={GPU: 4}, ready=False),
        pod(1),
        (Ineligible(UNTOLERATED_TAINT),),
    ),
    (
        "cordoned",
        node("n", allocatable={GPU: 4}, unschedulable=True),
        pod(1),
        (Ineligible(UNSCHEDULABLE),),
    ),
    (
        "shared slice, no GPU memory facts",
        node("n", allocatable={GPU: 4}),
        pod(1, slice_="shared", memory_mib=1024),
        (Ineligible(NO_GPU_MEMORY_FACTS),),
    ),
    (
        "time-sliced pool, two cards",
        node(
            "n",
            allocatable={GPU: 16},
            gpu=GpuInfo(count=4, memory_mib=81920, sharing="time-slicing", replicas=4),
        ),
        pod(2),
        (
            Ineligible(
                "node(s) share GPUs by time-slicing: a pod needing 2 nvidia.com/gpu gets no "
                "whole cards"
            ),
        ),
    ),
]


@pytest.mark.parametrize(("case", "n", "p", "want"), CASES, ids=[c[0] for c in CASES])
def test_could_ever_hold(case: str, n, p, want) -> None:  # type: ignore[no-untyped-def]
    assert never_reasons(p, n) == want
    assert could_ever_hold(p, n) is (not want)


def test_capacity_override_is_what_the_node_could_advertise() -> None:
    n = node("n", allocatable={GPU: 0, "cpu": 1000})
    assert not could_ever_hold(pod(4), n)
    assert could_ever_hold(pod(4), n, {GPU: 4})
    assert never_reasons(pod(4, cpu=2000), n, {GPU: 4}) == (Insufficient("cpu", 2000, 0, 1000),)


def test_reasons_on_gives_static_reasons_before_shortfalls() -> None:
    full_and_cordoned = node("n", allocatable={GPU: 1}, requested={GPU: 1}, unschedulable=True)
    assert reasons_on(pod(1), full_and_cordoned) == (Ineligible(UNSCHEDULABLE),)
    full = node("n", allocatable={GPU: 1}, requested={GPU: 1})
    assert reasons_on(pod(1), full) == (Insufficient(GPU, 1, 1, 1),)


# -- many nodes: one line, one reason per message ----------------------------------------------


def test_distinct_reasons_keep_the_nearest_miss_per_message() -> None:
    per_node = [
        (Insufficient(GPU, 4, 3, 4),),  # 3 short
        (Insufficient(GPU, 4, 1, 4), Insufficient("pods", 1, 110, 110)),  # 1 short
        (Ineligible(UNTOLERATED_TAINT),),
        (),
    ]
    assert distinct_reasons(per_node) == (
        Insufficient(GPU, 4, 1, 4),
        Insufficient("pods", 1, 110, 110),
        Ineligible(UNTOLERATED_TAINT),
    )
    assert summarise("p/0", 4, per_node) == (
        "1/4 nodes fit p/0: 1 Too many pods, 1 node(s) had untolerated taint(s), "
        "2 Insufficient nvidia.com/gpu"
    )
    assert summarise("p/0", 4, [[r.message for r in rs] for rs in per_node]) == summarise(
        "p/0", 4, per_node
    )


def test_unplaced_carries_objects_and_renders_messages() -> None:
    u = Unplaced(
        "p/0",
        "unschedulable",
        "0/2 nodes fit p/0: 2 Insufficient nvidia.com/gpu",
        (Insufficient(GPU, 4, 1, 4), Ineligible(UNTOLERATED_TAINT)),
        None,
    )
    assert u.reasons[0].message == "Insufficient nvidia.com/gpu"
    assert u.to_dict()["reasons"] == ["Insufficient nvidia.com/gpu", UNTOLERATED_TAINT]


def test_a_plan_explains_with_the_nearest_miss_and_its_numbers() -> None:
    from vfcore.cluster import ClusterSnapshot
    from vfcore.placement.packing import SolverConfig
    from vfcore.placement.plan import plan_pods

    nodes = (
        node("a", allocatable={GPU: 4}, requested={GPU: 3}, labels=GPU_LABEL),
        node("b", allocatable={GPU: 4}, requested={GPU: 1}, labels=GPU_LABEL),
    )
    result = plan_pods(
        [pod(4)],
        ClusterSnapshot(nodes=nodes),
        solver=SolverConfig.deterministic(max_deterministic_time=5.0),
        predict_scheduler=False,
    )
    (u,) = result.unplaced
    assert u.summary == "0/2 nodes fit p/0: 2 Insufficient nvidia.com/gpu"
    assert u.reasons == (Insufficient(GPU, 4, 1, 4),)  # b is one card short, a three
    assert u.to_dict()["reasons"] == ["Insufficient nvidia.com/gpu"]
    assert u.fix == "free 1 nvidia.com/gpu on b"


def test_used_units_is_bound_plus_extra_and_unknown_counts_as_empty() -> None:
    from vfcore.placement.fit import used_units

    assert used_units(node("k", allocatable={GPU: 8}, requested={GPU: 6}), GPU, {GPU: 1}) == 7
    unknown = node("u", allocatable={GPU: 8}, unknown_reason="Forbidden")
    assert used_units(unknown, GPU) == 0
    assert used_units(unknown, GPU, {GPU: 2}) == 2


# -- shared GPU pools: the exact VRAM rules (issue 18) --------------------------------------------


def _pool(
    sharing: str,
    memory_mib: int | None = 16384,
    replicas: int = 4,
    resource: str = "nvidia.com/gpu",
):
    from vfcore.placement.fit import card_vram_mib, pool_resource, pool_vram_reason

    gpu = GpuInfo(product="T4", memory_mib=memory_mib, count=1, sharing=sharing, replicas=replicas)
    n = node("p", allocatable={resource: replicas}, gpu=gpu)
    return n, card_vram_mib, pool_resource, pool_vram_reason


def _whole(mib: int | None, resource: str = "nvidia.com/gpu", units: int = 1) -> PodRequest:
    return PodRequest("w/0", "w", 0, ((resource, units),), gpu_memory_mib=mib, slice="whole")


@pytest.mark.parametrize(
    ("sharing", "mib", "reason"),
    [
        ("time-slicing", 16384, None),  # exactly one card: fits
        (
            "time-slicing",
            16385,
            "node(s) share GPUs by time-slicing: 16.00 GiB of VRAM asked, 16.00 GiB per card",
        ),
        ("mps", 4096, None),  # exactly memory / replicas: fits
        (
            "mps",
            4097,
            "node(s) share GPUs by mps: 4.00 GiB of VRAM asked, each of 4 clients of a 16.00 GiB "
            "card gets 4.00 GiB",
        ),
        ("mps", None, None),  # declares nothing
    ],
)
def test_pool_vram_reason_at_the_edges(sharing: str, mib: int | None, reason: str | None):
    n, card_vram_mib, pool_resource, pool_vram_reason = _pool(sharing)
    pod = _whole(mib)
    assert pool_resource(pod, n) == "nvidia.com/gpu"
    assert pool_vram_reason(pod, n) == reason
    assert card_vram_mib(pod, n) == ((mib or 0) if sharing == "time-slicing" else 0)


def test_pool_rules_need_the_card_memory_and_a_pool_resource():
    n, card_vram_mib, pool_resource, pool_vram_reason = _pool("time-slicing", memory_mib=None)
    assert (pool_vram_reason(_whole(99999), n), card_vram_mib(_whole(99999), n)) == (None, 0)
    renamed, card_vram_mib, pool_resource, pool_vram_reason = _pool(
        "time-slicing", resource="nvidia.com/gpu.shared"
    )
    pod = _whole(20000, resource="nvidia.com/gpu.shared")
    assert pool_resource(pod, renamed) == "nvidia.com/gpu.shared"
    assert pool_vram_reason(pod, renamed) is not None
    assert card_vram_mib(pod, renamed) == 20000
    assert pool_resource(_whole(20000), renamed) is None  # nvidia.com/gpu is not advertised there
    assert pool_resource(_whole(20000, units=0), renamed) is None
    plain = node(
        "x", allocatable={"nvidia.com/gpu": 4}, gpu=GpuInfo(product="T4", memory_mib=16384, count=4)
    )
    assert (pool_resource(_whole(20000), plain), card_vram_mib(_whole(20000), plain)) == (None, 0)
    assert pool_vram_reason(_whole(20000), plain) is None
    assert pool_resource(_whole(1), node("y", allocatable={"nvidia.com/gpu": 4})) is None


def test_fits_is_eligible_and_not_short():
    from vfcore.placement.fit import fits

    pod = PodRequest("c/0", "c", 0, (("cpu", 1000),))
    assert fits(pod, node("a", allocatable={"cpu": 1000}))
    assert not fits(pod, node("a", allocatable={"cpu": 999}))
    assert not fits(pod, node("a", allocatable={"cpu": 4000}, unschedulable=True))
    assert not fits(pod, node("a", allocatable={"cpu": 1500}), {"cpu": 501})
    assert fits(pod, node("a", allocatable={"cpu": 1500}), {"cpu": 500})


def test_fit_documents_have_every_field():
    from vfcore.placement.fit import Ineligible, Insufficient

    short = Insufficient("cpu", requested=4000, used=1000, capacity=2000)
    assert short.to_dict() == {
        "resource": "cpu",
        "requested": 4000,
        "used": 1000,
        "capacity": 2000,
        "message": "Insufficient cpu",
    }
    assert Ineligible("node(s) were unschedulable").to_dict() == {
        "message": "node(s) were unschedulable"
    }
    unplaced = Unplaced("w/0", "unschedulable", "0/1 nodes", (short,), "free 2 cpu")
    assert unplaced.to_dict() == {
        "pod": "w/0",
        "kind": "unschedulable",
        "summary": "0/1 nodes",
        "reasons": ["Insufficient cpu"],
        "fix": "free 2 cpu",
    }


def _shared(mib: int | None) -> PodRequest:
    return PodRequest("s/0", "s", 0, (), gpu_memory_mib=mib, slice="shared")


@pytest.mark.parametrize(
    ("gpu", "mib", "reasons"),
    [
        (GpuInfo(product="T4", memory_mib=16384, count=2), 16384, ()),  # exactly a card
        (
            GpuInfo(product="T4", memory_mib=16384, count=2),
            16385,
            ("node(s) had too little VRAM per card: 16.00 GiB asked, 16.00 GiB per card",),
        ),
        (None, 1024, ("node(s) had no GPU memory facts (nvidia.com/gpu.memory, .count)",)),
        (
            GpuInfo(product="T4", memory_mib=None, count=2),
            1024,
            ("node(s) had no GPU memory facts (nvidia.com/gpu.memory, .count)",),
        ),
        (
            GpuInfo(product="T4", memory_mib=16384, count=None),
            1024,
            ("node(s) had no GPU memory facts (nvidia.com/gpu.memory, .count)",),
        ),
    ],
)
def test_vfcore_rules_for_a_shared_slice(gpu, mib: int, reasons: tuple[str, ...]):
    from vfcore.placement.fit import _vfcore_reasons

    assert _vfcore_reasons(_shared(mib), node("g", allocatable={"cpu": 1}, gpu=gpu)) == reasons
    whole = PodRequest("w/0", "w", 0, (("cpu", 1),), gpu_memory_mib=99999, slice="whole")
    assert _vfcore_reasons(whole, node("g", allocatable={"cpu": 1}, gpu=gpu)) == ()


# -- taints, pools, a slice's VRAM, extra load, the messages: edges issue 18 found untested -----

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
