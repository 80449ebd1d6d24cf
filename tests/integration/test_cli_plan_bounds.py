"""``vf plan`` as a real process on a heterogeneous GPU pool: --time-limit bounds every phase,
a cut-short phase is named, and the phases appear on a terminal only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from clusters import empty_pods, gpu_flow, gpu_pool

LIMITED = ("--json", "--time-limit", "0.001")
VF = [sys.executable, "-c", "from vfadapters.cli import main; raise SystemExit(main())"]


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("pool")
    (where / "cluster").mkdir()
    (where / "cluster" / "nodes.json").write_text(json.dumps(gpu_pool(120, cpu_nodes=1)))
    (where / "cluster" / "pods.json").write_text(json.dumps(empty_pods()))
    (where / "flow.json").write_text(gpu_flow(120).to_json())
    return where


def test_a_time_limit_cuts_the_scheduler_phases_and_never_lands(pool: Path) -> None:
    done = subprocess.run(
        [*VF, "plan", str(pool / "flow.json"), "--cluster", str(pool / "cluster"), *LIMITED],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    sched = json.loads(done.stdout)["scheduler"]
    assert "scheduler model" in sched["cut_short"]
    assert sched["verdict"] in ("at-risk", "unknown")
    assert sched["verdict_with_remedy"] != "lands"
    assert not sched["exhaustive"] and "bounded search" in sched["reason"]
    assert "planning:" not in done.stderr  # stderr is a pipe: no progress display


def test_a_bounded_plan_beyond_the_scan_window_is_at_risk_and_says_why(pool: Path) -> None:
    done = subprocess.run(
        [*VF, "plan", str(pool / "flow.json"), "--cluster", str(pool / "cluster")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if "kube-scheduler model" in line)
    assert header.endswith(": at-risk")
    assert "rather than lands" in done.stdout


def test_the_phases_show_on_a_terminal(pool: Path) -> None:
    master, slave = os.openpty()
    try:
        proc = subprocess.run(
            [*VF, "plan", str(pool / "flow.json"), "--cluster", str(pool / "cluster"), "--json"],
            stdout=subprocess.PIPE,
            stderr=slave,
            env={**os.environ, "VF_PROGRESS_AFTER_S": "0", "TERM": "xterm"},
            timeout=120,
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    shown = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0
    assert "planned in" in shown
    for phase in ("parse", "exact plan", "scheduler model"):
        assert phase in shown
    json.loads(proc.stdout)  # stdout stays one JSON document
