"""The join loop of the one node runtime (:mod:`vfadapters.runtime.worker`).

A node with several parents claims batches from each, assembles groups under its
join policy (vfcore's assembler), calls the node once per group and writes its
outputs under the group's key; an input batch is settled once every group it
took part in is written.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from vfadapters.runtime.config import SLOT
from vfadapters.runtime.ports import (
    InputPort,
    Tally,
)
from vfadapters.runtime.worker_base import (
    EMPTY_MAPPING,
    SKIP,
    Aborted,
    WorkerBase,
    estimate,
)
from vfcore import owner_of
from vfcore.runtime import (
    GroupOrigin,
)

#: claims a join settles in one call (a transport keeps each settlement atomic)
_SETTLE_AT_MOST = 32


class JoinLoop(WorkerBase):
    """The join loop of a :class:`~vfadapters.runtime.worker.Worker`."""

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
            if result is not SKIP:
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
                        metadata=meta or EMPTY_MAPPING,
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
