"""Records no stranger can forge: a MAC under the run's key, checked before decoding.

A worker decodes its input records with ``pickle`` (:mod:`vfadapters.runtime.codec`),
and unpickling runs code. Whoever can publish on a run's subjects — any holder of
broker access, in the worst case anyone who reaches the server's port — could
otherwise run code in every worker. So every record a run publishes is sealed:
a 44-byte trailer ``VFM1 · salt (16) · counter (8) · tag (16)`` after the record,
where the tag is an AES-256-GCM tag (empty plaintext, the record as the
associated data: the AEAD used as a MAC, GMAC) under a key derived from the run key,
the writer's salt and the *domain* the record was written for:

* ``edge:<parent>><child>`` — a record on that edge (its subjects, its large-payload
  copy): a record of one edge is not accepted on another;
* ``letter:<node>`` — the record a dead letter keeps for ``vf dead-letters --replay``,
  which verifies it and seals it again for its edge.

``subkey = BLAKE2b(key=run key, person="vf-record-v1", salt · 0 · domain)``: each
writer life draws a random salt and counts its records, so a (subkey, nonce)
pair never repeats — the rule GCM needs — however long a run lasts.
A reader derives the subkey from the salt it reads (cached) and the domain *it
expects*, and checks the tag before a single byte is unpickled; a record that
fails is a dead letter with reason ``record-unauthenticated``, never decoded.

What a seal does not stop: a copy of a genuine record sent again on its own edge
verifies (the exactly-once rules of docs/broker.md make it a duplicate, dropped by
its ids); the run key in an attacker's hands (a compromised worker holds it).
The cost is one pass of GHASH over each record at its writer and at each reader
(about 20 GB/s with the CPU's carry-less multiply: bench/bench_sealing.py,
docs/performance.md). GCM, not ChaCha20-Poly1305: on the x86 and Arm servers
GPUs sit in, it authenticates a 1 MiB array in half the time (46 against 83 µs
here), which kept sealing under 5 % of a 1 MiB pipeline's work.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections import OrderedDict
from typing import Any

# imported here, not at first use: the fork server preloads this module, so a worker
# forked from it seals its first record without a 20-100 ms import (bench_sealing.py)
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "KEY_BYTES",
    "SEAL_BYTES",
    "RecordOpener",
    "RecordSealer",
    "edge_domain",
    "letter_domain",
]

KEY_BYTES = 32
SEAL_MAGIC = b"VFM1"
_TRAILER = struct.Struct("<4s16sQ16s")
SEAL_BYTES = _TRAILER.size  # 44
_PERSON = b"vf-record-v1"
_CACHE = 1024  # subkeys a reader keeps (one per writer life and domain)


def edge_domain(parent: str, child: str) -> str:
    """The domain of a record on the edge ``parent → child``."""
    return f"edge:{parent}>{child}"


def letter_domain(node: str) -> str:
    """The domain of the record a dead letter of ``node`` keeps."""
    return f"letter:{node}"


def _aead(run_key: bytes, salt: bytes, domain: str) -> Any:
    subkey = hashlib.blake2b(
        salt + b"\0" + domain.encode(), key=run_key, digest_size=32, person=_PERSON
    ).digest()
    return AESGCM(subkey)


def _nonce(counter: int) -> bytes:
    return counter.to_bytes(8, "little") + b"\0\0\0\0"


def check_key(run_key: bytes) -> bytes:
    if not isinstance(run_key, bytes | bytearray) or len(run_key) != KEY_BYTES:
        raise ValueError(f"a run key is {KEY_BYTES} bytes")
    return bytes(run_key)


class RecordSealer:
    """Seals the records one writer life publishes (a fresh salt, a counter)."""

    def __init__(self, run_key: bytes) -> None:
        self.key = check_key(run_key)
        self.salt = os.urandom(16)
        self.counter = 0
        self.aeads: dict[str, Any] = {}

    def seal(self, out: bytearray, size: int, domain: str) -> None:
        """Write the trailer of ``out[:size]`` into ``out[size:size + SEAL_BYTES]``."""
        aead = self.aeads.get(domain)
        if aead is None:
            aead = self.aeads[domain] = _aead(self.key, self.salt, domain)
        self.counter += 1
        tag = aead.encrypt(_nonce(self.counter), b"", memoryview(out)[:size])
        _TRAILER.pack_into(out, size, SEAL_MAGIC, self.salt, self.counter, tag)

    def sealed_copy(self, record: bytes | bytearray | memoryview, domain: str) -> bytearray:
        """``record`` (without a trailer) sealed for ``domain``: a copy."""
        out = bytearray(len(record) + SEAL_BYTES)
        with memoryview(out) as view:  # out[a:b] = bytes copies the bytes first
            view[: len(record)] = record
        self.seal(out, len(record), domain)
        return out


class RecordOpener:
    """Checks seals for a reader; :meth:`check` before anything is decoded."""

    def __init__(self, run_key: bytes) -> None:
        self.key = check_key(run_key)
        self.aeads: OrderedDict[tuple[bytes, str], Any] = OrderedDict()

    def check(self, data: bytes | bytearray | memoryview, domain: str) -> str | None:
        """Why ``data`` is not a record sealed for ``domain`` under this run's key
        (a sentence for the dead letter), or None when it is."""
        n = len(data)
        if n < SEAL_BYTES:
            return f"{n} bytes: too short to carry a seal"
        magic, salt, counter, tag = _TRAILER.unpack_from(data, n - SEAL_BYTES)
        if magic != SEAL_MAGIC:
            return "it carries no seal (written without this run's key)"
        key = (salt, domain)
        aead = self.aeads.get(key)
        if aead is None:
            aead = _aead(self.key, salt, domain)
            self.aeads[key] = aead
            if len(self.aeads) > _CACHE:
                self.aeads.popitem(last=False)
        else:
            self.aeads.move_to_end(key)
        try:
            aead.decrypt(_nonce(counter), tag, memoryview(data)[: n - SEAL_BYTES])
        except InvalidTag:
            return (
                f"its seal does not verify for {domain} under this run's key (forged, "
                "altered, sent on another edge, or written by another run)"
            )
        return None


def unsealed(data: bytes | bytearray | memoryview) -> memoryview:
    """The record without its trailer (after :meth:`RecordOpener.check` said yes)."""
    return memoryview(data)[: len(data) - SEAL_BYTES]
