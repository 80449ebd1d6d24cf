"""Records larger than the NATS message limit, stored in JetStream and passed by reference.

A NATS server refuses a message above its ``max_payload`` (1 MiB by default; the
client learns it from the server's INFO as ``nc.max_payload``). A record above
the threshold (``max_payload`` minus :data:`HEADER_HEADROOM` for the headers the
worker sends) is stored with :meth:`LargePayloads.put`, which returns a small
*reference* (well under 1 KiB) that is published in its place; the reader turns
it back into the record with :meth:`LargePayloads.get` and, once it has acked
the referencing message, frees it with :meth:`LargePayloads.delete`.

Storage: one JetStream stream per bucket (the stream *is* the bucket, named as
given), ``file`` storage so BATCH data survives a server restart, direct get
enabled. A record is split into chunks of ``max_payload`` bytes published
concurrently (every publish acknowledged by the server before :meth:`put`
returns) on the subjects ``_vfobj.<bucket>.<key>.<generation>.<i>``; the reader
fetches them concurrently by direct get (last message of each subject) into one
preallocated ``bytearray``. This is the chunking scheme measured against nats-py's
Object Store and raw messages in ``bench/bench_broker_payloads.py`` (figures in
docs/performance.md): the Object Store publishes its chunks one acknowledged
publish at a time and grows its result by concatenation, several times slower.

Crash safety: ``put`` of a key already stored writes a new *generation* (a
random token), so a reference always names exactly the chunks written with it;
``delete`` purges every generation of the key (``_vfobj.<bucket>.<key>.>``), so
chunks left by a producer that crashed between ``put`` and its acknowledgement
go with the copy that was consumed. :meth:`destroy` removes the whole bucket at
the end of a run.

Reference format (little-endian), see :func:`LargePayloads.is_reference`::

    magic  8 bytes  b"\\xffVF-REF\\x01" (the last byte is the format version)
    total  u64      record size in bytes
    chunks u32      number of chunks
    csize  u32      chunk size (every chunk but the last has exactly this size)
    blen   u8       bucket name length, then the bucket name (ASCII)
    klen   u8       key token length, then the key token (ASCII)
    glen   u8       generation length, then the generation (ASCII)
    crc    u32      zlib.crc32 of everything before it

A record can be mistaken for a reference only if it starts with those 8 bytes,
is under 1 KiB, parses exactly to its own length and carries a matching CRC-32.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import secrets
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nats.js import api
from nats.js.errors import NotFoundError

__all__ = [
    "HEADER_HEADROOM",
    "REF_MAGIC",
    "LargePayloadError",
    "LargePayloadMissingError",
    "LargePayloads",
    "bucket_name_problem",
]

#: Bytes of ``max_payload`` left for the headers a worker publishes with a message.
HEADER_HEADROOM = 4096
#: The first 8 bytes of every reference (its last byte is the format version). A pickle
#: starts with 0x80; the full check (length, CRC-32) is in the module docstring.
REF_MAGIC = b"\xffVF-REF\x01"
MAX_REF_BYTES = 1024
#: Subjects of a bucket: ``_vfobj.<bucket>.>``.
SUBJECT_ROOT = "_vfobj"
#: Chunks in flight at once (per put or get): bounds memory for very large records.
WINDOW = 32

_BUCKET_RE = re.compile(r"[A-Za-z0-9_-]{1,200}")
_TOKEN_RE = re.compile(r"[A-Za-z0-9_=-]{1,64}")
_HEAD = struct.Struct("<8sQII")
_CRC = struct.Struct("<I")


class LargePayloadError(RuntimeError):
    """A reference that is not valid for this bucket, or a storage failure."""


class LargePayloadMissingError(LargePayloadError):
    """The chunks a reference names are gone (deleted, purged or never fully stored)."""


def bucket_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a bucket (a JetStream stream name), or None when it can."""
    if not isinstance(name, str) or not _BUCKET_RE.fullmatch(name):
        return (
            f"bucket name {name!r} must be 1-200 characters of letters, digits, '-' and '_' "
            "(it is the JetStream stream name and a subject token)"
        )
    return None


