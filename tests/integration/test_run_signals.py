"""`vf run` under the signals that stop real runs: SIGTERM to the group, to vf alone, `timeout`.

``timeout``, systemd, Kubernetes and CI cancellation send SIGTERM to every
process of the group, workers and fork server included. Each test starts
``vf run --json`` in its own session (so its process group holds exactly the
run's processes), signals it from outside, and checks what a user relies on:
status ``stopped`` and exit 130, every item the producer made consumed exactly
once (the drain finishes: the nodes are fast) or reported as not processed, no
process of the group left running, and none of the run's files left in
``/dev/shm``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.flows import VF, read_lines, write_flow
from tests.support.processes import group_members, run_files, start, wait_until, with_group_killed

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def children_of(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            if int(text[text.rindex(")") + 2 :].split()[1]) == pid:
                out.add(int(entry.name))
    return out


def endless_flow(tmp_path: Path, out: Path) -> Path:
    """An endless BATCH producer → two competing replicas → a sink recording every item."""
    return write_flow(
        tmp_path,
        f"""
        src = Numbers(None, name="src", sleep=0.0005)
        work = Tag("w", name="work", nb_tasks=2)(src)
        flow = Flow([Record({str(out)!r}, name="sink")(work)], flow_type=BATCH)
        """,
    )


def assert_stopped_cleanly(
    proc: subprocess.Popen[str], stdout: str, stderr: str, out: Path, coordinator: int
) -> dict[str, Any]:
    assert proc.returncode == 130, (proc.returncode, stderr)
    assert "Traceback" not in stderr and "internal-error" not in stderr, stderr
    doc = json.loads(stdout)
    assert doc["status"] == "stopped", doc
    assert doc["error"] is None
    nodes = doc["nodes"]
    assert nodes["work"]["restarts"] == 0 and doc["redelivered"] == 0  # no worker died
    produced = nodes["src"]["processed"]
    assert produced > 0
    consumed = Counter(item["x"] for item in read_lines(out))
    assert max(consumed.values()) == 1  # nothing twice
    not_processed = nodes["work"]["backlog"] + nodes["sink"]["backlog"]
    # every item made is consumed once, or reported as not processed (a drain cut short)
    assert set(consumed) <= set(range(produced))
    assert len(consumed) + not_processed == produced, (len(consumed), not_processed, produced)
    if doc["stop"]["how"] == "drained":
        assert set(consumed) == set(range(produced))
    assert nodes["sink"]["processed"] == len(consumed)
    wait_until(lambda: not group_members(proc.pid), 10, "every process of the group to exit")
    wait_until(
        lambda: not run_files(coordinator), 5, f"/dev/shm to be clean: {run_files(coordinator)}"
    )
    return doc


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_sigterm_to_the_whole_group_drains_and_stops_like_ctrl_c(
    tmp_path: Path, start_method: str
) -> None:
    out = tmp_path / "out.jsonl"
    flow = endless_flow(tmp_path, out)
    proc = start([str(VF), "run", str(flow), "--json", "--start-method", start_method], tmp_path)
    try:
        wait_until(lambda: out.exists() and out.stat().st_size > 2000, 30, "progress")
        assert len(group_members(proc.pid)) >= 5  # vf, the fork server/tracker, 4 replicas
        os.killpg(proc.pid, signal.SIGTERM)  # what systemd and Kubernetes send
        stdout, stderr = proc.communicate(timeout=40)
    finally:
        with_group_killed(proc)
    doc = assert_stopped_cleanly(proc, stdout, stderr, out, proc.pid)
    assert doc["stop"] == {"how": "drained", "signal": "SIGTERM"}
    assert "died" not in stderr  # no replica died of the group's signal


def test_sigterm_to_the_coordinator_alone_drains_and_stops(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = start([str(VF), "run", str(endless_flow(tmp_path, out)), "--json"], tmp_path)
    try:
        wait_until(lambda: out.exists() and out.stat().st_size > 2000, 30, "progress")
        os.kill(proc.pid, signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=40)
    finally:
        with_group_killed(proc)
    doc = assert_stopped_cleanly(proc, stdout, stderr, out, proc.pid)
    assert doc["stop"] == {"how": "drained", "signal": "SIGTERM"}


def test_one_signal_delivered_twice_is_one_stop_request(tmp_path: Path) -> None:
    """GNU timeout signals vf, then vf's whole group: vf may see its SIGTERM twice, a few
    ms apart on a loaded machine. That is one request (a drain), not a second Ctrl-C."""
    out = tmp_path / "out.jsonl"
    proc = start([str(VF), "run", str(endless_flow(tmp_path, out)), "--json"], tmp_path)
    try:
        wait_until(lambda: out.exists() and out.stat().st_size > 2000, 30, "progress")
        os.kill(proc.pid, signal.SIGTERM)
        time.sleep(0.02)  # the first one handled before the second arrives
        os.kill(proc.pid, signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=40)
    finally:
        with_group_killed(proc)
    doc = assert_stopped_cleanly(proc, stdout, stderr, out, proc.pid)
    assert doc["stop"] == {"how": "drained", "signal": "SIGTERM"}


def test_timeout_ends_a_batch_run_as_a_clean_stop(tmp_path: Path) -> None:
    """`timeout 3 vf run …`: timeout signals its whole group (itself, vf, every worker)."""
    out = tmp_path / "out.jsonl"
    flow = endless_flow(tmp_path, out)
    proc = start(
        ["timeout", "--preserve-status", "3", str(VF), "run", str(flow), "--json"], tmp_path
    )
    try:
        wait_until(lambda: children_of(proc.pid), 10, "timeout to start vf")
        (vf,) = children_of(proc.pid)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        with_group_killed(proc)
    doc = assert_stopped_cleanly(proc, stdout, stderr, out, vf)
    assert doc["stop"] == {"how": "drained", "signal": "SIGTERM"}


def test_a_process_a_node_starts_does_not_inherit_ignored_signals(tmp_path: Path) -> None:
    """Workers never die of SIGTERM, yet what they start (ffmpeg, a server) may."""
    child_pid = tmp_path / "child.pid"
    flow = write_flow(
        tmp_path,
        f"""
        import subprocess

        class Starts(ProducerNode):
            def open(self):
                self.child = subprocess.Popen(["sleep", "60"])
                with open({str(child_pid)!r}, "w") as f:
                    f.write(str(self.child.pid))

            def next(self):
                time.sleep(0.01)
                return 1

            def close(self):
                self.child.kill()
                self.child.wait()

        flow = Flow([Record(os.devnull, name="sink")(Starts(name="src"))], flow_type=BATCH)
        """,
    )
    proc = start([str(VF), "run", str(flow), "--json"], tmp_path)
    try:
        wait_until(lambda: child_pid.exists() and child_pid.read_text(), 30, "the node's child")
        status = Path(f"/proc/{int(child_pid.read_text())}/status").read_text()
        ignored = int(
            next(x for x in status.splitlines() if x.startswith("SigIgn:")).split()[1], 16
        )
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        with_group_killed(proc)
    assert proc.returncode == 130
    assert not ignored & (1 << (signal.SIGTERM - 1)), hex(ignored)
    assert not ignored & (1 << (signal.SIGINT - 1)), hex(ignored)
