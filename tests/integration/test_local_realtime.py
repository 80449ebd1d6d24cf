"""The local executor in REALTIME: producers never block, every eviction is counted.

A paced producer (2,000 items/s) feeds a node that handles 250 items/s
through small buffers: most items are evicted, the producer keeps its pace, and
the evictions counted on the edges are exactly produced - delivered.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.flows import read_lines, write_flow
from vfadapters.local import RunOptions, run
from vfcore import InvalidInputError


def test_a_slow_node_evicts_the_oldest_and_counts_produced_minus_delivered(
    tmp_path: Path,
) -> None:
    out, timing = tmp_path / "out.jsonl", tmp_path / "timing.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        class Paced(ProducerNode):
            # 3,000 items at 2,000 items/s: 1.5 s if it never blocks
            def open(self):
                self.i = 0
                self.start = time.monotonic()

            def next(self):
                if self.i >= 3000:
                    raise StopIteration
                due = self.start + self.i / 2000
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                self.i += 1
                return self.i

            def close(self):
                record({str(timing)!r}, time.monotonic() - self.start)

        class Slow(ProcessorNode):
            def process(self, x):
                time.sleep(0.004)
                return x

        src = Paced(name="camera")
        slow = Slow(name="slow")(src)
        sink = Record({str(out)!r}, name="sink")(slow)
        flow = Flow([sink], flow_type=REALTIME)
        """,
    )
    t0 = time.monotonic()
    summary = run(flow, RunOptions(progress=False, buffer_messages=32))
    assert summary.status == "completed", summary.error
    assert time.monotonic() - t0 < 20
    (producer_s,) = read_lines(timing)
    # kept its pace (1.5 s; blocked by the slow node it would take 12 s): slack for load
    assert producer_s < 4.0, producer_s
    delivered = read_lines(out)
    produced = summary.nodes["camera"].processed
    assert produced == 3000
    assert 0 < len(delivered) < produced
    assert len(set(delivered)) == len(delivered)  # nothing twice
    assert delivered == sorted(delivered)  # the survivors in order
    evicted_edges = {(e.parent, e.child): e.evicted for e in summary.edges}
    assert evicted_edges[("camera", "slow")] > 0
    assert sum(evicted_edges.values()) == summary.evicted == produced - len(delivered)
    assert summary.nodes["slow"].evicted == evicted_edges[("camera", "slow")]


