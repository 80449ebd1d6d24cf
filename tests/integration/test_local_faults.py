"""The local executor under faults: kill -9 of a replica, Ctrl-C, stuck nodes.

Each test runs ``vf run --json`` as a real subprocess and acts on it from
outside, as a user (or the kernel's OOM killer) would. Orphans are looked
for in ``/proc``: every process descending from ``vf`` is recorded while the
run is live, and none may be left running once ``vf`` has exited.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.flows import read_lines, write_flow

VF = Path(sys.executable).parent / "vf"

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def _stat(pid: int) -> tuple[str, int] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])  # state, ppid


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                children.setdefault(st[1], []).append(int(entry.name))
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def running(pids: set[int]) -> set[int]:
    """Those still running (a zombie waiting for its reaper does not run)."""
    out = set()
    for pid in pids:
        st = _stat(pid)
        if st is not None and st[0] not in ("Z", "X"):
            out.add(pid)
    return out


def wait_until(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def start_vf(flow: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(VF), "run", str(flow), "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=flow.parent,
    )


def assert_no_orphans(seen: set[int]) -> None:
    wait_until(lambda: not running(seen), 5, f"workers {sorted(running(seen))} to exit")


@pytest.mark.slow
def test_kill_9_of_a_replica_loses_nothing_and_counts_duplicates(tmp_path: Path) -> None:
    out, pids = tmp_path / "out.jsonl", tmp_path / "pids"
    pids.mkdir()
    flow = write_flow(
        tmp_path,
        f"""
        src = Numbers(6_000, name="src")
        work = Tag("w", name="work", nb_tasks=2, sleep=0.0005, pid_dir={str(pids)!r})(src)
        flow = Flow([Record({str(out)!r}, name="sink")(work)], flow_type=BATCH)
        """,
    )
    proc = start_vf(flow)
    try:
        wait_until(lambda: len(list(pids.iterdir())) == 2, 20, "both replicas to open")
        wait_until(lambda: out.exists() and len(out.read_text()) > 20_000, 20, "progress")
        seen = descendants(proc.pid)
        victim = int(sorted(pids.iterdir())[0].read_text())
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    doc = json.loads(stdout)
    assert doc["status"] == "completed"
    items = [i["x"] for i in read_lines(out)]
    counts = Counter(items)
    assert set(counts) == set(range(6_000))  # nothing lost
    duplicates = len(items) - 6_000
    work = doc["nodes"]["work"]
    assert work["restarts"] == 1
    assert duplicates <= work["redelivered"] == doc["redelivered"]  # duplicates are counted
    assert len(list(pids.iterdir())) == 3  # the replacement opened once
    assert "restarting it" in stderr
    assert_no_orphans(seen)


@pytest.mark.slow
def test_kill_9_of_a_partitioned_join_replica_loses_no_event(tmp_path: Path) -> None:
    out, pids = tmp_path / "out.jsonl", tmp_path / "pids"
    pids.mkdir()
    flow = write_flow(
        tmp_path,
        f"""
        class SlowJoin(ProcessorNode):
            def open(self):
                with open(os.path.join({str(pids)!r}, str(os.getpid())), "w") as f:
                    f.write(str(os.getpid()))

            def process(self, a, b, ctx):
                time.sleep(0.0005)
                return {{"x": a["x"], "y": b["x"]}}

        src = Numbers(4_000, name="src")
        a = Tag("a", name="a")(src)
        b = Tag("b", name="b", nb_tasks=2)(src)
        join = SlowJoin(name="join", nb_tasks=2, partition_by="trace_id")(a, b)
        flow = Flow([Record({str(out)!r}, name="sink")(join)], flow_type=BATCH)
        """,
    )
    proc = start_vf(flow)
    try:
        wait_until(lambda: len(list(pids.iterdir())) == 2, 20, "both join replicas to open")
        wait_until(lambda: out.exists() and len(out.read_text()) > 5_000, 20, "progress")
        os.kill(int(sorted(pids.iterdir())[0].read_text()), signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    doc = json.loads(stdout)
    items = read_lines(out)
    assert {i["x"] for i in items} == set(range(4_000))  # every event, both halves
    assert all(i["x"] == i["y"] for i in items)
    join = doc["nodes"]["join"]
    assert join["restarts"] == 1
    assert len(items) - 4_000 <= join["redelivered"]
    assert doc["dead_letters"] == 0  # halves of groups emitted before the crash are not losses


def _endless(tmp_path: Path, out: Path, sleep: float = 0.0) -> Path:
    return write_flow(
        tmp_path,
        f"""
        src = Numbers(None, name="src", sleep=0.001)
        work = Tag("w", name="work", nb_tasks=2, sleep={sleep})(src)
        flow = Flow([Record({str(out)!r}, name="sink")(work)], flow_type=BATCH)
        """,
    )


def test_ctrl_c_drains_and_stops_with_no_orphans(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = start_vf(_endless(tmp_path, out))
    try:
        wait_until(lambda: out.exists() and out.stat().st_size > 1000, 20, "progress")
        seen = descendants(proc.pid)
        assert len(seen) >= 4  # the fork server and the four replicas
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    doc = json.loads(stdout)
    assert doc["status"] == "stopped"
    assert doc["stop"]["how"] == "drained"
    assert elapsed < 10 + 3
    produced = doc["nodes"]["src"]["processed"]
    assert produced == doc["nodes"]["sink"]["processed"] == len(read_lines(out))  # all drained
    assert_no_orphans(seen)


@pytest.mark.slow
def test_a_stuck_node_is_stopped_at_the_drain_bound_and_a_second_ctrl_c_is_immediate(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    flow = _endless(tmp_path, out, sleep=0.3)  # each item takes 0.3 s: draining is slow
    proc = start_vf(flow, "--drain-timeout", "1")
    try:
        wait_until(lambda: out.exists(), 20, "progress")
        seen = descendants(proc.pid)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    doc = json.loads(stdout)
    assert doc["status"] == "stopped"
    assert doc["stop"]["how"] in ("drained", "drain-timeout")
    assert elapsed < 1 + 2 + 5  # the drain bound, the close grace, slack for a loaded machine
    assert_no_orphans(seen)

    proc = start_vf(flow)  # the default 10 s drain; a second Ctrl-C cuts it short
    try:
        wait_until(lambda: out.stat().st_size > 0 and len(descendants(proc.pid)) >= 4, 20, "start")
        time.sleep(0.5)
        seen = descendants(proc.pid)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    doc = json.loads(stdout)
    assert doc["status"] == "stopped" and doc["stop"]["how"] == "immediate"
    assert elapsed < 5  # not the 10 s drain
    assert_no_orphans(seen)


def test_sigterm_stops_like_ctrl_c(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = start_vf(_endless(tmp_path, out))
    try:
        wait_until(lambda: out.exists(), 20, "progress")
        seen = descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert json.loads(stdout)["status"] == "stopped"
    assert_no_orphans(seen)


def test_killing_the_coordinator_leaves_no_orphans(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = start_vf(_endless(tmp_path, out))
    try:
        wait_until(lambda: out.exists(), 20, "progress")
        seen = descendants(proc.pid)
        proc.kill()  # SIGKILL: no handler runs; the kernel must take the workers down
        proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert_no_orphans(seen)
