"""A broker run's life on a real server: a run id used once, resumed, removed; producers that
cannot resume; records no worker can decode.

* a run id whose streams exist is refused (``run-exists``, exit 2, saying how to
  resume or remove it), and two ``vf run --run X`` started at once cannot both run;
* ``--resume`` goes on with a run kept with ``--keep-streams`` and stopped midway:
  every item reaches the sink once over both lives;
* ``vf broker-teardown`` removes what a kept run left (and says when there is
  nothing);
* a producer killed after writing items and defining no ``resume()`` fails the run,
  naming itself, on both transports — never silent duplicates;
* a message on a run's subject that is not a record the run can decode becomes a
  dead letter (``record-undecodable``), and the run goes on.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections import Counter
from pathlib import Path

import nats
import pytest

from tests.support.flows import finish, read_lines, slow_flow, vf, write_flow
from tests.support.processes import replica_pids
from vfadapters.broker.server import NatsServer
from vfadapters.loading import load_runnable
from vfcore.runtime import broker_topology


def test_a_run_id_in_use_is_refused_and_a_kept_run_resumes_then_is_removed(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    flow = slow_flow(tmp_path, out, n=1500, sleep=0.01)  # ~15 s: stopped midway below
    run = f"life{uuid.uuid4().hex[:8]}"
    first = vf(
        "run",
        flow,
        "--json",
        "--no-progress",
        "--broker",
        nats_server.url,
        "--run",
        run,
        "--keep-streams",
        "--ack-wait",
        "2",
    )
    deadline = time.monotonic() + 60
    while len(read_lines(out)) < 100 and time.monotonic() < deadline:
        time.sleep(0.05)
    # a second run under the same id while the first runs: refused at once
    code, _, err = finish(
        vf("run", flow, "--broker", nats_server.url, "--run", run, "--no-progress")
    )
    assert code == 2 and "run-exists" in err and "--resume" in err, err
    # ... and --resume is refused too while its owner writes its heartbeat
    code, _, err = finish(
        vf("run", flow, "--broker", nats_server.url, "--run", run, "--resume", "--no-progress")
    )
    assert code == 2 and "run-in-use" in err, err
    first.send_signal(signal.SIGINT)  # stop it midway: producers stop, the rest drains
    code, doc_text, err = finish(first)
    assert code == 130, err
    assert json.loads(doc_text)["status"] == "stopped"
    partial = len(read_lines(out))
    assert 0 < partial < 1500
    # the kept run goes on where it stopped (its owner ended: the run key says so)
    code, doc_text, err = finish(
        vf(
            "run",
            flow,
            "--json",
            "--no-progress",
            "--broker",
            nats_server.url,
            "--run",
            run,
            "--resume",
            "--keep-streams",
        ),
        timeout=180,
    )
    assert code == 0, err
    doc = json.loads(doc_text)
    assert doc["status"] == "completed" and doc["transport"]["resumed"] is True
    xs = [i["x"] for i in read_lines(out)]
    assert Counter(xs) == Counter(range(1500)), "every item once over both lives"
    # what the kept run left is removed by vf broker-teardown; twice is run-not-found
    code, text, err = finish(
        vf("broker-teardown", flow, "--broker", nats_server.url, "--run", run, "--json")
    )
    assert code == 0, err
    deleted = json.loads(text)["deleted"]
    spec = load_runnable(str(flow))[1]
    topo = broker_topology(spec, run)
    assert {c.name for _, c in topo.streams} <= set(deleted)
    assert topo.ledger is not None and topo.ledger.name in deleted
    code, _, err = finish(vf("broker-teardown", flow, "--broker", nats_server.url, "--run", run))
    assert code == 2 and "run-not-found" in err, err
    code, _, err = finish(
        vf("broker-teardown", flow, "--broker", nats_server.url, "--run", run, "--ignore-not-found")
    )
    assert code == 0, err


def test_two_runs_started_at_once_under_one_id_cannot_both_run(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    flow = slow_flow(tmp_path, out, n=200)
    run = f"twin{uuid.uuid4().hex[:8]}"
    procs = [
        vf("run", flow, "--json", "--no-progress", "--broker", nats_server.url, "--run", run)
        for _ in range(2)
    ]
    results = [finish(p) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], [(c, e[-500:]) for c, _, e in results]
    refused = next(e for c, _, e in results if c == 2)
    assert "run-exists" in refused or "run-in-use" in refused
    assert Counter(i["x"] for i in read_lines(out)) == Counter(range(200))


@pytest.mark.parametrize("transport", ["local", "broker"])
def test_a_producer_without_resume_killed_after_writing_fails_the_run_naming_it(
    transport: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        src = Numbers(3_000, name="src", sleep=0.003)
        flow = Flow([Record({str(out)!r}, name="sink")(Tag("w", name="work")(src))],
                    flow_type=BATCH)
        """,
    )
    args: list[object] = ["run", flow, "--json", "--no-progress"]
    if transport == "broker":
        server: NatsServer = request.getfixturevalue("nats_server")
        args += ["--broker", server.url, "--run", f"nr{uuid.uuid4().hex[:8]}"]
    proc = vf(*args)
    deadline = time.monotonic() + 60
    while len(read_lines(out)) < 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = replica_pids(proc.pid, "src/0")
    assert pids, "the producer's process was not found"
    os.kill(pids[0], signal.SIGKILL)
    code, text, err = finish(proc)
    assert code == 1, err
    doc = json.loads(text)
    assert doc["status"] == "failed"
    assert "src/0" in doc["error"] and "resume" in doc["error"], doc["error"]
    xs = [i["x"] for i in read_lines(out)]
    assert len(xs) == len(set(xs)), "nothing was written twice"


def test_a_message_no_worker_can_decode_is_a_dead_letter(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    flow = slow_flow(tmp_path, out, n=400)
    run = f"poison{uuid.uuid4().hex[:8]}"
    letters = tmp_path / "letters.jsonl"
    proc = vf(
        "run",
        flow,
        "--json",
        "--no-progress",
        "--broker",
        nats_server.url,
        "--run",
        run,
        "--dead-letters",
        letters,
    )
    spec = load_runnable(str(flow))[1]
    topo = broker_topology(spec, run)
    subject = topo.edge("src", "work").subjects[0]
    deadline = time.monotonic() + 60
    while len(read_lines(out)) < 20 and time.monotonic() < deadline:
        time.sleep(0.05)

    async def publish() -> None:
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        await js.publish(subject, b"VFR1" + b"\x05\x00\x00\x00\x00\x00\x00\x00" + b"\x80garbage")
        await js.publish(subject, b"not a record at all")
        await nc.close()

    asyncio.run(publish())
    code, text, err = finish(proc)
    assert code == 0, err
    doc = json.loads(text)
    assert doc["status"] == "completed", doc["error"]
    assert Counter(i["x"] for i in read_lines(out)) == Counter(range(400))
    assert doc["nodes"]["work"]["dead_letters"] >= 2
    assert doc["books"]["balanced"], doc["books"]
