"""A producer's own cost per item: ``next()`` against ``next_batch()``.

    python bench/bench_producer_loop.py [ITEMS] [ROUNDS]

One ``Worker`` producer (the node runtime both transports run) over the worker-loop
oracle's in-memory transport (tests/property/test_worker_loops.py): 100-byte
distinct items, one child, the broker's record sizes (8,192 items, 1 MiB). What is
timed is the producer process's CPU for the whole stream — the source's calls, the
loop's bookkeeping, the columns handed to the outlet — not a transport. The two
sources alternate, round by round, and each figure is the median.

The baseline in the same process: the same items made in a list comprehension, as
the hand-written pipeline of bench/bench_broker.py makes them (no runtime at all).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.property import test_worker_loops as oracle  # noqa: E402

from vfadapters.runtime import producer_loop  # noqa: E402


class _Counted:
    """The oracle's outlet, counting instead of keeping every item (its own cost low)."""

    def __init__(self) -> None:
        self.items = 0

    def write(self, envelopes: object, key: object) -> int:
        n = len(envelopes)  # type: ignore[arg-type]
        self.items += n
        return n

    def close(self) -> None:
        return None


def _per_item_ns(source: object, n: int) -> float:
    outlet = _Counted()
    cfg = oracle._config("producer", 1, 8192, 1 << 20, False)
    t = oracle._Transport(source, None, [0])  # type: ignore[arg-type]
    t.outlets = lambda edge: [outlet]  # type: ignore[method-assign]
    worker = oracle.Worker(cfg, t)  # type: ignore[arg-type]
    c0 = time.process_time()
    assert worker.main() == 0, t.events
    spent = time.process_time() - c0
    assert outlet.items == n, (outlet.items, n)
    return spent / n * 1e9


def _comprehension_ns(n: int) -> float:
    c0 = time.process_time()
    for first in range(0, n, 100):
        items = [b"%0100d" % (k + 1) for k in range(first, min(n, first + 100))]
        del items
    return (time.process_time() - c0) / n * 1e9


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 300_000
    rounds = int(argv[1]) if len(argv) > 1 else 5
    producer_loop._SEGMENT_AGE_S = 1e9  # segments end by size, as at full speed
    figures: dict[str, list[float]] = {"next()": [], "next_batch(), 100 a call": [], "base": []}
    for r in range(rounds):
        runs = [
            ("next()", lambda: _per_item_ns(oracle._Hundreds([0] * n), n)),
            (
                "next_batch(), 100 a call",
                lambda: _per_item_ns(oracle._HundredsInBatches([0] * n, 100), n),
            ),
            ("base", lambda: _comprehension_ns(n)),
        ]
        for name, run in runs if r % 2 == 0 else runs[::-1]:
            figures[name].append(run())
    base = statistics.median(figures.pop("base"))
    print(f"{n:,} items of 100 bytes, one child, median of {rounds} rounds (CPU ns an item)")
    print(f"  the same items in a list comprehension (baseline): {base:7.0f} ns")
    for name, values in figures.items():
        ns = statistics.median(values)
        print(
            f"  a producer whose source gives them by {name:26s} {ns:7.0f} ns  ({ns / base:.1f}×)"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
