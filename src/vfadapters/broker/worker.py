"""One replica of one node against a NATS JetStream server (``vf worker``).

The node semantics are the local executor's, not a copy of them:
:class:`BrokerWorker` is a :class:`vfadapters.local.worker.Worker` whose four
transport hooks read durable pull consumers instead of input rings and publish
to subjects instead of writing rings. ``open()``/``close()``, ctx, trace ids,
partition keys, retries and dead letters, joins (``JoinAssembler``) and the
producer, single-parent and join loops run unchanged.

BATCH — nothing lost, nothing duplicated downstream:

* an input message (a batch of envelopes, :mod:`vfadapters.broker.record`) is
  acknowledged only after every output it caused is stored by the server
  (``settle`` waits for the publish acks first);
* every output carries a ``Nats-Msg-Id`` derived from what caused it — the
  input's stream sequence (or a join group's / a producer's trace id), the
  node, the child, the partition and the output's index — so outputs published
  again after a crash (the input comes back after ``ack_wait``) are dropped by
  the stream's duplicate window and counted as ``duplicates``;
* a full stream refuses a publish (``discard new``): the worker waits and
  retries, which is back-pressure, never loss; a server restart is ridden out
  the same way (publish again with the same id, fetch again);
* a message that keeps raising goes, after ``retries``, to the run's
  dead-letter stream (with the envelope, for ``vf dead-letters --replay``);
* a join holds its halves unacknowledged until their group is emitted or
  dropped, so a crashed join replica loses nothing;
* the end of the stream: once every replica of every parent has written its
  ``done`` key and the consumer holds nothing pending or in flight but ours.

REALTIME: outputs are plain publishes (never waited for, so a producer never
blocks), streams keep the freshest ``realtime_keep`` messages per subject, and
a message is delivered at most once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import signal
import sys
import time
import traceback
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vfadapters.broker.client import Bridge, api_request, ensure_topology, is_not_found
from vfadapters.broker.record import header, pack
from vfadapters.local.config import CTL, SLOT, WorkerConfig, slot_base
from vfadapters.local.worker import (
    Aborted,
    OutEdge,
    Worker,
    set_parent_death_signal,
    short_repr,
)
from vfcore import REALTIME, FlowSpec, JoinPolicy, NodeSpec
from vfcore.flow.validate import effective_join_policy, effective_replicas
from vfcore.runtime import BrokerTopology, EdgeRoute, TopologyConsumer, TopologyOptions

__all__ = ["BrokerWorker", "WorkerOptions", "replica_from_env", "run_worker"]

#: publishes in flight before a writer waits for the oldest acknowledgement
MAX_INFLIGHT = 256
MAX_INFLIGHT_BYTES = 32 << 20
#: NATS's own default message limit; the server's INFO may say more or less
DEFAULT_MAX_PAYLOAD = 1 << 20
STATS_INTERVAL_S = 0.5
#: JetStream refuses a publish to a full ``discard new`` stream with this code
_STORE_FULL_CODES = frozenset({10077, 10027, 10047})


def replica_from_env(env: dict[str, str] | None = None) -> int | None:
    """The replica index a Kubernetes pod gets, or None when none is set.

    ``VF_REPLICA``; an Indexed Job's ``JOB_COMPLETION_INDEX``; a StatefulSet
    pod's ordinal, the number after the last ``-`` of ``POD_NAME`` (or
    ``HOSTNAME``, which a StatefulSet pod's hostname equals).
    """
    env = dict(os.environ) if env is None else env
    for key in ("VF_REPLICA", "JOB_COMPLETION_INDEX"):
        value = env.get(key, "").strip()
        if value:
            if not (value.isascii() and value.isdigit()):
                raise ValueError(f"{key}={value!r} is not a replica index (0, 1, 2, ...)")
            return int(value)
    for key in ("POD_NAME", "HOSTNAME"):
        value = env.get(key, "").strip()
        if value and "-" in value:
            ordinal = value.rsplit("-", 1)[1]
            if ordinal.isascii() and ordinal.isdigit():
                return int(ordinal)
    return None


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """What ``vf worker`` takes besides the flow and the node."""

    url: str
    run_id: str
    replica: int = 0
    retries: int = 2
    linger_s: float = 0.002
    batch_max: int = 1024
    log_level: int = logging.INFO
    create_topology: bool = True
    topology: TopologyOptions = field(default_factory=TopologyOptions)
    parent_death: bool = False  # exit with the process that started us (vf run --broker)
    #: nodes whose replicas may be added while they run (autoscaling, KEDA): they
    #: fetch one message at a time and get small batches, so new replicas find work
    scalable: tuple[str, ...] = ()


class _NoBell:
    """Rings have a doorbell semaphore; a consumer needs none (fetch waits)."""

    def release(self) -> None:
        return None


class _Held:
    """A claimed input message: what the node loops see of a ring's Claim."""

    __slots__ = ("count", "data", "msg", "nbufs", "outstanding", "redelivered", "seq", "settled")

    def __init__(self, msg: Any, data: Any, count: int, nbufs: int) -> None:
        self.msg = msg
        self.data = data
        self.count = count
        self.nbufs = nbufs
        self.outstanding = count
        self.settled = False
        meta = msg.metadata
        self.seq = meta.sequence.stream
        self.redelivered = meta.num_delivered > 1


