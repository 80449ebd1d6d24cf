"""The NATS JetStream transport, worker side: the ports of one replica of a broker run.

:class:`BrokerTransport` gives the one :class:`~vfadapters.runtime.worker.Worker`
its ports over a NATS connection (a :class:`~vfadapters.broker.client.Bridge`:
an asyncio loop thread that owns it, driven from the node's thread):

* :class:`~vfadapters.broker.stream_input.StreamInput` (its own module) — a
  durable pull consumer; a batch's origin is the
  parent's token and the message's stream sequence. A batch is acknowledged
  only after every output it caused is stored *and* its ledger entry (its
  tally, named after the origin) is; a redelivered batch whose ledger entry
  exists was finished before and is only acknowledged. How a batch's outputs
  toward replicas that share work are cut is stored (``split.…`` in the run's
  splits bucket, created if absent) before its first output, so every attempt
  cuts alike;
* :class:`SubjectOutlet` — publishes each chunk with a ``Nats-Msg-Id`` that
  names exactly the input positions it carries the outputs of
  (:func:`vfcore.runtime.delivery.output_id`; a join: one message per group);
  the stream's duplicate window drops one published again and the publish
  ack says so;
* :class:`StreamLetters` — the run's dead-letter stream, one message per
  letter id;
* a producer's segments — the start and cut of a segment are stored in the
  control bucket (``seg.<node>.<replica>``) before its first chunk is
  published, its end before its last: a restarted producer cuts them again.

REALTIME: plain publishes (never waited for), no ids, no ledger; a message is
delivered at most once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import sys
import time
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vfadapters.broker.client import Bridge, api_request, ensure_topology, jetstream_required
from vfadapters.broker.record import pack
from vfadapters.broker.sealing import RecordOpener, RecordSealer, edge_domain, letter_domain
from vfadapters.broker.stream_input import StreamInput, ack_all
from vfadapters.runtime.config import CTL, SLOT, NodeConfig, slot_base
from vfadapters.runtime.letters import DeadLetter
from vfadapters.runtime.ports import Envelope, OutputKey, Tally
from vfadapters.runtime.worker import Aborted, ProducerSegment, ResumePlan
from vfcore import InvalidInputError
from vfcore.runtime import (
    BrokerTopology,
    GroupOrigin,
    Origin,
    SegmentOrigin,
    TopologyOptions,
    ledger_id,
    output_id,
)

__all__ = [
    "DEFAULT_MAX_PAYLOAD",
    "REFUSALS",
    "BrokerPlan",
    "BrokerTransport",
    "StreamInput",
    "SubjectOutlet",
]

#: a producer's segments not yet all stored, at most (then it waits for the oldest)
MAX_OPEN_SEGMENTS = 16
#: bytes of outputs a batch may queue before they are delivered anyway
MAX_OUTBOX_BYTES = 64 << 20
#: deliveries on their way at once (then the node waits for the oldest)
MAX_DELIVERIES = 64
#: deliveries queued for the next crossing to the loop thread before they are started anyway
MAX_QUEUED = 8
#: a message held (fetched, not yet acknowledged) by a replica that is alive is said to
#: be in progress (``+WPI``) every third of ``ack_wait``, up to this many ``ack_wait``s
#: in all: a long batch is not handed out again meanwhile; a replica paused, killed
#: or stuck for longer than that lets it go (docs/broker.md)
PROGRESS_ACK_WAITS = 20
#: NATS's own default message limit; the server's INFO may say more or less
DEFAULT_MAX_PAYLOAD = 1 << 20
STATS_INTERVAL_S = 0.5
#: JetStream refuses a publish to a full ``discard new`` stream with this code
_STORE_FULL_CODES = frozenset({10077, 10027, 10047})
#: answers of a JetStream cluster while a stream's leader changes (issue 26): "duplicate
#: message id is in process" (an earlier attempt with the same id is still being
#: replicated: the next attempt finds it stored, or stores it) — waited out
_IN_PROCESS_CODES = frozenset({10158})
#: what the server refusing this replica's credentials is named (vfadapters/broker/client.py)
REFUSALS = ("broker-unauthorized", "broker-permission-denied", "broker-tls", "broker-credentials")
#: JetStream's "no message found" (a ledger lookup that finds nothing)
_NO_MESSAGE = 10037


@dataclass(frozen=True, slots=True)
class BrokerPlan:
    """What one broker replica needs besides its node: where the run lives.

    ``scalable``: nodes whose replicas may be added while they run (their inputs
    are fetched one message at a time, so a new replica finds work);
    ``create_topology``: create what is missing of the run's topology first
    (``vf worker``); ``node_blob``/``preload``: a replica forked by ``vf run
    --broker`` rebuilds its node from these (``vf worker`` is given the node).
    """

    node: NodeConfig
    url: str
    topology: TopologyOptions
    flow: Any  # the FlowSpec (the topology is computed from it)
    scalable: tuple[str, ...] = ()
    create_topology: bool = False
    node_blob: bytes = b""
    preload: tuple[str, ...] = ()
    fetch_timeout_s: float = 0.2
    parent_tokens: tuple[str, ...] = field(default=())
    #: how long the first connection is retried (a server restarting under a run)
    connect_wait_s: float = 0.0
    #: the run's key: every record written is sealed under it, every record read is
    #: checked against it before it is decoded (vfadapters/broker/sealing.py)
    run_key: bytes = b""
    #: how this replica proves itself to the server (a BrokerCredentials with its node's
    #: inbox prefix; a forked replica's nkey seed travels here, in memory)
    credentials: Any = None


class BrokerControl:
    """This replica's flags and counters, kept in its own process and published."""

    def __init__(self) -> None:
        self.ctl = array("Q", [0] * (CTL.BASE + SLOT.FIELDS + 64))
        self.base = slot_base(0)
        self.ctl[self.base + SLOT.ACTIVE] = 1

    def stop_requested(self) -> bool:
        return bool(self.ctl[CTL.STOP_PRODUCERS])

    def aborting(self) -> bool:
        return bool(self.ctl[CTL.ABORT])

    def active(self) -> bool:
        return bool(self.ctl[self.base + SLOT.ACTIVE])


