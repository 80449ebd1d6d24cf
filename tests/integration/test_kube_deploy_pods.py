"""`vf deploy` with volumes, images and a PriorityClass against the fake API server (kmock).

The preflight refuses, before anything is applied: a claim that is not there, a
ReadWriteOnce claim the plan's pods would mount from two nodes, a ReadWriteOncePod claim
mounted by two pods, a ReadOnlyMany claim mounted read-write, a ConfigMap, Secret or
PriorityClass that does not exist; a missing image pull Secret is a warning. What is
applied carries the volumes, the images and the class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_helpers import run_vf
from tests.integration.kube_fake import FakeKube
from tests.support.kube import applies, fake, gpu_flow

pytest.importorskip("kubernetes")

__all__ = ["fake"]

FLOW = gpu_flow("vols", gpus=4, nb_tasks=2)


def _deploy(fake: FakeKube, tmp_path: Path, *extra: object) -> Any:
    flow = tmp_path / "vols.py"
    flow.write_text(FLOW, encoding="utf-8")
    return run_vf(
        "deploy", flow, "--image", "registry.example/vols:1", "--run", "r1",
        "--kubeconfig", fake.kubeconfig(tmp_path / "kubeconfig"), "--dry-run", "server",
        "--broker", "nats://nats.example:4222", *extra,
    )  # fmt: skip


def _claim(name: str, *modes: str, phase: str = "Bound") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": "1Ti"}}},
        "status": {"phase": phase},
    }


def _pods_of(fake: FakeKube, node: str) -> dict[str, Any]:
    """The pod template of ``node``'s workload as last applied."""
    sent = [a for a in applies(fake) if a["plural"] == "jobs"]
    (body,) = [
        a["body"]
        for a in sent[-4:]
        if a["body"]["metadata"].get("annotations", {}).get("vfcore.io/node-name") == node
    ]
    spec: dict[str, Any] = body["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize(
    ("flag", "claim", "refusal"),
    [
        ("other:/data", None, "preflight-claim-not-found"),
        ("videos:/data", ("ReadWriteOnce",), "preflight-claim-access-mode"),
        ("infer=videos:/data", ("ReadWriteOnce",), "preflight-claim-access-mode"),
        ("infer=videos:/data", ("ReadWriteOncePod",), "preflight-claim-access-mode"),
        ("videos:/data", ("ReadOnlyMany",), "preflight-claim-read-only"),
        ("sink=videos:/data", ("ReadWriteOnce",), None),
        ("videos:/data", ("ReadWriteMany",), None),
        ("videos:/data:ro", ("ReadOnlyMany",), None),
    ],
    ids=["claim missing", "RWO on every node", "RWO on two GPU hosts", "RWOP two pods",
         "ROX read-write", "RWO one pod", "RWX", "ROX read-only"],
)  # fmt: skip
def test_a_mounted_claim_is_checked_against_the_plan_before_anything_is_applied(
    fake: FakeKube, tmp_path: Path, flag: str, claim: tuple[str, ...] | None, refusal: str | None
) -> None:
    if claim is not None:
        fake.put("v1/persistentvolumeclaims", "default", _claim("videos", *claim))
    result = _deploy(fake, tmp_path, "--mount-pvc", flag)
    if refusal is None:
        assert result.returncode == 0, result.stderr
        node = flag.split("=")[0] if "=" in flag else "infer"
        mounted = {m["mountPath"] for m in _pods_of(fake, node)["containers"][0]["volumeMounts"]}
        assert "/data" in mounted
        return
    assert result.returncode == 3, result.stderr
    assert f"error: {refusal}" in result.stderr and "Traceback" not in result.stderr
    assert applies(fake) == []
    if claim == ("ReadWriteOnce",):
        assert "is ReadWriteOnce (one node at a time)" in result.stderr
        assert "gpu-a, gpu-b" in result.stderr  # where the plan puts infer/0 and infer/1
    if claim == ("ReadWriteOncePod",):
        assert "2 pods of node infer mount it (infer/0, infer/1)" in result.stderr