class BrokerInput:
    """One durable pull consumer, as the node loops read a ring."""

    doorbell = _NoBell()

    def __init__(
        self,
        worker: BrokerWorker,
        parent: str,
        consumer: TopologyConsumer,
        parent_replicas: int,
        fetch_timeout_s: float,
    ) -> None:
        self.worker = worker
        self.parent = parent
        self.consumer = consumer
        self.parent_replicas = parent_replicas
        self.fetch_timeout_s = fetch_timeout_s
        self.sub: Any = None
        self.buffer: deque[Any] = deque()
        self.held = 0  # claimed and not settled
        self.upstream_done = False
        self.next_end_check = 0.0
        self.committed = 0  # envelopes settled
        self.redelivered = 0
        # one at a time when replicas compete (or may be added): none hoards work
        shared = consumer.owner is None and effective_replicas(worker.cfg.spec) > 1
        self.batch = 1 if worker.realtime or shared or worker.scalable else 4

    async def bind(self) -> None:
        js = self.worker.bridge.js
        self.sub = await js.pull_subscribe_bind(
            durable=self.consumer.name, stream=self.consumer.stream
        )

    async def _fetch(self) -> list[Any]:
        try:
            msgs: list[Any] = await self.sub.fetch(self.batch, timeout=self.fetch_timeout_s)
            return msgs
        except TimeoutError:
            return []
        except Exception as exc:  # a reconnect in progress, a server restart
            import nats.errors

            if isinstance(exc, nats.errors.TimeoutError):
                return []
            self.worker.note_broker_error(exc)
            await asyncio.sleep(0.1)
            return []

    def claim(self, reader: int) -> _Held | bool | None:
        worker = self.worker
        if not self.buffer:
            msgs = worker.bridge.run(self._fetch())
            if not msgs:
                if self.ended():
                    return False
                return None
            self.buffer.extend(msgs)
        msg = self.buffer.popleft()
        data = msg.data
        head = header(data)
        if head is None:
            from vfadapters.broker.payloads import LargePayloadMissingError

            try:
                data = worker.resolve_large(data)
            except LargePayloadMissingError:
                # its record was deleted, which happens only after a message that
                # referenced it was acknowledged: this is a late duplicate
                worker.bridge.submit(_ack_all([msg]))
                worker.logger.warning(
                    "a redelivered message on %s referenced a large record already "
                    "consumed and freed: dropped as a duplicate",
                    msg.subject,
                )
                self.redelivered += 1
                return None
            head = header(data)
            if head is None:
                raise ValueError(
                    f"a message on {msg.subject} is not a vf record ({len(msg.data)} bytes)"
                )
        held = _Held(msg, data, head[0], head[1])
        self.held += 1
        if held.redelivered:
            self.redelivered += held.count
        worker.begin_input(held)
        return held

    def view(self, held: _Held) -> memoryview:
        return memoryview(held.data)

    def settle(self, helds: list[_Held]) -> None:
        """Acknowledge ``helds`` once every output published so far is stored.

        The node goes on at once: the loop thread waits for those publish acks,
        then acks the inputs (and frees their large payloads); ``held`` counts
        them until then, so the end-of-stream check never ends early.
        """
        worker = self.worker
        worker.raise_async_error()
        published = list(worker.inflight)
        worker.inflight.clear()
        msgs = [h.msg for h in helds]
        refs = [h.msg.data for h in helds if worker.large is not None]
        count = sum(h.count for h in helds)
        worker.bridge.submit(self._settle(published, msgs, refs, count))

    async def _settle(
        self, published: list[Any], msgs: list[Any], refs: list[bytes], count: int
    ) -> None:
        worker = self.worker
        try:
            for fut in published:
                await asyncio.wrap_future(fut)
        except BaseException as exc:  # not stored: the inputs are not acked (redelivered)
            worker.async_error = exc
            self.held -= len(msgs)
            return
        await _ack_all(msgs)
        self.committed += count
        self.held -= len(msgs)
        for ref in refs:
            if worker.large.is_reference(ref):
                with contextlib.suppress(Exception):
                    await worker.large.delete(ref)

    def ended(self) -> bool:
        """Every replica of the parent is done and nothing is left for us to take."""
        now = time.monotonic()
        if now < self.next_end_check:
            return False
        self.next_end_check = now + 0.2
        worker = self.worker
        if not self.upstream_done:
            self.upstream_done = worker.bridge.run(
                worker.replicas_done(self.parent, self.parent_replicas)
            )
            if not self.upstream_done:
                return False
        c = self.consumer
        info = worker.bridge.run(
            api_request(worker.bridge.nc, f"$JS.API.CONSUMER.INFO.{c.stream}.{c.name}")
        )
        if info.get("error"):
            worker.note_broker_error(RuntimeError(str(info["error"])))
            return False
        pending = int(info.get("num_pending", 0))
        in_flight = int(info.get("num_ack_pending", 0))
        return pending == 0 and in_flight <= self.held + len(self.buffer)

    def nak_all(self) -> None:
        """On abort: what we hold goes back to the consumer at once (not after ack_wait)."""
        msgs = list(self.buffer)
        self.buffer.clear()
        if msgs:
            with contextlib.suppress(Exception):
                self.worker.bridge.run(_nak_all(msgs), timeout_s=2)


