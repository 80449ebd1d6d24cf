"""What a run killed with -9 leaves in /dev/shm is removed by the next run, and only that.

``kill -9`` of a whole process group (the OOM killer, a hard CI cancel) runs no
handler: the run's shared-memory segments and semaphores stay in /dev/shm. Every
file of a run is named after its coordinator's pid (``vf-<pid>-…``,
``sem.vf-<pid>-…``), so the next run removes those whose coordinator no longer
runs and never touches a live run's.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.integration.cli_helpers import run_vf
from tests.support.flows import VF, write_flow
from tests.support.processes import (
    group_members,
    run_files,
    start,
    wait_until,
    with_group_killed,
)


def test_the_next_run_removes_what_a_killed_run_left_and_spares_a_live_one(
    tmp_path: Path,
) -> None:
    out_a, out_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    endless = """
        src = Numbers(None, name="src", sleep=0.001)
        flow = Flow([Record({out!r}, name="sink")(Tag("w", name="work")(src))], flow_type=BATCH)
        """
    flow_a = write_flow(tmp_path, endless.format(out=str(out_a)), "a.py")
    flow_b = write_flow(tmp_path, endless.format(out=str(out_b)), "b.py")
    short = write_flow(
        tmp_path,
        'flow = Flow([Record(os.devnull, name="sink")(Numbers(10, name="src"))])\n',
        "c.py",
    )

    killed = start([str(VF), "run", str(flow_a), "--json"], tmp_path)
    live = None
    try:
        wait_until(lambda: out_a.exists(), 30, "the first run to make progress")
        left = run_files(killed.pid)
        assert any(name.startswith("vf-") for name in left)  # its rings and control segment
        assert any(name.startswith("sem.vf-") for name in left)  # its semaphores
        os.killpg(killed.pid, signal.SIGKILL)
        killed.communicate(timeout=10)
        wait_until(lambda: not group_members(killed.pid), 10, "the killed group to be gone")
        assert run_files(killed.pid) == left  # leaked: nothing ran to remove them

        live = start([str(VF), "run", str(flow_b), "--json"], tmp_path)
        wait_until(lambda: out_b.exists(), 30, "the live run to make progress")
        assert run_files(killed.pid) == []  # the live run's start swept the dead one's
        live_files = run_files(live.pid)
        assert live_files

        done = run_vf("run", short, cwd=tmp_path)  # a third run starts while one is live
        assert done.returncode == 0, done.stderr
        assert set(live_files) <= set(run_files(live.pid))  # the live run's are untouched
        assert live.poll() is None

        live.send_signal(signal.SIGINT)
        live.communicate(timeout=30)
        assert live.returncode == 130
        wait_until(lambda: not run_files(live.pid), 5, "the live run to clean up after itself")
    finally:
        with_group_killed(killed)
        if live is not None:
            with_group_killed(live)
