"""The node runtime's column loops against its item-by-item loop, the reference.

``Worker.produce_columns`` and ``Worker.single_columns`` keep a batch as columns
and cut each edge's parts from lists; ``produce_envelopes`` and the envelope loop
of ``run_single`` route every item through ``emit()`` and ``cut()``. Exactly once
rests on both writing the same items under the same output keys (a batch handled
by one loop may be redelivered to a replica running the other after an upgrade):
each law runs one ``Worker`` twice over an in-memory transport, once each way, and
compares every write (edge, origin, chunk, part, index, positions, items), every
settlement's tally, every dead letter and the replica's counters.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from vfadapters.broker.transport import BrokerControl
from vfadapters.runtime import producer_loop
from vfadapters.runtime.columns import Columns
from vfadapters.runtime.config import SLOT, EdgePlan, NodeConfig
from vfadapters.runtime.worker import Worker
from vfcore import NodeSpec
from vfcore.runtime import InputOrigin

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

#: the latency clock of the fake transport (ns): steps of 1 ms
_TICK = 1_000_000


class _Letters:
    def __init__(self) -> None:
        self.got: list[Any] = []

    def put(self, letter: Any, envelope: Any) -> None:
        env = None if envelope is None else (envelope[0], envelope[2], envelope[3])
        self.got.append((letter.id, letter.trace_id, letter.reason, letter.attempts, env))


class _Outlet:
    def __init__(self, log: list[Any], edge: int) -> None:
        self.log = log
        self.edge = edge

    def write(self, envelopes: Any, key: Any) -> int:
        items = []
        for tid, ts, meta, payload, emitted in envelopes:
            assert ts == emitted / 1e6  # no node here sets an event time that is kept
            items.append((tid, meta, payload))
        origin = None if key.origin is None else key.origin.text
        self.log.append(
            (self.edge, origin, key.chunk, key.part, key.index, tuple(key.positions), items)
        )
        return len(items)


class _Batch:
    def __init__(self, seq: int, cols: Columns) -> None:
        self.count = len(cols)
        self.redelivered = False
        self.outstanding = len(cols)
        self.settled = False
        self.tally: Any = None
        self.origin = InputOrigin("p", seq)
        self.cols = cols

    def envelopes(self) -> Columns:
        return self.cols


class _Input:
    parent = "p"

    def __init__(self, batches: list[_Batch], settled: list[Any]) -> None:
        self.batches = list(batches)
        self.settled = settled

    def claim(self) -> Any:
        return self.batches.pop(0) if self.batches else False

    def settle(self, batches: Any, tally: Any) -> None:
        for b in batches:
            self.settled.append((b.origin.text, None if tally is None else tally.to_dict()))

    def chunking(self, batch: Any, proposed: Any) -> tuple[int, ...]:
        return tuple(proposed)

    def already_done(self, batch: Any) -> bool:
        return False

    def wait(self, timeout_s: float) -> None:
        return None

    def wake(self) -> None:
        return None


class _Transport:
    def __init__(self, node: Any, batches: list[_Batch], costs: list[int]) -> None:
        self.node = node
        self.control = BrokerControl()  # the broker's: counters in this process
        self.letters = _Letters()
        self.log: list[Any] = []
        self.settled: list[Any] = []
        self.segments: list[Any] = []
        self.events: list[Any] = []
        self.costs = costs
        self.inp = _Input(batches, self.settled) if batches is not None else None
        self.now = 0

    def latency_clock(self) -> int:
        self.now += _TICK
        return self.now

    def attach(self, cfg: Any) -> None:
        return None

    def log_handler(self, prefix: str) -> logging.Handler:
        return logging.NullHandler()

    def build_node(self) -> Any:
        return self.node

    def inputs(self) -> list[Any]:
        return [] if self.inp is None else [self.inp]

    def outlets(self, edge: int) -> list[Any]:
        return [_Outlet(self.log, edge)]

    def send(self, event_: Any) -> None:
        self.events.append(event_[0])

    def child_cost(self, edge: int) -> int:
        return self.costs[edge]

    def wait(self, timeout_s: float) -> None:
        return None

    def producer_resume(self) -> None:
        return None

    def begin_segment(self, seg: Any) -> None:
        self.segments.append(("begin", seg.start, tuple(seg.limits)))

    def seal_segment(self, seg: Any) -> None:
        self.segments.append(("seal", seg.start, seg.end))

    def end_segment(self, seg: Any, tally: Any) -> None:
        self.segments.append(("end", seg.start, tally.to_dict()))

    def groups_done(self, groups: Any) -> None:
        return None

    def was_emitted(self, group: Any) -> bool:
        return False

    def finished(self) -> None:
        return None

    def close(self) -> None:
        return None


def _config(kind: str, edges: int, batch_max: int, batch_bytes: int, shared: bool) -> NodeConfig:
    child = NodeSpec(name="c", kind="consumer", parents=("n",))
    plans = tuple(
        EdgePlan(f"c{e}", child, "competing" if shared else "single", "modulo", 1, shared)
        for e in range(edges)
    )
    return NodeConfig(
        run_id="r1",
        node="n",
        token="n",
        replica=0,
        pod="n-0",
        replicas=1,
        spec=NodeSpec(name="n", kind=kind, parents=() if kind == "producer" else ("p",)),  # type: ignore[arg-type]
        flow_type="batch",
        join_policy=None,
        retries=1,
        edges=plans,
        parents=() if kind == "producer" else ("p",),
        linger_s=1e9,  # segments end by count, bytes, a None or the end: not by time
        batch_max=batch_max,
        batch_bytes=batch_bytes,
    )


def _payload(v: int) -> Any:
    """What a node emits for value ``v``: small or large bytes, or a tuple."""
    if v % 4 == 0:
        return (v, b"t" * (v % 50))
    return b"%d:" % v + b"x" * ((v * 37) % 300)


class _Processor:
    def __init__(self, with_ctx: bool) -> None:
        self.flaky: set[int] = set()
        self.with_ctx = with_ctx
        if with_ctx:
            self.process = self._process_ctx
        else:
            self.process = self._process

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def _outcome(self, v: int) -> Any:
        if v % 7 == 0:
            return None  # filtered
        if v % 11 == 0:
            raise ValueError(f"never {v}")  # dead-lettered
        if v % 13 == 0 and v not in self.flaky:
            self.flaky.add(v)
            raise ValueError(f"once {v}")  # retried, then emitted
        return _payload(v)

    def _process(self, x: Any) -> Any:
        return self._outcome(x)

    def _process_ctx(self, x: Any, ctx: Any) -> Any:
        assert ctx.trace_id == f"src:{x}" or ctx.trace_id == f"t{x}"
        if x % 5 == 0:
            ctx.set_partition_key("k", x)
        if x % 17 == 0:
            ctx.event_ts_ms = 1.5  # read back below; not what is emitted
            assert ctx.event_ts_ms == 1.5
        return self._outcome(x)


class _Consumer(_Processor):
    def __init__(self, with_ctx: bool) -> None:
        super().__init__(with_ctx)
        self.consume = self.process


class _Source:
    def __init__(self, values: list[int | None]) -> None:
        self.values = values
        self.i = 0

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def next(self) -> Any:
        if self.i >= len(self.values):
            raise StopIteration
        v = self.values[self.i]
        self.i += 1
        return None if v is None else _payload(v)


def _counters(t: _Transport) -> list[int]:
    ctl, base = t.control.ctl, t.control.base
    skip = {SLOT.COST_NS, SLOT.PID, SLOT.STATE}
    return [int(ctl[base + f]) for f in range(SLOT.FIELDS) if f not in skip]


def _run(cfg: NodeConfig, node: Any, batches: Any, costs: list[int], columns: bool) -> Any:
    t = _Transport(node, batches, costs)
    w = Worker(cfg, t)  # type: ignore[arg-type]
    w.columns = columns
    assert w.main() == 0, t.events
    writes = sorted(t.log, key=lambda w_: w_[0])  # per edge, in write order
    return writes, t.settled, t.segments, t.letters.got, _counters(t)


def _batches(draw: Any) -> list[_Batch]:
    out = []
    v = 1
    for seq in range(1, draw(st.integers(1, 5)) + 1):
        n = draw(st.integers(1, 24))
        values = list(range(v, v + n))
        v += n + draw(st.integers(0, 3))
        emitted = [1_000_000 * x for x in values]
        form = draw(st.sampled_from(["range", "ids", "meta"]))
        if form == "range":
            cols = Columns(values, emitted, prefix="src:", first=values[0])
        else:
            metas = [{"m": x} if x % 3 == 0 else None for x in values] if form == "meta" else None
            cols = Columns(values, emitted, ids=[f"t{x}" for x in values], metas=metas)
        out.append(_Batch(seq, cols))
    return out


_COSTS = st.sampled_from([0, 200_000, 500_000, 1_000_000, 3_000_000])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_one_parent_columns_write_what_the_envelope_loop_writes(data: Any) -> None:
    kind = data.draw(st.sampled_from(["processor", "consumer"]))
    edges = 0 if kind == "consumer" else data.draw(st.integers(1, 3))
    shared = data.draw(st.booleans())
    cfg = _config(
        kind, edges, data.draw(st.integers(1, 9)), data.draw(st.integers(40, 2000)), shared
    )
    costs = [data.draw(_COSTS) for _ in range(edges)]
    with_ctx = data.draw(st.booleans())
    seed = _batches(data.draw)
    make = _Consumer if kind == "consumer" else _Processor

    def fresh() -> list[_Batch]:
        return [_Batch(b.origin.seq, b.cols) for b in seed]

    ours = _run(cfg, make(with_ctx), fresh(), costs, True)
    reference = _run(cfg, make(with_ctx), fresh(), costs, False)
    assert ours == reference
    writes = reference[0]
    event(f"{kind}, {len({(w[0], w[1], w[2]) for w in writes})} chunks")
    event("parts split within a chunk" if any(w[3] for w in writes) else "one part a chunk")
    event("dead letters" if reference[3] else "no dead letter")


def _producer_case(
    data: Any, monkeypatch: pytest.MonkeyPatch, max_items: int
) -> tuple[NodeConfig, list[int], list[int | None], int]:
    """A drawn producer (edges, batch_max, batch_bytes, shared or not, each child's cost)
    and its source's values (None: "nothing now"), with no segment ending by age and no
    pause after Nones; the first segment's size (doubled at each next one up to
    batch_max, in every loop alike) is drawn too and returned."""
    monkeypatch.setattr(producer_loop, "_SEGMENT_AGE_S", 1e9)
    monkeypatch.setattr(producer_loop, "_NONES_BEFORE_PAUSE", 1 << 30)
    first = data.draw(st.sampled_from([1, 2, 5, 1 << 20]))
    monkeypatch.setattr(producer_loop, "_FIRST_SEGMENT_ITEMS", first)
    edges = data.draw(st.integers(1, 3))
    shared = data.draw(st.booleans())
    cfg = _config(
        "producer", edges, data.draw(st.integers(1, 40)), data.draw(st.integers(40, 3000)), shared
    )
    costs = [data.draw(_COSTS) for _ in range(edges)]
    item = st.integers(1, 500)
    values = data.draw(st.lists(st.one_of(item, item, item, item, st.none()), max_size=max_items))
    return cfg, costs, values, first


@settings(
    max_examples=150,
    deadline=None,
    # the patched constants are the same for every example
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_producer_columns_write_what_the_envelope_loop_writes(
    data: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg, costs, values, first = _producer_case(data, monkeypatch, 150)
    ours = _run(cfg, _Source(values), None, costs, True)
    reference = _run(cfg, _Source(values), None, costs, False)
    assert ours == reference
    event(f"{sum(1 for s in reference[2] if s[0] == 'seal')} segment(s)" if values else "empty")
    event("segments start small" if first < cfg.batch_max else "segments of batch_max")
    event("parts split within a chunk" if any(w[3] for w in reference[0]) else "one part a chunk")


class _BatchSource(_Source):
    """The same values as :class:`_Source`, given ``next_batch()`` calls at a time: each
    None an empty batch, the items between them in runs of the drawn lengths (in turn)."""

    def __init__(self, values: list[int | None], runs: list[int], form: str) -> None:
        super().__init__(values)
        self.batches: list[list[Any]] = []
        pending: list[Any] = []
        cuts = itertools.cycle(runs)
        want = next(cuts)
        for v in values:
            if v is None:
                if pending:
                    self.batches.append(pending)
                    pending, want = [], next(cuts)
                self.batches.append([])
                continue
            pending.append(_payload(v))
            if len(pending) >= want:
                self.batches.append(pending)
                pending, want = [], next(cuts)
        if pending:
            self.batches.append(pending)
        self.form = form

    def next_batch(self) -> Any:
        if self.i >= len(self.batches):
            raise StopIteration
        batch = self.batches[self.i]
        self.i += 1
        if self.form == "tuple":
            return tuple(batch)
        if self.form == "generator":
            return (x for x in batch)
        return None if not batch and self.form == "none" else batch


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_batch_source_writes_what_its_items_one_by_one_write(
    data: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``next_batch()`` (runs taken in whole, the rest item by item, and its item-by-item
    adapter for REALTIME or partitioned children) against ``next()`` giving the same
    items through ``emit()``: the same writes under the same keys, segments, counters."""
    cfg, costs, values, first = _producer_case(data, monkeypatch, 300)
    runs = data.draw(st.lists(st.integers(1, 120), min_size=1, max_size=8))
    form = data.draw(st.sampled_from(["list", "list", "tuple", "generator", "none"]))
    columns = data.draw(st.sampled_from([True, True, True, False]))
    ours = _run(cfg, _BatchSource(values, runs, form), None, costs, columns)
    reference = _run(cfg, _Source(values), None, costs, False)
    assert ours == reference
    longest = max((len(b) for b in _BatchSource(values, runs, form).batches), default=0)
    event("batches taken in runs" if columns else "batches item by item")
    event(f"{sum(1 for s in reference[2] if s[0] == 'seal')} segment(s)" if values else "empty")
    event("a batch spans segments" if longest > min(first, cfg.batch_max) else "short batches")


