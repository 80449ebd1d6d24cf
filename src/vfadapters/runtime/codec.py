"""Encoding batches of messages for the rings: pickle protocol 5, large buffers out of band.

A batch is a list of envelopes ``(trace_id, event_ts_ms, metadata or None,
payload, emitted_ns)`` (``emitted_ns``: the producer's emit, on the transport's
latency clock). Large numpy arrays, ``bytes`` and CPU torch tensors travel as
out-of-band buffers: the writer copies each once into the ring, the reader
copies it once out (so a payload never aliases ring memory that a later
batch will overwrite). Small objects stay in the pickle body, so a batch of
small messages is one ``pickle`` call and one copy.

A private dispatch table does this: pickling elsewhere in the worker (a user
saving an array with protocol 4) is unaffected.
"""

from __future__ import annotations

import contextlib
import copyreg
import pickle
import sys
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from vfadapters.runtime.columns import Columns

__all__ = ["OUT_OF_BAND_BYTES", "align", "decode", "encode", "encode_chunks", "record_size"]

#: Arrays, bytes and tensors at least this large travel out of band.
OUT_OF_BAND_BYTES = 16 * 1024

_PickleBuffer = pickle.PickleBuffer


def _array_from_buffer(buffer: Any, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(buffer, dtype=dtype).reshape(shape).copy()


def _reduce_array(arr: np.ndarray) -> Any:
    if (
        arr.nbytes >= OUT_OF_BAND_BYTES
        and arr.flags.c_contiguous
        and not arr.dtype.hasobject
        and type(arr) is np.ndarray
    ):
        return _array_from_buffer, (_PickleBuffer(arr), arr.dtype, arr.shape)  # type: ignore[arg-type]
    return arr.__reduce_ex__(4)


class _BigBytes:
    """Marks a large ``bytes`` payload for out-of-band transfer (unpickles as bytes)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce_ex__(self, protocol: Any) -> Any:
        return bytes, (_PickleBuffer(self.data),)


def _tensor_from_buffer(buffer: Any, dtype: Any, shape: tuple[int, ...]) -> Any:
    import torch

    return torch.from_numpy(_array_from_buffer(buffer, dtype, shape))


def _reduce_tensor(t: Any) -> Any:
    try:
        if (
            t.device.type == "cpu"
            and not t.requires_grad
            and t.is_contiguous()
            and t.element_size() * t.numel() >= OUT_OF_BAND_BYTES
        ):
            arr = t.numpy()
            return _tensor_from_buffer, (_PickleBuffer(arr), arr.dtype, tuple(t.shape))
    except (TypeError, RuntimeError):  # bfloat16 and others numpy lacks
        pass
    return t.__reduce_ex__(4)


_dispatch: dict[Any, Any] = dict(copyreg.dispatch_table)
_dispatch[np.ndarray] = _reduce_array
_torch_seen = False


def _register_torch() -> None:
    global _torch_seen
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "Tensor"):
        _dispatch[torch.Tensor] = _reduce_tensor
        _torch_seen = True


def _box(payload: Any) -> Any:
    kind = type(payload)
    if kind is bytes:
        return _BigBytes(payload) if len(payload) >= OUT_OF_BAND_BYTES else payload
    if kind is dict and any(
        type(v) is bytes and len(v) >= OUT_OF_BAND_BYTES for v in payload.values()
    ):
        return {
            k: _BigBytes(v) if type(v) is bytes and len(v) >= OUT_OF_BAND_BYTES else v
            for k, v in payload.items()
        }
    return payload


#: the first field of a columnar body (below); older bodies are a plain list of envelopes
_COLUMNS = "vfc1"
_SEP = "\0"


def _ints(values: Sequence[Any]) -> Any:
    """Emit times (ints of the latency clock) as one signed 64-bit array when they fit."""
    if type(values) is array and values.typecode == "q":  # a producer's own: as it is
        return values
    try:
        return array("q", values)
    except (TypeError, OverflowError):
        return values


def _body(envelopes: Sequence[tuple[Any, ...]]) -> tuple[tuple[Any, ...], bool]:
    """A batch as the tuple pickled: its columns (:class:`Columns`), each in one go (a
    list of 5-tuples pickles each tuple and each field apart: about 3x the cost); and
    whether it may be pickled without a memo (below).

    Trace ids: ``(prefix, first)`` when they count up from ``first``, the ids joined
    by NUL when all are strings and none holds a NUL (one string), else the list;
    times and metadata: None when :class:`Columns` has them as None.

    Without a memo: pickle remembers every object it writes, so that one written
    twice is read back as one object (about 0.3 us an item, 3x the cost of writing a
    100-byte item). A body whose payloads are all small ``bytes``, with no metadata
    and its trace ids as one string or a range, holds nothing mutable and nothing
    that refers to anything else: read back, it is equal either way, and it is
    pickled without one. (A source returning the very same ``bytes`` object again
    costs its bytes each time, as its size estimate already counts them.)
    """
    cols = Columns.of(envelopes)
    n = len(cols)
    ids = cols.ids
    trace_ids: Any
    if ids is None:
        trace_ids = (cols.prefix, cols.first)
    else:
        trace_ids = ids
        try:
            joined = _SEP.join(ids)
        except TypeError:
            pass
        else:
            if joined.count(_SEP) == n - 1:
                trace_ids = joined
    payloads = cols.payloads
    kinds = set(map(type, payloads))
    plain = False
    if kinds == {bytes}:
        if max(map(len, payloads)) >= OUT_OF_BAND_BYTES:
            payloads = [_box(x) for x in payloads]
        else:
            plain = cols.metas is None and type(trace_ids) is not list and _flat(cols.ts)
    elif bytes in kinds or dict in kinds:
        payloads = [_box(x) for x in payloads]
    body = (_COLUMNS, n, trace_ids, cols.ts, cols.metas, payloads, _ints(cols.emitted))
    return body, plain


def _flat(ts: Any) -> bool:
    """Event times that refer to nothing: none, or numbers and Nones."""
    return ts is None or all(t is None or type(t) is float or type(t) is int for t in ts)


def encode(envelopes: Sequence[tuple[Any, ...]]) -> tuple[bytes, list[memoryview]]:
    """The pickle body and the out-of-band buffers (raw byte views) of a batch."""
    chunks, buffers = encode_chunks(envelopes)
    return b"".join(chunks), buffers


class _Chunks(list):  # type: ignore[type-arg]
    """What a pickler writes, kept as its pieces (a BytesIO grows by copying itself)."""

    write = list.append


def encode_chunks(envelopes: Sequence[tuple[Any, ...]]) -> tuple[list[bytes], list[memoryview]]:
    """The pickle body of a batch in pieces (the pickler's frames), and its
    out-of-band buffers (raw byte views)."""
    if not _torch_seen and "torch" in sys.modules:
        _register_torch()
    buffers: list[pickle.PickleBuffer] = []
    chunks = _Chunks()
    pickler = pickle.Pickler(chunks, protocol=5, buffer_callback=buffers.append)
    pickler.dispatch_table = _dispatch
    body, plain = _body(envelopes)
    pickler.fast = plain  # no memo: see _body
    pickler.dump(body)
    return chunks, [b.raw() for b in buffers]


def _columns(body: Any) -> Columns:
    if type(body) is list:  # a record written before columns: a list of envelopes
        return Columns.of(body)
    tag, n, trace_ids, ts, metas, payloads, emitted = body
    if tag != _COLUMNS:
        raise ValueError(f"not a batch body (tag {tag!r})")
    cols = Columns(payloads, emitted, ts=ts, metas=metas)
    if type(trace_ids) is tuple:
        cols.prefix, cols.first = trace_ids
    else:
        cols.ids = (trace_ids.split(_SEP) if n else []) if type(trace_ids) is str else trace_ids
    for column in (cols.ids, ts, metas, payloads, emitted):
        if column is not None and len(column) != n:
            raise ValueError(f"a batch body's columns differ in length (count {n})")
    return cols


def decode(record: memoryview, nbufs: int, at: int = 16) -> Columns:
    """The envelopes of one record (a ring's record, or a broker message: the lengths
    start at byte ``at``, after the header and any progress cells)."""
    lengths = record[at : at + 8 * (1 + nbufs)].cast("Q")
    p = (at + 8 * (1 + nbufs) + 7) & ~7
    body_len = lengths[0]
    body = record[p : p + body_len]
    p += body_len
    buffers = []
    for i in range(1, nbufs + 1):
        p = (p + 63) & ~63
        n = lengths[i]
        buffers.append(record[p : p + n])
        p += n
    lengths.release()
    try:
        result = pickle.loads(body, buffers=buffers)
    finally:
        for view in (body, *buffers):
            with contextlib.suppress(BufferError):  # an object still holds it
                view.release()
    return _columns(result)


def align(n: int, a: int) -> int:
    """``n`` rounded up to a multiple of ``a`` (a power of two)."""
    return (n + a - 1) & ~(a - 1)


def record_size(body_len: int, buffer_lens: Sequence[int], progress: int = 0) -> int:
    """Bytes of a record: its 16-byte header, ``progress`` u64 cells, the lengths, the
    pickle body (8-aligned) and each out-of-band buffer (64-aligned)."""
    p = align(16 + 8 * progress + 8 * (1 + len(buffer_lens)), 8) + body_len
    for n in buffer_lens:
        p = align(p, 64) + n
    return align(p, 64)
