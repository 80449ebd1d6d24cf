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
:meth:`Ring.claim` (by any replica) takes them first.

**Every change is one atomic step.** Each operation (write, claim, settle)
logs the old value of every cell it changes in the ring's undo log
(:mod:`vfadapters.local.atomic`) — its own positions and counters, and the
cells a caller asks to change in the same step (the progress cells of the
input record whose outputs it writes, a producer's mark, the writer's counters,
a join's journal). The holder of the lock is written in the header, so when a
worker dies holding it, the coordinator undoes the step it had begun
(:meth:`Ring.recover`): a kill -9 at any instant leaves the ring as before or
after a whole operation, never between.

**Progress cells** (exactly once). Each record carries ``progress`` u64 cells
its reader owns while it holds the record: the chunk size it chose per output
edge, then how many records it has written to each of its output buffers. A
reader that takes a returned record reads them, cuts its outputs the same way
and skips the records its predecessor wrote (they were written in the same
step that counted them). A producer's ring keeps ``mark``: one past the
highest item number written to it, so a restarted producer skips what each
buffer already holds.

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
    u64 progress[P] | u64 lengths[1 + buffers] | pickle body (8-aligned) |
    out-of-band buffers (64-aligned)
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from vfadapters.local.atomic import LOG_CELLS, Cells, UndoLog
from vfadapters.local.shm import Segment
from vfadapters.runtime.codec import align, record_size

__all__ = [
    "HEADER_BYTES",
    "Claim",
    "Closed",
    "Full",
    "Ring",
    "RingHandle",
    "StopWaiting",
    "record_size",
]

# header fields (u64 each)
(
    W,
    R,
    C,
    MW,
    MR,
    MC,
    ME,
    SW,
    RW,
    RD,
    CL,
    CAP,
    MAXM,
    BW,
    WAITS,
    EVR,
    RET,
    KEEP,
    HOLDER,
    PROG,
    MARK,
) = range(21)
#: the undo log starts at this header cell
LOG_AT = 32
HEADER_BYTES = ((LOG_AT + LOG_CELLS) * 8 + 63) & ~63

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
_rec_unpack = _REC.unpack_from


class Closed(Exception):
    """The ring was closed (its replica is retiring, or the run ends): write elsewhere."""


class Full(Exception):
    """No room, and the writer asked not to wait (``block=False``)."""


class StopWaiting(Exception):
    """A blocked writer gave up because the run is aborting."""


@dataclass(frozen=True, slots=True)
class RingHandle:
    """What a process needs to open a ring: the segment name, its number and semaphores.

    Passed to workers when they are started (semaphores cannot be sent later).
    ``number``: the segment's number in the run's :class:`~vfadapters.local.atomic.Cells`.
    """

    name: str
    lock: Any  # multiprocessing.Lock
    space: Any  # multiprocessing.Semaphore: writers waiting for room
    doorbell: Any  # the reading replica's Semaphore: data (or close) arrived
    number: int = 0


@dataclass(slots=True)
class Claim:
    """A claimed record: where it starts (for settling), what it holds, its progress cells.

    ``cell``: the u64 index (in the ring's segment) of its first progress cell.
    """

    start: int
    offset: int
    total: int
    count: int
    nbufs: int
    outstanding: int
    cell: int = 0
    settled: bool = False
    redelivered: bool = False  # returned after the replica that first claimed it died
    tally: Any = field(default=None)


def _word(total: int, kind: int) -> int:
    """The u64 that starts a record: ``total`` in the low half, ``kind`` in the high."""
    return (kind << 32) | total


class Ring:
    """One ring, opened in this process (see the module docstring).

    ``cells``: the process's segments (this ring's is added under its number);
    ``holder``: who this process is when it holds the lock (its slot + 1).
    """

    def __init__(
        self, handle: RingHandle, segment: Segment, cells: Cells | None = None, holder: int = 0
    ) -> None:
        self.handle = handle
        self.name = handle.name
        self.number = handle.number
        self.lock = handle.lock
        self.space = handle.space
        self.doorbell = handle.doorbell
        self._segment = segment
        self.words = segment.buf[: segment.size - segment.size % 8].cast("Q")
        self.h = self.words  # header cells are the first words
        self.capacity = int(self.h[CAP])
        self.max_messages = int(self.h[MAXM])
        self.keep = int(self.h[KEEP])  # 0: no keep bound (BATCH)
        self.progress = int(self.h[PROG])
        self.data = segment.buf[HEADER_BYTES : HEADER_BYTES + self.capacity]
        self.cells = cells if cells is not None else Cells()
        self.cells.add(self.number, self.words)
        self.log = UndoLog(self.cells, self.words, LOG_AT)
        self.holder = holder

    # -- lifetime ---------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        handle: RingHandle,
        *,
        capacity: int,
        max_messages: int,
        keep: int | None = None,
        progress: int = 0,
        cells: Cells | None = None,
    ) -> tuple[Ring, Segment]:
        capacity = align(max(capacity, 4096), 64)
        segment = Segment.create(handle.name, HEADER_BYTES + capacity)
        h = segment.buf[:HEADER_BYTES].cast("Q")
        h[CAP] = capacity
        h[MAXM] = max(1, max_messages)
        h[KEEP] = 0 if keep is None else max(1, keep)
        h[PROG] = progress
        h.release()
        return cls(handle, segment, cells), segment

    @classmethod
    def attach(cls, handle: RingHandle, cells: Cells | None = None, holder: int = 0) -> Ring:
        return cls(handle, Segment.attach(handle.name), cells, holder)

    def close(self) -> None:
        self.data.release()
        self.words.release()
        self._segment.close()

    # -- the lock and the atomic step --------------------------------------------------

    def _acquire(self) -> None:
        self.lock.acquire()
        self.h[HOLDER] = self.holder

    def _release(self) -> None:
        self.log.done()
        self.h[HOLDER] = 0
        self.lock.release()

    def _set(self, cell: int, value: int) -> None:
        self.log.store(self.number, cell, value)

    def _set_word(self, off: int, total: int, kind: int) -> None:
        """Rewrite the first word of the record at data offset ``off``."""
        self.log.store(self.number, (HEADER_BYTES + off) >> 3, _word(total, kind))

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

    @property
    def mark(self) -> int:
        """One past the highest item number a producer wrote here (0: none)."""
        return int(self.h[MARK])

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
        also: Sequence[tuple[int, int, int]] = (),
        mark: int = 0,
    ) -> int:
        """Append one record of ``count`` messages; returns how many messages were evicted.

        ``also``: cells ``(segment, cell, value)`` set in the same atomic step
        (progress of the input record, a journal); ``mark``: a producer's item
        number one past this record's last (kept as the ring's ``mark``).

        Raises :class:`Closed` if the ring is closed, :class:`StopWaiting` if
        ``should_stop()`` turns true while waiting for room, :class:`Full` when
        there is no room and ``block`` is false, and ``ValueError`` if the record
        can never fit.
        """
        lens = [b.nbytes for b in buffers]
        prog = self.progress
        need = record_size(len(body), lens, prog)
        cap = self.capacity
        if need > cap:
            raise ValueError(
                f"a batch of {count} message(s) takes {need / 2**20:.1f} MiB, more than the "
                f"{cap / 2**20:.1f} MiB buffer holds; raise the buffer size (vf run "
                f"--buffer-mib {2 ** max(0, (need - 1).bit_length() - 20)})"
            )
        h = self.h
        keep = self.keep if evict else 0
        evicted = 0
        self._acquire()
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
                    self._set(W, w)
                    self._set(R, w)
                    self._set(C, w)
                    continue
                if evict:
                    n = self._evict_oldest_locked()
                    if n:
                        evicted += n
                        continue
                    # nothing pending to evict: the incoming batch is the oldest droppable
                    for cell in (MW, MR, MC, ME):
                        self._set(cell, h[cell] + count)
                    self._set(EVR, h[EVR] + 1)
                    return evicted + count
                if not block:
                    raise Full(self.name)
                h[SW] += 1
                h[WAITS] += 1
                self.log.done()
                h[HOLDER] = 0
                self.lock.release()
                try:
                    self.space.acquire(True, 0.1)
                finally:
                    self._acquire()
                if should_stop is not None and should_stop():
                    raise StopWaiting(self.name)
            data = self.data
            if pad:  # the filler is beyond the write position until W moves: no log
                _REC.pack_into(data, off, pad, WRAP, 0, 0)
                off = 0
            nb = len(lens)
            _REC.pack_into(data, off, need, DATA, count, nb)
            p = off + 16
            if prog:
                data[p : p + 8 * prog] = bytes(8 * prog)
                p += 8 * prog
            struct.pack_into(f"<{1 + nb}Q", data, p, len(body), *lens)
            p = off + align(16 + 8 * prog + 8 * (1 + nb), 8)
            data[p : p + len(body)] = body
            p += len(body)
            for b, n in zip(buffers, lens, strict=True):
                p = align(p, 64)
                data[p : p + n] = b
                p += n
            for segment, cell, value in also:
                self.log.store(segment, cell, value)
            if mark:
                self._set(MARK, mark)
            self._set(MW, h[MW] + count)
            self._set(RW, h[RW] + 1)
            self._set(BW, h[BW] + need)
            self._set(W, w + pad + need)
        finally:
            self._release()
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
                self._set_word(off, total, EVICTED)
                self._set(R, r)
                for cell in (MR, MC, ME):
                    self._set(cell, h[cell] + n)
                self._set(EVR, h[EVR] + 1)
                self._advance_commit_locked()
                return int(n)
        return 0

    # -- reading ---------------------------------------------------------------------------

    def _advance_commit_locked(self) -> None:
        """Move ``commit_pos`` over settled records, fillers and evicted records."""
        h, data, cap = self.h, self.data, self.capacity
        c, r = h[C], h[R]
        start = c
        while c < r:
            total, kind, _, _ = _rec_unpack(data, c % cap)
            k = kind & _KIND
            if k == DATA and not kind & SETTLED:
                break
            c += total
        if c != start:
            self._set(C, c)

    def claim(self, reader: int) -> Claim | Literal[False] | None:
        """The oldest pending record, now in flight for ``reader``; ``None`` if there
        is none, ``False`` at the end of the stream (the ring is closed and empty).

        Records returned by :meth:`redeliver` come first.
        """
        h, data, cap = self.h, self.data, self.capacity
        owner = (reader + 1) << 8
        base = HEADER_BYTES >> 3
        self._acquire()
        try:
            if h[RET]:
                p, r = h[C], h[R]
                while p < r:
                    off = p % cap
                    total, kind, n, nb = _rec_unpack(data, off)
                    if kind & (_KIND | RETURNED | SETTLED) == DATA | RETURNED:
                        self._set_word(off, total, DATA | owner)
                        self._set(RET, h[RET] - 1)
                        self._set(MR, h[MR] + n)
                        return Claim(
                            p, off, total, n, nb, n, base + (off >> 3) + 2, redelivered=True
                        )
                    p += total
                self._set(RET, 0)  # not found: the count was stale
            r0 = r = h[R]
            w = h[W]
            while r < w:
                off = r % cap
                total, kind, n, nb = _rec_unpack(data, off)
                if kind == DATA:
                    self._set_word(off, total, DATA | owner)
                    self._set(R, r + total)
                    self._set(MR, h[MR] + n)
                    if r != r0:
                        self._advance_commit_locked()
                    return Claim(r, off, total, n, nb, n, base + (off >> 3) + 2)
                r += total  # a WRAP filler or an evicted record
            if r != r0:
                self._set(R, r)
                self._advance_commit_locked()
            if h[CL]:
                return False
            return None
        finally:
            self._release()

    def view(self, claim: Claim) -> memoryview:
        return self.data[claim.offset : claim.offset + claim.total]

    def lengths_at(self) -> int:
        """Where a record's lengths start (after its header and progress cells)."""
        return 16 + 8 * self.progress

    def settle(self, settled: Sequence[Claim], also: Sequence[tuple[int, int, int]] = ()) -> None:
        """Mark claims as done (any order), and set ``also`` in the same atomic step;
        ``commit_pos`` moves over the settled prefix."""
        h, data = self.h, self.data
        self._acquire()
        try:
            count = 0
            for c in settled:
                total, kind, _n, _nb = _rec_unpack(data, c.offset)
                self._set_word(c.offset, total, kind | SETTLED)
                count += c.count
            for segment, cell, value in also:
                self.log.store(segment, cell, value)
            self._set(MC, h[MC] + count)
            self._advance_commit_locked()
            waiters = h[SW]
            if waiters:
                h[SW] = 0
                for _ in range(int(waiters)):
                    self.space.release()
        finally:
            self._release()

    def redeliver(self, reader: int) -> int:
        """Return the records ``reader`` claimed and never settled (it died); how many
        messages. Any replica's next :meth:`claim` takes them."""
        h, data, cap = self.h, self.data, self.capacity
        owner = (reader + 1) << 8
        records = 0
        count = 0
        self._acquire()
        try:
            p, r = h[C], h[R]
            while p < r:
                off = p % cap
                total, kind, n, _nb = _rec_unpack(data, off)
                if kind & ~0xFF == owner and kind & (_KIND | SETTLED | RETURNED) == DATA:
                    self._set_word(off, total, DATA | RETURNED)
                    records += 1
                    count += n
                p += total
            self._set(RET, h[RET] + records)
            self._set(MR, h[MR] - count)
            self._set(RD, h[RD] + count)
        finally:
            self._release()
        for _ in range(records):
            self.doorbell.release()
        return count

    # -- the coordinator ------------------------------------------------------------------

    def set_closed(self, closed: bool) -> None:
        self._acquire()
        try:
            self._set(CL, 1 if closed else 0)
        finally:
            self._release()
        self.doorbell.release()

    def recover(self, dead: int, cells: Cells | None = None, timeout: float = 0.5) -> bool:
        """If the process ``dead`` (its holder number) died holding the lock, undo the step
        it had begun and release the lock; whether it had to.

        ``cells``: the segments as the dead process numbered them (its journal).
        A live holder never keeps the lock for ``timeout`` with its number unset, so a
        lock still held then with no holder written was taken by the dead process
        just before it died.
        """
        if self.lock.acquire(True, timeout):
            self.lock.release()
            return False
        holder = int(self.h[HOLDER])
        if holder not in (0, dead):
            return False  # a live process holds it
        UndoLog(cells or self.cells, self.words, LOG_AT).undo()
        self.h[HOLDER] = 0
        try:
            self.lock.release()
        except ValueError:
            return False
        return True
