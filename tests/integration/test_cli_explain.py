"""`vf explain` end to end: real subprocesses, real files, the contract in docs/cli.md.

Exit codes: 0 ok, 2 usage error or invalid input. ``--json`` prints exactly one
JSON document on stdout. Bad input is reported as ``error: <rule>`` with a
hint, never a traceback.
"""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import vfcore
from tests.integration.cli_helpers import assert_bad_input, one_json_document, run_vf

REPO = Path(__file__).resolve().parents[2]
TRAFFIC = REPO / "examples" / "traffic.py"
VF_SCRIPT = Path(sys.executable).parent / "vf"
TRAFFIC_REPLICAS = {"frames": 1, "detector": 4, "plates": 2, "tracker": 2, "report": 1}

# A minimal vocabulary for flow files written into tmp_path.
PREAMBLE = """\
from vfcore import BATCH, REALTIME, ConsumerNode, Flow, ProcessorNode, ProducerNode


class Src(ProducerNode):
    def next(self):
        raise StopIteration


class Step(ProcessorNode):
    def process(self, item):
        return item


class Pair(ProcessorNode):
    def process(self, left, right):
        return (left, right)


class Sink(ConsumerNode):
    def consume(self, item):
        pass
"""

CHAIN = """
def chain(name=None):
    src = Src(name="cams")
    det = Step(name="det", nb_tasks=3, device_type="gpu", gpu_count=2)(src)
    return Flow([Sink(name="out")(det)], flow_type=BATCH, name=name)
"""


