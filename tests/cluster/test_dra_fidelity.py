"""The DRA model against a real kube-scheduler's allocator, on the claims ``vf deploy`` renders.

For every case of tests/data/dra_fidelity.json: Nodes, the NVIDIA DeviceClasses
and the nodes' ResourceSlices (whole GPUs, or DynamicMIG: a counters slice and
one slice per GPU) are created through the API server, claims holding the
case's ``allocated`` devices are created and their allocation written to
``status``; then the flow's objects as ``vf deploy --gpu-mode dra`` renders
them (ResourceClaimTemplates, Jobs/Deployments — not the broker) are applied
server-side. kube-controller-manager's job, deployment, replicaset and
resourceclaim controllers create the pods and their claims; kube-scheduler
allocates the claims (``status.allocation.devices.results``) and binds the
pods. The real placements per workload, the devices per GPU slice and the
stranded pods must be one of the model's outcomes (the table's
``expected_any``, which tests/unit/test_dra_fidelity.py holds the model to).

Needs ``etcd``, ``kube-apiserver``, ``kube-scheduler`` and
``kube-controller-manager`` of Kubernetes 1.36 in ``KUBEBUILDER_ASSETS`` (the
envtest convention); skipped otherwise — no control plane runs on this
project's machines, so the table's cases are derived from the allocator's
source until a run records them: ``VF_RECORD_DRA_FIDELITY=1`` writes what the
real scheduler did into the table's ``observed`` (and ``source``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster.envtest import ControlPlane
from tests.cluster.helpers import create, delete_quietly, wait_until
from tests.dra_fidelity import (
    CASES_FILE,
    case_claims,
    case_slices,
    load_cases,
    node_object,
    real_layouts,
)
from tests.scheduler_cases import case_spec
from vfcore.placement.dra.nvidia import nvidia_device_classes

CASES = load_cases()
NODE_ANNOTATION = "vfcore.io/node-name"
RECORD = os.environ.get("VF_RECORD_DRA_FIDELITY") == "1"
RESOURCE = "/apis/resource.k8s.io/v1"


@pytest.fixture(scope="module")
def controllers(scheduler: ControlPlane) -> Iterator[ControlPlane]:
    """kube-controller-manager: Jobs, Deployments and the claims made from templates."""
    with scheduler.controller_manager(
        "job,deployment,replicaset,resourceclaim-controller"
    ) as plane:
        yield plane


def _flow_objects(case: dict[str, Any], run_id: str) -> list[dict[str, Any]]:
    """The case's claim templates and workloads as vf deploy renders them (no broker)."""
    from vfcore.runtime.manifests import RenderOptions, render

    objects = render(
        case_spec(case),
        RenderOptions(image="registry.example/vf:fidelity", run_id=run_id, gpu_mode="dra"),
    )
    return [
        o
        for o in objects
        if NODE_ANNOTATION in (o["metadata"].get("annotations") or {})
        and o["kind"] in ("ResourceClaimTemplate", "Deployment", "Job", "PodDisruptionBudget")
    ]


def _listed(client: Any, path: str, run_id: str) -> list[dict[str, Any]]:
    answer = client.get_json(path, query={"labelSelector": f"vfcore.io/run={run_id}"})
    assert answer.ok, answer.status_line()
    items: list[dict[str, Any]] = answer.body["items"]
    return items


def _settled(pod: dict[str, Any]) -> bool:
    if pod["spec"].get("nodeName"):
        return True
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in pod.get("status", {}).get("conditions") or []
    )


def _hold(client: Any, claim: dict[str, Any]) -> None:
    """Create a claim already allocated: the object, then its status (the scheduler's write)."""
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": claim["metadata"],
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
                ]
            }
        },
    }
    created = create(client, f"{RESOURCE}/namespaces/default/resourceclaims", body)
    created["status"] = claim["status"]
    name = claim["metadata"]["name"]
    answer = client.request(
        "PUT", f"{RESOURCE}/namespaces/default/resourceclaims/{name}/status", body=created
    )
    assert answer.ok, answer.status_line()


