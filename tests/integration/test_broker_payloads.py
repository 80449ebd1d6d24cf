"""Large payloads (vfadapters.broker.payloads) against a real nats-server.

Records above the server's max_payload are stored as chunks in a JetStream
stream and replaced by a small reference: round trips are exact for any split
into parts (0-byte parts, sizes around the threshold and the chunk size, 8 MiB),
references are small and recognised, a re-put after a crash is harmless, a
delete after consumption leaves the bucket empty, file storage survives a server
restart and destroy removes the bucket.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import nats
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nats.js import api
from nats.js.errors import NotFoundError

from vfadapters.broker.payloads import (
    HEADER_HEADROOM,
    REF_MAGIC,
    LargePayloadError,
    LargePayloadMissingError,
    LargePayloads,
    _key_token,
    bucket_name_problem,
)
from vfadapters.broker.server import NatsServer

T = TypeVar("T")
MIB = 1 << 20


def _bucket() -> str:
    return f"VF_OBJ_test-{uuid.uuid4().hex[:12]}"


def with_store(server: NatsServer, body: Callable[[LargePayloads], Awaitable[T]], **kw: Any) -> T:
    """Run ``body`` with a fresh bucket on ``server``; the bucket is destroyed afterwards."""

    async def main() -> T:
        nc = await nats.connect(server.url, max_reconnect_attempts=0)
        try:
            store = LargePayloads(nc, nc.jetstream(), kw.pop("bucket", None) or _bucket(), **kw)
            await store.ensure()
            try:
                return await body(store)
            finally:
                await store.destroy()
        finally:
            await nc.close()

    return asyncio.run(main())


def _split(data: bytes, cuts: list[int]) -> list[Any]:
    """``data`` cut at ``cuts`` into bytes, bytearray and memoryview parts (0-byte ones kept)."""
    parts: list[Any] = []
    prev = 0
    for i, c in enumerate([*sorted(cuts), len(data)]):
        piece = data[prev:c]
        parts.append([bytes, bytearray, memoryview][i % 3](piece))
        prev = c
    return parts


async def _round_trip(store: LargePayloads, key: str, parts: list[Any]) -> bytes:
    ref = await store.put(key, parts)
    assert LargePayloads.is_reference(ref)
    assert len(ref) < 1024
    got = await store.get(ref)
    assert isinstance(got, bytearray)
    await store.delete(ref)
    return bytes(got)


# -- round trips ------------------------------------------------------------------------


def test_threshold_defaults_to_max_payload_minus_header_headroom(nats_server: NatsServer) -> None:
    async def body(store: LargePayloads) -> None:
        assert store.nc.max_payload == MIB  # the server default
        assert store.threshold == MIB - HEADER_HEADROOM
        assert store.chunk_size == MIB
        assert not store.is_large(store.threshold)  # equal to the threshold: not large
        assert store.is_large(store.threshold + 1)

    with_store(nats_server, body)


@pytest.mark.parametrize(
    "size",
    [
        pytest.param(MIB - HEADER_HEADROOM, id="at-threshold"),
        pytest.param(MIB - HEADER_HEADROOM + 1, id="threshold-plus-1"),
        pytest.param(MIB - 1, id="max-payload-minus-1"),
        pytest.param(MIB, id="exactly-max-payload-one-chunk"),
        pytest.param(MIB + 1, id="max-payload-plus-1-two-chunks"),
        pytest.param(2 * MIB, id="exactly-two-chunks"),
        pytest.param(8 * MIB + 3, id="8-MiB-plus-3"),
    ],
)
def test_multi_buffer_record_round_trips_exactly(nats_server: NatsServer, size: int) -> None:
    data = os.urandom(size)
    # a pickle-like body, an empty part, two out-of-band buffers, an empty part at the end
    parts = _split(data, [200, 200, size // 3, size])

    async def body(store: LargePayloads) -> None:
        assert await _round_trip(store, "trace-1.detector.0", parts) == data
        assert await store.usage() == (0, 0)

    with_store(nats_server, body)


def test_got_record_is_writable_and_independent(nats_server: NatsServer) -> None:
    data = os.urandom(MIB + 10)

    async def body(store: LargePayloads) -> None:
        ref = await store.put("k", [data])
        first = await store.get(ref)
        first[:4] = b"\0\0\0\0"  # a node modifies its array in place
        memoryview(first)[-1] = 7
        assert await store.get(ref) == data  # the stored copy is untouched

    with_store(nats_server, body)


def test_empty_record_and_all_empty_parts(nats_server: NatsServer) -> None:
    async def body(store: LargePayloads) -> None:
        for parts in ([], [b""], [b"", bytearray(), memoryview(b"")]):
            ref = await store.put("empty", parts)
            assert LargePayloads.is_reference(ref)
            assert await store.get(ref) == bytearray()
            await store.delete(ref)
        assert await store.usage() == (0, 0)

    with_store(nats_server, body)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    data=st.binary(max_size=300),
    cuts=st.lists(st.integers(0, 300), max_size=6),
    chunk=st.integers(1, 64),
)
def test_any_split_and_chunk_size_round_trips(
    nats_server: NatsServer, data: bytes, cuts: list[int], chunk: int
) -> None:
    # small chunks put every chunk boundary (inside a part, across parts, at a part's end) to work
    parts = _split(data, [min(c, len(data)) for c in cuts])

    async def body(store: LargePayloads) -> None:
        assert await _round_trip(store, "k", parts) == data
        assert await store.usage() == (0, 0)

    with_store(nats_server, body, chunk_size=chunk)


# -- references -------------------------------------------------------------------------


def test_references_are_small_and_recognised(nats_server: NatsServer) -> None:
    long_key = "trace-é/" * 100  # not a subject token, and long: stored under a digest

    async def body(store: LargePayloads) -> None:
        ref = await store.put(long_key, [os.urandom(MIB + 1)])
        assert ref.startswith(REF_MAGIC) and len(ref) < 200
        assert LargePayloads.is_reference(ref)
        assert LargePayloads.is_reference(bytearray(ref))
        assert LargePayloads.is_reference(memoryview(ref))
        not_refs = [
            b"",
            REF_MAGIC,
            bytes(16) + b"pickle body",  # a record: 16 bytes of header, then the body
            ref[:-1],  # truncated
            ref + b"\0",  # longer
            ref[:20] + bytes([ref[20] ^ 1]) + ref[21:],  # one bit flipped: CRC fails
            ref + bytes(2000),  # a large record that starts like a reference
        ]
        for data in not_refs:
            assert not LargePayloads.is_reference(data), data[:40]
        with pytest.raises(LargePayloadError, match="not a large-payload reference"):
            await store.get(bytes(16))
        assert await store.get(ref) == (await store.get(ref))

    with_store(nats_server, body)


def test_reference_to_another_bucket_is_refused(nats_server: NatsServer) -> None:
    async def body(store: LargePayloads) -> None:
        other = LargePayloads(store.nc, store.js, _bucket())
        await other.ensure()
        try:
            ref = await other.put("k", [b"x" * 10])
            with pytest.raises(LargePayloadError, match="given to bucket"):
                await store.get(ref)
        finally:
            await other.destroy()

    with_store(nats_server, body)


# -- crash safety and clean-up ----------------------------------------------------------


def test_reput_after_a_crash_is_idempotent_and_delete_frees_every_generation(
    nats_server: NatsServer,
) -> None:
    data = os.urandom(3 * MIB + 5)

    async def body(store: LargePayloads) -> None:
        # 1. a producer crashes in the middle of a put (some chunks stored, no reference)
        store_small = LargePayloads(store.nc, store.js, store.bucket, chunk_size=4096)
        task = asyncio.ensure_future(store_small.put("trace-7.node.0", [data]))
        while (await store.usage())[0] < 3:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # a producer killed (-9) mid-put leaves its chunks: a generation nobody references
        orphan = f"{store.prefix}.{_key_token('trace-7.node.0')}.deadbeef0000"
        for i in range(3):
            await store.js.publish(f"{orphan}.{i}", os.urandom(1000))
        # 2. it published a reference, then crashed before acking its input
        ref1 = await store.put("trace-7.node.0", [data])
        # 3. the redelivered input is processed again: the same key is put again
        ref2 = await store.put("trace-7.node.0", [data[:MIB], data[MIB:]])
        assert ref1 != ref2  # a new generation: ref1's chunks are untouched
        assert await store.get(ref1) == data
        assert await store.get(ref2) == data
        # the reader consumes the reference that got through (the other was a duplicate)
        await store.delete(ref1)
        assert await store.usage() == (0, 0)  # every generation, the crashed one too
        with pytest.raises(LargePayloadMissingError, match="deleted or purged"):
            await store.get(ref2)
        await store.delete(ref2)  # already gone: fine

    with_store(nats_server, body)


def test_delete_after_consume_leaves_nothing_behind(nats_server: NatsServer) -> None:
    records = {f"trace-{i}.detector.0": os.urandom(MIB + 1 + i * 100_000) for i in range(6)}

    async def body(store: LargePayloads) -> None:
        refs = {k: await store.put(k, [v[:100], v[100:]]) for k, v in records.items()}
        messages, stored = await store.usage()
        assert messages == 12  # two chunks each
        assert stored >= sum(len(v) for v in records.values())
        for k, ref in refs.items():
            assert await store.get(ref) == records[k]
            await store.delete(ref)
        assert await store.usage() == (0, 0)
        for ref in refs.values():
            await store.delete(ref)  # twice: fine
        assert await store.usage() == (0, 0)

    with_store(nats_server, body)


def test_file_storage_survives_a_server_restart(fresh_nats_server: NatsServer) -> None:
    server = fresh_nats_server
    bucket = _bucket()
    data = os.urandom(2 * MIB + 17)

    async def before() -> bytes:
        nc = await nats.connect(server.url, max_reconnect_attempts=0)
        store = LargePayloads(nc, nc.jetstream(), bucket)
        await store.ensure()
        ref = await store.put("k", [data[:5], data[5:]])
        await nc.close()
        return ref

    async def after(ref: bytes) -> None:
        nc = await nats.connect(server.url, max_reconnect_attempts=0)
        store = LargePayloads(nc, nc.jetstream(), bucket)
        await store.ensure()  # exists: idempotent
        assert (await store.js.stream_info(bucket)).config.storage == api.StorageType.FILE
        assert await store.get(ref) == data
        await store.delete(ref)
        assert await store.usage() == (0, 0)
        await store.destroy()
        await nc.close()

    ref = asyncio.run(before())
    port = server.port
    server.stop()
    server.start()  # the same port and store directory (NatsServer keeps both)
    assert server.port == port
    asyncio.run(after(ref))


def test_ensure_is_idempotent_and_destroy_removes_the_bucket(nats_server: NatsServer) -> None:
    async def main() -> None:
        nc = await nats.connect(nats_server.url, max_reconnect_attempts=0)
        js = nc.jetstream()
        store = LargePayloads(nc, js, _bucket())
        await asyncio.gather(store.ensure(), store.ensure())  # two workers at once
        await store.ensure()
        info = await js.stream_info(store.bucket)
        assert info.config.storage == api.StorageType.FILE
        assert info.config.allow_direct
        ref = await store.put("k", [os.urandom(MIB + 1)])
        await store.destroy()
        with pytest.raises(NotFoundError):
            await js.stream_info(store.bucket)
        await store.destroy()  # already gone: fine
        await store.delete(ref)  # bucket gone: nothing to free, fine
        await nc.close()

    asyncio.run(main())


def test_a_stream_of_that_name_for_something_else_is_refused(nats_server: NatsServer) -> None:
    async def main() -> None:
        nc = await nats.connect(nats_server.url, max_reconnect_attempts=0)
        js = nc.jetstream()
        name = _bucket()
        await js.add_stream(name=name, subjects=[f"other-{name}.>"])
        try:
            with pytest.raises(LargePayloadError, match="pick another bucket name"):
                await LargePayloads(nc, js, name).ensure()
        finally:
            await js.delete_stream(name)
            await nc.close()

    asyncio.run(main())


@pytest.mark.parametrize("name", ["", "a.b", "a b", "a*", "a>", "x" * 201, "é"])
def test_invalid_bucket_names_are_refused_with_the_rule(name: str) -> None:
    problem = bucket_name_problem(name)
    assert problem is not None and "letters, digits" in problem

    class FakeConn:  # only max_payload is read before validation fails
        max_payload = MIB

    with pytest.raises(ValueError, match="letters, digits"):
        LargePayloads(FakeConn(), None, name)


def test_valid_bucket_names() -> None:
    for name in ["VF_OBJ_traffic-r1-0a1b2c", "a", "A-_0", "x" * 200]:
        assert bucket_name_problem(name) is None
