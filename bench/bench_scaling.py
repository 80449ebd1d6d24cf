"""100,000 replica decisions of 4 parents each (target: <= 1 s), against a bare loop.

Setup: 100,000 observation maps of 4 parents (``Backlog`` values drawn from a
seeded generator: lags 0-500, some exact multiples of the target, 2 % of the
maps with one parent ``Unobserved``) are built before timing. Each run calls
``decide_replicas(obs, target=10, min_replicas=1, max_replicas=10)`` on every
map: validation of the rule, canonical (sorted) parents, per-parent
``ceil(lag / target)``, the max, the clamp, the unknown and starved checks, and
a frozen ``ReplicaDecision``.

Baseline, in the same process: the bare rule — a loop over the same maps that
takes ``max(ceil((pending + ack_pending) / 10))`` and clamps it, with no
validation, no sorting, no unknowns and no result object; the floor for any
Python implementation. A second figure (for information, no target) times
``predict_hpa`` on the same maps.

    python bench/bench_scaling.py
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time

from vfcore.scaling import (
    Backlog,
    HpaState,
    KedaScaler,
    Trigger,
    Unobserved,
    decide_replicas,
    fallback_for_unknown,
    predict_hpa,
)

DECISIONS = 100_000
PARENTS = ("cams", "lidar", "radar", "gps")
TARGET_S = 1.0
RUNS = 7


def observations(n: int, seed: int = 7) -> list[dict[str, Backlog | Unobserved]]:
    rng = random.Random(seed)
    out: list[dict[str, Backlog | Unobserved]] = []
    for _ in range(n):
        obs: dict[str, Backlog | Unobserved] = {}
        for parent in PARENTS:
            if rng.random() < 0.1:
                obs[parent] = Backlog(10 * rng.randrange(0, 20), 0)  # equality edges
            else:
                obs[parent] = Backlog(rng.randrange(0, 500), rng.randrange(0, 20))
        if rng.random() < 0.02:
            obs[rng.choice(PARENTS)] = Unobserved("nats monitoring timed out")
        out.append(obs)
    return out


def run_decisions(maps: list[dict[str, Backlog | Unobserved]]) -> tuple[float, int]:
    gc.disable()
    start = time.perf_counter()
    total = 0
    for obs in maps:
        d = decide_replicas(obs, target=10, min_replicas=1, max_replicas=10)
        total += d.floor
    elapsed = time.perf_counter() - start
    gc.enable()
    return elapsed, total


def run_baseline(maps: list[dict[str, Backlog | Unobserved]]) -> tuple[float, int]:
    gc.disable()
    start = time.perf_counter()
    total = 0
    for obs in maps:
        most = 0
        for b in obs.values():
            if type(b) is Backlog:
                wants = -(-(b.pending + b.ack_pending) // 10)
                if wants > most:
                    most = wants
        total += min(max(most, 1), 10)
    elapsed = time.perf_counter() - start
    gc.enable()
    return elapsed, total


def run_hpa(maps: list[dict[str, Backlog | Unobserved]], n: int) -> float:
    scaler = KedaScaler(
        tuple(Trigger(p, 10) for p in PARENTS),
        min_replica_count=1,
        max_replica_count=10,
        fallback=fallback_for_unknown(),
    )
    state = HpaState(3)
    start = time.perf_counter()
    for obs in maps[:n]:
        predict_hpa(obs, scaler=scaler, state=state, now_s=0.0)
    return time.perf_counter() - start


def main() -> int:
    maps = observations(DECISIONS)
    decide_times, base_times = [], []
    for _ in range(RUNS):
        t, total = run_decisions(maps)
        b, base_total = run_baseline(maps)
        assert total == base_total, (total, base_total)  # the same numbers, floor for floor
        decide_times.append(t)
        base_times.append(b)
    t = statistics.median(decide_times)
    b = statistics.median(base_times)
    unknown = sum(1 for m in maps if any(type(v) is Unobserved for v in m.values()))
    print(
        f"decide_replicas: {DECISIONS:,} decisions of {len(PARENTS)} parents ({unknown:,} unknown)"
    )
    print(f"  median of {RUNS} runs: {t:.3f} s ({t / DECISIONS * 1e6:.2f} µs per decision)")
    print(f"  baseline (bare max-of-ceil loop, same maps): {b:.3f} s")
    print(f"  ratio: {t / b:.1f}x the bare loop")
    met = t <= TARGET_S
    print(f"  target <= {TARGET_S:.1f} s: {'MET' if met else 'NOT MET'}")
    n = 10_000
    h = run_hpa(maps, n)
    print(f"predict_hpa (information): {n:,} evaluations in {h:.3f} s ({h / n * 1e6:.1f} µs each)")
    print(f"python {sys.version.split()[0]}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
