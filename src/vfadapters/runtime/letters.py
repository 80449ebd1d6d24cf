"""The dead-letter record: one schema for both transports.

A node gives an item up when its code keeps raising (after ``retries`` more
attempts), when the item cannot be routed to a partitioned child (its key is
invalid), when a join's half never meets its counterpart (BATCH), or when an
input record cannot be decoded. Each time, the worker writes one
:class:`DeadLetter`: a JSON line in the local run's dead-letter file, or a
message on the run's dead-letter stream (the record's JSON in the
``Vf-Dead-Letter`` header, the item's envelope as the body so it can be
replayed).

``id`` names the item (:func:`vfcore.runtime.delivery.letter_id`): a worker
that handles a redelivered input writes the same ids, and a sink stores an id
once, so a crash never doubles a letter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["DeadLetter"]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One given-up item (see the module docstring).

    ``reason``: ``raised`` (the node kept raising), ``unroutable to <child>``,
    ``join-incomplete`` / ``join-evicted`` / ``join-error``,
    ``record-undecodable``, or ``record-unauthenticated`` (a broker record whose
    seal does not verify under the run's key: never decoded); ``parent``: the edge it came in by (None for a
    join's group, or a producer's item); ``payload``: a short repr for people;
    ``replayable``: whether its envelope was kept for ``vf dead-letters --replay``.
    """

    id: str
    run: str
    node: str
    replica: int
    parent: str | None
    trace_id: Any
    reason: str
    error: str
    traceback: str | None
    attempts: int
    payload: str | None
    time: float
    replayable: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run": self.run,
            "node": self.node,
            "replica": self.replica,
            "parent": self.parent,
            "trace_id": self.trace_id,
            "reason": self.reason,
            "error": self.error,
            "traceback": self.traceback,
            "attempts": self.attempts,
            "payload": self.payload,
            "time": self.time,
            "replayable": self.replayable,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=repr)
