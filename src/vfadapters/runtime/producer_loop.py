"""The producer loop of the one node runtime (:mod:`vfadapters.runtime.worker`).

A producer calls ``next()`` until StopIteration (or a stop) and writes its items in
*segments*: runs of consecutive items whose start and cut the transport stores
before their first chunk is written, and whose end before their last, so that a
restarted producer cuts the same chunks again. Three loops do it: item by item
through :meth:`~vfadapters.runtime.worker_base.WorkerBase.emit` (any producer:
``next(ctx)``, REALTIME, partitioned children), in columns (the rest), and in
columns taking a ``next_batch()`` source's runs in whole; the worker-loop oracle
(tests/property/test_worker_loops.py) holds the last two to the first.
"""

from __future__ import annotations

import time
from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from itertools import accumulate
from typing import Any

from vfadapters.runtime.columns import Columns
from vfadapters.runtime.config import CTL, SLOT
from vfadapters.runtime.ports import (
    OutputKey,
)
from vfadapters.runtime.worker_base import (
    Aborted,
    OutEdge,
    ProducerFailed,
    ProducerNotResumable,
    ProducerSegment,
    WorkerBase,
    estimate,
    sizes_of,
)
from vfcore.runtime import (
    SegmentOrigin,
)

#: A producer whose next() returns None this many times in a row starts pausing
#: between calls: 0.1 ms, doubling up to _NONE_PAUSE_MAX_S, until it emits again.
_NONES_BEFORE_PAUSE = 8
_NONE_PAUSE_MAX_S = 0.05
#: a producer's segment may hold this many chunks' worth of bytes (large items)
_SEGMENT_CHUNKS = 8
#: a producer's first segment holds at most this many items, each next one twice as
#: many up to batch_max: the first items reach the children (and the pipeline fills)
#: soon, the rest in large records
_FIRST_SEGMENT_ITEMS = 1024
#: a segment is written after this long whatever its source does (linger counts only
#: the source's time; this bounds the node's own)
_SEGMENT_AGE_S = 0.05
#: produce_columns: a call to next() that returned within this long after our own work
#: on the last item (ns) is the source computing at full speed, not making us wait: it
#: does not count toward linger_s (fast sources fill whole segments; one clock read an item)
_WAIT_NS = 20_000


