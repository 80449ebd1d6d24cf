"""The shared-memory transport, worker side: the ports of one replica of a local run.

:class:`LocalPlan` is what the coordinator hands a replica's process (picklable:
semaphores travel only when a process starts); :class:`LocalTransport` opens
its segments and gives the one :class:`~vfadapters.runtime.worker.Worker` its
ports:

* :class:`RingInput` — claims records of a ring; a batch's origin is the
  parent's token and the record's start position (monotonic, never reused);
  its progress cells hold the chunk sizes the first claimant chose and how
  many records it wrote to each output buffer; settling applies the batch's
  tally to the replica's counters in the same atomic step;
* :class:`RingOutlet` — writes records, skipping those a returned record's
  progress says were written (a producer: the items at or past the ring's
  mark; a join: the groups its journal holds), counting each write in the
  same atomic step;
* :class:`FileLetters` — dead letters appended as JSON lines, each id once;
* a join's :class:`Journal` — which of its groups were written to which
  buffer and which are done, kept across a restart of the replica.

The worker process ignores SIGINT/SIGTERM (the coordinator decides how to
stop), dies with its parent (``PR_SET_PDEATHSIG``) and exits when orphaned.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vfadapters.local.atomic import LOG_CELLS, Cells, UndoLog
from vfadapters.local.ring import Claim, Ring, RingHandle, StopWaiting, record_size
from vfadapters.local.shm import Segment
from vfadapters.runtime.codec import decode, encode
from vfadapters.runtime.columns import Columns
from vfadapters.runtime.config import CTL, SLOT, NodeConfig, slot_base
from vfadapters.runtime.letters import DeadLetter
from vfadapters.runtime.ports import Envelope, LetterNotWritten, OutputKey, Tally
from vfadapters.runtime.worker import (
    ProducerSegment,
    ResumePlan,
    Worker,
    set_parent_death_signal,
    set_process_name,
)
from vfcore.runtime import GroupOrigin, InputOrigin, Origin

__all__ = [
    "CONTROL_SEGMENT",
    "JOURNAL_SEGMENT",
    "FileLetters",
    "Journal",
    "LocalPlan",
    "LocalTransport",
    "control_size",
    "private_log",
    "worker_main",
]

#: segment numbers in a run's Cells: the control fields, a join replica's journal;
#: rings are numbered from 2 (RingHandle.number)
CONTROL_SEGMENT = 0
JOURNAL_SEGMENT = 1
#: u64 cells of a journal header: the undo log is the replica's private one; then
#: the active half (0 or 1) and each half's count
_J_ACTIVE = 0
_J_COUNT = (1, 2)
_J_HEAD = 4


def control_size(slots: int) -> int:
    """Bytes of a run's control segment: the flags, each slot's fields, each slot's log."""
    return (slot_base(slots) + slots * LOG_CELLS) * 8


def private_log(cells: Cells, slots: int, slot: int) -> UndoLog:
    """The undo log of one replica's private steps (its counters, its journal)."""
    return UndoLog(cells, cells.views[CONTROL_SEGMENT], slot_base(slots) + slot * LOG_CELLS)


@dataclass(frozen=True, slots=True)
class LocalPlan:
    """What the coordinator hands one replica's process (see the module docstring).

    ``inputs``: one ring per parent (the replica's own partition's, or the shared
    one); ``outputs``: per output edge, its rings (one per partition);
    ``child_slots``: per output edge, the control slots of the child's replicas
    (their cost per item sizes the chunks); ``progress``: per output edge, its
    outlets (the cells a record of this node's inputs reserves).
    """

    node: NodeConfig
    control: str
    slots: int  # control slots in the run
    slot: int
    node_blob: bytes
    preload: tuple[str, ...]
    parent_tokens: tuple[str, ...]
    inputs: tuple[RingHandle, ...]
    outputs: tuple[tuple[RingHandle, ...], ...]
    child_slots: tuple[tuple[int, ...], ...]
    doorbell: Any
    journal: str | None
    dead_letter_path: str
    dead_letter_offset: int  # the file's size when the run began
    coordinator_pid: int