def _key_token(key: str) -> str:
    """A subject token for ``key``: the key itself when it is a short safe token, else a digest.

    Plain keys get the prefix ``k``, digests ``h`` (so the two never collide).
    """
    if _TOKEN_RE.fullmatch(key):
        return "k" + key
    return "h" + hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class _Ref:
    total: int
    chunks: int
    chunk_size: int
    bucket: str
    token: str
    generation: str

    def encode(self) -> bytes:
        body = bytearray(_HEAD.pack(REF_MAGIC, self.total, self.chunks, self.chunk_size))
        for text in (self.bucket, self.token, self.generation):
            raw = text.encode("ascii")
            body.append(len(raw))
            body += raw
        body += _CRC.pack(zlib.crc32(body))
        return bytes(body)

    @staticmethod
    def decode(data: bytes | bytearray | memoryview) -> _Ref | None:
        raw = bytes(data[:MAX_REF_BYTES]) if len(data) < MAX_REF_BYTES else b""
        if len(raw) < _HEAD.size + 3 + _CRC.size or not raw.startswith(REF_MAGIC):
            return None
        _, total, chunks, chunk_size = _HEAD.unpack_from(raw)
        pos = _HEAD.size
        texts = []
        for _ in range(3):
            if pos >= len(raw):
                return None
            n = raw[pos]
            pos += 1
            try:
                texts.append(raw[pos : pos + n].decode("ascii"))
            except UnicodeDecodeError:
                return None
            pos += n
        if pos + _CRC.size != len(raw) or _CRC.unpack_from(raw, pos)[0] != zlib.crc32(raw[:pos]):
            return None
        return _Ref(total, chunks, chunk_size, texts[0], texts[1], texts[2])


