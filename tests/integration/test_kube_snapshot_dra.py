"""DRA facts from the live API (``vf plan --kube``): the same as the dumps; refused means unknown."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_helpers import REPO, one_json_document, run_vf
from tests.integration.kube_fake import FakeKube
from vfadapters.kubernetes.client import connect
from vfadapters.kubernetes.snapshot import read_snapshot
from vfcore.cluster import snapshot_from_kubernetes

pytest.importorskip("kubernetes")

CLUSTER = REPO / "examples" / "clusters" / "dra-h100"
DRA = {
    "resource.k8s.io/v1/resourceslices": "resourceslices",
    "resource.k8s.io/v1/deviceclasses": "deviceclasses",
    "resource.k8s.io/v1/resourceclaims": "resourceclaims",
}


def _items(name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads((CLUSTER / f"{name}.json").read_text())["items"]
    return items


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    server = FakeKube().start()
    try:
        server.declare("v1/pods", "v1/nodes", "node.k8s.io/v1/runtimeclasses", *DRA)
        for node in _items("nodes"):
            server.put("v1/nodes", None, copy.deepcopy(node))
        for pod in _items("pods"):
            server.put("v1/pods", pod["metadata"]["namespace"], copy.deepcopy(pod))
        for resource, name in DRA.items():
            for obj in _items(name):
                namespace = obj["metadata"].get("namespace")
                server.put(resource, namespace, copy.deepcopy(obj))
        yield server
    finally:
        server.stop()


def _snapshot(fake: FakeKube, tmp_path: Path) -> Any:
    client = connect(kubeconfig=str(fake.kubeconfig(tmp_path / "kubeconfig")), context="fake")
    return read_snapshot(client)


def test_the_live_dra_facts_equal_the_dumps(fake: FakeKube, tmp_path: Path) -> None:
    live = _snapshot(fake, tmp_path)
    dumped = snapshot_from_kubernetes(
        {"kind": "NodeList", "items": _items("nodes")},
        {"kind": "PodList", "items": _items("pods")},
        resourceslices_json={"kind": "ResourceSliceList", "items": _items("resourceslices")},
        deviceclasses_json={"kind": "DeviceClassList", "items": _items("deviceclasses")},
        resourceclaims_json={"kind": "ResourceClaimList", "items": _items("resourceclaims")},
    )
    assert live.dra is not None and dumped.dra is not None
    assert live.dra.slices == dumped.dra.slices
    assert live.dra.classes == dumped.dra.classes
    assert live.dra.allocated == dumped.dra.allocated
    assert live.dra.unknowns == ()


def test_a_refused_claim_listing_is_unknown_never_nothing_allocated(
    fake: FakeKube, tmp_path: Path
) -> None:
    fake.refuse("resourceclaims", 403, "Forbidden")
    live = _snapshot(fake, tmp_path)
    assert live.dra is not None and live.dra.allocated == ()
    assert "Forbidden" in (live.dra.claims_unknown or "")


def test_vf_plan_kube_in_dra_mode_end_to_end(fake: FakeKube, tmp_path: Path) -> None:
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    result = run_vf(
        "plan", "examples/dra_flow.py", "--kube", "--kubeconfig", kubeconfig, "--context", "fake",
        "--gpu-mode", "dra", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    assert doc["verdict"] == "fits"
    assert doc["dra"]["devices"]["track/0"] == [
        "gpu.nvidia.com/gpu-b/gpu-0",
        "gpu.nvidia.com/gpu-b/gpu-2",
    ]
