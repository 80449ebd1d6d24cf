"""SIGINT and SIGTERM, to the process group and to the single process, stop every command but
``vf run``/``vf worker`` the same way (issue 23, docs/cli.md "Signals"): ``interrupted``, exit
130, no traceback — ``vf deploy`` waiting leaves the run in place and prints the teardown
command; ``vf broker-setup --wait`` stops retrying; ``vf plan --kube`` stops mid-request.

Real processes, each in its own session (``killpg`` reaches the group as Ctrl-C at a
terminal does), against a fake API server (kmock) or a port where nothing listens.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_helpers import REPO
from tests.integration.kube_fake import FakeKube
from tests.support.kube import applies, fake, flow_file, stored

pytest.importorskip("kubernetes")

__all__ = ["fake"]  # the fixture, imported for these tests

FLOW = str(REPO / "examples" / "traffic" / "flow.py")
HOW = [
    pytest.param(signal.SIGINT, True, id="SIGINT-to-the-group"),
    pytest.param(signal.SIGTERM, True, id="SIGTERM-to-the-group"),
    pytest.param(signal.SIGINT, False, id="SIGINT-to-the-process"),
    pytest.param(signal.SIGTERM, False, id="SIGTERM-to-the-process"),
]


def _stop(args: list[object], ready: Callable[[], bool], signum: int, group: bool) -> Any:
    """Start ``vf ARGS`` in its own session, wait until ``ready()``, signal it; its result."""
    env = {k: v for k, v in os.environ.items() if k != "VF_DEBUG"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vfadapters.cli", *map(str, args)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not ready() and proc.poll() is None:
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        time.sleep(1.0)  # into the wait
        if group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "Traceback" not in out + err, err
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@pytest.mark.parametrize(("signum", "group"), HOW)
def test_a_deploy_waiting_is_interrupted_and_leaves_the_run(
    fake: FakeKube, tmp_path: Path, signum: int, group: bool
) -> None:
    fake.call(lambda h: setattr(h, "complete_jobs", False))  # the Jobs never finish
    flow = flow_file(tmp_path, gpus=1)
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    result = _stop(
        ["deploy", flow, "--image", "x:1", "--run", "r1", "--kubeconfig", kubeconfig],
        lambda: any(a["plural"] == "jobs" for a in applies(fake)[-1:]),
        signum,
        group,
    )
    assert result.returncode == 130, result.stderr
    assert "vf teardown" in result.stderr and "--run r1" in result.stderr
    assert any(k[0] == "jobs" for k in stored(fake))  # nothing deleted


@pytest.mark.parametrize(("signum", "group"), HOW)
def test_broker_setup_waiting_for_a_broker_stops_retrying(signum: int, group: bool) -> None:
    started = time.monotonic()
    result = _stop(
        ["broker-setup", FLOW, "--broker", "nats://127.0.0.1:9", "--run", "r1", "--wait", "600"],
        lambda: time.monotonic() - started > 3,  # loading done, retrying the connection
        signum,
        group,
    )
    assert result.returncode == 130, result.stderr
    assert result.stderr.strip().endswith("interrupted")
    assert time.monotonic() - started < 60


@pytest.mark.parametrize(("signum", "group"), HOW[::3])
def test_plan_kube_is_interrupted_mid_request(
    fake: FakeKube, tmp_path: Path, signum: int, group: bool
) -> None:
    original = fake.handler._handle  # type: ignore[union-attr]
    asked: list[str] = []

    async def slow(request: Any) -> Any:
        if request.resource is not None and request.resource.plural == "pods":
            asked.append("pods")
            await asyncio.sleep(20)
        return await original(request)

    fake.call(lambda h: setattr(h, "_handle", slow))
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    result = _stop(
        ["plan", flow_file(tmp_path, gpus=1), "--kube", "--kubeconfig", kubeconfig],
        lambda: bool(asked),
        signum,
        group,
    )
    assert result.returncode == 130, result.stderr
    assert "interrupted" in result.stderr
