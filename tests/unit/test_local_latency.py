"""The latency histogram of the local executor (vfadapters.runtime.latency)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vfadapters.runtime.latency import bucket_of, bucket_upper_ns, fold, merge, summarise


@settings(max_examples=200)
@given(st.lists(st.integers(-5, 2**52), max_size=50))
def test_fold_puts_every_latency_in_the_bucket_of_bucket_of(latencies: list[int]) -> None:
    folded: dict[int, int] = {}
    fold(latencies, folded)
    expected: dict[int, int] = {}
    for ns in latencies:
        expected[bucket_of(ns)] = expected.get(bucket_of(ns), 0) + 1
    assert folded == expected


@given(st.integers(0, 2**52))
def test_a_bucket_holds_its_latency_within_one_sixteenth(ns: int) -> None:
    b = bucket_of(ns)
    upper = bucket_upper_ns(b)
    assert ns <= upper
    assert b == 0 or bucket_upper_ns(b - 1) < ns
    assert upper - ns <= ns / 16


def test_quantiles_are_bucket_upper_bounds_capped_by_the_largest() -> None:
    ms = 1_000_000
    h: dict[int, int] = {}
    fold([1 * ms] * 50 + [2 * ms] * 49 + [100 * ms], h)
    lat = summarise(merge([h, {}]), 100 * ms)
    assert lat is not None and lat.messages == 100
    assert 1.0 <= lat.p50_ms <= 1.0625
    assert 2.0 <= lat.p99_ms <= 2.125
    assert lat.max_ms == 100.0
    assert summarise({}, 0) is None  # nothing measured: unknown, not zero
