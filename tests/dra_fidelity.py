"""The DRA fidelity cases (tests/data/dra_fidelity.json), for the model and for a control plane.

A case is a flow — ``src``, the case's GPU workloads in order (``gpus`` whole
GPUs, or a MIG slice of ``gpu_memory_gib``), ``sink`` — deployed with
``--gpu-mode dra`` on nodes that publish NVIDIA-style ResourceSlices
(``layout``: ``whole`` or ``mig:<family>``), with devices some claim already
holds (``allocated``). What is compared, per workload: pods per node; per node:
the devices the flow's claims took in each GPU slice (``layouts``: a
DynamicMIG GPU's devices without its number, which GPU being the slice
order's tie). tests/unit/test_dra_fidelity.py checks that some outcome of the
model matches every case offline; tests/cluster/test_dra_fidelity.py deploys
them on a real kube-apiserver, kube-controller-manager and kube-scheduler.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.dra_cases import allocated_claim, listing
from tests.scheduler_cases import case_spec, every_outcome, read_cases
from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, node
from vfcore.cluster.kubeparse.dra_objects import parse_dra
from vfcore.placement.claims import PodRequest, pod_requests
from vfcore.placement.dra.nvidia import dynamic_mig_slices, nvidia_device_classes, whole_gpu_slices
from vfcore.placement.scheduler import Simulation, Workload

CASES_FILE = Path(__file__).resolve().parent / "data" / "dra_fidelity.json"
GIB = 2**30
HOST = "kubernetes.io/hostname"
_GPU_NUMBER = re.compile(r"^gpu-\d+-(?=mig-)")


def load_cases() -> list[dict[str, Any]]:
    return read_cases(CASES_FILE)


def case_slices(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for shape in case["nodes"]:
        if shape["layout"] == "whole":
            out += whole_gpu_slices(shape["name"], shape["gpus"])
        else:
            out += dynamic_mig_slices(
                shape["name"], shape["layout"].split(":", 1)[1], shape["gpus"]
            )
    return out


def case_claims(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        allocated_claim(f"held-{i}", [(a["node"], a["device"])], namespace="default")
        for i, a in enumerate(case.get("allocated", []))
    ]


def node_object(shape: Mapping[str, Any]) -> dict[str, Any]:
    resources = {"cpu": str(shape["cpu"]), "memory": f"{shape['memory_gib']}Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": shape["name"],
            "labels": {HOST: shape["name"], GPU_PRESENT_LABEL[0]: "true"},
        },
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def case_cluster(case: Mapping[str, Any]) -> ClusterSnapshot:
    from dataclasses import replace

    nodes = [
        node(
            s["name"],
            allocatable={"cpu": s["cpu"] * 1000, "memory": s["memory_gib"] * GIB, "pods": 110},
            labels={HOST: s["name"], GPU_PRESENT_LABEL[0]: "true"},
        )
        for s in case["nodes"]
    ]
    facts = parse_dra(
        listing("ResourceSlice", case_slices(case)),
        listing("DeviceClass", nvidia_device_classes()),
        listing("ResourceClaim", case_claims(case)),
    )
    return replace(ClusterSnapshot.of(nodes), dra=facts)


def case_pods(case: Mapping[str, Any]) -> tuple[PodRequest, ...]:
    return pod_requests(case_spec(case), gpu_mode="dra")


def case_workloads(case: Mapping[str, Any]) -> dict[str, Workload]:
    from vfadapters.kubernetes.scheduling import scheduler_workloads
    from vfcore.placement.scheduler import SchedulingFacts

    return dict(
        scheduler_workloads(
            case_spec(case),
            SchedulingFacts(pods=(), budgets=(), priority_classes=()),
            gpu_mode="dra",
        )
    )


def outcome_of(run: Simulation) -> dict[str, Any]:
    """What a run did, as the table records it: pods per node per workload, and layouts."""
    placements: dict[str, Counter[str]] = {}
    for pod, where in run.placements:
        placements.setdefault(pod.rsplit("/", 1)[0], Counter())[where] += 1
    return {
        "placements": {w: dict(c) for w, c in placements.items() if w not in ("src", "sink")},
        "layouts": {n: [list(b) for b in blocks] for n, blocks in run.dra_layouts},
        "stranded": sorted(s.pod for s in run.stranded),
    }


def model_outcomes(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    runs = every_outcome(case_pods(case), case_cluster(case), workloads=case_workloads(case))
    return [outcome_of(r) for r in runs]


def real_layouts(
    claims: Sequence[Mapping[str, Any]], case: Mapping[str, Any]
) -> dict[str, list[list[str]]]:
    """The devices allocated claims hold, per node and GPU slice, as :func:`outcome_of` says."""
    by_block: dict[tuple[str, str], list[str]] = {}
    whole = {s["name"] for s in case["nodes"] if s["layout"] == "whole"}
    for claim in claims:
        results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {})
        for r in results.get("results") or []:
            pool, device = r["pool"], r["device"]
            block = "all" if pool in whole else device.split("-mig-")[0]
            by_block.setdefault((pool, block), []).append(_GPU_NUMBER.sub("", device))
    out: dict[str, list[list[str]]] = {}
    for (pool, _), devices in sorted(by_block.items()):
        out.setdefault(pool, []).append(sorted(devices))
    return {n: sorted(blocks) for n, blocks in out.items()}
