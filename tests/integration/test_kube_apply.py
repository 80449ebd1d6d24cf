"""Server-side apply through the official client against a fake API server (kmock + SSA emulation).

Dependency order, field manager ``vf``, force off, idempotence (a second apply
changes no resourceVersion), ``dryRun=All`` stores nothing, conflicts and
refusals are errors with ids.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.kube_fake import APPLY, FakeKube
from vfadapters.kubernetes.apply import apply_objects, apply_order
from vfadapters.kubernetes.client import KubeApiError, KubeClient, connect

pytest.importorskip("kubernetes")

NS = "vf-test"
LABELS = {"app.kubernetes.io/managed-by": "vf", "vfcore.io/flow": "demo", "vfcore.io/run": "r1"}


def obj(
    api: str, kind: str, name: str, component: str = "processor", **extra: Any
) -> dict[str, Any]:
    labels = {**LABELS, "app.kubernetes.io/component": component}
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        **extra,
    }


def run_objects() -> tuple[dict[str, Any], ...]:
    """A run's objects, deliberately out of order."""
    return (
        obj("keda.sh/v1alpha1", "ScaledObject", "demo-r1-infer", spec={"minReplicaCount": 2}),
        obj("policy/v1", "PodDisruptionBudget", "demo-r1-infer", spec={"maxUnavailable": 1}),
        obj("apps/v1", "Deployment", "demo-r1-infer", spec={"replicas": 2}),
        obj("batch/v1", "Job", "demo-r1-setup", component="broker", spec={"completions": 1}),
        obj("apps/v1", "StatefulSet", "demo-r1-nats", component="broker", spec={"replicas": 1}),
        obj("v1", "Service", "demo-r1-nats", component="broker", spec={"clusterIP": "None"}),
        obj("batch/v1", "Job", "demo-r1-src", component="producer", spec={"completions": 1}),
        obj("v1", "ConfigMap", "demo-r1-flow", component="processor", data={"flow.py": "x"}),
    )


EXPECTED_ORDER = [
    ("configmaps", "demo-r1-flow"),
    ("services", "demo-r1-nats"),
    ("statefulsets", "demo-r1-nats"),
    ("jobs", "demo-r1-setup"),
    ("deployments", "demo-r1-infer"),
    ("jobs", "demo-r1-src"),
    ("poddisruptionbudgets", "demo-r1-infer"),
    ("scaledobjects", "demo-r1-infer"),
]


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    server = FakeKube().start()
    try:
        yield server
    finally:
        server.stop()


def client_for(fake: FakeKube, tmp_path: Path) -> KubeClient:
    return connect(kubeconfig=str(fake.kubeconfig(tmp_path / "kubeconfig")))


def applies(fake: FakeKube) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = fake.call(lambda h: copy.deepcopy(h.applies))
    return result


def test_apply_order_is_dependency_order() -> None:
    ordered = [(o["kind"], o["metadata"]["name"]) for o in apply_order(run_objects())]
    assert ordered == [
        ("ConfigMap", "demo-r1-flow"),
        ("Service", "demo-r1-nats"),
        ("StatefulSet", "demo-r1-nats"),
        ("Job", "demo-r1-setup"),
        ("Deployment", "demo-r1-infer"),
        ("Job", "demo-r1-src"),
        ("PodDisruptionBudget", "demo-r1-infer"),
        ("ScaledObject", "demo-r1-infer"),
    ]


