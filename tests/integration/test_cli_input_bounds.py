"""Bounded input and a clean exit (issue 10, items 8 and 10): real `vf` processes, real files.

What a user really feeds `vf` — a dump that never ends, a spec with ``"10Gi"``
where a number belongs, a document nested 100,000 levels deep, a flow file
that starts a thread or calls ``sys.exit`` — ends in ``error: <id>`` with exit
2, quickly, never in a traceback, a hang or gigabytes of memory.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.integration.cli_helpers import REPO, assert_bad_input, one_json_document, run_vf

TRAFFIC = REPO / "examples" / "traffic.py"
CLUSTER = REPO / "examples" / "clusters" / "two-4gpu"
OBSERVATIONS = REPO / "examples" / "observations.json"
SCALING_FLOW = REPO / "examples" / "realtime_scaling.py"


def _spec(tmp_path: Path, **gpu_fields: object) -> Path:
    """examples/traffic.py as a spec.json, with ``gpu_fields`` set on its GPU nodes."""
    sys.path.insert(0, str(REPO / "examples"))
    try:
        from vfadapters.loading import load_flow

        flow = load_flow(str(TRAFFIC))
    finally:
        sys.path.remove(str(REPO / "examples"))
    doc = flow.spec().to_dict()  # type: ignore[union-attr]
    for node in doc["nodes"]:
        if node["device_type"] == "gpu":
            node.update(gpu_fields)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_string_where_a_number_belongs_is_an_invalid_spec_naming_node_and_field(tmp_path):
    spec = _spec(tmp_path, gpu_memory_gib="10Gi")
    for command in (["explain"], ["plan", "--cluster", CLUSTER]):
        result = run_vf(*command, spec)
        assert_bad_input(result, "invalid-spec (detector)")
        assert "field 'gpu_memory_gib' must be a number of GiB or null" in result.stderr
        assert "the string '10Gi'" in result.stderr
        assert result.stdout == ""  # no half report before the error
    result = run_vf("explain", spec, "--json")
    assert one_json_document(result)["error"]["rule"] == "invalid-spec"


def test_ten_million_replicas_on_a_gpu_node_is_refused_at_once(tmp_path):
    spec = _spec(tmp_path, nb_tasks=10**7)
    started = time.monotonic()
    explained = run_vf("explain", spec)
    planned = run_vf("plan", spec, "--cluster", CLUSTER)
    assert time.monotonic() - started < 60  # it used to take minutes and gigabytes
    assert explained.returncode == 2
    assert "error: invalid-parameter (detector)" in explained.stdout
    assert "over the limit of 10000 replicas per node" in explained.stdout
    assert_bad_input(planned, "invalid-parameter (detector)")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_cluster_dump_that_never_ends_stops_at_the_limit():
    env_limit = {"VF_MAX_INPUT_MIB": "4"}  # the 512 MiB default works the same, only slower
    result = _run_with_env(env_limit, "plan", TRAFFIC, "--cluster", "/dev/zero")
    assert_bad_input(result, "input-too-large")
    assert "/dev/zero goes on past the limit, more than the 4 MiB" in result.stderr
    result = _run_with_env({}, "plan", TRAFFIC, "--cluster", "/dev/zero")
    assert_bad_input(result, "input-too-large")
    assert "512 MiB vf reads from one cluster file" in result.stderr


def test_spec_and_observations_over_the_limit_are_refused_by_size(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (2 * 1024 * 1024 + 1))
    result = _run_with_env({"VF_MAX_INPUT_MIB": "2"}, "explain", big)
    assert_bad_input(result, "input-too-large")
    assert "holds 2 MiB, more than the 2 MiB vf reads from a flow spec" in result.stderr
    result = _run_with_env({"VF_MAX_INPUT_MIB": "2"}, "scale", SCALING_FLOW, "--observations", big)
    assert_bad_input(result, "input-too-large")
    result = _run_with_env({"VF_MAX_INPUT_MIB": "lots"}, "explain", big)
    assert_bad_input(result, "invalid-input-limit")


def test_documents_nested_100k_levels_deep_are_named_errors(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert_bad_input(run_vf("explain", deep), "invalid-spec")
    result = run_vf("scale", SCALING_FLOW, "--observations", deep)
    assert_bad_input(result, "invalid-observations")
    assert "nested too deeply" in result.stderr
    digits = tmp_path / "digits.json"
    digits.write_text('{"detector": {"current": ' + "9" * 5001 + ', "parents": {}}}')
    assert_bad_input(
        run_vf("scale", SCALING_FLOW, "--observations", digits), "invalid-observations"
    )


def test_a_factory_or_module_calling_sys_exit_is_a_named_error(tmp_path):
    factory = tmp_path / "fact.py"
    factory.write_text("import sys\n\n\ndef make():\n    sys.exit(5)\n")
    result = run_vf("explain", f"{factory}:make")
    assert_bad_input(result, "flow-file-exited")
    assert "make() called sys.exit(5) (line 5)" in result.stderr
    module = tmp_path / "quits.py"
    module.write_text("import sys\nsys.exit('no cameras configured')\n")
    result = run_vf("plan", module, "--cluster", CLUSTER)
    assert_bad_input(result, "flow-file-exited")
    assert "called sys.exit(1) (no cameras configured) (line 2)" in result.stderr


def test_a_flow_that_leaves_a_thread_running_does_not_keep_vf_alive(tmp_path):
    flow = tmp_path / "thready.py"
    flow.write_text(
        "import sys, threading, time\n"
        f"sys.path.insert(0, {str(REPO / 'examples')!r})\n"
        "threading.Thread(target=time.sleep, args=(3600,)).start()\n"
        "import atexit\n"
        "atexit.register(time.sleep, 3600)\n"
        "from traffic import flow\n"
    )
    for script in (True, False):  # the installed console script and python -m
        started = time.monotonic()
        result = run_vf("explain", flow, "--json", script=script)
        assert time.monotonic() - started < 60
        assert result.returncode == 0, result.stderr
        assert one_json_document(result)["valid"] is True


def _run_with_env(extra: dict[str, str], *args: object):
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("VF_DEBUG", "VF_MAX_INPUT_MIB")}
    env.update(extra)
    return subprocess.run(
        [sys.executable, "-m", "vfadapters.cli", *map(str, args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# -- numbers past a float (issue 23) ----------------------------------------------------------


def test_numbers_past_a_float_in_a_spec_are_named_not_overflowed(tmp_path):
    huge = 10**400
    spec = _spec(tmp_path, gpu_memory_gib=huge)
    text = run_vf("explain", spec)  # the text report of an invalid flow shows the node too
    assert text.returncode == 2 and "internal-error" not in text.stderr, text.stderr
    assert "gpu_memory_gib=an integer of 401 digits must be a number > 0" in text.stdout
    assert "Traceback" not in text.stdout + text.stderr
    for count in (10**30, huge, 1025):
        spec = _spec(tmp_path, gpu_count=count)
        for command in (["explain"], ["plan", "--cluster", REPO / "examples/clusters/mig-idle"]):
            result = run_vf(*command, spec, "--gpu-mode", "mix")
            assert result.returncode == 2, result.stderr
            assert "over the limit of 1,024 GPUs per replica" in result.stdout + result.stderr
            assert "internal-error" not in result.stderr


def test_lags_and_counts_past_what_a_server_reports_are_invalid_observations(tmp_path):
    for field, value, said in (
        ("pending", 10**308, "pending=an integer of 309 digits must be an int, 0 .. 2**64-1"),
        ("ack_pending", 2**64, "ack_pending=18446744073709551616 must be an int, 0 .. 2**64-1"),
        ("current", 10_001, "current=10001 must be a replica count, 0 .. 10,000"),
    ):
        entry = {"current": 2, "parents": {"frames": {"pending": 1, "ack_pending": 0}}}
        if field == "current":
            entry["current"] = value
        else:
            entry["parents"]["frames"][field] = value
        path = tmp_path / f"{field}.json"
        path.write_text(json.dumps({"plates": entry}))
        result = run_vf(
            "scale", SCALING_FLOW, "--observations", path, "--predict-hpa", "--gpu-autoscaling"
        )
        assert_bad_input(result, "invalid-observations")
        assert said in result.stderr
    at_max = tmp_path / "max.json"
    at_max.write_text(
        json.dumps(
            {"plates": {"current": 10_000,
                        "parents": {"frames": {"pending": 2**64 - 1, "ack_pending": 2**64 - 1}}}}
        )
    )  # fmt: skip
    result = run_vf("scale", SCALING_FLOW, "--observations", at_max, "--predict-hpa", "--json")
    assert result.returncode == 0, result.stderr  # the largest counts are answered
    assert one_json_document(result)["decisions"]["plates"]["hpa"]["replicas"] >= 1
    too_many = run_vf(
        "scale", SCALING_FLOW, "--observations", OBSERVATIONS, "--max-replicas", 10**4 + 1
    )
    assert_bad_input(too_many, "invalid-max-replicas")
