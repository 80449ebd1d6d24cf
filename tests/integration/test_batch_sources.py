"""A producer that gives many items a call (``next_batch()``), run by ``vf run`` as users run it.

Both transports, the kinds of children that take each path of the producer loop
(runs taken in whole for unpartitioned BATCH children; item by item for partitioned
children and REALTIME), what a batch may be (a list, a tuple, a generator, empty,
None), and the batches a run refuses, naming the producer. Exactly once under kill -9
of a batch source is in the fault suite (its ``batches`` shape, tests/support/faults.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.support.flows import finish, read_lines, vf, write_flow
from vfadapters.broker.server import find_nats_server

TRANSPORTS = [
    pytest.param([], id="local"),
    pytest.param(
        ["--broker", "embedded"],
        id="broker",
        marks=pytest.mark.skipif(find_nats_server() is None, reason="no nats-server binary"),
    ),
]

#: 0..N-1 in calls of 1 to 250 items: a list, a tuple, a generator, [] or None in turn
SOURCE = """
class Batches(ProducerNode):
    def __init__(self, n, **kw):
        super().__init__(**kw)
        self.n = n

    def open(self):
        self.i = 0
        self.calls = 0

    def next_batch(self):
        if self.i >= self.n:
            raise StopIteration
        self.calls += 1
        form = self.calls % 5
        if form == 3:
            return []
        if form == 4:
            return None
        first = self.i
        self.i = min(self.n, first + 1 + (self.calls * 97) % 250)
        items = range(first, self.i)
        return list(items) if form == 0 else tuple(items) if form == 1 else iter(items)
"""


@pytest.mark.parametrize("broker", TRANSPORTS)
@pytest.mark.parametrize("children", ["competing", "partitioned"])
def test_a_batch_source_delivers_every_item_once(
    tmp_path: Path, broker: list[str], children: str
) -> None:
    n = 20_000
    out = tmp_path / "out.jsonl"
    partition = ', partition_by="trace_id"' if children == "partitioned" else ""
    flow = write_flow(
        tmp_path,
        SOURCE
        + f"""
src = Batches({n}, name="src")
work = Tag("w", name="work", nb_tasks=2{partition})(src)
flow = Flow([Record({str(out)!r}, name="sink")(work)], flow_type=BATCH)
""",
    )
    code, _, err = finish(vf("run", flow, "--no-progress", *broker), timeout=180)
    assert code == 0, err
    xs = Counter(line["x"] for line in read_lines(out))
    assert set(xs) == set(range(n)), n - len(xs)
    assert max(xs.values()) == 1


@pytest.mark.parametrize("broker", TRANSPORTS)
def test_a_realtime_batch_source_runs_item_by_item(tmp_path: Path, broker: list[str]) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        SOURCE
        + f"""
src = Batches(300, name="src", finite=True)
flow = Flow([Record({str(out)!r}, name="sink")(Tag("w", name="work")(src))],
            flow_type=REALTIME)
""",
    )
    code, _, err = finish(vf("run", flow, "--no-progress", *broker), timeout=180)
    assert code == 0, err
    xs = [line["x"] for line in read_lines(out)]
    assert xs and len(xs) == len(set(xs)) and set(xs) <= set(range(300))  # REALTIME may drop


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("return [1, None, 3]", "next_batch() returned None as item 1 of 3"),
        ('return "abc"', "next_batch() returned a str"),
        ("return 42", "next_batch() returned a int, not an iterable of items"),
    ],
    ids=["none-inside", "a-string", "not-iterable"],
)
def test_a_batch_the_run_cannot_take_fails_it_naming_the_producer(
    tmp_path: Path, body: str, said: str
) -> None:
    flow = write_flow(
        tmp_path,
        f"""
class Bad(ProducerNode):
    def next_batch(self):
        {body}

flow = Flow([Record({str(tmp_path / "out.jsonl")!r}, name="sink")(Bad(name="src"))],
            flow_type=BATCH)
""",
    )
    code, _, err = finish(vf("run", flow, "--no-progress"))
    assert code == 1, err
    assert f"src/0: next_batch() raised TypeError: {said}" in err, err
    assert "error: run-failed" in err


def test_a_batch_source_that_declares_ctx_is_refused(tmp_path: Path) -> None:
    flow = write_flow(
        tmp_path,
        f"""
class WithCtx(ProducerNode):
    def next_batch(self, ctx):
        return [1]

flow = Flow([Record({str(tmp_path / "out.jsonl")!r}, name="sink")(WithCtx(name="src"))],
            flow_type=BATCH)
""",
    )
    code, _, err = finish(vf("run", flow, "--no-progress"))
    assert code == 1, err
    assert "WithCtx.next_batch() declares ctx" in err, err
    assert "define next(self, ctx)" in err