def test_a_realtime_join_drops_halves_that_time_out_and_counts_them(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        class Drop5(ProcessorNode):
            def process(self, x):
                return None if x % 5 == 0 else x   # None: nothing emitted

        class Pair(ProcessorNode):
            def process(self, left, right):
                return [left, right]

        src = Numbers(500, name="src", sleep=0.001)
        left = Tag("l", name="left")(src)
        right = Drop5(name="right")(src)
        pair = Pair(name="pair", join_policy=JoinPolicy(timeout_ms=200, missing="drop"))(
            left, right
        )
        flow = Flow([Record({str(out)!r}, name="sink")(pair)], flow_type=REALTIME)
        """,
    )
    # about join timeouts, not freshness: buffers deep enough that nothing is evicted
    # (with the freshest one kept, what src emits while the join's workers still
    # start, or while a loaded machine stalls them, is evicted, as REALTIME should)
    summary = run(flow, RunOptions(progress=False, realtime_keep=4096))
    assert summary.status == "completed", summary.error
    pairs = read_lines(out)
    assert sorted(r for _, r in pairs) == [x for x in range(500) if x % 5]
    assert summary.nodes["right"].filtered == 100
    assert summary.nodes["pair"].join_dropped == 100  # the left halves of x % 5 == 0
    assert summary.nodes["pair"].processed == 400
    assert summary.dead_letters == 0  # REALTIME drops are counted, not dead-lettered


# -- the freshest few: the keep bound, end-to-end latency ------------------------------

PACED_3000 = """
class Paced(ProducerNode):
    # 3,000 items at 2,000 items/s
    def open(self):
        self.i = 0
        self.start = time.monotonic()

    def next(self):
        if self.i >= 3000:
            raise StopIteration
        delay = self.start + self.i / 2000 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        self.i += 1
        return self.i

class Slow(ProcessorNode):
    def process(self, x):
        time.sleep(0.002)
        return x
"""


def test_realtime_keeps_the_freshest_by_default_and_latency_stays_bounded(
    tmp_path: Path,
) -> None:
    """The issue's case: 3,000 messages at 2,000/s through a 2 ms node (1,000/s).

    With 4,096 messages per buffer (the old REALTIME default) nothing was
    evicted and the sink saw p50 2.5 s, p99 4.9 s: every frame late. Now each
    buffer keeps the freshest message: about half are evicted, counted per edge,
    and what arrives is fresh. Bound: a message waits at most for the one in hand
    and one kept (2 × 2 ms) plus the producer's linger (2 ms); 0.5 s leaves room
    for a loaded machine and is still 10× below the old p99.
    """
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        PACED_3000
        + f"""
src = Paced(name="camera")
sink = Record({str(out)!r}, name="sink")(Slow(name="slow")(src))
flow = Flow([sink], flow_type=REALTIME)
""",
    )
    summary = run(flow, RunOptions(progress=False))
    assert summary.status == "completed", summary.error
    produced = summary.nodes["camera"].processed
    delivered = read_lines(out)
    assert produced == 3000
    edges = {(e.parent, e.child): e for e in summary.edges}
    camera = edges[("camera", "slow")]
    assert camera.realtime_keep == 1 and edges[("slow", "sink")].realtime_keep == 1
    assert camera.evicted > 0
    for e in edges.values():
        assert e.written - e.delivered == e.evicted
    assert summary.evicted == produced - len(delivered)
    assert delivered == sorted(delivered) and len(set(delivered)) == len(delivered)
    latency = summary.nodes["sink"].latency
    assert latency is not None and latency.messages == len(delivered)
    assert latency.p50_ms <= latency.p99_ms <= latency.max_ms
    assert latency.p99_ms < 500, latency
    assert summary.latency == latency  # one consumer: the run's figure is the sink's
    doc = summary.to_dict()
    assert doc["nodes"]["sink"]["latency"]["p99_ms"] == round(latency.p99_ms, 3)
    assert doc["nodes"]["slow"]["latency"] is None  # only consumers measure


def _blocked_flow(tmp_path: Path, n: int) -> tuple[Path, Path]:
    """``n`` items as fast as possible into a consumer that holds its first item until
    the producer has ended: what it then gets is exactly what its buffer kept."""
    out, done = tmp_path / "out.jsonl", tmp_path / "producer-done"
    flow = write_flow(
        tmp_path,
        f"""
class Burst(ProducerNode):
    def open(self):
        self.i = 0

    def next(self):
        if self.i >= {n}:
            raise StopIteration
        self.i += 1
        return self.i

    def close(self):
        open({str(done)!r}, "w").close()

class HoldFirst(ConsumerNode):
    def open(self):
        self.first = True

    def consume(self, x):
        if self.first:
            self.first = False
            deadline = time.monotonic() + 30
            while not os.path.exists({str(done)!r}) and time.monotonic() < deadline:
                time.sleep(0.01)
        record({str(out)!r}, x)

flow = Flow([HoldFirst(name="hold")(Burst(name="camera"))], flow_type=REALTIME)
""",
    )
    return flow, out


def test_the_realtime_keep_knob_sets_how_many_wait(tmp_path: Path) -> None:
    for keep in (None, 40):
        folder = tmp_path / f"keep-{keep}"
        folder.mkdir()
        flow, out = _blocked_flow(folder, 400)
        summary = run(flow, RunOptions(progress=False, realtime_keep=keep))
        assert summary.status == "completed", summary.error
        delivered = read_lines(out)
        edge = next(e for e in summary.edges if e.child == "hold")
        assert edge.evicted == 400 - summary.nodes["hold"].received
        if keep is None:
            # the item in hand, then the one kept: records of one message each (only
            # the one kept when the consumer started after the producer had ended, as
            # on a loaded machine)
            assert edge.realtime_keep == 1
            assert 1 <= len(delivered) <= 2, delivered
            assert delivered[-1] == 400
        else:
            # the first record (at most 8), then at most 40 kept in records of at most 8
            assert edge.realtime_keep == 40
            assert 1 + 40 - 7 <= len(delivered) <= 8 + 40, len(delivered)
            assert delivered[-1] == 400
        assert delivered == sorted(delivered)


def test_batch_is_unaffected_and_reports_latency_too(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
sink = Record({str(out)!r}, name="sink")(Tag("t", name="tag")(Numbers(300, name="src")))
flow = Flow([sink], flow_type=BATCH)
""",
    )
    summary = run(
        flow, RunOptions(progress=False, realtime_keep=1)
    )  # REALTIME only: no effect here
    assert summary.status == "completed", summary.error
    assert len(read_lines(out)) == 300
    assert summary.evicted == 0
    assert all(e.realtime_keep is None for e in summary.edges)
    latency = summary.nodes["sink"].latency
    assert latency is not None and latency.messages == 300


@pytest.mark.parametrize("keep", [0, -1, True, 1 << 25])
def test_an_invalid_realtime_keep_is_refused_before_anything_starts(
    tmp_path: Path, keep: object
) -> None:
    flow = write_flow(tmp_path, "flow = Flow([Record('x', name='sink')(Numbers(1, name='src'))])")
    with pytest.raises(InvalidInputError) as info:
        run(flow, RunOptions(progress=False, realtime_keep=keep))  # type: ignore[arg-type]
    assert info.value.rule == "realtime-keep-out-of-range"
