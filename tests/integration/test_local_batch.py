"""The local executor in BATCH: every item exactly once, end of stream, dead letters.

Real worker processes, real shared-memory rings. Each flow is written to a
file in ``tmp_path`` and run by path (as ``vf run`` does); its sinks append one
JSON line per item to a file (one ``write`` on an ``O_APPEND`` descriptor), so
what the test reads is what the consumers saw, even across process deaths.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.support.flows import VF, read_lines, write_flow
from vfadapters.local import RunOptions, run
from vfcore import partition_of


def test_competing_replicas_and_fan_out_deliver_every_item_exactly_once(tmp_path: Path) -> None:
    out, raw = tmp_path / "out.jsonl", tmp_path / "raw.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        src = Numbers(8_000, name="src")
        work = Tag("w", name="work", nb_tasks=2, sleep=0.0001)(src)
        sink = Record({str(out)!r}, name="sink")(work)
        raw = Record({str(raw)!r}, name="raw")(src)   # fan-out: src feeds work and raw
        flow = Flow([sink, raw], flow_type=BATCH)
        """,
    )
    summary = run(flow, RunOptions(progress=False))
    assert summary.status == "completed", summary.error
    items = read_lines(out)
    assert sorted(i["x"] for i in items) == list(range(8_000))
    assert sorted(read_lines(raw)) == list(range(8_000))
    by_replica = Counter(i["replica"] for i in items)
    assert set(by_replica) == {0, 1}, by_replica  # both competing replicas took work
    nodes = summary.nodes
    assert nodes["src"].processed == 8_000
    assert nodes["work"].processed == 8_000 and nodes["work"].replicas == 2
    assert nodes["sink"].processed == nodes["raw"].processed == 8_000
    assert summary.dead_letters == 0 and summary.redelivered == 0 and summary.evicted == 0


