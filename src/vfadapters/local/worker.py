"""One replica of one node, in its own process.

The worker rebuilds its node (importing the flow file first when the node's
class lives there), calls ``open()`` once, then loops: claim a record from an
input ring, call ``process``/``consume`` for each message (retrying, then
dead-lettering what keeps raising), flush the outputs to the children's rings,
and only then *settle* the record, so that a replica killed with -9 loses
nothing: its successor finds the record still in flight and redelivers it.

Signals: SIGINT and SIGTERM never stop a worker (the coordinator decides how to
stop, and kills with SIGKILL when it must). A worker starts with both ignored
(inherited from the fork server, or from the coordinator with ``spawn``), so a
signal to the whole process group cannot kill it at any instant; it then
catches both with a handler that does nothing, so that a process a node starts
(``subprocess``, ``exec``) gets the default dispositions back instead of
inheriting "ignored". The kernel kills the worker if its parent dies
(``PR_SET_PDEATHSIG``), and the worker also exits when it sees it has been
orphaned.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import pickle
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from vfadapters.local.codec import decode, encode
from vfadapters.local.config import CTL, SLOT, EdgeOut, WorkerConfig, slot_base
from vfadapters.local.latency import fold
from vfadapters.local.ring import Claim, Ring, StopWaiting, record_size
from vfadapters.local.shm import Segment
from vfcore import NodeSpec, owner_of

__all__ = [
    "Aborted",
    "Context",
    "Worker",
    "estimate",
    "set_parent_death_signal",
    "short_repr",
    "worker_main",
]

_EMPTY: Mapping[str, Any] = {}
_ndarray = np.ndarray
_BATCH_BYTES = 1 << 20
_SKIP = object()
#: A producer whose next() returns None this many times in a row starts pausing
#: between calls: 0.1 ms, doubling up to _NONE_PAUSE_MAX_S, until it emits again.
_NONES_BEFORE_PAUSE = 8
_NONE_PAUSE_MAX_S = 0.05


class Aborted(Exception):
    """The coordinator asked every worker to stop now."""


class Context:
    """What a node method receives as ``ctx`` (when it declares that parameter).

    ``trace_id`` and ``event_ts_ms`` describe the message being handled;
    ``metadata`` holds the fields set upstream; ``set_partition_key(field,
    value)`` sets a field on what this call emits. ``node``, ``replica``,
    ``replicas``, ``device`` ("cuda", "cpu", or None for CPU nodes) and
    ``logger`` describe the worker.
    """

    __slots__ = (
        "_keys",
        "device",
        "devices",
        "event_ts_ms",
        "logger",
        "metadata",
        "node",
        "replica",
        "replicas",
        "trace_id",
    )

    def __init__(
        self,
        node: str,
        replica: int,
        replicas: int,
        device: str | None,
        devices: tuple[int, ...],
        logger: logging.Logger,
    ) -> None:
        self.node = node
        self.replica = replica
        self.replicas = replicas
        self.device = device
        self.devices = devices
        self.logger = logger
        self.trace_id: str | None = None
        self.event_ts_ms: float | None = None
        self.metadata: Mapping[str, Any] = _EMPTY
        self._keys: dict[str, Any] | None = None

    def set_partition_key(self, field: str, value: Any) -> None:
        """Set metadata ``field`` on this call's output (children partition by it)."""
        from vfcore import encode_key

        if not isinstance(field, str) or not field:
            raise ValueError(f"set_partition_key needs a field name, got {field!r}")
        encode_key(value)  # an invalid key raises InvalidKeyError here, in the caller
        if self._keys is None:
            self._keys = {}
        self._keys[field] = value

    def _begin(self, trace_id: str, ts: float | None, metadata: Mapping[str, Any] | None) -> None:
        self.trace_id = trace_id
        self.event_ts_ms = ts
        self.metadata = metadata or _EMPTY
        self._keys = None

    def _out_metadata(self) -> dict[str, Any] | None:
        keys = self._keys
        if keys is None:
            return self.metadata or None  # type: ignore[return-value]
        merged = dict(self.metadata)
        merged.update(keys)
        return merged

    def __repr__(self) -> str:
        return f"Context(node={self.node!r}, replica={self.replica}, trace_id={self.trace_id!r})"


