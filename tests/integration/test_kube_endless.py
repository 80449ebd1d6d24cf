"""Never paged for ever, never a guess (issue 23): the live cluster through a fake API server (kmock).

An API server whose listings always send ``metadata.continue`` — the same token
again, or a fresh one every page — ends the listing after a bounded number of
pages with a failed listing that says so (``EndlessList``): unknown pods for
``vf plan --kube``, an error with an id for nodes, ``vf status`` and
``vf teardown``. A running pod the API returns with a ``spec.nodeName`` that is
not a string may hold any node: the plan is never ``fits``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_helpers import one_json_document, run_vf
from tests.integration.kube_fake import FakeKube
from tests.support.kube import FLOW, H100, bound_pod, client_for, gpu_node
from vfadapters.kubernetes.snapshot import MAX_PAGES, list_all, read_snapshot

pytest.importorskip("kubernetes")


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    server = FakeKube().start()
    try:
        server.declare(
            "v1/pods", "v1/nodes", "node.k8s.io/v1/runtimeclasses", "apps/v1/statefulsets",
            "apps/v1/deployments", "batch/v1/jobs", "v1/services", "policy/v1/poddisruptionbudgets",
            "autoscaling/v2/horizontalpodautoscalers", "v1/configmaps", "v1/secrets",
            "v1/persistentvolumeclaims", "networking.k8s.io/v1/networkpolicies",
        )  # fmt: skip
        for i in range(2):
            server.put("v1/nodes", None, gpu_node(f"gpu-{i}", 4, H100))
        yield server
    finally:
        server.stop()


def _served(fake: FakeKube) -> int:
    served: int = fake.call(lambda h: h.pages_served)
    return served


@pytest.mark.parametrize("how", ["repeat", "fresh"])
def test_an_endless_pod_listing_is_a_failed_listing_that_says_so(
    fake: FakeKube, tmp_path: Path, how: str
) -> None:
    fake.call(lambda h: h.endless.__setitem__("pods", how))
    client = client_for(fake, tmp_path)
    before = _served(fake)
    doc, failed = list_all(client, "/api/v1/pods", "PodList", max_pages=25)
    assert doc is None and failed is not None
    said = failed.status_line()
    assert said.startswith("502 EndlessList: listing /api/v1/pods: ")
    if how == "repeat":  # detected at once: the second page repeats the first's token
        assert "page 2 repeats the continue token of an earlier page" in said
        assert _served(fake) - before == 2
    else:
        assert "still sends a continue token after 25 pages of 500 items" in said
        assert _served(fake) - before == 25
    live = read_snapshot(client)  # pods unknown, never idle; the default bound holds
    assert [n.requested for n in live.nodes] == [None, None]
    assert "EndlessList" in (live.node("gpu-0").unknown_reason or "")
    assert MAX_PAGES == 400


def test_vf_plan_kube_and_status_stop_on_an_endless_listing(fake: FakeKube, tmp_path: Path) -> None:
    flow = tmp_path / "flow.py"
    flow.write_text(FLOW.format(gpus=1), encoding="utf-8")
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    fake.call(lambda h: h.endless.__setitem__("pods", "repeat"))
    started = time.monotonic()
    planned = run_vf("plan", flow, "--kube", "--kubeconfig", kubeconfig, "--json")
    assert planned.returncode == 0, planned.stderr
    doc = one_json_document(planned)
    assert doc["verdict"] == "unknown"
    assert any("repeats the continue token" in u["reason"] for u in doc["unknown"])

    fake.call(lambda h: h.endless.__setitem__("statefulsets", "repeat"))
    status = run_vf("status", flow, "--kubeconfig", kubeconfig, "--run", "r1")
    assert status.returncode == 1 and "error: kube-list-failed" in status.stderr
    assert "EndlessList" in status.stderr and "Traceback" not in status.stderr
    teardown = run_vf("teardown", flow, "--kubeconfig", kubeconfig, "--run", "r1")
    assert teardown.returncode == 1 and "error: kube-list-failed" in teardown.stderr

    fake.call(lambda h: h.endless.__setitem__("nodes", "fresh"))
    nodes = run_vf("plan", flow, "--kube", "--kubeconfig", kubeconfig)
    assert nodes.returncode == 1 and "error: kube-nodes-unreadable" in nodes.stderr
    assert f"after {MAX_PAGES} pages of 500 items" in nodes.stderr
    assert time.monotonic() - started < 90  # the bound, not the server, ends it


def test_a_running_pod_whose_node_cannot_be_read_leaves_the_live_plan_unknown(
    fake: FakeKube, tmp_path: Path
) -> None:
    flow = tmp_path / "flow.py"
    flow.write_text(FLOW.format(gpus=1), encoding="utf-8")
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    fits = one_json_document(run_vf("plan", flow, "--kube", "--kubeconfig", kubeconfig, "--json"))
    assert fits["verdict"] == "fits"
    hog = bound_pod("hog", "gpu-0", 4)
    hog["spec"]["nodeName"] = 5
    fake.put("v1/pods", "ml", hog)
    result = run_vf("plan", flow, "--kube", "--kubeconfig", kubeconfig, "--json")
    doc = one_json_document(result)
    assert doc["verdict"] == "unknown", doc["verdict"]
    assert any(
        u["what"] == "pod/ml/hog" and "every node's occupancy is unknown" in u["reason"]
        for u in doc["unknown"]
    )
    strict = run_vf("plan", flow, "--kube", "--kubeconfig", kubeconfig, "--strict-preflight")
    assert strict.returncode == 3


def test_status_and_teardown_never_read_what_they_cannot_read_as_zero_or_gone(
    fake: FakeKube, tmp_path: Path
) -> None:
    from vfcore.runtime.manifests import flow_label

    flow = tmp_path / "flow.py"
    flow.write_text(FLOW.format(gpus=1), encoding="utf-8")
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    labels = {"app.kubernetes.io/managed-by": "vf", "vfcore.io/flow": flow_label("kube"),
              "vfcore.io/run": "r1"}  # fmt: skip
    odd = [
        ("apps/v1/statefulsets", {"kind": "StatefulSet", "spec": {"replicas": "three"},
                                  "status": [1]}),
        ("apps/v1/deployments", {"kind": "Deployment", "spec": [], "status": {"readyReplicas": -1}}),
        ("batch/v1/jobs", {"kind": "Job", "spec": {"completions": True}, "status": "done"}),
        ("v1/pods", {"kind": "Pod", "spec": {"nodeName": 5}, "status": {"phase": ["Running"]}}),
    ]  # fmt: skip
    for i, (resource, body) in enumerate(odd):
        fake.put(resource, "default", {**body, "metadata": {"name": f"odd-{i}", "labels": labels}})
    result = run_vf("status", flow, "--kubeconfig", kubeconfig, "--run", "r1", "--json")
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    rows = {w["name"]: w for w in doc["workloads"]}
    assert rows["odd-0"]["desired"] is None and rows["odd-0"]["state"] == "unknown"
    assert rows["odd-1"]["ready"] is None and rows["odd-1"]["state"] == "unknown"
    assert rows["odd-2"]["desired"] is None
    assert doc["pods"][0]["host"] is None and doc["pods"][0]["state"] == "Unknown"
    text = run_vf("status", flow, "--kubeconfig", kubeconfig, "--run", "r1")
    assert text.returncode == 0 and "?/" in text.stdout, text.stderr

    def unname(h: Any) -> None:  # the API returns an object whose name vf cannot read
        for obj in h.objects.values():
            if (obj.raw.get("metadata") or {}).get("name") == "odd-3":
                obj.raw["metadata"]["name"] = 5

    fake.call(unname)
    teardown = run_vf("teardown", flow, "--kubeconfig", kubeconfig, "--run", "r1")
    assert teardown.returncode == 1, teardown.stderr
    assert "error: kube-list-unreadable" in teardown.stderr and "all gone" not in teardown.stdout
