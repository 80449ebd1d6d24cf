"""The one node runtime: one replica of one node, over any transport.

A :class:`Worker` rebuilds nothing and knows no transport: it gets its ports
(:mod:`vfadapters.runtime.ports`) from a :class:`WorkerTransport` and runs the
node — ``open()`` once, then the producer loop, the one-parent loop or the join
loop, retries then dead letters, ``close()``. The shared-memory executor
(``vfadapters.local``) and the broker (``vfadapters.broker``, ``vf worker``)
both run this class; only their ports differ.

Exactly once (BATCH). Every output is written under an
:class:`~vfadapters.runtime.ports.OutputKey` naming the input positions it
carries the outputs of (:mod:`vfcore.runtime.delivery`): the outputs of one
input batch toward one edge are cut into chunks of consecutive input positions
(the chunk size is :func:`~vfcore.runtime.delivery.batch_limit`'s, recorded by
the input port so that a redelivered batch is cut the same way), a join's
outputs are named after their group, a producer's after its segment (a run of
items whose boundaries the transport stores before any of them is written).
A batch is settled only after all its outputs are written, together with its
:class:`~vfadapters.runtime.ports.Tally`. So a replica killed at any instant
leaves its batches unsettled; whoever takes them again writes the same keys
and the transport drops what it already holds.
"""

from __future__ import annotations

import bisect
import ctypes
import itertools
import logging
import math
import os
import signal
import sys
import time
import traceback
from array import array
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from vfadapters.runtime.columns import Columns
from vfadapters.runtime.config import CTL, SLOT, EdgePlan, NodeConfig
from vfadapters.runtime.context import Context
from vfadapters.runtime.latency import fold
from vfadapters.runtime.letters import DeadLetter
from vfadapters.runtime.ports import (
    Batch,
    Control,
    DeadLetterSink,
    Envelope,
    InputPort,
    LetterNotWritten,
    Outlet,
    OutputKey,
    RecordRefused,
    Tally,
)
from vfcore import owner_of
from vfcore.runtime import (
    GroupOrigin,
    Origin,
    SegmentOrigin,
    batch_limit,
    letter_id,
)

__all__ = [
    "Aborted",
    "ProducerSegment",
    "ResumePlan",
    "Worker",
    "WorkerTransport",
    "estimate",
    "keep_large_allocations",
    "set_parent_death_signal",
    "set_process_name",
    "short_repr",
]

_EMPTY: Mapping[str, Any] = {}
_ndarray = np.ndarray
_SKIP = object()
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
#: claims a join settles in one call (a transport keeps each settlement atomic)
_SETTLE_AT_MOST = 32


class Aborted(Exception):
    """The run asked every worker to stop now."""


class ProducerNotResumable(Exception):
    """A producer restarted past its first item whose node defines no ``resume()``."""


@dataclass(slots=True)
class ProducerSegment:
    """A producer's run of items from ``start``: cut per edge every ``limits[e]`` items;
    ``end`` once sealed (or known from the last life)."""

    start: int
    limits: list[int]
    end: int | None = None
    count: int = 0
    size: int = 0
    opened: float = 0.0
    waited: float = 0.0  # seconds spent in the source's next() while it was open
    stored: Any = None  # the transport's: when every chunk of it is stored

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "limits": list(self.limits), "end": self.end}


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """Where a restarted producer goes on: ``position`` (items before it are written
    to every child) and the ``segments`` it must cut again exactly (their start and
    chunk sizes, and their end when it was sealed, were stored before the chunks
    that depend on them were written)."""

    position: int
    segments: tuple[ProducerSegment, ...] = ()


class WorkerTransport(Protocol):
    """What a transport gives the one :class:`Worker` (see :mod:`vfadapters.runtime.ports`)."""

    latency_clock: Callable[[], int]

    @property
    def control(self) -> Control: ...

    @property
    def letters(self) -> DeadLetterSink: ...

    def attach(self, cfg: NodeConfig) -> None: ...

    def log_handler(self, prefix: str) -> logging.Handler: ...

    def build_node(self) -> Any: ...

    def inputs(self) -> Sequence[InputPort]: ...

    def outlets(self, edge: int) -> Sequence[Outlet]: ...

    def send(self, event: tuple[Any, ...]) -> None: ...

    def child_cost(self, edge: int) -> int: ...

    def wait(self, timeout_s: float) -> None: ...

    def producer_resume(self) -> ResumePlan | None: ...

    def begin_segment(self, segment: ProducerSegment) -> None: ...

    def seal_segment(self, segment: ProducerSegment) -> None: ...

    def end_segment(self, segment: ProducerSegment, tally: Tally) -> None: ...

    def groups_done(
        self, groups: Sequence[tuple[GroupOrigin | None, Tally, tuple[Any, ...]]]
    ) -> None: ...

    def was_emitted(self, group: GroupOrigin) -> bool: ...

    def finished(self) -> None: ...

    def close(self) -> None: ...


