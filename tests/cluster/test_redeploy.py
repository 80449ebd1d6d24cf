"""Deploying the same run again with a controller manager running and its pods existing.

kube-controller-manager (the Job controller) creates the run's pods and kube-scheduler
binds them — what the kmock tests cannot show (tests/integration/test_kube_redeploy.py
plays the controllers there). The flow fills both GPU nodes (two 4-GPU replicas on two
4-GPU nodes), so a preflight that counted the run's own bound pods as occupied would
refuse the second deploy (``preflight-does-not-fit``, "add one more node"). It must plan
without them, say that nothing changes, and apply nothing new; another run of the same
flow is still refused (the first run's pods are in its way); a new image is refused
(a Job's pods are immutable) before anything is applied. The same objects, as the API
server returns them with its defaults, must read as unchanged.

Needs ``etcd``, ``kube-apiserver``, ``kube-scheduler`` and ``kube-controller-manager`` in
``KUBEBUILDER_ASSETS`` (skipped otherwise). No kubelet runs: the pods are bound, never
started, so each ``vf deploy`` ends its wait on ``--timeout`` (exit 1, ``run-timeout``);
what is checked is what it planned and applied before that.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.envtest import ControlPlane
from tests.cluster.helpers import delete_quietly, wait_until
from tests.integration.cli_helpers import run_vf
from tests.support.kube import gpu_flow

FLOW = gpu_flow("envrefill", gpus=4, nb_tasks=2)

JOBS = "/apis/batch/v1/namespaces/default/jobs"
PODS = "/api/v1/namespaces/default/pods"
#: No broker pod (it would need a StorageClass this control plane does not have).
BROKER = "nats://nats.example:4222"


@pytest.fixture
def job_controller(scheduler: ControlPlane) -> Iterator[ControlPlane]:
    with scheduler.controller_manager("job") as plane:
        yield plane


def _items(admin: Any, path: str, selector: str) -> list[dict[str, Any]]:
    answer = admin.get_json(path, query={"labelSelector": selector})
    assert answer.ok, answer.status_line()
    items: list[dict[str, Any]] = answer.body["items"]
    return items


def _remove_run(admin: Any, selector: str) -> None:
    """The run's Jobs, then its pods at once (no kubelet would ever confirm them gone)."""
    for job in _items(admin, JOBS, selector):
        admin.request("DELETE", f"{JOBS}/{job['metadata']['name']}",
                      body={"kind": "DeleteOptions", "apiVersion": "v1",
                            "propagationPolicy": "Orphan"})  # fmt: skip
    for pod in _items(admin, PODS, selector):
        path = f"{PODS}/{pod['metadata']['name']}"
        # the Job controller's tracking finalizer would keep it Terminating
        admin.request("PATCH", path, body={"metadata": {"finalizers": None}},
                      content_type="application/merge-patch+json")  # fmt: skip
        delete_quietly(admin, path)


def test_a_second_deploy_with_the_runs_pods_bound_is_not_refused_and_changes_nothing(
    job_controller: ControlPlane, admin: Any, gpu_nodes: list[str], workdir: Path
) -> None:
    from vfcore.runtime.manifests import run_selector

    flow = workdir / "envrefill.py"
    flow.write_text(FLOW, encoding="utf-8")
    kubeconfig = job_controller.admin_kubeconfig
    selector = run_selector("envrefill", "r1")

    def deploy(*extra: object, run: str = "r1", image: str = "registry.example/refill:1") -> Any:
        return run_vf(
            "deploy", flow, "--image", image, "--run", run, "--broker", BROKER,
            "--kubeconfig", kubeconfig, "--timeout", "3", *extra,
        )  # fmt: skip

    try:
        first = deploy()
        assert first.returncode == 1, first.stdout + first.stderr  # no kubelet: run-timeout
        assert "error: run-timeout" in first.stderr and "exists" not in first.stderr
        assert " 0 unchanged" in first.stdout

        def infer_bound() -> list[str]:
            pods = _items(admin, PODS, selector + ",app.kubernetes.io/component=processor")
            hosts = sorted(p["spec"].get("nodeName") or "" for p in pods)
            return hosts if len(hosts) == 2 and all(hosts) else []

        assert wait_until(infer_bound, 60, "the Job controller's infer pods bound") == [
            "gpu-a",
            "gpu-b",
        ]  # fmt: skip (every GPU of the cluster is the run's now)

        def settled() -> dict[str, str]:  # the Job controller's status writes have stopped
            versions = {j["metadata"]["name"]: j["metadata"]["resourceVersion"]
                        for j in _items(admin, JOBS, selector)}  # fmt: skip
            time.sleep(2.0)
            again = {j["metadata"]["name"]: j["metadata"]["resourceVersion"]
                     for j in _items(admin, JOBS, selector)}  # fmt: skip
            return again if again == versions else {}

        versions = wait_until(settled, 60, "the run's Jobs to settle")

        second = deploy()
        said = second.stdout + second.stderr
        assert "preflight-does-not-fit" not in said, said  # the bug: its own pods counted
        assert second.returncode == 1 and "error: run-timeout" in second.stderr, said
        assert "preflight: fits" in second.stderr
        assert "left out of the plan" in second.stderr and "of run r1 (" in second.stderr
        assert "preflight: run r1 exists: 0 new" in second.stderr
        assert "changed-pods" not in second.stderr  # the server's defaults are no change
        assert " 0 created, 0 configured" in second.stdout
        after = {j["metadata"]["name"]: j["metadata"]["resourceVersion"]
                 for j in _items(admin, JOBS, selector)}  # fmt: skip
        assert after == versions  # nothing was written

        other = deploy(run="r2")  # another run: r1's pods hold every GPU
        assert other.returncode == 3, other.stdout + other.stderr
        assert "error: preflight-does-not-fit" in other.stderr
        assert _items(admin, JOBS, run_selector("envrefill", "r2")) == []

        newer = deploy(image="registry.example/refill:2")
        assert newer.returncode == 2, newer.stdout + newer.stderr
        assert "error: redeploy-job-immutable" in newer.stderr
        assert "image registry.example/refill:1 -> registry.example/refill:2" in newer.stderr
        assert {j["metadata"]["name"]: j["metadata"]["resourceVersion"]
                for j in _items(admin, JOBS, selector)} == versions  # fmt: skip
    finally:
        _remove_run(admin, selector)
        _remove_run(admin, run_selector("envrefill", "r2"))
