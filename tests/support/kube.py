"""The Kubernetes objects and helpers the tests against the fake API server share.

Nodes and pods as the API serves them (``gpu_node``, ``bound_pod``, ``H100``'s GPU
feature labels), a client of the fake (``client_for``), the flow files ``vf plan --kube``
and ``vf deploy`` are given, and for ``vf deploy``: the resources the fake serves, a
fake that completes Jobs with three nodes in it (``fake``), what it was sent
(``applies``) and what it stores (``stored``), and ``deploy`` runs ``vf deploy``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_helpers import run_vf
from tests.integration.kube_fake import FakeKube
from vfadapters.kubernetes.client import KubeClient, connect

H100 = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/gpu.count": "4",
}


def gpu_node(name: str, gpus: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {
            "allocatable": {
                "cpu": "32",
                "memory": "256Gi",
                "pods": "110",
                "nvidia.com/gpu": str(gpus),
            },
            "capacity": {
                "cpu": "32",
                "memory": "256Gi",
                "pods": "110",
                "nvidia.com/gpu": str(gpus),
            },
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def bound_pod(name: str, node: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": phase},
    }


def client_for(fake: FakeKube, tmp_path: Path) -> KubeClient:
    return connect(kubeconfig=str(fake.kubeconfig(tmp_path / "kubeconfig")), context="fake")


_GPU_FLOW = """
from vfcore import {kind}, ConsumerNode, Flow, ProcessorNode, ProducerNode

class Src(ProducerNode):
    def next(self):
        raise StopIteration

class Gpu(ProcessorNode):
    def process(self, item):
        return item

class Sink(ConsumerNode):
    def consume(self, item):
        pass

flow = Flow([Sink(name="sink")(Gpu(name="infer", device_type="gpu", gpu_count={gpus}, nb_tasks={nb_tasks})(
    Src(name="src")))], flow_type={kind}, name="{name}")
"""


def gpu_flow(name: str, *, gpus: object = 1, nb_tasks: int = 1, kind: str = "BATCH") -> str:
    """The source of the flow the Kubernetes tests deploy: src -> infer (``gpus`` GPUs per
    replica, ``nb_tasks`` replicas) -> sink, named ``name``."""
    return _GPU_FLOW.format(name=name, gpus=gpus, nb_tasks=nb_tasks, kind=kind)


#: A one-GPU-node batch flow (``{gpus}`` GPUs per replica) named ``kube``: vf plan --kube.
FLOW = gpu_flow("kube", gpus="{gpus}")
#: The same flow named ``kdemo``: vf deploy (``flow_file``).
DEPLOY_FLOW = gpu_flow("kdemo", gpus="{gpus}")


#: What the fake of the deploy tests serves.
RESOURCES = (
    "v1/pods",
    "v1/nodes",
    "v1/services",
    "v1/configmaps",
    "v1/secrets",
    "networking.k8s.io/v1/networkpolicies",
    "v1/persistentvolumeclaims",
    "apps/v1/deployments",
    "apps/v1/statefulsets",
    "batch/v1/jobs",
    "policy/v1/poddisruptionbudgets",
    "autoscaling/v2/horizontalpodautoscalers",
    "node.k8s.io/v1/runtimeclasses",
)


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    """The deploy tests' API server: Jobs complete, two H100 nodes of 4 GPUs and a CPU node."""
    server = FakeKube().start()
    try:
        server.declare(*RESOURCES)
        for name in ("gpu-a", "gpu-b"):
            server.put("v1/nodes", None, gpu_node(name, 4, H100))
        server.put("v1/nodes", None, gpu_node("cpu-1", 0))
        server.call(lambda h: setattr(h, "complete_jobs", True))
        yield server
    finally:
        server.stop()


def flow_file(tmp_path: Path, gpus: int) -> Path:
    path = tmp_path / "kdemo.py"
    path.write_text(DEPLOY_FLOW.format(gpus=gpus), encoding="utf-8")
    return path


def applies(fake: FakeKube) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = fake.call(lambda h: copy.deepcopy(h.applies))
    return result


def stored(fake: FakeKube) -> list[tuple[str, str | None, str]]:
    def read(h: Any) -> list[tuple[str, str | None, str]]:
        return sorted(
            (key[0].plural, key[1], key[2]) for key, obj in h.objects.items() if not obj.deleted
        )

    result: list[tuple[str, str | None, str]] = fake.call(read)
    return result


def deploy(flow: Path, kubeconfig: Path, *extra: object) -> Any:
    return run_vf(
        "deploy", flow, "--image", "registry.example/kdemo:1", "--run", "r1",
        "--kubeconfig", kubeconfig, "--timeout", "30", *extra,
    )  # fmt: skip
