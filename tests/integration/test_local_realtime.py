"""The local executor in REALTIME: producers never block, every eviction is counted.

A paced producer (2,000 items/s) feeds a node that handles 250 items/s
through small buffers: most items are evicted, the producer keeps its pace, and
the evictions counted on the edges are exactly produced - delivered.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.integration.test_local_batch import read_lines, write_flow
from vfadapters.local import run


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
    summary = run(flow, progress=False, buffer_messages=32)
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
    summary = run(flow, progress=False)
    assert summary.status == "completed", summary.error
    pairs = read_lines(out)
    assert sorted(r for _, r in pairs) == [x for x in range(500) if x % 5]
    assert summary.nodes["right"].filtered == 100
    assert summary.nodes["pair"].join_dropped == 100  # the left halves of x % 5 == 0
    assert summary.nodes["pair"].processed == 400
    assert summary.dead_letters == 0  # REALTIME drops are counted, not dead-lettered
