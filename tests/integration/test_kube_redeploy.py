"""`vf deploy` of a run that is already there, storage and served kinds in the preflight (kmock).

The fake API server plays the controllers and the scheduler
(``spawn_bound_pods_on``: a workload applied gets its pods, bound to one node),
so the run's own pods hold GPUs when it is deployed again — what a real
cluster shows (tests/cluster/test_redeploy.py runs the same against a real
kube-apiserver, kube-scheduler and kube-controller-manager).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_helpers import run_vf
from tests.integration.kube_fake import FakeKube
from tests.support.kube import H100, RESOURCES, applies, gpu_flow, gpu_node

pytest.importorskip("kubernetes")

FLOW = gpu_flow("refill", gpus=4, nb_tasks=2, kind="{kind}")


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    server = FakeKube().start()
    try:
        server.declare(*RESOURCES)
        for name in ("gpu-a", "gpu-b"):
            server.put("v1/nodes", None, gpu_node(name, 4, H100))
        server.put("v1/nodes", None, gpu_node("cpu-1", 0))
        server.call(lambda h: setattr(h, "complete_jobs", True))
        server.call(lambda h: setattr(h, "spawn_bound_pods_on", "gpu-a"))
        yield server
    finally:
        server.stop()


def _flow(tmp_path: Path, kind: str = "BATCH") -> Path:
    path = tmp_path / "refill.py"
    path.write_text(FLOW.format(kind=kind), encoding="utf-8")
    return path


def _deploy(flow: Path, kubeconfig: Path, *extra: object, run: str = "r1") -> Any:
    return run_vf(
        "deploy", flow, "--image", "registry.example/refill:1", "--run", run,
        "--kubeconfig", kubeconfig, "--timeout", "30", "--broker", "nats://broker.example:4222",
        *extra,
    )  # fmt: skip


def test_a_second_deploy_of_a_run_that_fills_its_nodes_plans_without_its_own_pods(
    fake: FakeKube, tmp_path: Path
) -> None:
    flow = _flow(tmp_path)
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    first = _deploy(flow, kubeconfig)
    assert first.returncode == 0, first.stderr
    assert "exists" not in first.stderr
    pods = fake.call(lambda h: [k for k, o in h.objects.items() if k[0].plural == "pods"])
    assert len(pods) >= 4  # setup, src, infer x2 (8 GPUs), sink

    second = _deploy(flow, kubeconfig)
    assert second.returncode == 0, second.stderr  # was preflight-does-not-fit, exit 3
    assert "preflight: fits" in second.stderr
    assert "left out of the plan" in second.stderr and "of run r1 (" in second.stderr
    assert "preflight: run r1 exists: 0 new" in second.stderr
    assert " 0 created, 0 configured" in second.stdout

    other = _deploy(flow, kubeconfig, run="r2")  # another run: r1's pods are in its way
    assert other.returncode == 3, other.stderr
    assert "error: preflight-does-not-fit" in other.stderr


def test_a_batch_redeploy_that_changes_its_jobs_pods_is_refused_before_applying(
    fake: FakeKube, tmp_path: Path
) -> None:
    flow = _flow(tmp_path)
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    assert _deploy(flow, kubeconfig).returncode == 0
    before = len(applies(fake))
    newer = run_vf(
        "deploy", flow, "--image", "registry.example/refill:2", "--run", "r1",
        "--kubeconfig", kubeconfig, "--timeout", "30", "--broker", "nats://broker.example:4222",
    )  # fmt: skip
    assert newer.returncode == 2, newer.stderr
    assert "error: redeploy-job-immutable" in newer.stderr
    assert "image registry.example/refill:1 -> registry.example/refill:2" in newer.stderr
    assert "vf teardown" in newer.stderr and "Traceback" not in newer.stderr
    assert len(applies(fake)) == before  # nothing applied


def test_a_realtime_redeploy_with_new_pods_needs_a_rollout(fake: FakeKube, tmp_path: Path) -> None:
    fake.call(lambda h: setattr(h, "ready_workloads", True))
    flow = _flow(tmp_path, "REALTIME")
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    assert _deploy(flow, kubeconfig).returncode == 0
    before = len(applies(fake))
    newer = run_vf(
        "deploy", flow, "--image", "registry.example/refill:2", "--run", "r1",
        "--kubeconfig", kubeconfig, "--timeout", "30", "--broker", "nats://broker.example:4222",
    )  # fmt: skip
    assert newer.returncode == 2, newer.stderr
    assert "error: redeploy-needs-rollout" in newer.stderr and "--rollout drain" in newer.stderr
    assert len(applies(fake)) == before


def _storage_class(name: str, *, default: bool = False, provisioner: str = "csi.example") -> Any:
    meta: dict[str, Any] = {"name": name}
    if default:
        meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta,
            "provisioner": provisioner}  # fmt: skip


def test_no_default_storage_class_refuses_the_in_cluster_broker_with_the_fix(
    fake: FakeKube, tmp_path: Path
) -> None:
    fake.declare("storage.k8s.io/v1/storageclasses", "v1/persistentvolumes")
    fake.put("storage.k8s.io/v1/storageclasses", None, _storage_class("slow"))
    flow = _flow(tmp_path)
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    base = ("deploy", flow, "--image", "x:1", "--run", "r1", "--kubeconfig", kubeconfig)
    refused = run_vf(*base)
    assert refused.returncode == 3, refused.stderr
    assert "error: preflight-storage-no-default-class" in refused.stderr
    assert "--broker-storage-class NAME (this cluster's classes: slow)" in refused.stderr
    assert "--broker nats://HOST:4222" in refused.stderr
    assert applies(fake) == []

    missing = run_vf(*base, "--broker-storage-class", "fast")
    assert missing.returncode == 3
    assert "error: preflight-storage-class-missing" in missing.stderr and "'fast'" in missing.stderr

    named = run_vf(*base, "--broker-storage-class", "slow", "--dry-run", "server")
    assert named.returncode == 0, named.stderr
    fake.put("storage.k8s.io/v1/storageclasses", None, _storage_class("std", default=True))
    defaulted = run_vf(*base, "--dry-run", "server")
    assert defaulted.returncode == 0, defaulted.stderr
    assert "storage" not in defaulted.stderr


def test_a_refused_storage_class_listing_is_a_warning_never_binds(
    fake: FakeKube, tmp_path: Path
) -> None:
    fake.declare("storage.k8s.io/v1/storageclasses", "v1/persistentvolumes")
    fake.refuse("storageclasses")
    result = run_vf(
        "deploy", _flow(tmp_path), "--image", "x:1", "--run", "r1", "--dry-run", "server",
        "--kubeconfig", fake.kubeconfig(tmp_path / "kubeconfig"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "preflight warning: storage-unknown" in result.stderr and "forbidden" in result.stderr


def test_autoscaling_without_keda_is_refused_before_anything_is_applied(
    fake: FakeKube, tmp_path: Path
) -> None:
    flow = _flow(tmp_path, "REALTIME")
    result = _deploy(
        flow, fake.kubeconfig(tmp_path / "kubeconfig"), "--autoscaling", "--gpu-autoscaling"
    )
    assert result.returncode == 1, result.stderr
    assert "error: kube-kind-not-served" in result.stderr
    assert "keda.sh/v1alpha1" in result.stderr and "nothing was applied" in result.stderr
    assert applies(fake) == []
