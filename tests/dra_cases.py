"""Shared DRA fixtures: clusters of NVIDIA-style ResourceSlices and DRA pods (test helpers)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from vfcore import ConsumerNode, ProcessorNode, ProducerNode
from vfcore.cluster import ClusterSnapshot, node
from vfcore.cluster.kubeparse.dra_objects import parse_dra
from vfcore.placement.claims import DraRequest, PodRequest
from vfcore.placement.dra.nvidia import (
    dynamic_mig_slices,
    nvidia_device_classes,
    whole_gpu_slices,
)

DRIVER = "gpu.nvidia.com"


class Src(ProducerNode):
    def next(self):
        raise StopIteration


class Step(ProcessorNode):
    def process(self, x):
        return x


class Sink(ConsumerNode):
    def consume(self, x):
        pass


BIG = {"cpu": 64_000, "memory": 2**38}


def listing(kind: str, items: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": f"{kind}List", "items": list(items)}


def allocated_claim(name: str, devices: Sequence[tuple[str, str]], namespace: str = "ml") -> dict:
    """An allocated ResourceClaim holding ``devices`` (pool, device) of the NVIDIA driver."""
    return {
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu"}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": pool, "device": device}
                        for pool, device in devices
                    ]
                }
            }
        },
    }


def dra_cluster(
    layout: dict[str, tuple[str, int]],
    *,
    claims: Sequence[dict[str, Any]] = (),
    allocatable: dict[str, int] | None = None,
    labels: dict[str, str] | None = None,
) -> ClusterSnapshot:
    """Nodes named by ``layout``: ``("mig:H100-80GB", gpus)`` for DynamicMIG slices of that
    family, ``("whole", gpus)`` for whole GPUs without DynamicMIG."""
    slices: list[dict[str, Any]] = []
    nodes = []
    for name, (kind, gpus) in sorted(layout.items()):
        if kind.startswith("mig:"):
            slices += dynamic_mig_slices(name, kind[4:], gpus)
        else:
            slices += whole_gpu_slices(name, gpus)
        nodes.append(node(name, allocatable=allocatable or BIG, labels=labels))
    facts = parse_dra(
        listing("ResourceSlice", slices),
        listing("DeviceClass", nvidia_device_classes()),
        listing("ResourceClaim", claims),
    )
    return replace(ClusterSnapshot.of(nodes), dra=facts)


def memory(gib: float) -> str:
    return f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{round(gib * 1024)}Mi")) >= 0'


def profile(name: str) -> str:
    return f'device.attributes["{DRIVER}"].profile == "{name}"'


def mig_pods(gibs: Sequence[float], *, cpu: int = 1000) -> tuple[PodRequest, ...]:
    """One pod per entry, each its own workload ``w<i>``, claiming one MIG device of that size."""
    return tuple(
        PodRequest(
            f"w{i}/0",
            f"w{i}",
            0,
            (("cpu", cpu),),
            gpu_memory_mib=round(g * 1024),
            slice="dra",
            dra=DraRequest("mig.nvidia.com", 1, (memory(g),)),
        )
        for i, g in enumerate(gibs)
    )


def gpu_pods(
    counts: Sequence[int], *, cpu: int = 1000, workload: str = "w"
) -> tuple[PodRequest, ...]:
    """One pod per entry claiming that many whole GPUs."""
    return tuple(
        PodRequest(
            f"{workload}{i}/0",
            f"{workload}{i}",
            0,
            (("cpu", cpu),),
            slice="dra",
            dra=DraRequest("gpu.nvidia.com", n),
        )
        for i, n in enumerate(counts)
    )
