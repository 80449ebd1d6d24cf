"""`vf run` tells the truth about a run that is not healthy.

- a sink whose ``close()`` raises (what it flushed may be lost) fails the run;
- a node that makes no progress is warned about (live, and in the summary);
- a producer whose ``next()`` keeps returning None does not spin a core.

Real `vf run` processes; the no-progress threshold is shortened with
``--stall-warning``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

from tests.integration.cli_helpers import run_vf
from tests.support.flows import VF, write_flow
from tests.support.processes import group_members, wait_until, with_group_killed


def start_with_stderr(
    flow: Path, cwd: Path, stderr_file: IO[str], *args: str
) -> subprocess.Popen[str]:
    """`vf run FLOW --json ARGS` in its own session, stderr to a file read while it runs."""
    return subprocess.Popen(
        [str(VF), "run", str(flow), "--json", *args],
        stdout=subprocess.PIPE,
        stderr=stderr_file,
        text=True,
        cwd=cwd,
        start_new_session=True,
    )


def test_a_sink_whose_close_raises_fails_the_run(tmp_path: Path) -> None:
    flow = write_flow(
        tmp_path,
        """
        class Flaky(ConsumerNode):
            def consume(self, x):
                pass

            def close(self):
                raise OSError("disk full while flushing")

        flow = Flow([Flaky(name="sink")(Numbers(50, name="src"))], flow_type=BATCH)
        """,
    )
    done = run_vf("run", flow, "--json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["status"] == "failed"
    assert doc["error"] == "sink/0: close() raised OSError: disk full while flushing"
    assert doc["nodes"]["sink"]["processed"] == 50  # it did consume; closing failed
    assert "error: run-failed" in done.stderr
    assert "sink/0: close() raised OSError" in done.stderr
    assert 'raise OSError("disk full while flushing")' in done.stderr  # its traceback

    text = run_vf("run", flow, cwd=tmp_path)
    assert text.returncode == 1
    assert "run flow (batch): failed" in text.stdout


def _cpu_seconds(pids: set[int]) -> float:
    total = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
    return total / 100.0


def test_a_producer_returning_none_forever_is_warned_about_and_does_not_spin(
    tmp_path: Path,
) -> None:
    """The README tour's mistake: `next()` returns None (nothing now) and never an item."""
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        class Silent(ProducerNode):
            def next(self):
                return None

        flow = Flow([Record({str(out)!r}, name="sink")(Silent(name="src"))], flow_type=BATCH)
        """,
    )
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as stderr_file:
        proc = start_with_stderr(flow, tmp_path, stderr_file, "--stall-warning", "1")
        try:
            wait_until(lambda: "no progress: src" in errors.read_text(), 30, "the warning")
            pids = group_members(proc.pid)
            cpu0, t0 = _cpu_seconds(pids), time.monotonic()
            time.sleep(2.0)
            cpu = _cpu_seconds(pids) - cpu0
            elapsed = time.monotonic() - t0
            proc.send_signal(signal.SIGINT)
            stdout, _ = proc.communicate(timeout=30)
        finally:
            with_group_killed(proc)
    warning = errors.read_text()
    assert "no progress: src for" in warning
    assert "next() returned None" in warning and "StopIteration" in warning
    # spinning took ~80 % of a core; pausing between Nones leaves the run nearly idle
    assert cpu < 0.25 * elapsed, (cpu, elapsed)
    doc = json.loads(stdout)
    assert doc["status"] == "stopped"
    assert doc["stall_warning_s"] == 1.0
    (stall,) = doc["stalls"]
    assert stall["node"] == "src" and stall["resumed"] is False
    assert stall["duration_s"] >= 1.0 and "returned None" in stall["detail"]
    assert any(w.startswith("no progress: src") for w in doc["warnings"])
    assert doc["nodes"]["src"]["processed"] == 0
    assert doc["nodes"]["src"]["returned_none"] > 0


def test_a_stuck_processor_is_warned_about_and_its_recovery_noted(tmp_path: Path) -> None:
    flow = write_flow(
        tmp_path,
        """
        class Hiccup(ProcessorNode):
            def process(self, x):
                if x == 5:
                    time.sleep(2.5)  # stuck for a while, then goes on
                return x

        src = Numbers(60, name="src", sleep=0.03)  # still producing after the hiccup
        flow = Flow([Record(os.devnull, name="sink")(Hiccup(name="slow")(src))], flow_type=BATCH)
        """,
    )
    done = run_vf("run", flow, "--stall-warning", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no progress: slow for" in done.stderr and "process() handled none" in done.stderr
    assert "slow: progressing again" in done.stderr
    assert "no progress (warned after 1 s without any)" in done.stdout
    assert "slow:" in done.stdout and "then progressed again" in done.stdout
    assert "src:" not in done.stdout.split("no progress")[1]  # the producer had nothing to do

    quiet = run_vf("run", flow, "--json", "--stall-warning", "0", cwd=tmp_path)
    assert quiet.returncode == 0
    assert json.loads(quiet.stdout)["stalls"] == []  # 0 turns the watchdog off
