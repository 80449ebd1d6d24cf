"""`vf plan` on a flow far larger than its cluster: a bounded answer a person can read.

Ten GPU processors of 1,000 replicas each (10,002 pods) on two 4-GPU nodes once
took minutes (every unplaced replica was explained from scratch, and a set was
rebuilt per pod); the text listed every pod. Now each pod shape is explained
once, and the text shows the first few with a count of the rest.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.cli_helpers import REPO, one_json_document, run_vf


def wide_flow(tmp_path: Path, processors: int = 10, replicas: int = 1000) -> Path:
    nodes = [{"name": "src", "kind": "producer"}]
    nodes += [
        {
            "name": f"d{i}",
            "kind": "processor",
            "parents": ["src"],
            "nb_tasks": replicas,
            "device_type": "gpu",
        }
        for i in range(processors)
    ]
    nodes.append(
        {"name": "sink", "kind": "consumer", "parents": [f"d{i}" for i in range(processors)]}
    )
    path = tmp_path / "wide.json"
    path.write_text(json.dumps({"name": "wide", "flow_type": "batch", "nodes": nodes}))
    return path


def test_a_flow_far_larger_than_the_cluster_is_answered_and_summarised(tmp_path: Path) -> None:
    flow = wide_flow(tmp_path)
    cluster = REPO / "examples" / "clusters" / "two-4gpu"
    text = run_vf("plan", flow, "--cluster", cluster)
    assert text.returncode == 0, text.stderr
    assert "DOES NOT FIT" in text.stdout
    assert "more unplaced pod(s); --json lists every one" in text.stdout
    assert len(text.stdout.splitlines()) < 120
    doc = one_json_document(run_vf("plan", flow, "--cluster", cluster, "--json"))
    assert doc["verdict"] == "does-not-fit"
    # 8 GPUs for 10,000 one-GPU pods: all but 8 GPU pods are unplaced, each with its reasons
    gpu_unplaced = [u for u in doc["unplaced"] if u["pod"].startswith("d")]
    assert len(gpu_unplaced) == 10_000 - 8
    assert all("Insufficient nvidia.com/gpu" in u["summary"] for u in gpu_unplaced)