def write_flow(tmp_path: Path, name: str, body: str, *, preamble: bool = True) -> Path:
    path = tmp_path / name
    path.write_text((PREAMBLE if preamble else "") + textwrap.dedent(body), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def traffic_json() -> dict[str, Any]:
    """`vf explain examples/traffic.py --json` through the installed console script."""
    result = run_vf("explain", TRAFFIC, "--json", script=True)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return one_json_document(result)


# -- the example flow ----------------------------------------------------------


def test_text_explain_of_the_example_names_every_node_and_the_demand() -> None:
    result = run_vf("explain", TRAFFIC)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("flow traffic (batch): valid")
    for node in TRAFFIC_REPLICAS:
        assert node in out
    assert "nvidia.com/gpu: 4 in total" in out
    assert "declared VRAM: 40 GiB in total" in out
    assert "largest pod: detector/0 needs 1 nvidia.com/gpu on one host" in out
    assert "Traceback" not in result.stderr


def test_json_explain_has_the_design_shape(traffic_json: dict[str, Any]) -> None:
    doc = traffic_json
    assert {"flow", "valid", "issues", "nodes", "gpu_demand", "autoscaling"} <= doc.keys()
    assert doc["flow"] == {"name": "traffic", "flow_type": "batch"}
    assert doc["valid"] is True
    assert doc["issues"] == []
    for node in doc["nodes"]:
        assert {"name", "kind", "replicas", "workload"} <= node.keys()
        assert node["workload"] in ("deployment", "statefulset", "job")
    demand = doc["gpu_demand"]
    assert {"mode", "total", "largest_pod", "pods"} <= demand.keys()
    for pod in demand["pods"]:
        assert {"pod", "claims"} <= pod.keys()
    assert set(doc["autoscaling"]) == set(TRAFFIC_REPLICAS)
    for item in doc["autoscaling"].values():
        assert isinstance(item["eligible"], bool)
        assert all(isinstance(r, str) for r in item["reasons"])


def test_json_explain_of_the_example_has_its_numbers(traffic_json: dict[str, Any]) -> None:
    nodes = {n["name"]: n for n in traffic_json["nodes"]}
    assert [n["name"] for n in traffic_json["nodes"]] == list(nodes)
    assert {name: n["replicas"] for name, n in nodes.items()} == TRAFFIC_REPLICAS
    assert nodes["detector"]["kind"] == "processor"
    assert nodes["tracker"]["kind"] == "one-task-processor"
    assert {n["workload"] for n in nodes.values()} == {"job"}  # BATCH: every node is a Job

    demand = traffic_json["gpu_demand"]
    assert demand["mode"] == "exclusive"
    assert demand["total"] == {"nvidia.com/gpu": 4}
    assert demand["largest_pod"] == {"nvidia.com/gpu": 1}
    assert [p["pod"] for p in demand["pods"]] == [f"detector/{i}" for i in range(4)]
    assert all(p["claims"] == {"nvidia.com/gpu": 1} for p in demand["pods"])

    # BATCH nodes are Jobs: nothing autoscales, and each says why.
    autoscaling = traffic_json["autoscaling"]
    assert not any(item["eligible"] for item in autoscaling.values())
    assert all(item["reasons"] for item in autoscaling.values())


def test_module_entry_point_and_console_script_print_the_same_json(
    traffic_json: dict[str, Any],
) -> None:
    result = run_vf("explain", TRAFFIC, "--json")
    assert result.returncode == 0, result.stderr
    assert one_json_document(result) == traffic_json


def test_shared_mode_claims_no_units_and_sums_vram() -> None:
    result = run_vf("explain", TRAFFIC, "--gpu-mode", "shared", "--json")
    assert result.returncode == 0, result.stderr
    demand = one_json_document(result)["gpu_demand"]
    assert demand["mode"] == "shared"
    assert demand["total"] == {}
    assert demand["largest_pod"] == {}
    assert demand["total_gpu_memory_gib"] == 40
    assert len(demand["pods"]) == 4
    assert all(p["claims"] == {} for p in demand["pods"])


def test_shared_mode_text_reports_vram_and_no_units() -> None:
    result = run_vf("explain", TRAFFIC, "--gpu-mode", "shared")
    assert result.returncode == 0, result.stderr
    assert "gpu demand (shared mode)" in result.stdout
    assert "declared VRAM: 40 GiB in total" in result.stdout
    assert "nvidia.com/gpu: 4 in total" not in result.stdout


def test_mix_mode_puts_memory_sized_pods_on_mig_slices() -> None:
    result = run_vf("explain", TRAFFIC, "--gpu-mode", "mix", "--json")
    assert result.returncode == 0, result.stderr
    demand = one_json_document(result)["gpu_demand"]
    assert demand["mode"] == "mix"
    assert demand["total"] == {}
    assert [p["slice"] for p in demand["pods"]] == ["mig"] * 4


def test_gpu_resource_name_renames_the_claimed_resource(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, "chain.py", CHAIN + "\nflow = chain('chain')\n")
    result = run_vf("explain", flow, "--gpu-resource-name", "amd.com/gpu", "--json")
    assert result.returncode == 0, result.stderr
    demand = one_json_document(result)["gpu_demand"]
    assert demand["total"] == {"amd.com/gpu": 6}
    assert demand["largest_pod"] == {"amd.com/gpu": 2}


# -- invalid flows ---------------------------------------------------------------

REPLICATED_JOIN = """
src = Src(name="cams")
left = Step(name="left")(src)
right = Step(name="right")(src)
pair = Pair(name="pair", nb_tasks=3)(left, right)
flow = Flow([Sink(name="out")(pair)], flow_type=REALTIME, name="joined")
"""


def test_replicated_join_without_partition_exits_2_naming_the_rule(tmp_path: Path) -> None:
    result = run_vf("explain", write_flow(tmp_path, "join.py", REPLICATED_JOIN))
    assert result.returncode == 2, result.stderr
    assert "INVALID" in result.stdout
    assert "error: replicated-join-unpartitioned (pair)" in result.stdout
    assert "Traceback" not in result.stderr


def test_replicated_join_json_is_invalid_with_the_issue(tmp_path: Path) -> None:
    result = run_vf("explain", write_flow(tmp_path, "join.py", REPLICATED_JOIN), "--json")
    assert result.returncode == 2, result.stderr
    doc = one_json_document(result)
    assert doc["valid"] is False
    assert doc["flow"] == {"name": "joined", "flow_type": "realtime"}
    issue = next(i for i in doc["issues"] if i["rule"] == "replicated-join-unpartitioned")
    assert issue["severity"] == "error"
    assert issue["node"] == "pair"
    assert issue["message"] and issue["hint"]
    assert {n["name"]: n["replicas"] for n in doc["nodes"]}["pair"] == 3


def test_autoscaling_a_batch_flow_is_an_error() -> None:
    result = run_vf("explain", TRAFFIC, "--autoscaling", "--json")
    assert result.returncode == 2, result.stderr
    doc = one_json_document(result)
    assert doc["valid"] is False
    assert [i["rule"] for i in doc["issues"] if i["severity"] == "error"] == [
        "autoscaling-batch-flow"
    ]
    assert "Traceback" not in result.stderr


def test_invalid_node_parameter_in_the_file_is_reported_not_raised(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, "zero.py", 'det = Step(name="det", nb_tasks=0)\n')
    result = run_vf("explain", flow)
    assert_bad_input(result, "invalid-parameter (det)")
    assert "nb_tasks=0" in result.stderr


def test_invalid_node_parameter_with_json_prints_one_error_document(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, "zero.py", 'det = Step(name="det", nb_tasks=0)\n')
    result = run_vf("explain", flow, "--json")
    assert_bad_input(result, "invalid-parameter")
    doc = one_json_document(result)
    assert doc["error"]["rule"] == "invalid-parameter"
    assert "nb_tasks=0" in doc["error"]["message"]
    assert doc["valid"] is False
    assert [(i["rule"], i["node"]) for i in doc["issues"]] == [("invalid-parameter", "det")]


# -- loading: files, variables, factories ---------------------------------------


def test_missing_file_is_reported_without_a_traceback(tmp_path: Path) -> None:
    result = run_vf("explain", tmp_path / "nope.py")
    assert_bad_input(result, "flow-file-not-found")
    assert "nope.py" in result.stderr
    assert result.stdout == ""


def test_missing_file_with_json_prints_one_error_document(tmp_path: Path) -> None:
    result = run_vf("explain", tmp_path / "nope.py", "--json")
    assert_bad_input(result, "flow-file-not-found")
    error = one_json_document(result)["error"]
    assert error["rule"] == "flow-file-not-found"
    assert "nope.py" in error["message"]
    assert error["hint"]


def test_file_raising_at_import_names_the_exception_and_line(tmp_path: Path) -> None:
    flow = write_flow(
        tmp_path,
        "raises.py",
        'import json\n\nx = 1\nraise RuntimeError("camera feed offline")\n',
        preamble=False,
    )
    result = run_vf("explain", flow)
    assert_bad_input(result, "flow-file-raised")
    assert "RuntimeError: camera feed offline" in result.stderr
    assert "(line 4)" in result.stderr


def test_file_with_a_syntax_error_names_the_line(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, "syntax.py", "x = 1\ny = (\n", preamble=False)
    result = run_vf("explain", flow)
    assert_bad_input(result, "flow-file-raised")
    assert "syntax error at line 2" in result.stderr


def test_file_without_a_flow_variable(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, "noflow.py", "something_else = 1\n")
    result = run_vf("explain", flow)
    assert_bad_input(result, "flow-variable-missing")
    assert "no `flow` variable" in result.stderr


def test_flow_variable_of_the_wrong_type(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, "wrongtype.py", 'flow = Sink(name="out")\n')
    result = run_vf("explain", flow)
    assert_bad_input(result, "flow-variable-invalid")
    assert "Sink" in result.stderr


def test_factory_builds_the_flow_and_an_unnamed_flow_takes_the_file_stem(
    tmp_path: Path,
) -> None:
    flow = write_flow(tmp_path, "cams.py", CHAIN)
    result = run_vf("explain", f"{flow}:chain", "--json")
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    assert doc["flow"] == {"name": "cams", "flow_type": "batch"}
    assert doc["gpu_demand"]["total"] == {"nvidia.com/gpu": 6}
    assert doc["gpu_demand"]["largest_pod"] == {"nvidia.com/gpu": 2}


def test_factory_of_the_example_through_the_console_script() -> None:
    result = run_vf("explain", f"{TRAFFIC}:build", script=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("flow traffic (batch): valid")


def test_missing_factory(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, "cams.py", CHAIN)
    result = run_vf("explain", f"{flow}:make_flow")
    assert_bad_input(result, "flow-factory-missing")
    assert "'make_flow'" in result.stderr


def test_factory_raising_names_the_exception_and_line(tmp_path: Path) -> None:
    body = 'def make():\n    raise KeyError("no camera")\n'
    flow = write_flow(tmp_path, "boom.py", body, preamble=False)
    result = run_vf("explain", f"{flow}:make")
    assert_bad_input(result, "flow-factory-raised")
    assert "KeyError: 'no camera'" in result.stderr
    assert "(line 2)" in result.stderr


def test_factory_returning_a_non_flow(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, "fortytwo.py", "def make():\n    return 42\n", preamble=False)
    result = run_vf("explain", f"{flow}:make")
    assert_bad_input(result, "flow-factory-invalid")
    assert "int" in result.stderr


# -- FlowSpec JSON files ------------------------------------------------------------


def test_spec_json_explains_like_the_flow_it_came_from(
    tmp_path: Path, traffic_json: dict[str, Any]
) -> None:
    spec = runpy.run_path(str(TRAFFIC))["flow"].spec()
    assert isinstance(spec, vfcore.FlowSpec)
    path = tmp_path / "traffic.json"
    path.write_text(spec.to_json(), encoding="utf-8")
    result = run_vf("explain", path, "--json")
    assert result.returncode == 0, result.stderr
    assert one_json_document(result) == traffic_json


def test_hand_written_spec_with_an_unreachable_consumer(tmp_path: Path) -> None:
    spec = {
        "name": "orphaned",
        "flow_type": "realtime",
        "nodes": [
            {"name": "cams", "kind": "producer"},
            {"name": "out", "kind": "consumer", "parents": ["cams"]},
            {"name": "lonely", "kind": "processor"},
            {"name": "nowhere", "kind": "consumer", "parents": ["lonely"]},
        ],
    }
    path = tmp_path / "orphaned.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    result = run_vf("explain", path, "--json")
    assert result.returncode == 2, result.stderr
    doc = one_json_document(result)
    assert doc["valid"] is False
    found = {(i["rule"], i["node"]) for i in doc["issues"]}
    assert ("unreachable-consumer", "nowhere") in found
    assert ("root-not-producer", "lonely") in found
    assert ("unreachable-consumer", "out") not in found
    assert "Traceback" not in result.stderr


def test_malformed_spec_json_is_invalid_spec(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"name": "x", "nodes": [\n', encoding="utf-8")
    result = run_vf("explain", path, "--json")
    assert_bad_input(result, "invalid-spec")
    doc = one_json_document(result)
    assert doc["error"]["rule"] == "invalid-spec"
    assert "not JSON" in doc["error"]["message"]
    assert doc["valid"] is False


# -- usage ------------------------------------------------------------------------


def test_unknown_gpu_mode_is_a_usage_error() -> None:
    result = run_vf("explain", TRAFFIC, "--gpu-mode", "bogus")
    assert_bad_input(result, "usage")
    assert "invalid choice: 'bogus'" in result.stderr
    assert result.stdout == ""


def test_no_command_is_a_usage_error() -> None:
    result = run_vf(script=True)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "usage: vf" in result.stderr
    assert "Traceback" not in result.stderr


def test_version() -> None:
    result = run_vf("--version", script=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"vf {vfcore.__version__}\n"


# -- regressions ----------------------------------------------------------------


def test_prints_in_the_flow_file_do_not_corrupt_json(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, "chatty.py", CHAIN + '\nprint("building")\nflow = chain("x")\n')
    result = run_vf("explain", flow, "--json")
    assert result.returncode == 0, result.stderr
    assert one_json_document(result)["flow"]["name"] == "x"


def test_non_finite_gpu_memory_in_a_spec_is_invalid_input(tmp_path: Path) -> None:
    path = tmp_path / "nan.json"
    path.write_text(
        '{"name": "f", "nodes": [{"name": "s", "kind": "producer"},'
        ' {"name": "d", "kind": "processor", "parents": ["s"], "device_type": "gpu",'
        ' "gpu_memory_gib": NaN}, {"name": "c", "kind": "consumer", "parents": ["d"]}]}',
        encoding="utf-8",
    )
    result = run_vf("explain", path, "--json")
    assert result.returncode == 2, result.stderr
    assert "internal-error" not in result.stderr
    assert any(i["rule"] == "invalid-spec" for i in one_json_document(result)["issues"])
    assert "non-finite number NaN" in result.stderr


def test_a_reader_that_goes_away_stops_vf_quietly(tmp_path: Path) -> None:
    """`vf explain big.py --json | head -1`: no traceback, no internal-error."""
    lines = ["from vfcore import ConsumerNode, Flow, ProcessorNode, ProducerNode"]
    lines += [
        "class S(ProducerNode):\n    def next(self): ...",
        "class P(ProcessorNode):\n    def process(self, x): ...",
        "class C(ConsumerNode):\n    def consume(self, x): ...",
        "node = S(name='src')",
    ]
    lines += [f"node = P(name='step-{i}')(node)" for i in range(400)]
    lines.append("flow = Flow([C(name='sink')(node)])")
    flow = write_flow(tmp_path, "big.py", "\n".join(lines) + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vfadapters.cli", "explain", str(flow), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().strip() == b"{"
    proc.stdout.close()  # the reader goes away long before the ~200 KB document is written
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=30)
    assert "Traceback" not in stderr
    assert "internal-error" not in stderr
