"""`vf deploy` / `vf status` / `vf teardown` end to end, as subprocesses, against a fake API server.

The fake (kmock + emulation, tests/integration/kube_fake.py) plays the API
server and, for Jobs, the Job controller (a Job applied is Complete). The deploy
plans on the live snapshot first (does-not-fit is refused, nothing applied),
applies server-side in order, waits for the BATCH run's Jobs, and a second
deploy changes nothing; status reports the run; teardown deletes exactly the
run's objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_helpers import one_json_document, run_vf
from tests.integration.kube_fake import FakeKube
from tests.support.kube import applies, deploy, fake, flow_file, stored

pytest.importorskip("kubernetes")

__all__ = ["fake"]  # the fixture, shared through tests/support/kube.py


def test_deploy_status_teardown(fake: FakeKube, tmp_path: Path) -> None:
    flow = flow_file(tmp_path, gpus=1)
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    # a neighbour that must survive the teardown: same flow, another run
    fake.put(
        "v1/configmaps",
        "default",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other-run", "labels": {
            "app.kubernetes.io/managed-by": "vf", "vfcore.io/run": "r2"}}},
    )  # fmt: skip

    first = deploy(flow, kubeconfig)
    assert first.returncode == 0, first.stderr
    assert "preflight: fits" in first.stderr
    assert "job(s) of the run completed" in first.stdout
    node_lists = fake.call(
        lambda h: [r for r in h._requests if r.resource and r.resource.plural == "nodes"]
    )
    assert len(node_lists) == 1  # one snapshot, one plan: rendering and preflight share it
    sent = applies(fake)
    kinds = [s["plural"] for s in sent]
    assert kinds.index("statefulsets") < kinds.index("jobs")  # broker before workers
    assert {s["manager"] for s in sent} == {"vf"} and not any(s["force"] for s in sent)
    setup = next(s for s in sent if s["plural"] == "jobs")
    assert setup["body"]["spec"]["template"]["spec"]["containers"][0]["args"][0] == "broker-setup"
    created = stored(fake)
    assert {(s["plural"], s["namespace"], s["name"]) for s in sent} <= set(created)
    assert len({(s["plural"], s["name"]) for s in sent}) == len(sent) >= 7  # broker, setup, 3 Jobs

    second = deploy(flow, kubeconfig)
    assert second.returncode == 0, second.stderr
    assert " 0 created, 0 configured" in second.stdout  # idempotent
    assert stored(fake) == created

    status = run_vf("status", flow, "--kubeconfig", kubeconfig, "--json")
    assert status.returncode == 0, status.stderr
    doc = one_json_document(status)
    assert doc["run"] == "r1" and doc["found"]
    jobs = [w for w in doc["workloads"] if w["kind"] == "Job"]
    assert jobs and all(w["state"] == "complete" for w in jobs)
    assert [w["kind"] for w in doc["workloads"]].count("StatefulSet") == 1  # the broker
    assert doc["scalers"]["known"] is False and "KEDA" in doc["scalers"]["reason"]
    assert doc["lag"]["edges"] and all(e["lag"] is None for e in doc["lag"]["edges"])
    text = run_vf("status", flow, "--kubeconfig", kubeconfig)
    assert text.returncode == 0 and "broker lag" in text.stdout and "unknown" in text.stdout

    down = run_vf("teardown", flow, "--kubeconfig", kubeconfig, "--json")
    assert down.returncode == 0, down.stderr
    report = one_json_document(down)
    assert report["complete"] and report["run"] == "r1" and report["deleted"]
    left = stored(fake)
    assert [k for k in left if k[0] != "nodes"] == [("configmaps", "default", "other-run")]
    again = run_vf("status", flow, "--kubeconfig", kubeconfig, "--json")
    assert one_json_document(again)["found"] is False


def test_deploy_refuses_what_does_not_fit(fake: FakeKube, tmp_path: Path) -> None:
    flow = flow_file(tmp_path, gpus=8)  # 4 GPUs per node
    result = deploy(flow, fake.kubeconfig(tmp_path / "kubeconfig"))
    assert result.returncode == 3, result.stderr
    assert "error: preflight-does-not-fit" in result.stderr
    assert "8" in result.stderr
    assert applies(fake) == []  # nothing applied


def test_unknown_occupancy_refused_only_when_strict(fake: FakeKube, tmp_path: Path) -> None:
    flow = flow_file(tmp_path, gpus=1)
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    fake.refuse("pods", 403, "Forbidden")
    strict = deploy(flow, kubeconfig, "--strict-preflight")
    assert strict.returncode == 3
    assert "error: preflight-unknown" in strict.stderr and "Forbidden" in strict.stderr
    assert applies(fake) == []
    lenient = deploy(flow, kubeconfig, "--dry-run", "server")
    assert lenient.returncode == 0, lenient.stderr
    assert "preflight warning: whether the flow fits is unknown" in lenient.stderr


def test_server_dry_run_stores_nothing_and_does_not_wait(fake: FakeKube, tmp_path: Path) -> None:
    flow = flow_file(tmp_path, gpus=1)
    before = stored(fake)
    result = deploy(flow, fake.kubeconfig(tmp_path / "kubeconfig"), "--dry-run", "server")
    assert result.returncode == 0, result.stderr
    assert "(server dry run: nothing stored)" in result.stdout
    assert "waiting for run" not in result.stderr
    assert applies(fake) and all(s["dry_run"] for s in applies(fake))
    assert stored(fake) == before


def test_unreachable_cluster_is_a_runtime_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    nowhere = FakeKube()
    nowhere.url = f"http://127.0.0.1:{port}"
    kubeconfig = nowhere.kubeconfig(tmp_path / "kubeconfig")
    flow = flow_file(tmp_path, gpus=1)
    for args in (
        ("deploy", flow, "--image", "x:1", "--kubeconfig", kubeconfig),
        ("status", flow, "--kubeconfig", kubeconfig),
        ("teardown", flow, "--kubeconfig", kubeconfig, "--run", "r1"),
    ):
        result = run_vf(*args)
        assert result.returncode == 1, (args[0], result.stderr)
        assert "error: kube-unreachable" in result.stderr and "Traceback" not in result.stderr


def test_ctrl_c_while_waiting_leaves_the_run_and_prints_the_teardown(
    fake: FakeKube, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.integration.cli_helpers import REPO

    fake.call(lambda h: setattr(h, "complete_jobs", False))  # the Jobs never finish
    flow = flow_file(tmp_path, gpus=1)
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    env = {k: v for k, v in os.environ.items() if k != "VF_DEBUG"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vfadapters.cli", "deploy", str(flow), "--image", "x:1",
         "--run", "r1", "--kubeconfig", str(kubeconfig), "--namespace", "default"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
            a["plural"] == "jobs" for a in applies(fake)[-1:]
        ):
            time.sleep(0.1)
        time.sleep(1.0)  # into the wait loop
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "vf teardown" in err and "--run r1" in err
    assert "left in place" in err or "stays" in err
    assert any(k[0] == "jobs" for k in stored(fake))  # nothing deleted


def test_status_reads_broker_lag_per_edge_when_the_broker_is_reachable(
    fake: FakeKube, tmp_path: Path, fresh_nats_server: Any
) -> None:
    flow = flow_file(tmp_path, gpus=1)
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    assert deploy(flow, kubeconfig, "--broker", fresh_nats_server.url).returncode == 0
    before = run_vf(
        "status", flow, "--kubeconfig", kubeconfig, "--broker", fresh_nats_server.url, "--json"
    )
    edges = one_json_document(before)["lag"]["edges"]
    assert [(e["parent"], e["node"]) for e in edges] == [("src", "infer")]
    assert edges[0]["lag"] is None and edges[0]["reason"]  # no stream yet: unknown, never 0
    setup = run_vf("broker-setup", flow, "--broker", fresh_nats_server.url, "--run", "r1")
    assert setup.returncode == 0, setup.stderr
    for flag, url in (
        ("--broker", fresh_nats_server.url),
        ("--monitor", fresh_nats_server.monitor_url),
    ):
        after = run_vf("status", flow, "--kubeconfig", kubeconfig, flag, url, "--json")
        assert after.returncode == 0, after.stderr
        lag = one_json_document(after)["lag"]
        assert [e["lag"] for e in lag["edges"]] == [0], lag
    text = run_vf("status", flow, "--kubeconfig", kubeconfig, "--broker", fresh_nats_server.url)
    assert "src -> infer: 0" in text.stdout


REALTIME_FLOW = """
from vfcore import REALTIME, ConsumerNode, Flow, ProcessorNode, ProducerNode

