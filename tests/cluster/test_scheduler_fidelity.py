"""The scheduler model against a real kube-scheduler, on the objects ``vf deploy`` renders.

For every case of tests/data/scheduler_fidelity.json: fake GPU nodes (with the
case's zones), the pods already bound, the PriorityClasses; then the flow's
workloads as ``vf deploy`` renders them (Deployments, StatefulSets with their
headless Services, Jobs, PDBs — not the broker, whose pods the model leaves
out), applied server-side; kube-controller-manager creates the pods and
kube-scheduler binds them. Each workload's pods per node (or zone) must be
what some tie-break outcome of the model gives; the preemption case must
nominate the node and evict the pods the model names.

Needs ``etcd``, ``kube-apiserver``, ``kube-scheduler`` and
``kube-controller-manager`` in ``KUBEBUILDER_ASSETS`` (the envtest
convention; the last two from the release of the same version); skipped
otherwise. ``VF_RECORD_SCHEDULER_FIDELITY=1`` writes what the real scheduler
did into the table's ``observed`` (and ``source``), for the offline test
(tests/unit/test_scheduler_fidelity.py) to check from then on.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster.envtest import ControlPlane
from tests.cluster.helpers import create, delete_quietly, wait_until
from tests.scheduler_cases import (
    CASES_FILE,
    case_cluster,
    case_facts,
    case_pods,
    case_spec,
    case_workloads,
    counts_by_workload,
    every_outcome,
    load_cases,
    node_labels,
)

CASES = load_cases()
NODE_ANNOTATION = "vfcore.io/node-name"
RECORD = os.environ.get("VF_RECORD_SCHEDULER_FIDELITY") == "1"


@pytest.fixture(scope="module")
def controllers(scheduler: ControlPlane) -> Iterator[ControlPlane]:
    """kube-controller-manager beside the control plane: ReplicaSets, StatefulSets, Jobs."""
    with scheduler.controller_manager("deployment,replicaset,statefulset,job,disruption") as plane:
        yield plane


def _node(shape: dict[str, Any]) -> dict[str, Any]:
    resources = {
        "cpu": str(shape["cpu"]),
        "memory": f"{shape['memory_gib']}Gi",
        "pods": "110",
        "nvidia.com/gpu": str(shape["gpus"]),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": shape["name"], "labels": node_labels(shape)},
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _bound_pod(pod: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": pod["node"],
        "containers": [
            {
                "name": "c",
                "image": "registry.example/idle:1",
                "resources": {"limits": {"nvidia.com/gpu": str(pod["gpus"])}},
            }
        ],
    }
    if pod.get("priority"):
        spec["priorityClassName"] = f"vf-test-{pod['priority']}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod["name"], "namespace": "default", "labels": {"app": pod["name"]}},
        "spec": spec,
    }


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def _flow_objects(case: dict[str, Any], run_id: str) -> list[dict[str, Any]]:
    """The case's workloads as vf deploy renders them, without the broker and its setup Job."""
    from vfcore.runtime.manifests import RenderOptions, render

    objects = render(
        case_spec(case), RenderOptions(image="registry.example/vf:fidelity", run_id=run_id)
    )
    kept = [
        o
        for o in objects
        if NODE_ANNOTATION in (o["metadata"].get("annotations") or {})
        and o["kind"] in ("Deployment", "StatefulSet", "Job", "Service", "PodDisruptionBudget")
    ]
    priority = case.get("priority_class")
    for obj in kept:  # vf deploy --priority-class: rendered on every pod template
        template = obj.get("spec", {}).get("template")
        if priority is not None and template is not None:
            template["spec"]["priorityClassName"] = priority["name"]
    return kept


def _pods_of(client: Any, run_id: str) -> list[dict[str, Any]]:
    answer = client.get_json(
        "/api/v1/namespaces/default/pods", query={"labelSelector": f"vfcore.io/run={run_id}"}
    )
    assert answer.ok, answer.status_line()
    items: list[dict[str, Any]] = answer.body["items"]
    return items


def _settled(pod: dict[str, Any]) -> bool:
    if pod["spec"].get("nodeName") or pod.get("status", {}).get("nominatedNodeName"):
        return True
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in pod.get("status", {}).get("conditions") or []
    )


def _expected_pods(case: dict[str, Any]) -> int:
    return len(case_pods(case))


