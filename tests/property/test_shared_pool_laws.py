"""Laws of time-sliced and MPS pools: no plan puts declared VRAM over a card.

Nodes are drawn as GFD and the device plugin label them (``gpu.count``,
``gpu.memory`` in MiB, ``gpu.replicas``, allocatable = replicas × cards);
pods take one unit and may declare VRAM. Whatever the plugin's card choice, a
plan that says ``fits`` must fit: on a time-sliced card the ``replicas``
heaviest pods placed on the node fit one card; on MPS each pod fits memory /
replicas.
"""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st

from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, GpuInfo, node
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.packing import check_placement
from vfcore.placement.plan import plan_pods

GPU = "nvidia.com/gpu"


@st.composite
def pools(draw: st.DrawFn) -> ClusterSnapshot:
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        cards = draw(st.integers(1, 3))
        replicas = draw(st.integers(1, 4))
        sharing = draw(st.sampled_from(["time-slicing", "mps", "none"]))
        if sharing == "none":
            replicas = 1
        memory = draw(st.sampled_from([15360, 23034, 40960]))
        nodes.append(
            node(
                f"n{i}",
                allocatable={"cpu": 64000, GPU: cards * replicas},
                labels=dict([GPU_PRESENT_LABEL]),
                gpu=GpuInfo(memory_mib=memory, count=cards, sharing=sharing, replicas=replicas),
            )
        )
    return ClusterSnapshot.of(nodes)


@st.composite
def pod_lists(draw: st.DrawFn) -> list[PodRequest]:
    out = []
    for k, mib in enumerate(
        draw(st.lists(st.none() | st.integers(1024, 24 * 1024), min_size=1, max_size=8))
    ):
        out.append(
            PodRequest(
                f"p/{k}",
                "p",
                k,
                (("cpu", 1000), (GPU, 1)),
                (GPU_PRESENT_LABEL,),
                (GPU_TOLERATION,),
                mib,
                "whole",
            )
        )
    return out


def _brute_force_fits(snap: ClusterSnapshot, pods: list[PodRequest]) -> bool:
    """Is there any (node, card) for every pod that respects units per card and VRAM?"""
    slots = []
    for n in snap.nodes:
        assert n.gpu is not None and n.gpu.count and n.gpu.memory_mib
        slots += [(n.gpu.sharing, n.gpu.replicas, n.gpu.memory_mib)] * n.gpu.count
    load = [[0, 0] for _ in slots]  # units, MiB

    def place(k: int) -> bool:
        if k == len(pods):
            return True
        need = pods[k].gpu_memory_mib or 0
        for i, (sharing, replicas, memory) in enumerate(slots):
            units, mib = load[i]
            if units >= replicas:
                continue
            if sharing == "time-slicing" and mib + need > memory:
                continue
            if sharing == "mps" and need * replicas > memory:
                continue
            load[i] = [units + 1, mib + need]
            if place(k + 1):
                return True
            load[i] = [units, mib]
        return False

    return place(0)


@settings(max_examples=80, deadline=None)
@given(pools(), pod_lists())
def test_on_a_shared_pool_no_plan_puts_declared_vram_over_a_card(
    snap: ClusterSnapshot, pods: list[PodRequest]
) -> None:
    """fits: every card choice fits; does-not-fit: no choice does (brute force); unknown: some do."""
    result = plan_pods(pods, snap, predict_scheduler=False)
    event(result.verdict)
    assert (
        check_placement(result.pods, snap.nodes, result.assignments, cards=dict(result.cards)) == ()
    )
    by_pod = {p.pod: p for p in pods}
    worst_fits = True
    for n in snap.nodes:
        assert n.gpu is not None and n.gpu.memory_mib is not None
        here = sorted(
            (by_pod[p].gpu_memory_mib or 0 for p, where in result.assignments if where == n.name),
            reverse=True,
        )
        if n.gpu.sharing == "time-slicing":
            worst_fits &= sum(here[: n.gpu.replicas]) <= n.gpu.memory_mib
        elif n.gpu.sharing == "mps":
            assert all(m * n.gpu.replicas <= n.gpu.memory_mib for m in here)
    assert (result.verdict == "fits") == (worst_fits and not result.unplaced)
    assert (result.verdict == "does-not-fit") == (not _brute_force_fits(snap, pods))
