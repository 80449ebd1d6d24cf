"""`vf run` at its two ends: a signal at any instant of its start, a flow that leaves
threads behind, and the embedded broker's server when the coordinator dies (issue 23).

Real processes, each in its own session (``killpg`` reaches the group as Ctrl-C at a
terminal does), started as the console script starts them (``python -m vfadapters``:
:mod:`vfadapters.entry`). ``TMPDIR`` points into the test's folder so that the
embedded server's store directories of a test are its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.cli_helpers import REPO
from tests.support.flows import write_flow
from tests.support.processes import descendants, running
from vfadapters.broker.server import find_nats_server

NEEDS_SERVER = pytest.mark.skipif(
    find_nats_server() is None, reason="no nats-server binary (the dev extra installs it)"
)

#: A slow, never-ending BATCH flow: a producer that paces itself, a sink that notes each item.
SLOW = """
src = Numbers(None, sleep=0.005, name="src")
flow = Flow([Record({out!r}, name="sink")(Tag("t", name="work")(src))], flow_type=BATCH,
            name="slow")
"""


def _start(args: list[object], tmp_path: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "VF_DEBUG"}
    env["TMPDIR"] = str(tmp_path)
    return subprocess.Popen(
        [sys.executable, "-m", "vfadapters", *map(str, args)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def _stderr_when_done(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """Wait for a run that should end by itself; kill its session if it does not."""
    try:
        _, err = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return err


def _session(sid: int) -> set[int]:
    """The processes of session ``sid`` (the vf process and everything it forked)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    found.add(int(entry.name))
            except OSError:
                continue
    return running(found)


