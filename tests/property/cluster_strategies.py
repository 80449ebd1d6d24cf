"""Hypothesis strategies for placement: small pods × nodes instances with several resources."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from hypothesis import strategies as st

from vfcore.cluster import NodeState, Taint, node
from vfcore.placement.claims import GPU_TOLERATION, PodRequest

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


# -- instances feasible or infeasible by construction ------------------------------------------

#: One step of each resource (what a slack or a bound amount is counted in).
UNIT = {"cpu": 250, "memory": 1, "nvidia.com/gpu": 1, "example.com/fpga": 1, "pods": 1}


def demand_of(pods: Sequence[PodRequest]) -> Counter[str]:
    """What ``pods`` request in total, per resource (``pods``: how many they are)."""
    total: Counter[str] = Counter({"pods": len(pods)})
    for pod in pods:
        for resource, units in pod.requests:
            total[resource] += units
    return total


def free_of(nodes: Sequence[NodeState]) -> Counter[str]:
    """What ``nodes`` have free in total (allocatable − requested), per resource."""
    total: Counter[str] = Counter()
    for n in nodes:
        used = dict(n.requested or ())
        for resource, units in n.allocatable:
            total[resource] += units - used.get(resource, 0)
    return total


@st.composite
def _host(draw: st.DrawFn, name: str, mine: Sequence[PodRequest]) -> NodeState:
    """A node built to hold ``mine``: room for all of them plus a slack that is often 0."""
    demand = demand_of(mine)
    has_gpu = demand["nvidia.com/gpu"] > 0 or draw(st.integers(0, 3)) == 0
    resources = {"cpu", "memory"} | {r for r in demand if r != "pods"}
    if has_gpu:
        resources.add("nvidia.com/gpu")
    alloc: dict[str, int] = {}
    used: dict[str, int] = {}
    for r in sorted(resources):
        bound = draw(st.sampled_from([0, 0, 0, 1, 2])) * UNIT[r]
        slack = draw(st.sampled_from([0, 0, 1, 4])) * UNIT[r]
        alloc[r] = demand[r] + bound + slack
        if r in ("cpu", "memory"):
            alloc[r] = max(alloc[r], UNIT[r])
        if bound:
            used[r] = bound
    bound_pods = draw(st.sampled_from([0, 0, 1]))
    alloc["pods"] = len(mine) + bound_pods + draw(st.sampled_from([0, 0, 1, 110]))
    if bound_pods:
        used["pods"] = bound_pods
    selected = any(p.node_selector for p in mine)
    taints = []
    if has_gpu and all(GPU_TOLERATION in p.tolerations for p in mine) and draw(st.booleans()):
        taints.append(GPU_TAINT)
    if not mine and draw(st.integers(0, 3)) == 0:
        taints.append(OTHER_TAINT)
    return node(
        name,
        allocatable=alloc,
        requested=used,
        labels=dict([GPU_LABEL]) if has_gpu or selected else {},
        taints=taints,
        ready=bool(mine) or draw(st.integers(0, 5)) != 0,
        unschedulable=not mine and draw(st.integers(0, 5)) == 0,
    )


@st.composite
def fitting_instances(
    draw: st.DrawFn, *, max_pods: int = 7, max_nodes: int = 4, bystanders: bool = True
) -> tuple[list[PodRequest], list[NodeState]]:
    """Pods and nodes with a placement planted in them: feasible by construction.

    Pods are drawn as ``pod_lists`` draws them and each is given a host; each
    host is then built around its pods (Ready, schedulable, labelled for their
    selectors, tainted only where they all tolerate it) with room for exactly
    what they request, plus something already bound and a slack that is often
    0, so the packer has a tight packing to find. Bystander nodes drawn as
    ``node_lists`` draws them (in any state) may join; node order is shuffled.
    """
    pods = draw(pod_lists(max_pods=max_pods))
    n_hosts = draw(st.integers(1, min(max_nodes, len(pods))))
    host_of = [draw(st.integers(0, n_hosts - 1)) for _ in pods]
    nodes = [
        draw(_host(f"h{h}", [p for p, k in zip(pods, host_of, strict=True) if k == h]))
        for h in range(n_hosts)
    ]
    if bystanders and n_hosts < max_nodes:
        nodes += draw(node_lists(min_nodes=0, max_nodes=max_nodes - n_hosts))
    order = draw(st.permutations(range(len(nodes))))
    return pods, [replace(nodes[k], name=f"n{i}") for i, k in enumerate(order)]


@st.composite
def overfull_instances(
    draw: st.DrawFn, *, max_pods: int = 7, max_nodes: int = 3
) -> tuple[list[PodRequest], list[NodeState]]:
    """Infeasible by construction: a planted instance, then pods asking more than all nodes have.

    The added pods take one resource (pod slots, cpu or GPUs) past what every
    node together has free: a counting proof that no placement holds them all,
    while each added pod alone may well fit somewhere.
    """
    pods, nodes = draw(fitting_instances(max_pods=max_pods - 2, max_nodes=max_nodes))
    room = free_of(nodes)
    room.subtract(demand_of(pods))
    choices = ["cpu", "nvidia.com/gpu"] + (["pods"] if room["pods"] < 2 else [])
    resource = draw(st.sampled_from(choices))
    extra: list[dict[str, int]] = []
    if resource == "pods":
        extra = [{"cpu": draw(st.sampled_from([0, 250]))} for _ in range(room["pods"] + 1)]
    else:
        k = draw(st.integers(1, 2))
        step = UNIT[resource]
        size = -(-(room[resource] + 1) // (k * step)) * step  # k of them exceed the room
        extra = [{resource: size} for _ in range(k)]
    first = len(pods)
    for j, requests in enumerate(extra):
        gpu = "nvidia.com/gpu" in requests
        pods.append(
            PodRequest(
                pod=f"x/{j}",
                node="x",
                replica=first + j,
                requests=tuple(sorted((k, v) for k, v in requests.items() if v)),
                tolerations=(GPU_TOLERATION,) if gpu else (),
                slice="whole" if gpu else "none",
            )
        )
    assert demand_of(pods)[resource] > free_of(nodes)[resource]
    return pods, nodes