def test_configmaps_secrets_and_the_priority_class_must_exist(
    fake: FakeKube, tmp_path: Path
) -> None:
    flags = ("--mount-configmap", "models:/models", "--mount-secret", "infer=keys:/keys",
             "--priority-class", "video-high", "--image-pull-secret", "regcred")  # fmt: skip
    refused = _deploy(fake, tmp_path, *flags)
    assert refused.returncode == 3, refused.stderr
    err = refused.stderr
    assert "error: preflight-configmap-not-found" in err
    assert "ConfigMap models in namespace default (--mount-configmap) does not exist" in err
    assert "Secret keys in namespace default (--mount-secret) does not exist" in err
    assert "PriorityClass video-high (--priority-class) does not exist" in err
    assert "kubectl create configmap models -n default" in err
    assert "preflight warning: image-pull-secret-not-found" in err
    assert applies(fake) == []

    fake.put("v1/configmaps", "default", {"apiVersion": "v1", "kind": "ConfigMap",
                                          "metadata": {"name": "models"}})  # fmt: skip
    fake.put("v1/secrets", "default", {"apiVersion": "v1", "kind": "Secret",
                                       "metadata": {"name": "keys"}})  # fmt: skip
    fake.declare("scheduling.k8s.io/v1/priorityclasses")
    fake.put("scheduling.k8s.io/v1/priorityclasses", None, {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "video-high"}, "value": 1000})  # fmt: skip
    ok = _deploy(fake, tmp_path, *flags)
    assert ok.returncode == 0, ok.stderr
    assert "preflight warning: image-pull-secret-not-found" in ok.stderr  # still only a warning
    infer, sink = _pods_of(fake, "infer"), _pods_of(fake, "sink")
    assert infer["priorityClassName"] == sink["priorityClassName"] == "video-high"
    assert infer["imagePullSecrets"] == [{"name": "regcred"}]
    assert {"/models", "/keys"} <= {m["mountPath"] for m in infer["containers"][0]["volumeMounts"]}
    assert "/keys" not in {m["mountPath"] for m in sink["containers"][0]["volumeMounts"]}


def test_an_unreadable_reference_is_unknown_never_there(fake: FakeKube, tmp_path: Path) -> None:
    fake.refuse("configmaps")
    result = _deploy(fake, tmp_path, "--mount-configmap", "models:/models")
    assert result.returncode == 0, result.stderr
    assert "preflight warning: reference-unknown" in result.stderr
    assert "Forbidden" in result.stderr


def test_images_and_pull_policy_reach_the_applied_pods(fake: FakeKube, tmp_path: Path) -> None:
    result = _deploy(
        fake, tmp_path, "--image-override", "infer=registry.example/vols-gpu:2",
        "--image-pull-policy", "Always", "--scratch", "50Gi",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    infer, src = _pods_of(fake, "infer"), _pods_of(fake, "src")
    assert infer["containers"][0]["image"] == "registry.example/vols-gpu:2"
    assert infer["initContainers"][0]["image"] == "registry.example/vols-gpu:2"
    assert src["containers"][0]["image"] == "registry.example/vols:1"
    for spec in (infer, src):
        assert spec["containers"][0]["imagePullPolicy"] == "Always"
        (scratch,) = [v for v in spec["volumes"] if "emptyDir" in v]
        assert scratch["emptyDir"] == {"sizeLimit": "50Gi"}
    bad = _deploy(fake, tmp_path, "--image-override", "infer=Registry/Vols:2")
    assert bad.returncode == 2 and "error: invalid-image" in bad.stderr
    unknown = _deploy(fake, tmp_path, "--image-override", "nope=registry.example/x:1")
    assert unknown.returncode == 2 and "error: unknown-node" in unknown.stderr


def test_the_scheduler_model_sees_a_nodes_own_image(tmp_path: Path) -> None:
    """ImageLocality scores the image a node's pods really pull (--image-override)."""
    from vfadapters.kubernetes.scheduling import scheduler_workloads
    from vfadapters.loading import load_runnable
    from vfcore.placement import scheduling_facts

    flow = tmp_path / "vols.py"
    flow.write_text(FLOW, encoding="utf-8")
    spec = load_runnable(str(flow))[1]
    facts = scheduling_facts({"kind": "NodeList", "items": []}, {"kind": "PodList", "items": []})
    plain = scheduler_workloads(spec, facts, image="registry.example/vols:1")
    assert set(plain["infer"].images) == {"registry.example/vols:1"}
    pinned = scheduler_workloads(
        spec, facts, image="registry.example/vols:1",
        image_overrides={"infer": "registry.example/vols-gpu:2"},
    )  # fmt: skip
    assert set(pinned["infer"].images) == {"registry.example/vols-gpu:2"}
    assert set(pinned["src"].images) == {"registry.example/vols:1"}
