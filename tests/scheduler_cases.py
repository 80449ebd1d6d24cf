"""The scheduler fidelity cases (tests/data/scheduler_fidelity.json), built for the model and for
a real control plane, and the model's every tie-break outcome for them.

A case is a flow — a producer ``src``, the case's workloads (processors, GPU
pods; ``partitioned`` makes one a StatefulSet in a REALTIME flow), a consumer
``sink`` — on fake GPU nodes (``nvidia.com/gpu.present=true``, an own
``kubernetes.io/hostname``, a zone when given), with pods already bound and a
PriorityClass when the case says so. The offline test
(tests/unit/test_scheduler_fidelity.py) and the control-plane test
(tests/cluster/test_scheduler_fidelity.py) share these builders.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, NodeState, node
from vfcore.flow.spec import FlowSpec, NodeSpec
from vfcore.placement.claims import PodRequest, pod_requests
from vfcore.placement.scheduler import (
    BoundPod,
    SchedulingFacts,
    ScoringConfig,
    Simulation,
    Workload,
    simulate,
)
from vfcore.placement.scheduler.simulation import TiePolicy

CASES_FILE = Path(__file__).resolve().parent / "data" / "scheduler_fidelity.json"
GIB = 2**30
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def read_cases(path: Path) -> list[dict[str, Any]]:
    """The ``cases`` of a fidelity table (scheduler_fidelity.json, dra_fidelity.json)."""
    cases: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cases"]
    return cases


def load_cases() -> list[dict[str, Any]]:
    return read_cases(CASES_FILE)


def case_spec(case: Mapping[str, Any]) -> FlowSpec:
    """A case's flow: a producer, its GPU workloads in a chain, a sink (a workload's
    ``replicas`` and ``gpus`` default to 1; DRA cases may give ``gpu_memory_gib``)."""
    nodes: list[NodeSpec] = [NodeSpec("src", "producer")]
    last = "src"
    for w in case["workloads"]:
        requests = tuple((r, str(w[r])) for r in ("cpu", "memory") if r in w)
        nodes.append(
            NodeSpec(
                w["name"],
                "processor",
                (last,),
                nb_tasks=w.get("replicas", 1),
                device_type="gpu",
                gpu_count=w.get("gpus", 1),
                gpu_memory_gib=w.get("gpu_memory_gib"),
                requests=requests,
                partition_by="trace_id" if w.get("partitioned") else None,
            )
        )
        last = w["name"]
    nodes.append(NodeSpec("sink", "consumer", (last,)))
    return FlowSpec(case["name"], case["flow_type"], tuple(nodes))


def node_labels(shape: Mapping[str, Any]) -> dict[str, str]:
    labels = {HOST: shape["name"], GPU_PRESENT_LABEL[0]: GPU_PRESENT_LABEL[1]}
    if shape.get("zone"):
        labels[ZONE] = shape["zone"]
    return labels


def case_cluster(case: Mapping[str, Any]) -> ClusterSnapshot:
    used: dict[str, Counter[str]] = {}
    for pod in case.get("bound", []):
        used.setdefault(pod["node"], Counter()).update({"nvidia.com/gpu": pod["gpus"], "pods": 1})
    nodes: list[NodeState] = []
    for shape in case["nodes"]:
        nodes.append(
            node(
                shape["name"],
                allocatable={
                    "cpu": shape["cpu"] * 1000,
                    "memory": shape["memory_gib"] * GIB,
                    "nvidia.com/gpu": shape["gpus"],
                    "pods": 110,
                },
                requested=dict(used.get(shape["name"], {})),
                labels=node_labels(shape),
            )
        )
    return ClusterSnapshot.of(nodes)


def case_facts(case: Mapping[str, Any]) -> SchedulingFacts:
    pods = tuple(
        BoundPod(
            "default",
            p["name"],
            p["node"],
            labels=(("app", p["name"]),),
            priority=p.get("priority", 0),
            requests=(("nvidia.com/gpu", p["gpus"]),),
        )
        for p in case.get("bound", [])
    )
    priority = case.get("priority_class")
    classes = () if priority is None else ((priority["name"], priority["value"]),)
    return SchedulingFacts(pods=pods, budgets=(), priority_classes=classes)


def case_workloads(case: Mapping[str, Any]) -> dict[str, Workload]:
    """The workloads as vf deploy renders them (labels, owners, Services, priority)."""
    from vfadapters.kubernetes.scheduling import scheduler_workloads

    priority = case.get("priority_class")
    return dict(
        scheduler_workloads(
            case_spec(case),
            case_facts(case),
            priority_class=None if priority is None else priority["name"],
        )
    )


def case_pods(case: Mapping[str, Any]) -> tuple[PodRequest, ...]:
    return pod_requests(case_spec(case))


class _Enumerate(TiePolicy):
    """Follows ``prefix`` at the first ties, then takes the first; records every branching."""

    name = "enumerate"

    def __init__(self, prefix: Sequence[int]) -> None:
        self.prefix = list(prefix)
        self.taken: list[tuple[int, int]] = []  # (choice, options) at each tie

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        options = [(sid, m) for sid in sorted(tied) for m in range(len(classes[sid]))]
        return self._take(options)

    def pick(
        self, engine: Any, kind: int, tied: list[int], classes: Mapping[int, list[str]]
    ) -> Any:
        """Every tied node, and for a DRA pod every state the allocator can leave it in."""
        options = [
            (sid, m, target)
            for sid in sorted(tied)
            for m in range(len(classes[sid]))
            for target in engine.successors(kind, sid)
        ]
        return self._take(options)

    def _take(self, options: list[Any]) -> Any:
        if len(options) == 1:
            return options[0]
        k = len(self.taken)
        choice = self.prefix[k] if k < len(self.prefix) else 0
        self.taken.append((choice, len(options)))
        return options[choice]


def every_outcome(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    *,
    workloads: Mapping[str, Workload] | None = None,
    facts: SchedulingFacts | None = None,
    limit: int = 5_000,
) -> list[Simulation]:
    """Every node-level tie-break outcome of the model (depth first), up to ``limit`` runs; for
    DRA pods also every device-slice order the allocator can take."""
    out: list[Simulation] = []
    stack: list[list[int]] = [[]]
    while stack and len(out) < limit:
        prefix = stack.pop()
        policy = _Enumerate(prefix)
        run = simulate(
            pods, cluster, config=ScoringConfig(), tie=policy, workloads=workloads, facts=facts
        )  # type: ignore[arg-type]
        out.append(run)
        for k in range(len(prefix), len(policy.taken)):
            choice, options = policy.taken[k]
            for alternative in range(choice + 1, options):
                stack.append([c for c, _ in policy.taken[:k]] + [alternative])
    return out


def counts_by_workload(
    run: Simulation, zone_of: Mapping[str, str] | None = None
) -> dict[str, dict[str, int]]:
    """``{workload: {node (or zone): pods}}`` of one run."""
    out: dict[str, Counter[str]] = {}
    for pod, where in run.placements:
        key = where if zone_of is None else zone_of[where]
        out.setdefault(pod.rsplit("/", 1)[0], Counter())[key] += 1
    return {w: dict(c) for w, c in out.items()}
