"""Records no stranger can forge, attacked on a real server (issue 24, docs/security.md).

A client that can publish on a run's subjects but does not hold the run key sends,
while a `vf run --broker` runs: a well-formed record whose pickle would create a
marker file when loaded (the attack that ran code in every worker before), the same
record with a seal made under another key, a genuine record of another run (sealed
under that run's key), and a genuine record of this run sent on another edge. Each
is a dead letter with reason ``record-unauthenticated``, the marker never appears,
every item reaches the sink once and the books balance.

The run key's homes: the key store keeps a run's key while its streams exist (so
`vf dead-letters --replay` finds it) and forgets it with them; a worker without the
key is refused before it connects (``run-key-missing``).
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import nats
import pytest

from tests.integration.cli_helpers import assert_bad_input
from tests.support.flows import finish, read_lines, slow_flow, vf, write_flow
from vfadapters.broker.keys import read_run_key, store_path
from vfadapters.broker.record import pack
from vfadapters.broker.sealing import RecordSealer, edge_domain
from vfadapters.broker.server import NatsServer
from vfadapters.loading import load_runnable
from vfcore.runtime import broker_topology


class _Trap:
    """Unpickling this creates the marker file: what a forged record would run."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.marker, "w"))


def _forged_record(marker: Path) -> bytes:
    # a record laid out exactly as vf lays them out, whose one message is the trap
    body = pickle.dumps([("src:999999", 0.0, {}, _Trap(str(marker)), 0)], protocol=5)
    record = bytearray(pack([("x", 0.0, {}, 1, 0)]))
    return bytes(record[:16]) + len(body).to_bytes(8, "little") + body


def test_records_without_the_run_key_are_dead_letters_never_decoded(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    out, marker = tmp_path / "out.jsonl", tmp_path / "PWNED"
    flow = slow_flow(tmp_path, out, n=400)
    run = f"seal{uuid.uuid4().hex[:8]}"
    proc = vf("run", flow, "--json", "--no-progress", "--broker", nats_server.url, "--run", run)
    spec = load_runnable(str(flow))[1]
    topo = broker_topology(spec, run)
    subject = topo.edge("src", "work").subjects[0]
    other = topo.edge("work", "sink").subjects[0]
    deadline = time.monotonic() + 60
    while len(read_lines(out)) < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert read_lines(out), finish(proc)

    forged = _forged_record(marker)
    stranger = RecordSealer(os.urandom(32))  # another key: another run's, or made up
    run_key = read_run_key(os.environ["VF_RUN_KEY_FILE"])  # this run's key (see conftest)
    ours = RecordSealer(run_key)
    genuine_elsewhere = bytes(
        pack([("src:888888", 0.0, {}, 7, 0)], ours, edge_domain("work", "sink"))
    )

    async def attack() -> None:
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        await js.publish(subject, forged)  # no seal at all
        await js.publish(subject, bytes(stranger.sealed_copy(forged, edge_domain("src", "work"))))
        await js.publish(subject, forged + b"VFM1" + os.urandom(40))  # a seal made up
        await js.publish(subject, genuine_elsewhere)  # sealed by the run, for another edge
        # and the trap on the other edge as well, sealed under a stranger's key
        await js.publish(other, bytes(stranger.sealed_copy(forged, edge_domain("work", "sink"))))
        await nc.close()

    asyncio.run(attack())
    code, text, err = finish(proc)
    assert code == 0, err
    doc = json.loads(text)
    assert not marker.exists(), "a forged record was unpickled"
    assert doc["status"] == "completed", doc["error"]
    assert Counter(i["x"] for i in read_lines(out)) == Counter(range(400))
    assert doc["nodes"]["work"]["dead_letters"] == 4 and doc["nodes"]["sink"]["dead_letters"] == 1
    assert doc["books"]["balanced"], doc["books"]
    listed = subprocess.run(
        [sys.executable, "-m", "vfadapters", "dead-letters", str(flow), "--broker",
         nats_server.url, "--run", run, "--json"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    letters = json.loads(listed.stdout)["letters"]
    assert len(letters) == 5
    assert {x["reason"] for x in letters} == {"record-unauthenticated"}, letters
    assert not any(x["replayable"] for x in letters)  # never kept for a replay
    assert "was refused, not decoded" in err and "Traceback" not in err


def test_the_key_store_keeps_a_run_key_while_its_letters_exist_and_a_worker_needs_one(
    nats_server: NatsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `VF_RUN_KEY_FILE` (as on a user's machine): `vf run --broker` writes the
    run's key to the key store (0600), leaves it while the run's dead letters are kept,
    `vf dead-letters --replay` reads it there, `vf broker-teardown` forgets it; a
    `vf worker` with no key anywhere is refused before it connects."""
    env = {k: v for k, v in os.environ.items() if k != "VF_RUN_KEY_FILE"}
    env["VF_RUN_KEYS"] = str(tmp_path / "keys")
    monkeypatch.setenv("VF_RUN_KEYS", env["VF_RUN_KEYS"])  # where store_path looks, here too
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        class Picky(ProcessorNode):
            def process(self, x):
                if x % 10 == 3 and not os.environ.get("PICKY_FIXED"):
                    raise ValueError(f"no {{x}}")
                return x

        flow = Flow([Record({str(out)!r}, name="sink")(Picky(name="picky")(Numbers(40, name="src")))],
                    flow_type=BATCH)
        """,
    )
    run, url = f"keys{uuid.uuid4().hex[:8]}", nats_server.url

    def vf_env(
        *args: object, extra: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "vfadapters", *map(str, args)],
                              env={**env, **(extra or {})}, capture_output=True, text=True,
                              timeout=180, check=False)  # fmt: skip

    spec = load_runnable(str(flow))[1]

    def stored(run_id: str) -> Path:
        bucket = broker_topology(spec, run_id).control.bucket
        return store_path("127.0.0.1", nats_server.port, bucket)

    clean = vf_env("run", flow, "--broker", url, "--run", f"{run}c", "--no-progress",
                   extra={"PICKY_FIXED": "1"})  # fmt: skip
    assert clean.returncode == 0, clean.stderr
    assert not stored(f"{run}c").exists(), "the run and its streams are gone: its key too"

    done = vf_env("run", flow, "--broker", url, "--run", run, "--retries", "0", "--no-progress",
                  "--keep-streams")  # fmt: skip
    assert done.returncode == 0, done.stderr
    key = stored(run)
    assert key.exists(), "the streams are kept, and with them the key that seals them"
    assert key.stat().st_mode & 0o077 == 0 and key.parent.stat().st_mode & 0o077 == 0

    refused = vf_env("worker", flow, "--node", "picky", "--broker", url, "--run", "other")
    assert_bad_input(refused, "run-key-missing")

    replay = vf_env("dead-letters", flow, "--broker", url, "--run", run, "--replay", "--json")
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["replayed"] == 4
    gone = vf_env("broker-teardown", flow, "--broker", url, "--run", run, "--dead-letters")
    assert gone.returncode == 0, gone.stderr
    assert not key.exists()