class ProducerLoops(WorkerBase):
    """The producer loops of a :class:`~vfadapters.runtime.worker.Worker`."""

    def run_producer(self) -> None:
        """Call ``next()`` (or ``next_batch()``) until StopIteration (or a stop), writing
        items in *segments*.

        A segment is a run of consecutive items cut into chunks per edge as they
        complete; it ends at ``batch_max`` items, ``_SEGMENT_CHUNKS`` times
        ``batch_bytes``, or after ``linger_s``.
        The transport stores where a segment starts and how it is cut before its
        first chunk is written, and where it ends before its last (partial) chunks
        are: a restarted producer cuts the same chunks again (they are dropped as
        already stored) and goes on after the last item every child holds.
        """
        from vfcore.flow import takes_ctx

        node, ctx, ctl = self.node, self.ctx, self.ctl
        fn = node.next
        pass_ctx = takes_ctx(fn)
        stop_index = CTL.STOP_PRODUCERS
        position = 0
        planned: deque[ProducerSegment] = deque()
        plan = self.t.producer_resume()
        if plan is not None and (plan.position or plan.segments):
            # the segments of the last life are cut again from the first one's start
            position = plan.segments[0].start if plan.segments else plan.position
            resume = getattr(node, "resume", None)
            if position and not callable(resume):
                raise ProducerNotResumable(
                    f"producer {self.cfg.node!r} was restarted after writing {position:,} "
                    "item(s) and defines no resume(position): it cannot go on without "
                    "duplicating or losing items, so the run stops. Define "
                    "resume(self, position) to make the source continue at item `position` "
                    "(docs/broker.md, 'Producers that resume')"
                )
            if position:
                assert resume is not None
                if takes_ctx(resume):
                    resume(position, ctx=ctx)
                else:
                    resume(position)
            planned.extend(plan.segments)
            self.logger.warning(
                "restarted: resuming at item %d (%d segment(s) cut again)", position, len(planned)
            )
        batch_fn = getattr(node, "next_batch", None)
        if batch_fn is not None and takes_ctx(batch_fn):
            raise ProducerFailed(
                TypeError(
                    f"{type(node).__name__}.next_batch() declares ctx: a batch has no one "
                    "item's context; define next(self, ctx) to set keys or event times per item"
                )
            )
        self.segment: ProducerSegment | None = None
        from vfadapters.runtime.source_watch import SourceWatch

        self.watch = watch = SourceWatch(self)
        watch.start()
        try:
            columns = (
                self.columns and not self.realtime and not any(e.partitioned for e in self.edges)
            )
            if callable(batch_fn) and columns:
                position = self.produce_batches(batch_fn, position, planned)
            elif callable(batch_fn):  # REALTIME, partitioned children: item by item
                position = self.produce_envelopes(
                    _one_at_a_time(batch_fn), False, position, planned
                )
            elif columns and not pass_ctx:
                position = self.produce_columns(fn, position, planned)
            else:
                position = self.produce_envelopes(fn, pass_ctx, position, planned)
        finally:
            watch.stop()
        watch.raise_error()
        seg = self.segment
        stopped = bool(ctl[stop_index])
        if not stopped and (
            (seg is not None and seg.end is not None and position < seg.end) or planned
        ):
            # the source ended before the segments of the last life were cut again:
            # it does not give the same items from the same position
            raise ProducerFailed(
                RuntimeError(
                    f"the source ended at item {position}, inside a segment written before "
                    "the restart: resume(position) must continue with the same items"
                )
            )
        if self.segment is not None:
            self.close_segment(position)

    def produce_envelopes(
        self,
        fn: Callable[..., Any],
        pass_ctx: bool,
        position: int,
        planned: deque[ProducerSegment],
    ) -> int:
        """The producer loop of any node (ctx, REALTIME, partitioned children): item by
        item through :meth:`emit`. Returns the position after the last item."""
        ctx, ctl = self.ctx, self.ctl
        prefix = f"{self.cfg.node}:"
        linger = self.cfg.linger_s
        # a segment holds up to batch_max items (_FIRST_SEGMENT_ITEMS for the first, twice
        # as many each next) and _SEGMENT_CHUNKS chunks' worth of bytes (each chunk stays
        # within batch_bytes): what a segment costs to record is paid once for them all
        top = self.cfg.batch_max
        segment_items = seg_items = min(top, _FIRST_SEGMENT_ITEMS)
        segment_bytes = self.cfg.batch_bytes * _SEGMENT_CHUNKS
        clock = time.monotonic
        wall = self.t.latency_clock
        stop_index = CTL.STOP_PRODUCERS
        abort_index = CTL.ABORT
        nones = 0
        emit = self.emit
        cut_at = 1 << 62
        give_turn, take_turn = self.turn.append, self.turn.pop
        self.since_clock, self.since_limit = clock, linger
        while True:
            if ctl[abort_index]:
                raise Aborted
            if ctl[stop_index] and not planned:
                break
            trace_id = prefix + str(position)
            ctx._begin(trace_id, None, None)
            self.next_since = t0 = clock()
            give_turn(True)  # the source may block: the watch may write the segment meanwhile
            try:
                item = fn(ctx=ctx) if pass_ctx else fn()
            except StopIteration:
                self.watch.take_turn()
                break
            except Exception as exc:
                self.watch.take_turn()
                raise ProducerFailed(exc) from exc
            try:
                take_turn()
            except IndexError:  # the watch is writing the segment: wait for it
                self.watch.take_turn()
            t1 = clock()
            if self.cut_by_watch:  # the source blocked: the watch wrote the segment
                self.cut_by_watch = False
                self.watch.raise_error()
                t0 = t1  # the wait is accounted for: the next segment starts afresh
            seg = self.segment
            if item is None:
                # "nothing now": end the segment under way (unless it is one of the
                # last life's, which must be cut again whole), then pause, so that a
                # producer polling an empty source does not spin a core
                if seg is not None and seg.end is None:
                    self.close_segment(position)
                nones += 1
                self.nothing_now(nones)
                continue
            nones = 0
            if seg is None:
                seg = self.open_segment(position, planned.popleft() if planned else None, t1)
                cut_at = self.cut_step()
                seg_items, segment_items = segment_items, min(2 * segment_items, top)
            emitted = wall()
            ts = ctx.event_ts_ms
            if ts is None:
                ts = emitted / 1e6
            offset = position - seg.start
            if offset and offset % cut_at == 0:
                self.cut(offset)
            keys = ctx._keys
            seg.size += emit(
                trace_id, ts, None if keys is None else ctx._out_metadata(), item, emitted, position
            )
            position += 1
            seg.count += 1
            filled = self.filled  # the items of the longest part this item filled (bytes)
            if filled:
                self.filled = 0
            if seg.end is not None:
                if position >= seg.end:  # a segment of the last life, cut again exactly
                    self.close_segment(position)
            else:
                # linger counts the time the source made us wait: a fast source fills
                # whole segments; one that blocks has what it gave written after linger_s
                seg.waited += t1 - t0
                if (
                    seg.count >= seg_items
                    # a part just filled by bytes and another as long would not fit: end
                    # here, not with a short last part (a message of its own on each edge)
                    or (
                        filled
                        and (
                            seg.count + filled > seg_items
                            or seg.size + self.filled_bytes > segment_bytes
                        )
                    )
                    or seg.size >= segment_bytes
                    or seg.waited > linger
                    or t1 - seg.opened > _SEGMENT_AGE_S
                ):
                    self.close_segment(position)
        return position

    def produce_columns(
        self, fn: Callable[..., Any], position: int, planned: deque[ProducerSegment]
    ) -> int:
        """The producer loop of a BATCH node whose ``next()`` takes no ctx and whose
        children are not partitioned. Within a segment, the same chunks, parts and
        output keys as :meth:`produce_envelopes`, but the segment's items are kept as
        two lists (items, emit times) and written as :class:`Columns` slices — no
        envelope, trace id or routing per item, one clock read per item (the emit time,
        which also measures how long the source made us wait for ``linger_s``: the gaps
        between items longer than ``_WAIT_NS``).
        Returns the position after the last item.

        Where :meth:`emit` writes an outlet's buffer right after the item that fills it
        (``batch_bytes``, ``batch_max``) and :meth:`cut` before the item that starts a
        chunk, this loop does both before the next item is taken in (or when the
        segment closes): the same items end up in the same (chunk, part). A segment's
        end is stored before its last parts are written, whichever loop cut it.
        """
        ctl = self.ctl
        cfg = self.cfg
        linger_ns = cfg.linger_s * 1e9
        age_ns = int(_SEGMENT_AGE_S * 1e9)
        top = cfg.batch_max
        segment_items = min(top, _FIRST_SEGMENT_ITEMS)  # doubled at each segment, up to top
        segment_bytes = cfg.batch_bytes * _SEGMENT_CHUNKS
        # one clock read per item: the emit time (the latency clock, ns) also measures
        # how long the source made us wait (from the end of our own work on the last item)
        wall = self.t.latency_clock
        stop_index = CTL.STOP_PRODUCERS
        abort_index = CTL.ABORT
        bytes_type = bytes
        nones = 0
        seg: ProducerSegment | None = None
        items: list[Any] = []
        emitted: Any = []
        add_item = items.append
        add_time = emitted.append
        total = 0  # estimated bytes of the segment's items so far
        next_off = next_size = 1 << 62  # where some edge must write or cut next
        low = (0, 0)  # (bytes, offset) before the pending items of the edge that fills first
        # the segment closes after item close_off, or once total reaches close_size, or
        # after the clock passes deadline (its age; 0 once the source made it linger)
        close_off = close_size = deadline = 1 << 62
        start = waited = off = 0
        lingers = True
        give_turn, take_turn = self.turn.append, self.turn.pop
        self.since_clock, self.since_limit = wall, linger_ns
        prev = wall()
        while True:
            if ctl[abort_index]:
                raise Aborted
            if ctl[stop_index] and not planned:
                break
            self.next_since = prev
            give_turn(True)  # the source may block: the watch may write the segment meanwhile
            try:
                item = fn()
            except StopIteration:
                self.watch.take_turn()
                break
            except Exception as exc:
                self.watch.take_turn()
                raise ProducerFailed(exc) from exc
            try:
                take_turn()
            except IndexError:  # the watch is writing the segment: wait for it
                self.watch.take_turn()
            now = wall()
            if self.cut_by_watch:  # the source blocked: the watch wrote the segment
                self.cut_by_watch = False
                self.watch.raise_error()
                seg = None
                close_off = close_size = deadline = 1 << 62
                prev = now  # the wait is accounted for: the next segment starts afresh
            if item is None:
                if seg is not None and seg.end is None:
                    self.close_columns(position, total)
                    seg = None
                nones += 1
                self.nothing_now(nones)
                prev = wall()
                continue
            if nones:
                nones = 0
            if seg is None:
                seg, items, emitted, close_off, close_size, deadline = self.open_columns(
                    position, planned, segment_items, segment_bytes, now + age_ns
                )
                start = seg.start
                add_item = items.append
                add_time = emitted.append
                total = waited = 0
                lingers = seg.end is None
                segment_items = min(2 * segment_items, top)
                next_off, next_size, low = self.column_events(0, 0)
            off = position - start
            gap = now - prev
            if gap > _WAIT_NS:
                waited += gap
                if waited > linger_ns and lingers:
                    deadline = 0  # lingered long enough: close after this item
            if off >= next_off or total >= next_size:
                next_off, next_size, low = self.column_events(off, total)
                prev = wall()  # what writing took is ours, not the source's
            else:
                prev = now
            add_item(item)
            add_time(now)
            total += len(item) + 32 if type(item) is bytes_type else estimate(item)
            position += 1
            if (
                off >= close_off
                or total >= close_size
                or now > deadline
                # a part just filled (bytes) and another as long would not fit: end here,
                # not with a short last part (a message of its own on every edge)
                or (
                    total >= next_size
                    and lingers
                    and (off + 1 - low[1] > close_off - off or 2 * total - low[0] > close_size)
                )
            ):
                self.close_columns(position, total)
                seg = None
                close_off = close_size = deadline = 1 << 62
                prev = wall()
        if seg is not None:
            self.seg_size = total
        return position

    def produce_batches(
        self, fn: Callable[[], Any], position: int, planned: deque[ProducerSegment]
    ) -> int:
        """The loop of a BATCH producer that defines ``next_batch()`` (no ctx, children
        not partitioned): the source gives many items a call, and the runs of them that
        start no chunk, fill no part and close no segment are taken in whole (a slice of
        the list, one emit time a call); each other item goes through the steps of
        :meth:`produce_columns`. The same items end up in the same (chunk, part) as if the
        source had given them one by one within one instant (the worker-loop oracle holds
        it to :meth:`produce_envelopes`). An empty batch (or None) is "nothing now", as
        ``next()`` returning None is. Returns the position after the last item.
        """
        ctl = self.ctl
        cfg = self.cfg
        linger_ns = cfg.linger_s * 1e9
        age_ns = int(_SEGMENT_AGE_S * 1e9)
        top = cfg.batch_max
        segment_items = min(top, _FIRST_SEGMENT_ITEMS)  # doubled at each segment, up to top
        segment_bytes = cfg.batch_bytes * _SEGMENT_CHUNKS
        wall = self.t.latency_clock
        stop_index = CTL.STOP_PRODUCERS
        abort_index = CTL.ABORT
        bytes_type = bytes
        nones = 0
        seg: ProducerSegment | None = None
        items: list[Any] = []
        emitted: Any = array("q")
        total = 0
        next_off = next_size = 1 << 62
        low = (0, 0)
        close_off = close_size = deadline = 1 << 62
        start = waited = 0
        lingers = True
        give_turn, take_turn = self.turn.append, self.turn.pop
        self.since_clock, self.since_limit = wall, linger_ns
        prev = wall()
        while True:
            if ctl[abort_index]:
                raise Aborted
            if ctl[stop_index] and not planned:
                break
            self.next_since = prev
            give_turn(True)  # the source may block: the watch may write the segment meanwhile
            try:
                batch = fn()
            except StopIteration:
                self.watch.take_turn()
                break
            except Exception as exc:
                self.watch.take_turn()
                raise ProducerFailed(exc) from exc
            try:
                take_turn()
            except IndexError:  # the watch is writing the segment: wait for it
                self.watch.take_turn()
            now = wall()
            if self.cut_by_watch:  # the source blocked: the watch wrote the segment
                self.cut_by_watch = False
                self.watch.raise_error()
                seg = None
                close_off = close_size = deadline = 1 << 62
                prev = now
            try:
                batch = _checked_batch(batch)
            except TypeError as exc:
                raise ProducerFailed(exc) from exc
            if not batch:
                if seg is not None and seg.end is None:
                    self.close_columns(position, total)
                    seg = None
                nones += 1
                self.nothing_now(nones)
                prev = wall()
                continue
            nones = 0
            n = len(batch)
            sizes = [len(x) + 32 if type(x) is bytes_type else estimate(x) for x in batch]
            after = list(accumulate(sizes))  # bytes of batch[:k + 1]
            i = 0
            while i < n:
                if seg is None:
                    seg, items, emitted, close_off, close_size, deadline = self.open_columns(
                        position, planned, segment_items, segment_bytes, now + age_ns, True
                    )
                    start = seg.start
                    total = waited = 0
                    lingers = seg.end is None
                    segment_items = min(2 * segment_items, top)
                    next_off, next_size, low = self.column_events(0, 0)
                off = position - start
                if i and now <= deadline:
                    # the items before the first that starts a chunk, fills a part or
                    # closes the segment: taken in whole
                    before = after[i - 1]
                    j = min(
                        n,
                        i + min(next_off, close_off) - off,
                        bisect_left(after, before + min(next_size, close_size) - total, i, n),
                    )
                    if j > i:
                        items += batch[i:j]
                        emitted += array("q", (now,)) * (j - i)
                        total += after[j - 1] - before
                        position += j - i
                        i = j
                        continue
                else:  # the first item of a call: the source's wait counts toward linger_s
                    gap = now - prev
                    if gap > _WAIT_NS:
                        waited += gap
                        if waited > linger_ns and lingers:
                            deadline = 0
                item = batch[i]
                if off >= next_off or total >= next_size:
                    next_off, next_size, low = self.column_events(off, total)
                    prev = wall()
                else:
                    prev = now
                items.append(item)
                emitted.append(now)
                total += sizes[i]
                position += 1
                i += 1
                if (
                    off >= close_off
                    or total >= close_size
                    or now > deadline
                    or (
                        total >= next_size
                        and lingers
                        and (off + 1 - low[1] > close_off - off or 2 * total - low[0] > close_size)
                    )
                ):
                    self.close_columns(position, total)
                    seg = None
                    close_off = close_size = deadline = 1 << 62
                    prev = wall()
        if seg is not None:
            self.seg_size = total
        return position

    def nothing_now(self, nones: int) -> None:
        """The source gave nothing now (the ``nones``-th call in a row): counted; from the
        ``_NONES_BEFORE_PAUSE``-th on, a pause of 0.1 ms doubling up to
        ``_NONE_PAUSE_MAX_S``, so that a producer polling an empty source does not spin
        a core."""
        self.ctl[self.base + SLOT.NONES] += 1
        if nones > _NONES_BEFORE_PAUSE:
            time.sleep(min(1e-4 * 2 ** min(nones - _NONES_BEFORE_PAUSE - 1, 16), _NONE_PAUSE_MAX_S))

    def open_columns(
        self,
        position: int,
        planned: deque[ProducerSegment],
        segment_items: int,
        segment_bytes: int,
        deadline: int,
        batches: bool = False,
    ) -> tuple[ProducerSegment, list[Any], Any, int, int, int]:
        """Begin a segment of :meth:`produce_columns` / :meth:`produce_batches` at item
        ``position``: the segment, its item and emit-time columns, the offset of its last
        item, the estimated bytes that close it and the latency-clock time that closes it.
        A segment of the last life is cut again exactly where it ended (neither bytes nor
        age close it)."""
        seg = self.open_segment(position, planned.popleft() if planned else None, time.monotonic())
        items: list[Any] = []
        # emit times: item by item a list (appending an int to an int64 array costs ~5x a
        # list's append; a part's slice becomes one int64 array when it is encoded), a
        # call's many items at once an int64 array (one emit time repeated in C)
        times: Any = array("q") if batches else []
        self.seg_items, self.seg_times = items, times
        self.seg_marks = [(0, 0)] * len(self.edges)
        if seg.end is None:
            return seg, items, times, segment_items - 1, segment_bytes, deadline
        return seg, items, times, seg.end - seg.start - 1, 1 << 62, 1 << 62

    def column_events(self, off: int, total: int) -> tuple[int, int, tuple[int, int]]:
        """Before the segment's item ``off`` is taken in (``total``: the estimated bytes
        of the items before it): write each edge's pending items that :meth:`emit` would
        have written by now, start the chunks :meth:`cut` would; then the next offset
        and total at which some edge must act again, and the first pending item of the
        edge that reaches ``batch_bytes`` first (the longest part that fills by bytes),
        as (estimated bytes before it, offset)."""
        cfg = self.cfg
        batch_max, batch_bytes = cfg.batch_max, cfg.batch_bytes
        marks = self.seg_marks
        next_off = next_size = 1 << 62
        low = (1 << 62, 0)
        for e, edge in enumerate(self.edges):
            mark, mark_size = marks[e]
            if off > mark and (total - mark_size >= batch_bytes or off - mark >= batch_max):
                self.write_columns(edge, mark, off)
                mark, mark_size = off, total
            limit = edge.limit
            if off and off % limit == 0:
                if off > mark:
                    self.write_columns(edge, mark, off)
                    mark, mark_size = off, total
                edge.chunk = off // limit
                edge.parts = [0]
            marks[e] = (mark, mark_size)
            next_off = min(next_off, mark + batch_max, (off // limit + 1) * limit)
            next_size = min(next_size, mark_size + batch_bytes)
            low = min(low, (mark_size, mark))
        return next_off, next_size, low

    def write_columns(self, edge: OutEdge, a: int, b: int) -> None:
        """Write the segment's items ``a`` to ``b`` to ``edge`` (one outlet) as one part."""
        seg, items = self.segment, self.seg_items
        assert seg is not None and items is not None
        first = seg.start + a
        # a list of emit times becomes one int64 array when the record is encoded
        # (codec._ints); a next_batch() segment's is one already
        cols = Columns(items[a:b], self.seg_times[a:b], prefix=f"{self.cfg.node}:", first=first)
        key = OutputKey(
            self.origin,
            edge.chunk,
            edge.parts[0],
            edge.index[0],
            None,
            positions=range(first, seg.start + b),
        )
        edge.parts[0] += 1
        edge.index[0] += 1
        n = b - a
        e = self.tally.emitted
        e[edge.child] = e.get(edge.child, 0) + n
        edge.outlets[0].write(cols, key)
        self.add(SLOT.EMITTED, n)

    def close_waiting_segment(self) -> None:
        """Close the open segment after the items it holds (the :class:`SourceWatch`'s
        call, holding the turn, while the source keeps the producer's thread in next())."""
        seg = self.segment
        assert seg is not None
        items = self.seg_items
        if items is None:
            self.close_segment(seg.start + seg.count)
        else:
            self.close_columns(seg.start + len(items), sum(sizes_of(items)))

    def close_columns(self, end: int, total: int) -> None:
        """End the segment of :meth:`produce_columns` at item ``end``."""
        self.seg_size = total
        self.close_segment(end)

    def open_segment(
        self, start: int, planned: ProducerSegment | None, now: float
    ) -> ProducerSegment:
        """Begin a segment at item ``start`` (cut as ``planned`` says, for one of the last life)."""
        if planned is not None:
            limits = list(planned.limits)
            seg = ProducerSegment(start, limits, planned.end)
        else:
            limits = self.proposed_limits()
            seg = ProducerSegment(start, limits)
        seg.opened = now
        if not self.realtime:
            self.t.begin_segment(seg)
        origin = None if self.realtime else SegmentOrigin(self.cfg.replica, start)
        self.begin_origin(origin, None, limits)
        self.tally.produced = 0
        self.segment = seg
        return seg

    def close_segment(self, end: int) -> None:
        """End the segment under way at item ``end``: seal it, write what is left, count it."""
        seg = self.segment
        assert seg is not None
        if not self.realtime and seg.end is None:
            seg.end = end
            self.t.seal_segment(seg)
        items = self.seg_items
        if items is not None:  # produce_columns: what each edge has not written yet
            seg.count = n = end - seg.start
            seg.size = self.seg_size
            for edge, (mark, _) in zip(self.edges, self.seg_marks, strict=True):
                if n > mark:
                    self.write_columns(edge, mark, n)
            self.tally.outputs += n
            self.seg_items = None
        self.segment = None
        self.flush_all()
        self.tally.produced = end - seg.start
        self.t.end_segment(seg, self.tally)


def _checked_batch(batch: Any) -> list[Any]:
    """What ``next_batch()`` returned, as a list of items (None: nothing now); TypeError
    for what is not a batch of items."""
    items: list[Any] = batch if type(batch) is list else _as_batch(batch)
    if None in items:
        raise TypeError(
            f"next_batch() returned None as item {items.index(None)} of {len(items)}: "
            "a batch holds items only (return an empty list for nothing now)"
        )
    return items


def _as_batch(batch: Any) -> list[Any]:
    if batch is None:
        return []
    if isinstance(batch, str | bytes | bytearray | dict):
        raise TypeError(
            f"next_batch() returned a {type(batch).__name__}: it returns a list (or another "
            "iterable) of items, an empty one for nothing now"
        )
    try:
        return list(batch)
    except TypeError:
        raise TypeError(
            f"next_batch() returned a {type(batch).__name__}, not an iterable of items: "
            "return a list of items, an empty one for nothing now"
        ) from None


def _one_at_a_time(batch_fn: Callable[[], Any]) -> Callable[[], Any]:
    """``next()`` over a ``next_batch()``: its items one a call, None when a call gave none.

    Items a batch gave that are not taken when the producer stops are not produced (the
    position counts what was emitted: a resumed run asks the source for them again).
    """
    pending: deque[Any] = deque()
    take = pending.popleft

    def next_item() -> Any:
        if not pending:
            batch = _checked_batch(batch_fn())
            if not batch:
                return None
            pending.extend(batch)
        return take()

    return next_item
