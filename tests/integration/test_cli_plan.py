"""`vf plan` end to end: the real command on the example clusters."""

from __future__ import annotations

import re
from pathlib import Path

from tests.integration.cli_helpers import REPO, assert_bad_input, one_json_document, run_vf

CLUSTERS = REPO / "examples" / "clusters"
TRAFFIC = REPO / "examples" / "traffic.py"
STRANDING = REPO / "examples" / "stranding.py"

BIG_POD_FLOW = """
from vfcore import BATCH, ConsumerNode, Flow, ProcessorNode, ProducerNode

class S(ProducerNode):
    def next(self): raise StopIteration

class Train(ProcessorNode):
    def process(self, x): return x

class C(ConsumerNode):
    def consume(self, x): pass

flow = Flow([C(name="sink")(Train(name="train", device_type="gpu", gpu_count=4)(S(name="src")))])
"""


def big_pod_flow(tmp_path: Path) -> Path:
    path = tmp_path / "big.py"
    path.write_text(BIG_POD_FLOW, encoding="utf-8")
    return path


def test_plan_json_has_the_design_shape_and_a_checked_placement():
    result = run_vf("plan", TRAFFIC, "--cluster", CLUSTERS / "gpu-pool", "--json")
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    for key in ("verdict", "gpu_mode", "assignments", "unplaced", "unknown", "scheduler", "solver"):
        assert key in doc
    assert doc["verdict"] == "fits"
    assert doc["gpu_mode"] == "exclusive"
    assert sorted(doc["assignments"]) == sorted(
        ["frames/0", "plates/0", "plates/1", "report/0", "tracker/0", "tracker/1"]
        + [f"detector/{i}" for i in range(4)]
    )
    gpu_nodes = {doc["assignments"][f"detector/{i}"] for i in range(4)}
    assert all(n.startswith("gpu-") for n in gpu_nodes)
    assert doc["scheduler"]["verdict"] in ("lands", "at-risk", "strands")
    assert doc["solver"]["deterministic"] is True
    assert "planning" in result.stderr  # progress goes to stderr, never stdout


def test_fragmented_pool_does_not_fit_a_4_gpu_pod_with_reasons(tmp_path):
    flow = big_pod_flow(tmp_path)
    result = run_vf("plan", flow, "--cluster", CLUSTERS / "fragmented", "--json")
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    assert doc["verdict"] == "does-not-fit"
    by_pod = {u["pod"]: u for u in doc["unplaced"]}
    unplaced = by_pod["train/0"]
    # the pool is all tainted GPU nodes: the CPU pods have nowhere to go, ever
    assert by_pod["src/0"]["kind"] == by_pod["sink/0"]["kind"] == "unresolvable"
    assert "Insufficient nvidia.com/gpu" in unplaced["summary"]
    assert unplaced["kind"] == "unschedulable"
    assert unplaced["fix"].startswith("free 1 nvidia.com/gpu on ")
    strict = run_vf("plan", flow, "--cluster", CLUSTERS / "fragmented", "--strict-preflight")
    assert strict.returncode == 3
    assert "error: strict-preflight" in strict.stderr
    assert "DOES NOT FIT" in strict.stdout


def test_refused_pod_listing_is_unknown_never_an_idle_pool(tmp_path):
    result = run_vf(
        "plan", big_pod_flow(tmp_path), "--cluster", CLUSTERS / "refused-pods", "--json"
    )
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    assert doc["verdict"] == "unknown"
    assert any(u["what"] == "pods" and "Forbidden" in u["reason"] for u in doc["unknown"])
    strict = run_vf(
        "plan", big_pod_flow(tmp_path), "--cluster", CLUSTERS / "refused-pods", "--strict-preflight"
    )
    assert strict.returncode == 3
    assert "UNKNOWN" in strict.stdout