def test_partitioned_replicas_receive_only_the_keys_they_own(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        src = Numbers(9_000, keys=11, name="src", sets_keys=["key"])
        count = Count(name="count", nb_tasks=3, partition_by="key")(src)
        sink = Record({str(out)!r}, name="sink")(count)
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    summary = run(flow, RunOptions(progress=False))
    assert summary.status == "completed", summary.error
    items = read_lines(out)
    assert sorted(i["x"] for i in items) == list(range(9_000))
    for item in items:
        assert item["replica"] == partition_of(item["key"], 3), item
    # one owner per key, seeing its key's items in order: the nth are 1..k exactly
    per_key: dict[int, list[int]] = {}
    for item in sorted(items, key=lambda i: i["x"]):
        per_key.setdefault(item["key"], []).append(item["nth"])
    for key, nths in per_key.items():
        assert nths == list(range(1, len(nths) + 1)), key
    assert summary.nodes["count"].replicas == 3


def test_replicated_three_parent_join_partitioned_by_trace_id(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        src = Numbers(6_000, name="src")
        a = Tag("a", name="a", nb_tasks=2)(src)   # competing: halves arrive out of order
        b = Tag("b", name="b")(src)
        c = Tag("c", name="c")(src)
        join = Join3(name="join", nb_tasks=2, partition_by="trace_id")(a, b, c)
        sink = Record({str(out)!r}, name="sink")(join)
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    summary = run(flow, RunOptions(progress=False))
    assert summary.status == "completed", summary.error
    items = read_lines(out)
    assert len(items) == 6_000
    xs = []
    for item in items:
        a, b, c = item["parts"]
        assert (a["tag"], b["tag"], c["tag"]) == ("a", "b", "c")  # parent order
        assert a["x"] == b["x"] == c["x"]
        assert item["replica"] == partition_of(item["trace_id"], 2)
        xs.append(a["x"])
    assert sorted(xs) == list(range(6_000))
    assert summary.nodes["join"].processed == 6_000
    assert summary.nodes["join"].join_dropped == 0 and summary.dead_letters == 0


def test_a_raising_node_is_retried_then_dead_lettered_and_the_run_completes(
    tmp_path: Path,
) -> None:
    out, dead = tmp_path / "out.jsonl", tmp_path / "dead.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        class Flaky(ProcessorNode):
            def open(self):
                self.attempts = {{}}

            def process(self, x):
                self.attempts[x] = self.attempts.get(x, 0) + 1
                if x % 10 == 3:
                    raise ValueError(f"bad item {{x}}")
                if x % 10 == 5 and self.attempts[x] == 1:
                    raise TimeoutError("transient")
                return x

        src = Numbers(1_000, name="src")
        flaky = Flaky(name="flaky")(src)
        sink = Record({str(out)!r}, name="sink")(flaky)
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    summary = run(
        flow,
        RunOptions(progress=False, retries=2, dead_letter_path=str(dead), log_sink=lambda *a: None),
    )
    assert summary.status == "completed", summary.error
    got = sorted(read_lines(out))
    assert got == [x for x in range(1_000) if x % 10 != 3]
    letters = read_lines(dead)
    assert summary.dead_letters == len(letters) == 100
    assert summary.dead_letter_path == str(dead)
    letter = min(letters, key=lambda e: int(e["trace_id"].split(":")[1]))
    assert letter["node"] == "flaky" and letter["trace_id"] == "src:3"
    assert letter["error"] == "ValueError: bad item 3"
    assert letter["attempts"] == 3
    assert "raise ValueError" in letter["traceback"]
    flaky = summary.nodes["flaky"]
    assert flaky.errors == 100 * 3 + 100  # every failed attempt, transient ones included
    assert flaky.retries == 100 * 2 + 100
    assert flaky.dead_letters == 100


def test_vf_run_json_document_and_open_failure_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    good = write_flow(
        tmp_path,
        f"""
        class Chatty(ProcessorNode):
            def process(self, x):
                print("a node printing to stdout must not break --json")
                return x

        src = Numbers(500, name="src")
        sink = Record({str(out)!r}, name="sink")(Chatty(name="tag")(src))
        flow = Flow([sink], flow_type=BATCH)
        """,
        "good.py",
    )
    done = subprocess.run(
        [str(VF), "run", str(good), "--json"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["status"] == "completed"
    assert isinstance(doc["duration_s"], float)
    assert doc["dead_letters"] == 0
    for name in ("src", "tag", "sink"):
        assert {"replicas", "processed", "errors", "evicted"} <= set(doc["nodes"][name])
        assert doc["nodes"][name]["processed"] == 500

    bad = write_flow(
        tmp_path,
        """
        class NoModel(ProcessorNode):
            def open(self):
                raise RuntimeError("model weights not found at /nowhere")

            def process(self, x):
                return x

        src = Numbers(None, name="src")   # endless: the failure must end the run
        sink = Record("/dev/null", name="sink")(NoModel(name="detector")(src))
        flow = Flow([sink], flow_type=BATCH)
        """,
        "bad.py",
    )
    done = subprocess.run(
        [str(VF), "run", str(bad), "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["status"] == "failed"
    assert "detector/0: open() raised RuntimeError: model weights not found" in doc["error"]
    assert "error: run-failed" in done.stderr

    invalid = write_flow(
        tmp_path,
        """
        src = Numbers(10, name="src")
        pair = Join3(name="join", nb_tasks=2)(Tag("a", name="a")(src), Tag("b", name="b")(src),
                                              Tag("c", name="c")(src))
        flow = Flow([Record("/dev/null", name="sink")(pair)], flow_type=BATCH)
        """,
        "invalid.py",
    )
    done = subprocess.run(
        [str(VF), "run", str(invalid)], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 2
    assert "error: replicated-join-unpartitioned" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_backpressure_keeps_memory_bounded_and_loses_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    hwm = tmp_path / "hwm.json"
    flow = write_flow(
        tmp_path,
        f"""
        def peak_rss_mib():
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024

        class Blobs(ProducerNode):
            # 600 x 256 KiB = 150 MiB, produced as fast as the buffers allow
            def open(self):
                self.i = 0

            def next(self):
                if self.i >= 600:
                    raise StopIteration
                self.i += 1
                return bytes([self.i % 256]) * (256 * 1024)

            def close(self):
                record({str(hwm)!r}, {{"node": "blobs", "mib": peak_rss_mib()}})

        class Slow(ConsumerNode):
            def consume(self, blob):
                time.sleep(0.002)
                record({str(out)!r}, [blob[0], len(blob)])

            def close(self):
                record({str(hwm)!r}, {{"node": "slow", "mib": peak_rss_mib()}})

        flow = Flow([Slow(name="slow")(Blobs(name="blobs"))], flow_type=BATCH)
        """,
    )
    summary = run(flow, RunOptions(progress=False, buffer_mib=4))
    assert summary.status == "completed", summary.error
    got = read_lines(out)
    assert len(got) == 600 and all(n == 256 * 1024 for _, n in got)
    assert [b for b, _ in got] == [i % 256 for i in range(1, 601)]  # in order, none lost
    (edge,) = summary.edges
    assert edge.backpressure_waits > 0  # the producer was made to wait
    peaks = {e["node"]: e["mib"] for e in read_lines(hwm)}
    # 150 MiB went through a 4 MiB buffer: neither side held more than a few batches
    assert peaks["blobs"] < 100, peaks
    assert peaks["slow"] < 100, peaks


def test_batches_larger_than_a_buffer_are_split_and_a_message_too_big_fails_clearly(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        class Nested(ProducerNode):
            # 300 KiB hidden two levels down: batch-size estimates cannot see it
            def __init__(self, n, size, **kw):
                super().__init__(**kw)
                self.n, self.size = n, size

            def open(self):
                self.i = 0

            def next(self):
                if self.i >= self.n:
                    raise StopIteration
                self.i += 1
                return {{"outer": {{"inner": bytes([self.i]) * self.size}}}}

        class Size(ConsumerNode):
            def consume(self, item):
                blob = item["outer"]["inner"]
                record({str(out)!r}, [blob[0], len(blob)])

        def make(n, size):
            return Flow([Size(name="sink")(Nested(n, size, name="src"))], flow_type=BATCH)
        """,
    )
    flow.write_text(
        flow.read_text() + "\n\ndef small():\n    return make(40, 300 * 1024)\n"
        "\n\ndef huge():\n    return make(2, 3 * 1024 * 1024)\n"
    )
    summary = run(f"{flow}:small", RunOptions(progress=False, buffer_mib=1))
    assert summary.status == "completed", summary.error
    assert read_lines(out) == [[i, 300 * 1024] for i in range(1, 41)]

    summary = run(
        f"{flow}:huge", RunOptions(progress=False, buffer_mib=1, log_sink=lambda *a: None)
    )
    assert summary.status == "failed"
    assert summary.error is not None
    assert "more than the 1.0 MiB buffer holds" in summary.error
    assert "--buffer-mib 4" in summary.error
