"""DRA planning at scale: the exact plan of claims and kube-scheduler's allocator in the model.

Target (issue 25): planning 2,000 nodes × 8 GPUs of DRA claims — the exact
plan and the scheduler model, what ``vf plan --gpu-mode dra`` runs — in ≤ 10 s
and ≤ 1 GB. Two clusters, each measured in a fresh process (wall time, peak
RSS of the process):

- ``whole``: 2,000 nodes publishing 8 whole GPUs each (NVIDIA's driver without
  DynamicMIG: one slice per node); a quarter of the nodes have 1–3 GPUs held
  by existing claims; 3,000 one-GPU, 1,500 two-GPU and 600 four-GPU pods
  (8,400 of the 16,000 GPUs, cpu-bound so LeastAllocated spreads them);
- ``mig``: 2,000 nodes × 8 H100s with DynamicMIG (a counters slice and one
  slice per GPU, 19 devices each: 304,000 devices); 6,000 pods asking 9, 19 or
  39 GiB MIG slices.

Baseline, in the same run: the ``whole`` pods as extended-resource pods
(``nvidia.com/gpu``, exclusive mode) on the same nodes advertising 8 GPUs with
the same GPUs held — the whole-GPU model. Ratios: DRA's plan against it, and
the scheduler model's cost per pod (one greedy run, ``simulate``) against it.

    .venv/bin/python bench/bench_dra.py           # every case, 3 runs each (median)
    .venv/bin/python bench/bench_dra.py --quick   # one run each
"""

from __future__ import annotations

import json
import random
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

NODES = 2_000
GPUS = 8
GIB = 2**30
LABEL = {"nvidia.com/gpu.present": "true"}


def _held(seed: int = 11) -> dict[str, int]:
    rnd = random.Random(seed)
    return {f"n{i:04d}": rnd.randint(1, 3) for i in range(NODES) if rnd.random() < 0.25}


def whole_cluster(dra: bool) -> Any:
    from vfcore.cluster import ClusterSnapshot, node
    from vfcore.cluster.kubeparse.dra_objects import parse_dra
    from vfcore.placement.dra.nvidia import nvidia_device_classes, whole_gpu_slices

    held = _held()
    nodes = []
    for i in range(NODES):
        name = f"n{i:04d}"
        alloc = {"cpu": 64_000, "memory": 512 * GIB, "pods": 110}
        used = {"pods": held.get(name, 0), "cpu": 4_000 * held.get(name, 0)}
        if not dra:
            alloc["nvidia.com/gpu"] = GPUS
            used["nvidia.com/gpu"] = held.get(name, 0)
        nodes.append(node(name, allocatable=alloc, requested=used, labels=LABEL))
    cluster = ClusterSnapshot.of(nodes)
    if not dra:
        return cluster
    slices = [s for i in range(NODES) for s in whole_gpu_slices(f"n{i:04d}", GPUS)]
    claims = [
        {
            "kind": "ResourceClaim",
            "metadata": {"name": f"held-{name}", "namespace": "ml"},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu",
                                "driver": "gpu.nvidia.com",
                                "pool": name,
                                "device": f"gpu-{k}",
                            }
                            for k in range(count)
                        ]
                    }
                }
            },
        }
        for name, count in sorted(held.items())
    ]
    facts = parse_dra(
        {"kind": "ResourceSliceList", "items": slices},
        {"kind": "DeviceClassList", "items": list(nvidia_device_classes())},
        {"kind": "ResourceClaimList", "items": claims},
    )
    return replace(cluster, dra=facts)


def mig_cluster() -> Any:
    from vfcore.cluster import ClusterSnapshot, node
    from vfcore.cluster.kubeparse.dra_objects import parse_dra
    from vfcore.placement.dra.nvidia import dynamic_mig_slices, nvidia_device_classes

    nodes = [
        node(
            f"n{i:04d}", allocatable={"cpu": 64_000, "memory": 512 * GIB, "pods": 110}, labels=LABEL
        )
        for i in range(NODES)
    ]
    slices = [s for i in range(NODES) for s in dynamic_mig_slices(f"n{i:04d}", "H100-80GB", GPUS)]
    facts = parse_dra(
        {"kind": "ResourceSliceList", "items": slices},
        {"kind": "DeviceClassList", "items": list(nvidia_device_classes())},
        {"kind": "ResourceClaimList", "items": []},
    )
    return replace(ClusterSnapshot.of(nodes), dra=facts)