def test_stranding_example_fits_but_strands_and_the_remedy_lands():
    result = run_vf("plan", STRANDING, "--cluster", CLUSTERS / "two-4gpu", "--json")
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    assert doc["verdict"] == "fits"
    assert doc["scheduler"]["verdict"] == "strands"
    assert doc["scheduler"]["stranded"] == ["segment/0"]
    remedy = doc["scheduler"]["remedy"]
    assert remedy["verdict_after"] == "lands"
    assert remedy["waves"][0] == ["segment/0"]
    strict = run_vf("plan", STRANDING, "--cluster", CLUSTERS / "two-4gpu", "--strict-preflight")
    assert strict.returncode == 0, strict.stderr  # the remedy lands: strict passes
    assert "remedy: " in strict.stdout


def test_resources_override_changes_the_plan(tmp_path):
    # 48 cpu per encoder cannot fit a 32-cpu node: the override is really applied
    result = run_vf(
        "plan",
        STRANDING,
        "--cluster",
        CLUSTERS / "two-4gpu",
        "--resources",
        "encode=cpu:48",
        "--json",
    )
    doc = one_json_document(result)
    assert doc["verdict"] == "does-not-fit"
    assert {u["pod"] for u in doc["unplaced"]} == {"encode/0", "encode/1"}
    assert all(u["kind"] == "unresolvable" for u in doc["unplaced"])


def test_shared_mode_without_runtime_class_is_reported(tmp_path):
    result = run_vf(
        "plan", TRAFFIC, "--cluster", CLUSTERS / "gpu-pool", "--gpu-mode", "shared", "--json"
    )
    doc = one_json_document(result)
    assert "shared-without-runtime-class" in {p["code"] for p in doc["problems"]}
    assert doc["cards"]  # each shared pod is given a card


def test_bad_inputs_exit_2_without_traceback(tmp_path):
    assert_bad_input(
        run_vf("plan", TRAFFIC, "--cluster", tmp_path / "nowhere"), "cluster-path-not-found"
    )
    assert_bad_input(
        run_vf("plan", TRAFFIC, "--cluster", CLUSTERS / "gpu-pool", "--resources", "detector"),
        "invalid-resources-option",
    )
    assert_bad_input(
        run_vf("plan", TRAFFIC, "--cluster", CLUSTERS / "gpu-pool", "--resources", "ghost=cpu:1"),
        "unknown-node",
    )
    assert_bad_input(
        run_vf(
            "plan", TRAFFIC, "--cluster", CLUSTERS / "gpu-pool", "--resources", "detector=cpu:lots"
        ),
        "invalid-quantity",
    )
    usage = run_vf("plan", TRAFFIC)
    assert usage.returncode == 2 and "--cluster" in usage.stderr


def test_resources_override_refuses_negative_zero_and_absurd_quantities(tmp_path):
    base = ("plan", STRANDING, "--cluster", CLUSTERS / "two-4gpu", "--resources")
    for option, rule in [
        ("encode=cpu:-100", "quantity-not-positive"),
        ("encode=cpu:0", "quantity-not-positive"),
        ("encode=memory:9999999999999999999Ei", "quantity-out-of-range"),
        ("encode=cpu:" + "9" * 5001, "invalid-quantity"),
        ("encode=cpu:NaN", "invalid-quantity"),
    ]:
        result = run_vf(*base, option)
        assert_bad_input(result, rule)
        assert len(result.stderr) < 2000  # the 5,001 digits are not echoed back


def test_a_spec_without_nodes_is_invalid(tmp_path):
    spec = tmp_path / "empty.json"
    spec.write_text('{"name": "empty", "flow_type": "batch", "nodes": []}', encoding="utf-8")
    result = run_vf("plan", spec, "--cluster", CLUSTERS / "two-4gpu")
    assert_bad_input(result, "invalid-spec")
    assert "has no nodes" in result.stderr
    assert "FITS" not in result.stdout


