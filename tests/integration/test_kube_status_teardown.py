"""`vf status --run` of a run that is not there, and a teardown that cannot finish (kmock).

A run asked for by name and not found is an error (``run-not-found``, exit 2, as for
``vf broker-teardown``) whose hint
names ``--namespace`` and ``--kubeconfig``; a teardown says its progress when the count
changes (or every 30 s), not every poll; a pod left on a NotReady node is told apart
from one held by a finalizer, and the hint is a forced delete.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_helpers import one_json_document, run_vf
from tests.integration.kube_fake import FakeKube
from tests.support.kube import H100, RESOURCES, deploy, flow_file, gpu_node

pytest.importorskip("kubernetes")

LABELS_OF_R1 = "vfcore.io/run=r1"


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    server = FakeKube().start()
    try:
        server.declare(*RESOURCES)
        for name in ("gpu-a", "gpu-b"):
            server.put("v1/nodes", None, gpu_node(name, 4, H100))
        server.call(lambda h: setattr(h, "complete_jobs", True))
        yield server
    finally:
        server.stop()


def test_status_of_a_run_that_is_not_there_says_so_and_exits_2(
    fake: FakeKube, tmp_path: Path
) -> None:
    flow = flow_file(tmp_path, gpus=1)
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    assert deploy(flow, kubeconfig, "--dry-run", "server").returncode == 0  # nothing stored
    nope = run_vf("status", flow, "--run", "nope", "--kubeconfig", kubeconfig)
    assert nope.returncode == 2, nope.stdout + nope.stderr  # as broker-teardown's run-not-found
    assert "error: run-not-found" in nope.stderr
    assert "run nope of flow kdemo was not found in namespace default" in nope.stderr
    assert "context fake" in nope.stderr  # where it looked
    assert "--namespace NS" in nope.stderr and "--kubeconfig PATH" in nope.stderr
    assert "found in namespace" not in nope.stdout  # the old "run nope found" line
    as_json = run_vf("status", flow, "--run", "nope", "--kubeconfig", kubeconfig, "--json")
    assert as_json.returncode == 2
    assert one_json_document(as_json)["error"]["rule"] == "run-not-found"

    assert deploy(flow, kubeconfig).returncode == 0  # run r1 exists now
    other = run_vf("status", flow, "--run", "nope", "--kubeconfig", kubeconfig)
    assert other.returncode == 2 and "the flow's runs there: r1" in other.stderr
    found = run_vf("status", flow, "--run", "r1", "--kubeconfig", kubeconfig)
    assert found.returncode == 0, found.stderr
    elsewhere = run_vf(
        "status", flow, "--run", "r1", "--namespace", "video", "--kubeconfig", kubeconfig
    )
    assert elsewhere.returncode == 2 and "namespace video" in elsewhere.stderr


def test_status_without_run_and_no_run_answers_and_says_where_it_looked(
    fake: FakeKube, tmp_path: Path
) -> None:
    flow = flow_file(tmp_path, gpus=1)
    result = run_vf("status", flow, "--kubeconfig", fake.kubeconfig(tmp_path / "kubeconfig"))
    assert result.returncode == 0, result.stderr
    assert "flow kdemo: no run found in namespace default" in result.stdout
    assert "--namespace NS" in result.stderr and "--kubeconfig PATH" in result.stderr


def _stuck_pod(fake: FakeKube, name: str, node: str, finalizers: list[str] | None = None) -> None:
    from vfcore.runtime.redeploy import run_labels

    meta: dict[str, Any] = {"name": name, "labels": run_labels("kdemo", "r1")}
    if finalizers:
        meta["finalizers"] = finalizers
    fake.put(
        "v1/pods",
        "default",
        {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
         "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x:1"}]}},
    )  # fmt: skip
    fake.call(lambda h: h.lingering.add(("pods", name)))


def test_teardown_tells_a_pod_on_a_dead_node_from_one_held_by_a_finalizer(
    fake: FakeKube, tmp_path: Path
) -> None:
    dead = gpu_node("gpu-dead", 4, H100)
    dead["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    dead["spec"] = {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}
    fake.put("v1/nodes", None, dead)
    flow = flow_file(tmp_path, gpus=1)
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    assert deploy(flow, kubeconfig).returncode == 0
    _stuck_pod(fake, "infer-on-dead-node", "gpu-dead")
    _stuck_pod(fake, "held", "gpu-a", ["example.com/keep"])
    _stuck_pod(fake, "on-gone-node", "gpu-gone")

    down = run_vf("teardown", flow, "--run", "r1", "--kubeconfig", kubeconfig, "--timeout", "3")
    assert down.returncode == 1, down.stderr
    assert "error: teardown-incomplete" in down.stderr
    err = down.stderr
    assert (
        "pod/infer-on-dead-node: node gpu-dead is not Ready (tainted "
        "node.kubernetes.io/unreachable)" in err
    )
    assert "kubectl delete pod infer-on-dead-node -n default --force --grace-period=0" in err
    assert "pod/on-gone-node: node gpu-gone no longer exists" in err
    assert "pod/held: it holds finalizers example.com/keep" in err
    assert "kubectl delete pod held" not in err  # a finalizer is no case for --force
    # progress: one line per count, not one per 2-second poll
    waits = [line for line in err.splitlines() if "waiting for" in line]
    assert len(waits) == 1, waits

    as_json = run_vf(
        "teardown", flow, "--run", "r1", "--kubeconfig", kubeconfig, "--timeout", "1", "--json"
    )
    doc = one_json_document(as_json)
    reasons = {i["name"]: i["reason"] for i in doc["lingering"]}
    assert reasons == {
        "infer-on-dead-node": "node-not-ready",
        "held": "finalizers",
        "on-gone-node": "node-gone",
    }


def test_teardown_progress_is_said_when_the_count_changes_or_every_30_s(
    fake: FakeKube, tmp_path: Path
) -> None:
    from vfadapters.kubernetes.client import connect
    from vfadapters.kubernetes.teardown import teardown

    for name in ("a", "b"):
        _stuck_pod(fake, name, "gpu-a")
    client = connect(kubeconfig=str(fake.kubeconfig(tmp_path / "kubeconfig")))
    now = [0.0]
    said: list[str] = []

    def sleep(seconds: float) -> None:
        now[0] += seconds
        if now[0] >= 20 and fake.get("v1/pods", "default", "a") is not None:
            fake.call(lambda h: h.lingering.discard(("pods", "a")))
            client.request("DELETE", "/api/v1/namespaces/default/pods/a")  # its node confirmed

    report = teardown(
        client, "default", LABELS_OF_R1, timeout_s=100.0, poll_s=2.0,
        progress=said.append, clock=lambda: now[0], sleep=sleep,
    )  # fmt: skip
    waits = [s for s in said if s.startswith("waiting for")]
    # 50 polls: at 0 s (2 objects), 20 s (the count changed), then every 30 s: 50, 80
    assert waits == [
        "waiting for 2 object(s) to go (0 s)",
        "waiting for 1 object(s) to go (20 s)",
        "waiting for 1 object(s) to go (50 s)",
        "waiting for 1 object(s) to go (80 s)",
    ]
    assert report.remaining == (("Pod", "b"),)
    assert [(i.name, i.reason) for i in report.lingering] == [("b", "terminating")]