def _record(case: dict[str, Any], observed: dict[str, dict[str, int]], zones: bool) -> None:
    doc = json.loads(CASES_FILE.read_text(encoding="utf-8"))
    for entry in doc["cases"]:
        if entry["name"] == case["name"]:
            entry["observed_zones" if zones else "observed"] = observed
            entry["source"] = "recorded by tests/cluster/test_scheduler_fidelity.py"
    CASES_FILE.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c["name"] for c in CASES])
def test_real_placements_are_model_outcomes(
    controllers: ControlPlane, admin: Any, index: int
) -> None:
    from vfadapters.kubernetes.apply import apply_objects

    case = CASES[index]
    run_id = f"fid{index}"
    created: list[str] = []
    try:
        for shape in case["nodes"]:
            create(admin, "/api/v1/nodes", _node(shape))
            created.append(f"/api/v1/nodes/{shape['name']}")
        classes = {p["priority"] for p in case.get("bound", []) if p.get("priority")}
        for value in sorted(classes):
            create(
                admin,
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                _priority_class(f"vf-test-{value}", value),
            )
            created.append(f"/apis/scheduling.k8s.io/v1/priorityclasses/vf-test-{value}")
        if case.get("priority_class"):
            p = case["priority_class"]
            create(
                admin,
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                _priority_class(p["name"], p["value"]),
            )
            created.append(f"/apis/scheduling.k8s.io/v1/priorityclasses/{p['name']}")
        for pod in case.get("bound", []):
            create(admin, "/api/v1/namespaces/default/pods", _bound_pod(pod))
            created.append(f"/api/v1/namespaces/default/pods/{pod['name']}")
        objects = _flow_objects(case, run_id)
        apply_objects(admin, objects)
        pods = wait_until(
            lambda: (
                (got := _pods_of(admin, run_id))
                and len(got) >= _expected_pods(case)
                and all(_settled(p) for p in got)
                and got
            ),
            limit_s=120,
            what=f"every pod of {case['name']} scheduled or refused",
        )
        placed = {
            f"{p['metadata']['annotations'][NODE_ANNOTATION]}/{p['metadata']['name']}": p[
                "spec"
            ].get("nodeName")
            or p.get("status", {}).get("nominatedNodeName")
            for p in pods
        }
        zone_of = {s["name"]: s.get("zone", "") for s in case["nodes"]}
        zones = "observed_zones" in case
        real: dict[str, Counter[str]] = {}
        for pod, where in placed.items():
            assert where, f"{pod} was not scheduled"
            real.setdefault(pod.rsplit("/", 1)[0], Counter())[
                zone_of[where] if zones else where
            ] += 1
        workloads = [w["name"] for w in case["workloads"]]
        observed = {w: dict(real[w]) for w in workloads}
        runs = every_outcome(
            case_pods(case),
            case_cluster(case),
            workloads=case_workloads(case),
            facts=case_facts(case),
        )
        outcomes = [counts_by_workload(r, zone_of if zones else None) for r in runs]
        assert any(all(o.get(w) == observed[w] for w in workloads) for o in outcomes), (
            observed,
            outcomes[:5],
        )
        if "expected_evicted" in case:
            for victim in case["expected_evicted"]:
                name = victim.split("/", 1)[1]
                answer = admin.get_json(f"/api/v1/namespaces/default/pods/{name}")
                assert answer.status == 404 or answer.body["metadata"].get("deletionTimestamp"), (
                    victim
                )
        if RECORD:
            _record(case, observed, zones)
    finally:
        for obj in reversed(_flow_objects(case, run_id)):
            kind = obj["kind"]
            group = {"Deployment": "apis/apps/v1", "StatefulSet": "apis/apps/v1", "Job": "apis/batch/v1",
                     "Service": "api/v1", "PodDisruptionBudget": "apis/policy/v1"}[kind]  # fmt: skip
            plural = {"Deployment": "deployments", "StatefulSet": "statefulsets", "Job": "jobs",
                      "Service": "services", "PodDisruptionBudget": "poddisruptionbudgets"}[kind]  # fmt: skip
            delete_quietly(admin, f"/{group}/namespaces/default/{plural}/{obj['metadata']['name']}")
        for pod in _pods_of(admin, run_id):
            delete_quietly(admin, f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}")
        for path in reversed(created):
            delete_quietly(admin, path)
