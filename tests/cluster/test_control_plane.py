"""`vf plan --kube`, `vf deploy`, the wait loop and `vf teardown` against a real control plane.

etcd + kube-apiserver (+ kube-scheduler) from ``KUBEBUILDER_ASSETS``; see
tests/cluster/envtest.py for what such a control plane does without kubelets
and controllers. Skipped when the binaries are absent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.envtest import ControlPlane
from tests.cluster.helpers import create, delete_quietly, flow_file, wait_until
from tests.integration.cli_helpers import one_json_document, run_vf


def _bound_pod(
    name: str, node: str, gpus: int, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "image": "registry.example/idle:1",
             "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
        ],
    }  # fmt: skip
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": spec,
    }


def test_plan_kube_reads_the_created_nodes_and_bound_pods(
    control_plane: ControlPlane, admin: Any, gpu_nodes: list[str], workdir: Path
) -> None:
    create(admin, "/api/v1/namespaces/default/pods", _bound_pod("holder", "gpu-a", 3))
    try:
        flow = flow_file(workdir, "envplan", gpus=4)
        result = run_vf(
            "plan", flow, "--kube", "--kubeconfig", control_plane.admin_kubeconfig, "--json"
        )
        assert result.returncode == 0, result.stderr
        doc = one_json_document(result)
        assert doc["verdict"] == "fits"
        assert doc["assignments"]["infer/0"] == "gpu-b"  # gpu-a has 1 of 4 left
        free = {
            u["node"]: u["free_before"] for u in doc["usage"] if u["resource"] == "nvidia.com/gpu"
        }
        assert free["gpu-a"] == 1 and free["gpu-b"] == 4
        too_big = flow_file(workdir, "envbig", gpus=5)
        refused = run_vf(
            "plan", too_big, "--kube", "--kubeconfig", control_plane.admin_kubeconfig, "--json"
        )
        assert one_json_document(refused)["verdict"] == "does-not-fit"
    finally:
        delete_quietly(admin, "/api/v1/namespaces/default/pods/holder")


def test_plan_kube_with_rbac_refusals(
    control_plane: ControlPlane, admin: Any, gpu_nodes: list[str], workdir: Path
) -> None:
    flow = flow_file(workdir, "envrbac", gpus=1)
    nothing = run_vf("plan", flow, "--kube", "--kubeconfig", control_plane.limited_kubeconfig)
    assert nothing.returncode == 1
    assert "error: kube-nodes-forbidden" in nothing.stderr and "Traceback" not in nothing.stderr
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "vf-test-nodes-only"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "vf-test-nodes-only"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "vf-test-nodes-only"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "limited"}],
    }  # fmt: skip
    create(admin, "/apis/rbac.authorization.k8s.io/v1/clusterroles", role)
    create(admin, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
    try:

        def planned() -> Any:
            r = run_vf(
                "plan", flow, "--kube", "--kubeconfig", control_plane.limited_kubeconfig, "--json"
            )
            return r if r.returncode == 0 else None

        result = wait_until(planned, 20, "the role binding to take effect")
        doc = one_json_document(result)
        assert doc["verdict"] == "unknown"  # pods forbidden: occupancy unknown, never idle
        assert any("forbidden" in u["reason"].lower() for u in doc["unknown"])
    finally:
        delete_quietly(
            admin, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/vf-test-nodes-only"
        )
        delete_quietly(admin, "/apis/rbac.authorization.k8s.io/v1/clusterroles/vf-test-nodes-only")


#: A default StorageClass: the in-cluster broker's claim names no class, and vf deploy's
#: preflight refuses a claim that would stay Pending (storage-no-default-class). Nothing
#: provisions it here (no controller, no kubelet): the pods are never started anyway.
DEFAULT_CLASS = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {
        "name": "vf-test-default",
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    },
    "provisioner": "example.com/none",
}


@pytest.fixture
def default_storage_class(admin: Any) -> Iterator[str]:
    create(admin, "/apis/storage.k8s.io/v1/storageclasses", DEFAULT_CLASS)
    try:
        yield DEFAULT_CLASS["metadata"]["name"]
    finally:
        delete_quietly(admin, "/apis/storage.k8s.io/v1/storageclasses/vf-test-default")


def test_deploy_applies_idempotently_then_teardown_removes_the_run(
    control_plane: ControlPlane,
    admin: Any,
    gpu_nodes: list[str],
    workdir: Path,
    default_storage_class: str,
) -> None:
    flow = flow_file(workdir, "envdeploy", gpus=1)
    kubeconfig = control_plane.admin_kubeconfig
    base = ("deploy", flow, "--image", "registry.example/envdeploy:1", "--run", "r1",
            "--kubeconfig", kubeconfig)  # fmt: skip

    dry = run_vf(*base, "--dry-run", "server")
    assert dry.returncode == 0, dry.stderr
    assert "(server dry run: nothing stored)" in dry.stdout
    from vfcore.runtime.manifests import run_selector

    selector = run_selector("envdeploy", "r1")
    jobs_path = "/apis/batch/v1/namespaces/default/jobs"
    listed = admin.get_json(jobs_path, query={"labelSelector": selector})
    assert listed.ok and listed.body["items"] == []

    # No kube-controller-manager: the Jobs never run, so the wait ends on its timeout (exit 1)
    first = run_vf(*base, "--timeout", "3")
    assert first.returncode == 1, first.stderr
    assert "error: run-timeout" in first.stderr and "vf teardown" in first.stderr
    assert " 0 unchanged" in first.stdout
    listed = admin.get_json(jobs_path, query={"labelSelector": selector})
    assert listed.ok and len(listed.body["items"]) >= 4  # setup + src, infer, sink
    managers = {
        m["manager"] for j in listed.body["items"] for m in j["metadata"].get("managedFields", [])
    }
    assert "vf" in managers
    versions = {
        j["metadata"]["name"]: j["metadata"]["resourceVersion"] for j in listed.body["items"]
    }

    second = run_vf(*base, "--timeout", "1")
    assert " 0 created, 0 configured" in second.stdout, second.stdout + second.stderr
    again = admin.get_json(jobs_path, query={"labelSelector": selector})
    assert {
        j["metadata"]["name"]: j["metadata"]["resourceVersion"] for j in again.body["items"]
    } == versions

    status = run_vf("status", flow, "--kubeconfig", kubeconfig, "--json")
    assert status.returncode == 0, status.stderr
    doc = one_json_document(status)
    assert doc["run"] == "r1" and doc["found"]

    down = run_vf("teardown", flow, "--run", "r1", "--kubeconfig", kubeconfig, "--json")
    assert down.returncode == 0, down.stderr
    assert one_json_document(down)["complete"] is True
    for path in (
        jobs_path,
        "/apis/apps/v1/namespaces/default/statefulsets",
        "/api/v1/namespaces/default/services",
    ):
        left = admin.get_json(path, query={"labelSelector": selector})
        assert left.ok and left.body["items"] == [], (path, json.dumps(left.body)[:500])


def test_unschedulable_pod_aborts_the_wait_with_the_schedulers_message(
    scheduler: ControlPlane, admin: Any, gpu_nodes: list[str]
) -> None:
    from vfadapters.kubernetes.wait import WaitOptions, wait_for_run

    labels = {"app.kubernetes.io/managed-by": "vf", "vfcore.io/flow": "envsched",
              "vfcore.io/run": "r1"}  # fmt: skip
    selector = ",".join(f"{k}={v}" for k, v in labels.items())
    create(admin, "/api/v1/namespaces/default/pods", _bound_pod("fits-0", "", 1, labels))
    create(admin, "/api/v1/namespaces/default/pods", _bound_pod("huge-0", "", 8, labels))
    try:

        def bound() -> bool:
            pod = admin.get_json("/api/v1/namespaces/default/pods/fits-0").body
            return bool(pod.get("spec", {}).get("nodeName"))

        wait_until(bound, 30, "kube-scheduler binding the 1-GPU pod")
        result = wait_for_run(
            admin,
            WaitOptions(
                namespace="default",
                selector=selector,
                flow_type="batch",
                jobs=("envsched-job",),
                poll_s=0.5,
                unschedulable_grace_s=2.0,
                timeout_s=60.0,
                explain=lambda pod: "vfcore: 8 GPUs in one pod, the largest node has 4",
            ),
        )
        assert result.outcome == "unschedulable", result.message
        assert result.pod == "huge-0"
        said = result.scheduler_message or ""
        assert "0/3 nodes are available" in said and "Insufficient nvidia.com/gpu" in said
        assert said in result.message and "largest node has 4" in result.message
    finally:
        for name in ("fits-0", "huge-0"):
            delete_quietly(admin, f"/api/v1/namespaces/default/pods/{name}")


@pytest.mark.parametrize("flag", ["--strict-preflight"])
def test_deploy_refuses_before_applying(
    control_plane: ControlPlane, admin: Any, gpu_nodes: list[str], workdir: Path, flag: str
) -> None:
    flow = flow_file(workdir, "envrefuse", gpus=6)
    result = run_vf(
        "deploy", flow, "--image", "x:1", "--run", "r1", "--kubeconfig",
        control_plane.admin_kubeconfig, flag,
    )  # fmt: skip
    assert result.returncode == 3
    assert "error: preflight-does-not-fit" in result.stderr
    from vfcore.runtime.manifests import run_selector

    listed = admin.get_json(
        "/apis/batch/v1/namespaces/default/jobs",
        query={"labelSelector": run_selector("envrefuse", "r1")},
    )
    assert listed.ok and listed.body["items"] == []