class _PipeHandler(logging.Handler):
    def __init__(self, send: Callable[[tuple[Any, ...]], None], prefix: str) -> None:
        super().__init__()
        self._send = send
        self._prefix = prefix
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            self._send(("log", record.levelno, f"{self._prefix} {text}"))
        except Exception:
            pass


def set_parent_death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _release_forkserver_pipe() -> None:
    """Close this worker's copy of the fork server's "alive" pipe.

    The fork server exits when every write end of that pipe is closed. It
    hands one to each child it forks, so while any worker lived, a SIGKILLed
    coordinator would leave the fork server (and, through it, the workers'
    parent-death signal) alive forever. Without the copy, the coordinator's
    death ends the fork server, whose death ends every worker.
    """
    try:
        from multiprocessing import forkserver

        server: Any = getattr(forkserver, "_forkserver", None)
        fd = getattr(server, "_forkserver_alive_fd", None)
        if fd is not None:
            server._forkserver_alive_fd = None
            os.close(fd)
    except (AttributeError, OSError):
        pass


def _not_for_workers(signum: int, frame: Any) -> None:
    """SIGINT/SIGTERM in a worker: nothing to do, the coordinator decides how to stop."""


def worker_main(cfg: WorkerConfig, conn: Any) -> None:
    """The target of every worker process."""
    signal.signal(signal.SIGINT, _not_for_workers)
    signal.signal(signal.SIGTERM, _not_for_workers)
    set_parent_death_signal()
    _release_forkserver_pipe()
    with contextlib.suppress(OSError):
        os.dup2(2, 1)  # stdout belongs to the coordinator (`vf run --json`)
    os.environ.update(cfg.env)
    code = 1
    try:
        code = Worker(cfg, conn).main()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(code)


class OutEdge:
    """Output buffers of one edge (one per child replica when partitioned).

    ``rings``: where batches go (shared-memory rings here; the broker worker's
    outlets there), one, or one per owner; ``keep``: the most messages a batch
    holds; ``limit``: the batch size to start from (``flush_edge`` then sizes it
    from the child's cost per message, read at ``cost_field``).
    """

    __slots__ = (
        "buffers",
        "child",
        "cost_field",
        "keep",
        "limit",
        "rings",
        "routing",
        "sizes",
        "spec",
        "strategy",
    )

    def __init__(
        self,
        child: str,
        spec: NodeSpec,
        routing: str,
        strategy: Any,
        rings: list[Any],
        cost_field: int,
        keep: int,
        limit: int,
    ) -> None:
        self.child = child
        self.spec = spec
        self.routing = routing
        self.strategy = strategy
        self.rings = rings
        self.cost_field = cost_field
        self.buffers: list[list[tuple[Any, ...]]] = [[] for _ in rings]
        self.sizes = [0] * len(rings)
        self.keep = keep
        self.limit = limit

    @classmethod
    def of_rings(cls, edge: EdgeOut) -> OutEdge:
        """The edge as the local executor laid it out: its rings attached."""
        rings = [Ring.attach(h) for h in edge.rings]
        # REALTIME: a record holds at most as many messages as the child's buffers keep
        # waiting (evictions take whole records, so the keep bound holds per message)
        keep = min((r.keep for r in rings), default=0) or (1 << 62)
        return cls(
            edge.child,
            edge.child_spec,
            edge.routing,
            edge.strategy,
            rings,
            slot_base(edge.slots[0]) + SLOT.COST_NS,
            keep,
            min(8, keep),  # until the child has measured what one message costs it
        )