async def _ack_all(msgs: list[Any]) -> None:
    for m in msgs:
        with contextlib.suppress(Exception):
            await m.ack()


async def _nak_all(msgs: list[Any]) -> None:
    for m in msgs:
        with contextlib.suppress(Exception):
            await m.nak()


class BrokerOutlet:
    """Where one edge's (partition's) batches are published; ring-like for ``Worker``."""

    def __init__(self, subject: str, child_token: str, index: int) -> None:
        self.subject = subject
        self.tag = f"{child_token}.p{index}"
        self.flushes = 0  # batches published since the current input began
        self.written = 0
        self.records = 0  # NATS messages: lag counts these, not the items in them
        self.duplicates = 0
        self.waits = 0


def broker_edge(
    route: EdgeRoute, child: NodeSpec, token: str, cap: int, cost_field: int, scalable: bool
) -> OutEdge:
    """The output edge of ``route``: the local worker's buffers, publishing to its subjects."""
    # a NATS message costs far more than a ring record: whole batches from the
    # start, except toward replicas that share work (they must find some)
    shared = (effective_replicas(child) > 1 or scalable) and route.routing != "partitioned"
    return OutEdge(
        route.child,
        child,
        route.routing,
        route.strategy,
        [BrokerOutlet(s, token, i) for i, s in enumerate(route.subjects)],
        cost_field,  # the child's cost per message (stats_loop fills it in)
        cap,
        min(8, cap) if shared else cap,
    )