def whole_pods(dra: bool) -> tuple[Any, ...]:
    from vfcore.placement.claims import GPU_TOLERATION, DraRequest, PodRequest

    out = []
    for workload, gpus, replicas in (("one", 1, 3_000), ("two", 2, 1_500), ("four", 4, 600)):
        requests: tuple[tuple[str, int], ...] = (("cpu", 4_000 * gpus), ("memory", 16 * GIB))
        if not dra:
            requests = tuple(sorted((*requests, ("nvidia.com/gpu", gpus))))
        for r in range(replicas):
            out.append(
                PodRequest(
                    f"{workload}/{r}",
                    workload,
                    r,
                    requests,
                    tolerations=(GPU_TOLERATION,),
                    slice="dra" if dra else "whole",
                    dra=DraRequest("gpu.nvidia.com", gpus) if dra else None,
                )
            )
    return tuple(out)


def mig_pods() -> tuple[Any, ...]:
    from vfcore.flow.spec import NodeSpec
    from vfcore.placement.claims import PodRequest, dra_request_of

    out = []
    for workload, gib, replicas in (("det", 9, 3_000), ("pose", 19, 2_000), ("emb", 39, 1_000)):
        spec = NodeSpec(workload, "processor", ("src",), device_type="gpu", gpu_memory_gib=gib)
        request = dra_request_of(spec)
        for r in range(replicas):
            out.append(
                PodRequest(
                    f"{workload}/{r}",
                    workload,
                    r,
                    (("cpu", 1_000),),
                    gpu_memory_mib=gib * 1024,
                    slice="dra",
                    dra=request,
                )
            )
    return tuple(out)


def one(case: str) -> dict[str, Any]:
    """One measurement in this process: the instance is built first, then timed."""
    from vfcore.placement.packing import SolverConfig
    from vfcore.placement.plan import plan_pods
    from vfcore.placement.scheduler import simulate

    if case == "mig":
        cluster, pods, mode = mig_cluster(), mig_pods(), "dra"
    else:
        dra = case == "whole"
        cluster, pods, mode = whole_cluster(dra), whole_pods(dra), "dra" if dra else "exclusive"
    built_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    result = plan_pods(pods, cluster, gpu_mode=mode, solver=SolverConfig.deterministic())
    planned = time.perf_counter() - started
    started = time.perf_counter()
    run = simulate(pods, cluster)
    greedy = time.perf_counter() - started
    sched = result.scheduler
    return {
        "case": case,
        "pods": len(pods),
        "verdict": result.verdict,
        "method": result.solver.method,
        "scheduler": None if sched is None else sched.verdict,
        "stranded_range": None if sched is None else sched.prediction.stranded_range,
        "plan_s": planned,
        "simulate_s": greedy,
        "simulate_stranded": len(run.stranded),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "input_rss_mib": built_rss,
    }


def _measure(case: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", case], capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    if "--one" in sys.argv:
        print(json.dumps(one(sys.argv[sys.argv.index("--one") + 1])))
        return
    repeats = 1 if "--quick" in sys.argv else 3
    rows: dict[str, list[dict[str, Any]]] = {}
    for _ in range(repeats):  # alternate the cases so noise hits them alike
        for case in ("whole", "baseline", "mig"):
            rows.setdefault(case, []).append(_measure(case))
    med = {
        case: {
            k: statistics.median(r[k] for r in runs)
            for k in ("plan_s", "simulate_s", "peak_rss_mib", "input_rss_mib")
        }
        for case, runs in rows.items()
    }
    print(f"DRA planning, {NODES} nodes x {GPUS} GPUs, median of {repeats} fresh process(es)")
    for case, runs in rows.items():
        r, m = runs[0], med[case]
        print(
            f"  {case:9} {r['pods']:>6} pods: plan {m['plan_s']:6.2f} s ({r['verdict']}, "
            f"{r['method']}; scheduler model {r['scheduler']}, stranded {r['stranded_range']}), "
            f"one greedy run {m['simulate_s']:5.2f} s, peak RSS {m['peak_rss_mib']:6.0f} MiB "
            f"({m['input_rss_mib']:.0f} MiB once the input was built)"
        )
    w, b = med["whole"], med["baseline"]
    pods = rows["whole"][0]["pods"]
    print(
        f"  per pod (one greedy run): DRA {1e6 * w['simulate_s'] / pods:.0f} us, whole-GPU model "
        f"{1e6 * b['simulate_s'] / pods:.0f} us: ratio {w['simulate_s'] / b['simulate_s']:.2f}x"
    )
    print(f"  whole plan, DRA / whole-GPU model: {w['plan_s'] / b['plan_s']:.2f}x")
    for case in ("whole", "mig"):
        m = med[case]
        met = m["plan_s"] <= 10 and m["peak_rss_mib"] <= 1024
        print(
            f"  target <= 10 s and <= 1024 MiB, {case}: {'MET' if met else 'MISSED'} "
            f"(plan {m['plan_s']:.2f} s, peak RSS {m['peak_rss_mib']:.0f} MiB)"
        )


if __name__ == "__main__":
    main()