class _Hundreds(_Source):
    """``n`` distinct 100-byte items (what the broker benchmark's source gives)."""

    def next(self) -> Any:
        if self.i >= len(self.values):
            raise StopIteration
        self.i += 1
        return b"%0100d" % self.i


@pytest.mark.parametrize("columns", [True, False], ids=["columns", "envelopes"])
def test_a_segment_ends_where_a_part_ends_not_with_a_short_part(
    columns: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a broker a segment holds up to 8,192 items and a part 1 MiB: 8,192 items of
    100 bytes (132 estimated) are just over 1 MiB, so a segment of them used to be
    written as 7,944 items and a 248-item part — two messages on every edge where one
    would do. A segment now ends with the part that filled, when another as long would
    not fit in it: one message a segment."""
    monkeypatch.setattr(producer_loop, "_SEGMENT_AGE_S", 1e9)
    cfg = _config("producer", 2, 8192, 1 << 20, False)  # one replica a child: chunks of 8,192
    n = 40_000
    writes, _, segments, _, _ = _run(cfg, _Hundreds([0] * n), None, [0, 0], columns)
    seals = [(start, end) for kind, start, end in segments if kind == "seal"]
    assert sum(end - start for start, end in seals) == n
    per_edge = [[len(w[6]) for w in writes if w[0] == e] for e in (0, 1)]
    for sizes in per_edge:
        assert sizes == [end - start for start, end in seals]  # one part a segment
    # the ramp (1,024, 2,048, 4,096 items), then parts that filled 1 MiB, then the rest
    assert per_edge[0][:3] == [1024, 2048, 4096]
    assert set(per_edge[0][3:-1]) == {7944}


class _HundredsInBatches(_Hundreds):
    """:class:`_Hundreds` given ``per_call`` items a ``next_batch()`` call."""

    def __init__(self, values: list[int | None], per_call: int) -> None:
        super().__init__(values)
        self.per_call = per_call

    def next_batch(self) -> Any:
        if self.i >= len(self.values):
            raise StopIteration
        first = self.i
        self.i = min(len(self.values), first + self.per_call)
        return [b"%0100d" % (k + 1) for k in range(first, self.i)]


@pytest.mark.parametrize("per_call", [1, 7, 100, 1000, 50_000])
@pytest.mark.parametrize("parts", [1, 3, 64])
def test_a_batch_source_cuts_where_its_items_one_by_one_cut_when_parts_fill_exactly(
    per_call: int, parts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Items of 100 bytes (132 estimated) and ``batch_bytes`` a whole number of them: a
    part fills exactly on an item, where the run taken in whole must stop (one item more
    or less moves every later cut)."""
    monkeypatch.setattr(producer_loop, "_SEGMENT_AGE_S", 1e9)
    cfg = _config("producer", 2, 4096, parts * 132, False)
    n = 20_000
    ours = _run(cfg, _HundredsInBatches([0] * n, per_call), None, [0, 0], True)
    reference = _run(cfg, _Hundreds([0] * n), None, [0, 0], False)
    assert ours == reference
    assert {len(w[6]) for w in reference[0]} >= {parts}  # parts of exactly that many items


@pytest.mark.parametrize("per_call", [29, 1000])
@pytest.mark.parametrize("batch_max", [3, 40])
def test_a_batch_source_ends_the_growing_first_segments_where_its_items_one_by_one_do(
    per_call: int, batch_max: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Segments of 1, 2, 4 … items (up to ``batch_max``) while one call gives many more:
    each run taken in whole must stop at its segment's last item."""
    monkeypatch.setattr(producer_loop, "_SEGMENT_AGE_S", 1e9)
    monkeypatch.setattr(producer_loop, "_FIRST_SEGMENT_ITEMS", 1)
    cfg = _config("producer", 2, batch_max, 1 << 20, False)
    ours = _run(cfg, _HundredsInBatches([0] * 500, per_call), None, [0, 0], True)
    reference = _run(cfg, _Hundreds([0] * 500), None, [0, 0], False)
    assert ours == reference
    seals = [end - start for kind, start, end in reference[2] if kind == "seal"]
    assert seals[:2] == [1, 2]  # the ramp is there to be kept
