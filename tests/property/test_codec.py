"""The record codec: what is packed is what is unpacked, whatever a batch holds.

Both transports write batches with :func:`vfadapters.runtime.codec.encode` (the
local rings) or :func:`vfadapters.broker.record.pack` (a NATS message body, sealed),
and read them with ``decode``. The fast paths — a body of small ``bytes`` pickled
without a memo, the body written in pieces and copied once into the record — must
not change what a reader gets: every envelope equal, objects shared inside one
payload still shared, a payload that refers to itself still read back.
"""

from __future__ import annotations

import pickle
import struct
from array import array
from typing import Any

import numpy as np
from hypothesis import event, given, settings
from hypothesis import strategies as st

from vfadapters.broker.record import pack, unpack
from vfadapters.broker.sealing import RecordOpener, RecordSealer
from vfadapters.runtime import codec
from vfadapters.runtime.codec import OUT_OF_BAND_BYTES, decode, encode, record_size
from vfadapters.runtime.columns import Columns

_KEY = bytes(range(32))

_small_bytes = st.binary(max_size=300)
_large_bytes = st.integers(OUT_OF_BAND_BYTES, OUT_OF_BAND_BYTES + 5000).map(
    lambda n: bytes([n % 251]) * n
)
_scalar = st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=20), st.none())
_payload = st.one_of(
    _small_bytes,
    _small_bytes,
    _large_bytes,
    _scalar,
    st.tuples(st.integers(), _small_bytes),
    st.dictionaries(st.text(max_size=5), st.one_of(_scalar, _small_bytes), max_size=4),
    st.integers(1, 40_000).map(lambda n: np.arange(n, dtype=np.uint8)),
)


@st.composite
def _columns(draw: Any) -> Columns:
    n = draw(st.integers(0, 60))
    kind = draw(st.sampled_from(["small bytes", "any"]))
    item = _small_bytes if kind == "small bytes" else _payload
    payloads = draw(st.lists(item, min_size=n, max_size=n))
    emitted = draw(st.lists(st.integers(0, 1 << 62), min_size=n, max_size=n))
    if draw(st.booleans()):
        emitted = array("q", emitted)  # a producer's own
    ids_form = draw(st.sampled_from(["range", "strings", "mixed"]))
    ids: list[Any] | None = None
    if ids_form == "strings":
        ids = [f"t{i}" for i in range(n)]
    elif ids_form == "mixed":
        ids = [i if i % 2 else f"t{i}" for i in range(n)]
    ts = draw(
        st.one_of(
            st.none(), st.lists(st.one_of(st.floats(0, 1e12), st.none()), min_size=n, max_size=n)
        )
    )
    metas = draw(
        st.one_of(
            st.none(),
            st.lists(
                st.one_of(st.none(), st.fixed_dictionaries({"k": _scalar})), min_size=n, max_size=n
            ),
        )
    )
    return Columns(
        payloads,
        emitted,
        ids=ids,
        prefix="src:",
        first=draw(st.integers(0, 1 << 40)),
        ts=ts,
        metas=metas,
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, tuple | list):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return type(b) is dict and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _check(cols: Columns, got: Columns) -> None:
    assert len(got) == len(cols)
    for i in range(len(cols)):
        assert got.trace_id(i) == cols.trace_id(i)
        assert got.event_ts(i) == cols.event_ts(i)
        assert _same(got.payloads[i], cols.payloads[i])
        assert list(got.emitted)[i] == list(cols.emitted)[i]
        assert (got.metas[i] if got.metas is not None else None) == (
            cols.metas[i] if cols.metas is not None else None
        )


@settings(max_examples=200, deadline=None)
@given(cols=_columns(), sealed=st.booleans())
def test_a_packed_record_unpacks_to_the_same_envelopes(cols: Columns, sealed: bool) -> None:
    sealer = RecordSealer(_KEY) if sealed else None
    record = pack(cols, sealer, "edge")
    if sealed:
        assert RecordOpener(_KEY).check(record, "edge") is None
    _check(cols, unpack(record))
    _, plain = codec._body(cols)
    event("no memo" if plain else "memo")


@settings(max_examples=200, deadline=None)
@given(cols=_columns())
def test_an_encoded_body_decodes_to_the_same_envelopes_and_fits_its_size(cols: Columns) -> None:
    body, buffers = encode(cols)
    lengths = [len(body), *(b.nbytes for b in buffers)]
    size = record_size(len(body), lengths[1:])
    # lay the record out as a ring does, then decode it
    record = bytearray(size)
    view = memoryview(record)
    struct.pack_into(
        f"<4sIII{len(lengths)}Q", record, 0, b"VFR1", len(cols), len(buffers), 0, *lengths
    )
    p = (16 + 8 * len(lengths) + 7) & ~7
    view[p : p + len(body)] = body
    p += len(body)
    for b in buffers:
        p = (p + 63) & ~63
        view[p : p + b.nbytes] = b.cast("B")
        p += b.nbytes
    assert p <= size
    _check(cols, decode(view, len(buffers)))
    event(f"{len(buffers)} buffer(s)" if buffers else "in the body")


def test_objects_shared_inside_a_payload_stay_shared_and_a_cycle_reads_back() -> None:
    shared = [1, 2]
    loop: list[Any] = []
    loop.append(loop)
    cols = Columns([{"a": shared, "b": shared}, loop, b"x" * 10], [1, 2, 3], ids=["a", "b", "c"])
    got = unpack(pack(cols))
    assert got.payloads[0]["a"] is got.payloads[0]["b"]
    assert got.payloads[1][0] is got.payloads[1]
    assert got.payloads[2] == b"x" * 10


def test_only_a_body_of_small_bytes_without_metadata_goes_without_a_memo() -> None:
    """The conditions under which dropping pickle's memo cannot change what is read."""
    small = [b"%05d" % i for i in range(50)]
    emitted = list(range(50))
    assert codec._body(Columns(small, emitted, prefix="p:"))[1]
    assert codec._body(Columns(small, emitted, ids=[f"t{i}" for i in range(50)]))[1]
    assert codec._body(Columns(small, emitted, prefix="p:", ts=[1.5] * 50))[1]
    # anything that may hold or share a reference keeps the memo
    assert not codec._body(Columns([*small[:-1], [1]], emitted, prefix="p:"))[1]
    assert not codec._body(Columns(small, emitted, prefix="p:", metas=[{"k": 1}] * 50))[1]
    assert not codec._body(Columns(small, emitted, ids=list(range(50))))[1]
    assert not codec._body(Columns(small, emitted, prefix="p:", ts=[[1]] * 50))[1]
    big = [b"y" * OUT_OF_BAND_BYTES, *small[1:]]
    assert not codec._body(Columns(big, emitted, prefix="p:"))[1]


def test_a_body_of_small_bytes_is_shorter_without_a_memo() -> None:
    """What the fast path is for: no PUT opcode per item (the pickle is shorter)."""
    items = [b"%0100d" % i for i in range(2000)]
    cols = Columns(items, list(range(2000)), prefix="p:")
    body, _ = encode(cols)
    with_memo = pickle.dumps(codec._body(cols)[0], protocol=5)
    assert len(body) < len(with_memo) - 2000  # at least a byte a PUT saved per item
    assert pickle.loads(body) == pickle.loads(with_memo)
