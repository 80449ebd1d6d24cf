"""What every node loop of the one node runtime shares (:mod:`vfadapters.runtime.worker`).

:class:`WorkerBase` holds a replica's state and does what the producer loop
(:mod:`~vfadapters.runtime.producer_loop`), the one-parent loop
(:mod:`~vfadapters.runtime.one_parent_loop`) and the join loop
(:mod:`~vfadapters.runtime.join_loop`) all do: call the node with retries, write
dead letters, route outputs to each edge's buffers and write them under their
output keys (:meth:`WorkerBase.emit`, :meth:`WorkerBase.write_chunk`,
:meth:`WorkerBase.cut`). The transport protocol, the producer's segments and the
size estimates live here too.
"""

from __future__ import annotations

import ctypes
import logging
import math
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

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
    "EMPTY_MAPPING",
    "SKIP",
    "Aborted",
    "OutEdge",
    "ProducerFailed",
    "ProducerNotResumable",
    "ProducerSegment",
    "ResumePlan",
    "WorkerBase",
    "WorkerTransport",
    "estimate",
    "keep_large_allocations",
    "set_parent_death_signal",
    "set_process_name",
    "short_repr",
    "sizes_of",
]


#: metadata of an item that has none (read, never written)
EMPTY_MAPPING: Mapping[str, Any] = {}
_ndarray = np.ndarray
#: what a call returns for an item it dead-lettered (nothing to emit)
SKIP = object()


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


class WorkerBase:
    """A replica's state and what its loops share (see the module docstring)."""

    # set by Worker.main() once the transport is attached and the node built
    ctl: Any  # the control's u64 fields (Control.ctl)
    base: int  # this replica's slot in them
    node: Any
    ctx: Context
    logger: logging.Logger

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
        """``fn(*args[, ctx])``, retried; ``SKIP`` once it was dead-lettered."""
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
        return SKIP

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
                        metadata=meta or EMPTY_MAPPING,
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


class ProducerFailed(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def sizes_of(outputs: list[Any]) -> list[int]:
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
