"""Scheduler model throughput (target: 10,000 pods × 2,000 nodes, one tie policy, ≤ 10 s).

The cluster: 1,800 GPU nodes — 450 each with 1, 2, 4 and 8 GPUs, 16 cores and
64 GiB per GPU, labelled ``nvidia.com/gpu.present=true`` and tainted
``nvidia.com/gpu:NoSchedule``; a quarter of them already run one 1-GPU pod —
plus 200 untainted CPU nodes (64 cores, 256 GiB). The pods: a flow's 10,000
replicas in apply order — 2,000 cpu decoders, 4,500 1-GPU detectors, 600
2-GPU trackers, 150 4-GPU embedders, 2,750 cpu sinks (93 % of the GPUs).
Default scoring (LeastAllocated on cpu and memory, BalancedAllocation), tie
policy ``first``; median of 3 runs.

Baseline, in the same process: the naive loop kube-scheduler itself runs —
for every pod, every node is filtered (``fit.fits``) and scored
(``node_score``) — timed on the first 1 % of the pods and extrapolated ×100.
The script checks that the naive loop binds those pods exactly where the
model does.

The model scores one node per equivalence class (same allocatable, labels,
taints and load), so its cost grows with the number of distinct node states.
A second, worst-case run gives every node a different pre-existing cpu
request (seeded), so no two nodes are ever alike.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, NodeState, Taint, node
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.fit import fits
from vfcore.placement.scheduler import (
    ScoringConfig,
    Simulation,
    node_score,
    predict,
    run_windowed,
    scheduler_node_order,
    simulate,
)
from vfcore.placement.scheduler.engine import Engine, num_feasible_nodes_to_find

TARGET_S = 10.0
T = TypeVar("T")
GPU = "nvidia.com/gpu"
GIB = 2**30


def cluster() -> ClusterSnapshot:
    nodes: list[NodeState] = []
    taint = Taint("nvidia.com/gpu", "", "NoSchedule")
    for gpus in (1, 2, 4, 8):
        for i in range(450):
            busy = i % 4 == 0
            nodes.append(
                node(
                    f"gpu{gpus}-{i:04d}",
                    allocatable={GPU: gpus, "cpu": 16_000 * gpus, "memory": 64 * GIB * gpus},
                    requested={GPU: 1, "cpu": 4_000, "memory": 16 * GIB, "pods": 1} if busy else {},
                    labels=dict([GPU_PRESENT_LABEL]),
                    taints=[taint],
                )
            )
    for i in range(200):
        nodes.append(node(f"cpu-{i:04d}", allocatable={"cpu": 64_000, "memory": 256 * GIB}))
    return ClusterSnapshot.of(nodes)


def pods() -> list[PodRequest]:
    out: list[PodRequest] = []

    def add(workload: str, count: int, requests: dict[str, int], gpu: bool) -> None:
        for r in range(count):
            out.append(
                PodRequest(
                    pod=f"{workload}/{r}",
                    node=workload,
                    replica=r,
                    requests=tuple(sorted(requests.items())),
                    node_selector=(GPU_PRESENT_LABEL,) if gpu else (),
                    tolerations=(GPU_TOLERATION,) if gpu else (),
                    slice="whole" if gpu else "none",
                )
            )

    add("decode", 2_000, {"cpu": 500, "memory": 1 * GIB}, gpu=False)
    add("detect", 4_500, {GPU: 1, "cpu": 4_000, "memory": 16 * GIB}, gpu=True)
    add("track", 600, {GPU: 2, "cpu": 8_000, "memory": 32 * GIB}, gpu=True)
    add("embed", 150, {GPU: 4, "cpu": 16_000, "memory": 64 * GIB}, gpu=True)
    add("sink", 2_750, {"cpu": 250, "memory": GIB // 2}, gpu=False)
    return out


def all_distinct(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """The same cluster with a different pre-existing cpu request on every node."""
    rng = random.Random(20240611)
    nodes = []
    for n in snapshot.nodes:
        requested = dict(n.requested or ())
        requested["cpu"] = requested.get("cpu", 0) + rng.randrange(1, 4_000)
        nodes.append(replace(n, requested=tuple(sorted(requested.items()))))
    return ClusterSnapshot.of(nodes)


def naive(
    pod_list: list[PodRequest], snapshot: ClusterSnapshot, config: ScoringConfig
) -> list[tuple[str, str]]:
    """kube-scheduler's own loop: filter and score every node for every pod; first on ties."""
    placed: dict[str, list[PodRequest]] = {n.name: [] for n in snapshot.nodes}
    extra: dict[str, dict[str, int]] = {n.name: {} for n in snapshot.nodes}
    bound: list[tuple[str, str]] = []
    for pod in pod_list:
        best, choice = -1, None
        for n in snapshot.nodes:
            if not fits(pod, n, extra[n.name]):
                continue
            score = node_score(pod, n, config=config, placed=placed[n.name]).total
            if score > best:
                best, choice = score, n.name
        if choice is not None:
            placed[choice].append(pod)
            for r, units in pod.requests:
                extra[choice][r] = extra[choice].get(r, 0) + units
            extra[choice]["pods"] = extra[choice].get("pods", 0) + 1
            bound.append((pod.pod, choice))
    return bound


