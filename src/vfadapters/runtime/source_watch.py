"""A producer never holds what its source gave while the source makes it wait.

A producer writes its items in segments (:meth:`ProducerLoops.run_producer
<vfadapters.runtime.producer_loop.ProducerLoops.run_producer>`), and a segment is written
when it is full, old, or when the source made the producer wait longer than
``linger_s`` — but the producer's own thread learns that the source made it
wait only when ``next()`` returns. A source that gives a burst and then blocks
(a camera between scenes, a queue that runs dry) would leave the tail of the
burst unwritten for as long as it blocks.

:class:`SourceWatch` is a thread that writes the open segment on the
producer's behalf once ``next()`` has been running for longer than
``linger_s``. The two threads take turns with one token (``Worker.turn``, a
deque that holds it or not; taking it, ``pop``, is atomic): the producer's
thread puts it back before each ``next()`` and takes it as soon as ``next()``
returns, so the watch can take it only while ``next()`` runs, and everything a
segment touches (its items, the edges' buffers, the transport's ports) is used
only by the thread holding the token. (A lock taken and released around each
``next()`` cost three times as much per item.) The segment is closed exactly
as the producer closes one (its end stored before its last parts are
written), so a restarted producer cuts it again the same way
(docs/broker.md). Segments of the last life, which must be cut again whole,
are never closed early.
"""

from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ["WATCH_TICK_S", "SourceWatch"]

#: how often the watch looks at a source that may be blocking
WATCH_TICK_S = 0.005


class SourceWatch:
    """Closes a producer's open segment while its source blocks (module docstring)."""

    def __init__(self, worker: Any, tick_s: float = WATCH_TICK_S) -> None:
        self.worker = worker
        self.tick_s = tick_s
        self.stopped = threading.Event()
        self.error: BaseException | None = None
        self.cuts = 0  # segments this watch closed
        self.thread = threading.Thread(target=self._run, name="vf-source-watch", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def take_turn(self) -> None:
        """The producer's thread takes the token back (waiting while the watch writes)."""
        turn = self.worker.turn
        while True:
            try:
                turn.pop()
                return
            except IndexError:
                time.sleep(0.0002)

    def stop(self) -> None:
        """Stop watching (called by the producer's thread, which holds the token)."""
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join()

    def raise_error(self) -> None:
        """Raise, on the producer's thread, what closing a segment failed with."""
        error, self.error = self.error, None
        if error is not None:
            raise error

    def _run(self) -> None:
        w = self.worker
        turn = w.turn
        while not self.stopped.wait(self.tick_s):
            try:
                turn.pop()
            except IndexError:
                continue  # the producer's thread is working, not waiting on its source
            try:
                if self.stopped.is_set():
                    return
                seg = w.segment
                if seg is None or seg.end is not None:
                    continue  # nothing open, or a segment of the last life: cut whole
                if w.since_clock() - w.next_since <= w.since_limit:
                    continue
                w.cut_by_watch = True
                self.cuts += 1
                w.close_waiting_segment()
            except BaseException as exc:  # raised on the producer's thread (raise_error)
                self.error = exc
            finally:
                turn.append(True)
