"""A broker replica's input port: one durable pull consumer of one parent's stream.

:class:`StreamInput` is the :class:`~vfadapters.runtime.ports.InputPort` a
:class:`~vfadapters.broker.transport.BrokerTransport` gives a node for each of
its parents. A batch's origin is the parent's token and the message's stream
sequence. A record is checked against its seal before it is decoded (a record
no writer of this run sealed is refused, never unpickled); a batch is
acknowledged only after every output it caused is stored *and* its ledger
entry (its tally, named after the origin) is; a redelivered batch whose ledger
entry exists was finished before and is only acknowledged. How a batch's
outputs toward replicas that share work are cut is stored before its first
output, so every attempt cuts alike. While a replica is alive it says the
messages it holds are in progress (``+WPI``), so a long batch is not handed out
again (docs/broker.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from vfadapters.broker.client import api_request
from vfadapters.broker.record import header
from vfadapters.broker.sealing import edge_domain
from vfadapters.runtime.codec import decode
from vfadapters.runtime.columns import Columns
from vfadapters.runtime.ports import RecordRefused, Tally
from vfadapters.runtime.worker import Aborted
from vfcore.runtime import InputOrigin, TopologyConsumer

if TYPE_CHECKING:
    from vfadapters.broker.transport import BrokerTransport

__all__ = ["BrokerBatch", "StreamInput", "ack_all", "nak_all"]


class BrokerBatch:
    """A fetched message, as the worker sees a batch."""

    __slots__ = (
        "count",
        "data",
        "msg",
        "nbufs",
        "origin",
        "outstanding",
        "redelivered",
        "refused",
        "settled",
        "tally",
        "undecodable",
    )

    def __init__(self, msg: Any, data: Any, count: int, nbufs: int, origin: InputOrigin) -> None:
        self.msg = msg
        self.data = data
        self.count = count
        self.nbufs = nbufs
        self.outstanding = count
        self.settled = False
        self.origin = origin
        self.redelivered = msg.metadata.num_delivered > 1
        self.tally: Tally | None = None
        self.undecodable: str | None = None
        self.refused: RecordRefused | None = None

    def envelopes(self) -> Columns:
        if self.refused is not None:
            raise self.refused
        if self.undecodable is not None:
            raise ValueError(self.undecodable)
        return decode(memoryview(self.data), self.nbufs)


class StreamInput:
    """One durable pull consumer, read by this replica (see the module docstring)."""

    def __init__(
        self, t: BrokerTransport, parent: str, token: str, consumer: TopologyConsumer, shared: bool
    ) -> None:
        self.t = t
        self.parent = parent
        self.token = token
        self.consumer = consumer
        self.domain = edge_domain(parent, t.cfg.node)  # what its records must be sealed for
        self.sub: Any = None
        self.buffer: deque[Any] = deque()
        self.held = 0  # claimed and not yet acknowledged
        self.upstream_done = False
        self.next_end_check = 0.0
        self.committed = 0  # items acknowledged
        self.redelivered = 0
        self.done_before = 0  # redelivered batches whose ledger entry existed
        self.copies = 0  # messages handed to us again while we still held them
        # stream sequences claimed and not yet settled: [message, claimed, last said in
        # progress] (monotonic seconds), for the progress acknowledgements (keep_held)
        self.holding: dict[int, list[Any]] = {}
        self.buffer_since = 0.0  # when what the buffer holds was fetched
        self.buffer_told = 0.0  # ... and last said in progress
        # one at a time when replicas share the consumer (or may be added): none hoards work
        self.batch = 1 if t.realtime or shared else 4

    async def bind(self) -> None:
        js = self.t.bridge.js
        self.sub = await js.pull_subscribe_bind(
            durable=self.consumer.name, stream=self.consumer.stream
        )

    async def _fetch(self, queued: list[Any] | None = None) -> list[Any]:
        if queued:  # the deliveries queued since the last crossing start now
            await self.t._start(queued)
        try:
            msgs: list[Any] = await self.sub.fetch(self.batch, timeout=self.t.plan.fetch_timeout_s)
            return msgs
        except TimeoutError:
            return []
        except Exception as exc:  # a reconnect in progress, a server restart
            import nats.errors

            if isinstance(exc, nats.errors.TimeoutError):
                return []
            self.t.note_broker_error(exc)
            await asyncio.sleep(0.1)
            return []

    def claim(self) -> BrokerBatch | Literal[False] | None:
        t = self.t
        if not self.buffer:
            queued, t.queued = t.queued, []
            msgs = t.bridge.run(self._fetch(queued))
            if not msgs:
                if self.ended():
                    return False
                return None
            self.buffer.extend(msgs)
            self.buffer_since = self.buffer_told = time.monotonic()
        msg = self.buffer.popleft()
        seq = msg.metadata.sequence.stream
        if seq in self.holding:
            # a join holds halves unacknowledged past ack_wait: the server hands the same
            # message out again. The copy is left alone (acknowledging it would settle
            # the one we hold); the held one is acknowledged with its group
            self.copies += 1
            return None
        data = msg.data
        origin = InputOrigin(self.token, seq)
        head = header(data)
        undecodable = None
        if head is None:
            from vfadapters.broker.payloads import LargePayloadMissingError

            try:
                data = t.resolve_large(data)
                head = header(data)
            except LargePayloadMissingError:
                # its record was deleted, which happens only after a message that
                # referenced it was acknowledged: this is a late duplicate
                t.bridge.submit(ack_all([msg]))
                t.logger.warning(
                    "a redelivered message on %s referenced a large record already consumed "
                    "and freed: dropped as a duplicate",
                    msg.subject,
                )
                self.redelivered += 1
                return None
            except Exception as exc:
                undecodable = f"its large record could not be read: {type(exc).__name__}: {exc}"
            if head is None and undecodable is None:
                undecodable = (
                    f"a message of {len(msg.data)} bytes on {msg.subject} is not a vf record"
                )
        refused = None
        if head is not None:
            why = t.opener.check(data, self.domain)
            if why is not None:  # never decoded: a dead letter with the reason
                refused = RecordRefused(
                    "record-unauthenticated",
                    f"a message of {len(data)} bytes on {msg.subject} was refused: {why}",
                )
                head = None
        batch = BrokerBatch(msg, data, head[0] if head else 1, head[1] if head else 0, origin)
        batch.undecodable = undecodable
        batch.refused = refused
        if (
            time.monotonic() - t.bridge.reconnected_at < t.suspect_s
            or time.time() < t.suspect_until
        ):
            # after the server came back, a message's delivery count may have been
            # reset with the consumer's state: any of them may have been handled before
            batch.redelivered = True
        # fetched with the buffer, and said in progress with it until now
        self.holding[seq] = [msg, self.buffer_since, self.buffer_told]
        self.held += 1
        if batch.redelivered:
            self.redelivered += batch.count
        return batch

    def chunking(self, batch: Any, proposed: Sequence[int]) -> tuple[int, ...]:
        """The first attempt's cut when it split the batch (stored before any output);
        the whole batch per edge otherwise (see the module docstring)."""
        whole = [max(1, batch.count)] * len(proposed)
        splits = any(limit < batch.count for limit in proposed)
        if not splits and not batch.redelivered:
            return tuple(whole)
        t = self.t
        key = t.topo.control.split_key(t.cfg.node, self.parent, batch.origin.seq)
        wanted = list(proposed) if not batch.redelivered else whole
        stored = t.bridge.run(t.retrying(lambda: t.decide(key, wanted)))
        return tuple(int(x) for x in stored)

    def already_done(self, batch: Any) -> bool:
        t = self.t
        if t.topo.ledger is None:
            return False
        found = t.bridge.run(t.retrying(lambda: t.ledger_has(batch.origin)))
        if found:
            self.done_before += 1
        return bool(found)

    def settle(self, batches: Sequence[Any], tally: Tally | None) -> None:
        """Acknowledge ``batches`` once every output they caused is stored, and then
        their ledger entry (``tally``): one delivery on the loop thread; the node goes
        on meanwhile."""
        t = self.t
        t.check_deliveries()
        if tally is not None:
            t.count(tally, self.parent)
            if len(batches) == 1:
                t.ledger(batches[0].origin, tally, self.parent)
            else:
                for b in batches:  # a join settles several: one entry each, its own tally
                    bt = b.tally if b.tally is not None else Tally(received=b.count)
                    t.ledger(b.origin, bt, self.parent)
        for b in batches:
            self.holding.pop(b.origin.seq, None)
        t.deliver(
            acks=[b.msg for b in batches],
            refs=[b.msg.data for b in batches if t.large is not None],
            count=sum(b.count for b in batches),
            inp=self,
            now=False,  # started by the next fetch, which crosses to the loop thread anyway
        )

    async def keep_held(self, now: float, every_s: float, limit_s: float) -> int:
        """On the loop thread: say ``+WPI`` (in progress) for each message held longer than
        ``every_s`` since it was fetched or last said so, if it was fetched less than
        ``limit_s`` ago; how many were said. The node's thread adds and removes held
        messages meanwhile: each pass reads a copy."""
        told = []
        for entry in list(self.holding.values()):
            msg, since, last = entry
            if now - last >= every_s and now - since < limit_s:
                entry[2] = now
                told.append(msg)
        if now - self.buffer_told >= every_s and now - self.buffer_since < limit_s:
            self.buffer_told = now
            told.extend(list(self.buffer))
        for msg in told:
            with contextlib.suppress(Exception):  # acknowledged meanwhile, or a reconnect
                await msg.in_progress()
        return len(told)

    def ended(self) -> bool:
        """Every replica of the parent is done and nothing is left for us to take."""
        now = time.monotonic()
        if now < self.next_end_check:
            return False
        self.next_end_check = now + 0.2
        t = self.t
        import nats.errors

        # a server that cannot answer now (a cluster electing a leader, a reconnect) has
        # not said the input ended: ask again at the next check
        try:
            if not self.upstream_done:
                self.upstream_done = t.bridge.run(t.replicas_done(self.parent))
                if not self.upstream_done:
                    return False
            c = self.consumer
            info = t.bridge.run(
                api_request(t.bridge.nc, f"$JS.API.CONSUMER.INFO.{c.stream}.{c.name}")
            )
        except (nats.errors.Error, TimeoutError, OSError) as exc:
            t.note_broker_error(exc)
            t.bridge.raise_if_denied()
            return False
        if info.get("error"):
            t.note_broker_error(RuntimeError(str(info["error"])))
            return False
        pending = int(info.get("num_pending", 0))
        in_flight = int(info.get("num_ack_pending", 0))
        return pending == 0 and in_flight <= self.held + len(self.buffer)

    def wait(self, timeout_s: float) -> None:
        if self.t.control.aborting():
            raise Aborted

    def wake(self) -> None:
        return None

    def nak_all(self) -> None:
        """On abort: what we fetched goes back to the consumer at once (not after ack_wait)."""
        msgs = list(self.buffer)
        self.buffer.clear()
        if msgs:
            with contextlib.suppress(Exception):
                self.t.bridge.run(nak_all(msgs), timeout_s=2)


async def ack_all(msgs: list[Any]) -> None:
    for m in msgs:
        with contextlib.suppress(Exception):
            await m.ack()


async def nak_all(msgs: list[Any]) -> None:
    for m in msgs:
        with contextlib.suppress(Exception):
            await m.nak()
