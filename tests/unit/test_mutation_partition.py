"""Cases that kill mutants of vfcore.routing.partition (issue 18, docs/testing.md).

The jump strategy's replica bound at exactly ``2**31 - 1`` (``jump_bucket(h,
2**31)`` is refused, in every function that takes a strategy), and the exact
texts of every refusal: a bad strategy, a node without ``partition_by``, a
message without its key, an invalid key value (with its node, field and
reason), and how a long value is cut in a message.
"""

from __future__ import annotations

import pytest

from vfcore import InvalidInputError, NodeSpec
from vfcore.routing.partition import (
    JUMP_MAX_REPLICAS,
    InvalidKeyError,
    expected_moved_fraction,
    jump_bucket,
    key_hash,
    moved_fraction,
    partition_key,
    partition_of,
)

H = key_hash("camera-17")


# -- the jump strategy's bound -----------------------------------------------------------------------


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
