"""Dead letters over the broker: kept in the run's stream, listed, replayed, processed.

A node raises on every tenth item; the run completes with 50 letters in the
dead-letter stream (``--keep-streams`` leaves the run's streams on the server).
``vf dead-letters --json`` lists them with node, trace id and error; after the
bug is "fixed" (an environment variable), ``--replay`` sends them back on the
edge they came in by and empties the stream, and the node's and sink's
``vf worker`` processes them: the sink ends with every item exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from tests.support.flows import read_lines, write_flow
from vfadapters.broker.server import NatsServer

VF = Path(sys.executable).parent / "vf"
NO_CREATE = ["--no-create"]


def vf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VF), *args], capture_output=True, text=True, timeout=180, env=env, check=False
    )


def test_letters_are_listed_replayed_and_processed(nats_server: NatsServer, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        class Picky(ProcessorNode):
            def process(self, x):
                if x % 10 == 3 and not os.environ.get("PICKY_FIXED"):
                    raise ValueError(f"no {{x}}")
                return x

        src = Numbers(500, name="src")
        sink = Record({str(out)!r}, name="sink")(Picky(name="picky")(src))
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    run = f"t{uuid.uuid4().hex[:10]}"
    url = nats_server.url
    done = vf(
        "run",
        str(flow),
        "--broker",
        url,
        "--run",
        run,
        "--keep-streams",
        "--json",
        "--retries",
        "0",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["dead_letters"] == 50
    assert doc["dead_letter_path"].startswith("nats:VF_DLQ_")

    listed = vf("dead-letters", str(flow), "--broker", url, "--run", run, "--json")
    assert listed.returncode == 0, listed.stderr
    letters = json.loads(listed.stdout)["letters"]
    assert len(letters) == 50
    assert {x["trace_id"] for x in letters} == {f"src:{x}" for x in range(3, 500, 10)}
    assert {x["node"] for x in letters} == {"picky"} and {x["parent"] for x in letters} == {"src"}
    assert all(x["error"].startswith("ValueError: no ") for x in letters)
    assert all(x["attempts"] == 1 and x["reason"] == "raised" for x in letters)

    human = vf("dead-letters", str(flow), "--broker", url, "--run", run)
    assert human.returncode == 0 and "dead letters of run" in human.stdout
    assert "ValueError: no 3" in human.stdout

    replay = vf("dead-letters", str(flow), "--broker", url, "--run", run, "--replay", "--json")
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["replayed"] == 50
    empty = vf("dead-letters", str(flow), "--broker", url, "--run", run, "--json")
    assert json.loads(empty.stdout)["letters"] == []

    # the fixed node and the sink take the replayed letters; src is done already
    env = {**os.environ, "PICKY_FIXED": "1"}
    procs = [
        subprocess.Popen(
            [
                str(VF),
                "worker",
                str(flow),
                "--node",
                node,
                "--broker",
                url,
                "--run",
                run,
                "--no-create",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for node in ("picky", "sink")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    assert sorted(read_lines(out)) == list(range(500))  # every item exactly once


def test_an_unreachable_broker_is_a_clear_error(tmp_path: Path) -> None:
    flow = write_flow(
        tmp_path,
        """
        flow = Flow([Record("/dev/null", name="sink")(Numbers(3, name="src"))], flow_type=BATCH)
        """,
    )
    result = vf("dead-letters", str(flow), "--broker", "nats://127.0.0.1:9", "--run", "r1")
    assert result.returncode == 2
    assert "broker-unreachable" in result.stderr and "Traceback" not in result.stderr
    bad = vf("dead-letters", str(flow), "--broker", "nats://127.0.0.1:9", "--run", "bad id!")
    assert bad.returncode == 2 and "invalid-run-id" in bad.stderr


def test_a_truncated_letter_is_not_replayed_and_the_sound_ones_are(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """A letter whose record was cut short (a bad copy, a stranger's message on the
    dead-letter subject) fails its seal: the replay leaves it where it is and says why
    — it is never decoded, nor sent to a worker — and the sound letters are replayed
    and processed (issues 23 and 24)."""
    import asyncio

    import nats

    from vfadapters.loading import load_runnable
    from vfcore.runtime import broker_topology

    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        class Picky(ProcessorNode):
            def process(self, x):
                if x % 10 == 3 and not os.environ.get("PICKY_FIXED"):
                    raise ValueError(f"no {{x}}")
                return x

        src = Numbers(40, name="src")
        sink = Record({str(out)!r}, name="sink")(Picky(name="picky")(src))
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    run, url = f"t{uuid.uuid4().hex[:10]}", nats_server.url
    done = vf("run", str(flow), "--broker", url, "--run", run, "--keep-streams", "--json",
              "--retries", "0", "--no-progress")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["dead_letters"] == 4
    topo = broker_topology(load_runnable(str(flow))[1], run)

    async def add_truncated() -> None:
        nc = await nats.connect(url)
        js = nc.jetstream()
        stream = topo.dead_letters.config.name
        first = await js.get_msg(stream, seq=1)  # a sound letter: copy its header
        header = json.loads(first.headers["Vf-Dead-Letter"])
        header["id"] = "truncated-copy"
        await js.publish(
            topo.dead_letters.subject_of("picky"),
            first.data[: len(first.data) // 2],
            headers={"Vf-Dead-Letter": json.dumps(header), "Nats-Msg-Id": "truncated-copy"},
        )
        await nc.close()

    asyncio.run(add_truncated())
    replay = vf("dead-letters", str(flow), "--broker", url, "--run", run, "--replay", "--json")
    assert replay.returncode == 1, replay.stderr  # one letter could not be replayed
    answer = json.loads(replay.stdout)
    assert answer["replayed"] == 4
    assert [x["why"].startswith("its record was refused") for x in answer["not_replayed"]] == [True]

    env = {**os.environ, "PICKY_FIXED": "1"}
    procs = [
        subprocess.Popen(
            [
                str(VF),
                "worker",
                str(flow),
                "--node",
                node,
                "--broker",
                url,
                "--run",
                run,
                *NO_CREATE,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for node in ("picky", "sink")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        assert b"Traceback" not in err
    assert sorted(read_lines(out)) == list(range(40))  # the four sound letters, once
    listed = vf("dead-letters", str(flow), "--broker", url, "--run", run, "--json")
    letters = json.loads(listed.stdout)["letters"]
    assert [x["id"] for x in letters] == ["truncated-copy"], letters  # still there
