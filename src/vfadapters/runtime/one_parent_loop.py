"""The one-parent loop of the one node runtime (:mod:`vfadapters.runtime.worker`).

A processor or consumer with one parent claims a batch, calls the node on each
item (with retries, then a dead letter), writes the outputs toward each edge in
chunks named after the batch's input positions, and settles the batch with its
tally only once they are all written. A batch of columns is handled in columns
(:meth:`OneParentLoop.single_columns`), any other item by item.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections.abc import Callable
from typing import Any

from vfadapters.runtime.columns import Columns
from vfadapters.runtime.config import CTL, SLOT
from vfadapters.runtime.ports import (
    OutputKey,
)
from vfadapters.runtime.worker_base import (
    SKIP,
    Aborted,
    OutEdge,
    WorkerBase,
    sizes_of,
)


class OneParentLoop(WorkerBase):
    """The one-parent loop of a :class:`~vfadapters.runtime.worker.Worker`."""

    def run_single(self) -> None:
        from vfcore.flow import takes_ctx

        node, ctx, ctl = self.node, self.ctx, self.ctl
        consumer = self.consumer
        fn = node.consume if consumer else node.process
        pass_ctx = takes_ctx(fn)
        inp = self.inputs[0]
        retry = self.retry
        emit = self.emit
        begin = ctx._begin
        abort_index = CTL.ABORT
        active_index = self.base + SLOT.ACTIVE
        clock = time.perf_counter
        latency_clock = self.t.latency_clock
        latencies = self.latencies
        note = latencies.append
        realtime = self.realtime
        # BATCH outputs to unpartitioned children: handled a batch at a time as columns
        columns = self.columns and not realtime and not any(e.partitioned for e in self.edges)
        while True:
            if not ctl[active_index]:
                return  # retired by autoscaling: nothing is held, others go on
            batch = inp.claim()
            if batch is None:
                if ctl[abort_index]:
                    raise Aborted
                inp.wait(0.2)
                continue
            if batch is False:
                inp.wake()  # let the next replica sharing this input see the end
                return
            if batch.redelivered and not realtime and inp.already_done(batch):
                inp.settle([batch], None)  # finished before: its outputs and counts are stored
                continue
            try:
                envs = batch.envelopes()
            except Exception as exc:  # a record that cannot be decoded is a dead letter
                self.undecodable(inp, batch, exc)
                continue
            ctx.redelivered = batch.redelivered
            n = len(envs)
            limits = self.proposed_limits()
            if not realtime:
                limits = list(inp.chunking(batch, limits))
            self.begin_origin(None if realtime else batch.origin, batch, limits)
            tally = self.tally
            tally.received = n
            if columns and type(envs) is Columns:
                t0 = clock()
                self.single_columns(envs, fn, pass_ctx)
                self.record_cost(clock() - t0, n)
                inp.settle([batch], tally)
                continue
            cut_at = self.cut_step()
            t0 = clock()
            position = 0
            for trace_id, ts, meta, payload, emitted_ns in envs:
                if ctl[abort_index]:
                    raise Aborted
                if position and position % cut_at == 0:
                    self.cut(position)
                if consumer:
                    note(latency_clock() - emitted_ns)  # end-to-end latency (latency.py)
                begin(trace_id, ts, meta)
                try:
                    out = fn(payload, ctx=ctx) if pass_ctx else fn(payload)
                except Exception:
                    out = retry(
                        fn,
                        pass_ctx,
                        (payload,),
                        trace_id,
                        position=position,
                        envelope=(trace_id, ts, meta, payload, emitted_ns),
                    )
                position += 1
                if out is SKIP:
                    continue
                if consumer:
                    tally.outputs += 1
                    continue
                if out is None:
                    tally.filtered += 1
                    continue
                keys = ctx._keys
                emit(
                    trace_id,
                    ts,
                    meta if keys is None else ctx._out_metadata(),
                    out,
                    emitted_ns,
                    position - 1,
                )
            if len(latencies) >= 4096:
                self.fold_latencies()
            self.record_cost(clock() - t0, n)
            self.flush_all()
            inp.settle([batch], tally)

    def single_columns(self, cols: Columns, fn: Callable[..., Any], pass_ctx: bool) -> None:
        """One input batch of :meth:`run_single` (BATCH, unpartitioned children) as
        columns: the node is called item by item, its outputs are kept as a list (and
        their input positions), and each edge's parts are cut from it by
        :meth:`write_outputs` exactly as :meth:`emit` and :meth:`cut` cut them — the
        same (chunk, part) keys, the same items in each — whenever the outputs held
        reach ``batch_bytes`` and once at the end."""
        ctx, ctl = self.ctx, self.ctl
        tally = self.tally
        abort_index = CTL.ABORT
        payloads = cols.payloads
        skip = SKIP
        ctx._over(cols)

        def failed(i: int, payload: Any) -> Any:  # inside the except of a first attempt
            return self.retry(
                fn, pass_ctx, (payload,), cols.trace_id(i), position=i, envelope=cols[i]
            )

        if self.consumer:
            note = self.latencies.append
            latency_clock = self.t.latency_clock
            emitted = cols.emitted
            skipped = 0
            for i, payload in enumerate(payloads):
                if ctl[abort_index]:
                    raise Aborted
                note(latency_clock() - emitted[i])  # end-to-end latency (latency.py)
                if pass_ctx:
                    ctx._i = i
                    try:
                        out = fn(payload, ctx=ctx)
                    except Exception:
                        out = failed(i, payload)
                    ctx._keys = None
                    if ctx._cols is None:  # the call set ctx.event_ts_ms: back on the columns
                        ctx._over(cols)
                else:
                    try:
                        out = fn(payload)
                    except Exception:
                        out = failed(i, payload)
                if out is skip:
                    skipped += 1
            ctx._fix()
            tally.outputs += len(payloads) - skipped
            return
        batch_bytes = self.cfg.batch_bytes
        outs: list[Any] = []
        where: list[int] = []  # each output's input position
        sizes: list[int] = []  # estimated bytes of outs[:len(sizes)]
        keyed: dict[int, Any] = {}  # output index -> metadata the call set (ctx)
        add_out, add_where = outs.append, where.append
        held = released = 0
        countdown = 1  # outputs until the bytes held are counted again
        self.out_marks = [0] * len(self.edges)
        for i, payload in enumerate(payloads):
            if ctl[abort_index]:
                raise Aborted
            if pass_ctx:
                ctx._i = i
                try:
                    out = fn(payload, ctx=ctx)
                except Exception:
                    out = failed(i, payload)
                if ctx._keys is not None:
                    if out is not None and out is not skip:
                        keyed[len(outs)] = ctx._out_metadata()
                    ctx._keys = None
                if ctx._cols is None:  # the call set ctx.event_ts_ms: back on the columns
                    ctx._over(cols)
            else:
                try:
                    out = fn(payload)
                except Exception:
                    out = failed(i, payload)
            if out is None:
                tally.filtered += 1
                continue
            if out is skip:
                continue
            add_out(out)
            add_where(i)
            countdown -= 1
            if not countdown:  # bound what is held: write the parts complete by now
                new = sizes_of(outs[len(sizes) :])
                sizes.extend(new)
                held += sum(new)
                # count again after about a 16th of batch_bytes (every output when large)
                countdown = max(1, min(256, batch_bytes * len(new) // (16 * max(1, sum(new)))))
                if held >= batch_bytes and self.edges:
                    self.write_outputs(cols, outs, where, sizes, keyed, False)
                    held = 0
                    done = min(self.out_marks)
                    for j in range(released, done):
                        outs[j] = None  # written to every edge: not held any more
                    released = max(released, done)
        ctx._fix()
        tally.outputs += len(outs)
        if self.edges:
            sizes.extend(sizes_of(outs[len(sizes) :]))
            self.write_outputs(cols, outs, where, sizes, keyed, True)

    def write_outputs(
        self,
        cols: Columns,
        outs: list[Any],
        where: list[int],
        sizes: list[int],
        keyed: dict[int, Any],
        final: bool,
    ) -> None:
        """Write the parts of each edge that are complete among ``outs`` (all of them
        when ``final``): an edge's chunk ``c`` holds the outputs of input positions
        ``[c * limit, (c + 1) * limit)``; within a chunk a part ends at the output that
        brings it to ``batch_bytes`` or ``batch_max`` (as :meth:`emit` flushes)."""
        batch_max, batch_bytes = self.cfg.batch_max, self.cfg.batch_bytes
        n = len(outs)
        marks = self.out_marks
        for e, edge in enumerate(self.edges):
            k = marks[e]
            limit = edge.limit
            while k < n:
                chunk = where[k] // limit
                if chunk != edge.chunk:  # cut() at the chunk's first position
                    edge.chunk = chunk
                    edge.parts = [0]
                end = bisect.bisect_left(where, (chunk + 1) * limit, k, n)
                # the parts that fill up within [k, end)
                while True:
                    cut_at = min(end, k + batch_max)
                    filled = bisect.bisect_left(
                        list(itertools.accumulate(sizes[k:cut_at])), batch_bytes
                    )
                    if k + filled < cut_at:  # the output at k + filled fills the part
                        stop = k + filled + 1
                    elif cut_at - k >= batch_max:
                        stop = cut_at
                    else:
                        break
                    self.write_part(edge, cols, outs, where, keyed, k, stop)
                    k = stop
                    if k >= end:
                        break
                if k < end and (end < n or final):  # the chunk's last, partial part
                    self.write_part(edge, cols, outs, where, keyed, k, end)
                    k = end
                if k < end:
                    break  # held until more outputs come
            marks[e] = k

    def write_part(
        self,
        edge: OutEdge,
        cols: Columns,
        outs: list[Any],
        where: list[int],
        keyed: dict[int, Any],
        a: int,
        b: int,
    ) -> None:
        part = cols.pick(where[a:b], outs[a:b])
        if keyed and any(a <= k < b for k in keyed):
            part.metas = [keyed.get(a + j, m) for j, m in enumerate(part.meta_list())]
        key = OutputKey(self.origin, edge.chunk, edge.parts[0], edge.index[0], self.batch)
        edge.parts[0] += 1
        edge.index[0] += 1
        count = b - a
        e = self.tally.emitted
        e[edge.child] = e.get(edge.child, 0) + count
        edge.outlets[0].write(part, key)
        self.add(SLOT.EMITTED, count)