class LargePayloads:
    """Large records of one run in one JetStream bucket (see the module docstring).

    ``nc``: a connected ``nats.aio.client.Client``; ``js``: its ``nc.jetstream()``.
    ``threshold``: records above it are large (default ``nc.max_payload -
    HEADER_HEADROOM``). ``chunk_size``: bytes per stored message (default
    ``nc.max_payload``, the largest the server accepts). ``max_bytes``: bound on
    the bucket (-1: none); a full bucket refuses a put (discard new) rather than
    evicting records not yet consumed. ``storage``: ``file`` (survives a server
    restart: BATCH) or ``memory`` (REALTIME). All methods are coroutines of the
    connection's event loop except :meth:`is_large` and :meth:`is_reference`.
    """

    def __init__(
        self,
        nc: Any,
        js: Any,
        bucket: str,
        *,
        threshold: int | None = None,
        chunk_size: int | None = None,
        max_bytes: int = -1,
        storage: str = "file",
        replicas: int = 1,
        timeout_s: float = 10.0,
    ) -> None:
        problem = bucket_name_problem(bucket)
        if problem:
            raise ValueError(problem)
        max_payload = int(nc.max_payload)
        if threshold is None:
            threshold = max_payload - HEADER_HEADROOM
        if chunk_size is None:
            chunk_size = max_payload
        if not 0 <= threshold <= max_payload:
            raise ValueError(
                f"threshold {threshold} must be between 0 and the server's max_payload "
                f"{max_payload} (a larger message would be refused)"
            )
        if not 1 <= chunk_size <= max_payload:
            raise ValueError(
                f"chunk_size {chunk_size} must be between 1 and the server's max_payload "
                f"{max_payload}"
            )
        self.nc = nc
        self.js = js
        self.bucket = bucket
        self.threshold = threshold
        self.chunk_size = chunk_size
        if storage not in ("file", "memory"):
            raise ValueError(f"storage {storage!r} must be 'file' (BATCH) or 'memory' (REALTIME)")
        self.max_bytes = max_bytes
        self.storage = storage
        self.replicas = replicas
        self.timeout_s = timeout_s
        self.prefix = f"{SUBJECT_ROOT}.{bucket}"
        self._api = str(getattr(js, "_prefix", "$JS.API"))

    # -- bucket ---------------------------------------------------------------------

    def config(self) -> api.StreamConfig:
        """The stream this bucket is: limits retention, discard new, direct get."""
        return api.StreamConfig(
            name=self.bucket,
            description="vf large payloads (vfadapters.broker.payloads)",
            subjects=[f"{self.prefix}.>"],
            retention=api.RetentionPolicy.LIMITS,
            discard=api.DiscardPolicy.NEW,
            max_bytes=self.max_bytes,
            max_msg_size=-1,
            storage=api.StorageType(self.storage),
            num_replicas=self.replicas,
            allow_direct=True,
        )

    async def ensure(self) -> None:
        """Create the bucket unless it exists (idempotent; concurrent callers are fine)."""
        try:
            info = await self.js.stream_info(self.bucket)
        except NotFoundError:
            await self.js.add_stream(self.config())
            return
        subjects = list(info.config.subjects or [])
        if subjects != [f"{self.prefix}.>"] or not info.config.allow_direct:
            raise LargePayloadError(
                f"stream {self.bucket!r} exists with subjects {subjects} and "
                f"allow_direct={info.config.allow_direct}; a large-payload bucket needs "
                f"['{self.prefix}.>'] and direct get: pick another bucket name"
            )

    async def destroy(self) -> None:
        """Remove the bucket and everything in it; a missing bucket is fine."""
        with contextlib.suppress(NotFoundError):
            await self.js.delete_stream(self.bucket)

    # -- records ----------------------------------------------------------------------

    def is_large(self, size: int) -> bool:
        """Whether a record of ``size`` bytes must go through :meth:`put`."""
        return size > self.threshold

    @staticmethod
    def is_reference(data: bytes | bytearray | memoryview) -> bool:
        """Whether ``data`` is a reference made by :meth:`put` (magic, length and CRC-32)."""
        return _Ref.decode(data) is not None

    async def put(self, key: str, parts: Sequence[bytes | bytearray | memoryview]) -> bytes:
        """Store the concatenation of ``parts`` under ``key``; the reference to publish.

        Every chunk is acknowledged by the server before this returns. ``key`` is
        deterministic (from the message id); putting it again writes a new
        generation and the old one goes at :meth:`delete`. On failure the chunks
        already written are purged and the error is raised.
        """
        views = [memoryview(p).cast("B") for p in parts]
        views = [v for v in views if v.nbytes]
        total = sum(v.nbytes for v in views)
        n = -(-total // self.chunk_size)
        cs = -(-total // n) if n else self.chunk_size  # even chunks: the last is not a sliver
        token = _key_token(key)
        ref = _Ref(total, n, cs, self.bucket, token, secrets.token_hex(6))
        base = f"{self.prefix}.{token}.{ref.generation}"
        chunks = _chunks(views, cs) if n else iter(())
        publish = self.js.publish
        sem = asyncio.Semaphore(WINDOW)

        async def one(i: int, chunk: bytes | memoryview) -> None:
            try:
                await publish(f"{base}.{i}", chunk, timeout=self.timeout_s)
            finally:
                sem.release()

        tasks = []
        try:
            for i, chunk in enumerate(chunks):
                await sem.acquire()
                tasks.append(asyncio.ensure_future(one(i, chunk)))
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # the original error matters more; destroy() cleans up what this leaves
            with contextlib.suppress(Exception):
                await self.js.purge_stream(self.bucket, subject=f"{base}.>")
            raise
        return ref.encode()

    def _ref(self, data: bytes | bytearray | memoryview) -> _Ref:
        ref = _Ref.decode(data)
        if ref is None:
            raise LargePayloadError(
                f"not a large-payload reference ({len(data)} bytes starting {bytes(data[:8])!r}); "
                "check is_reference() before get()/delete()"
            )
        if ref.bucket != self.bucket:
            raise LargePayloadError(
                f"reference to bucket {ref.bucket!r} given to bucket {self.bucket!r}"
            )
        return ref

    async def get(self, ref: bytes | bytearray | memoryview) -> bytearray:
        """The whole record a reference names, as a new writable ``bytearray``.

        Raises :class:`LargePayloadMissingError` when a chunk is gone or has the wrong size.
        """
        r = self._ref(ref)
        out = bytearray(r.total)
        if not r.chunks:
            return out
        base = f"{self._api}.DIRECT.GET.{self.bucket}.{self.prefix}.{r.token}.{r.generation}"
        request = self.nc.request
        cs = r.chunk_size
        sem = asyncio.Semaphore(WINDOW)

        async def one(i: int) -> None:
            async with sem:
                msg = await request(f"{base}.{i}", b"", timeout=self.timeout_s)
            data = msg.data
            start = i * cs
            want = min(cs, r.total - start)
            if len(data) != want:
                status = (msg.headers or {}).get("Status", "")
                raise LargePayloadMissingError(
                    f"chunk {i + 1} of {r.chunks} of key token {r.token!r} (generation "
                    f"{r.generation}) in bucket {self.bucket!r}: got {len(data)} bytes, want "
                    f"{want}"
                    + (f" (server status {status})" if status else "")
                    + "; it was deleted or purged (a duplicate delivery after delete()?)"
                )
            with memoryview(out) as view:  # out[a:b] = bytes copies the bytes first
                view[start : start + want] = data

        await asyncio.gather(*(one(i) for i in range(r.chunks)))
        return out

    async def delete(self, ref: bytes | bytearray | memoryview) -> None:
        """Free the record (every generation of its key); already gone is fine."""
        r = self._ref(ref)
        with contextlib.suppress(NotFoundError):
            await self.js.purge_stream(self.bucket, subject=f"{self.prefix}.{r.token}.>")

    async def usage(self) -> tuple[int, int]:
        """(messages, bytes) stored in the bucket now."""
        info = await self.js.stream_info(self.bucket)
        return int(info.state.messages), int(info.state.bytes)


def _chunks(views: list[memoryview], cs: int) -> Any:
    """Chunks of ``cs`` bytes over the concatenation of ``views`` (the last may be shorter).

    A chunk inside one view is a zero-copy slice; one spanning views is joined.
    """
    pending: list[memoryview] = []
    have = 0
    for v in views:
        pos = 0
        size = v.nbytes
        while pos < size:
            take = min(cs - have, size - pos)
            if not pending and take == cs:
                yield v[pos : pos + take]
            else:
                pending.append(v[pos : pos + take])
                have += take
                if have == cs:
                    yield b"".join(pending)
                    pending, have = [], 0
            pos += take
    if pending:
        yield b"".join(pending)