class BrokerWorker(Worker):
    """A :class:`~vfadapters.local.worker.Worker` on NATS JetStream (see the module docstring)."""

    latency_clock = staticmethod(time.time_ns)  # replicas may run on different hosts

    def __init__(
        self,
        cfg: WorkerConfig,
        spec: FlowSpec,
        topo: BrokerTopology,
        opts: WorkerOptions,
        node: Any,
    ) -> None:
        super().__init__(cfg, None)
        self.spec = spec
        self.topo = topo
        self.opts = opts
        self.live_node = node
        self.bridge = Bridge()
        self.inflight: deque[concurrent.futures.Future[Any]] = deque()
        self.id_base = ""
        self.state = "starting"
        self.error: dict[str, Any] | None = None
        self.broker_errors = 0
        self.last_broker_error = ""
        self.dead_letter_count = 0
        self.large: Any = None
        self.max_payload = DEFAULT_MAX_PAYLOAD
        self.stats_task: Any = None
        self.async_error: BaseException | None = None
        self.is_join = len(spec.node(cfg.node).parents) > 1
        self.retired = False
        self.scalable = cfg.node in opts.scalable
        self.is_producer = cfg.spec.kind == "producer"

    # -- the four transport hooks ----------------------------------------------------

    def attach_control(self) -> None:
        # the same fields as the shared control segment, in this process only;
        # slot 1 is never written: the edges' "child cost" stays unknown (0)
        # after the slot: one field per output edge, the child's cost per message as
        # its replicas report it (flush_edge sizes batches from it, as locally)
        self.ctl = array("Q", [0] * (CTL.BASE + SLOT.FIELDS + 64))
        self.base = slot_base(0)
        self.ctl[self.base + SLOT.ACTIVE] = 1

    def log_handler(self) -> logging.Handler:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"[{self.name}] %(message)s"))
        return handler

    def build_node(self) -> Any:
        return self.live_node

    def attach_io(self) -> None:
        cfg, opts, topo = self.cfg, self.opts, self.topo
        self.bridge.connect(opts.url, name=f"vf-worker {cfg.pod} run {opts.run_id}")
        nc = self.bridge.nc
        self.max_payload = int(
            getattr(nc, "max_payload", DEFAULT_MAX_PAYLOAD) or DEFAULT_MAX_PAYLOAD
        )
        # a batch stays well under the server's limit; a single larger payload goes
        # through the object store (resolve_large / publish)
        self.batch_bytes = max(1024, min(self.batch_bytes, self.max_payload // 2))
        if opts.create_topology:
            self.bridge.run(ensure_topology(nc, topo), timeout_s=60)
        self.kv = self.bridge.run(self.bridge.js.key_value(topo.control.bucket), timeout_s=10)
        spec = self.spec
        node = spec.node(cfg.node)
        reads = topo.reads(cfg.node, cfg.replica)
        fetch_timeout = 0.02 if len(node.parents) > 1 else 0.2
        replicas = {n.name: effective_replicas(n) for n in spec.nodes}
        self.inputs = [
            BrokerInput(self, c.parent, c, replicas[c.parent], fetch_timeout) for c in reads
        ]
        for inp in self.inputs:
            self.bridge.run(inp.bind(), timeout_s=10)
        self.parents = tuple(i.parent for i in self.inputs)
        # REALTIME: one message per frame; a join: one per group (its id: the trace id);
        # otherwise batches of up to batch_max, sized to ~2 ms of the child's work
        cap = 1 if self.realtime or self.is_join else max(1, cfg.batch_max)
        routes = topo.outputs(cfg.node)[:64]
        self.edges = [
            broker_edge(
                route,
                spec.node(route.child),
                topo.control.token_of(route.child),
                cap,
                slot_base(1) + i,
                route.child in opts.scalable,
            )
            for i, route in enumerate(routes)
        ]
        self.node_token = topo.control.token_of(cfg.node)
        self.stats_task = self.bridge.submit(self.stats_loop())

    def finished(self) -> None:
        self.wait_published()
        self.wait_settled()
        if self.realtime:
            self.bridge.run(self.bridge.nc.flush(timeout=10), timeout_s=15)
        if self.retired:
            return  # stopped by SIGTERM, not at the end of the stream: no "done"
        key = self.topo.control.done_key(self.cfg.node, self.cfg.replica)
        doc = {"replica": self.cfg.replica, "pid": os.getpid(), "time": time.time()}
        self.bridge.run(self.kv.put(key, json.dumps(doc).encode()), timeout_s=30)

    # -- events the local worker sends its coordinator ---------------------------------

    def send(self, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind == "opened":
            self.state = "running"
            self.bridge.submit(self.put_stats())  # vf run starts producers once all are up
        elif kind == "done":
            self.state = "done"
        elif kind == "aborted":
            self.state = "aborted"
        elif kind == "failed":
            _, phase, error, tb = event
            self.state = "failed"
            self.error = {"phase": phase, "error": error}
            # the node's own code gets its traceback; the transport's failures
            # (connecting, finishing) say what failed and why, without one
            own = phase not in ("connect", "finish")
            sys.stderr.write(f"[{self.name}] failed in {phase}(): {error}\n" + (tb if own else ""))
        elif kind == "log":
            sys.stderr.write(event[2] + "\n")

    def check_orphaned(self) -> None:
        return None  # the broker outlives us; parent death is PR_SET_PDEATHSIG's job

    def wait_doorbell(self, timeout: float = 0.2) -> None:
        if self.aborting():
            raise Aborted
        if self.is_join:
            time.sleep(0.005)  # each parent's fetch already waited briefly

    # -- message ids, publishing ---------------------------------------------------------

    def begin_input(self, held: _Held) -> None:
        """A new input message: outputs are numbered from 0 again, under its sequence."""
        self.id_base = f"s{held.seq}"
        for edge in self.edges:
            for outlet in edge.rings:
                outlet.flushes = 0

    def write_batch(self, ring: Any, envs: list[tuple[Any, ...]]) -> None:
        outlet: BrokerOutlet = ring
        data = pack(envs)
        if self.realtime:
            msg_id = None
        elif self.is_producer:
            msg_id = f"{self.node_token}.{outlet.tag}.r{self.cfg.replica}.{envs[0][0]}.{len(envs)}"
        elif self.is_join:
            msg_id = f"{self.node_token}.{outlet.tag}.{envs[0][0]}.{len(envs)}"
        else:
            msg_id = f"{self.node_token}.{outlet.tag}.{self.id_base}.{outlet.flushes}"
        outlet.flushes += 1
        outlet.written += len(envs)
        outlet.records += 1
        payload: Any = data
        if len(data) > self.max_payload - 4096:
            payload = self.store_large(msg_id or f"{outlet.tag}.{time.monotonic_ns()}", data)
        if self.realtime:
            self.bridge.submit(self.bridge.nc.publish(outlet.subject, payload))
            return
        fut = self.bridge.submit(self._publish(outlet, payload, msg_id))
        inflight = self.inflight
        inflight.append(fut)
        # at most MAX_INFLIGHT publishes, and about MAX_INFLIGHT_BYTES, unanswered
        bound = max(2, min(MAX_INFLIGHT, MAX_INFLIGHT_BYTES // max(1, len(payload))))
        while len(inflight) > bound:
            inflight.popleft().result()
        while inflight and inflight[0].done():
            inflight.popleft().result()

    async def _publish(
        self, outlet: BrokerOutlet, data: bytes | bytearray, msg_id: str | None
    ) -> None:
        import nats.errors
        from nats.js.errors import APIError

        headers = {"Nats-Msg-Id": msg_id} if msg_id else None
        delay = 0.005
        while True:
            if self.ctl[CTL.ABORT]:
                raise Aborted
            try:
                ack = await self.bridge.js.publish(
                    outlet.subject, data, timeout=5.0, headers=headers
                )
                if ack.duplicate:
                    outlet.duplicates += 1
                return
            except APIError as exc:
                if exc.err_code in _STORE_FULL_CODES or "maximum" in str(exc.description or ""):
                    outlet.waits += 1  # the stream is full: back-pressure, never loss
                else:
                    raise
            except (nats.errors.Error, TimeoutError, OSError) as exc:
                self.note_broker_error(exc)  # reconnecting: the same id is published again
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    def wait_published(self) -> None:
        inflight = self.inflight
        while inflight:
            inflight.popleft().result()
        self.raise_async_error()

    def raise_async_error(self) -> None:
        error = self.async_error
        if error is not None:
            self.async_error = None
            raise error

    def wait_settled(self) -> None:
        """Until every input taken has been acknowledged (or its outputs failed)."""
        deadline = time.monotonic() + 60
        while any(i.held for i in self.inputs) and time.monotonic() < deadline:
            self.raise_async_error()
            time.sleep(0.001)
        self.raise_async_error()

    def note_broker_error(self, exc: BaseException) -> None:
        self.broker_errors += 1
        self.last_broker_error = f"{type(exc).__name__}: {exc}"

    # -- large payloads (the object store) -----------------------------------------------

    def store_large(self, key: str, data: bytes | bytearray) -> bytes:
        if self.large is None:
            from vfadapters.broker.payloads import LargePayloads

            self.large = LargePayloads(self.bridge.nc, self.bridge.js, self.topo.control.objects)
            self.bridge.run(self.large.ensure(), timeout_s=30)
        ref: bytes = self.bridge.run(self.large.put(key, [data]), timeout_s=120)
        return ref

    def resolve_large(self, data: bytes) -> Any:
        if self.large is None:
            from vfadapters.broker.payloads import LargePayloads

            self.large = LargePayloads(self.bridge.nc, self.bridge.js, self.topo.control.objects)
        if not self.large.is_reference(data):
            return data
        return self.bridge.run(self.large.get(data), timeout_s=120)

    # -- dead letters ---------------------------------------------------------------------

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
        ctx = self.ctx
        parent = self.parents[0] if len(self.parents) == 1 else None
        entry = {
            "node": self.cfg.node,
            "replica": self.cfg.replica,
            "parent": parent,
            "trace_id": trace_id,
            "reason": reason,
            "error": error,
            "traceback": tb,
            "attempts": attempts,
            "payload": short_repr(payload),
            "time": time.time(),
            "run": self.opts.run_id,
        }
        meta = ctx.metadata if ctx.trace_id == trace_id else None
        ts = ctx.event_ts_ms if ctx.trace_id == trace_id else None
        try:
            record = pack(
                [(trace_id, ts, dict(meta) if meta else None, payload, time.monotonic_ns())]
            )
        except Exception:  # a payload that cannot be pickled: listed, not replayable
            record = pack([(trace_id, ts, None, None, time.monotonic_ns())])
            entry["replayable"] = False
        subject = self.topo.dead_letters.subject_of(self.cfg.node)
        headers = {"Vf-Dead-Letter": json.dumps(entry, default=repr)}
        body: Any = record
        if len(record) > self.max_payload - 64 * 1024:
            entry["replayable"] = False
            headers = {"Vf-Dead-Letter": json.dumps(entry, default=repr)}
            body = pack([(trace_id, ts, None, None, 0)])
        self.bridge.run(
            self.bridge.js.publish(subject, bytes(body), timeout=10.0, headers=headers),
            timeout_s=30,
        )
        self.dead_letter_count += 1
        self.add(SLOT.DEAD_LETTERS)

    # -- counters for whoever watches the run ---------------------------------------------

    def stats(self) -> dict[str, Any]:
        base = self.base
        fields = list(self.ctl[base : base + SLOT.FIELDS])
        doc: dict[str, Any] = {
            "node": self.cfg.node,
            "replica": self.cfg.replica,
            "pid": os.getpid(),
            "state": self.state,
            "fields": fields,
            "in": {
                i.parent: {"committed": i.committed, "redelivered": i.redelivered}
                for i in getattr(self, "inputs", ())
            },
            "out": {
                e.child: {
                    "written": sum(o.written for o in e.rings),
                    "records": sum(o.records for o in e.rings),
                    "duplicates": sum(o.duplicates for o in e.rings),
                    "waits": sum(o.waits for o in e.rings),
                }
                for e in getattr(self, "edges", ())
            },
            "broker_errors": self.broker_errors,
            "last_broker_error": self.last_broker_error,
            "error": self.error,
            "time": time.time(),
        }
        if self.latency or self.latencies:
            hist = dict(self.latency)
            doc["latency"] = {str(k): v for k, v in hist.items()}
            doc["latency_max_ns"] = self.latency_max_ns
        return doc

    async def put_stats(self) -> None:
        key = self.topo.control.stats_key(self.cfg.node, self.cfg.replica)
        await self.kv.put(key, json.dumps(self.stats(), default=repr).encode())

    async def stats_loop(self) -> None:
        from nats.js.errors import KeyNotFoundError

        stop = self.topo.control.stop_key
        tick = 0
        while True:
            with contextlib.suppress(Exception):
                await self.put_stats()
            if tick % 2 == 0:
                with contextlib.suppress(Exception):
                    await self.read_child_costs()
            tick += 1
            if not self.ctl[CTL.STOP_PRODUCERS]:
                try:
                    entry = await self.kv.get(stop)
                    if entry is not None and entry.value:
                        self.ctl[CTL.STOP_PRODUCERS] = 1
                except KeyNotFoundError:
                    pass
                except Exception:
                    pass
            await asyncio.sleep(STATS_INTERVAL_S)

    async def read_child_costs(self) -> None:
        """Each child's cost per message (its replica 0's EWMA), for batch sizing."""
        from nats.js.errors import KeyNotFoundError

        for edge in self.edges:
            if edge.keep <= 1:
                continue
            try:
                entry = await self.kv.get(self.topo.control.stats_key(edge.child, 0))
            except KeyNotFoundError:
                continue
            fields = json.loads(entry.value or b"{}").get("fields") or ()
            if len(fields) > SLOT.COST_NS and fields[SLOT.COST_NS]:
                self.ctl[edge.cost_field] = int(fields[SLOT.COST_NS])

    async def replicas_done(self, parent: str, replicas: int) -> bool:
        """Whether ``parent`` has ended: as many of its replicas wrote ``done`` as
        :meth:`vfcore.runtime.RunControl.replicas_needed` says."""
        from nats.js.errors import KeyNotFoundError

        control = self.topo.control
        needed = control.replicas_needed(self.spec.node(parent))
        found = 0
        for r in range(replicas):
            try:
                await self.kv.get(control.done_key(parent, r))
                found += 1
            except KeyNotFoundError:
                continue
            if found >= needed:
                return True
        return False

    # -- the whole life ---------------------------------------------------------------------

    def run(self) -> int:
        code = 1
        try:
            code = self.main()
        finally:
            for inp in self.inputs:  # fetched, never claimed: back to the consumer now
                inp.nak_all()
            if self.retired and self.state == "done":
                self.state = "retired"
            if getattr(self, "kv", None) is not None:
                if self.stats_task is not None:
                    self.stats_task.cancel()
                self.fold_latencies()
                with contextlib.suppress(Exception):
                    self.bridge.run(self.put_stats(), timeout_s=5)
            with contextlib.suppress(Exception):
                self.bridge.close()
        return code


def worker_config(spec: FlowSpec, node: str, replica: int, opts: WorkerOptions) -> WorkerConfig:
    """The local executor's per-replica config, filled for a broker replica."""
    nspec = spec.node(node)
    policy: JoinPolicy | None = effective_join_policy(nspec, spec.flow_type)
    if policy is not None and spec.flow_type != REALTIME and nspec.join_policy is None:
        # BATCH: held halves are bounded by the consumers' max_ack_pending, not here
        from dataclasses import replace

        policy = replace(policy, max_pending=max(policy.max_pending, 1 << 30))
    return WorkerConfig(
        run_id=opts.run_id,
        control="",
        node=node,
        replica=replica,
        pod=f"{node}/{replica}",
        replicas=effective_replicas(nspec),
        slot=0,
        spec=nspec,
        flow_type=spec.flow_type,
        node_blob=b"",
        preload=(),
        inputs=(),
        outputs=(),
        doorbell=None,
        join_policy=policy,
        retries=opts.retries,
        dead_letter_path="",
        linger_s=opts.linger_s,
        batch_max=opts.batch_max,
        log_level=opts.log_level,
    )


def _on_signal(worker: BrokerWorker) -> Callable[[int, Any], None]:
    def handler(signum: int, frame: Any) -> None:
        ctl = worker.ctl
        if signum == signal.SIGTERM and not worker.is_join and not worker.retired:
            # a pod scaled down or deleted, a replica autoscaling retires: finish the
            # message in hand, hand back what was fetched, exit — without writing
            # "done" (the node goes on elsewhere)
            worker.retired = True
            ctl[worker.base + SLOT.ACTIVE] = 0
            ctl[CTL.STOP_PRODUCERS] = 1
            return
        # SIGINT, a second SIGTERM, or a join (it holds halves of open groups): stop
        # where we are; everything unacknowledged goes back to the consumers
        ctl[CTL.ABORT] = 1
        ctl[CTL.STOP_PRODUCERS] = 1

    return handler


def run_worker(spec: FlowSpec, node_obj: Any, node: str, opts: WorkerOptions) -> int:
    """Run one replica to its end; the process exit status (0 done or stopped, 1 failed)."""
    from vfcore.runtime import broker_topology

    topo = broker_topology(spec, opts.run_id, opts.topology)
    cfg = worker_config(spec, node, opts.replica, opts)
    worker = BrokerWorker(cfg, spec, topo, opts, node_obj)
    if opts.parent_death:
        set_parent_death_signal()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal(worker))
    try:
        return worker.run()
    except Exception:
        traceback.print_exc()
        return 1


__all__ += ["is_not_found", "worker_config"]