class Cam(ProducerNode):
    def next(self):
        return 1

class Detect(ProcessorNode):
    def process(self, item):
        return item

class Sink(ConsumerNode):
    def consume(self, item):
        pass

flow = Flow([Sink(name="sink")(Detect(name="detect", nb_tasks=2, device_type="gpu", gpu_count=1)(Cam(name="cam")))],
            flow_type=REALTIME, name="rtdemo")
"""


def test_realtime_deploy_waits_until_every_workload_is_ready(
    fake: FakeKube, tmp_path: Path
) -> None:
    fake.call(lambda h: setattr(h, "spawn_bound_pods_on", "gpu-a"))
    fake.call(lambda h: setattr(h, "ready_workloads", True))
    flow = tmp_path / "rtdemo.py"
    flow.write_text(REALTIME_FLOW, encoding="utf-8")
    result = deploy(flow, fake.kubeconfig(tmp_path / "kubeconfig"))
    assert result.returncode == 0, result.stderr
    assert "workload(s) ready" in result.stdout
    sent = applies(fake)
    assert "deployments" in {s["plural"] for s in sent}
    assert "poddisruptionbudgets" in {s["plural"] for s in sent}  # detect has 2 replicas
    kinds = [s["plural"] for s in sent]
    assert kinds.index("poddisruptionbudgets") > max(
        i for i, k in enumerate(kinds) if k == "deployments"
    )
    fake.call(lambda h: setattr(h, "ready_workloads", False))  # pods bound, never Ready
    stuck = run_vf(
        "deploy", flow, "--image", "registry.example/kdemo:1", "--run", "r2",
        "--kubeconfig", fake.kubeconfig(tmp_path / "kubeconfig"), "--timeout", "2",
    )  # fmt: skip
    assert stuck.returncode == 1
    assert "error: run-timeout" in stuck.stderr and "0/2" in stuck.stderr


def test_force_conflicts_and_bad_durations(fake: FakeKube, tmp_path: Path) -> None:
    flow = flow_file(tmp_path, gpus=1)
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    assert deploy(flow, kubeconfig).returncode == 0
    jobs = [k for k in stored(fake) if k[0] == "jobs"]
    name = next(n for _, _, n in jobs if "infer" in n)
    theirs = fake.get("batch/v1/jobs", "default", name)
    assert theirs is not None
    theirs["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    theirs["spec"]["backoffLimit"] = 99
    fake.put("batch/v1/jobs", "default", theirs)
    conflict = deploy(flow, kubeconfig)
    assert conflict.returncode == 1 and "error: kube-apply-conflict" in conflict.stderr
    assert "--force-conflicts" in conflict.stderr
    forced = deploy(flow, kubeconfig, "--force-conflicts")
    assert forced.returncode == 0, forced.stderr
    assert applies(fake)[-1]["force"] is True
    for flag, value in (("--timeout", "0"), ("--unschedulable-grace", "-1"), ("--timeout", "nan")):
        bad = deploy(flow, kubeconfig, flag, value)
        assert bad.returncode == 2 and "error: invalid-timeout" in bad.stderr, bad.stderr
