"""Hypothesis strategies for placement: small pods × nodes instances with several resources."""

from __future__ import annotations

from hypothesis import strategies as st

from vfcore.claims import GPU_TOLERATION, PodRequest
from vfcore.cluster import NodeState, Taint, node

GPU_LABEL = ("nvidia.com/gpu.present", "true")
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
OTHER_TAINT = Taint("dedicated", "infra", "NoSchedule")


@st.composite
def pod_lists(draw: st.DrawFn, *, max_pods: int = 7) -> list[PodRequest]:
    n = draw(st.integers(1, max_pods))
    pods = []
    for i in range(n):
        gpu = draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3, 4]))
        requests = {
            "cpu": draw(st.sampled_from([0, 250, 500, 1000])),
            "memory": draw(st.sampled_from([0, 1, 1, 2])),
        }
        if gpu:
            requests["nvidia.com/gpu"] = gpu
        if draw(st.integers(0, 9)) == 0:
            requests["example.com/fpga"] = 1
        tolerations = (GPU_TOLERATION,) if gpu or draw(st.booleans()) else ()
        selector = (GPU_LABEL,) if gpu and draw(st.booleans()) else ()
        pods.append(
            PodRequest(
                pod=f"p{i // 3}/{i % 3}",
                node=f"p{i // 3}",
                replica=i % 3,
                requests=tuple(sorted((k, v) for k, v in requests.items() if v)),
                node_selector=selector,
                tolerations=tolerations,
                slice="whole" if gpu else "none",
            )
        )
    return pods


@st.composite
def node_lists(draw: st.DrawFn, *, max_nodes: int = 4, min_nodes: int = 1) -> list[NodeState]:
    n = draw(st.integers(min_nodes, max_nodes))
    nodes = []
    for i in range(n):
        gpus = draw(st.sampled_from([0, 1, 2, 4, 4, 8]))
        alloc = {
            "cpu": draw(st.sampled_from([1000, 2000, 4000, 8000])),
            "memory": draw(st.sampled_from([4, 8, 16])),
            "pods": draw(st.sampled_from([3, 110, 110])),
        }
        if gpus:
            alloc["nvidia.com/gpu"] = gpus
        if draw(st.integers(0, 5)) == 0:
            alloc["example.com/fpga"] = 2
        used = {}
        if draw(st.booleans()):
            used = {
                "cpu": draw(st.integers(0, alloc["cpu"] // 2)),
                "nvidia.com/gpu": draw(st.integers(0, gpus)) if gpus else 0,
                "pods": draw(st.integers(0, 1)),
            }
        taints = []
        if gpus and draw(st.booleans()):
            taints.append(GPU_TAINT)
        if draw(st.integers(0, 12)) == 0:
            taints.append(OTHER_TAINT)
        nodes.append(
            node(
                f"n{i}",
                allocatable=alloc,
                requested={k: v for k, v in used.items() if v},
                labels=dict([GPU_LABEL]) if gpus else {},
                taints=taints,
                ready=draw(st.integers(0, 19)) != 0,
                unschedulable=draw(st.integers(0, 19)) == 0,
            )
        )
    return nodes


@st.composite
def tight_gpu_instances(
    draw: st.DrawFn, *, max_pods: int = 7, max_nodes: int = 4
) -> tuple[list[PodRequest], list[NodeState]]:
    """GPU-only claims whose total is within 2 of the free total: where packing is hard."""
    if draw(st.booleans()):  # identical nodes: the aggregated (pattern) model decides
        caps = [draw(st.sampled_from([4, 8]))] * draw(st.integers(2, max_nodes))
    else:
        caps = draw(st.lists(st.integers(1, 8), min_size=1, max_size=max_nodes))
    total = sum(caps) - draw(st.integers(0, 2))
    claims: list[int] = []
    while len(claims) < max_pods and sum(claims) < total:
        claims.append(draw(st.integers(1, min(4, max(1, total - sum(claims))))))
    nodes = [
        node(f"n{i}", allocatable={"nvidia.com/gpu": c}, labels=dict([GPU_LABEL]))
        for i, c in enumerate(caps)
    ]
    pods = [
        PodRequest(
            pod=f"w/{i}",
            node="w",
            replica=i,
            requests=(("nvidia.com/gpu", g),),
            node_selector=(GPU_LABEL,),
            tolerations=(GPU_TOLERATION,),
            slice="whole",
        )
        for i, g in enumerate(claims)
    ]
    return pods, nodes