class _PipeHandler(logging.Handler):
    def __init__(self, send: Callable[[tuple[Any, ...]], None], prefix: str) -> None:
        super().__init__()
        self._send = send
        self._prefix = prefix
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self._send(("log", record.levelno, f"{self._prefix} {self.format(record)}"))


class ShmControl:
    """The run's flags and this replica's fields, in the coordinator's control segment."""

    def __init__(self, ctl: Any, base: int) -> None:
        self.ctl = ctl
        self.base = base

    def stop_requested(self) -> bool:
        return bool(self.ctl[CTL.STOP_PRODUCERS])

    def aborting(self) -> bool:
        return bool(self.ctl[CTL.ABORT])

    def active(self) -> bool:
        return bool(self.ctl[self.base + SLOT.ACTIVE])


class LocalBatch:
    """A claimed ring record, as the worker sees a batch."""

    __slots__ = (
        "claim",
        "count",
        "origin",
        "outstanding",
        "redelivered",
        "ring",
        "settled",
        "tally",
    )

    def __init__(self, ring: Ring, claim: Claim, origin: InputOrigin) -> None:
        self.ring = ring
        self.claim = claim
        self.count = claim.count
        self.redelivered = claim.redelivered
        self.outstanding = claim.count
        self.settled = False
        self.origin = origin
        self.tally: Tally | None = None

    def envelopes(self) -> Columns:
        ring = self.ring
        return decode(ring.view(self.claim), self.claim.nbufs, ring.lengths_at())


#: the tally fields a settlement adds to the replica's control fields
_TALLY_FIELDS = (
    ("received", SLOT.RECEIVED),
    ("outputs", SLOT.OUTPUTS),
    ("filtered", SLOT.FILTERED),
    ("grouped", SLOT.GROUPED),
    ("groups", SLOT.GROUPS),
    ("duplicates", SLOT.DUPLICATES),
    ("produced", SLOT.PRODUCED),
    ("join_dropped", SLOT.HALVES_DROPPED),
)


def tally_stores(
    ctl: Any, base: int, tally: Tally | None, processed: int
) -> list[tuple[int, int, int]]:
    """The control cells a tally changes, as ``(segment, cell, new value)``."""
    if tally is None:
        return []
    out: list[tuple[int, int, int]] = []
    for name, f in _TALLY_FIELDS:
        value = getattr(tally, name)
        if value:
            out.append((CONTROL_SEGMENT, base + f, int(ctl[base + f]) + value))
    if processed:
        out.append(
            (CONTROL_SEGMENT, base + SLOT.PROCESSED, int(ctl[base + SLOT.PROCESSED]) + processed)
        )
    return out


class RingInput:
    """One parent's ring, read by this replica."""

    def __init__(self, transport: LocalTransport, ring: Ring, parent: str, token: str) -> None:
        self.t = transport
        self.ring = ring
        self.parent = parent
        self.token = token
        self.reader = transport.cfg.replica
        self.edges = len(transport.cfg.edges)
        self.kind = "join" if len(transport.cfg.parents) > 1 else "single"

    def claim(self) -> LocalBatch | Literal[False] | None:
        claim = self.ring.claim(self.reader)
        if claim is None or claim is False:
            return claim
        return LocalBatch(self.ring, claim, InputOrigin(self.token, claim.start))

    def chunking(self, batch: Any, proposed: Sequence[int]) -> tuple[int, ...]:
        """The chunk size per output edge: what the first claimant stored, else ``proposed``
        (stored now, before any output: the claimant owns its record's cells)."""
        if not self.ring.progress:
            return tuple(proposed)
        words, cell = self.ring.words, batch.claim.cell
        out = []
        for e, limit in enumerate(proposed):
            stored = int(words[cell + e])
            if not stored:
                words[cell + e] = stored = max(1, int(limit))
            out.append(stored)
        return tuple(out)

    def already_done(self, batch: Any) -> bool:
        return False  # a record is settled once, in the same step as its tally

    def settle(self, batches: Sequence[Any], tally: Tally | None) -> None:
        t = self.t
        processed = 0
        if tally is not None and self.kind == "single":
            processed = tally.received
        also = tally_stores(t.ctl, t.base, tally, processed)
        self.ring.settle([b.claim for b in batches], also)

    def wait(self, timeout_s: float) -> None:
        self.t.wait(timeout_s)

    def wake(self) -> None:
        self.ring.doorbell.release()


