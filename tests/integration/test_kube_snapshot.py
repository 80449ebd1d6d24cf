"""The live cluster as a snapshot: the official client over HTTP against a fake API server (kmock).

Same ClusterSnapshot as the kubectl dumps, GPU Feature Discovery labels read,
bound pods counted; a refused pod listing makes the plan *unknown* (never idle);
a refused node listing is an error with an id; ``vf plan --kube`` end to end as a
subprocess with a kubeconfig file.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_helpers import one_json_document, run_vf
from tests.integration.kube_fake import FakeKube
from tests.support.kube import FLOW, H100, bound_pod, client_for, gpu_node
from vfadapters.kubernetes.client import KubeApiError, connect
from vfadapters.kubernetes.snapshot import read_snapshot
from vfcore.cluster import snapshot_from_kubernetes

pytest.importorskip("kubernetes")


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    server = FakeKube().start()
    try:
        server.declare("v1/pods", "v1/nodes", "node.k8s.io/v1/runtimeclasses")
        yield server
    finally:
        server.stop()


def seed(fake: FakeKube) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [gpu_node("gpu-a", 4, H100), gpu_node("gpu-b", 4, H100), gpu_node("cpu-1", 0)]
    pods = [
        bound_pod("train-0", "gpu-a", 3),
        bound_pod("done-0", "gpu-b", 4, phase="Succeeded"),  # finished: holds nothing
    ]
    for n in nodes:
        fake.put("v1/nodes", None, copy.deepcopy(n))
    for p in pods:
        fake.put("v1/pods", "ml", copy.deepcopy(p))
    fake.put(
        "node.k8s.io/v1/runtimeclasses",
        None,
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
         "handler": "nvidia"},
    )  # fmt: skip
    return nodes, pods


def test_snapshot_equals_the_kubectl_dump_of_the_same_objects(
    fake: FakeKube, tmp_path: Path
) -> None:
    nodes, pods = seed(fake)
    live = read_snapshot(client_for(fake, tmp_path))
    dumped = snapshot_from_kubernetes(
        {"kind": "NodeList", "items": nodes}, {"kind": "PodList", "items": pods}
    )
    assert sorted(n.name for n in live.nodes) == ["cpu-1", "gpu-a", "gpu-b"]
    for node in dumped.nodes:
        got = live.node(node.name)
        assert got.allocatable == node.allocatable
        assert got.requested == node.requested
        assert got.gpu == node.gpu
    assert live.node("gpu-a").free_of("nvidia.com/gpu") == 1  # 3 of 4 held by a running pod
    assert live.node("gpu-b").free_of("nvidia.com/gpu") == 4  # a Succeeded pod holds nothing
    gpu = live.node("gpu-a").gpu
    assert gpu is not None and gpu.product == "NVIDIA-H100-80GB-HBM3" and gpu.memory_mib == 81559
    assert live.runtime_classes is not None
    assert [rc.name for rc in live.runtime_classes] == ["nvidia"]
    assert not live.unknowns


def test_forbidden_pod_listing_is_unknown_never_idle(fake: FakeKube, tmp_path: Path) -> None:
    from vfcore.placement.plan import plan

    seed(fake)
    fake.refuse("pods", 403, "Forbidden")
    live = read_snapshot(client_for(fake, tmp_path))
    for node in live.nodes:
        assert node.requested is None
        assert node.unknown_reason is not None and "Forbidden" in node.unknown_reason
    assert any(u.what == "pods" for u in live.unknowns)
    spec = _one_gpu_flow()
    result = plan(spec, live)
    assert result.verdict == "unknown"  # 1 GPU would "fit" an idle pool; occupancy is unknown


def test_refused_node_listing_is_an_error_with_an_id(fake: FakeKube, tmp_path: Path) -> None:
    seed(fake)
    fake.refuse("nodes", 403, "Forbidden")
    with pytest.raises(KubeApiError) as caught:
        read_snapshot(client_for(fake, tmp_path))
    assert caught.value.rule == "kube-nodes-forbidden"
    assert "Forbidden" in caught.value.message and "RBAC" in caught.value.hint


def test_unauthorized_and_unreachable(fake: FakeKube, tmp_path: Path) -> None:
    seed(fake)
    fake.refuse("nodes", 401, "Unauthorized")
    with pytest.raises(KubeApiError) as caught:
        read_snapshot(client_for(fake, tmp_path))
    assert caught.value.rule == "kube-unauthorized"
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    nowhere = FakeKube()
    nowhere.url = f"http://127.0.0.1:{port}"
    kubeconfig = nowhere.kubeconfig(tmp_path / "nowhere")
    with pytest.raises(KubeApiError) as caught:
        read_snapshot(connect(kubeconfig=str(kubeconfig)))
    assert caught.value.rule == "kube-unreachable"
    assert f"127.0.0.1:{port}" in caught.value.message


def test_pod_listing_timeout_is_unknown(fake: FakeKube, tmp_path: Path) -> None:
    import asyncio

    seed(fake)

    original = fake.handler._handle  # type: ignore[union-attr]

    async def handle(request: Any) -> Any:
        if request.resource is not None and request.resource.plural == "pods":
            await asyncio.sleep(3)
        return await original(request)

    fake.call(lambda h: setattr(h, "_handle", handle))
    client = client_for(fake, tmp_path)
    client.timeout_s = 0.5
    live = read_snapshot(client)
    assert live.nodes and all(n.requested is None for n in live.nodes)
    reason = live.node("gpu-a").unknown_reason or ""
    assert "kube-timeout" in reason


def _one_gpu_flow() -> Any:
    from vfcore import BATCH, Flow
    from vfcore.flow import ConsumerNode, ProcessorNode, ProducerNode

    class Src(ProducerNode):
        def next(self) -> Any:
            raise StopIteration

    class Gpu(ProcessorNode):
        def process(self, item: Any) -> Any:
            return item

    class Sink(ConsumerNode):
        def consume(self, item: Any) -> None:
            pass

    step = Gpu(name="infer", device_type="gpu", gpu_count=1)(Src(name="src"))
    return Flow([Sink(name="sink")(step)], flow_type=BATCH, name="one").spec()


def test_vf_plan_kube_end_to_end(fake: FakeKube, tmp_path: Path) -> None:
    seed(fake)
    flow = tmp_path / "flow.py"
    flow.write_text(FLOW.format(gpus=4), encoding="utf-8")
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig", context="lab")
    fits = run_vf("plan", flow, "--kube", "--kubeconfig", kubeconfig, "--context", "lab", "--json")
    assert fits.returncode == 0, fits.stderr
    doc = one_json_document(fits)
    assert doc["verdict"] == "fits"
    assert doc["assignments"]["infer/0"] == "gpu-b"  # gpu-a has 1 free GPU left

    fake.refuse("pods")
    unknown = run_vf(
        "plan", flow, "--kube", "--kubeconfig", kubeconfig, "--context", "lab", "--json"
    )
    assert unknown.returncode == 0, unknown.stderr
    doc = one_json_document(unknown)
    assert doc["verdict"] == "unknown"
    assert any("Forbidden" in u["reason"] for u in doc["unknown"])
    strict = run_vf(
        "plan", flow, "--kube", "--kubeconfig", kubeconfig, "--context", "lab", "--strict-preflight"
    )
    assert strict.returncode == 3, strict.stderr

    fake.refuse("nodes")
    refused = run_vf("plan", flow, "--kube", "--kubeconfig", kubeconfig, "--context", "lab")
    assert refused.returncode == 1
    assert "error: kube-nodes-forbidden" in refused.stderr and "Traceback" not in refused.stderr


def test_vf_plan_kube_bad_input(tmp_path: Path) -> None:
    flow = tmp_path / "flow.py"
    flow.write_text(FLOW.format(gpus=1), encoding="utf-8")
    both = run_vf("plan", flow, "--kube", "--cluster", tmp_path)
    assert both.returncode == 2 and "not allowed with" in both.stderr
    missing = run_vf("plan", flow, "--kube", "--kubeconfig", tmp_path / "nope")
    assert missing.returncode == 2
    assert "error: kube-config-not-found" in missing.stderr
    kubeconfig = tmp_path / "kc"
    FakeKube().kubeconfig(kubeconfig, context="lab")
    wrong = run_vf("plan", flow, "--kube", "--kubeconfig", kubeconfig, "--context", "other")
    assert wrong.returncode == 2 and "error: kube-config-invalid" in wrong.stderr


def test_every_page_is_read_and_a_broken_page_is_unknown(fake: FakeKube, tmp_path: Path) -> None:
    import vfadapters.kubernetes.snapshot as snap

    nodes = [gpu_node(f"gpu-{i}", 4, H100) for i in range(7)]
    for n in nodes:
        fake.put("v1/nodes", None, n)
    for i in range(11):
        fake.put("v1/pods", "ml", bound_pod(f"p{i}", f"gpu-{i % 7}", 1))
    fake.call(lambda h: setattr(h, "paginate", True))
    page, snap.PAGE_SIZE = snap.PAGE_SIZE, 3  # 3 pages of nodes, 4 of pods
    try:
        live = read_snapshot(client_for(fake, tmp_path))
        assert len(live.nodes) == 7
        assert sum(4 - (n.free_of("nvidia.com/gpu") or 0) for n in live.nodes) == 11
        continues = fake.call(
            lambda h: [r.params.get("continue") for r in h._requests if r.resource and
                       r.resource.plural == "pods"]
        )  # fmt: skip
        assert continues == [None, "3", "6", "9"]
        fake.call(lambda h: h.fail_later_pages.add("pods"))
        broken = read_snapshot(client_for(fake, tmp_path))
        assert len(broken.nodes) == 7  # nodes read whole; pods: a partial list is no list
        assert all(n.requested is None for n in broken.nodes)
        assert "Expired" in (broken.node("gpu-0").unknown_reason or "")
        fake.call(lambda h: h.fail_later_pages.add("nodes"))
        with pytest.raises(KubeApiError) as caught:
            read_snapshot(client_for(fake, tmp_path))
        assert caught.value.rule == "kube-nodes-unreadable" and "410" in caught.value.message
    finally:
        snap.PAGE_SIZE = page
