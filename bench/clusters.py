"""Seeded heterogeneous GPU pools for the scheduler-scale benchmark (no I/O here; callers write).

``gpu_pool(n_gpu_nodes, cpu_nodes=…, seed=…)`` is a ``kubectl get nodes -o json``
document: GPU nodes with 1, 2, 4 or 8 GPUs drawn at random (64 cpu, 512Gi each,
tainted ``nvidia.com/gpu:NoSchedule``, labelled ``nvidia.com/gpu.present=true``)
and untainted CPU nodes of the same size. ``gpu_flow(...)`` is a FlowSpec with
GPU stages of 1/1/2/4-GPU pods whose replicas fill ``fill`` of the pool's GPUs,
plus CPU stages for the remaining pods. Same seed, same documents.
"""

from __future__ import annotations

import random
from typing import Any

from vfcore import FlowSpec, NodeSpec

GPU = "nvidia.com/gpu"


def _node(name: str, gpus: int) -> dict[str, Any]:
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    labels = {"kubernetes.io/hostname": name}
    spec: dict[str, Any] = {}
    if gpus:
        alloc[GPU] = str(gpus)
        labels["nvidia.com/gpu.present"] = "true"
        spec["taints"] = [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "allocatable": dict(alloc),
            "capacity": dict(alloc),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def gpu_shapes(n_gpu_nodes: int, seed: int) -> list[int]:
    rnd = random.Random(seed)
    return [rnd.choice((1, 2, 4, 8)) for _ in range(n_gpu_nodes)]


def gpu_pool(n_gpu_nodes: int, *, cpu_nodes: int = 1, seed: int = 1) -> dict[str, Any]:
    """``kubectl get nodes -o json`` for a heterogeneous pool (node names sort GPU nodes first)."""
    items = [_node(f"gpu-{i:05d}", g) for i, g in enumerate(gpu_shapes(n_gpu_nodes, seed))]
    items += [_node(f"cpu-{i:05d}", 0) for i in range(cpu_nodes)]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def empty_pods() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": []}


def gpu_flow(
    n_gpu_nodes: int,
    *,
    seed: int = 1,
    stages: int = 18,
    fill: float = 0.8,
    total_pods: int | None = None,
) -> FlowSpec:
    """A flow whose GPU stages (1/1/2/4 GPUs a pod) ask for ``fill`` of the pool's GPUs.

    With ``total_pods``, CPU stages (500m, 1Gi a pod) make up the rest of the pods.
    """
    rnd = random.Random(seed * 7919 + 1)
    budget = int(sum(gpu_shapes(n_gpu_nodes, seed)) * fill)
    sizes = [rnd.choice((1, 1, 2, 4)) for _ in range(stages)]
    share = budget // stages
    nodes: list[NodeSpec] = [NodeSpec("source", "producer", sets_keys=("camera",))]
    gpu_pods = 0
    for i, gpus in enumerate(sizes):
        replicas = max(1, share // gpus)
        gpu_pods += replicas
        nodes.append(
            NodeSpec(
                f"gpu-stage-{i:02d}",
                "processor",
                ("source",),
                nb_tasks=replicas,
                device_type="gpu",
                gpu_count=gpus,
                requests=(("cpu", "2"), ("memory", "8Gi")),
            )
        )
    rest = max(0, (total_pods or 0) - gpu_pods)
    cpu_stages = max(1, rest // 100) if rest else 0
    for i in range(cpu_stages):
        replicas = rest // cpu_stages + (1 if i < rest % cpu_stages else 0)
        nodes.append(
            NodeSpec(
                f"cpu-stage-{i:03d}",
                "processor",
                ("source",),
                nb_tasks=replicas,
                requests=(("cpu", "500m"), ("memory", "1Gi")),
            )
        )
    nodes.append(NodeSpec("sink", "consumer", ("gpu-stage-00",)))
    return FlowSpec(f"pool-{n_gpu_nodes}", "batch", tuple(nodes))  # type: ignore[arg-type]