def _hard_packing(folder: Path) -> Path:
    """70 GPU pods of 21..43 cards on 22 nodes of ~100, total exactly equal: a long solve."""
    import json
    import random

    rnd = random.Random(7)
    sizes = [rnd.randint(21, 43) for _ in range(70)]
    nodes: list[dict[str, object]] = [{"name": "src", "kind": "producer"}]
    for i, gpus in enumerate(sizes):
        parent = "src" if i == 0 else f"w{i - 1}"
        nodes.append(
            {
                "name": f"w{i}",
                "kind": "processor",
                "parents": [parent],
                "device_type": "gpu",
                "gpu_count": gpus,
            }
        )
    nodes.append({"name": "sink", "kind": "consumer", "parents": [f"w{len(sizes) - 1}"]})
    flow = folder / "flow.json"
    flow.write_text(json.dumps({"name": "hard", "flow_type": "batch", "nodes": nodes}))
    caps = [100 + rnd.randint(-7, 7) for _ in range(sum(sizes) // 100)]
    caps[-1] += sum(sizes) - sum(caps)
    ready = [{"type": "Ready", "status": "True"}]
    items = [
        {
            "kind": "Node",
            "metadata": {"name": f"g{i:02d}", "labels": {"nvidia.com/gpu.present": "true"}},
            "status": {
                "allocatable": {
                    "cpu": "640",
                    "memory": "256Gi",
                    "pods": "110",
                    "nvidia.com/gpu": str(c),
                },
                "conditions": ready,
            },
        }
        for i, c in enumerate(caps)
    ]
    items.append(
        {
            "kind": "Node",
            "metadata": {"name": "cpu"},
            "status": {
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                "conditions": ready,
            },
        }
    )
    (folder / "nodes.json").write_text(json.dumps({"kind": "NodeList", "items": items}))
    (folder / "pods.json").write_text('{"kind": "PodList", "items": []}')
    return flow


def test_ctrl_c_during_a_long_solve_prints_interrupted_and_exits_130(tmp_path):
    # CP-SAT would take SIGINT for itself and return UNKNOWN as if timed out (exit 0, a plan)
    import signal
    import subprocess
    import sys
    import time

    flow = _hard_packing(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "vfadapters.cli", "plan", str(flow), "--cluster", str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        assert process.stderr.readline().startswith("planning")
        time.sleep(2.0)  # well inside the solve (tens of seconds on this instance)
        assert process.poll() is None, "the solve ended before Ctrl-C: make the instance harder"
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        waited = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, (out, err)
    assert err.strip().endswith("interrupted"), err
    assert out == ""  # no partial plan, no UNKNOWN verdict passed off as a timeout
    assert "Traceback" not in err
    assert waited < 10, f"Ctrl-C took {waited:.1f} s: the solver kept the signal"


def _two_4gpu_with(folder: Path, mutate) -> Path:
    import json

    nodes = json.loads((CLUSTERS / "two-4gpu" / "nodes.json").read_text())
    pods = json.loads((CLUSTERS / "two-4gpu" / "pods.json").read_text())
    mutate({i["metadata"]["name"]: i for i in nodes["items"]}, nodes, pods)
    (folder / "nodes.json").write_text(json.dumps(nodes))
    (folder / "pods.json").write_text(json.dumps(pods))
    return folder


def test_unreadable_nodes_make_the_plan_unknown_never_a_proof(tmp_path):
    def mutate(by_name, nodes, pods):
        by_name["gpu-a"]["status"]["allocatable"] = ["?"]  # capacity still bounds it (4 GPUs)
        by_name["gpu-b"]["status"]["allocatable"]["nvidia.com/gpu"] = "9999999999999999999Ei"
        by_name["gpu-b"]["status"].pop("capacity", None)  # nothing bounds its GPUs
        by_name["cpu-1"]["status"]["allocatable"]["memory"] = "9" * 5001

    cluster = _two_4gpu_with(tmp_path, mutate)
    result = run_vf("plan", STRANDING, "--cluster", cluster, "--json")
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    assert doc["verdict"] == "unknown"
    assert doc["fix"] is None
    reasons = {u["what"]: u["reason"] for u in doc["unknown"]}
    assert "status.allocatable is a JSON array, not an object" in reasons["node/gpu-a"]
    assert 'status.allocatable["nvidia.com/gpu"]' in reasons["node/gpu-b"]
    assert 'status.allocatable["memory"]' in reasons["node/cpu-1"]
    assert "resource-not-advertised" not in {p["code"] for p in doc["problems"]}
    assert all(u["kind"] == "unknown" and u["fix"] is None for u in doc["unplaced"])
    text = run_vf("plan", STRANDING, "--cluster", cluster)
    assert text.returncode == 0 and "UNKNOWN" in text.stdout
    assert "no node can ever hold it" not in text.stdout
    assert "internal-error" not in text.stderr


def test_a_missing_pods_entry_is_unknown_never_free_a_pod_slot(tmp_path):
    def mutate(by_name, nodes, pods):
        for item in by_name.values():
            item["status"]["allocatable"].pop("pods")
            item["status"].get("capacity", {}).pop("pods", None)

    result = run_vf("plan", STRANDING, "--cluster", _two_4gpu_with(tmp_path, mutate))
    assert result.returncode == 0, result.stderr
    assert "UNKNOWN" in result.stdout
    assert "pod slot" not in result.stdout
    assert "no pods entry" in result.stdout


def test_pods_bound_to_a_node_missing_from_the_dump_are_named(tmp_path):
    def mutate(by_name, nodes, pods):
        pods["items"].append(
            {
                "kind": "Pod",
                "metadata": {"namespace": "ml", "name": "orphan"},
                "spec": {"nodeName": "gpu-z", "containers": [{"name": "c"}]},
                "status": {"phase": "Running"},
            }
        )

    result = run_vf("plan", STRANDING, "--cluster", _two_4gpu_with(tmp_path, mutate), "--json")
    doc = one_json_document(result)
    assert doc["verdict"] == "fits"  # it fits on the nodes that were read
    (note,) = [u for u in doc["unknown"] if u["what"] == "node/gpu-z"]
    assert "pod/ml/orphan" in note["reason"] and "not in the node list" in note["reason"]


def test_the_nodes_table_shows_one_unit_per_resource(tmp_path):
    def mutate(by_name, nodes, pods):
        by_name["gpu-a"]["status"]["allocatable"]["memory"] = "191100000Ki"
        by_name["gpu-b"]["status"]["allocatable"]["memory"] = "131674Mi"
        by_name["cpu-1"]["status"]["allocatable"]["cpu"] = "7500m"

    result = run_vf("plan", STRANDING, "--cluster", _two_4gpu_with(tmp_path, mutate))
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("  ")]
    memory = [cell for row in rows if len(row) == 6 and row[1] == "memory" for cell in row[2:]]
    cpu = [cell for row in rows if len(row) == 6 and row[1] == "cpu" for cell in row[2:]]
    assert memory and all(re.fullmatch(r"\d+\.\dGi", cell) for cell in memory), memory
    assert "182.2Gi" in memory and "128.6Gi" in memory
    assert cpu and all(re.fullmatch(r"\d+(\.\d+)?", cell) for cell in cpu), cpu
    assert "7.5" in cpu


def test_an_unknown_plan_says_what_is_unknown_and_why_not_a_solver_status() -> None:
    result = run_vf("plan", REPO / "examples/traffic.py", "--cluster", CLUSTERS / "refused-pods")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("exclusive mode: UNKNOWN")
    assert lines[1].startswith("  unknown: pods: the API refused the pod listing: Forbidden")
    assert "on the nodes whose state is known: 0 of 10 pod(s) placed" in lines[2]
    assert "INFEASIBLE" not in result.stdout and "solver:" not in result.stdout
    (sched,) = [line for line in lines if line.startswith("kube-scheduler model")]
    assert "unknown occupancy" in sched and "may be left Pending" in sched
    assert "(stranded:" not in sched