def timed(fn: Callable[[], T], repeats: int) -> tuple[list[float], T]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return times, result


def window(snapshot: ClusterSnapshot, pod_list: list[PodRequest], config: ScoringConfig) -> None:
    """The scan window (issue 27): windowed runs, and ``predict``'s stranded range."""
    engine = Engine(pod_list, snapshot, config, {}, "full")
    order = scheduler_node_order(snapshot)
    to_find = num_feasible_nodes_to_find(len(order))
    for start, seed in ((0, None), (len(order) // 4, 0)):
        t = time.perf_counter()
        run = run_windowed(engine, order, start=start, to_find=to_find, jitter_seed=seed)
        took = time.perf_counter() - t
        assert run is not None
        print(
            f"windowed run (start {start}, jitter {seed}): {run.stranded:,} stranded, "
            f"{took:.2f} s ({to_find} of {len(order)} nodes scored per pod)"
        )
    t = time.perf_counter()
    prediction = predict(pod_list, snapshot, config=config)
    print(
        f"predict: {prediction.verdict}, stranded {prediction.stranded_range} in "
        f"{time.perf_counter() - t:.2f} s (tie search, bounded runs and windowed runs)"
    )


def main() -> int:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    snapshot, pod_list, config = cluster(), pods(), ScoringConfig()
    print(f"{len(pod_list):,} pods × {len(snapshot.nodes):,} nodes; {config.describe()}; tie=first")

    def run(snap: ClusterSnapshot) -> Simulation:
        return simulate(pod_list, snap, config=config, tie="first")

    times, sim = timed(lambda: run(snapshot), repeats)
    model_s = statistics.median(times)
    print(f"simulate: median {model_s:.2f} s over {repeats} runs {[round(t, 2) for t in times]}")
    print(
        f"  {len(sim.placements):,} placed, {len(sim.stranded):,} stranded, "
        f"{len(sim.ties):,} steps with a tie between distinct node states"
    )

    worst = all_distinct(snapshot)
    worst_times, worst_sim = timed(lambda: run(worst), repeats)
    worst_s = statistics.median(worst_times)
    print(
        f"simulate, every node distinct (worst case): median {worst_s:.2f} s "
        f"({len(worst_sim.placements):,} placed, {len(worst_sim.stranded):,} stranded)"
    )

    sample = pod_list[: len(pod_list) // 100]
    naive_times, bound = timed(lambda: naive(sample, snapshot, config), 1)
    assert bound == list(sim.placements[: len(bound)]), "naive loop and model disagree"
    naive_s = naive_times[0] * 100
    print(
        f"baseline: naive filter+score of every node, {len(sample)} pods in {naive_times[0]:.2f} s "
        f"→ {naive_s:.0f} s extrapolated to {len(pod_list):,} pods (same bindings as the model)"
    )
    print(f"ratio: naive / model = {naive_s / model_s:.0f}× (worst case {naive_s / worst_s:.1f}×)")
    window(snapshot, pod_list, config)
    met = max(model_s, worst_s) <= TARGET_S
    print(
        f"target ≤ {TARGET_S:.0f} s: {'met' if met else 'NOT met'} "
        f"({model_s:.2f} s; worst case {worst_s:.2f} s)"
    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