def _record(case: dict[str, Any], observed: dict[str, Any]) -> None:
    doc = json.loads(CASES_FILE.read_text(encoding="utf-8"))
    for entry in doc["cases"]:
        if entry["name"] == case["name"]:
            entry["observed"] = observed
            entry["source"] = "recorded by tests/cluster/test_dra_fidelity.py"
    CASES_FILE.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c["name"] for c in CASES])
def test_real_allocations_are_model_outcomes(
    controllers: ControlPlane, admin: Any, index: int
) -> None:
    from vfadapters.kubernetes.apply import apply_objects

    case = CASES[index]
    run_id = f"dra{index}"
    created: list[str] = []
    objects = _flow_objects(case, run_id)
    try:
        for shape in case["nodes"]:
            create(admin, "/api/v1/nodes", node_object(shape))
            created.append(f"/api/v1/nodes/{shape['name']}")
        for device_class in nvidia_device_classes():
            create(admin, f"{RESOURCE}/deviceclasses", device_class)
            created.append(f"{RESOURCE}/deviceclasses/{device_class['metadata']['name']}")
        for resource_slice in case_slices(case):
            create(admin, f"{RESOURCE}/resourceslices", resource_slice)
            created.append(f"{RESOURCE}/resourceslices/{resource_slice['metadata']['name']}")
        for claim in case_claims(case):
            _hold(admin, claim)
            created.append(
                f"{RESOURCE}/namespaces/default/resourceclaims/{claim['metadata']['name']}"
            )
        apply_objects(admin, objects)
        expected_pods = sum(w.get("replicas", 1) for w in case["workloads"])
        pods = wait_until(
            lambda: (
                (got := _listed(admin, "/api/v1/namespaces/default/pods", run_id))
                and len(got) >= expected_pods
                and all(_settled(p) for p in got)
                and got
            ),
            limit_s=120,
            what=f"every pod of {case['name']} scheduled or refused",
        )
        claims = _listed(admin, f"{RESOURCE}/namespaces/default/resourceclaims", run_id)
        placements: dict[str, dict[str, int]] = {}
        stranded = []
        for pod in pods:
            workload = pod["metadata"]["annotations"][NODE_ANNOTATION]
            where = pod["spec"].get("nodeName")
            if where:
                counts = placements.setdefault(workload, {})
                counts[where] = counts.get(where, 0) + 1
            else:
                stranded.append(f"{workload}/0")
        observed = {
            "placements": placements,
            "layouts": real_layouts(claims, case),
            "stranded": sorted(stranded),
        }
        key = json.dumps(observed, sort_keys=True)
        assert key in {json.dumps(o, sort_keys=True) for o in case["expected_any"]}, observed
        if RECORD:
            _record(case, observed)
    finally:
        for obj in reversed(objects):
            group, plural = {
                "ResourceClaimTemplate": ("apis/resource.k8s.io/v1", "resourceclaimtemplates"),
                "Deployment": ("apis/apps/v1", "deployments"),
                "Job": ("apis/batch/v1", "jobs"),
                "PodDisruptionBudget": ("apis/policy/v1", "poddisruptionbudgets"),
            }[obj["kind"]]
            delete_quietly(admin, f"/{group}/namespaces/default/{plural}/{obj['metadata']['name']}")
        for pod in _listed(admin, "/api/v1/namespaces/default/pods", run_id):
            delete_quietly(admin, f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}")
        for claim in _listed(admin, f"{RESOURCE}/namespaces/default/resourceclaims", run_id):
            delete_quietly(
                admin, f"{RESOURCE}/namespaces/default/resourceclaims/{claim['metadata']['name']}"
            )
        for path in reversed(created):
            delete_quietly(admin, path)
