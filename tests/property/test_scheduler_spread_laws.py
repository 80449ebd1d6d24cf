"""Laws of the scheduler model with workloads: spreading, preemption and the scan window.

The oracle is a transcription of PodTopologySpread's scoring written for this
test (per node, no node states, no memo, Go's arithmetic spelled out here) on
top of :func:`vfcore.placement.fit.fits` and
:func:`vfcore.placement.scheduler.node_score`; it enumerates every node-level
tie-break, so it checks the engine's spread slots, zone totals, normalisation
and search independently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, NodeState, node
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.fit import fits
from vfcore.placement.scheduler import (
    BoundPod,
    SchedulingFacts,
    ScoringConfig,
    Workload,
    node_score,
    predict,
    run_windowed,
    scheduler_node_order,
    simulate,
)
from vfcore.placement.scheduler.engine import Engine

GPU = "nvidia.com/gpu"
GIB = 2**30
ZONE = "topology.kubernetes.io/zone"


@st.composite
def zoned_clusters(draw: st.DrawFn, *, max_nodes: int = 4, zones: bool = True) -> ClusterSnapshot:
    nodes: list[NodeState] = []
    for i in range(draw(st.integers(1, max_nodes))):
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        labels = dict([GPU_PRESENT_LABEL])
        zone = draw(st.sampled_from(["z1", "z2", None])) if zones else None
        if zone is not None:
            labels[ZONE] = zone
        cpu = draw(st.sampled_from([4_000, 16_000, 64_000]))
        nodes.append(
            node(
                f"n{i}",
                allocatable={GPU: gpus, "cpu": cpu, "memory": cpu // 1000 * 4 * GIB},
                labels=labels,
            )
        )
    return ClusterSnapshot.of(nodes)


@st.composite
def workload_pods(
    draw: st.DrawFn, *, max_pods: int = 5
) -> tuple[list[PodRequest], dict[str, Workload]]:
    pods: list[PodRequest] = []
    kinds: dict[str, str] = {}
    for name in ("w0", "w1"):
        kinds[name] = draw(st.sampled_from(["deployment", "statefulset", "job"]))
    shapes = {
        name: {GPU: draw(st.sampled_from([1, 1, 2])), "cpu": draw(st.sampled_from([0, 1_000]))}
        for name in kinds
    }
    replicas: dict[str, int] = {}
    for _ in range(draw(st.integers(1, max_pods))):
        name = draw(st.sampled_from(sorted(kinds)))
        r = replicas.get(name, 0)
        replicas[name] = r + 1
        pods.append(
            PodRequest(
                f"{name}/{r}",
                name,
                r,
                tuple(sorted((k, v) for k, v in shapes[name].items() if v)),
                (GPU_PRESENT_LABEL,),
                (GPU_TOLERATION,),
                slice="whole",
            )
        )
    workloads = {
        name: Workload(name, kind, default_spread=kind != "job")  # type: ignore[arg-type]
        for name, kind in kinds.items()
    }
    return pods, workloads


@st.composite
def tight_instances(
    draw: st.DrawFn,
) -> tuple[tuple[list[PodRequest], dict[str, Workload]], ClusterSnapshot]:
    """Workloads whose GPU claims come within 2 of the cluster's GPUs: where ties decide."""
    pods, workloads = draw(workload_pods(max_pods=6))
    demand = sum(p.request(GPU) for p in pods)
    caps: list[int] = []
    while sum(caps) < demand + draw(st.integers(0, 2)) and len(caps) < 4:
        caps.append(draw(st.sampled_from([2, 2, 4, 4, 8])))
    nodes = [
        node(
            f"n{i}",
            allocatable={GPU: c, "cpu": 8_000 * c, "memory": 32 * GIB * c},
            labels={
                **dict([GPU_PRESENT_LABEL]),
                **({ZONE: f"z{i % 2}"} if draw(st.booleans()) else {}),
            },
        )
        for i, c in enumerate(caps)
    ]
    return (pods, workloads), ClusterSnapshot.of(nodes)


spread_instances = st.one_of(st.tuples(workload_pods(), zoned_clusters()), tight_instances())


def _round(x: float) -> int:
    return math.floor(x + 0.5)


