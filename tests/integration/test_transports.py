"""One semantic suite, two transports: shared-memory rings and NATS JetStream.

Every test runs the same flow file through the local executor and through
``vf run --broker`` (every replica a ``vf worker`` process against a real
``nats-server`` started for the session), and asserts the same guarantees:
BATCH delivers every item exactly once through competing, partitioned and
joined replicas; a raising node is retried, then dead-lettered; REALTIME drops
are exactly produced - delivered and latency stays bounded; SIGTERM stops a run
cleanly. The sinks append one JSON line per item (one ``write`` on an
``O_APPEND`` descriptor), so what the test reads is what the consumers saw.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.flows import read_lines, write_flow
from tests.support.processes import node_pids
from vfadapters.broker.run import BrokerRunOptions, run_on_broker
from vfadapters.broker.server import NatsServer
from vfadapters.local import RunSummary, run
from vfadapters.runtime.options import RunOptions
from vfcore import partition_of
from vfcore.runtime import TopologyOptions

VF = Path(sys.executable).parent / "vf"

TRANSPORTS = ("local", "broker")


def run_id() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def run_on(
    transport: str,
    flow: Path,
    request: pytest.FixtureRequest,
    *,
    retries: int = 2,
    dead_letters: Path | None = None,
    ack_wait_s: float = 30.0,
) -> RunSummary:
    if transport == "local":
        return run(
            flow,
            RunOptions(
                progress=False,
                retries=retries,
                dead_letter_path=None if dead_letters is None else str(dead_letters),
            ),
        )
    server: NatsServer = request.getfixturevalue("nats_server")
    opts = RunOptions(
        progress=False,
        handle_signals=False,
        retries=retries,
        dead_letter_path=None if dead_letters is None else str(dead_letters),
    )
    bopts = BrokerRunOptions(
        broker=server.url,
        run_id=run_id(),
        topology=TopologyOptions(ack_wait_s=ack_wait_s),
    )
    return run_on_broker(str(flow), opts, bopts)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_competing_replicas_deliver_every_item_exactly_once(
    transport: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    out, raw = tmp_path / "out.jsonl", tmp_path / "raw.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        src = Numbers(3_000, name="src")
        work = Tag("w", name="work", nb_tasks=2, sleep=0.0005)(src)
        sink = Record({str(out)!r}, name="sink")(work)
        raw = Record({str(raw)!r}, name="raw")(src)   # fan-out: src feeds work and raw
        flow = Flow([sink, raw], flow_type=BATCH)
        """,
    )
    summary = run_on(transport, flow, request)
    assert summary.status == "completed", summary.error
    items = read_lines(out)
    assert sorted(i["x"] for i in items) == list(range(3_000))
    assert sorted(read_lines(raw)) == list(range(3_000))
    by_replica = Counter(i["replica"] for i in items)
    assert set(by_replica) == {0, 1}, by_replica  # both competing replicas took work
    nodes = summary.nodes
    assert nodes["src"].processed == 3_000
    assert nodes["work"].processed == 3_000 and nodes["work"].replicas == 2
    assert nodes["sink"].processed == nodes["raw"].processed == 3_000
    assert summary.dead_letters == 0 and summary.redelivered == 0 and summary.evicted == 0
    edges = {(e.parent, e.child): e for e in summary.edges}
    for key in (("src", "work"), ("src", "raw"), ("work", "sink")):
        assert edges[key].written == edges[key].delivered == 3_000, edges[key]
    doc = summary.to_dict()
    assert doc["transport"]["kind"] == transport
    if transport == "broker":
        assert doc["transport"]["duplicates_dropped"] == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_partitioned_replicas_receive_only_their_keys(
    transport: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        src = Numbers(3_000, keys=11, name="src", sets_keys=["key"])
        count = Count(name="count", nb_tasks=3, partition_by="key")(src)
        sink = Record({str(out)!r}, name="sink")(count)
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    summary = run_on(transport, flow, request)
    assert summary.status == "completed", summary.error
    items = read_lines(out)
    assert sorted(i["x"] for i in items) == list(range(3_000))
    delivered = Counter(i["replica"] for i in items)
    expected = Counter(partition_of(x % 11, 3) for x in range(3_000))
    assert delivered == expected  # each replica was delivered exactly its keys' items
    for item in items:
        assert item["replica"] == partition_of(item["key"], 3), item
    per_key: dict[int, list[int]] = {}
    for item in sorted(items, key=lambda i: i["x"]):
        per_key.setdefault(item["key"], []).append(item["nth"])
    for key, nths in per_key.items():  # one owner per key, in order
        assert nths == list(range(1, len(nths) + 1)), key


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_replicated_three_parent_join_on_trace_id(
    transport: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        src = Numbers(2_000, name="src")
        a = Tag("a", name="a", nb_tasks=2)(src)   # competing: halves arrive out of order
        b = Tag("b", name="b")(src)
        c = Tag("c", name="c")(src)
        join = Join3(name="join", nb_tasks=2, partition_by="trace_id")(a, b, c)
        sink = Record({str(out)!r}, name="sink")(join)
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    summary = run_on(transport, flow, request)
    assert summary.status == "completed", summary.error
    items = read_lines(out)
    assert len(items) == 2_000
    xs = []
    for item in items:
        a, b, c = item["parts"]
        assert (a["tag"], b["tag"], c["tag"]) == ("a", "b", "c")
        assert a["x"] == b["x"] == c["x"]
        assert item["replica"] == partition_of(item["trace_id"], 2)
        xs.append(a["x"])
    assert sorted(xs) == list(range(2_000))
    assert summary.nodes["join"].processed == 2_000
    assert summary.nodes["join"].join_dropped == 0 and summary.dead_letters == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_raising_node_is_retried_then_dead_lettered(
    transport: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    out, dead = tmp_path / "out.jsonl", tmp_path / "dead.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        class Picky(ProcessorNode):
            def process(self, x):
                if x % 10 == 3:
                    raise ValueError(f"no {{x}}")
                return x

        src = Numbers(500, name="src")
        sink = Record({str(out)!r}, name="sink")(Picky(name="picky")(src))
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    summary = run_on(transport, flow, request, retries=1, dead_letters=dead)
    assert summary.status == "completed", summary.error
    assert sorted(read_lines(out)) == [x for x in range(500) if x % 10 != 3]
    picky = summary.nodes["picky"]
    assert picky.dead_letters == summary.dead_letters == 50
    assert picky.errors == 100 and picky.retries == 50  # two attempts each
    if transport == "broker":
        # the server was shared, so the letters stay in the run's dead-letter stream
        assert summary.dead_letter_path is not None
        assert summary.dead_letter_path.startswith("nats:VF_DLQ_")
    else:
        letters = read_lines(dead)
        assert len(letters) == 50
        assert {entry["trace_id"] for entry in letters} == {f"src:{x}" for x in range(3, 500, 10)}


REALTIME_FLOW = """
class Paced(ProducerNode):
    # 1,200 items at 600 items/s: 2 s if it never blocks
    def open(self):
        self.i = 0
        self.start = time.monotonic()

    def next(self):
        if self.i >= 1200:
            raise StopIteration
        due = self.start + self.i / 600
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        self.i += 1
        return self.i

class Slow(ProcessorNode):
    def process(self, x):
        time.sleep(0.005)   # 200 items/s: two of three must be dropped
        return x

src = Paced(name="camera")
sink = Record({out!r}, name="sink")(Slow(name="slow")(src))
flow = Flow([sink], flow_type=REALTIME)
"""


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_realtime_drops_are_produced_minus_delivered_and_latency_is_bounded(
    transport: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(tmp_path, REALTIME_FLOW.format(out=str(out)))
    summary = run_on(transport, flow, request)
    assert summary.status == "completed", summary.error
    produced = summary.nodes["camera"].processed
    delivered = read_lines(out)
    assert produced == 1200
    assert 0 < len(delivered) < produced
    assert len(set(delivered)) == len(delivered)  # nothing twice
    assert delivered == sorted(delivered)  # survivors in order
    edges = {(e.parent, e.child): e for e in summary.edges}
    assert edges[("camera", "slow")].evicted > 0
    for e in edges.values():
        assert e.written - e.delivered == e.evicted, e
    assert summary.evicted == produced - len(delivered)
    latency = summary.nodes["sink"].latency
    assert latency is not None and latency.messages == len(delivered)
    # fresh frames only: a message waits for the one in hand and the one kept
    # (2 × 5 ms), plus transport; 0.5 s leaves room for a loaded 2-core machine
    assert latency.p99_ms < 500, latency


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sigterm_stops_the_run_cleanly(
    transport: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        src = Numbers(None, name="src", sleep=0.001)   # never ends by itself
        sink = Record({str(out)!r}, name="sink")(Tag("w", name="work", nb_tasks=2)(src))
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    cmd = [str(VF), "run", str(flow), "--json", "--no-progress"]
    if transport == "broker":
        server: NatsServer = request.getfixturevalue("nats_server")
        cmd += ["--broker", server.url, "--run", run_id()]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(read_lines(out)) < 50 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr.decode()
    doc = json.loads(stdout)
    assert doc["status"] == "stopped"
    assert doc["stop"]["signal"] == "SIGTERM"
    produced = doc["nodes"]["src"]["processed"]
    got = sorted(i["x"] for i in read_lines(out))
    # drained: everything produced before the stop reached the sink, once
    assert got == list(range(produced)), (len(got), produced)
    assert doc["nodes"]["sink"]["processed"] == produced
    if transport == "broker":
        assert "Traceback" not in stderr.decode()


def test_broker_kill_9_of_a_worker_loses_nothing_and_duplicates_are_dropped(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        src = Numbers(3_000, name="src")
        work = Tag("w", name="work", nb_tasks=2, sleep=0.002)(src)
        sink = Record({str(out)!r}, name="sink")(work)
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    rid = run_id()
    cmd = [str(VF), "run", str(flow), "--json", "--no-progress", "--broker", nats_server.url]
    cmd += ["--run", rid, "--ack-wait", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(read_lines(out)) < 300 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    victims = node_pids(proc.pid, "work")
    assert len(victims) == 2, victims
    os.kill(victims[0], signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr.decode()
    doc = json.loads(stdout)
    assert doc["status"] == "completed"
    assert doc["nodes"]["work"]["restarts"] == 1
    xs = [i["x"] for i in read_lines(out)]
    assert sorted(set(xs)) == list(range(3_000))  # nothing lost
    # what the killed replica had published before dying was published again by
    # whoever processed its messages after ack_wait: the stream dropped those
    assert len(xs) == 3_000, Counter(xs).most_common(3)


def test_broker_restart_of_the_server_mid_run_loses_nothing(
    fresh_nats_server: NatsServer, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        src = Numbers(2_000, name="src", sleep=0.001)
        work = Tag("w", name="work", nb_tasks=2)(src)
        sink = Record({str(out)!r}, name="sink")(work)
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    server = fresh_nats_server
    cmd = [str(VF), "run", str(flow), "--json", "--no-progress", "--broker", server.url]
    cmd += ["--run", run_id(), "--ack-wait", "3"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(read_lines(out)) < 200 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    server.stop()
    time.sleep(1.0)
    server.start()  # same ports, same store: file-backed BATCH streams come back
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr.decode()[-3000:]
    doc = json.loads(stdout)
    assert doc["status"] == "completed"
    xs = [i["x"] for i in read_lines(out)]
    assert sorted(set(xs)) == list(range(2_000)), len(set(xs))  # nothing lost
    duplicates = len(xs) - len(set(xs))
    # a restart can lose acks in flight: those messages come again; the sink is
    # told twice at most what it had consumed but not yet acknowledged
    assert duplicates <= doc["redelivered"], (duplicates, doc["redelivered"])


def test_broker_two_flows_and_two_runs_on_one_server_stay_apart(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    procs: list[tuple[subprocess.Popen[bytes], Path, int]] = []
    for i, (name, n) in enumerate((("alpha", 700), ("alpha", 900), ("beta", 500))):
        folder = tmp_path / f"f{i}"
        folder.mkdir()
        out = folder / "out.jsonl"
        flow = write_flow(
            folder,
            f"""
            src = Numbers({n}, name="src")
            sink = Record({str(out)!r}, name="sink")(Tag("w", name="work")(src))
            flow = Flow([sink], flow_type=BATCH, name={name!r})
            """,
        )
        cmd = [str(VF), "run", str(flow), "--json", "--no-progress", "--broker", nats_server.url]
        procs.append(
            (subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE), out, n)
        )
    for proc, out, n in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr.decode()
        assert json.loads(stdout)["status"] == "completed"
        got = read_lines(out)
        assert sorted(i["x"] for i in got) == list(range(n))  # its own items, no others


def test_broker_autoscale_reads_consumer_lag_grows_and_retires(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """--autoscale over the broker: the backlog is the consumer's pending + ack pending
    (what KEDA reads); replicas start as ``vf worker`` processes and retire on SIGTERM
    (finish the message in hand, hand back the rest); every item exactly once."""
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        class Burst(ProducerNode):
            # 1,500 items at once (6 s of work for one replica), 7 s of silence, 20 more
            def open(self):
                self.i = 0

            def next(self):
                if self.i == 1500:
                    time.sleep(7.0)
                if self.i >= 1520:
                    raise StopIteration
                self.i += 1
                return self.i

        src = Burst(name="src")
        work = Tag("w", name="work", sleep=0.004)(src)     # 250 items/s per replica
        flow = Flow([Record({str(out)!r}, name="sink")(work)], flow_type=BATCH)
        """,
    )
    opts = RunOptions(
        progress=False,
        handle_signals=False,
        autoscale=True,
        max_replicas=3,
        scale_interval_s=0.5,
        scale_target=10,
        log_sink=lambda *a: None,
    )
    summary = run_on_broker(
        str(flow), opts, BrokerRunOptions(broker=nats_server.url, run_id=run_id())
    )
    assert summary.status == "completed", summary.error
    items = read_lines(out)
    assert sorted(i["x"] for i in items) == list(range(1, 1521))  # exactly once
    events = [(e.node, e.replicas_from, e.replicas_to) for e in summary.scaling]
    assert events and events[0][0] == "work" and events[0][2] > events[0][1], events  # grew
    assert any(to < frm for _, frm, to in events), events  # then shrank
    assert summary.nodes["work"].max_replicas >= 2
    assert len({i["replica"] for i in items}) >= 2  # the new replicas took work


@pytest.mark.parametrize("with_ctx", [False, True], ids=["next()", "next(ctx)"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_source_that_blocks_after_a_burst_does_not_hold_the_burst(
    transport: str, with_ctx: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """300 items at once, then next() blocks until the sink holds all 300 (at most
    20 s): the producer's thread is inside next(), so the source watch writes the open
    segment (vfadapters/runtime/source_watch.py). Without it the burst waited for
    next() to return: the source timed out and the test saw it."""
    out = tmp_path / "out.jsonl"
    waited = tmp_path / "waited"
    signature = "self, ctx" if with_ctx else "self"
    flow = write_flow(
        tmp_path,
        f"""
        class Burst(ProducerNode):
            def open(self):
                self.i = 0

            def next({signature}):
                if self.i == 300:
                    t0 = time.monotonic()
                    seen = 0
                    while time.monotonic() - t0 < 20.0:
                        if os.path.exists({str(out)!r}):
                            with open({str(out)!r}) as f:
                                seen = sum(1 for _ in f)
                        if seen >= 300:
                            break
                        time.sleep(0.02)
                    with open({str(waited)!r}, "w") as f:
                        f.write(f"{{seen}} {{time.monotonic() - t0:.3f}}")
                if self.i >= 305:
                    raise StopIteration
                self.i += 1
                return self.i

        src = Burst(name="src")
        flow = Flow([Record({str(out)!r}, name="sink")(src)], flow_type=BATCH)
        """,
    )
    summary = run_on(transport, flow, request)
    assert summary.status == "completed", summary.error
    seen, took = waited.read_text().split()
    assert int(seen) == 300, f"the sink had {seen} of the burst's 300 items after {took} s"
    assert sorted(read_lines(out)) == list(range(1, 306))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_node_whose_open_raises_fails_the_run_naming_it(
    transport: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    flow = write_flow(
        tmp_path,
        """
        class Broken(ProcessorNode):
            def open(self):
                raise RuntimeError("model file missing")

            def process(self, x):
                return x

        src = Numbers(None, name="src", sleep=0.001)   # would never end by itself
        sink = Record("/dev/null", name="sink")(Broken(name="broken")(src))
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    cmd = [str(VF), "run", str(flow), "--json", "--no-progress"]
    if transport == "broker":
        server: NatsServer = request.getfixturevalue("nats_server")
        cmd += ["--broker", server.url, "--run", run_id()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["status"] == "failed"
    assert "broken" in doc["error"] and "model file missing" in doc["error"], doc["error"]
    assert "run-failed" in done.stderr


def test_broker_a_batch_longer_than_ack_wait_is_said_in_progress_not_handed_out_again(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """One message of 80 items for a node taking 50 ms an item (4 s) under a 1.5 s
    ack_wait: the replica, alive, says the message is in progress (+WPI) every
    third of ack_wait, so the server never hands it out again — the replica's kept
    counters show no copy of a message it held. Without it the server handed it
    out again (80 items redelivered, then found done in the ledger)."""
    import asyncio

    import nats

    from vfadapters.loading import load_runnable
    from vfcore.runtime import broker_topology

    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        slow = Tag("s", name="slow", sleep=0.05)(Numbers(80, name="src"))
        flow = Flow([Record({str(out)!r}, name="sink")(slow)], flow_type=BATCH)
        """,
    )
    rid = run_id()
    summary = run_on_broker(
        str(flow),
        RunOptions(progress=False, handle_signals=False),
        BrokerRunOptions(
            broker=nats_server.url,
            run_id=rid,
            keep_streams=True,
            topology=TopologyOptions(ack_wait_s=1.5),
        ),
    )
    assert summary.status == "completed", summary.error
    assert sorted(i["x"] for i in read_lines(out)) == list(range(80))
    topo = broker_topology(load_runnable(str(flow))[1], rid)

    async def stats_of_slow() -> dict[str, Any]:
        nc = await nats.connect(nats_server.url)
        try:
            kv = await nc.jetstream().key_value(topo.control.bucket)
            entry = await kv.get(topo.control.stats_key("slow", 0))
            doc: dict[str, Any] = json.loads(entry.value or b"{}")
            return doc
        finally:
            await nc.close()

    doc = asyncio.run(stats_of_slow())
    assert doc["in"]["src"]["copies"] == 0, doc["in"]
    assert doc["in"]["src"]["redelivered"] == 0, doc["in"]
    assert doc["progress_acks"] >= 2, doc["progress_acks"]