def _settle_future(task: asyncio.Task[Any], fut: concurrent.futures.Future[Any]) -> None:
    if task.cancelled():
        fut.cancel()
    elif task.exception() is not None:
        fut.set_exception(task.exception())
    else:
        fut.set_result(task.result())


class SubjectOutlet:
    """Where one edge's (partition's) chunks are published."""

    def __init__(
        self, t: BrokerTransport, subject: str, child: str, partition: int, domain: str
    ) -> None:
        self.t = t
        self.subject = subject
        self.domain = domain  # what its records are sealed for: the edge
        self.child = child  # the child's token
        self.partition = partition
        self.written = 0
        self.records = 0  # NATS messages: lag counts these, not the items in them
        self.duplicates = 0
        self.waits = 0

    def write(self, envelopes: Sequence[Envelope], key: OutputKey) -> int:
        t = self.t
        node = t.cfg.token
        if t.realtime:
            t.publish(self, envelopes, None)
            return len(envelopes)
        if key.groups:  # a join: one message per group, named after it
            for env, group in zip(envelopes, key.groups, strict=True):
                t.publish(self, [env], output_id(node, self.child, self.partition, group, 0, 0))
            return len(envelopes)
        assert key.origin is not None
        msg_id = output_id(node, self.child, self.partition, key.origin, key.chunk, key.part)
        t.publish(self, envelopes, msg_id)
        return len(envelopes)


class StreamLetters:
    """The run's dead-letter stream: one message per letter id (docs/broker.md)."""

    def __init__(self, t: BrokerTransport) -> None:
        self.t = t

    def put(self, letter: DeadLetter, envelope: Envelope | None) -> None:
        t = self.t
        doc = letter.to_dict()
        domain = letter_domain(t.cfg.node)  # replay checks it, then seals it for its edge
        record: bytes | bytearray
        if envelope is None:
            doc["replayable"] = False
            record = pack([], t.sealer, domain)
        else:
            try:
                record = pack([envelope], t.sealer, domain)
            except Exception:  # a payload that cannot be pickled: listed, not replayable
                doc["replayable"] = False
                record = pack([], t.sealer, domain)
            if len(record) > t.max_payload - 64 * 1024:
                doc["replayable"] = False
                record = pack([], t.sealer, domain)
        subject = t.topo.dead_letters.subject_of(t.cfg.node)
        headers = {"Vf-Dead-Letter": json.dumps(doc, default=repr), "Nats-Msg-Id": letter.id}
        t.dead_letter_count += 1
        t.outbox.append((subject, bytes(record), headers, None))


