"""Seals on broker records (vfadapters.broker.sealing) and run-key files (keys.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from vfadapters.broker.keys import read_run_key, write_run_key
from vfadapters.broker.record import pack, unpack
from vfadapters.broker.sealing import (
    SEAL_BYTES,
    RecordOpener,
    RecordSealer,
    edge_domain,
    letter_domain,
    unsealed,
)
from vfcore import InvalidInputError

KEY = bytes(range(32))
EDGE = edge_domain("src", "work")


def sealed(items: list[object], key: bytes = KEY, domain: str = EDGE) -> bytearray:
    return pack([(f"t{i}", 0.0, {}, x, 0) for i, x in enumerate(items)], RecordSealer(key), domain)


def test_a_sealed_record_verifies_and_decodes_for_its_domain_only() -> None:
    data = sealed([1, b"two", {"three": 3}])
    opener = RecordOpener(KEY)
    assert opener.check(data, EDGE) is None
    assert [e[3] for e in unpack(unsealed(data))] == [1, b"two", {"three": 3}]
    assert "does not verify" in (opener.check(data, edge_domain("src", "other")) or "")
    assert "does not verify" in (opener.check(data, letter_domain("work")) or "")
    assert "does not verify" in (RecordOpener(os.urandom(32)).check(data, EDGE) or "")


def test_what_carries_no_seal_is_named() -> None:
    opener = RecordOpener(KEY)
    assert "no seal" in (opener.check(bytes(pack([("t", 0.0, {}, 1, 0)])), EDGE) or "")
    assert "too short" in (opener.check(b"VFR1", EDGE) or "")
    assert "no seal" in (opener.check(b"\0" * 200, EDGE) or "")


def test_each_seal_of_one_writer_uses_a_new_nonce_and_writers_differ() -> None:
    sealer = RecordSealer(KEY)
    a = pack([("t", 0.0, {}, 1, 0)], sealer, EDGE)
    b = pack([("t", 0.0, {}, 1, 0)], sealer, EDGE)
    c = pack([("t", 0.0, {}, 1, 0)], RecordSealer(KEY), EDGE)
    assert a[-SEAL_BYTES:] != b[-SEAL_BYTES:] != c[-SEAL_BYTES:]
    assert a[-SEAL_BYTES + 4 : -SEAL_BYTES + 20] != c[-SEAL_BYTES + 4 : -SEAL_BYTES + 20]  # salts
    assert all(RecordOpener(KEY).check(x, EDGE) is None for x in (a, b, c))


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(st.one_of(st.integers(), st.binary(max_size=300), st.text(max_size=50)),
                   min_size=1, max_size=5),
    where=st.floats(0, 1, exclude_max=True),
    flip=st.integers(1, 255),
)  # fmt: skip
def test_any_byte_changed_anywhere_is_refused(items: list[object], where: float, flip: int) -> None:
    data = sealed(items)
    at = int(where * len(data))
    event("in the seal" if at >= len(data) - SEAL_BYTES else "in the record")
    data[at] ^= flip
    assert RecordOpener(KEY).check(data, EDGE) is not None


@settings(max_examples=100, deadline=None)
@given(cut=st.integers(1, 400))
def test_a_record_cut_short_is_refused(cut: int) -> None:
    data = sealed([b"x" * 300])
    assert RecordOpener(KEY).check(data[: max(0, len(data) - cut)], EDGE) is not None


def test_a_run_key_file_holds_32_bytes_raw_or_in_hex(tmp_path: Path) -> None:
    raw = tmp_path / "raw.key"
    raw.write_bytes(KEY)
    assert read_run_key(raw) == KEY
    hexed = tmp_path / "store" / "hex.key"
    write_run_key(hexed, KEY)
    assert read_run_key(hexed) == KEY
    assert hexed.stat().st_mode & 0o777 == 0o600 and hexed.parent.stat().st_mode & 0o777 == 0o700
    with pytest.raises(FileExistsError):
        write_run_key(hexed, os.urandom(32))  # never replaced: workers may hold it
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    with pytest.raises(InvalidInputError) as caught:
        read_run_key(bad)
    assert caught.value.rule == "run-key-invalid" and "32 bytes" in caught.value.message
    with pytest.raises(InvalidInputError) as missing:
        read_run_key(tmp_path / "nope.key")
    assert missing.value.rule == "run-key-missing"
