"""Stable key hashing and replica ownership for partitioned nodes.

A node with ``partition_by`` runs replicas that *own* keys: a message goes to
replica ``partition_of(key, n)`` of the node's ``n`` replicas. The answer must be
the same in every process, on every machine, in every Python version and under
every ``PYTHONHASHSEED``, and in other languages too, so it never uses Python's
``hash()`` and never ``str(key)``. It is, exactly (``docs/partitioning.md``
specifies it byte by byte, with test vectors):

1. the key's canonical encoding: one type-tag byte, then the value's bytes
   (``encode_key``: ``'7'`` → ``73 37``, ``7`` → ``69 07``, ``True`` → ``74``,
   ``b'7'`` → ``62 37``; four keys, four encodings);
2. its 64-bit hash: BLAKE2b with an 8-byte digest (RFC 7693, no key, salt or
   personalisation) of that encoding, read as a big-endian unsigned integer
   (``key_hash``);
3. the owner among ``n`` replicas: ``hash % n`` (``strategy="modulo"``, the
   default) or the Lamping–Veach jump consistent hash of the same 64-bit value
   (``strategy="jump"``).

Rescaling ``n → n+1`` moves about ``n/(n+1)`` of the keys under ``modulo`` and
about ``1/(n+1)`` (the minimum) under ``jump``::

    >>> partition_of("camera-17", 4)
    3
    >>> [partition_of(k, 16) for k in ("7", 7, True, b"7")]
    [1, 12, 6, 2]
    >>> expected_moved_fraction(4, 5, "modulo"), expected_moved_fraction(4, 5, "jump")
    (0.8, 0.2)

Supported keys: non-empty ``str`` (UTF-8) and ``bytes``, any ``int``, ``bool``
(its own type: ``True`` is not ``1``), and finite ``float`` (its own type:
``7.0`` is not ``7``). Anything else (``None``, ``''``, ``b''``, lists, NaN)
raises :class:`InvalidKeyError`, which names the value and the remedy.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final, Literal

from vfcore.errors import InvalidInputError
from vfcore.flow.spec import TRACE_ID, NodeSpec

__all__ = [
    "JUMP_MAX_REPLICAS",
    "STRATEGIES",
    "InvalidKeyError",
    "PartitionKey",
    "Strategy",
    "encode_key",
    "expected_moved_fraction",
    "jump_bucket",
    "key_hash",
    "moved_fraction",
    "owner_of",
    "partition_key",
    "partition_of",
]

PartitionKey = str | bytes | int | float
"""What a partition key may be (``bool`` is an ``int`` to the type checker, its own type here)."""

Strategy = Literal["modulo", "jump"]
STRATEGIES: Final[tuple[Strategy, ...]] = ("modulo", "jump")

#: The largest replica count the jump strategy takes (the reference algorithm's int32 bound).
JUMP_MAX_REPLICAS: Final = 2**31 - 1

# Type tags of the canonical encoding (docs/partitioning.md, "Canonical encoding").
_TAG_STR: Final = b"s"
_TAG_BYTES: Final = b"b"
_TAG_INT: Final = b"i"
_TAG_FLOAT: Final = b"d"
_ENC_TRUE: Final = b"t"
_ENC_FALSE: Final = b"f"

_MASK64: Final = (1 << 64) - 1

_blake2b = hashlib.blake2b
_from_bytes = int.from_bytes
_pack_double = struct.Struct(">d").pack
_NO_METADATA: Final[Mapping[str, object]] = MappingProxyType({})

_KEY_REMEDY = (
    "give the node a non-empty str, bytes or int key: set it upstream with "
    "ctx.set_partition_key(field, value) (listing the field in that node's sets_keys), "
    "or partition by 'trace_id'"
)


class InvalidKeyError(InvalidInputError):
    """A value that cannot be a partition key (rule ``invalid-partition-key``).

    A ``ValueError`` and a :class:`~vfcore.errors.VfError`. ``value`` is the
    refused value (``None`` when the message carried no key at all, and then
    ``missing`` is true); ``node`` and ``field`` say where it came from, when known.

    >>> try:
    ...     partition_of(None, 4)
    ... except InvalidKeyError as exc:
    ...     print(exc.rule, "|", exc.message)
    invalid-partition-key | None is not a partition key: a NoneType is not one of str, bytes, int, bool or a finite float
    """

    def __init__(
        self,
        value: object,
        reason: str,
        *,
        node: str | None = None,
        field: str | None = None,
        hint: str = _KEY_REMEDY,
        missing: bool = False,
    ) -> None:
        self.value = value
        self.reason = reason
        self.node = node
        self.field = field
        self.missing = missing
        where = ""
        if node is not None:
            where = f"node {node!r}" + (f", field {field!r}" if field is not None else "") + ": "
        what = "no partition key" if missing else f"{_safe_repr(value)} is not a partition key"
        super().__init__("invalid-partition-key", f"{where}{what}: {reason}", hint)


def _safe_repr(value: object, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__, or an int too long to print
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- encoding and hashing -----------------------------------------------------


def _int_bytes(value: int) -> bytes:
    """The shortest big-endian two's-complement form (Java's BigInteger.toByteArray)."""
    magnitude = value if value >= 0 else ~value
    return value.to_bytes(magnitude.bit_length() // 8 + 1, "big", signed=True)


def encode_key(key: PartitionKey) -> bytes:
    """The canonical, type-tagged bytes of a key; raises :class:`InvalidKeyError`.

    ======  ==========================================================
    type    encoding
    ======  ==========================================================
    str     ``73`` (``s``) + the UTF-8 bytes (non-empty, no lone surrogates)
    bytes   ``62`` (``b``) + the bytes themselves (non-empty)
    bool    ``74`` (``t``) for True, ``66`` (``f``) for False: one byte
    int     ``69`` (``i``) + shortest big-endian two's complement
    float   ``64`` (``d``) + IEEE-754 binary64 big-endian; finite; -0.0 as 0.0
    ======  ==========================================================

    A subclass (``IntEnum``, ``StrEnum``) encodes as the plain value it equals.

    >>> [encode_key(k).hex() for k in ("7", 7, True, b"7", 7.0)]
    ['7337', '6907', '74', '6237', '64401c000000000000']
    """
    kind = type(key)
    if isinstance(key, str):
        if not key:
            raise InvalidKeyError(key, "the empty string is not a key (it usually means unset)")
        try:
            return _TAG_STR + str.encode(key, "utf-8")
        except UnicodeEncodeError:
            raise InvalidKeyError(
                key, "it holds a lone surrogate, which has no UTF-8 encoding"
            ) from None
    if kind is bool:
        return _ENC_TRUE if key else _ENC_FALSE
    if isinstance(key, int):
        return _TAG_INT + _int_bytes(int.__index__(key))
    if isinstance(key, bytes):
        if not key:
            raise InvalidKeyError(key, "empty bytes are not a key (they usually mean unset)")
        return _TAG_BYTES + bytes(key)
    if isinstance(key, float):
        if not math.isfinite(key):
            raise InvalidKeyError(key, "a float key must be finite")
        return _TAG_FLOAT + _pack_double(float(key) + 0.0)  # + 0.0 turns -0.0 into 0.0
    supported = "str, bytes, int, bool or a finite float"
    if isinstance(key, bytearray | memoryview):
        raise InvalidKeyError(key, f"a {kind.__name__} is mutable; convert it with bytes()")
    raise InvalidKeyError(key, f"a {kind.__name__} is not one of {supported}")


def key_hash(key: PartitionKey) -> int:
    """The key's 64-bit hash: BLAKE2b-64 of :func:`encode_key`, big-endian, unsigned.

    >>> hex(key_hash("7"))
    '0x65074522e881a131'
    """
    return _from_bytes(_blake2b(encode_key(key), digest_size=8).digest(), "big")


# -- owners --------------------------------------------------------------------


def jump_bucket(hash64: int, n: int) -> int:
    """Lamping & Veach's jump consistent hash: the bucket in ``[0, n)`` of a 64-bit value.

    The key drives a 64-bit linear congruential generator; each step draws the
    next bucket at which this key would move if there were that many buckets,
    and the walk stops once that bucket is ``>= n``. So when ``n`` grows to
    ``n + 1`` a key either stays or moves to the new bucket ``n``, with
    probability ``1/(n+1)``. The float arithmetic is IEEE-754 double, as in
    the paper, so every language gets the same answer.

    >>> jump_bucket(42, 57), jump_bucket(256, 1024)
    (43, 520)
    """
    _check_replicas(n, "jump")
    if type(hash64) is not int or not 0 <= hash64 <= _MASK64:
        raise InvalidInputError(
            "invalid-hash-value",
            f"jump_bucket needs an unsigned 64-bit int, got {_safe_repr(hash64)}",
            "pass key_hash(key), or use partition_of(key, n, 'jump')",
        )
    return _jump(hash64, n)


def _jump(state: int, n: int) -> int:
    # The paper's loop with its first step (which always lands on bucket 0) done.
    # Constants are literals because this loop runs per message: the LCG
    # multiplier 2862933555777941757, the 64-bit mask, and 2**31 as a double.
    bucket = 0
    while True:
        state = (state * 2862933555777941757 + 1) & 0xFFFF_FFFF_FFFF_FFFF
        # (bucket + 1) * (2**31 / ((state >> 33) + 1)) in doubles, truncated toward zero.
        candidate = int((bucket + 1) * (2147483648.0 / ((state >> 33) + 1)))
        if candidate >= n:
            return bucket
        bucket = candidate


def _check_replicas(n: object, strategy: str) -> None:
    if type(n) is not int or n < 1:
        raise InvalidInputError(
            "invalid-replica-count",
            f"the replica count must be an int >= 1, got {_safe_repr(n)}",
            "pass the node's replica count (vfcore.effective_replicas(node))",
        )
    if strategy == "jump" and n > JUMP_MAX_REPLICAS:
        raise InvalidInputError(
            "invalid-replica-count",
            f"the jump strategy takes at most {JUMP_MAX_REPLICAS} replicas, got {n}",
            "use strategy='modulo' beyond 2**31 - 1 replicas",
        )


def _strategy_error(strategy: object) -> InvalidInputError:
    return InvalidInputError(
        "invalid-partition-strategy",
        f"strategy {_safe_repr(strategy)} is not one of {', '.join(STRATEGIES)}",
        "use strategy='modulo' (the default) or strategy='jump' "
        "(moves only 1/(n+1) of the keys when n grows by one)",
    )


def partition_of(key: PartitionKey, n: int, strategy: Strategy = "modulo") -> int:
    """The replica in ``[0, n)`` that owns ``key`` among ``n`` replicas.

    ``modulo``: ``key_hash(key) % n``. ``jump``: ``jump_bucket(key_hash(key), n)``.
    Pure and stable (docs/partitioning.md has the test vectors). Raises
    :class:`InvalidKeyError` for a key that is not a key, and
    :class:`~vfcore.errors.InvalidInputError` (``invalid-replica-count``,
    ``invalid-partition-strategy``) for a bad ``n`` or ``strategy``.

    >>> partition_of("7", 3), partition_of(7, 3), partition_of("7", 3, "jump")
    (2, 1, 0)
    """
    # The common case (a non-empty str key) stays inline: this runs per message.
    if type(key) is str and key:
        try:
            data = _TAG_STR + key.encode()
        except UnicodeEncodeError:
            data = encode_key(key)  # raises InvalidKeyError
    else:
        data = encode_key(key)
    if type(n) is not int or n < 1:
        _check_replicas(n, "modulo")
    h = _from_bytes(_blake2b(data, digest_size=8).digest(), "big")
    if strategy == "modulo":
        return h % n
    if strategy == "jump":
        if n > JUMP_MAX_REPLICAS:
            _check_replicas(n, "jump")
        return _jump(h, n)
    raise _strategy_error(strategy)


# -- rescaling -----------------------------------------------------------------


def moved_fraction(
    n_from: int,
    n_to: int,
    strategy: Strategy = "modulo",
    keys: Iterable[PartitionKey] = (),
) -> float:
    """The share of ``keys`` whose owner changes when ``n_from`` replicas become ``n_to``.

    Each distinct key counts once, whatever order the keys come in. Compare it
    with :func:`expected_moved_fraction`: 16 → 17 replicas moves ~94 % of the
    keys under ``modulo`` and ~6 % under ``jump``.

    >>> keys = [f"camera-{i}" for i in range(10_000)]
    >>> moved_fraction(16, 17, "modulo", keys=keys), moved_fraction(16, 17, "jump", keys=keys)
    (0.9414, 0.0633)
    """
    if strategy not in STRATEGIES:
        raise _strategy_error(strategy)
    _check_replicas(n_from, strategy)
    _check_replicas(n_to, strategy)
    encodings = {encode_key(key) for key in keys}  # distinct keys, in any order
    hashes = [_from_bytes(_blake2b(e, digest_size=8).digest(), "big") for e in encodings]
    if not hashes:
        raise InvalidInputError(
            "empty-key-sample",
            "moved_fraction needs at least one key to measure, got none",
            "pass a sample of the keys the node sees (e.g. recent trace ids)",
        )
    if strategy == "modulo":
        moved = sum(1 for h in hashes if h % n_from != h % n_to)
    else:
        moved = sum(1 for h in hashes if _jump(h, n_from) != _jump(h, n_to))
    return moved / len(hashes)


def expected_moved_fraction(n_from: int, n_to: int, strategy: Strategy = "modulo") -> float:
    """The share of uniformly hashed keys that changes owner from ``n_from`` to ``n_to``.

    ``modulo``: a key stays iff ``h % n_from == h % n_to``, which holds for
    ``min(n_from, n_to)`` residues out of every ``lcm(n_from, n_to)`` (Chinese
    remainder theorem), so ``1 - min / lcm``: 4 → 5 moves ``1 - 4/20 = 0.8``,
    4 → 8 moves 0.5. ``jump``: ``|n_to - n_from| / max(n_from, n_to)``, the
    least any scheme can move: 4 → 5 moves 0.2.

    >>> expected_moved_fraction(16, 17, "modulo"), expected_moved_fraction(16, 17, "jump")
    (0.9411764705882353, 0.058823529411764705)
    """
    if strategy not in STRATEGIES:
        raise _strategy_error(strategy)
    _check_replicas(n_from, strategy)
    _check_replicas(n_to, strategy)
    if strategy == "modulo":
        return 1.0 - min(n_from, n_to) / math.lcm(n_from, n_to)
    return abs(n_to - n_from) / max(n_from, n_to)


# -- the key of a message, for a node -----------------------------------------


def partition_key(
    node: NodeSpec,
    *,
    trace_id: object = None,
    metadata: Mapping[str, object] = _NO_METADATA,
) -> PartitionKey:
    """The key a message carries for ``node``: its trace id, or a metadata field.

    ``partition_by='trace_id'`` takes ``trace_id``; ``partition_by='camera'``
    takes ``metadata['camera']``, which a node upstream set with
    ``ctx.set_partition_key('camera', value)`` (and declared in its
    ``sets_keys``). A missing field or an invalid value raises
    :class:`InvalidKeyError` naming the node and the field; a node without
    ``partition_by`` raises ``InvalidInputError`` (``node-not-partitioned``).

    >>> node = NodeSpec("tracker", "processor", nb_tasks=4, partition_by="camera")
    >>> partition_key(node, trace_id="t-1", metadata={"camera": "cam-17"})
    'cam-17'
    """
    field = node.partition_by
    if field is None:
        raise InvalidInputError(
            "node-not-partitioned",
            f"node {node.name!r} has no partition_by, so its messages have no owner: "
            "any replica may take any message",
            "set partition_by='trace_id' (or a metadata field) on the node to make replicas own keys",
        )
    if field == TRACE_ID:
        value = trace_id
        if value is None:
            raise InvalidKeyError(
                None,
                "the message has no trace id",
                node=node.name,
                field=TRACE_ID,
                hint="pass the message's trace_id; every message a producer emits carries one",
                missing=True,
            )
    else:
        if field not in metadata:
            set_by = ", ".join(sorted(metadata)) or "none"
            raise InvalidKeyError(
                None,
                f"the message has no metadata field {field!r} (fields set: {set_by})",
                node=node.name,
                field=field,
                hint=(
                    f"set it upstream with ctx.set_partition_key({field!r}, value) on every "
                    f"path from a producer, and list {field!r} in that node's sets_keys"
                ),
                missing=True,
            )
        value = metadata[field]
    try:
        encode_key(value)  # type: ignore[arg-type]
    except InvalidKeyError as exc:
        raise InvalidKeyError(value, exc.reason, node=node.name, field=field) from None
    return value  # type: ignore[return-value]


def owner_of(
    node: NodeSpec,
    *,
    trace_id: object = None,
    metadata: Mapping[str, object] = _NO_METADATA,
    strategy: Strategy = "modulo",
) -> int:
    """The replica of ``node`` that owns a message: ``partition_of(key, replicas)``.

    ``replicas`` is :func:`vfcore.effective_replicas` of the node.

    >>> node = NodeSpec("tracker", "processor", nb_tasks=4, partition_by="trace_id")
    >>> owner_of(node, trace_id="camera-17")
    3
    """
    key = partition_key(node, trace_id=trace_id, metadata=metadata)
    return partition_of(key, node.replicas, strategy)
