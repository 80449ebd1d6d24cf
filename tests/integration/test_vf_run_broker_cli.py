"""``vf run --broker`` and ``vf dead-letters`` as real processes: the edges of their input.

* an unreachable broker is ``broker-unreachable`` (exit 2) with nothing else on
  stderr (no asyncio "Task was destroyed" noise, no traceback);
* ``--gpu-policy strict`` refuses a flow the host's GPUs cannot cover (exit 3,
  ``gpu-shortfall``) over a broker exactly as it does locally;
* ``vf dead-letters --replay`` of a run whose streams are gone is an answer,
  not an ``internal-error``, and loses no letter.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import nats
import pytest

from tests.integration.cli_helpers import REPO
from tests.support.flows import write_flow
from vfadapters.broker.client import api_request, delete_topology, ensure_topology
from vfadapters.broker.record import pack
from vfadapters.broker.server import NatsServer
from vfadapters.loading import load_runnable
from vfcore.runtime import broker_topology


def vf(*args: object) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "VF_DEBUG"}
    return subprocess.Popen(
        [sys.executable, "-m", "vfadapters.cli", *map(str, args)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture(scope="module")
def results(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, subprocess.CompletedProcess[str]]:
    """The slow commands, started together (each may sit out a connect timeout)."""
    tmp = tmp_path_factory.mktemp("vf-run-broker")
    plain = write_flow(
        tmp,
        """
        src = Numbers(5, name="src")
        sink = Record("/dev/null", name="sink")(src)
        flow = Flow([sink], flow_type=BATCH)
        """,
        name="plain.py",
    )
    greedy = write_flow(
        tmp,
        """
        src = Numbers(5, name="src")
        hog = Tag("h", name="hog", device_type="gpu", gpu_count=64)(src)
        sink = Record("/dev/null", name="sink")(hog)
        flow = Flow([sink], flow_type=BATCH)
        """,
        name="greedy.py",
    )
    url = f"nats://127.0.0.1:{closed_port()}"
    procs = {
        "unreachable": vf("run", plain, "--broker", url, "--no-progress"),
        "strict-local": vf("run", greedy, "--gpu-policy", "strict", "--no-progress"),
        "strict-broker": vf(
            "run", greedy, "--broker", "embedded", "--gpu-policy", "strict", "--no-progress"
        ),
    }
    return {name: finish(p) for name, p in procs.items()}


def test_an_unreachable_broker_is_bad_input_with_a_clean_stderr(
    results: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    result = results["unreachable"]
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: broker-unreachable"), result.stderr
    assert "Traceback" not in result.stderr
    assert "Task was destroyed" not in result.stderr, result.stderr


def test_gpu_policy_strict_refuses_over_a_broker_as_it_does_locally(
    results: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    local = results["strict-local"]
    assert local.returncode == 3 and "error: gpu-shortfall" in local.stderr, local.stderr
    broker = results["strict-broker"]
    assert broker.returncode == 3, (broker.returncode, broker.stdout[-400:], broker.stderr[-400:])
    assert "error: gpu-shortfall" in broker.stderr


def test_replay_of_a_run_whose_streams_are_gone_loses_nothing(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    flow = write_flow(
        tmp_path,
        """
        src = Numbers(5, name="src")
        work = Tag("w", name="work")(src)
        sink = Record("/dev/null", name="sink")(work)
        flow = Flow([sink], flow_type=BATCH, name="gone")
        """,
    )
    run_id = f"g{uuid.uuid4().hex[:10]}"
    _, spec = load_runnable(str(flow))
    topo = broker_topology(spec, run_id)
    dlq = topo.dead_letters.config.name

    async def setup() -> None:
        # the run as a worker leaves it: one dead letter of work (parent src), then
        # the end of the run deletes every stream but the dead-letter stream
        nc = await nats.connect(nats_server.url, max_reconnect_attempts=0)
        try:
            await ensure_topology(nc, topo)
            entry = {"node": "work", "replica": 0, "parent": "src", "trace_id": "src:3"}
            entry |= {"reason": "raised", "error": "ValueError: 3", "attempts": 3}
            await nc.jetstream().publish(
                topo.dead_letters.subject_of("work"),
                bytes(pack([("src:3", None, None, 3, 0)])),
                headers={"Vf-Dead-Letter": json.dumps(entry)},
            )
            await delete_topology(nc, topo)
        finally:
            await nc.close()

    async def letters_left() -> int:
        nc = await nats.connect(nats_server.url, max_reconnect_attempts=0)
        try:
            info = await api_request(nc, f"$JS.API.STREAM.INFO.{dlq}")
            count = int(info["state"]["messages"])
            await api_request(nc, f"$JS.API.STREAM.DELETE.{dlq}")
            return count
        finally:
            await nc.close()

    asyncio.run(setup())
    listed = finish(vf("dead-letters", flow, "--broker", nats_server.url, "--run", run_id))
    assert listed.returncode == 0, listed.stderr
    assert "src:3" in listed.stdout
    replay = finish(
        vf("dead-letters", flow, "--broker", nats_server.url, "--run", run_id, "--replay")
    )
    left = asyncio.run(letters_left())
    assert left == 1  # nothing was lost
    assert "internal-error" not in replay.stderr, replay.stderr
    assert replay.returncode == 1, (replay.returncode, replay.stdout, replay.stderr)
    assert "not replayed 1" in replay.stdout, replay.stdout
