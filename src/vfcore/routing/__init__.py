"""Routing: which messages go where — joins (grouping a node's parents' messages) and partitioning.

:mod:`vfcore.routing.joins` holds the join assembler, a pure state machine that
groups the messages of a join's parents by its :class:`vfcore.JoinPolicy`;
:mod:`vfcore.routing.groups` the messages, groups and drops it takes and hands
back. The policy itself is part of the flow (:mod:`vfcore.flow.join_policy`).
:mod:`vfcore.routing.partition` hashes keys and says which replica of a
partitioned node owns each one.
"""

from vfcore.routing.groups import (
    DROP_REASONS,
    Dropped,
    DropReason,
    Group,
    JoinOutput,
    Message,
    group_id_of,
)
from vfcore.routing.joins import JoinAssembler
from vfcore.routing.partition import (
    JUMP_MAX_REPLICAS,
    STRATEGIES,
    InvalidKeyError,
    PartitionKey,
    Strategy,
    encode_key,
    expected_moved_fraction,
    jump_bucket,
    key_hash,
    moved_fraction,
    owner_of,
    partition_key,
    partition_of,
)

__all__ = [
    "DROP_REASONS",
    "JUMP_MAX_REPLICAS",
    "STRATEGIES",
    "DropReason",
    "Dropped",
    "Group",
    "InvalidKeyError",
    "JoinAssembler",
    "JoinOutput",
    "Message",
    "PartitionKey",
    "Strategy",
    "encode_key",
    "expected_moved_fraction",
    "group_id_of",
    "jump_bucket",
    "key_hash",
    "moved_fraction",
    "owner_of",
    "partition_key",
    "partition_of",
]
