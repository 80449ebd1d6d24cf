"""docs/partitioning.md's test vectors hold, row by row; bad keys and bad arguments are refused.

The vectors are parsed from the markdown tables, so the documentation and the
code cannot drift apart. Then the edges (issue 18): the jump strategy's replica
bound at exactly ``2**31 - 1`` (``jump_bucket(h, 2**31)`` is refused, in every
function that takes a strategy), and the exact texts of every refusal: a bad
strategy, a node without ``partition_by``, a message without its key, an invalid
key value (with its node, field and reason), and how a long value is cut.
"""

from __future__ import annotations

import ast
import doctest
import enum
import math
import re
from pathlib import Path

import pytest

import vfcore.routing.partition
from vfcore import InvalidInputError, NodeSpec, VfError
from vfcore.routing.partition import (
    JUMP_MAX_REPLICAS,
    InvalidKeyError,
    encode_key,
    expected_moved_fraction,
    jump_bucket,
    key_hash,
    moved_fraction,
    owner_of,
    partition_key,
    partition_of,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "partitioning.md"
SIZES = (2, 3, 7, 16)


def _table(header_start: str) -> list[list[str]]:
    """The body rows of the markdown table whose header line starts with ``header_start``."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    [start] = [i for i, line in enumerate(lines) if line.startswith(header_start)]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().strip("`") for cell in line.strip().strip("|").split("|")])
    return rows


KEY_VECTORS = _table("| # | key (Python literal) |")
JUMP_VECTORS = _table("| 64-bit value (hex) | n | jump |")


def test_the_docs_hold_enough_vectors_of_every_type() -> None:
    assert len(KEY_VECTORS) >= 12
    assert {row[2] for row in KEY_VECTORS} == {"str", "bytes", "int", "bool", "float"}
    assert len(JUMP_VECTORS) >= 8


@pytest.mark.parametrize("row", KEY_VECTORS, ids=[f"{r[0]}-{r[1]}" for r in KEY_VECTORS])
def test_key_vector(row: list[str]) -> None:
    _, literal, type_name, encoding, hash_hex, modulo, jump = row
    key = ast.literal_eval(literal)
    assert type(key).__name__ == type_name
    assert encode_key(key).hex() == encoding
    assert f"{key_hash(key):016x}" == hash_hex
    assert [partition_of(key, n) for n in SIZES] == [int(x) for x in modulo.split(",")]
    assert [partition_of(key, n, "jump") for n in SIZES] == [int(x) for x in jump.split(",")]


@pytest.mark.parametrize("row", JUMP_VECTORS, ids=[f"{r[0]}-{r[1]}" for r in JUMP_VECTORS])
def test_jump_vector(row: list[str]) -> None:
    value, n, bucket = row
    assert jump_bucket(int(value, 16), int(n)) == int(bucket)


def test_the_docstring_examples_hold() -> None:
    result = doctest.testmod(vfcore.routing.partition, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 10
    assert result.failed == 0


# -- keys that are not keys ------------------------------------------------------

INVALID_KEYS = {
    "None": None,
    "empty str": "",
    "empty bytes": b"",
    "list": [],
    "list of a key": ["camera-1"],
    "tuple": ("a", 1),
    "dict": {"camera": 1},
    "NaN": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "object()": object(),
    "complex": 1 + 2j,
    "bytearray (mutable)": bytearray(b"7"),
    "memoryview": memoryview(b"7"),
    "lone surrogate": "a\ud800b",
    "set": {1},
}


@pytest.mark.parametrize("value", INVALID_KEYS.values(), ids=INVALID_KEYS.keys())
def test_an_invalid_key_is_refused_with_its_value_and_the_remedy(value: object) -> None:
    for call in (
        lambda: partition_of(value, 4),  # type: ignore[arg-type]
        lambda: partition_of(value, 4, "jump"),  # type: ignore[arg-type]
        lambda: encode_key(value),  # type: ignore[arg-type]
        lambda: key_hash(value),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidKeyError) as info:
            call()
        error = info.value
        assert isinstance(error, ValueError) and isinstance(error, VfError)
        assert error.rule == "invalid-partition-key"
        assert error.value is value
        assert repr(value) in str(error)
        assert "ctx.set_partition_key" in error.hint and "trace_id" in error.hint


def test_a_huge_unprintable_invalid_key_still_gets_a_message() -> None:
    class Unprintable:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    with pytest.raises(InvalidKeyError, match="<Unprintable object> is not a partition key"):
        partition_of(Unprintable(), 2)  # type: ignore[arg-type]
    with pytest.raises(InvalidKeyError, match=r"\.\.\. is not a partition key"):
        partition_of(["x" * 500], 2)  # type: ignore[arg-type]


class Camera(enum.IntEnum):
    FRONT = 7


class Lane(enum.StrEnum):
    LEFT = "7"


class Tag(bytes):
    pass


@pytest.mark.parametrize(
    ("key", "plain"),
    [(Camera.FRONT, 7), (Lane.LEFT, "7"), (Tag(b"7"), b"7")],
    ids=["IntEnum keys as its int", "StrEnum keys as its str", "bytes subclass as bytes"],
)
def test_a_subclass_keys_as_the_plain_value_it_equals(key: object, plain: object) -> None:
    assert encode_key(key) == encode_key(plain)  # type: ignore[arg-type]
    assert partition_of(key, 16) == partition_of(plain, 16)  # type: ignore[arg-type]


def test_seven_in_four_types_is_four_keys_and_true_is_not_one() -> None:
    assert len({encode_key(k) for k in (7, "7", b"7", 7.0, True, 1, "True")}) == 7
    assert encode_key(-0.0) == encode_key(0.0)


# -- replica counts and strategies ---------------------------------------------

BAD_COUNTS = {
    "zero": 0,
    "negative": -3,
    "True (a bool)": True,
    "False": False,
    "float": 2.0,
    "str": "4",
    "None": None,
}


@pytest.mark.parametrize("n", BAD_COUNTS.values(), ids=BAD_COUNTS.keys())
@pytest.mark.parametrize("strategy", ["modulo", "jump"])
def test_a_bad_replica_count_is_refused(n: object, strategy: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        partition_of("camera-1", n, strategy)  # type: ignore[arg-type]
    assert info.value.rule == "invalid-replica-count"
    assert repr(n) in info.value.message
    assert not isinstance(info.value, InvalidKeyError)


def test_jump_takes_up_to_2_31_minus_1_replicas_and_modulo_any_count() -> None:
    assert 0 <= partition_of("k", JUMP_MAX_REPLICAS, "jump") < JUMP_MAX_REPLICAS
    with pytest.raises(InvalidInputError, match="at most 2147483647") as info:
        partition_of("k", JUMP_MAX_REPLICAS + 1, "jump")
    assert info.value.rule == "invalid-replica-count"
    assert partition_of("k", 2**70) == key_hash("k")  # a 64-bit hash is below 2**70


@pytest.mark.parametrize("strategy", ["ring", "MODULO", "", None, 1])
def test_an_unknown_strategy_is_refused(strategy: object) -> None:
    with pytest.raises(InvalidInputError) as info:
        partition_of("k", 4, strategy)  # type: ignore[arg-type]
    assert info.value.rule == "invalid-partition-strategy"
    assert repr(strategy) in info.value.message
    with pytest.raises(InvalidInputError, match="invalid-partition-strategy"):
        moved_fraction(4, 5, strategy, keys=["k"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="invalid-partition-strategy"):
        expected_moved_fraction(4, 5, strategy)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [-1, 2**64, 1.0, True, "1"])
def test_jump_bucket_takes_only_unsigned_64_bit_ints(value: object) -> None:
    with pytest.raises(InvalidInputError) as info:
        jump_bucket(value, 4)  # type: ignore[arg-type]
    assert info.value.rule == "invalid-hash-value"


def test_moved_fraction_needs_keys_and_valid_counts() -> None:
    with pytest.raises(InvalidInputError) as info:
        moved_fraction(4, 5, "jump", keys=[])
    assert info.value.rule == "empty-key-sample"
    with pytest.raises(InvalidInputError, match="invalid-replica-count"):
        moved_fraction(0, 5, keys=["k"])
    with pytest.raises(InvalidKeyError):
        moved_fraction(4, 5, keys=["k", None])  # type: ignore[list-item]
    assert moved_fraction(4, 5, "modulo", keys=iter(["a", "b"])) in (0.0, 0.5, 1.0)


@pytest.mark.parametrize(
    ("n_from", "n_to", "modulo", "jump"),
    [(4, 5, 0.8, 0.2), (5, 4, 0.8, 0.2), (4, 8, 0.5, 0.5), (16, 17, 16 / 17, 1 / 17), (3, 3, 0, 0)],
    ids=["4 to 5", "5 to 4", "doubling", "16 to 17", "no change moves nothing"],
)
def test_expected_moved_fraction_table(n_from: int, n_to: int, modulo: float, jump: float) -> None:
    assert math.isclose(expected_moved_fraction(n_from, n_to, "modulo"), modulo)
    assert math.isclose(expected_moved_fraction(n_from, n_to, "jump"), jump)


# -- the key of a message, for a node --------------------------------------------

TRACKER = NodeSpec("tracker", "processor", nb_tasks=4, partition_by="camera")
JOIN = NodeSpec("join", "processor", parents=("a", "b"), nb_tasks=3, partition_by="trace_id")


def test_a_node_partitioned_by_trace_id_takes_the_trace_id() -> None:
    assert partition_key(JOIN, trace_id="t-1", metadata={"camera": "c"}) == "t-1"
    assert owner_of(JOIN, trace_id="t-1") == partition_of("t-1", 3)
    assert owner_of(JOIN, trace_id="t-1", strategy="jump") == partition_of("t-1", 3, "jump")


def test_a_node_partitioned_by_a_field_takes_the_field_set_upstream() -> None:
    metadata = {"camera": 17, "lane": "left"}
    assert partition_key(TRACKER, trace_id="t-1", metadata=metadata) == 17
    assert owner_of(TRACKER, trace_id="t-1", metadata=metadata) == partition_of(17, 4)
    assert metadata == {"camera": 17, "lane": "left"}  # not mutated


def test_owner_of_uses_the_effective_replica_count() -> None:
    one_task = NodeSpec("t", "one-task-processor", nb_tasks=5, partition_by="trace_id")
    assert owner_of(one_task, trace_id="t-9") == partition_of("t-9", 5)
    single = NodeSpec("s", "processor", nb_tasks=1, partition_by="trace_id")
    assert owner_of(single, trace_id="t-9") == 0


def test_a_missing_field_names_the_node_the_field_and_the_setter() -> None:
    with pytest.raises(InvalidKeyError) as info:
        owner_of(TRACKER, trace_id="t-1", metadata={"lane": "left"})
    error = info.value
    assert (error.node, error.field, error.value, error.missing) == (
        "tracker",
        "camera",
        None,
        True,
    )
    assert "node 'tracker', field 'camera': no partition key:" in str(error)
    assert "no metadata field 'camera' (fields set: lane)" in error.message
    assert "ctx.set_partition_key('camera', value)" in error.hint
    assert "sets_keys" in error.hint


@pytest.mark.parametrize("value", [None, "", [], math.nan], ids=["None", "empty", "list", "NaN"])
def test_an_invalid_field_value_names_the_node_the_field_and_the_value(value: object) -> None:
    with pytest.raises(InvalidKeyError) as info:
        partition_key(TRACKER, metadata={"camera": value})
    error = info.value
    assert (error.node, error.field, error.missing) == ("tracker", "camera", False)
    assert error.value is value
    assert f"node 'tracker', field 'camera': {value!r} is not a partition key" in error.message


def test_a_message_without_a_trace_id_is_refused_for_a_trace_partitioned_node() -> None:
    with pytest.raises(InvalidKeyError, match="no trace id") as info:
        owner_of(JOIN, metadata={"camera": 1})
    assert (info.value.field, info.value.missing) == ("trace_id", True)
    assert "node 'join', field 'trace_id': no partition key: the message has no trace id" in str(
        info.value
    )
    with pytest.raises(InvalidKeyError, match="''"):
        owner_of(JOIN, trace_id="")


def test_an_unpartitioned_node_has_no_owner() -> None:
    plain = NodeSpec("detector", "processor", nb_tasks=4)
    with pytest.raises(InvalidInputError) as info:
        owner_of(plain, trace_id="t-1")
    assert info.value.rule == "node-not-partitioned"
    assert "'detector'" in info.value.message
    assert "partition_by" in info.value.hint


def test_errors_render_rule_message_and_hint() -> None:
    with pytest.raises(InvalidKeyError) as info:
        partition_of(None, 2)  # type: ignore[arg-type]
    assert re.match(
        r"invalid-partition-key: None is not a partition key: .*\(hint: ", str(info.value)
    )


# -- the jump strategy's bound -----------------------------------------------------------------------

H = key_hash("camera-17")


def test_jump_takes_exactly_up_to_2_31_minus_1_replicas():
    assert 0 <= jump_bucket(H, JUMP_MAX_REPLICAS) < JUMP_MAX_REPLICAS
    assert 0 <= partition_of("camera-17", JUMP_MAX_REPLICAS, "jump") < JUMP_MAX_REPLICAS
    for call in (
        lambda: jump_bucket(H, 2**31),
        lambda: partition_of("camera-17", 2**31, "jump"),
        lambda: expected_moved_fraction(2**31, 4, "jump"),
        lambda: expected_moved_fraction(4, 2**31, "jump"),
        lambda: moved_fraction(2**31, 4, "jump", keys=["a"]),
        lambda: moved_fraction(4, 2**31, "jump", keys=["a"]),
    ):
        with pytest.raises(InvalidInputError) as info:
            call()
        assert info.value.rule == "invalid-replica-count"
        assert info.value.message == (
            f"the jump strategy takes at most {JUMP_MAX_REPLICAS} replicas, got {2**31}"
        )
        assert info.value.hint == "use strategy='modulo' beyond 2**31 - 1 replicas"


def test_modulo_has_no_such_bound():
    assert partition_of("camera-17", 2**31) == H % 2**31
    assert expected_moved_fraction(2**31, 2**31) == 0.0
    assert moved_fraction(2**31, 2**31 + 1, keys=["a"]) in (0.0, 1.0)


# -- a bad strategy --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: partition_of("k", 4, "ring"),  # type: ignore[arg-type]
        lambda: moved_fraction(4, 5, "ring", keys=["k"]),  # type: ignore[arg-type]
        lambda: expected_moved_fraction(4, 5, "ring"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_strategy_is_named_with_the_choices(call):
    with pytest.raises(InvalidInputError) as info:
        call()
    assert info.value.rule == "invalid-partition-strategy"
    assert info.value.message == "strategy 'ring' is not one of modulo, jump"
    assert info.value.hint == (
        "use strategy='modulo' (the default) or strategy='jump' "
        "(moves only 1/(n+1) of the keys when n grows by one)"
    )


# -- the key of a message --------------------------------------------------------------------------


def test_a_node_without_partition_by_has_no_key():
    with pytest.raises(InvalidInputError) as info:
        partition_key(NodeSpec("w", "processor"), trace_id="t")
    assert info.value.rule == "node-not-partitioned"
    assert info.value.message == (
        "node 'w' has no partition_by, so its messages have no owner: any replica may take any "
        "message"
    )
    assert info.value.hint == (
        "set partition_by='trace_id' (or a metadata field) on the node to make replicas own keys"
    )


def test_a_message_without_a_trace_id_says_so():
    node = NodeSpec("t", "processor", nb_tasks=4, partition_by="trace_id")
    with pytest.raises(InvalidKeyError) as info:
        partition_key(node)
    assert info.value.missing is True
    assert info.value.message == (
        "node 't', field 'trace_id': no partition key: the message has no trace id"
    )
    assert info.value.hint == (
        "pass the message's trace_id; every message a producer emits carries one"
    )


def test_a_message_without_its_metadata_field_lists_the_fields_it_has():
    node = NodeSpec("t", "processor", nb_tasks=4, partition_by="camera")
    with pytest.raises(InvalidKeyError) as info:
        partition_key(node, metadata={"zone": 1, "lane": 2})
    assert info.value.message == (
        "node 't', field 'camera': no partition key: the message has no metadata field "
        "'camera' (fields set: lane, zone)"
    )
    with pytest.raises(InvalidKeyError) as info:
        partition_key(node)
    assert info.value.message.endswith("(fields set: none)")


def test_an_invalid_key_value_keeps_its_reason_node_and_field():
    node = NodeSpec("t", "processor", nb_tasks=4, partition_by="camera")
    with pytest.raises(InvalidKeyError) as info:
        partition_key(node, metadata={"camera": None})
    err = info.value
    assert (err.value, err.node, err.field, err.missing) == (None, "t", "camera", False)
    assert err.reason == "a NoneType is not one of str, bytes, int, bool or a finite float"
    assert err.message == (
        "node 't', field 'camera': None is not a partition key: a NoneType is not one of str, "
        "bytes, int, bool or a finite float"
    )


def test_an_invalid_key_error_without_a_field_names_only_the_node():
    err = InvalidKeyError([1], "a list is not a key", node="t")
    assert err.message == "node 't': [1] is not a partition key: a list is not a key"
    assert err.reason == "a list is not a key"
    bare = InvalidKeyError([1], "a list is not a key")
    assert bare.message == "[1] is not a partition key: a list is not a key"


def test_a_long_value_is_cut_to_80_characters():
    exactly = "x" * 78  # repr 80 characters: shown whole
    assert InvalidKeyError(exactly, "r").message == f"{exactly!r} is not a partition key: r"
    longer = "x" * 79  # repr 81: cut to 77 characters and "..."
    assert InvalidKeyError(longer, "r").message == (
        repr(longer)[:77] + "... is not a partition key: r"
    )


def test_moved_fraction_needs_a_key_to_measure():
    with pytest.raises(InvalidInputError) as info:
        moved_fraction(4, 5, keys=[])
    assert info.value.rule == "empty-key-sample"
    assert info.value.message == "moved_fraction needs at least one key to measure, got none"
    assert info.value.hint == "pass a sample of the keys the node sees (e.g. recent trace ids)"


@pytest.mark.parametrize("bad", [-1, 2**64, 1.0, "7", True])
def test_jump_bucket_needs_an_unsigned_64_bit_int(bad: object):
    with pytest.raises(InvalidInputError) as info:
        jump_bucket(bad, 4)  # type: ignore[arg-type]
    assert info.value.rule == "invalid-hash-value"
    assert info.value.message == f"jump_bucket needs an unsigned 64-bit int, got {bad!r}"
    assert info.value.hint == "pass key_hash(key), or use partition_of(key, n, 'jump')"
    assert jump_bucket(2**64 - 1, 4) in range(4) and jump_bucket(0, 4) == 0


@pytest.mark.parametrize("bad", [0, -3, 2.0, "4", True])
def test_a_bad_replica_count_is_named(bad: object):
    for call in (
        lambda: jump_bucket(H, bad),  # type: ignore[arg-type]
        lambda: partition_of("k", bad),  # type: ignore[arg-type]
        lambda: expected_moved_fraction(bad, 4),  # type: ignore[arg-type]
        lambda: moved_fraction(4, bad, keys=["k"]),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidInputError) as info:
            call()
        assert info.value.rule == "invalid-replica-count"
        assert info.value.message == f"the replica count must be an int >= 1, got {bad!r}"
        assert info.value.hint == "pass the node's replica count (vfcore.effective_replicas(node))"