def _spread_totals(
    pod: PodRequest,
    feasible: Sequence[NodeState],
    cluster: ClusterSnapshot,
    placed: Mapping[str, list[PodRequest]],
) -> list[int]:
    """Hostname (maxSkew 3) and zone (maxSkew 5) over the workload's own pods, × weight 2."""

    def mine(name: str) -> int:
        return sum(1 for p in placed[name] if p.node == pod.node)

    zone = {n.name: dict(n.labels).get(ZONE) for n in cluster.nodes}
    host_weight = math.log(len(feasible) + 2)
    zone_weight = math.log(len({zone[n.name] or "" for n in feasible}) + 2)
    in_zone: dict[str, int] = {}
    for n in cluster.nodes:  # every node matching the pod's selector counts
        if dict(n.labels).get(GPU_PRESENT_LABEL[0]) == GPU_PRESENT_LABEL[1] and zone[n.name]:
            in_zone[zone[n.name]] = in_zone.get(zone[n.name], 0) + mine(n.name)
    raw = []
    for n in feasible:
        score = mine(n.name) * host_weight + 2
        if zone[n.name]:
            score += in_zone.get(zone[n.name], 0) * zone_weight + 4
        raw.append(_round(score))
    low, high = min(raw), max(raw)
    normalised = [100 if high == 0 else 100 * (high + low - s) // high for s in raw]
    return [2 * s for s in normalised] if len(set(normalised)) > 1 else [0] * len(raw)


@dataclass
class Outcomes:
    verdict: str
    sometimes: frozenset[str]
    always: frozenset[str]
    counts: tuple[int, int]


def brute_force(
    pods: Sequence[PodRequest], cluster: ClusterSnapshot, workloads: Mapping[str, Workload]
) -> Outcomes:
    leaves: list[frozenset[str]] = []

    def go(i: int, placed: dict[str, list[PodRequest]], stranded: frozenset[str]) -> None:
        if i == len(pods):
            leaves.append(stranded)
            return
        pod = pods[i]
        feasible = []
        for n in cluster.nodes:
            extra: dict[str, int] = {"pods": len(placed[n.name])}
            for other in placed[n.name]:
                for r, units in other.requests:
                    extra[r] = extra.get(r, 0) + units
            if fits(pod, n, extra):
                feasible.append(n)
        if not feasible:
            go(i + 1, placed, stranded | {pod.pod})
            return
        totals = [node_score(pod, n, placed=placed[n.name]).total for n in feasible]
        if workloads[pod.node].default_spread:
            totals = [
                t + s
                for t, s in zip(totals, _spread_totals(pod, feasible, cluster, placed), strict=True)
            ]
        top = max(totals)
        for n, total in zip(feasible, totals, strict=True):
            if total == top:
                go(i + 1, {**placed, n.name: [*placed[n.name], pod]}, stranded)

    go(0, {n.name: [] for n in cluster.nodes}, frozenset())
    landing = sum(1 for s in leaves if not s)
    verdict = "lands" if landing == len(leaves) else "strands" if landing == 0 else "at-risk"
    sizes = [len(s) for s in leaves]
    return Outcomes(
        verdict,
        frozenset().union(*leaves),
        frozenset.intersection(*leaves),
        (min(sizes), max(sizes)),
    )


@settings(max_examples=120, deadline=None)
@given(instance=workload_pods(), cluster=zoned_clusters())
def test_the_exhaustive_search_agrees_with_brute_force_when_workloads_spread(
    instance, cluster
) -> None:  # type: ignore[no-untyped-def]
    pods, workloads = instance
    oracle = brute_force(pods, cluster, workloads)
    prediction = predict(pods, cluster, workloads=workloads)
    event(f"asserted: {oracle.verdict}")
    assert prediction.exhaustive
    assert prediction.verdict == oracle.verdict
    assert set(prediction.stranded_sometimes) == oracle.sometimes
    assert set(prediction.stranded_always) == oracle.always
    assert prediction.stranded_range == oracle.counts


@settings(max_examples=60, deadline=None)
@given(instance=workload_pods(max_pods=6), cluster=zoned_clusters(max_nodes=5, zones=False))
def test_a_window_covering_every_node_replays_the_first_tie_run(instance, cluster) -> None:  # type: ignore[no-untyped-def]
    pods, workloads = instance
    engine = Engine(pods, cluster, ScoringConfig(), {}, "full", workloads)
    order = scheduler_node_order(cluster)  # no zones: the list is in name order
    windowed = run_windowed(engine, order, start=0, to_find=len(order))
    assert windowed is not None
    assert windowed.simulation.placements == simulate(pods, cluster, workloads=workloads).placements


@st.composite
def preemption_instances(
    draw: st.DrawFn,
) -> tuple[list[PodRequest], ClusterSnapshot, SchedulingFacts, int]:
    nodes: list[NodeState] = []
    bound: list[BoundPod] = []
    for i in range(draw(st.integers(1, 4))):
        gpus = draw(st.sampled_from([2, 4]))
        # most nodes full, so that a preemptor usually has to evict to fit
        full = draw(st.sampled_from([True, True, True, False]))
        held = draw(st.lists(st.integers(1, 2), min_size=4 if full else 0, max_size=4))
        used = 0
        for j, g in enumerate(held):
            if used + g > gpus:
                g = gpus - used
            if g <= 0:
                break
            used += g
            bound.append(
                BoundPod(
                    "ns",
                    f"b{i}-{j}",
                    f"n{i}",
                    priority=draw(st.sampled_from([0, 100, 500, 1000])),
                    requests=((GPU, g),),
                    start_time=f"2026-01-01T00:00:0{j}Z",
                )
            )
        requested = {GPU: used, "pods": len([b for b in bound if b.node == f"n{i}"])}
        nodes.append(
            node(
                f"n{i}",
                allocatable={GPU: gpus},
                requested={k: v for k, v in requested.items() if v},
                labels=dict([GPU_PRESENT_LABEL]),
            )
        )
    size = draw(st.sampled_from([1, 2, 4]))
    pods = [
        PodRequest(
            f"p/{r}", "p", r, ((GPU, size),), (GPU_PRESENT_LABEL,), (GPU_TOLERATION,), slice="whole"
        )
        for r in range(draw(st.integers(1, 3)))
    ]
    return (
        pods,
        ClusterSnapshot.of(nodes),
        SchedulingFacts(pods=tuple(bound), budgets=()),
        draw(st.sampled_from([0, 200, 1000, 2000, 2000, 2000])),
    )


@settings(max_examples=120, deadline=None)
@given(instance=preemption_instances())
def test_a_preemptor_evicts_only_lower_priority_pods_and_then_fits(instance) -> None:  # type: ignore[no-untyped-def]
    pods, cluster, facts, priority = instance
    workloads = {"p": Workload("p", "job", priority=priority)}
    run = simulate(pods, cluster, workloads=workloads, facts=facts)
    assume(run.preemptions)
    event(f"preemptions: {len(run.preemptions)}")
    by_id = {b.id: b for b in facts.pods}
    gone: set[str] = set()
    placed: dict[str, int] = {}
    for pod_name, where in run.placements:
        pod = next(p for p in pods if p.pod == pod_name)
        preemption = next((p for p in run.preemptions if p.pod == pod_name), None)
        if preemption is not None:
            assert preemption.node == where
            assert all(by_id[v].priority < priority for v in preemption.victims)
            assert not set(preemption.victims) & gone  # a pod is evicted once
            gone.update(preemption.victims)
        left = sum(
            dict(b.requests)[GPU] for b in facts.pods if b.node == where and b.id not in gone
        )
        placed[where] = placed.get(where, 0) + pod.request(GPU)
        assert left + placed[where] <= cluster.node(where).allocatable_of(GPU)


@settings(max_examples=15, deadline=None)
@given(
    big=st.integers(100, 140),
    ones=st.integers(60, 140),
    twos=st.integers(5, 30),
)
def test_the_stranded_range_spans_every_outcome_explored(big: int, ones: int, twos: int) -> None:
    nodes = [
        node(
            f"n{i:03d}",
            allocatable={GPU: 1 if i % 3 else 2, "cpu": 8_000 if i % 3 else 16_000},
            labels=dict([GPU_PRESENT_LABEL]),
        )
        for i in range(big)
    ]
    pods = [
        PodRequest(
            f"{w}/{r}", w, r, ((GPU, g),), (GPU_PRESENT_LABEL,), (GPU_TOLERATION,), slice="whole"
        )
        for w, g, n in (("one", 1, ones), ("two", 2, twos))
        for r in range(n)
    ]
    prediction = predict(pods, ClusterSnapshot.of(nodes))
    window = prediction.window
    assume(window is not None and window.matters)
    assert window is not None
    counts = [*(window.full or ()), *(r["stranded"] for r in window.runs)]
    assert prediction.stranded_range == (min(counts), max(counts))
    assert prediction.verdict != "lands"
    event(f"asserted: {prediction.verdict}")
    if prediction.verdict == "strands":
        assert min(counts) > 0
