"""``vf worker`` as the real process a pod runs: bad input and an unreachable broker.

Bad input (an unknown node, an invalid run id, a negative replica, a replica
beyond a partitioned node's partitions, a pod environment that gives no
number) exits 2 with ``error: <rule>``, a hint and no traceback, before any
connection is tried (the broker URL given points nowhere). An unreachable
broker is a runtime failure: exit 1, a message naming ``broker-unreachable``
and the URL, and no Python traceback — a traceback is printed only when it is
the node's own (its ``open()`` raising).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.cli_helpers import REPO, assert_bad_input
from tests.support.flows import write_flow
from vfadapters.broker.server import NatsServer

#: the variables replica_from_env reads: none leaks in from the machine the tests run on
POD_VARS = ("VF_REPLICA", "JOB_COMPLETION_INDEX", "POD_NAME", "HOSTNAME")


def vf_worker(
    flow: Path, *args: object, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in POD_VARS and k != "VF_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "vfadapters.cli", "worker", str(flow), *map(str, args)],
        cwd=REPO,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("vf-worker")
    return write_flow(
        tmp,
        f"""
        src = Numbers(20, keys=5, name="src", sets_keys=["key"])
        count = Count(name="count", nb_tasks=3, partition_by="key")(src)
        work = Tag("w", name="work", nb_tasks=2)(src)
        sink = Record({str(tmp / "a.jsonl")!r}, name="sink")(count)
        sink2 = Record({str(tmp / "b.jsonl")!r}, name="sink2")(work)
        flow = Flow([sink, sink2], flow_type=BATCH)
        """,
    )


NOWHERE = "nats://127.0.0.1:1"


@pytest.mark.parametrize(
    ("args", "env", "rule"),
    [
        pytest.param(("--node", "nope", "--run", "r1"), {}, "unknown-node", id="unknown-node"),
        pytest.param(("--node", "src", "--run", "bad.id"), {}, "invalid-run-id", id="run-dot"),
        pytest.param(("--node", "src", "--run=-r1"), {}, "invalid-run-id", id="run-dash"),
        pytest.param(("--node", "src", "--run", "x" * 64), {}, "invalid-run-id", id="run-long"),
        pytest.param(
            ("--node", "src", "--run", "r1", "--replica", "-1"),
            {},
            "invalid-replica",
            id="negative-replica",
        ),
        pytest.param(
            ("--node", "count", "--run", "r1", "--replica", "3"),
            {},
            "invalid-replica",
            id="replica-beyond-partitions",
        ),
        pytest.param(
            ("--node", "count", "--run", "r1"),
            {"POD_NAME": "flow-count-3"},
            "invalid-replica",
            id="statefulset-ordinal-beyond-partitions",
        ),
        pytest.param(
            ("--node", "src", "--run", "r1"),
            {"JOB_COMPLETION_INDEX": "abc"},
            "invalid-replica",
            id="job-completion-index-abc",
        ),
        pytest.param(
            ("--node", "src", "--run", "r1"),
            {"VF_REPLICA": "-2"},
            "invalid-replica",
            id="vf-replica-negative",
        ),
        pytest.param(
            ("--node", "src", "--run", "r1", "--retries", "-1"),
            {},
            "invalid-option",
            id="negative-retries",
        ),
    ],
)
def test_bad_input_exits_2_before_connecting(
    flow: Path, args: tuple[str, ...], env: dict[str, str], rule: str
) -> None:
    start = time.monotonic()
    result = vf_worker(flow, *args, "--broker", NOWHERE, env=env)
    assert_bad_input(result, rule)
    assert "broker-unreachable" not in result.stderr  # refused before any connection
    assert time.monotonic() - start < 10


def test_unknown_node_lists_the_nodes(flow: Path) -> None:
    result = vf_worker(flow, "--node", "nope", "--run", "r1", "--broker", NOWHERE)
    assert_bad_input(result, "unknown-node")
    for name in ("src", "count", "work", "sink", "sink2"):
        assert name in result.stderr


def test_replica_beyond_partitions_names_the_range(flow: Path) -> None:
    result = vf_worker(
        flow, "--node", "count", "--run", "r1", "--replica", "7", "--broker", NOWHERE
    )
    assert_bad_input(result, "invalid-replica")
    assert "partitioned into 3" in result.stderr and "0..2" in result.stderr


@pytest.fixture(scope="module")
def unreachable(flow: Path) -> tuple[subprocess.CompletedProcess[str], float, str]:
    url = f"nats://127.0.0.1:{closed_port()}"
    start = time.monotonic()
    # --replica wins over the environment: the bad JOB_COMPLETION_INDEX is never read
    result = vf_worker(
        flow,
        *("--node", "src", "--run", "r1", "--replica", "0", "--broker", url),
        env={"JOB_COMPLETION_INDEX": "abc"},
    )
    return result, time.monotonic() - start, url


def test_unreachable_broker_fails_with_exit_1_naming_broker_unreachable(
    unreachable: tuple[subprocess.CompletedProcess[str], float, str],
) -> None:
    result, _, url = unreachable
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "invalid-replica" not in result.stderr  # --replica 0 overrode the environment
    assert "broker-unreachable" in result.stderr, result.stderr
    assert url in result.stderr, result.stderr


def test_unreachable_broker_prints_no_traceback(
    unreachable: tuple[subprocess.CompletedProcess[str], float, str],
) -> None:
    result, _, _ = unreachable
    assert "Traceback" not in result.stderr, result.stderr


def test_a_refused_connection_fails_fast(
    unreachable: tuple[subprocess.CompletedProcess[str], float, str],
) -> None:
    # nothing listens on the port: the OS refuses at once; the worker should not sit
    # out a timeout as if the host were silent
    result, elapsed, _ = unreachable
    assert elapsed < 8.0, (elapsed, result.stderr)


def test_a_node_whose_open_raises_shows_its_own_traceback(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    flow = write_flow(
        tmp_path,
        """
        class Broken(ProcessorNode):
            def open(self):
                raise RuntimeError("camera calibration file missing")

            def process(self, x, ctx):
                return x

        src = Numbers(5, name="src")
        broken = Broken(name="broken")(src)
        sink = Record("/dev/null", name="sink")(broken)
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    run = f"w{uuid.uuid4().hex[:10]}"
    result = vf_worker(flow, "--node", "broken", "--run", run, "--broker", nats_server.url)
    assert result.returncode == 1, result.stderr
    assert "Traceback" in result.stderr
    assert "camera calibration file missing" in result.stderr
    assert "in open" in result.stderr  # the node's own frame