def test_server_side_apply_in_order_then_idempotent(fake: FakeKube, tmp_path: Path) -> None:
    client = client_for(fake, tmp_path)
    first = apply_objects(client, run_objects())
    assert [a.outcome for a in first.applied] == ["created"] * 8
    sent = applies(fake)
    assert [(s["plural"], s["name"]) for s in sent] == EXPECTED_ORDER
    assert {s["content_type"] for s in sent} == {APPLY}
    assert {s["manager"] for s in sent} == {"vf"}
    assert not any(s["force"] or s["dry_run"] for s in sent)
    assert all(s["namespace"] == NS for s in sent)
    stored = fake.get("apps/v1/deployments", NS, "demo-r1-infer")
    assert stored is not None and stored["spec"] == {"replicas": 2}
    version = stored["metadata"]["resourceVersion"]

    second = apply_objects(client, run_objects())
    assert [a.outcome for a in second.applied] == ["unchanged"] * 8
    assert not second.changed
    again = fake.get("apps/v1/deployments", NS, "demo-r1-infer")
    assert again is not None and again["metadata"]["resourceVersion"] == version
    assert [a.resource_version for a in second.applied] == [
        a.resource_version for a in first.applied
    ]

    changed = list(run_objects())
    changed[2] = obj("apps/v1", "Deployment", "demo-r1-infer", spec={"replicas": 3})
    third = apply_objects(client, changed)
    outcomes = {(a.kind, a.name): a.outcome for a in third.applied}
    assert outcomes.pop(("Deployment", "demo-r1-infer")) == "configured"
    assert set(outcomes.values()) == {"unchanged"}
    assert third.counts() == {"created": 0, "configured": 1, "unchanged": 7}


def test_server_dry_run_stores_nothing(fake: FakeKube, tmp_path: Path) -> None:
    client = client_for(fake, tmp_path)
    report = apply_objects(client, run_objects(), dry_run=True)
    assert report.dry_run and [a.outcome for a in report.applied] == ["created"] * 8
    assert all(s["dry_run"] for s in applies(fake))
    assert fake.get("apps/v1/deployments", NS, "demo-r1-infer") is None
    apply_objects(client, run_objects())
    again = apply_objects(client, run_objects(), dry_run=True)
    assert [a.outcome for a in again.applied] == ["unchanged"] * 8


def test_conflict_with_another_manager_needs_force(fake: FakeKube, tmp_path: Path) -> None:
    theirs = obj("apps/v1", "Deployment", "demo-r1-infer", spec={"replicas": 5})
    theirs["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    theirs["metadata"]["resourceVersion"] = "7"
    fake.put("apps/v1/deployments", NS, theirs)
    client = client_for(fake, tmp_path)
    with pytest.raises(KubeApiError) as caught:
        apply_objects(client, run_objects())
    assert caught.value.rule == "kube-apply-conflict"
    assert "kubectl" in caught.value.message and "4 of 8" in caught.value.message
    assert "--force-conflicts" in caught.value.hint
    stored = fake.get("apps/v1/deployments", NS, "demo-r1-infer")
    assert stored is not None and stored["spec"] == {"replicas": 5}  # untouched

    report = apply_objects(client, run_objects(), force_conflicts=True)
    outcome = {(a.kind, a.name): a.outcome for a in report.applied}
    assert outcome[("Deployment", "demo-r1-infer")] == "configured"
    assert applies(fake)[-4]["force"] is True
    stored = fake.get("apps/v1/deployments", NS, "demo-r1-infer")
    assert stored is not None and stored["spec"] == {"replicas": 2}


def test_refusals_and_missing_crd(fake: FakeKube, tmp_path: Path) -> None:
    client = client_for(fake, tmp_path)
    fake.refuse("jobs", 403, "Forbidden")
    with pytest.raises(KubeApiError) as caught:
        apply_objects(client, run_objects())
    assert caught.value.rule == "kube-apply-forbidden"
    assert "3 of 8" in caught.value.message and "RBAC" in caught.value.hint
    fake.call(lambda h: h.refusals.clear())
    fake.refuse("scaledobjects", 404, "NotFound")
    with pytest.raises(KubeApiError) as caught:
        apply_objects(client, run_objects())
    assert caught.value.rule == "kube-kind-not-served" and "KEDA" in caught.value.hint


def test_unknown_kind_and_missing_namespace(fake: FakeKube, tmp_path: Path) -> None:
    client = client_for(fake, tmp_path)
    with pytest.raises(KubeApiError) as caught:
        apply_objects(client, [obj("example.com/v1", "Widget", "w")])
    assert caught.value.rule == "kube-unknown-kind"
    no_ns = obj("v1", "Service", "s")
    del no_ns["metadata"]["namespace"]
    with pytest.raises(KubeApiError) as caught:
        apply_objects(client, [no_ns])
    assert caught.value.rule == "kube-object-incomplete"
    assert applies(fake) == []