class RingOutlet:
    """One buffer (ring) of one output edge."""

    def __init__(
        self, transport: LocalTransport, ring: Ring, progress_cell: int, outlet_id: int
    ) -> None:
        self.t = transport
        self.ring = ring
        self.progress_cell = progress_cell  # offset of this outlet's cell in a record's cells
        self.outlet_id = outlet_id
        self.origin: Any = None  # the batch whose records are being counted
        self.written = 0  # records written (or skipped) for that batch

    def write(self, envelopes: Sequence[Envelope], key: OutputKey) -> int:
        t = self.t
        if t.realtime:
            self._write(envelopes, ())
            return len(envelopes)
        if key.groups:
            return self._write_groups(envelopes, key.groups)
        if key.positions:
            mark = self.ring.mark
            if mark and key.positions[0] < mark:  # a restarted producer: what the ring holds
                keep = [e for e, p in zip(envelopes, key.positions, strict=True) if p >= mark]
                if not keep:
                    return 0
                envelopes = keep
            self._write(envelopes, (), mark=key.positions[-1] + 1)
            return len(envelopes)
        batch = key.batch
        if batch is not self.origin:
            self.origin = batch
            self.written = 0
        words = batch.ring.words
        cell = batch.claim.cell + self.progress_cell
        return self._write_counted(envelopes, words, batch.ring.number, cell)

    def _write_counted(self, envs: Sequence[Envelope], words: Any, number: int, cell: int) -> int:
        """Write ``envs`` as one or more records, each counted in the input record's
        progress cell in the same step; skip the records that cell says are written."""
        body, buffers = encode(envs)
        ring = self.ring
        if (
            len(envs) > 1
            and record_size(len(body), [b.nbytes for b in buffers], ring.progress) > ring.capacity
        ):
            half = len(envs) // 2  # more than a buffer holds: in two halves, in order
            return self._write_counted(envs[:half], words, number, cell) + self._write_counted(
                envs[half:], words, number, cell
            )
        index = self.written
        self.written += 1
        if index < int(words[cell]):
            return 0  # the first claimant wrote this record before it died
        self._encoded(body, buffers, len(envs), ((number, cell, index + 1),))
        return len(envs)

    def _write_groups(self, envs: Sequence[Envelope], groups: Sequence[Origin]) -> int:
        journal = self.t.journal
        assert journal is not None
        keep = [
            (e, g)
            for e, g in zip(envs, groups, strict=True)
            if journal.digest(g, self.outlet_id) not in journal.seen
        ]
        if not keep:
            return 0
        digests = [journal.digest(g, self.outlet_id) for _, g in keep]
        self._write([e for e, _ in keep], journal.appends(digests))
        journal.seen.update(digests)
        return len(keep)

    def _write(
        self, envs: Sequence[Envelope], also: Sequence[tuple[int, int, int]], mark: int = 0
    ) -> None:
        body, buffers = encode(envs)
        ring = self.ring
        if (
            len(envs) > 1
            and record_size(len(body), [b.nbytes for b in buffers], ring.progress) > ring.capacity
        ):
            half = len(envs) // 2
            if mark:
                self._write(envs[:half], also, 0)
                self._write(envs[half:], (), mark)
            else:
                self._write(envs[:half], also)
                self._write(envs[half:], ())
            return
        self._encoded(body, buffers, len(envs), also, mark)

    def _encoded(
        self,
        body: bytes,
        buffers: list[memoryview],
        n: int,
        also: Sequence[tuple[int, int, int]],
        mark: int = 0,
    ) -> None:
        t = self.t
        try:
            self.ring.write(
                body, buffers, n, evict=t.realtime, should_stop=t.aborting, also=also, mark=mark
            )
        except StopWaiting:
            from vfadapters.runtime.worker import Aborted

            raise Aborted from None


