"""A batch of messages as one NATS message body: the shared-memory ring's record layout.

A worker sends several messages (envelopes: trace id, event time, metadata,
payload, emit time) in one NATS message, laid out exactly as a record in the
local executor's rings, so both transports decode with the same
:func:`vfadapters.runtime.codec.decode`: a 16-byte header (``VFR1``, the message
count, the number of out-of-band buffers), the lengths, the pickle body, then
each numpy/bytes/tensor buffer raw on a 64-byte boundary. Over a broker every
record carries a seal after it (:mod:`vfadapters.broker.sealing`): ``pack`` with a
sealer writes it, a reader checks it before :func:`unpack`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from vfadapters.broker.sealing import SEAL_BYTES, RecordSealer
from vfadapters.runtime.codec import decode, encode_chunks, record_size
from vfadapters.runtime.columns import Columns

__all__ = ["MAGIC", "pack", "unpack"]

MAGIC = b"VFR1"
_HEADER = struct.Struct("<4sIII")


def pack(
    envelopes: Sequence[tuple[Any, ...]],
    sealer: RecordSealer | None = None,
    domain: str = "",
) -> bytearray:
    """The record of ``envelopes`` (one NATS message body), sealed for ``domain``
    when a ``sealer`` is given (the seal follows the record).

    The body's pieces and each buffer are copied once, into a record allocated at
    its size (through a view: a bytearray's own slice assignment copies a ``bytes``
    value before it copies it in)."""
    chunks, buffers = encode_chunks(envelopes)
    body_len = sum(map(len, chunks))
    lengths = [body_len, *(b.nbytes for b in buffers)]
    size = record_size(body_len, lengths[1:])
    out = bytearray(size + (SEAL_BYTES if sealer is not None else 0))
    view = memoryview(out)
    _HEADER.pack_into(out, 0, MAGIC, len(envelopes), len(buffers), 0)
    struct.pack_into(f"<{len(lengths)}Q", out, 16, *lengths)
    p = (16 + 8 * len(lengths) + 7) & ~7
    for chunk in chunks:
        n = len(chunk)
        view[p : p + n] = chunk
        p += n
    for buf in buffers:
        p = (p + 63) & ~63
        n = buf.nbytes
        view[p : p + n] = buf.cast("B") if buf.format != "B" or buf.ndim != 1 else buf
        p += n
    view.release()
    if sealer is not None:
        sealer.seal(out, size, domain)
    return out


def header(data: bytes | bytearray | memoryview) -> tuple[int, int] | None:
    """``(count, nbufs)`` of a record, or None when ``data`` is not one."""
    if len(data) < 16 or bytes(data[:4]) != MAGIC:
        return None
    _, count, nbufs, _ = _HEADER.unpack_from(data, 0)
    return count, nbufs


def unpack(data: bytes | bytearray | memoryview) -> Columns:
    """The envelopes of a record (arrays are writable when ``data`` is a bytearray)."""
    head = header(data)
    if head is None:
        raise ValueError(f"not a vf record ({len(data)} bytes, starts {bytes(data[:4])!r})")
    return decode(memoryview(data), head[1])
