"""A bounded, multi-writer, multi-reader ring of message batches in shared memory.

One ring carries one edge into one node: all competing replicas of the node
read the same ring (so an idle replica takes the next batch, and a replica
added by autoscaling takes work at once); a partitioned node has one ring per
replica (the sender computes the owner). Writers append *records* (an encoded
batch of messages) under the ring's lock; a reader *claims* a record (its
replica index is written into it), processes it, and *settles* it. Positions
are monotonic byte counters::

    commit_pos <= read_pos <= write_pos
    [commit, read): claimed and not all settled (in flight)  — kept for redelivery
    [read, write):  written, not yet claimed (pending)

Space is reclaimed only up to ``commit_pos``, which moves over settled records
in order, so a reader killed with -9 loses nothing: :meth:`Ring.redeliver`
marks the records it had claimed and not settled as *returned*; the next
:meth:`Ring.claim` (by any replica) takes them first. They are counted as
redelivered: the only duplicates a crash can cause.

Backpressure (BATCH): a writer that finds no room waits on the ring's ``space``
semaphore (a reader posts it when it settles while writers wait); no
spinning. Eviction (REALTIME): a writer that finds no room evicts the oldest
*pending* records (never in-flight ones) and counts them; if nothing is pending
the incoming batch itself is evicted. Writers never wait in REALTIME. A REALTIME
ring also has a *keep* bound (``Ring.create(keep=...)``, the layout's
``realtime_keep``): a writer evicts the oldest pending records until the
pending messages, its own batch included, are at most ``keep``; a batch of more
than ``keep`` messages is written only into a ring with nothing pending, so
writers cap their REALTIME batches at ``keep`` messages and the bound holds per
message. In-flight records (being handled) do not count against ``keep``.

Each record is laid out contiguously (a WRAP filler takes the end of the
buffer when a record does not fit there), so a batch is parsed from one slice::

    u32 total | u32 kind (flags | claimant << 8) | u32 messages | u32 buffers
    u64 lengths[1 + buffers] | pickle body (8-aligned) | out-of-band buffers (64-aligned)
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vfadapters.local.shm import Segment

__all__ = ["HEADER_BYTES", "Claim", "Closed", "Full", "Ring", "RingHandle", "StopWaiting"]

# header fields (u64 each)
W, R, C, MW, MR, MC, ME, SW, RW, RD, CL, CAP, MAXM, BW, WAITS, EVR, RET, KEEP = range(18)
HEADER_BYTES = 256

# record kinds (low 4 bits), flags, and the claiming replica (+1) from bit 8
DATA = 1
WRAP = 2
EVICTED = 3
SETTLED = 0x10
RETURNED = 0x20
_KIND = 0x0F

#: While the reader keeps up, writers wrap around after this many bytes (see write()).
_HOT_BYTES = 4 << 20

_REC = struct.Struct("<IIII")
_U64 = struct.Struct("<Q")
_rec_unpack = _REC.unpack_from
_rec_pack = _REC.pack_into


class Closed(Exception):
    """The ring was closed (its replica is retiring, or the run ends): write elsewhere."""


class Full(Exception):
    """No room, and the writer asked not to wait (``block=False``)."""


class StopWaiting(Exception):
    """A blocked writer gave up because the run is aborting."""


@dataclass(frozen=True, slots=True)
class RingHandle:
    """What a process needs to open a ring: the segment name and its semaphores.

    Passed to workers when they are started (semaphores cannot be sent later).
    """

    name: str
    lock: Any  # multiprocessing.Lock
    space: Any  # multiprocessing.Semaphore: writers waiting for room
    doorbell: Any  # the reading replica's Semaphore: data (or close) arrived


@dataclass(slots=True)
class Claim:
    """A claimed record: where it starts (for settling) and what it holds."""

    start: int
    offset: int
    total: int
    count: int
    nbufs: int
    outstanding: int
    settled: bool = False
    redelivered: bool = False  # returned after the replica that first claimed it died


def _align(n: int, a: int) -> int:
    return (n + a - 1) & ~(a - 1)


def record_size(body_len: int, buffer_lens: Sequence[int]) -> int:
    p = _align(16 + 8 * (1 + len(buffer_lens)), 8) + body_len
    for n in buffer_lens:
        p = _align(p, 64) + n
    return _align(p, 64)


class Ring:
    """One ring, opened in this process (see the module docstring)."""

    def __init__(self, handle: RingHandle, segment: Segment) -> None:
        self.handle = handle
        self.name = handle.name
        self.lock = handle.lock
        self.space = handle.space
        self.doorbell = handle.doorbell
        self._segment = segment
        self.h = segment.buf[:HEADER_BYTES].cast("Q")
        self.capacity = int(self.h[CAP])
        self.max_messages = int(self.h[MAXM])
        self.keep = int(self.h[KEEP])  # 0: no keep bound (BATCH)
        self.data = segment.buf[HEADER_BYTES : HEADER_BYTES + self.capacity]

    # -- lifetime ---------------------------------------------------------------------

    @classmethod
    def create(
        cls, handle: RingHandle, *, capacity: int, max_messages: int, keep: int | None = None
    ) -> tuple[Ring, Segment]:
        capacity = _align(max(capacity, 4096), 64)
        segment = Segment.create(handle.name, HEADER_BYTES + capacity)
        h = segment.buf[:HEADER_BYTES].cast("Q")
        h[CAP] = capacity
        h[MAXM] = max(1, max_messages)
        h[KEEP] = 0 if keep is None else max(1, keep)
        h.release()
        return cls(handle, segment), segment

    @classmethod
    def attach(cls, handle: RingHandle) -> Ring:
        return cls(handle, Segment.attach(handle.name))

    def close(self) -> None:
        self.h.release()
        self.data.release()
        self._segment.close()

    # -- reads anyone may do (approximate, lock-free) ------------------------------

    def counters(self) -> dict[str, int]:
        h = self.h
        return {
            "written": h[MW],
            "read": h[MR],
            "committed": h[MC],
            "evicted": h[ME],
            "redelivered": h[RD],
            "bytes": h[BW],
            "records": h[RW],
            "writer_waits": h[WAITS],
            "used_bytes": h[W] - h[C],
        }

    def pending(self) -> int:
        """Messages written and not yet claimed (returned ones included)."""
        return int(self.h[MW] - self.h[MR])

    def unsettled(self) -> int:
        """Messages written and not yet settled (pending + in flight)."""
        return int(self.h[MW] - self.h[MC])

    @property
    def closed(self) -> bool:
        return bool(self.h[CL])

    # -- writing --------------------------------------------------------------------------

    def write(
        self,
        body: bytes,
        buffers: Sequence[memoryview],
        count: int,
        *,
        evict: bool,
        should_stop: Callable[[], bool] | None = None,
        block: bool = True,
    ) -> int:
        """Append one record of ``count`` messages; returns how many messages were evicted.

        Raises :class:`Closed` if the ring is closed, :class:`StopWaiting` if
        ``should_stop()`` turns true while waiting for room, :class:`Full` when
        there is no room and ``block`` is false, and ``ValueError`` if the record
        can never fit.
        """
        lens = [b.nbytes for b in buffers]
        need = record_size(len(body), lens)
        cap = self.capacity
        if need > cap:
            raise ValueError(
                f"a batch of {count} message(s) takes {need / 2**20:.1f} MiB, more than the "
                f"{cap / 2**20:.1f} MiB buffer holds; raise the buffer size (vf run "
                f"--buffer-mib {2 ** max(0, (need - 1).bit_length() - 20)})"
            )
        h = self.h
        lock = self.lock
        keep = self.keep if evict else 0
        evicted = 0
        lock.acquire()
        try:
            while True:
                if h[CL]:
                    raise Closed(self.name)
                w = h[W]
                off = w % cap
                used = w - h[C]
                if off + need > cap:
                    pad = cap - off
                elif off + need > _HOT_BYTES and used + need <= off:
                    # the reader keeps up: wrap early, so that the bytes in use stay
                    # within the first few MiB, which the caches still hold
                    pad = cap - off
                else:
                    pad = 0
                queued = h[MW] - h[MC]
                if used + pad + need <= cap and (queued + count <= h[MAXM] or queued == 0):
                    if not keep:
                        break
                    pending = h[MW] - h[MR]
                    if pending + count <= keep or pending == 0:
                        break
                if pad and w == h[C] and need <= cap:
                    # empty, but the record fits neither before nor after the wrap point:
                    # start the next lap at offset 0 (nothing is pending or in flight)
                    w = (w // cap + 1) * cap
                    h[W] = h[R] = h[C] = w
                    continue
                if evict:
                    n = self._evict_oldest_locked()
                    if n:
                        evicted += n
                        continue
                    # nothing pending to evict: the incoming batch is the oldest droppable
                    h[MW] += count
                    h[MR] += count
                    h[MC] += count
                    h[ME] += count
                    h[EVR] += 1
                    return evicted + count
                if not block:
                    raise Full(self.name)
                h[SW] += 1
                h[WAITS] += 1
                lock.release()
                try:
                    self.space.acquire(True, 0.1)
                finally:
                    lock.acquire()
                if should_stop is not None and should_stop():
                    raise StopWaiting(self.name)
            data = self.data
            if pad:
                _rec_pack(data, off, pad, WRAP, 0, 0)
                off = 0
            nb = len(lens)
            _rec_pack(data, off, need, DATA, count, nb)
            struct.pack_into(f"<{1 + nb}Q", data, off + 16, len(body), *lens)
            p = off + _align(16 + 8 * (1 + nb), 8)
            data[p : p + len(body)] = body
            p += len(body)
            for b, n in zip(buffers, lens, strict=True):
                p = _align(p, 64)
                data[p : p + n] = b
                p += n
            h[W] = w + pad + need
            h[MW] += count
            h[RW] += 1
            h[BW] += need
        finally:
            lock.release()
        self.doorbell.release()
        return evicted

    def _evict_oldest_locked(self) -> int:
        """Evict the oldest pending record; its message count (0 if none is pending)."""
        h, data, cap = self.h, self.data, self.capacity
        r = h[R]
        w = h[W]
        while r < w:
            off = r % cap
            total, kind, n, _ = _rec_unpack(data, off)
            r += total
            if kind == DATA:
                _rec_pack(data, off, total, EVICTED, n, 0)
                h[R] = r
                h[MR] += n
                h[MC] += n
                h[ME] += n
                h[EVR] += 1
                self._advance_commit_locked()
                return int(n)
        return 0

    # -- reading ---------------------------------------------------------------------------

    def _advance_commit_locked(self) -> None:
        """Move ``commit_pos`` over settled records, fillers and evicted records."""
        h, data, cap = self.h, self.data, self.capacity
        c, r = h[C], h[R]
        while c < r:
            total, kind, _, _ = _rec_unpack(data, c % cap)
            k = kind & _KIND
            if k == DATA and not kind & SETTLED:
                break
            c += total
        h[C] = c

    def claim(self, reader: int) -> Claim | Literal[False] | None:
        """The oldest pending record, now in flight for ``reader``; ``None`` if there
        is none, ``False`` at the end of the stream (the ring is closed and empty).

        Records returned by :meth:`redeliver` come first.
        """
        h, data, cap = self.h, self.data, self.capacity
        lock = self.lock
        owner = (reader + 1) << 8
        lock.acquire()
        try:
            if h[RET]:
                p, r = h[C], h[R]
                while p < r:
                    off = p % cap
                    total, kind, n, nb = _rec_unpack(data, off)
                    if kind & (_KIND | RETURNED | SETTLED) == DATA | RETURNED:
                        _rec_pack(data, off, total, DATA | owner, n, nb)
                        h[RET] -= 1
                        h[MR] += n
                        return Claim(p, off, total, n, nb, n, redelivered=True)
                    p += total
                h[RET] = 0  # not found: the count was stale
            r0 = r = h[R]
            w = h[W]
            while r < w:
                off = r % cap
                total, kind, n, nb = _rec_unpack(data, off)
                if kind == DATA:
                    _rec_pack(data, off, total, DATA | owner, n, nb)
                    h[R] = r + total
                    h[MR] += n
                    if r != r0:
                        self._advance_commit_locked()
                    return Claim(r, off, total, n, nb, n)
                r += total  # a WRAP filler or an evicted record
            if r != r0:
                h[R] = r
                self._advance_commit_locked()
            if h[CL]:
                return False
            return None
        finally:
            lock.release()

    def view(self, claim: Claim) -> memoryview:
        return self.data[claim.offset : claim.offset + claim.total]

    def settle(self, settled: Sequence[Claim]) -> None:
        """Mark claims as done (any order); ``commit_pos`` moves over the settled prefix."""
        h, data = self.h, self.data
        lock = self.lock
        lock.acquire()
        try:
            count = 0
            for c in settled:
                total, kind, n, nb = _rec_unpack(data, c.offset)
                _rec_pack(data, c.offset, total, kind | SETTLED, n, nb)
                count += c.count
            h[MC] += count
            self._advance_commit_locked()
            waiters = h[SW]
            if waiters:
                h[SW] = 0
                for _ in range(int(waiters)):
                    self.space.release()
        finally:
            lock.release()

    def redeliver(self, reader: int) -> int:
        """Return the records ``reader`` claimed and never settled (it died); how many
        messages. Any replica's next :meth:`claim` takes them."""
        h, data, cap = self.h, self.data, self.capacity
        owner = (reader + 1) << 8
        lock = self.lock
        records = 0
        count = 0
        lock.acquire()
        try:
            p, r = h[C], h[R]
            while p < r:
                off = p % cap
                total, kind, n, nb = _rec_unpack(data, off)
                if kind & ~0xFF == owner and kind & (_KIND | SETTLED | RETURNED) == DATA:
                    _rec_pack(data, off, total, DATA | RETURNED, n, nb)
                    records += 1
                    count += n
                p += total
            h[RET] += records
            h[MR] -= count
            h[RD] += count
        finally:
            lock.release()
        for _ in range(records):
            self.doorbell.release()
        return count

    # -- the coordinator ------------------------------------------------------------------

    def set_closed(self, closed: bool) -> None:
        self.lock.acquire()
        try:
            self.h[CL] = 1 if closed else 0
        finally:
            self.lock.release()
        self.doorbell.release()

    def recover_lock(self, timeout: float = 0.5) -> bool:
        """Release the lock if a dead process left it held; True if it had to."""
        if self.lock.acquire(True, timeout):
            self.lock.release()
            return False
        try:
            self.lock.release()
        except ValueError:
            return False
        return True