class Journal:
    """A join replica's record of its groups, kept in shared memory across its restarts.

    Two halves alternate: entries are appended to the active one; when it is
    full, the entries still needed (groups with a member batch not yet settled,
    and what a previous life left) are copied to the other, which then becomes
    active in one logged store. Entries are 64-bit digests of ``(group,
    buffer)`` for a write and ``(group, done)`` once its tally is kept.
    """

    DONE = -1

    def __init__(self, transport: LocalTransport, segment: Segment) -> None:
        self.t = transport
        self.segment = segment
        self.words = segment.buf[: segment.size - segment.size % 8].cast("Q")
        transport.cells.add(JOURNAL_SEGMENT, self.words)
        self.half = (len(self.words) - _J_HEAD) // 2
        active = int(self.words[_J_ACTIVE])
        start = _J_HEAD + active * self.half
        count = int(self.words[_J_COUNT[active]])
        self.seen: set[int] = set(int(x) for x in self.words[start : start + count])
        self.inherited = set(self.seen)  # what a previous life of this replica wrote
        self.live: dict[int, list[Any]] = {}  # digest -> member batches

    @staticmethod
    def digest(group: Origin, outlet: int) -> int:
        text = f"{group.text}|{outlet}".encode()
        return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") or 1

    def appends(self, digests: Sequence[int]) -> list[tuple[int, int, int]]:
        """Append ``digests`` past the active half's count, and return the one cell that
        makes them count (the caller sets it in its atomic step: undone, they are not)."""
        active = int(self.words[_J_ACTIVE])
        count = int(self.words[_J_COUNT[active]])
        if count + len(digests) > self.half:
            self.compact()
            active = int(self.words[_J_ACTIVE])
            count = int(self.words[_J_COUNT[active]])
            if count + len(digests) > self.half:
                raise RuntimeError(
                    f"the join's journal is full ({self.half:,} entries of groups whose halves "
                    "are not all settled): raise --buffer-messages"
                )
        start = _J_HEAD + active * self.half + count
        words = self.words
        for i, d in enumerate(digests):
            words[start + i] = d
        return [(JOURNAL_SEGMENT, _J_COUNT[active], count + len(digests))]

    def register(self, group: Origin, members: Sequence[Any], outlets: int) -> None:
        """The batches whose halves formed ``group``: its entries are needed until all settle."""
        batches = list(members)
        self.live[self.digest(group, self.DONE)] = batches
        for outlet in range(outlets):
            self.live[self.digest(group, outlet)] = batches

    def compact(self) -> None:
        """Copy the entries still needed to the other half and make it active."""
        keep = [d for d in self.seen if d in self.inherited or self._unsettled(d)]
        kept = set(keep)
        for d in [d for d in self.live if d not in kept]:
            del self.live[d]
        active = int(self.words[_J_ACTIVE])
        other = 1 - active
        start = _J_HEAD + other * self.half
        for i, d in enumerate(keep[: self.half]):
            self.words[start + i] = d
        self.words[_J_COUNT[other]] = min(len(keep), self.half)
        log = self.t.log
        log.store(JOURNAL_SEGMENT, _J_ACTIVE, other)
        log.done()
        self.seen = set(keep)

    def _unsettled(self, digest: int) -> bool:
        batches = self.live.get(digest)
        return batches is None or any(not b.settled for b in batches)


#: Bytes read at a time from a dead-letter file, and the longest line kept whole
#: (a longer one is no letter of ours: skipped, never held in memory).
_LETTER_CHUNK = 1 << 20
_LETTER_LINE_MAX = 64 << 20


def read_letter_lines(path: str, offset: int) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """Each complete line of ``path`` from byte ``offset``: the offset just past it
    and its JSON object (None when it holds none); in bounded memory whatever the
    file holds.

    A run's letters are appended after the size the file had when the run began,
    so the run reads from there: a file that grew over many runs (or a large
    file that was never ours) costs nothing. A torn last line (no newline yet)
    is left for the next read; a line longer than 64 MiB is skipped unread.
    """
    try:
        f = open(path, "rb")  # noqa: SIM115 (a generator: closed by the with below)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return
    with f:
        f.seek(offset)
        base = offset  # the file offset of data[0]
        pending = b""
        skipping = False  # inside a line too long to keep
        while chunk := f.read(_LETTER_CHUNK):
            data = pending + chunk
            start = 0
            while (nl := data.find(b"\n", start)) >= 0:
                line, start = data[start:nl], nl + 1
                entry: dict[str, Any] | None = None
                if not skipping:
                    with contextlib.suppress(ValueError):
                        decoded = json.loads(line)
                        entry = decoded if isinstance(decoded, dict) else None
                skipping = False
                yield base + start, entry
            base += start
            pending = data[start:]
            if len(pending) > _LETTER_LINE_MAX:
                base += len(pending)
                pending, skipping = b"", True


