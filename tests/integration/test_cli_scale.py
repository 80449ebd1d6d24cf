"""`vf scale` end to end: the real `vf` in a subprocess, real files, the contract in docs/cli.md.

Exit codes: 0 when it answers (an unknown decision is an answer), 2 for bad
input, reported as ``error: <rule>`` with a hint and never a traceback.
``--json`` prints exactly one JSON document on stdout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cli_helpers import REPO, assert_bad_input, one_json_document, run_vf

FLOW = REPO / "examples" / "realtime_scaling.py"
OBSERVATIONS = REPO / "examples" / "observations.json"
GPU_POOL = REPO / "examples" / "clusters" / "gpu-pool"


def test_vf_scale_answers_on_the_example_in_text():
    result = run_vf("scale", FLOW, "--observations", OBSERVATIONS, script=True)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("scale decisions for flow realtime-scaling (realtime)")
    assert "detector  known    8" in out
    assert "plates    unknown  ? (≥1)" in out
    assert "starved" in out and "detector has nothing pending while plates backs up" in out
    assert "not autoscaled: GPU nodes are not autoscaled unless --gpu-autoscaling" in out


def test_vf_scale_json_has_the_design_shape():
    result = run_vf("scale", FLOW, "--observations", OBSERVATIONS, "--json")
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    assert doc["flow"] == {"name": "realtime-scaling", "flow_type": "realtime"}
    decisions = doc["decisions"]
    assert set(decisions) == {"detector", "plates", "fuse"}
    for entry in decisions.values():
        assert entry["status"] in ("known", "unknown")
        assert entry["diagnosis"] in ("idle", "backlog", "starved", "unknown", "capacity-capped")
        assert isinstance(entry["eligible"], bool)
        assert isinstance(entry["reasons"], list)
        assert isinstance(entry["starved_parents"], list)
        assert isinstance(entry["unknown_parents"], list)
        assert (entry["replicas"] is None) == (entry["status"] == "unknown")
    assert decisions["plates"]["replicas"] is None
    assert decisions["plates"]["parents"]["frames"] == {
        "unknown": "nats monitoring /jsz timed out after 5 s"
    }
    assert decisions["fuse"]["starved_parents"] == ["detector"]


def test_vf_scale_caps_a_gpu_node_on_a_cluster_and_predicts_the_hpa():
    result = run_vf(
        "scale",
        FLOW,
        "--observations",
        OBSERVATIONS,
        "--gpu-autoscaling",
        "--cluster",
        GPU_POOL,
        "--predict-hpa",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    det = one_json_document(result)["decisions"]["detector"]
    assert (det["replicas"], det["floor"], det["diagnosis"]) == (5, 8, "capacity-capped")
    assert det["capacity_detail"]["limit"] == 5
    assert "add one more node shaped like" in det["hint"]
    hpa = det["hpa"]
    assert (hpa["previous"], hpa["replicas"], hpa["reason"]) == (2, 4, "ScaleUpLimit")
    assert hpa["scaler"]["fallback"] == {
        "failureThreshold": 3,
        "replicas": 2,
        "behavior": "currentReplicas",
    }
    assert not hpa["comparison"]["agree"]


def test_vf_scale_text_with_a_cluster_names_the_first_replica_that_does_not_fit():
    result = run_vf(
        "scale", FLOW, "--observations", OBSERVATIONS, "--gpu-autoscaling", "--cluster", GPU_POOL
    )
    assert result.returncode == 0, result.stderr
    assert "capacity-capped" in result.stdout
    assert "first replica that does not fit: 0/6 nodes fit detector/5" in result.stdout


@pytest.mark.parametrize(
    ("content", "rule", "fragment"),
    [
        pytest.param("{not json", "invalid-observations", "is not JSON", id="not json"),
        pytest.param(
            '{"detector": {"parents": {"frames": {"pending": 3}}}}',
            "invalid-observations",
            "missing ['ack_pending']",
            id="missing ack_pending",
        ),
        pytest.param(
            '{"detektor": {"parents": {}}}', "unknown-node", "['detektor']", id="unknown node"
        ),
        pytest.param(
            '{"detector": {"parents": {"cams": {"pending": 1, "ack_pending": 0}}}}',
            "unknown-parent",
            "['cams']",
            id="unknown parent",
        ),
    ],
)
def test_vf_scale_refuses_bad_observations_with_a_rule_and_a_hint(
    tmp_path: Path, content: str, rule: str, fragment: str
):
    path = tmp_path / "obs.json"
    path.write_text(content)
    result = run_vf("scale", FLOW, "--observations", path, "--json")
    assert_bad_input(result, rule)
    assert fragment in result.stderr
    assert one_json_document(result)["error"]["rule"] == rule


def test_vf_scale_refuses_a_missing_file_and_a_bad_target(tmp_path: Path):
    assert_bad_input(
        run_vf("scale", FLOW, "--observations", tmp_path / "nope.json"), "observations-not-found"
    )
    result = run_vf("scale", FLOW, "--observations", OBSERVATIONS, "--target", "0")
    assert_bad_input(result, "invalid-scaling-rule")
    assert "--target 0 must be >= 1" in result.stderr


def test_vf_scale_requires_observations():
    result = run_vf("scale", FLOW)
    assert result.returncode == 2
    assert "--observations" in result.stderr
    assert "Traceback" not in result.stderr
