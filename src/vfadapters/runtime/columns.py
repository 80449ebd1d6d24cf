"""A batch of envelopes kept as columns: what the node runtime's hot loops move.

An envelope is ``(trace_id, event_ts_ms, metadata or None, payload, emitted_ns)``
(:mod:`vfadapters.runtime.ports`). Building one tuple per item, and pickling
each tuple and each of its fields apart, cost more than the node calls
themselves for small items (docs/performance.md). :class:`Columns` keeps a
batch as five columns instead, with the two common cases stored in O(1):

* trace ids that are ``prefix + str(first + i)`` (a producer's items, and
  every output of a one-parent node that keeps them in order) are the pair
  ``(prefix, first)``; any other ids are a list;
* ``event_ts_ms`` equal to ``emitted_ns / 1e6`` (a producer that sets no event
  time) is ``None``; metadata that is None everywhere is ``None``.

It is a :class:`~collections.abc.Sequence` of envelope tuples (each built on
access), so code that handles one envelope at a time (dead letters, joins,
a restarted producer's filter) reads it as a list; the codec
(:mod:`vfadapters.runtime.codec`) and the one-parent and producer loops
(:mod:`vfadapters.runtime.worker`) read the columns.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

__all__ = ["Columns"]


class Columns(Sequence[tuple[Any, ...]]):
    """Envelopes as columns (see the module docstring)."""

    __slots__ = ("emitted", "first", "ids", "metas", "payloads", "prefix", "ts")

    def __init__(
        self,
        payloads: list[Any],
        emitted: Sequence[int],  # a list, or an int64 array (a producer's, a decoded batch's)
        *,
        ids: list[Any] | None = None,
        prefix: str = "",
        first: int = 0,
        ts: list[Any] | None = None,
        metas: list[Any] | None = None,
    ) -> None:
        self.payloads = payloads
        self.emitted = emitted
        self.ids = ids  # None: prefix + str(first + i)
        self.prefix = prefix
        self.first = first
        self.ts = ts  # None: emitted[i] / 1e6
        self.metas = metas  # None: no metadata anywhere

    @classmethod
    def of(cls, envelopes: Sequence[tuple[Any, ...]]) -> Columns:
        """The columns of ``envelopes`` (a list of tuples, or columns already)."""
        if type(envelopes) is Columns:
            return envelopes
        metas: list[Any] | None = [e[2] for e in envelopes]
        assert metas is not None
        if metas.count(None) == len(metas):
            metas = None
        return cls(
            [e[3] for e in envelopes],
            [e[4] for e in envelopes],
            ids=[e[0] for e in envelopes],
            ts=[e[1] for e in envelopes],
            metas=metas,
        )

    # -- one item -------------------------------------------------------------------------

    def trace_id(self, i: int) -> Any:
        ids = self.ids
        return self.prefix + str(self.first + i) if ids is None else ids[i]

    def event_ts(self, i: int) -> Any:
        ts = self.ts
        return self.emitted[i] / 1e6 if ts is None else ts[i]

    def meta(self, i: int) -> Any:
        metas = self.metas
        return None if metas is None else metas[i]

    # -- columns ----------------------------------------------------------------------------

    def id_list(self) -> list[Any]:
        ids = self.ids
        if ids is not None:
            return ids
        prefix, first = self.prefix, self.first
        return [prefix + str(first + i) for i in range(len(self.payloads))]

    def ts_list(self) -> list[Any]:
        ts = self.ts
        return [e / 1e6 for e in self.emitted] if ts is None else ts

    def meta_list(self) -> list[Any]:
        metas = self.metas
        return [None] * len(self.payloads) if metas is None else metas

    def take(self, a: int, b: int, payloads: list[Any] | None = None) -> Columns:
        """Items ``a`` to ``b`` (their payloads replaced by ``payloads`` when given)."""
        ids, ts, metas = self.ids, self.ts, self.metas
        return Columns(
            self.payloads[a:b] if payloads is None else payloads,
            self.emitted[a:b],
            ids=None if ids is None else ids[a:b],
            prefix=self.prefix,
            first=self.first + a,
            ts=None if ts is None else ts[a:b],
            metas=None if metas is None else metas[a:b],
        )

    def pick(self, positions: Sequence[int], payloads: list[Any]) -> Columns:
        """The items at ``positions`` (increasing), their payloads ``payloads``."""
        n = len(positions)
        if n and positions[-1] - positions[0] == n - 1:  # consecutive
            return self.take(positions[0], positions[-1] + 1, payloads)
        ids, ts, metas, emitted = self.ids, self.ts, self.metas, self.emitted
        return Columns(
            payloads,
            [emitted[p] for p in positions],
            ids=[self.trace_id(p) for p in positions]
            if ids is None
            else [ids[p] for p in positions],
            ts=None if ts is None else [ts[p] for p in positions],
            metas=None if metas is None else [metas[p] for p in positions],
        )

    # -- a sequence of envelope tuples -------------------------------------------------------

    def __len__(self) -> int:
        return len(self.payloads)

    @overload
    def __getitem__(self, i: int) -> tuple[Any, ...]: ...

    @overload
    def __getitem__(self, i: slice) -> Columns: ...

    def __getitem__(self, i: int | slice) -> tuple[Any, ...] | Columns:
        if isinstance(i, slice):
            a, b, step = i.indices(len(self.payloads))
            if step != 1:
                return Columns.of(list(self)[i])
            return self.take(a, max(a, b))
        n = len(self.payloads)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("Columns index out of range")
        return (self.trace_id(i), self.event_ts(i), self.meta(i), self.payloads[i], self.emitted[i])

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return zip(
            self.id_list(),
            self.ts_list(),
            self.meta_list(),
            self.payloads,
            self.emitted,
            strict=True,
        )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Columns({list(self)!r})"
