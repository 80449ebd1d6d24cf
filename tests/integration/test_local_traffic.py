"""The flagship example, examples/traffic/: explain, plan on its bundled cluster, run.

This is what ``make run`` shows. The run uses torch when it is installed (on
the CPU here: the host has no GPU) and numpy otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from vfcore import partition_of

REPO = Path(__file__).resolve().parents[2]
FLOW = REPO / "examples" / "traffic" / "flow.py"
CLUSTER = REPO / "examples" / "traffic" / "cluster"
VF = Path(sys.executable).parent / "vf"


def vf(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VF), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_the_flagship_is_valid_and_fits_its_bundled_cluster(tmp_path: Path) -> None:
    done = vf("explain", str(FLOW), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["valid"] and not doc["issues"]
    assert doc["gpu_demand"]["total"] == {"nvidia.com/gpu": 3}
    done = vf("plan", str(FLOW), "--cluster", str(CLUSTER), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["verdict"] == "fits"
    assert plan["scheduler"]["verdict"] == "lands"


@pytest.mark.slow
def test_the_flagship_runs_end_to_end(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    done = vf("run", str(FLOW), "--json", cwd=tmp_path, env={"TRAFFIC_EVENTS": str(events)})
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["status"] == "completed"
    assert doc["duration_s"] < 60
    assert doc["dead_letters"] == 0
    assert {n: v["processed"] for n, v in doc["nodes"].items()} == {
        "cameras": 240,
        "decode": 240,
        "detector": 240,
        "pose": 240,
        "tracker": 240,
        "fuse": 240,
        "events": 240,
    }
    assert doc["gpu"]["status"] == "cpu-fallback"  # no GPU here: one warning, CPU
    assert done.stderr.count("no GPU on this host") == 1
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert len(lines) == 240
    assert len({e["trace_id"] for e in lines}) == 240
    assert Counter(e["camera"] for e in lines) == {f"cam-{c}": 60 for c in range(4)}
    for event in lines:
        assert event["fused_by"] == partition_of(event["trace_id"], 2)
        assert len(event["vehicles"]) == 3  # three cars per frame, every frame
        for v in event["vehicles"]:
            assert v["track"].startswith(event["camera"] + "/")
            assert len(v["keypoints"]) == 8
