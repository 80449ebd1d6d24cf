"""The shared-memory ring against a reference model (hypothesis state machine).

Writers append batches, readers (several replica indices) claim and settle
them in any order, a reader "dies" and its unsettled claims are returned,
REALTIME writes evict. After every step the ring's counters must match the
model, and every message must be in exactly one place: pending, in flight,
settled or evicted. What readers get back is decoded and compared by id: FIFO
for fresh records, returned records first.
"""

from __future__ import annotations

import multiprocessing as mp
import secrets
from typing import Any

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from vfadapters.local import ring as ring_module
from vfadapters.local.ring import Claim, Full, Ring, RingHandle
from vfadapters.runtime.codec import decode, encode

_ctx = mp.get_context("spawn")


class RingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        handle = RingHandle(
            f"vf-test-{secrets.token_hex(4)}", _ctx.Lock(), _ctx.Semaphore(0), _ctx.Semaphore(0)
        )
        self.ring, self.segment = Ring.create(handle, capacity=8192, max_messages=12)
        self.next_id = 0
        # the model: records in write order: [ids, state, reader]
        self.records: list[dict[str, Any]] = []
        self.held: dict[int, list[tuple[Claim, dict[str, Any]]]] = {0: [], 1: [], 2: []}
        self.closed = False

    def teardown(self) -> None:
        self.ring.close()
        self.segment.close()
        self.segment.unlink()

    def _batch(self, n: int, size: int) -> tuple[list[int], list[tuple[Any, ...]]]:
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        payload = np.full(size, 7, np.uint8) if size >= 16 * 1024 else b"x" * size
        return ids, [(f"t{i}", None, None, (i, payload), 0) for i in ids]

    def _pending(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r["state"] == "pending"]

    @precondition(lambda self: not self.closed)
    @rule(n=st.integers(1, 5), size=st.sampled_from([0, 100, 900, 2500]))
    def write_batch(self, n: int, size: int) -> None:
        ids, envs = self._batch(n, size)
        body, buffers = encode(envs)
        try:
            evicted = self.ring.write(body, buffers, n, evict=False, block=False)
        except Full:
            self.rejected = True
            return
        assert evicted == 0
        self.records.append({"ids": ids, "state": "pending", "reader": None})

    @precondition(lambda self: not self.closed)
    @rule(n=st.integers(1, 5), size=st.sampled_from([0, 100, 900, 2500]))
    def write_realtime(self, n: int, size: int) -> None:
        ids, envs = self._batch(n, size)
        body, buffers = encode(envs)
        evicted = self.ring.write(body, buffers, n, evict=True)
        pending = self._pending()
        total = sum(len(r["ids"]) for r in pending)
        if evicted == total + n and evicted > 0:  # everything pending, then the batch itself
            for r in pending:
                r["state"] = "evicted"
            self.records.append({"ids": ids, "state": "evicted", "reader": None})
            return
        left = evicted
        for r in pending:  # oldest first, whole records
            if left <= 0:
                break
            assert len(r["ids"]) <= left, (evicted, [len(p["ids"]) for p in pending])
            r["state"] = "evicted"
            left -= len(r["ids"])
        assert left == 0
        self.records.append({"ids": ids, "state": "pending", "reader": None})

    @rule(reader=st.integers(0, 2))
    def claim(self, reader: int) -> None:
        got = self.ring.claim(reader)
        returned = [r for r in self.records if r["state"] == "returned"]
        pending = self._pending()
        expected = (returned or pending or [None])[0]
        if expected is None:
            assert got is (False if self.closed else None)
            return
        assert isinstance(got, Claim)
        ids = [e[3][0] for e in decode(self.ring.view(got), got.nbufs)]
        assert ids == expected["ids"]
        assert got.count == len(ids)
        expected["state"] = "claimed"
        expected["reader"] = reader
        self.held[reader].append((got, expected))

    @rule(reader=st.integers(0, 2), data=st.data())
    def settle(self, reader: int, data: st.DataObject) -> None:
        held = self.held[reader]
        if not held:
            return
        k = data.draw(st.integers(0, len(held) - 1))
        claim, record = held.pop(k)
        self.ring.settle([claim])
        record["state"] = "settled"

    @rule(reader=st.integers(0, 2))
    def die(self, reader: int) -> None:
        """The reader is killed: its unsettled claims go back, oldest first."""
        count = self.ring.redeliver(reader)
        mine = [r for r in self.records if r["state"] == "claimed" and r["reader"] == reader]
        assert count == sum(len(r["ids"]) for r in mine)
        for r in mine:
            r["state"] = "returned"
            r["reader"] = None
        self.held[reader] = []

    @rule()
    def close(self) -> None:
        self.ring.set_closed(True)
        self.closed = True

    @invariant()
    def counters_match_the_model(self) -> None:
        c = self.ring.counters()
        by_state: dict[str, int] = {}
        for r in self.records:
            by_state[r["state"]] = by_state.get(r["state"], 0) + len(r["ids"])
        written = sum(len(r["ids"]) for r in self.records)
        assert c["written"] == written
        assert c["evicted"] == by_state.get("evicted", 0)
        assert self.ring.pending() == by_state.get("pending", 0) + by_state.get("returned", 0)
        assert self.ring.unsettled() == written - by_state.get("settled", 0) - by_state.get(
            "evicted", 0
        )
        assert 0 <= c["used_bytes"] <= self.ring.capacity


class EarlyWrapRingMachine(RingMachine):
    """The same laws while writers wrap early to keep the bytes in use cache-hot."""

    def __init__(self) -> None:
        self._hot = ring_module._HOT_BYTES
        ring_module._HOT_BYTES = 2048  # of an 8 KiB ring
        super().__init__()

    def teardown(self) -> None:
        ring_module._HOT_BYTES = self._hot
        super().teardown()


TestRing = RingMachine.TestCase
TestRing.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestEarlyWrapRing = EarlyWrapRingMachine.TestCase
TestEarlyWrapRing.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
