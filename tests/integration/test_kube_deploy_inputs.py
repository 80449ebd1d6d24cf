"""A live `vf deploy` takes what rendering needs from the cluster (against the fake API server).

With ``--autoscaling`` the ScaledObject's ``maxReplicaCount`` is the smaller of
``--max-replicas`` and what the exact planner can place on the live snapshot
(``vfcore.capacity_cap``): two nodes of 4 free GPUs place 8 one-GPU replicas, so
``--max-replicas 20`` renders 8 and ``--max-replicas 5`` renders 5. ``--render-only``
reads no cluster and renders the flag.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.cli_helpers import run_vf
from tests.integration.kube_fake import FakeKube
from tests.manifest_schemas import check_keda
from tests.support.kube import H100, RESOURCES, gpu_node
from vfcore.runtime.manifests import object_name

pytest.importorskip("kubernetes")

FLOW = """
from vfcore import REALTIME, ConsumerNode, Flow, ProcessorNode, ProducerNode

class Src(ProducerNode):
    def next(self):
        return 1

class Gpu(ProcessorNode):
    def process(self, item):
        return item

class Sink(ConsumerNode):
    def consume(self, item):
        pass

flow = Flow([Sink(name="sink")(Gpu(name="infer", device_type="gpu")(Src(name="src")))],
            flow_type=REALTIME, name="kscale")
"""
SCALED = "keda.sh/v1alpha1/scaledobjects"


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    server = FakeKube().start()
    try:
        server.declare(*RESOURCES, SCALED)
        for name in ("gpu-a", "gpu-b"):
            server.put("v1/nodes", None, gpu_node(name, 4, H100))
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize(("max_replicas", "expected"), [(20, 8), (5, 5)])
def test_the_scaled_objects_maximum_is_what_the_cluster_can_place(
    fake: FakeKube, tmp_path: Path, max_replicas: int, expected: int
) -> None:
    flow = tmp_path / "kscale.py"
    flow.write_text(FLOW, encoding="utf-8")
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    result = run_vf(
        "deploy", flow, "--image", "registry.example/kscale:1", "--run", "r1",
        "--kubeconfig", kubeconfig, "--autoscaling", "--gpu-autoscaling",
        "--max-replicas", max_replicas, "--timeout", "3",
    )  # fmt: skip
    # the fake runs no pods: the REALTIME wait ends at --timeout, the objects stay
    assert result.returncode == 1 and "run-timeout" in result.stderr, result.stderr
    so = fake.get(SCALED, "default", object_name("kscale", "r1", "infer"))
    assert so is not None, result.stderr
    assert so["spec"]["maxReplicaCount"] == expected
    assert so["spec"]["minReplicaCount"] == 1
    check_keda(
        {
            "apiVersion": so["apiVersion"],
            "kind": so["kind"],
            "metadata": {"name": so["metadata"]["name"]},
            "spec": so["spec"],
        }
    )

    rendered = run_vf(
        "deploy", flow, "--image", "x:1", "--run", "r1", "--render-only",
        "--autoscaling", "--gpu-autoscaling", "--max-replicas", max_replicas,
    )  # fmt: skip
    (offline,) = [d for d in yaml.safe_load_all(rendered.stdout) if d["kind"] == "ScaledObject"]
    assert offline["spec"]["maxReplicaCount"] == max_replicas  # no cluster read: no cap