def _servers_of(pid: int) -> set[int]:
    """The nats-server processes whose store names ``pid`` as their owner."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "nats-server" in cmdline and f"vf-nats-{pid}-" in cmdline:
                found.add(int(entry.name))
    return running(found)


def _gone_within(pids: set[int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    while running(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return running(pids)


@pytest.mark.parametrize(
    "broker",
    [pytest.param([], id="local"), pytest.param(["--broker", "embedded"], id="embedded")],
)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_at_any_instant_of_the_start_stops_the_run_without_a_traceback(
    tmp_path: Path, broker: list[str], signum: int
) -> None:
    """While Python imports, while the fork server preloads, while the server starts,
    while the first workers import the flow: `interrupted` or a drain, exit 130, no
    traceback, and nothing of the run left running (processes, server, store)."""
    if broker and find_nats_server() is None:
        pytest.skip("no nats-server binary")
    flow = write_flow(tmp_path, SLOW.format(out=str(tmp_path / "out.jsonl")))
    for delay in (0.05, 0.4, 1.2):
        proc = _start(["run", flow, "--no-progress", *broker], tmp_path)
        time.sleep(delay)
        members = _session(proc.pid) | descendants(proc.pid)
        os.killpg(proc.pid, signum)
        try:
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        assert "Traceback" not in out + err, (delay, err)
        assert proc.returncode == 130, (delay, proc.returncode, err)
        assert "interrupted" in err or "stopping" in err, (delay, err)
        left = members | _session(proc.pid) | _servers_of(proc.pid)
        assert not _gone_within(left, 10), delay
        assert not list(tmp_path.glob("vf-nats-*")), delay  # the store went with the server


@NEEDS_SERVER
def test_an_interrupt_while_the_embedded_server_starts_stops_it_and_removes_its_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C or SIGTERM (a KeyboardInterrupt) while `vf run` waits for its server to
    answer: the server it was starting is stopped, then its store removed. Before, the run
    did not yet hold the server: teardown left both, the server wrote on in its store
    until `vf run` exited, and the store outlived the run (CI, a SIGTERM 1.2 s in)."""
    import tempfile
    import urllib.request

    from vfadapters.broker.run import BrokerRun, BrokerRunOptions
    from vfadapters.runtime.options import RunOptions

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    flow = write_flow(tmp_path, SLOW.format(out=str(tmp_path / "out.jsonl")))
    run = BrokerRun(str(flow), RunOptions(), BrokerRunOptions(broker="embedded"))

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(urllib.request, "urlopen", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run.start_server()
    monkeypatch.undo()
    servers = _servers_of(os.getpid())
    stores = list(tmp_path.glob(f"vf-nats-{os.getpid()}-*"))
    try:
        assert len(servers) == 1 and len(stores) == 1  # started, not yet answering
        run.teardown()
        assert not _gone_within(servers, 10), "the server outlived the run"
        assert not stores[0].exists(), "the store outlived the run"
    finally:
        for pid in running(servers):
            os.kill(pid, signal.SIGKILL)


@NEEDS_SERVER
def test_kill_9_of_the_coordinator_takes_its_server_and_workers_and_the_next_run_sweeps_the_store(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(tmp_path, SLOW.format(out=str(out)))
    proc = _start(["run", flow, "--no-progress", "--broker", "embedded"], tmp_path)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or out.stat().st_size < 200):
            time.sleep(0.05)
        assert out.exists(), proc.communicate(timeout=5)
        servers = _servers_of(proc.pid)
        workers = descendants(proc.pid) - servers
        assert len(servers) == 1 and workers
        stores = list(tmp_path.glob(f"vf-nats-{proc.pid}-*"))
        assert len(stores) == 1
        proc.kill()  # SIGKILL to the coordinator alone: no handler, no cleanup of its own
        proc.communicate(timeout=30)
        assert not _gone_within(servers | workers, 10), "left running after kill -9"
        assert stores[0].exists()  # nobody was left to remove it
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # the next embedded run removes the store of an owner that is gone, and only that
    alive = tmp_path / f"vf-nats-{os.getpid()}-keep"  # a live owner's (this test's)
    alive.mkdir()
    stranger = tmp_path / "vf-nats-notapid"
    stranger.mkdir()
    traffic = REPO / "examples" / "traffic.py"
    second = _start(["run", traffic, "--no-progress", "--broker", "embedded"], tmp_path)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert not stores[0].exists()
    assert alive.exists() and stranger.exists()


def test_a_flow_that_leaves_threads_and_exit_hooks_does_not_keep_vf_run_alive(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        import atexit, threading
        threading.Thread(target=time.sleep, args=(3600,), name="flow-sleeper").start()
        atexit.register(time.sleep, 3600)

        class Lingering(ProcessorNode):
            def open(self):
                threading.Thread(target=time.sleep, args=(3600,), name="node-sleeper").start()

            def process(self, x):
                return x

        flow = Flow([Record({str(out)!r}, name="sink")(Lingering(name="work")(
            Numbers(50, name="src")))], flow_type=BATCH)
        """,
    )
    started = time.monotonic()
    proc = _start(["run", flow, "--no-progress"], tmp_path)
    err = _stderr_when_done(proc, 90)
    assert proc.returncode == 0, err
    assert time.monotonic() - started < 90
    assert "flow-threads-left" in err and "flow-sleeper" in err, err
    assert len(out.read_text().splitlines()) == 50  # the run itself was whole
    assert not _gone_within(_session(proc.pid), 10)  # no replica left behind either


@pytest.mark.parametrize("broker", [False, pytest.param(True, marks=NEEDS_SERVER)])
def test_a_long_tmpdir_still_runs(tmp_path: Path, broker: bool) -> None:
    """The fork server listens on a Unix socket under ``$TMPDIR``, and such a path holds
    107 bytes: with a deep ``$TMPDIR`` (a CI runner's, pytest-xdist's) `vf run` failed with
    an internal error, "AF_UNIX path too long". It makes the socket's dir under /tmp then."""
    deep = tmp_path / ("t" * 100)
    deep.mkdir()
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        flow = Flow([Record({str(out)!r}, name="sink")(Numbers(30, name="src"))], flow_type=BATCH)
        """,
    )
    args: list[object] = [
        "run",
        flow,
        "--no-progress",
        *(["--broker", "embedded"] if broker else []),
    ]
    proc = _start(args, deep)
    err = _stderr_when_done(proc, 90)
    assert proc.returncode == 0, err
    assert len(out.read_text().splitlines()) == 30
