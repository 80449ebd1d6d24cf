"""Routing: which messages go where — joins (grouping a node's parents' messages) and partitioning.

:mod:`vfcore.routing.joins` holds the join assembler, a pure state machine that
groups the messages of a join's parents by its :class:`vfcore.JoinPolicy`;
:mod:`vfcore.routing.groups` the messages, groups and drops it takes and hands
back. The policy itself is part of the flow (:mod:`vfcore.join_policy`).
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

__all__ = [
    "DROP_REASONS",
    "DropReason",
    "Dropped",
    "Group",
    "JoinAssembler",
    "JoinOutput",
    "Message",
    "group_id_of",
]
