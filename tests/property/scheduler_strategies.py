"""Hypothesis strategies for the scheduler model, and its brute-force oracle.

Small clusters and pod lists (``instances``: random ones and tight ones), the
scoring configurations drawn (``configs``), and ``brute_force``: every
node-level tie-break enumerated (no equivalence classes, no memo) with
:func:`vfcore.fit.fits` and :func:`vfcore.placement.scheduler.node_score`, so
it checks the model's node classes, search and bookkeeping independently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from hypothesis import strategies as st

from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, NodeState, Taint, node
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.fit import fits
from vfcore.placement.scheduler import (
    ScoringConfig,
    node_score,
)

GPU = "nvidia.com/gpu"


GIB = 2**30


CONFIGS = (
    ScoringConfig(),
    ScoringConfig(resources=((GPU, 1),)),
    ScoringConfig(resources=(("cpu", 1), ("memory", 1), (GPU, 3))),
    ScoringConfig(strategy="MostAllocated", resources=((GPU, 1), ("cpu", 1))),
    ScoringConfig(strategy="RequestedToCapacityRatio", resources=((GPU, 2), ("memory", 1))),
    ScoringConfig(
        strategy="RequestedToCapacityRatio",
        resources=((GPU, 1),),
        shape=((0, 10), (30, 4), (100, 0)),
        balanced_weight=0,
    ),
    ScoringConfig(balanced_resources=("cpu", "memory", GPU), fit_weight=2),
)


configs = st.sampled_from(CONFIGS)


@st.composite
def clusters(draw: st.DrawFn, *, max_nodes: int = 4) -> ClusterSnapshot:
    nodes: list[NodeState] = []
    for i in range(draw(st.integers(1, max_nodes))):
        gpus = draw(st.sampled_from([1, 2, 4, 4, 8]))
        alloc = {
            GPU: gpus,
            "cpu": draw(st.sampled_from([2_000, 4_000, 16_000])),
            "memory": draw(st.sampled_from([4, 8, 64])) * GIB,
            "pods": draw(st.sampled_from([2, 110, 110])),
        }
        used: dict[str, int] = {}
        if draw(st.integers(0, 3)) == 0:
            used = {GPU: draw(st.integers(0, gpus)), "cpu": 500, "pods": 1}
        nodes.append(
            node(
                f"n{i}",
                allocatable=alloc,
                requested={k: v for k, v in used.items() if v},
                labels=dict([GPU_PRESENT_LABEL]) if draw(st.integers(0, 7)) else {},
                taints=[Taint("dedicated", "x", "NoSchedule")]
                if not draw(st.integers(0, 9))
                else [],
                ready=draw(st.integers(0, 11)) != 0,
            )
        )
    return ClusterSnapshot.of(nodes)


@st.composite
def pod_lists(draw: st.DrawFn, *, max_pods: int = 5) -> list[PodRequest]:
    pods = []
    replicas: dict[str, int] = {}
    for _ in range(draw(st.integers(1, max_pods))):
        workload = draw(st.sampled_from(["w0", "w1", "w2"]))
        replica = replicas.get(workload, 0)
        replicas[workload] = replica + 1
        requests = {
            GPU: draw(st.sampled_from([0, 1, 1, 2, 3, 4])),
            "cpu": draw(st.sampled_from([0, 500, 1_000, 4_000])),
            "memory": draw(st.sampled_from([0, 1, 8])) * GIB,
        }
        pods.append(
            PodRequest(
                pod=f"{workload}/{replica}",
                node=workload,
                replica=replica,
                requests=tuple(sorted((k, v) for k, v in requests.items() if v)),
                node_selector=(GPU_PRESENT_LABEL,) if requests[GPU] else (),
                tolerations=(GPU_TOLERATION,) if requests[GPU] else (),
                slice="whole" if requests[GPU] else "none",
            )
        )
    return pods


@st.composite
def tight_instances(draw: st.DrawFn) -> tuple[list[PodRequest], ClusterSnapshot]:
    """Workloads of identical replicas whose GPU claims come within 2 of the free GPUs.

    Where greedy strands or ties matter. Replicas of one workload share a
    template, so they claim the same; cpu and memory are proportional or absent.
    """
    caps = draw(st.lists(st.sampled_from([2, 4, 4, 6, 8]), min_size=2, max_size=4))
    total = sum(caps) - draw(st.integers(0, 2))
    with_cpu = draw(st.booleans())
    claims: list[tuple[str, int]] = []
    workload = 0
    while len(claims) < 6 and sum(g for _, g in claims) < total:
        size = draw(st.integers(1, 4))
        for _ in range(draw(st.integers(1, 3))):
            if len(claims) < 6 and sum(g for _, g in claims) + size <= total:
                claims.append((f"w{workload}", size))
        workload += 1
        if workload > 6:
            break
    nodes = [
        node(
            f"n{i}",
            allocatable={GPU: c, "cpu": 8_000 * c, "memory": 32 * GIB * c},
            labels=dict([GPU_PRESENT_LABEL]),
        )
        for i, c in enumerate(caps)
    ]
    pods: list[PodRequest] = []
    replicas: dict[str, int] = {}
    for name, g in claims:
        replica = replicas.get(name, 0)
        replicas[name] = replica + 1
        cpu_memory = {"cpu": 8_000 * g, "memory": 32 * GIB * g} if with_cpu else {}
        pods.append(
            PodRequest(
                pod=f"{name}/{replica}",
                node=name,
                replica=replica,
                requests=tuple(sorted({GPU: g, **cpu_memory}.items())),
                node_selector=(GPU_PRESENT_LABEL,),
                tolerations=(GPU_TOLERATION,),
                slice="whole",
            )
        )
    return pods, ClusterSnapshot.of(nodes)


instances = st.one_of(st.tuples(pod_lists(), clusters()), tight_instances())


@dataclass
class Oracle:
    """Every node-level tie-break outcome, by brute force."""

    leaves: int
    p_strand: Fraction
    sometimes: frozenset[str]
    always: frozenset[str]
    verdict: str


def brute_force(
    pods: Sequence[PodRequest], cluster: ClusterSnapshot, config: ScoringConfig
) -> Oracle:
    outcomes: list[tuple[Fraction, frozenset[str]]] = []

    def go(i: int, placed: dict[str, list[PodRequest]], chance: Fraction, stranded: frozenset[str]):
        if i == len(pods):
            outcomes.append((chance, stranded))
            return
        pod = pods[i]
        scores = {}
        for n in cluster.nodes:
            extra: dict[str, int] = {"pods": len(placed[n.name])}
            for other in placed[n.name]:
                for r, units in other.requests:
                    extra[r] = extra.get(r, 0) + units
            if fits(pod, n, extra):
                scores[n.name] = node_score(pod, n, config=config, placed=placed[n.name]).total
        if not scores:
            go(i + 1, placed, chance, stranded | {pod.pod})
            return
        top = max(scores.values())
        tied = [name for name, score in scores.items() if score == top]
        for name in tied:
            go(i + 1, {**placed, name: [*placed[name], pod]}, chance / len(tied), stranded)

    go(0, {n.name: [] for n in cluster.nodes}, Fraction(1), frozenset())
    sets = [s for _, s in outcomes]
    landing = sum(1 for s in sets if not s)
    verdict = "lands" if landing == len(sets) else "strands" if landing == 0 else "at-risk"
    return Oracle(
        leaves=len(outcomes),
        p_strand=sum((c for c, s in outcomes if s), Fraction(0)),
        sometimes=frozenset().union(*sets),
        always=frozenset.intersection(*sets),
        verdict=verdict,
    )
