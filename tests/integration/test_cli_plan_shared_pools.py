"""`vf plan` on time-sliced and MPS pools, as a real process on published node shapes.

The nodes are ``tests/data/nodes/`` fixtures (shaped as GFD and the device
plugin publish them), dumped as kubectl would into a cluster directory.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.cli_helpers import REPO, one_json_document, run_vf

NODES = REPO / "tests" / "data" / "nodes"

DETECTORS = """
from vfcore import REALTIME, ConsumerNode, Flow, ProcessorNode, ProducerNode

class S(ProducerNode):
    def next(self): raise StopIteration

class Detect(ProcessorNode):
    def process(self, x): return x

class C(ConsumerNode):
    def consume(self, x): pass

det = Detect(name="detect", nb_tasks={replicas}, device_type="gpu", gpu_memory_gib={gib})
flow = Flow([C(name="sink")(det(S(name="src")))], flow_type=REALTIME)
"""


def _setup(tmp_path: Path, node: str, replicas: int, gib: float) -> tuple[Path, Path]:
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    item = json.loads((NODES / f"{node}.json").read_text())
    cpu = json.loads(json.dumps(item))
    cpu["metadata"]["name"] = "cpu-1"
    cpu["metadata"]["labels"] = {"kubernetes.io/hostname": "cpu-1"}
    cpu["status"]["allocatable"] = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    cpu["status"]["capacity"] = cpu["status"]["allocatable"]
    (cluster / "nodes.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "NodeList", "items": [item, cpu]})
    )
    (cluster / "pods.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "PodList", "items": []})
    )
    flow = tmp_path / "flow.py"
    flow.write_text(DETECTORS.format(replicas=replicas, gib=gib))
    return cluster, flow


def test_three_6_gib_pods_do_not_fit_one_time_sliced_15_gib_t4(tmp_path: Path) -> None:
    cluster, flow = _setup(tmp_path, "t4-time-slicing", 3, 6)
    doc = one_json_document(run_vf("plan", flow, "--cluster", cluster, "--json"))
    assert doc["verdict"] == "does-not-fit"
    [unplaced] = doc["unplaced"]
    assert "6.00 GiB asked, at most 3.00 GiB of 15.00 GiB left" in unplaced["summary"]
    text = run_vf("plan", flow, "--cluster", cluster)
    assert text.returncode == 0, text.stderr
    assert "DOES NOT FIT" in text.stdout
    assert "t4-time-slicing: 1 card(s) x 4 nvidia.com/gpu units (time-slicing)" in text.stdout
    assert "share one card: detect/0, detect/1" in text.stdout


def test_two_fit_and_the_plan_says_they_share_a_card(tmp_path: Path) -> None:
    cluster, flow = _setup(tmp_path, "t4-time-slicing", 2, 6)
    doc = one_json_document(run_vf("plan", flow, "--cluster", cluster, "--json"))
    assert doc["verdict"] == "fits"
    [pool] = doc["shared_pools"]
    assert (pool["cards"], pool["units_per_card"], pool["sharing"]) == (1, 4, "time-slicing")
    assert doc["shares_card_with"] == {"detect/0": ["detect/1"], "detect/1": ["detect/0"]}


def test_gpu_resource_name_plans_against_the_renamed_shared_resource(tmp_path: Path) -> None:
    cluster, flow = _setup(tmp_path, "t4-time-slicing-renamed", 2, 6)
    plain = one_json_document(run_vf("plan", flow, "--cluster", cluster, "--json"))
    assert plain["verdict"] == "does-not-fit"  # nvidia.com/gpu is not advertised there
    [missing] = [p for p in plain["problems"] if p["code"] == "resource-not-advertised"]
    assert "--gpu-resource-name nvidia.com/gpu.shared" in missing["hint"]
    renamed = run_vf(
        "plan", flow, "--cluster", cluster, "--json", "--gpu-resource-name", "nvidia.com/gpu.shared"
    )
    doc = one_json_document(renamed)
    assert doc["verdict"] == "fits", doc["unplaced"]
    assert doc["shared_pools"][0]["resource"] == "nvidia.com/gpu.shared"


def test_mps_caps_each_pod_at_a_share_of_the_card(tmp_path: Path) -> None:
    cluster, flow = _setup(tmp_path, "t4-mps", 1, 6)
    doc = one_json_document(run_vf("plan", flow, "--cluster", cluster, "--json"))
    assert doc["verdict"] == "does-not-fit"
    assert "each of 4 clients of a 15.00 GiB card gets 3.75 GiB" in doc["unplaced"][0]["summary"]
