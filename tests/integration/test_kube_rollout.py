"""`vf deploy --rollout` against a fake API server (kmock, issue 26 item 8): a REALTIME run
deployed again with a new image rolls its Deployments as asked; a BATCH run refuses.

The data path of a rollout (two worker generations on a real nats-server) is
tests/integration/test_rollout.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_helpers import run_vf
from tests.integration.kube_fake import FakeKube
from tests.support.kube import applies, fake  # noqa: F401  (the fixture)

pytest.importorskip("kubernetes")

FLOW = """
from vfcore import {kind}, ConsumerNode, Flow, ProcessorNode, ProducerNode

class Src(ProducerNode):
    def next(self):
        return 1

class Work(ProcessorNode):
    def process(self, item):
        return item

class Sink(ConsumerNode):
    def consume(self, item):
        pass

flow = Flow([Sink(name="sink")(Work(name="work", nb_tasks=2)(Src(name="src")))],
            flow_type={kind}, name="roll")
"""


def _flow(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "roll.py"
    path.write_text(FLOW.format(kind=kind), encoding="utf-8")
    return path


def _deploy(flow: Path, kubeconfig: Path, image: str, *extra: object) -> Any:
    return run_vf(
        "deploy", flow, "--image", image, "--run", "r1", "--kubeconfig", kubeconfig,
        "--timeout", "30", "--broker", "nats://broker.example:4222", *extra,
    )  # fmt: skip


@pytest.mark.parametrize(("rollout", "surge", "unavailable"), [("surge", 1, 0), ("drain", 0, 1)])
def test_a_realtime_redeploy_rolls_each_deployment_as_asked(
    fake: FakeKube,  # noqa: F811
    tmp_path: Path,
    rollout: str,
    surge: int,
    unavailable: int,
) -> None:
    fake.call(lambda h: setattr(h, "spawn_bound_pods_on", "cpu-1"))
    fake.call(lambda h: setattr(h, "ready_workloads", True))
    flow = _flow(tmp_path, "REALTIME")
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    first = _deploy(flow, kubeconfig, "registry.example/roll:1")
    assert first.returncode == 0, first.stderr
    before = len(applies(fake))
    again = _deploy(flow, kubeconfig, "registry.example/roll:2", "--rollout", rollout)
    assert again.returncode == 0, again.stderr
    assert "registry.example/roll:1 -> registry.example/roll:2" in again.stderr
    rolled = [
        a["body"]
        for a in applies(fake)[before:]
        if a["plural"] == "deployments" and not a["dry_run"]
    ]
    assert sorted(a["metadata"]["name"].split("-")[2] for a in rolled) == ["sink", "src", "work"]
    for a in rolled:
        assert a["spec"]["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
        }
        pod = a["spec"]["template"]["spec"]
        assert pod["containers"][0]["image"] == "registry.example/roll:2"
        assert pod["terminationGracePeriodSeconds"] >= 30


def test_a_batch_run_refuses_a_rollout_before_anything_is_applied(
    fake: FakeKube,  # noqa: F811
    tmp_path: Path,
) -> None:
    flow = _flow(tmp_path, "BATCH")
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    refused = _deploy(flow, kubeconfig, "registry.example/roll:1", "--rollout", "drain")
    assert refused.returncode == 2, refused.stderr
    assert "error: rollout-on-batch" in refused.stderr
    assert "docs/kubernetes.md, Rollouts" in refused.stderr and "Traceback" not in refused.stderr
    assert applies(fake) == []


GPU_FLOW = """
from vfcore import REALTIME, ConsumerNode, Flow, ProcessorNode, ProducerNode

class Src(ProducerNode):
    def next(self):
        return 1

class Infer(ProcessorNode):
    def process(self, item):
        return item

class Sink(ConsumerNode):
    def consume(self, item):
        pass

flow = Flow([Sink(name="sink")(Infer(name="infer", device_type="gpu", gpu_count=2, nb_tasks=2)(
    Src(name="src")))], flow_type=REALTIME, name="roll")
