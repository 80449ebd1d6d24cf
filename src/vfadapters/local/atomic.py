"""Atomic steps in shared memory that a kill -9 cannot cut in half.

A worker of the shared-memory transport changes several u64 cells in one step
— a ring's positions and counters, the progress cells of the input record it
works on, its own counters, a join's journal — and the kernel may kill it
between any two of those stores. Every such step goes through an
:class:`UndoLog`: before each store, the cell and its old value are appended
to the log (in shared memory), and the log is emptied when the step is done.
When a worker dies, the coordinator (which holds every segment,
:class:`Cells`) undoes the log of every step the dead worker had begun —
those of the rings whose lock it held, and its private log — so each step
either happened whole or not at all, and what it was doing is done again by
whoever takes its unsettled input.

Log layout (u64): ``[count, (segment, cell, old) × count]``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LOG_CELLS", "Cells", "UndoLog"]

#: The most stores one step may log.
LOG_ENTRIES = 340
#: u64 cells a log takes: the count, then three per entry.
LOG_CELLS = 1 + 3 * LOG_ENTRIES


class Cells:
    """Every shared segment a process sees, as u64 views, by segment number."""

    def __init__(self) -> None:
        self.views: dict[int, Any] = {}

    def add(self, number: int, view: Any) -> None:
        self.views[number] = view


class UndoLog:
    """The undo log of one lock (a ring's) or one process's private steps (see the module)."""

    __slots__ = ("area", "base", "cells")

    def __init__(self, cells: Cells, area: Any, base: int) -> None:
        self.cells = cells
        self.area = area  # a u64 view holding the log at ``base``
        self.base = base

    def store(self, segment: int, cell: int, value: int) -> None:
        """``cells[segment][cell] = value``, undoable until :meth:`done`."""
        area, base = self.area, self.base
        view = self.cells.views[segment]
        n = area[base]
        if n >= LOG_ENTRIES:
            raise RuntimeError(f"one atomic step logged more than {LOG_ENTRIES} stores")
        at = base + 1 + 3 * n
        area[at] = segment
        area[at + 1] = cell
        area[at + 2] = view[cell]
        area[base] = n + 1
        view[cell] = value

    def add(self, segment: int, cell: int, delta: int) -> None:
        view = self.cells.views[segment]
        self.store(segment, cell, view[cell] + delta)

    def done(self) -> None:
        """The step is complete: forget how to undo it."""
        self.area[self.base] = 0

    @property
    def open(self) -> bool:
        return bool(self.area[self.base])

    def undo(self) -> int:
        """Undo a step a dead process left half done; how many stores were undone."""
        area, base = self.area, self.base
        n = int(area[base])
        views = self.cells.views
        for i in reversed(range(n)):
            at = base + 1 + 3 * i
            views[int(area[at])][int(area[at + 1])] = int(area[at + 2])
        area[base] = 0
        return n
