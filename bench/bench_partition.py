"""partition_of throughput (target: >= 500,000 keys/s single-threaded, 16-byte str keys).

200,000 distinct 16-character ASCII keys (hex of a seeded random 64-bit value,
the shape of a trace id), owners among n = 16 replicas; median of 5 passes.

Baselines, in the same process:
- BLAKE2b-64 of the UTF-8 key alone (the hash partition_of is built on): the
  least a stable 64-bit hash of these keys costs in Python;
- the upstream scheme, first 32 bits of SHA-256 of ``str(key)`` mod n
  (stable, but ``7`` and ``'7'`` collide);
- Python's ``hash(key) % n`` (fast, but changes with PYTHONHASHSEED: unusable
  across processes; shown for scale only).
"""

from __future__ import annotations

import hashlib
import random
import statistics
import sys
import time
from collections.abc import Callable

from vfcore.routing.partition import partition_of

TARGET_KEYS_PER_S = 500_000


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    rng = random.Random(20240611)
    keys = [f"{rng.getrandbits(64):016x}" for _ in range(count)]
    assert len(set(keys)) == count and all(len(k.encode()) == 16 for k in keys)

    blake2b = hashlib.blake2b
    sha256 = hashlib.sha256
    from_bytes = int.from_bytes

    def run_modulo() -> None:
        for k in keys:
            partition_of(k, n)

    def run_jump() -> None:
        for k in keys:
            partition_of(k, n, "jump")

    def run_jump_1000() -> None:
        for k in keys:
            partition_of(k, 1000, "jump")

    def run_blake2b() -> None:
        for k in keys:
            blake2b(k.encode(), digest_size=8).digest()

    def run_upstream() -> None:
        for k in keys:
            from_bytes(sha256(str(k).encode()).digest()[:4], "big") % n

    def run_builtin_hash() -> None:
        for k in keys:
            hash(k) % n

    runs = {
        f"partition_of(key, {n})  [modulo]": run_modulo,
        f'partition_of(key, {n}, "jump")': run_jump,
        'partition_of(key, 1000, "jump")': run_jump_1000,
        "baseline: blake2b(key.encode(), digest_size=8).digest()": run_blake2b,
        f"baseline: upstream sha256(str(key))[:4] % {n}": run_upstream,
        f"baseline: hash(key) % {n}  (not stable across processes)": run_builtin_hash,
    }
    rates: dict[str, float] = {}
    for label, fn in runs.items():
        fn()  # warm up
        rates[label] = count / statistics.median(timed(fn, repeats))

    print(f"{count:,} distinct 16-byte str keys, n = {n}, median of {repeats} passes")
    width = max(len(label) for label in rates)
    for label, rate in rates.items():
        print(f"  {label:<{width}}  {rate:>12,.0f} keys/s  ({1e6 / rate:.2f} us/key)")
    modulo, jump, _, blake, upstream, builtin = rates.values()
    print(f"ratio modulo / bare blake2b: {modulo / blake:.2f}x")
    print(f"ratio jump / modulo (n = {n}): {jump / modulo:.2f}x")
    print(f"ratio modulo / upstream sha256 scheme: {modulo / upstream:.2f}x")
    print(f"ratio modulo / hash() % n: {modulo / builtin:.2f}x")
    for label, rate in (("modulo", modulo), ("jump", jump)):
        verdict = "meets" if rate >= TARGET_KEYS_PER_S else "MISSES"
        print(f"target >= {TARGET_KEYS_PER_S:,} keys/s ({label}, n = {n}): {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