"""


@pytest.mark.parametrize("rollout", ["surge", "drain"])
def test_a_surge_of_gpu_pods_says_what_room_it_needs(
    fake: FakeKube,  # noqa: F811
    tmp_path: Path,
    rollout: str,
) -> None:
    fake.call(lambda h: setattr(h, "spawn_bound_pods_on", "gpu-a"))
    fake.call(lambda h: setattr(h, "ready_workloads", True))
    flow = tmp_path / "roll.py"
    flow.write_text(GPU_FLOW, encoding="utf-8")
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    assert _deploy(flow, kubeconfig, "registry.example/roll:1").returncode == 0
    again = _deploy(flow, kubeconfig, "registry.example/roll:2", "--rollout", rollout)
    assert again.returncode == 0, again.stderr
    said = "preflight warning: --rollout surge starts one more pod of each rolled workload"
    if rollout == "surge":
        assert said in again.stderr
        assert (
            "infer +2 nvidia.com/gpu" in again.stderr
            and "--rollout drain needs no room" in again.stderr
        )
    else:
        assert said not in again.stderr


def _tainted(node: dict[str, Any]) -> dict[str, Any]:
    node["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    return node


def test_a_clustered_broker_needs_a_host_per_server_before_anything_is_applied(
    tmp_path: Path,
) -> None:
    """`--broker-replicas 3` puts each server on a node of its own (required anti-affinity):
    on a cluster where only one node takes the broker's pods (the GPU nodes are tainted)
    the preflight refuses it, naming each node and why (it would otherwise wait 60 s and
    end run-unschedulable); once three nodes can, it goes on."""
    from tests.support.kube import RESOURCES, gpu_node

    server = FakeKube().start()
    try:
        server.declare(*RESOURCES, "storage.k8s.io/v1/storageclasses", "v1/persistentvolumes")
        server.put(
            "storage.k8s.io/v1/storageclasses",
            None,
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {
                    "name": "std",
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
                },
                "provisioner": "csi.example",
            },
        )
        for name in ("gpu-a", "gpu-b"):
            server.put("v1/nodes", None, _tainted(gpu_node(name, 4)))
        server.put("v1/nodes", None, gpu_node("cpu-1", 0))
        flow = _flow(tmp_path, "REALTIME")
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        base = ("deploy", flow, "--image", "registry.example/roll:1", "--run", "r1",
                "--timeout", "30")  # fmt: skip
        refused = run_vf(*base, "--kubeconfig", kubeconfig, "--broker-replicas", "3")
        assert refused.returncode == 3, refused.stderr
        assert "error: preflight-broker-hosts" in refused.stderr
        assert "1 of 3 nodes can take one: cpu-1" in refused.stderr
        assert "gpu-a (untolerated taint nvidia.com/gpu=present:NoSchedule)" in refused.stderr
        assert "--broker-replicas 1" in refused.stderr
        assert applies(server) == []
        for name in ("cpu-2", "cpu-3"):
            server.put("v1/nodes", None, gpu_node(name, 0))
        server.call(lambda h: setattr(h, "spawn_bound_pods_on", "cpu-1"))
        server.call(lambda h: setattr(h, "ready_workloads", True))
        fits = run_vf(*base, "--kubeconfig", kubeconfig, "--broker-replicas", "3")
        assert fits.returncode == 0, fits.stderr
        assert "preflight-broker-hosts" not in fits.stderr
        # a run's broker keeps its size: another --broker-replicas is refused before applying
        before = len(applies(server))
        resized = run_vf(*base, "--kubeconfig", kubeconfig)
        assert resized.returncode == 2, resized.stderr
        assert "error: redeploy-broker-size" in resized.stderr
        assert "has 3 server(s) and this deploy asks 1" in resized.stderr
        assert "--broker-replicas 3" in resized.stderr
        assert len(applies(server)) == before
    finally:
        server.stop()