def set_process_name(pod: str) -> None:
    """Name this process ``vf:<pod>`` (``ps``, ``top`` and ``pgrep`` show it; 15 bytes on Linux)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, f"vf:{pod}".encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


#: glibc mallopt(): allocations up to this size come from the heap, not a fresh mmap
_MMAP_THRESHOLD = 32 << 20
#: and freed memory up to this much stays in the process (not returned at each free)
_TRIM_THRESHOLD = 256 << 20


def keep_large_allocations() -> None:
    """Let glibc's malloc keep the memory of large payloads between items (Linux).

    A replica moving 1 MiB arrays allocates and frees several buffers of that size
    per item (a record, the client's copies); by default each comes from a fresh
    ``mmap`` and goes back at once, and touching it again page-faults every page.
    Served from a heap that is not trimmed at each free, they cost a copy, not a
    fault a page: about 12 % more MB/s over the broker (docs/performance.md). The
    price is that up to ``_TRIM_THRESHOLD`` bytes freed stay in the worker's RSS.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-1, _TRIM_THRESHOLD)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, _MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def set_parent_death_signal() -> None:
    """Ask the kernel to kill this process when its parent dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class OutEdge:
    """The output buffers of one edge while one origin is handled."""

    __slots__ = (
        "buffers",
        "child",
        "chunk",
        "groups",
        "index",
        "limit",
        "outlets",
        "partitioned",
        "parts",
        "plan",
        "positions",
        "sizes",
        "spec",
    )

    def __init__(self, plan: EdgePlan, outlets: Sequence[Outlet]) -> None:
        self.plan = plan
        self.child = plan.child
        self.spec = plan.child_spec
        self.outlets = outlets
        self.partitioned = plan.routing == "partitioned"
        n = len(outlets)
        self.buffers: list[list[Envelope]] = [[] for _ in range(n)]
        self.positions: list[list[int]] = [[] for _ in range(n)]
        self.groups: list[list[GroupOrigin]] = [[] for _ in range(n)]  # joins
        self.sizes = [0] * n
        self.parts = [0] * n  # part of the current chunk, per outlet
        self.index = [0] * n  # chunks written for the current origin, per outlet
        self.chunk = 0
        self.limit = 1 << 62

    def reset(self, limit: int) -> None:
        self.chunk = 0
        self.limit = max(1, limit)
        n = len(self.outlets)
        self.parts = [0] * n
        self.index = [0] * n


class Worker:
    """One replica (see the module docstring)."""

    def __init__(self, cfg: NodeConfig, transport: WorkerTransport) -> None:
        self.cfg = cfg
        self.t = transport
        self.realtime = cfg.flow_type == "realtime"
        self.name = cfg.pod
        self.latency_max_ns = 0
        self.latency: dict[int, int] = {}  # consumers: histogram of end-to-end latencies
        self.latencies: list[int] = []  # noted, not folded into the histogram yet
        self.inputs: Sequence[InputPort] = []
        self.edges: list[OutEdge] = []
        self.parents: tuple[str, ...] = cfg.parents
        self.origin: Origin | None = None
        self.batch: Any = None
        self.tally = Tally()
        # produce_columns: the open segment's items, their emit times, each edge's
        # (first item not written, bytes before it), the segment's estimated bytes
        self.seg_items: list[Any] | None = None
        self.seg_times: Sequence[int] = []
        self.seg_marks: list[tuple[int, int]] = []
        self.seg_size = 0
        self.out_marks: list[int] = []  # single_columns: each edge's first output not written
        # a producer's thread takes the one token out of ``turn`` after each next() and
        # puts it back before the next one; its SourceWatch takes it only while next()
        # runs, to write the open segment of a source that blocks (source_watch.py)
        self.turn: deque[bool] = deque()
        self.watch: Any = None
        self.next_since: float = 0  # when the current next() call began (since_clock)
        self.since_clock: Callable[[], float] = time.monotonic
        self.since_limit: float = cfg.linger_s
        self.cut_by_watch = False
        # emit(): the items and bytes of the longest part the last item filled by bytes
        self.filled = self.filled_bytes = 0
        # the column loops (produce_columns, single_columns) where they apply; False runs
        # every item through emit() (the reference the column loops are tested against)
        self.columns = True
        self.consumer = cfg.spec.kind == "consumer"
        self.mode = (
            "producer"
            if cfg.spec.kind == "producer"
            else ("join" if len(cfg.parents) > 1 else "single")
        )

    # -- plumbing ------------------------------------------------------------------

    def send(self, event: tuple[Any, ...]) -> None:
        self.t.send(event)

    def aborting(self) -> bool:
        return bool(self.ctl[CTL.ABORT])

    def add(self, field: int, n: int = 1) -> None:
        self.ctl[self.base + field] += n

    def main(self) -> int:
        """The replica's whole life; its exit status (0 done or stopped, 1 failed)."""
        cfg, t = self.cfg, self.t
        keep_large_allocations()
        try:
            t.attach(cfg)
        except Exception as exc:
            self.send(("failed", "connect", f"{type(exc).__name__}: {exc}", ""))
            return 1
        self.ctl = t.control.ctl
        self.base = t.control.base
        self.ctl[self.base + SLOT.PID] = os.getpid()
        self.ctl[self.base + SLOT.STATE] = SLOT.STARTING
        root = logging.getLogger()
        root.handlers[:] = [t.log_handler(f"[{self.name}]")]
        root.setLevel(cfg.log_level)
        self.logger = logging.getLogger(f"vf.{self.name}")
        try:
            node = t.build_node()
        except Exception as exc:
            self.fail("build", exc)
            return 1
        self.node = node
        try:
            self.inputs = t.inputs()
            self.edges = [OutEdge(plan, t.outlets(i)) for i, plan in enumerate(cfg.edges)]
        except Exception as exc:
            self.fail("connect", exc)
            return 1
        self.ctx = Context(
            cfg.node, cfg.replica, cfg.replicas, cfg.device, cfg.devices, self.logger
        )
        from vfcore.flow import takes_ctx

        try:
            if takes_ctx(node.open):
                node.open(ctx=self.ctx)
            else:
                node.open()
        except Exception as exc:
            self.fail("open", exc)
            return 1
        self.ctl[self.base + SLOT.STATE] = SLOT.RUNNING
        self.send(("opened",))
        try:
            if cfg.spec.kind == "producer":
                self.run_producer()
            elif len(self.inputs) > 1:
                self.run_join()
            else:
                self.run_single()
        except Aborted:
            if not self.close_node(report=True):
                return 1
            self.send_latency()
            self.send(("aborted",))
            return 0
        except _ProducerFailed as exc:
            self.fail("next", exc.error)
            self.close_node()
            return 1
        except ProducerNotResumable as exc:
            self.fail("resume", exc)
            self.close_node()
            return 1
        except LetterNotWritten as exc:
            self.fail("dead-letter", exc)
            self.close_node()
            return 1
        except Exception as exc:  # a fault of the runtime itself or of the transport
            self.fail("run", exc)
            self.close_node()
            return 1
        if not self.close_node(report=True):
            return 1  # what close() should have flushed may be lost: the run fails
        try:
            t.finished()
        except Exception as exc:
            self.fail("finish", exc)
            return 1
        self.ctl[self.base + SLOT.STATE] = SLOT.DONE
        self.send_latency()
        self.send(("done",))
        return 0

    def send_latency(self) -> None:
        self.fold_latencies()
        if self.latency:
            self.send(("latency", self.latency, self.latency_max_ns))

    def fold_latencies(self) -> None:
        noted = self.latencies
        if noted:
            self.latency_max_ns = max(self.latency_max_ns, max(noted))
            fold(noted, self.latency)
            noted.clear()

    def fail(self, phase: str, exc: BaseException) -> None:
        self.ctl[self.base + SLOT.STATE] = SLOT.FAILED
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.send(("failed", phase, f"{type(exc).__name__}: {exc}", tb))

    def close_node(self, *, report: bool = False) -> bool:
        """Call the node's ``close()``; whether it returned.

        With ``report``, a ``close()`` that raises fails the replica (phase
        ``close``: a sink's close() often flushes what it wrote, so its failure
        may lose data and the run must not say ``completed``); otherwise (the
        replica already failed) it is logged.
        """
        from vfcore.flow import takes_ctx

        try:
            if takes_ctx(self.node.close):
                self.node.close(ctx=self.ctx)
            else:
                self.node.close()
        except Exception as exc:
            self.add(SLOT.ERRORS)
            if report:
                self.fail("close", exc)
            else:
                self.logger.error(
                    "close() raised %s: %s\n%s", type(exc).__name__, exc, traceback.format_exc()
                )
            return False
        return True

    # -- dead letters ------------------------------------------------------------------

    def dead_letter(
        self,
        trace_id: Any,
        error: str,
        tb: str | None,
        *,
        attempts: int,
        payload: Any = None,
        reason: str = "raised",
        position: int = 0,
        origin: Origin | None = None,
        envelope: Envelope | None = None,
        parent: str | None = None,
    ) -> None:
        origin = origin if origin is not None else self.origin
        node_token = self.cfg.token
        if origin is None:  # REALTIME and a producer's unroutable item without a segment
            origin = SegmentOrigin(self.cfg.replica, position)
        letter = DeadLetter(
            id=letter_id(node_token, origin, position, reason),
            run=self.cfg.run_id,
            node=self.cfg.node,
            replica=self.cfg.replica,
            parent=parent,
            trace_id=trace_id,
            reason=reason,
            error=error,
            traceback=tb,
            attempts=attempts,
            payload=short_repr(payload),
            time=time.time(),
        )
        self.t.letters.put(letter, envelope)
        self.add(SLOT.DEAD_LETTERS)

    # -- calling the node ---------------------------------------------------------------

    def call(
        self, fn: Callable[..., Any], pass_ctx: bool, args: tuple[Any, ...], trace_id: Any
    ) -> Any:
        """``fn(*args[, ctx])``, retried; ``_SKIP`` once it was dead-lettered."""
        try:
            return fn(*args, ctx=self.ctx) if pass_ctx else fn(*args)
        except Exception:
            return self.retry(fn, pass_ctx, args, trace_id)

    def retry(
        self,
        fn: Callable[..., Any],
        pass_ctx: bool,
        args: tuple[Any, ...],
        trace_id: Any,
        *,
        position: int = 0,
        envelope: Envelope | None = None,
        origin: Origin | None = None,
    ) -> Any:
        """Called inside the ``except`` of a first failed attempt: the remaining attempts."""
        ctx = self.ctx
        self.add(SLOT.ERRORS)
        error = sys.exc_info()[1]
        tb = traceback.format_exc()
        attempts = 1
        for _ in range(self.cfg.retries):
            self.add(SLOT.RETRIES)
            ctx._keys = None
            attempts += 1
            try:
                return fn(*args, ctx=ctx) if pass_ctx else fn(*args)
            except Exception as exc:
                self.add(SLOT.ERRORS)
                error = exc
                tb = traceback.format_exc()
        self.logger.warning(
            "trace %s failed %d time(s), dead-lettered: %s: %s",
            trace_id,
            attempts,
            type(error).__name__,
            error,
        )
        self.dead_letter(
            trace_id,
            f"{type(error).__name__}: {error}",
            tb,
            attempts=attempts,
            payload=args[0] if len(args) == 1 else args,
            position=position,
            envelope=envelope,
            origin=origin,
            parent=self.parents[0] if len(self.parents) == 1 else None,
        )
        self.tally.dead_letters += 1
        return _SKIP

    # -- output ----------------------------------------------------------------------------

    def begin_origin(self, origin: Origin | None, batch: Any, limits: Sequence[int]) -> None:
        self.origin = origin
        self.batch = batch
        self.tally = Tally()
        for edge, limit in zip(self.edges, limits, strict=True):
            edge.reset(limit)

    def proposed_limits(self) -> list[int]:
        cfg = self.cfg
        return [
            batch_limit(
                shared=e.plan.shared,
                cost_ns=self.t.child_cost(i),
                batch_max=cfg.batch_max,
                target_s=cfg.batch_target_s,
                keep=e.plan.keep,
            )
            for i, e in enumerate(self.edges)
        ]

    def emit(
        self,
        trace_id: Any,
        ts: float | None,
        meta: Any,
        payload: Any,
        emitted_ns: int,
        position: int = 0,
        size: int = -1,
    ) -> int:
        """Route one output to every edge's buffer; its estimated size in bytes."""
        env = (trace_id, ts, meta, payload, emitted_ns)
        if size < 0:
            size = estimate(payload)
        self.tally.outputs += 1
        cfg = self.cfg
        for edge in self.edges:
            if edge.partitioned:
                try:
                    idx = owner_of(
                        edge.spec,
                        trace_id=trace_id,
                        metadata=meta or _EMPTY,
                        strategy=edge.plan.strategy,
                    )
                except ValueError as exc:  # InvalidKeyError: the message cannot be routed
                    self.dead_letter(
                        trace_id,
                        f"{type(exc).__name__}: {exc}",
                        None,
                        attempts=1,
                        payload=payload,
                        reason=f"unroutable to {edge.child}",
                        position=position,
                        envelope=env,
                    )
                    u = self.tally.unroutable
                    u[edge.child] = u.get(edge.child, 0) + 1
                    continue
            else:
                idx = 0
            buf = edge.buffers[idx]
            buf.append(env)
            edge.positions[idx].append(position)
            bytes_ = edge.sizes[idx] = edge.sizes[idx] + size
            if bytes_ >= cfg.batch_bytes:
                if len(buf) > self.filled:  # a producer ends its segment at a part's end
                    self.filled, self.filled_bytes = len(buf), bytes_
                self.write_chunk(edge, idx)
            elif len(buf) >= cfg.batch_max:
                self.write_chunk(edge, idx)
        return size

    def write_chunk(self, edge: OutEdge, idx: int) -> None:
        envs = edge.buffers[idx]
        if not envs:
            return
        positions = edge.positions[idx]
        edge.buffers[idx] = []
        edge.positions[idx] = []
        edge.sizes[idx] = 0
        mode = self.mode
        if mode == "join":
            key = OutputKey(None, groups=tuple(edge.groups[idx]))
            edge.groups[idx] = []
        else:
            key = OutputKey(
                self.origin,
                edge.chunk,
                edge.parts[idx],
                edge.index[idx],
                self.batch,
                positions=tuple(positions) if mode == "producer" else (),
            )
            edge.parts[idx] += 1
            edge.index[idx] += 1
            e = self.tally.emitted
            e[edge.child] = e.get(edge.child, 0) + len(envs)
        edge.outlets[idx].write(envs, key)
        self.add(SLOT.EMITTED, len(envs))

    def flush_edge(self, edge: OutEdge) -> None:
        for idx, buf in enumerate(edge.buffers):
            if buf:
                self.write_chunk(edge, idx)

    def flush_all(self) -> None:
        for edge in self.edges:
            self.flush_edge(edge)

    def cut_step(self) -> int:
        """The step at which some edge may start a new chunk (the limits' gcd)."""
        step = 0
        for edge in self.edges:
            step = math.gcd(step, edge.limit)
        return step or 1 << 62

    def cut(self, position: int) -> None:
        """Position ``position`` starts a new chunk on every edge whose limit divides it."""
        for edge in self.edges:
            if position % edge.limit == 0:
                self.flush_edge(edge)
                edge.chunk = position // edge.limit
                edge.parts = [0] * len(edge.outlets)

    def record_cost(self, seconds: float, n: int) -> None:
        if n <= 0:
            return
        ns = seconds * 1e9 / n
        old = self.ctl[self.base + SLOT.COST_NS]
        new = ns if not old else 0.7 * old + 0.3 * ns
        self.ctl[self.base + SLOT.COST_NS] = max(1, int(new))

    # -- producers ----------------------------------------------------------------------

    def run_producer(self) -> None:
        """Call ``next()`` until StopIteration (or a stop), writing items in *segments*.

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
        self.segment: ProducerSegment | None = None
        from vfadapters.runtime.source_watch import SourceWatch

        self.watch = watch = SourceWatch(self)
        watch.start()
        try:
            if (
                self.columns
                and not pass_ctx
                and not self.realtime
                and not any(e.partitioned for e in self.edges)
            ):
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
            raise _ProducerFailed(
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
        sleep = time.sleep
        stop_index = CTL.STOP_PRODUCERS
        abort_index = CTL.ABORT
        nones_field = self.base + SLOT.NONES
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
                raise _ProducerFailed(exc) from exc
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
                ctl[nones_field] += 1
                if seg is not None and seg.end is None:
                    self.close_segment(position)
                nones += 1
                if nones > _NONES_BEFORE_PAUSE:
                    sleep(
                        min(1e-4 * 2 ** min(nones - _NONES_BEFORE_PAUSE - 1, 16), _NONE_PAUSE_MAX_S)
                    )
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
        sleep = time.sleep
        stop_index = CTL.STOP_PRODUCERS
        abort_index = CTL.ABORT
        nones_field = self.base + SLOT.NONES
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
                raise _ProducerFailed(exc) from exc
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
                ctl[nones_field] += 1
                if seg is not None and seg.end is None:
                    self.close_columns(position, total)
                    seg = None
                nones += 1
                if nones > _NONES_BEFORE_PAUSE:
                    sleep(
                        min(1e-4 * 2 ** min(nones - _NONES_BEFORE_PAUSE - 1, 16), _NONE_PAUSE_MAX_S)
                    )
                prev = wall()
                continue
            if nones:
                nones = 0
            if seg is None:
                seg = self.open_segment(
                    position, planned.popleft() if planned else None, time.monotonic()
                )
                start = seg.start
                items = self.seg_items = []
                emitted = self.seg_times = array("q")  # pickled as it is (codec._ints)
                add_item = items.append
                add_time = emitted.append
                self.seg_marks = [(0, 0)] * len(self.edges)
                total = waited = 0
                lingers = seg.end is None
                if seg.end is None:
                    close_off, close_size = segment_items - 1, segment_bytes
                    deadline = now + age_ns
                else:  # a segment of the last life, cut again exactly where it ended
                    close_off, close_size, deadline = seg.end - start - 1, 1 << 62, 1 << 62
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
            self.close_columns(seg.start + len(items), sum(_sizes(items)))

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

    # -- one parent -----------------------------------------------------------------------

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
                if out is _SKIP:
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
        skip = _SKIP
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
                new = _sizes(outs[len(sizes) :])
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
            sizes.extend(_sizes(outs[len(sizes) :]))
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

    def undecodable(self, inp: InputPort, batch: Batch, exc: BaseException) -> None:
        """A record that cannot be decoded, or that its transport refused to decode (its
        seal does not verify): one dead letter for it, never a crashed worker."""
        self.begin_origin(batch.origin, batch, [1] * len(self.edges))
        refused = isinstance(exc, RecordRefused)
        self.dead_letter(
            None,
            str(exc) if refused else f"{type(exc).__name__}: {exc}",
            None,
            attempts=1,
            reason=exc.reason if isinstance(exc, RecordRefused) else "record-undecodable",
            parent=inp.parent,
        )
        self.logger.error(
            "an input record from %s %s (%s): dead-lettered",
            inp.parent,
            "was refused, not decoded" if refused else "could not be decoded",
            exc if refused else f"{type(exc).__name__}: {exc}",
        )
        # not written by the parent (a record no writer of this run makes): not counted as
        # received on the edge; one letter for the record
        self.tally.rejected = 1
        self.tally.dead_letters = 1
        inp.settle([batch], self.tally)

    # -- joins ----------------------------------------------------------------------------

    def run_join(self) -> None:
        from vfcore import JoinAssembler, Message
        from vfcore.flow import takes_ctx

        cfg = self.cfg
        policy = cfg.join_policy
        assert policy is not None
        consumer = self.consumer
        fn = self.node.consume if consumer else self.node.process
        pass_ctx = takes_ctx(fn)
        parents = self.parents
        n = len(parents)
        inputs = self.inputs
        asm = JoinAssembler(parents, policy)
        self.collected = frozenset(policy.collected_parents)
        pin = not self.realtime  # BATCH: a batch settles once all its halves left the join
        in_flight: list[deque[Any]] = [deque() for _ in range(n)]
        ended = [False] * n
        rr = 0
        clock = time.monotonic
        half_limit = max(1, policy.max_pending // 2)
        self.pending_groups: list[tuple[GroupOrigin | None, Tally, tuple[Any, ...]]] = []
        self.begin_origin(None, None, [1 << 62] * len(self.edges))

        def now_ms() -> float:
            return clock() * 1000.0

        while True:
            progressed = False
            order = [(rr + j) % n for j in range(n)]
            if pin and asm.pending_group_count >= half_limit:
                backlog = asm.backlog_by_parent()
                order.sort(key=lambda i: backlog[parents[i]])  # lagging parents first
            for i in order:
                if ended[i]:
                    continue
                batch = inputs[i].claim()
                if batch is False:
                    ended[i] = True
                    inputs[i].wake()
                    continue
                if batch is None:
                    continue
                rr = (i + 1) % n
                if pin and batch.redelivered and inputs[i].already_done(batch):
                    inputs[i].settle([batch], None)
                    progressed = True
                    break
                try:
                    envs = batch.envelopes()
                except Exception as exc:
                    self.undecodable(inputs[i], batch, exc)
                    self.begin_origin(None, None, [1 << 62] * len(self.edges))
                    progressed = True
                    break
                batch.tally = Tally(received=len(envs))  # halves' fates, settled with it
                batch.outstanding = len(envs)
                in_flight[i].append(batch)
                t0 = time.perf_counter()
                parent = parents[i]
                for position, (trace_id, ts, meta, payload, emitted_ns) in enumerate(envs):
                    if self.aborting():
                        raise Aborted
                    held = (payload, meta, batch if pin else None, emitted_ns, position)
                    message = Message(trace_id, held, ts)
                    self.handle_join(asm.offer(parent, message, now_ms=now_ms()), fn, pass_ctx)
                if not pin:
                    batch.outstanding = 0
                self.record_cost(time.perf_counter() - t0, len(envs))
                progressed = True
                break
            if not progressed:
                self.handle_join(asm.expire(now_ms=now_ms()), fn, pass_ctx)
            self.flush_groups()
            for i in range(n):
                self.settle_ready(inputs[i], in_flight[i])
            if all(ended):
                break
            if not progressed:
                if self.aborting():
                    raise Aborted
                self.t.wait(0.05 if policy.timeout_ms is not None else 0.2)
        # end of stream: whatever still waits for a counterpart never gets one
        self.end_join(asm)
        self.flush_groups()
        for i in range(n):
            for batch in in_flight[i]:
                batch.outstanding = 0
            self.settle_ready(inputs[i], in_flight[i])

    def flush_groups(self) -> None:
        """Write the groups emitted since the last flush, then record them as done."""
        self.flush_all()
        if self.pending_groups:
            groups, self.pending_groups = self.pending_groups, []
            self.t.groups_done(groups)

    def handle_join(self, out: Any, fn: Callable[..., Any], pass_ctx: bool) -> None:
        if out.is_empty:
            return
        ctx = self.ctx
        consumer = self.consumer
        collected = self.collected
        for group in out.groups:
            args: list[Any] = []
            meta: dict[str, Any] | None = None
            ts = group.first_ts_ms
            for parent in self.parents:
                held = group.members[parent]
                if held is None:
                    args.append(None)
                elif parent in collected:  # a tuple of held samples, by time
                    args.append(tuple(h[0] for h in held))
                else:
                    args.append(held[0])
                    if held[1]:
                        meta = dict(held[1]) if meta is None else {**meta, **held[1]}
            if ts is None:
                ts = next((m.event_ts_ms for _, m in group.messages), None)
            # the earliest emit of the group's members
            emitted_ns = min(
                (m.payload[3] for _, m in group.messages), default=self.t.latency_clock()
            )
            origin = GroupOrigin(group.trace_id)
            tally = Tally(groups=1, grouped=len(group.messages))
            self.tally = tally
            self.origin = origin
            redelivered = any(
                m.payload[2] is not None and m.payload[2].redelivered for _, m in group.messages
            )
            ctx.redelivered = redelivered
            if redelivered and not self.realtime and self.t.was_emitted(origin):
                # formed again from halves handed out again: it was handled (and counted)
                # before; its halves are settled, nothing is emitted twice
                for _, message in group.messages:
                    batch = message.payload[2]
                    if batch is not None:
                        batch.outstanding -= 1
                        batch.tally.duplicates += 1
                continue
            if consumer:
                self.latencies.append(self.t.latency_clock() - emitted_ns)
                if len(self.latencies) >= 4096:
                    self.fold_latencies()
            ctx._begin(group.trace_id, ts, meta)
            result = self.call(fn, pass_ctx, tuple(args), group.trace_id)
            if result is not _SKIP:
                if consumer:
                    tally.outputs += 1
                elif result is None:
                    tally.filtered += 1
                else:
                    self.emit_group(
                        origin, group.trace_id, ts, ctx._out_metadata(), result, emitted_ns
                    )
            members = tuple(m.payload[2] for _, m in group.messages if m.payload[2] is not None)
            self.pending_groups.append((origin, tally, members))
            for _, message in group.messages:
                batch = message.payload[2]
                if batch is not None:
                    batch.outstanding -= 1
        for dropped in out.dropped:
            self.add(SLOT.JOIN_DROPPED)
            held = dropped.message.payload
            batch = held[2]
            lettered = dropped.reason == "error" or (
                not self.realtime and dropped.reason == "evicted"
            )
            if lettered:
                self.dead_letter(
                    dropped.message.trace_id,
                    f"join {dropped.reason}: {dropped.detail}",
                    None,
                    attempts=0,
                    payload=held[0],
                    reason=f"join-{dropped.reason}",
                    position=held[4],
                    origin=batch.origin if batch is not None else None,
                )
            if batch is not None:  # BATCH: the half's fate is settled with its batch
                if lettered:
                    batch.tally.dead_letters += 1
                elif dropped.reason == "duplicate":  # a copy of a half already grouped
                    batch.tally.duplicates += 1
                else:
                    batch.tally.join_dropped += 1
                batch.outstanding -= 1
            else:  # REALTIME: its batch was settled on arrival; count the drop on its own
                self.pending_groups.append(
                    (None, Tally(join_dropped=0 if lettered else 1, dead_letters=int(lettered)), ())
                )

    def emit_group(
        self, origin: GroupOrigin, trace_id: Any, ts: Any, meta: Any, payload: Any, emitted: int
    ) -> None:
        """A join's output: one envelope named after its group, into the edges' buffers."""
        env = (trace_id, ts, meta, payload, emitted)
        self.tally.outputs += 1
        size = estimate(payload)
        for edge in self.edges:
            if edge.plan.routing == "partitioned":
                try:
                    idx = owner_of(
                        edge.spec,
                        trace_id=trace_id,
                        metadata=meta or _EMPTY,
                        strategy=edge.plan.strategy,
                    )
                except ValueError as exc:
                    self.dead_letter(
                        trace_id,
                        f"{type(exc).__name__}: {exc}",
                        None,
                        attempts=1,
                        payload=payload,
                        reason=f"unroutable to {edge.child}",
                        origin=origin,
                        envelope=env,
                    )
                    u = self.tally.unroutable
                    u[edge.child] = u.get(edge.child, 0) + 1
                    continue
            else:
                idx = 0
            edge.buffers[idx].append(env)
            edge.positions[idx].append(0)
            edge.groups[idx].append(origin)
            edge.sizes[idx] += size
            e = self.tally.emitted
            e[edge.child] = e.get(edge.child, 0) + 1

    def end_join(self, asm: Any) -> None:
        """At the end of the stream, what still waits for a counterpart never gets one.

        BATCH dead-letters those halves (``join-incomplete``) — except a half that
        was redelivered after a crash and whose group the transport confirms it
        had emitted before (its counterpart's batch was settled then): that half
        is a duplicate, counted as such.
        """
        pending = asm.pending()
        by_trace: dict[Any, list[tuple[str, Any]]] = {}
        for parent, messages in pending.items():
            for m in messages:
                by_trace.setdefault(m.trace_id, []).append((parent, m))
        for trace_id, members in by_trace.items():
            redelivered = any(
                m.payload[2] is not None and m.payload[2].redelivered for _, m in members
            )
            emitted = (
                not self.realtime and redelivered and self.t.was_emitted(GroupOrigin(trace_id))
            )
            present = [p for p, _ in members]
            missing = [p for p in self.parents if p not in present]
            for parent, m in members:
                self.add(SLOT.JOIN_DROPPED)
                batch = m.payload[2]
                if self.realtime or batch is None:
                    self.pending_groups.append((None, Tally(join_dropped=1), ()))
                    continue
                if emitted:
                    batch.tally.duplicates += 1
                    continue
                self.dead_letter(
                    trace_id,
                    f"join incomplete at end of stream: got {present}, never {missing}",
                    None,
                    attempts=0,
                    payload=m.payload[0],
                    reason="join-incomplete",
                    position=m.payload[4],
                    origin=batch.origin,
                    parent=parent,
                )
                batch.tally.dead_letters += 1
            if emitted:
                self.logger.warning(
                    "trace %s: a redelivered half found no counterpart; its group had been "
                    "emitted before the restart (counted as a duplicate)",
                    trace_id,
                )

    def settle_ready(self, inp: InputPort, batches: deque[Any]) -> None:
        if not batches:
            return
        done = [b for b in batches if b.outstanding <= 0]
        if not done:
            return
        for b in done:
            b.settled = True
        kept = [b for b in batches if not b.settled]
        batches.clear()
        batches.extend(kept)
        for i in range(0, len(done), _SETTLE_AT_MOST):
            part = done[i : i + _SETTLE_AT_MOST]
            tally = Tally()
            for b in part:
                bt: Tally = b.tally
                tally.received += bt.received
                tally.dead_letters += bt.dead_letters
                tally.join_dropped += bt.join_dropped
                tally.duplicates += bt.duplicates
            inp.settle(part, tally)


class _ProducerFailed(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _sizes(outputs: list[Any]) -> list[int]:
    """:func:`estimate` of each output (bytes objects counted in one pass)."""
    if set(map(type, outputs)) == {bytes}:
        return [n + 32 for n in map(len, outputs)]
    return [estimate(x) for x in outputs]


def estimate(payload: Any, depth: int = 0) -> int:
    """Roughly how many bytes a payload adds to a batch (containers: one level deep)."""
    kind = type(payload)
    if kind is bytes or kind is bytearray:
        return len(payload) + 32
    if kind is _ndarray:
        return int(payload.nbytes) + 64
    if depth == 0:
        if kind is dict:
            return 64 + sum(estimate(v, 1) for v in payload.values())
        if (kind is tuple or kind is list) and len(payload) <= 64:
            return 64 + sum(estimate(v, 1) for v in payload)
    if kind.__module__ == "torch":
        return int(getattr(payload, "nbytes", 64)) + 64
    return 64


def short_repr(value: Any, limit: int = 200) -> str | None:
    if value is None:
        return None
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