class FileLetters:
    """Dead letters appended to one file as JSON lines; an id this run wrote is not written again.

    ``offset``: the file's size when the run began (nothing before it is this
    run's).
    """

    def __init__(self, path: str, run: str, offset: int = 0) -> None:
        self.path = path
        self.run = run
        self.fd: int | None = None
        self.ids: set[str] = set()
        self.scanned = offset

    def _scan(self) -> None:
        """Read the ids of this run's letters appended since the last scan."""
        for end, entry in read_letter_lines(self.path, self.scanned):
            if entry is not None and entry.get("run") == self.run and entry.get("id"):
                self.ids.add(str(entry["id"]))
            self.scanned = end

    def put(self, letter: DeadLetter, envelope: Envelope | None) -> None:
        if letter.id in self.ids:
            return
        self._scan()
        if letter.id in self.ids:
            return
        line = (letter.to_json() + "\n").encode()
        try:
            if self.fd is None:
                self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            size = os.fstat(self.fd).st_size
            if size and os.pread(self.fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a torn last line (a full disk before): start a new one
            written = os.write(self.fd, line)  # one write on O_APPEND: lines never interleave
        except OSError as exc:
            raise LetterNotWritten(
                f"could not write the dead letter of trace {letter.trace_id!r} to "
                f"{self.path}: {exc.strerror or exc}; the item stays unsettled (nothing is lost)"
            ) from None
        if written != len(line):
            raise LetterNotWritten(
                f"could not write the dead letter of trace {letter.trace_id!r} to {self.path}: "
                f"{written} of {len(line)} bytes written (is the disk full?)"
            )
        self.ids.add(letter.id)


class LocalTransport:
    """The ports of one replica of a local run (see the module docstring)."""

    latency_clock = staticmethod(time.monotonic_ns)  # one host: its monotonic clock

    def __init__(self, plan: LocalPlan, conn: Any) -> None:
        self.plan = plan
        self.cfg = plan.node
        self.conn = conn
        self.realtime = self.cfg.flow_type == "realtime"
        self.ppid = os.getppid()
        self.cells = Cells()
        self.journal: Journal | None = None
        self.letters = FileLetters(plan.dead_letter_path, self.cfg.run_id, plan.dead_letter_offset)
        self.holder = plan.slot + 1
        self.outlet_count = sum(len(rings) for rings in plan.outputs)

    # -- the WorkerTransport protocol --------------------------------------------------

    def attach(self, cfg: NodeConfig) -> None:
        plan = self.plan
        self.segment = Segment.attach(plan.control)
        self.ctl = self.segment.buf[: self.segment.size - self.segment.size % 8].cast("Q")
        self.cells.add(CONTROL_SEGMENT, self.ctl)
        self.base = slot_base(plan.slot)
        self.control = ShmControl(self.ctl, self.base)
        self.log = private_log(self.cells, plan.slots, plan.slot)
        if plan.journal is not None:
            self.journal = Journal(self, Segment.attach(plan.journal))

    def aborting(self) -> bool:
        return bool(self.ctl[CTL.ABORT])

    def log_handler(self, prefix: str) -> logging.Handler:
        return _PipeHandler(self.send, prefix)

    def build_node(self) -> Any:
        if self.plan.preload:
            from pathlib import Path

            from vfadapters.loading import import_file

            for path in self.plan.preload:
                import_file(Path(path))
        return pickle.loads(self.plan.node_blob)

    def inputs(self) -> list[RingInput]:
        plan = self.plan
        out = []
        for parent, token, handle in zip(
            self.cfg.parents, plan.parent_tokens, plan.inputs, strict=True
        ):
            ring = Ring.attach(handle, self.cells, self.holder)
            out.append(RingInput(self, ring, parent, token))
        return out

    def outlets(self, edge: int) -> list[RingOutlet]:
        plan = self.plan
        edges = len(self.cfg.edges)
        before = sum(len(plan.outputs[e]) for e in range(edge))
        return [
            RingOutlet(
                self, Ring.attach(h, self.cells, self.holder), edges + before + i, before + i
            )
            for i, h in enumerate(plan.outputs[edge])
        ]

    def send(self, event: tuple[Any, ...]) -> None:
        try:
            self.conn.send(event)
        except (BrokenPipeError, OSError):
            os._exit(3)  # the coordinator is gone

    def child_cost(self, edge: int) -> int:
        slots = self.plan.child_slots[edge]
        return int(self.ctl[slot_base(slots[0]) + SLOT.COST_NS]) if slots else 0

    def wait(self, timeout_s: float) -> None:
        from vfadapters.runtime.worker import Aborted

        if self.ctl[CTL.ABORT]:
            raise Aborted
        self.plan.doorbell.acquire(True, timeout_s)
        self.check_orphaned()

    def check_orphaned(self) -> None:
        if os.getppid() != self.ppid:
            os._exit(3)
        try:
            os.kill(self.plan.coordinator_pid, 0)
        except ProcessLookupError:
            os._exit(3)
        except OSError:
            pass

    def producer_resume(self) -> ResumePlan | None:
        position = int(self.ctl[self.base + SLOT.POSITION])
        return ResumePlan(position) if position else None

    def begin_segment(self, segment: ProducerSegment) -> None:
        return None  # each ring's mark says what it holds

    def seal_segment(self, segment: ProducerSegment) -> None:
        return None

    def end_segment(self, segment: ProducerSegment, tally: Tally) -> None:
        """Every item of the segment is in every ring: move the position and count, atomically."""
        ctl, base, log = self.ctl, self.base, self.log
        for _, cell, value in tally_stores(ctl, base, tally, tally.produced):
            log.store(CONTROL_SEGMENT, cell, value)
        log.store(CONTROL_SEGMENT, base + SLOT.POSITION, segment.start + tally.produced)
        log.done()

    def groups_done(
        self, groups: Sequence[tuple[GroupOrigin | None, Tally, tuple[Any, ...]]]
    ) -> None:
        """Count the groups just handled, once each: a group re-formed after a restart
        whose tally a previous life kept (its ``done`` entry is in the journal) is skipped."""
        journal = self.journal
        total = Tally()
        digests = []
        for origin, tally, members in groups:
            if origin is None:  # a REALTIME half dropped: counted, nothing to journal
                total.join_dropped += tally.join_dropped
                continue
            if journal is not None:
                d = journal.digest(origin, Journal.DONE)
                journal.register(origin, members, self.outlet_count)
                if d in journal.seen:
                    continue  # its tally was kept in a previous life
                digests.append(d)
            for name in ("outputs", "filtered", "grouped", "groups"):
                setattr(total, name, getattr(total, name) + getattr(tally, name))
        log = self.log
        if journal is not None and digests:
            for segment, cell, value in journal.appends(digests):
                log.store(segment, cell, value)
        for _, cell, value in tally_stores(self.ctl, self.base, total, total.groups):
            log.store(CONTROL_SEGMENT, cell, value)
        log.done()
        if journal is not None:
            journal.seen.update(digests)

    def was_emitted(self, group: GroupOrigin) -> bool:
        journal = self.journal
        return journal is not None and journal.digest(group, Journal.DONE) in journal.seen

    def finished(self) -> None:
        return None  # every write is in its ring already

    def close(self) -> None:
        return None


def _not_for_workers(signum: int, frame: Any) -> None:
    """SIGINT/SIGTERM in a worker: nothing to do, the coordinator decides how to stop."""


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


def worker_main(plan: LocalPlan, conn: Any) -> None:
    """The target of every local worker process."""
    signal.signal(signal.SIGINT, _not_for_workers)
    signal.signal(signal.SIGTERM, _not_for_workers)
    set_parent_death_signal()
    set_process_name(plan.node.pod)
    _release_forkserver_pipe()
    with contextlib.suppress(OSError):
        os.dup2(2, 1)  # stdout belongs to the coordinator (`vf run --json`)
    os.environ.update(plan.node.env)
    code = 1
    try:
        code = Worker(plan.node, LocalTransport(plan, conn)).main()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(code)