class Worker:
    #: the clock of end-to-end latency (emit at the producer → consume): one host's
    #: monotonic clock locally; the broker worker uses the wall clock (time.time_ns)
    latency_clock: Callable[[], int] = staticmethod(time.monotonic_ns)

    def __init__(self, cfg: WorkerConfig, conn: Any) -> None:
        self.cfg = cfg
        self.conn = conn
        self.ppid = os.getppid()
        self.realtime = cfg.flow_type == "realtime"
        self._dead_fd: int | None = None
        self.name = cfg.pod
        self.latency_max_ns = 0
        self.latency: dict[int, int] = {}  # consumers: histogram of end-to-end latencies
        self.latencies: list[int] = []  # noted, not folded into the histogram yet
        self.batch_bytes = _BATCH_BYTES  # a batch is written once its payloads pass this
        # the transport (attach_control / attach_io): rings locally, consumers and
        # subjects over the broker
        self.ctl: Any = None
        self.inputs: list[Any] = []
        self.edges: list[Any] = []

    # -- plumbing ------------------------------------------------------------------

    def send(self, event: tuple[Any, ...]) -> None:
        try:
            self.conn.send(event)
        except (BrokenPipeError, OSError):
            os._exit(3)  # the coordinator is gone

    def aborting(self) -> bool:
        return bool(self.ctl[CTL.ABORT])

    def check_orphaned(self) -> None:
        if os.getppid() != self.ppid:
            os._exit(3)
        try:
            os.kill(self.cfg.coordinator_pid, 0)
        except ProcessLookupError:
            os._exit(3)
        except OSError:
            pass

    def wait_doorbell(self, timeout: float = 0.2) -> None:
        if self.aborting():
            raise Aborted
        self.cfg.doorbell.acquire(True, timeout)
        self.check_orphaned()

    def add(self, field: int, n: int = 1) -> None:
        self.ctl[self.base + field] += n

    # -- the transport (the broker worker overrides these four) --------------------

    def attach_control(self) -> None:
        """The control fields: shared memory with the coordinator."""
        self.segment = Segment.attach(self.cfg.control)
        self.ctl = self.segment.buf.cast("Q")
        self.base = slot_base(self.cfg.slot)

    def log_handler(self) -> logging.Handler:
        return _PipeHandler(self.send, f"[{self.name}]")

    def attach_io(self) -> None:
        """The input rings (in parent order) and the output edges."""
        cfg = self.cfg
        self.inputs = [Ring.attach(h) for _, h in cfg.inputs]
        self.parents = tuple(p for p, _ in cfg.inputs)
        self.edges = [OutEdge.of_rings(e) for e in cfg.outputs]

    def finished(self) -> None:
        """Everything emitted is written (rings: at once); the broker waits for its acks."""

    def main(self) -> int:
        cfg = self.cfg
        self.attach_control()
        self.ctl[self.base + SLOT.PID] = os.getpid()
        self.ctl[self.base + SLOT.STATE] = SLOT.STARTING
        root = logging.getLogger()
        root.handlers[:] = [self.log_handler()]
        root.setLevel(cfg.log_level)
        self.logger = logging.getLogger(f"vf.{self.name}")
        try:
            node = self.build_node()
        except Exception as exc:
            self.fail("build", exc)
            return 1
        self.node = node
        try:
            self.attach_io()
        except Exception as exc:
            self.fail("connect", exc)
            return 1
        self.ctx = Context(
            cfg.node,
            cfg.replica,
            cfg.replicas,
            cfg.device,
            cfg.devices,
            self.logger,
        )
        from vfcore import takes_ctx

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
        except Exception as exc:  # a fault of the executor itself, or an invalid batch
            self.fail("run", exc)
            self.close_node()
            return 1
        if not self.close_node(report=True):
            return 1  # what close() should have flushed may be lost: the run fails
        try:
            self.finished()
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

    def build_node(self) -> Any:
        if self.cfg.preload:
            from pathlib import Path

            from vfadapters.loading import import_file

            for path in self.cfg.preload:
                import_file(Path(path))
        return pickle.loads(self.cfg.node_blob)

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
        from vfcore import takes_ctx

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
    ) -> None:
        entry = {
            "node": self.cfg.node,
            "replica": self.cfg.replica,
            "trace_id": trace_id,
            "reason": reason,
            "error": error,
            "traceback": tb,
            "attempts": attempts,
            "payload": short_repr(payload),
            "time": time.time(),
        }
        line = (json.dumps(entry, default=repr) + "\n").encode()
        if self._dead_fd is None:
            self._dead_fd = os.open(
                self.cfg.dead_letter_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
            )
        os.write(self._dead_fd, line)  # one write on O_APPEND: lines never interleave
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
        self, fn: Callable[..., Any], pass_ctx: bool, args: tuple[Any, ...], trace_id: Any
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
        )
        return _SKIP

    # -- output ----------------------------------------------------------------------------

    def emit(
        self, trace_id: str, ts: float | None, meta: Any, payload: Any, emitted_ns: int
    ) -> None:
        env = (trace_id, ts, meta, payload, emitted_ns)
        size = estimate(payload)
        for edge in self.edges:
            if edge.routing == "partitioned":
                try:
                    idx = self.owner(edge, trace_id, meta)
                except ValueError as exc:  # InvalidKeyError: the message cannot be routed
                    self.dead_letter(
                        trace_id,
                        f"{type(exc).__name__}: {exc}",
                        None,
                        attempts=1,
                        payload=payload,
                        reason=f"unroutable to {edge.child!r}",
                    )
                    continue
            else:
                idx = 0
            buf = edge.buffers[idx]
            buf.append(env)
            edge.sizes[idx] += size
            if len(buf) >= edge.limit or edge.sizes[idx] >= self.batch_bytes:
                self.flush_edge(edge, idx)

    @staticmethod
    def owner(edge: OutEdge, trace_id: str, meta: Any) -> int:
        """The child replica that owns a message: :func:`vfcore.owner_of`, nothing else."""
        return owner_of(
            edge.spec, trace_id=trace_id, metadata=meta or _EMPTY, strategy=edge.strategy
        )

    def flush_all(self) -> None:
        for edge in self.edges:
            for idx, buf in enumerate(edge.buffers):
                if buf:
                    self.flush_edge(edge, idx)

    def pending_output(self) -> bool:
        return any(buf for edge in self.edges for buf in edge.buffers)

    def flush_edge(self, edge: OutEdge, idx: int) -> None:
        envs = edge.buffers[idx]
        edge.buffers[idx] = []
        edge.sizes[idx] = 0
        self.write_batch(edge.rings[idx], envs)
        self.add(SLOT.EMITTED, len(envs))
        cost = self.ctl[edge.cost_field]
        if cost:
            edge.limit = max(
                1,
                min(self.cfg.batch_max, edge.keep, int(self.cfg.batch_target_s * 1e9 / cost)),
            )

    def write_batch(self, ring: Ring, envs: list[tuple[Any, ...]]) -> None:
        body, buffers = encode(envs)
        if len(envs) > 1 and record_size(len(body), [b.nbytes for b in buffers]) > ring.capacity:
            half = len(envs) // 2  # more than a buffer holds: in two halves, in order
            self.write_batch(ring, envs[:half])
            self.write_batch(ring, envs[half:])
            return
        try:
            ring.write(body, buffers, len(envs), evict=self.realtime, should_stop=self.aborting)
        except StopWaiting:
            raise Aborted from None

    def record_cost(self, seconds: float, n: int) -> None:
        if n <= 0:
            return
        ns = seconds * 1e9 / n
        old = self.ctl[self.base + SLOT.COST_NS]
        new = ns if not old else 0.7 * old + 0.3 * ns
        self.ctl[self.base + SLOT.COST_NS] = max(1, int(new))

    # -- producers ----------------------------------------------------------------------

    def run_producer(self) -> None:
        from vfcore import takes_ctx

        node, ctx, ctl = self.node, self.ctx, self.ctl
        fn = node.next
        pass_ctx = takes_ctx(fn)
        prefix = f"{self.cfg.node}:"
        linger = self.cfg.linger_s
        seq = 0
        pending_since = 0.0
        produced = 0
        nones = 0  # None returned this many times in a row
        nones_field = self.base + SLOT.NONES
        clock = time.monotonic
        wall = None if self.latency_clock is time.monotonic_ns else self.latency_clock
        sleep = time.sleep
        stop_index = CTL.STOP_PRODUCERS
        abort_index = CTL.ABORT
        while not ctl[stop_index]:
            if ctl[abort_index]:
                raise Aborted
            trace_id = prefix + str(seq)
            ctx._begin(trace_id, None, None)
            t0 = clock()
            try:
                item = fn(ctx=ctx) if pass_ctx else fn()
            except StopIteration:
                break
            except Exception as exc:
                raise _ProducerFailed(exc) from exc
            seq += 1
            if item is None:
                # "nothing now": send what is buffered, then (None after None) pause,
                # so that a producer polling an empty source does not spin a core
                ctl[nones_field] += 1
                if produced:
                    self.flush_all()
                    self.add(SLOT.PROCESSED, produced)
                    produced = 0
                    pending_since = 0.0
                nones += 1
                if nones > _NONES_BEFORE_PAUSE:
                    sleep(
                        min(1e-4 * 2 ** min(nones - _NONES_BEFORE_PAUSE - 1, 16), _NONE_PAUSE_MAX_S)
                    )
                continue
            nones = 0
            t1 = clock()
            ts = ctx.event_ts_ms
            if ts is None:
                ts = time.time() * 1000.0
            # emit time for end-to-end latency: monotonic here (= int(t1 * 1e9)); the
            # broker worker uses the wall clock, which hosts share
            self.emit(trace_id, ts, ctx._out_metadata(), item, wall() if wall else int(t1 * 1e9))
            produced += 1
            if not pending_since:
                pending_since = t1
            if t1 - t0 > linger or t1 - pending_since > linger:
                self.flush_all()
                self.add(SLOT.PROCESSED, produced)
                produced = 0
                pending_since = 0.0
        self.flush_all()
        self.add(SLOT.PROCESSED, produced)

    # -- one parent -----------------------------------------------------------------------

    def run_single(self) -> None:
        from vfcore import takes_ctx

        node, ctx, ctl = self.node, self.ctx, self.ctl
        consumer = self.cfg.spec.kind == "consumer"
        fn = node.consume if consumer else node.process
        pass_ctx = takes_ctx(fn)
        ring = self.inputs[0]
        retry = self.retry
        emit = self.emit
        begin = ctx._begin
        abort_index = CTL.ABORT
        active_index = self.base + SLOT.ACTIVE
        reader = self.cfg.replica
        clock = time.perf_counter
        monotonic_ns = self.latency_clock
        latencies = self.latencies
        note = latencies.append
        while True:
            if not ctl[active_index]:
                return  # retired by autoscaling: nothing is held, others go on
            claim = ring.claim(reader)
            if claim is None:
                self.wait_doorbell()
                continue
            if claim is False:
                ring.doorbell.release()  # wake the next replica sharing this ring
                return
            envs = decode(ring.view(claim), claim.nbufs)
            t0 = clock()
            filtered = 0
            for trace_id, ts, meta, payload, emitted_ns in envs:
                if ctl[abort_index]:
                    raise Aborted
                if consumer:
                    note(monotonic_ns() - emitted_ns)  # end-to-end latency (latency.py)
                begin(trace_id, ts, meta)
                try:
                    out = fn(payload, ctx=ctx) if pass_ctx else fn(payload)
                except Exception:
                    out = retry(fn, pass_ctx, (payload,), trace_id)
                if consumer or out is _SKIP:
                    continue
                if out is None:
                    filtered += 1
                    continue
                keys = ctx._keys
                emit(trace_id, ts, meta if keys is None else ctx._out_metadata(), out, emitted_ns)
            n = len(envs)
            if len(latencies) >= 4096:
                self.fold_latencies()
            self.record_cost(clock() - t0, n)
            self.flush_all()
            ring.settle([claim])
            self.add(SLOT.RECEIVED, n)
            self.add(SLOT.PROCESSED, n)
            if filtered:
                self.add(SLOT.FILTERED, filtered)

    # -- joins ----------------------------------------------------------------------------

    def run_join(self) -> None:
        from vfcore import JoinAssembler, Message, takes_ctx

        cfg = self.cfg
        policy = cfg.join_policy
        assert policy is not None
        consumer = cfg.spec.kind == "consumer"
        fn = self.node.consume if consumer else self.node.process
        pass_ctx = takes_ctx(fn)
        parents = self.parents
        n = len(parents)
        rings = self.inputs
        asm = JoinAssembler(parents, policy)
        self.collected = frozenset(policy.collected_parents)
        pin = not self.realtime  # BATCH: a record settles once all its halves left the join
        in_flight: list[deque[Claim]] = [deque() for _ in range(n)]
        ended = [False] * n
        rr = 0
        clock = time.monotonic
        half_limit = max(1, policy.max_pending // 2)

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
                claim = rings[i].claim(cfg.replica)
                if claim is False:
                    ended[i] = True
                    rings[i].doorbell.release()
                    continue
                if claim is None:
                    continue
                rr = (i + 1) % n
                envs = decode(rings[i].view(claim), claim.nbufs)
                in_flight[i].append(claim)
                t0 = time.perf_counter()
                parent = parents[i]
                for trace_id, ts, meta, payload, emitted_ns in envs:
                    if self.aborting():
                        raise Aborted
                    held = (payload, meta, claim if pin else None, emitted_ns)
                    message = Message(trace_id, held, ts)
                    self.handle_join(asm.offer(parent, message, now_ms=now_ms()), fn, pass_ctx)
                if not pin:
                    claim.outstanding = 0
                self.record_cost(time.perf_counter() - t0, len(envs))
                self.add(SLOT.RECEIVED, len(envs))
                progressed = True
                break
            if not progressed:
                self.handle_join(asm.expire(now_ms=now_ms()), fn, pass_ctx)
            self.flush_all()
            for i in range(n):
                self.settle_ready(rings[i], in_flight[i])
            if all(ended):
                break
            if not progressed:
                self.wait_doorbell(0.05 if policy.timeout_ms is not None else 0.2)
        # end of stream: whatever still waits for a counterpart never gets one
        self.end_join(asm)
        self.flush_all()
        for i in range(n):
            for claim in in_flight[i]:
                claim.outstanding = 0
            self.settle_ready(rings[i], in_flight[i])

    def handle_join(self, out: Any, fn: Callable[..., Any], pass_ctx: bool) -> None:
        if out.is_empty:
            return
        ctx = self.ctx
        consumer = self.cfg.spec.kind == "consumer"
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
                (m.payload[3] for _, m in group.messages), default=self.latency_clock()
            )
            if consumer:
                self.latencies.append(self.latency_clock() - emitted_ns)
                if len(self.latencies) >= 4096:
                    self.fold_latencies()
            ctx._begin(group.trace_id, ts, meta)
            result = self.call(fn, pass_ctx, tuple(args), group.trace_id)
            self.add(SLOT.PROCESSED)
            if not consumer and result is not _SKIP:
                if result is None:
                    self.add(SLOT.FILTERED)
                else:
                    self.emit(group.trace_id, ts, ctx._out_metadata(), result, emitted_ns)
            for _, message in group.messages:
                claim = message.payload[2]
                if claim is not None:
                    claim.outstanding -= 1
        for dropped in out.dropped:
            self.add(SLOT.JOIN_DROPPED)
            if dropped.reason == "error" or (not self.realtime and dropped.reason == "evicted"):
                self.dead_letter(
                    dropped.message.trace_id,
                    f"join {dropped.reason}: {dropped.detail}",
                    None,
                    attempts=0,
                    payload=dropped.message.payload[0],
                    reason=f"join-{dropped.reason}",
                )
            claim = dropped.message.payload[2]
            if claim is not None:
                claim.outstanding -= 1

    def end_join(self, asm: Any) -> None:
        """At the end of the stream, what still waits for a counterpart never gets one.

        BATCH dead-letters those halves (``join-incomplete``), except halves that
        were redelivered after a crash: their group was most likely emitted before
        the crash (their counterpart's batch had been settled), so they are
        counted as dropped duplicates instead.
        """
        pending = asm.pending()
        by_trace: dict[Any, list[str]] = {}
        redelivered: set[Any] = set()
        for parent, messages in pending.items():
            for m in messages:
                by_trace.setdefault(m.trace_id, []).append(parent)
                self.add(SLOT.JOIN_DROPPED)
                claim = m.payload[2]
                if claim is not None and claim.redelivered:
                    redelivered.add(m.trace_id)
        if self.realtime:
            return
        duplicates = 0
        for trace_id, present in by_trace.items():
            if trace_id in redelivered:
                duplicates += 1
                continue
            missing = [p for p in self.parents if p not in present]
            self.dead_letter(
                trace_id,
                f"join incomplete at end of stream: got {present}, never {missing}",
                None,
                attempts=0,
                reason="join-incomplete",
            )
        if duplicates:
            self.logger.warning(
                "%d redelivered half-group(s) found no counterpart: their groups were "
                "emitted before the restart (counted as dropped duplicates)",
                duplicates,
            )

    def settle_ready(self, ring: Ring, claims: deque[Claim]) -> None:
        if not claims:
            return
        done = [c for c in claims if c.outstanding <= 0]
        if not done:
            return
        for c in done:
            c.settled = True
        kept = [c for c in claims if not c.settled]
        claims.clear()
        claims.extend(kept)
        ring.settle(done)


class _ProducerFailed(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


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