class BrokerTransport:
    """The ports of one replica of a broker run (see the module docstring)."""

    latency_clock = staticmethod(time.time_ns)  # replicas may run on different hosts

    def __init__(
        self,
        plan: BrokerPlan,
        topo: BrokerTopology,
        node: Any,
        events: Callable[[tuple[Any, ...]], None],
        handler: Callable[[str], logging.Handler] | None = None,
    ) -> None:
        self.handler = handler
        self.attach_error: InvalidInputError | None = None
        self.plan = plan
        self.cfg = plan.node
        self.topo = topo
        self.live_node = node
        self.events = events
        self.realtime = self.cfg.flow_type == "realtime"
        self.bridge = Bridge()
        self.control = BrokerControl()
        self.letters = StreamLetters(self)
        # records no stranger can forge: sealed when written, checked before decoding
        self.sealer = RecordSealer(plan.run_key)
        self.opener = RecordOpener(plan.run_key)
        # what the node wrote since the last delivery: outputs and letters, ledger entries
        self.outbox: list[tuple[str, Any, dict[str, str] | None, SubjectOutlet | None]] = []
        self.outbox_bytes = 0
        self.ledgers: list[tuple[str, bytes, dict[str, str]]] = []
        self.deliveries: deque[concurrent.futures.Future[Any]] = deque()
        self.queued: list[tuple[Any, concurrent.futures.Future[Any]]] = []
        self.tail: concurrent.futures.Future[Any] | None = None
        self.state = "starting"
        self.error: dict[str, Any] | None = None
        self.broker_errors = 0
        self.last_broker_error = ""
        self.dead_letter_count = 0
        self.progress_acks = 0  # messages said in progress (+WPI)
        self.large: Any = None
        self.max_payload = DEFAULT_MAX_PAYLOAD
        self.stats_task: Any = None
        self.async_error: BaseException | None = None
        self.retired = False
        self.inputs_: list[StreamInput] = []
        self.outlets_: list[list[SubjectOutlet]] = []
        self.logger = logging.getLogger(f"vf.{self.cfg.pod}")
        self.tally = Tally()  # everything counted so far (the live counters)
        self.received_from: dict[str, int] = {}
        self.open_segments: list[ProducerSegment] = []
        self.position_done = 0
        self.child_costs: dict[int, int] = {}
        self.intent: concurrent.futures.Future[Any] | None = None  # the last segment put
        self.last_end: int | None = None
        #: how long after a reconnection every input is treated as redelivered
        self.suspect_s = max(10.0, 3 * plan.topology.ack_wait_s)
        self.suspect_until = 0.0  # wall clock: the server restarted before we connected

    # -- the WorkerTransport protocol ----------------------------------------------------

    def attach(self, cfg: NodeConfig) -> None:
        """Connect, make or find the run's objects; a server without JetStream
        (``no-jetstream``) is kept in :attr:`attach_error` for ``vf worker`` (exit 2;
        an unreachable server stays a runtime failure, exit 1)."""
        try:
            self._attach(cfg)
        except InvalidInputError as exc:
            if exc.rule == "no-jetstream" or exc.rule.startswith(REFUSALS):
                self.attach_error = exc  # the server is not what a run needs: bad input
            raise

    def _attach(self, cfg: NodeConfig) -> None:
        plan, topo = self.plan, self.topo
        deadline = time.monotonic() + plan.connect_wait_s
        while True:
            try:
                self.bridge.connect(
                    plan.url,
                    name=f"vf-worker {cfg.pod} run {cfg.run_id}",
                    credentials=plan.credentials,
                )
                break
            except Exception as exc:
                refused = getattr(exc, "rule", "").startswith(REFUSALS)  # retrying won't help
                if refused or time.monotonic() >= deadline or self.control.aborting():
                    raise
                self.bridge.close()
                self.bridge = Bridge()
                time.sleep(0.25)
        nc = self.bridge.nc
        self.max_payload = int(
            getattr(nc, "max_payload", DEFAULT_MAX_PAYLOAD) or DEFAULT_MAX_PAYLOAD
        )
        with jetstream_required(plan.url, "the run's streams cannot be read"):
            if plan.create_topology:
                self.bridge.run(ensure_topology(nc, topo), timeout_s=60)
            self.kv = self.bridge.run(self.bridge.js.key_value(topo.control.bucket), timeout_s=10)
            self.bridge.run(self.retrying(self.note_server), timeout_s=60)
        self.bridge.on_reconnect = self.note_server
        self.splits: Any = None
        self.stats_task = self.bridge.submit(self.stats_loop())

    def log_handler(self, prefix: str) -> logging.Handler:
        if self.handler is not None:
            return self.handler(prefix)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"{prefix} %(message)s"))
        return handler

    def build_node(self) -> Any:
        if self.live_node is not None:
            return self.live_node
        if self.plan.preload:
            from pathlib import Path

            from vfadapters.loading import import_file

            for path in self.plan.preload:
                import_file(Path(path))
        import pickle

        return pickle.loads(self.plan.node_blob)

    def inputs(self) -> list[StreamInput]:
        cfg, topo = self.cfg, self.topo
        reads = topo.reads(cfg.node, cfg.replica)
        tokens = dict(topo.control.node_tokens)
        scalable = cfg.node in self.plan.scalable
        out = []
        for consumer in reads:
            edge = topo.edge(consumer.parent, cfg.node)
            shared = consumer.owner is None and (edge.routing == "competing" or scalable)
            out.append(
                StreamInput(self, consumer.parent, tokens[consumer.parent], consumer, shared)
            )
        for inp in out:
            self.bridge.run(inp.bind(), timeout_s=10)
        order = {p: i for i, p in enumerate(cfg.parents)}
        out.sort(key=lambda i: order[i.parent])
        self.inputs_ = out
        return out

    def outlets(self, edge: int) -> list[SubjectOutlet]:
        plan = self.cfg.edges[edge]
        route = self.topo.edge(self.cfg.node, plan.child)
        token = self.topo.control.token_of(plan.child)
        domain = edge_domain(self.cfg.node, plan.child)
        outlets = [SubjectOutlet(self, s, token, i, domain) for i, s in enumerate(route.subjects)]
        while len(self.outlets_) <= edge:
            self.outlets_.append([])
        self.outlets_[edge] = outlets
        return outlets

    def send(self, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind == "opened":
            self.state = "running"
            self.bridge.submit(self.put_stats())  # vf run starts producers once all are up
        elif kind == "done":
            self.state = "retired" if self.retired else "done"
        elif kind == "aborted":
            self.state = "aborted"
        elif kind == "failed":
            _, phase, error, _ = event
            self.state = "failed"
            self.error = {"phase": phase, "error": error}
        self.events(event)

    def child_cost(self, edge: int) -> int:
        return self.child_costs.get(edge, 0)

    def wait(self, timeout_s: float) -> None:
        if self.control.aborting():
            raise Aborted
        time.sleep(0.005)  # each parent's fetch already waited briefly

    async def note_server(self) -> None:
        """Which server process the run talks to: a worker that finds another one than the
        run saw before (the server restarted) treats its inputs as redelivered for a while
        (delivery counts may have been reset with the consumers' state). On a cluster each
        server is noted under its name (``server.<name>``): workers connected to different
        servers of it are not a restart (they made every input look redelivered)."""
        from nats.js.errors import KeyNotFoundError

        info = getattr(self.bridge.nc, "_server_info", None) or {}
        server_id = str(info.get("server_id", ""))
        key = "server"
        if info.get("cluster") and info.get("server_name"):
            key = "server." + re.sub(r"[^A-Za-z0-9_=-]", "_", str(info["server_name"]))[:200]
        try:
            entry = await self.kv.get(key)
            doc = json.loads(entry.value or b"{}")
        except KeyNotFoundError:
            doc = {}
        if doc.get("id") == server_id:
            if doc.get("restarted"):
                self.suspect_until = float(doc.get("since", 0)) + self.suspect_s
            return
        now = time.time()
        restarted = bool(doc)
        await self.kv.put(
            key,
            json.dumps({"id": server_id, "since": now, "restarted": restarted}).encode(),
        )
        if restarted:
            self.suspect_until = now + self.suspect_s

    # -- producers -------------------------------------------------------------------------

    def producer_resume(self) -> ResumePlan | None:
        from nats.js.errors import KeyNotFoundError

        key = self.topo.control.segment_key(self.cfg.node, self.cfg.replica)
        try:
            entry = self.bridge.run(self.retrying(lambda: self.kv.get(key)))
        except KeyNotFoundError:
            return None
        doc = json.loads(entry.value or b"{}")
        segments = tuple(
            ProducerSegment(int(s["start"]), [int(x) for x in s["limits"]], s.get("end"))
            for s in doc.get("open", ())
        )
        self.position_done = int(doc.get("done", 0))
        return ResumePlan(self.position_done, segments)

    def _put_segments(self) -> concurrent.futures.Future[Any]:
        """Store the producer's open segments (the put is made on the loop thread, after
        the previous one: the producer's own thread goes on)."""
        key = self.topo.control.segment_key(self.cfg.node, self.cfg.replica)
        doc = {"done": self.position_done, "open": [s.to_dict() for s in self.open_segments]}
        data = json.dumps(doc).encode()
        self.intent = self.bridge.submit(self._put_after(self.intent, key, data))
        return self.intent

    async def _put_after(self, before: Any, key: str, data: bytes) -> None:
        if before is not None:  # the puts of one key are stored in the order they were made
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(before)
        await self.retrying(lambda: self.kv.put(key, data))

    async def retrying(self, make: Callable[[], Any]) -> Any:
        """``await make()``, again and again while the server cannot answer (a restart,
        a reconnect): the operations retried are idempotent. An abort gives up."""
        import nats.errors
        from nats.js.errors import APIError

        delay = 0.01
        while True:
            if self.control.aborting():
                raise Aborted
            try:
                return await make()
            except APIError as exc:  # an answer: "not found", "wrong last sequence" are final
                if (getattr(exc, "code", None) or 0) < 500:
                    raise
                self.note_broker_error(exc)
            except (nats.errors.Error, TimeoutError, OSError) as exc:
                self.note_broker_error(exc)
                self.bridge.raise_if_denied()  # refused, not lost: waiting changes nothing
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    def begin_segment(self, segment: ProducerSegment) -> None:
        return None  # nothing of a segment is published before it ends (end_segment)

    def seal_segment(self, segment: ProducerSegment) -> None:
        return None

    def end_segment(self, segment: ProducerSegment, tally: Tally) -> None:
        """Deliver a whole segment: its boundaries stored first (what a restarted producer
        cuts again), then its chunks, then its ledger entry."""
        self.count(tally, None)
        self.last_end = segment.start + tally.produced
        if self.realtime:
            self.deliver(now=True)
            return
        # this segment is open before anything is forgotten: the position stored as done
        # is then never past its start (done past an open segment lost it on a restart:
        # the segment was cut again from its end, and its items never written)
        self.open_segments.append(segment)
        self._forget_finished_segments()
        intent = self._put_segments()
        self.ledger(SegmentOrigin(self.cfg.replica, segment.start), tally, None)
        segment.stored = self.deliver(after=intent, now=True)

    def _forget_finished_segments(self) -> None:
        """Segments whose every publish is stored no longer need cutting again; at most
        :data:`MAX_OPEN_SEGMENTS` stay open (the producer waits for the oldest)."""
        kept = []
        for seg in self.open_segments:
            stored = seg.stored
            if stored is not None and stored.done():
                stored.result()  # a failure to store surfaces here
                continue
            kept.append(seg)
        self.open_segments = kept
        while len(self.open_segments) > MAX_OPEN_SEGMENTS:
            oldest = self.open_segments.pop(0)
            if oldest.stored is not None:
                oldest.stored.result()
        ends = [s.start for s in self.open_segments]
        if ends:
            self.position_done = min(ends)
        elif self.last_end is not None:
            self.position_done = self.last_end

    # -- joins ---------------------------------------------------------------------------------

    def groups_done(
        self, groups: Sequence[tuple[GroupOrigin | None, Tally, tuple[Any, ...]]]
    ) -> None:
        for origin, tally, _ in groups:
            self.count(tally, None)
            if origin is not None and not self.realtime:
                self.ledger(origin, tally, None)
        self.deliver()

    def was_emitted(self, group: GroupOrigin) -> bool:
        """Whether ``group`` was handled before (its ledger entry is stored)."""
        return bool(self.bridge.run(self.retrying(lambda: self.ledger_has(group))))

    # -- publishing ------------------------------------------------------------------------------

    def publish(
        self, outlet: SubjectOutlet, envelopes: Sequence[Envelope], msg_id: str | None
    ) -> None:
        """Queue one chunk for the next delivery (packed here, sent from the loop thread)."""
        data = pack(envelopes, self.sealer, outlet.domain)
        outlet.written += len(envelopes)
        outlet.records += 1
        payload: Any = data
        if len(data) > self.max_payload - 4096:
            payload = self.store_large(msg_id or f"{outlet.child}.{time.monotonic_ns()}", data)
        headers = {"Nats-Msg-Id": msg_id} if msg_id else None
        self.outbox.append((outlet.subject, payload, headers, outlet))
        self.outbox_bytes += len(payload)
        if self.outbox_bytes > MAX_OUTBOX_BYTES:
            self.deliver()  # a huge batch's outputs: delivered in parts (docs/broker.md)

    def deliver(
        self,
        *,
        acks: Sequence[Any] = (),
        refs: Sequence[Any] = (),
        count: int = 0,
        inp: StreamInput | None = None,
        after: concurrent.futures.Future[Any] | None = None,
        now: bool = True,
    ) -> concurrent.futures.Future[Any]:
        """Send what the outbox holds as one task on the loop thread: the outputs and
        letters (all at once), then the ledger entries once they are stored, then — after
        every earlier delivery — the acknowledgements of the inputs settled (``acks``).

        The task is started by the next fetch (which crosses to the loop thread
        anyway), or at once with ``now``: the node's thread and the loop's take the
        interpreter in turn, and each crossing costs.
        """
        outbox, self.outbox = self.outbox, []
        self.outbox_bytes = 0
        ledgers, self.ledgers = self.ledgers, []
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        job = self._deliver(outbox, ledgers, list(acks), list(refs), count, inp, after, self.tail)
        self.tail = fut
        self.queued.append((job, fut))
        deliveries = self.deliveries
        deliveries.append(fut)
        if now or len(self.queued) >= MAX_QUEUED:
            self.start_queued()
        while len(deliveries) > MAX_DELIVERIES:
            self.start_queued()
            deliveries.popleft().result()
        while deliveries and deliveries[0].done():
            deliveries.popleft().result()
        return fut

    def start_queued(self) -> None:
        """Start the queued deliveries now (one crossing to the loop thread)."""
        if self.queued:
            jobs, self.queued = self.queued, []
            self.bridge.submit(self._start(jobs))

    async def _start(self, jobs: list[tuple[Any, concurrent.futures.Future[Any]]]) -> None:
        """On the loop thread: run each queued delivery as a task; its future follows it."""
        for job, fut in jobs:
            task = asyncio.ensure_future(job)
            task.add_done_callback(lambda t, f=fut: _settle_future(t, f))

    async def _deliver(
        self,
        outbox: list[tuple[str, Any, dict[str, str] | None, SubjectOutlet | None]],
        ledgers: list[tuple[str, bytes, dict[str, str]]],
        acks: list[Any],
        refs: list[Any],
        count: int,
        inp: StreamInput | None,
        after: concurrent.futures.Future[Any] | None,
        previous: concurrent.futures.Future[Any] | None,
    ) -> None:
        try:
            if after is not None:
                await asyncio.wrap_future(after)
            if self.realtime:
                for subject, payload, _, _ in outbox:
                    await self.bridge.nc.publish(subject, payload)
            elif outbox:
                await asyncio.gather(*(self.publish_raw(s, p, h or {}, o) for s, p, h, o in outbox))
            if ledgers:  # only once the outputs they count are stored
                await asyncio.gather(*(self.publish_raw(s, d, h) for s, d, h in ledgers))
            if previous is not None and acks:
                await asyncio.wrap_future(previous)  # inputs are acknowledged in order
            if acks:
                await ack_all(acks)
                if inp is not None:
                    inp.committed += count
            for ref in refs:
                if self.large is not None and self.large.is_reference(ref):
                    with contextlib.suppress(Exception):
                        await self.large.delete(ref)
        finally:
            if inp is not None:
                inp.held -= len(acks)

    def check_deliveries(self) -> None:
        """Raise what a finished delivery failed with (an output the server refused)."""
        deliveries = self.deliveries
        while deliveries and deliveries[0].done():
            deliveries.popleft().result()

    async def publish_raw(
        self,
        subject: str,
        data: Any,
        headers: dict[str, str],
        outlet: SubjectOutlet | None = None,
    ) -> None:
        """Publish with an acknowledgement; a full stream or a lost server is waited out
        (the same id again: never stored twice), an abort gives up."""
        import nats.errors
        from nats.js.errors import APIError

        delay = 0.005
        while True:
            if self.control.aborting():
                raise Aborted
            try:
                ack = await self.bridge.js.publish(subject, data, timeout=5.0, headers=headers)
                if ack.duplicate and outlet is not None:
                    outlet.duplicates += 1
                return
            except APIError as exc:
                if exc.err_code in _STORE_FULL_CODES or "maximum" in str(exc.description or ""):
                    if outlet is not None:
                        outlet.waits += 1  # the stream is full: back-pressure, never loss
                elif exc.err_code in _IN_PROCESS_CODES or (exc.code or 0) >= 500:
                    # a cluster electing a stream's leader (503), or an earlier attempt with
                    # this id still in flight: the same id again is never stored twice
                    self.note_broker_error(exc)
                else:
                    raise
            except (nats.errors.Error, TimeoutError, OSError) as exc:
                self.note_broker_error(exc)  # reconnecting: the same id is published again
                self.bridge.raise_if_denied()  # refused, not lost: waiting changes nothing
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    def ledger(self, origin: Origin, tally: Tally, parent: str | None) -> None:
        """Publish the ledger entry of ``origin`` (after what was published before it)."""
        topo = self.topo
        if topo.ledger is None:
            return
        subject = topo.control.ledger_subject(self.cfg.node, origin.text)
        doc = {"n": self.cfg.node, "r": self.cfg.replica, "p": parent, "t": tally.to_dict()}
        headers = {"Nats-Msg-Id": ledger_id(self.cfg.token, origin)}
        self.ledgers.append((subject, json.dumps(doc).encode(), headers))

    async def ledger_has(self, origin: Origin) -> bool:
        topo = self.topo
        if topo.ledger is None:
            return False
        subject = topo.control.ledger_subject(self.cfg.node, origin.text)
        answer = await api_request(
            self.bridge.nc,
            f"$JS.API.STREAM.MSG.GET.{topo.ledger.name}",
            {"last_by_subj": subject},
            timeout_s=10.0,
        )
        error = answer.get("error")
        if error and error.get("err_code") == _NO_MESSAGE:
            return False
        if error:
            raise TimeoutError(f"the run's ledger did not answer: {error.get('description')}")
        return True

    async def decide(self, key: str, wanted: list[int]) -> list[int]:
        """The cut stored under ``key`` (created as ``wanted`` if absent)."""
        from nats.js.errors import KeyWrongLastSequenceError

        if self.splits is None:
            self.splits = await self.bridge.js.key_value(self.topo.control.splits)
        try:
            await self.splits.create(key, json.dumps(wanted).encode())
            return wanted
        except KeyWrongLastSequenceError:
            entry = await self.splits.get(key)
            return [int(x) for x in json.loads(entry.value)]

    def count(self, tally: Tally, parent: str | None) -> None:
        """Add ``tally`` to the live counters (the ledger keeps the exact ones)."""
        ctl, base = self.control.ctl, self.control.base
        kind = self.cfg.spec.kind
        for name, f in (
            ("received", SLOT.RECEIVED),
            ("outputs", SLOT.OUTPUTS),
            ("filtered", SLOT.FILTERED),
            ("grouped", SLOT.GROUPED),
            ("groups", SLOT.GROUPS),
            ("duplicates", SLOT.DUPLICATES),
            ("produced", SLOT.PRODUCED),
            ("join_dropped", SLOT.HALVES_DROPPED),
        ):
            ctl[base + f] += getattr(tally, name)
        if kind == "producer":
            ctl[base + SLOT.PROCESSED] += tally.produced
        elif len(self.cfg.parents) > 1:
            ctl[base + SLOT.PROCESSED] += tally.groups
        else:
            ctl[base + SLOT.PROCESSED] += tally.received
        if parent is not None and tally.received:
            self.received_from[parent] = self.received_from.get(parent, 0) + tally.received

    def raise_async_error(self) -> None:
        error = self.async_error
        if error is not None:
            self.async_error = None
            raise error

    def wait_published(self) -> None:
        """Deliver what is left, and wait until every delivery is done."""
        if self.outbox or self.ledgers:
            self.deliver()
        self.start_queued()
        deliveries = self.deliveries
        while deliveries:
            deliveries.popleft().result()
        self.raise_async_error()

    def wait_settled(self) -> None:
        """Until every input taken has been acknowledged (or its outputs failed)."""
        deadline = time.monotonic() + 60
        while any(i.held for i in self.inputs_) and time.monotonic() < deadline:
            self.raise_async_error()
            time.sleep(0.001)
        self.raise_async_error()

    def note_broker_error(self, exc: BaseException) -> None:
        self.broker_errors += 1
        self.last_broker_error = f"{type(exc).__name__}: {exc}"

    # -- large payloads ---------------------------------------------------------------------

    def store_large(self, key: str, data: bytes | bytearray) -> bytes:
        if self.large is None:
            from vfadapters.broker.payloads import LargePayloads

            self.large = LargePayloads(
                self.bridge.nc,
                self.bridge.js,
                self.topo.control.objects,
                replicas=self.topo.options.stream_replicas,
            )
            self.bridge.run(self.large.ensure(), timeout_s=30)
        ref: bytes = self.bridge.run(self.large.put(key, [data]), timeout_s=120)
        return ref

    def resolve_large(self, data: bytes) -> Any:
        if self.large is None:
            from vfadapters.broker.payloads import LargePayloads

            self.large = LargePayloads(
                self.bridge.nc,
                self.bridge.js,
                self.topo.control.objects,
                replicas=self.topo.options.stream_replicas,
            )
        if not self.large.is_reference(data):
            return data
        return self.bridge.run(self.large.get(data), timeout_s=120)

    # -- counters for whoever watches the run -------------------------------------------------

    def stats(self) -> dict[str, Any]:
        ctl, base = self.control.ctl, self.control.base
        fields = list(ctl[base : base + SLOT.FIELDS])
        fields[SLOT.DEAD_LETTERS] = self.dead_letter_count
        return {
            "node": self.cfg.node,
            "replica": self.cfg.replica,
            "pid": os.getpid(),
            "state": self.state,
            "fields": fields,
            "in": {
                i.parent: {
                    "committed": i.committed,
                    "redelivered": i.redelivered,
                    "done_before": i.done_before,
                    "copies": i.copies,
                }
                for i in self.inputs_
            },
            "out": {
                self.cfg.edges[e].child: {
                    "written": sum(o.written for o in outs),
                    "records": sum(o.records for o in outs),
                    "duplicates": sum(o.duplicates for o in outs),
                    "waits": sum(o.waits for o in outs),
                }
                for e, outs in enumerate(self.outlets_)
            },
            "progress_acks": self.progress_acks,
            "broker_errors": self.broker_errors,
            "last_broker_error": self.last_broker_error,
            "error": self.error,
            "time": time.time(),
        }

    async def put_stats(self) -> None:
        key = self.topo.control.stats_key(self.cfg.node, self.cfg.replica)
        await self.kv.put(key, json.dumps(self.stats(), default=repr).encode())

    async def stats_loop(self) -> None:
        from nats.js.errors import KeyNotFoundError

        stop = self.topo.control.stop_key
        tick = 0
        ctl = self.control.ctl
        ack_wait = self.topo.options.ack_wait_s
        while True:
            if not self.realtime and len(self.inputs_) == 1:  # a join's halves wait by design
                with contextlib.suppress(Exception):
                    self.progress_acks += await self.inputs_[0].keep_held(
                        time.monotonic(), ack_wait / 3, ack_wait * PROGRESS_ACK_WAITS
                    )
            with contextlib.suppress(Exception):
                await self.put_stats()
            with contextlib.suppress(Exception):  # records toward a slow child shrink soon
                await self.read_child_costs()
            tick += 1
            if not ctl[CTL.STOP_PRODUCERS]:
                try:
                    entry = await self.kv.get(stop)
                    if entry is not None and entry.value:
                        ctl[CTL.STOP_PRODUCERS] = 1
                except KeyNotFoundError:
                    pass
                except Exception:
                    pass
            await asyncio.sleep(STATS_INTERVAL_S)

    async def read_child_costs(self) -> None:
        """Each child's cost per item (its replica 0's), for the chunk sizes."""
        from nats.js.errors import KeyNotFoundError

        for e, plan in enumerate(self.cfg.edges):
            try:
                entry = await self.kv.get(self.topo.control.stats_key(plan.child, 0))
            except KeyNotFoundError:
                continue
            fields: list[int] = json.loads(entry.value or b"{}").get("fields") or []
            if len(fields) > SLOT.COST_NS and fields[SLOT.COST_NS]:
                self.child_costs[e] = int(fields[SLOT.COST_NS])

    async def replicas_done(self, parent: str) -> bool:
        """Whether ``parent`` has ended: as many of its replicas wrote ``done`` as
        :meth:`vfcore.runtime.RunControl.replicas_needed` says."""
        from nats.js.errors import KeyNotFoundError

        control = self.topo.control
        spec = self.plan.flow.node(parent)
        needed = control.replicas_needed(spec)

        found = 0
        for r in range(spec.replicas):
            try:
                await self.kv.get(control.done_key(parent, r))
                found += 1
            except KeyNotFoundError:
                continue
            if found >= needed:
                return True
        return False

    # -- the end ---------------------------------------------------------------------------------

    def finished(self) -> None:
        self.wait_published()
        for seg in self.open_segments:  # a producer's last segments: stored before "done"
            if seg.stored is not None:
                seg.stored.result()
        if self.intent is not None:
            self.intent.result()
        self.wait_settled()
        if self.realtime:
            self.bridge.run(self.bridge.nc.flush(timeout=10), timeout_s=15)
        if self.retired:
            return  # stopped by SIGTERM, not at the end of the stream: no "done"
        key = self.topo.control.done_key(self.cfg.node, self.cfg.replica)
        doc = {"replica": self.cfg.replica, "pid": os.getpid(), "time": time.time()}
        data = json.dumps(doc).encode()
        self.bridge.run(self.retrying(lambda: self.kv.put(key, data)))

    def close(self) -> None:
        for inp in self.inputs_:  # fetched, never claimed: back to the consumer now
            inp.nak_all()
        if getattr(self, "kv", None) is not None:
            if self.stats_task is not None:
                self.stats_task.cancel()
            with contextlib.suppress(Exception):
                self.bridge.run(self.put_stats(), timeout_s=5)
        with contextlib.suppress(Exception):
            self.bridge.close()
