"""End-to-end latency of a local run: from a producer's emit to a consumer's consume.

What is measured, per message a consumer handles: ``time.monotonic_ns()`` just
before the consumer's ``consume()`` is called, minus ``time.monotonic_ns()`` when
the producer's ``next()`` returned the item (its emit). Both are processes on one
host, and Linux's monotonic clock is system-wide, so the difference is the time
the message (or what the processors made of it) spent in buffers and in the
processors between the two; the consumer's own ``consume()`` time is not in
it. A processor's output carries the emit time of its input; a join's output
the earliest emit time of its group's members.

Each consumer replica notes each latency (one clock read, one subtraction,
one list append per message), folds them into a log-linear histogram every
few thousand messages (:func:`fold`: 16 buckets per power of two, so a bucket's
bounds are within 6.25% of each other) and sends it to the coordinator when
it ends; a replica killed before its end
reports nothing. Quantiles are the upper bound of the bucket that holds them,
never above the largest latency seen.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Latency", "bucket_of", "bucket_upper_ns", "fold", "merge", "summarise"]

_SUB = 4  # 2**_SUB buckets per power of two


def bucket_of(ns: int) -> int:
    """The histogram bucket of a latency in ns (negative counts as 0)."""
    if ns < 16:
        return max(ns, 0)
    bl = ns.bit_length()
    return ((bl - _SUB) << _SUB) | ((ns >> (bl - _SUB - 1)) & 15)


def bucket_upper_ns(bucket: int) -> int:
    """The largest latency (ns) bucket ``bucket`` holds.

    >>> all(bucket_of(ns) == b for b in (0, 15, 16, 40, 300) for ns in (bucket_upper_ns(b),))
    True
    >>> bucket_of(bucket_upper_ns(40) + 1)
    41
    """
    if bucket < 16:
        return bucket
    e, sub = bucket >> _SUB, bucket & 15
    return ((17 + sub) << (e - 1)) - 1


def fold(latencies_ns: Sequence[int], into: dict[int, int]) -> None:
    """Add latencies to a histogram ``{bucket: count}``: :func:`bucket_of` of each, vectorised."""
    if not latencies_ns:
        return
    ns = np.maximum(np.asarray(latencies_ns, dtype=np.int64), 0)
    bl = np.frexp(ns.astype(np.float64))[1].astype(np.int64)  # exact below 2**53 ns
    shift = np.maximum(bl - _SUB - 1, 0)
    buckets = np.where(ns < 16, ns, ((bl - _SUB) << _SUB) | ((ns >> shift) & 15))
    values, counts = np.unique(buckets, return_counts=True)
    for b, n in zip(values.tolist(), counts.tolist(), strict=True):
        into[b] = into.get(b, 0) + n


def merge(histograms: Iterable[Mapping[int, int]]) -> dict[int, int]:
    total: dict[int, int] = {}
    for h in histograms:
        for b, n in h.items():
            total[b] = total.get(b, 0) + n
    return total


@dataclass(frozen=True, slots=True)
class Latency:
    """End-to-end latencies (module docstring): how many, p50, p99, the largest, in ms."""

    messages: int
    p50_ms: float
    p99_ms: float
    max_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "p50_ms": round(self.p50_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
            "max_ms": round(self.max_ms, 3),
        }


def summarise(histogram: Mapping[int, int], max_ns: int) -> Latency | None:
    """p50/p99 of a histogram (None when it is empty: unknown, not zero)."""
    n = sum(histogram.values())
    if n <= 0:
        return None

    def quantile(q: float) -> float:
        rank = max(1, math.ceil(q * n))
        seen = 0
        for b in sorted(histogram):
            seen += histogram[b]
            if seen >= rank:
                return min(bucket_upper_ns(b), max_ns) / 1e6
        return max_ns / 1e6  # pragma: no cover - rank <= n

    return Latency(n, quantile(0.5), quantile(0.99), max_ns / 1e6)
