"""What was observed of a node's parents: :class:`Backlog`, :class:`Unobserved`,
and the ``--observations`` document of docs/scaling.md parsed into them.

A parent is either a backlog (``pending`` and ``ack_pending``, both required: a
count that could not be read is ``Unobserved(reason)``, never 0) or unobserved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vfcore.cluster import Unknown as ClusterUnknown
from vfcore.errors import InvalidInputError, brief
from vfcore.flow.params import MAX_REPLICAS_PER_NODE


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: The largest message count a backlog may hold: JetStream's counters
#: (``num_pending``, ``num_ack_pending``) are unsigned 64-bit integers. A larger
#: number is no count a server can report, and would pass a float's range in the
#: HPA model (``10**308`` messages).
MAX_BACKLOG = 2**64 - 1
#: The largest replica count (``current``): the most replicas vfcore plans for one
#: node (``MAX_REPLICAS_PER_NODE``), which bounds what ``vf scale --cluster`` packs.
MAX_CURRENT = MAX_REPLICAS_PER_NODE


@dataclass(frozen=True, slots=True)
class Backlog:
    """One parent's stream as the node's consumer sees it.

    ``pending``: messages not yet delivered to any replica (``num_pending``);
    ``ack_pending``: delivered but not yet acknowledged (``num_ack_pending``).

    >>> Backlog(pending=120, ack_pending=3).lag
    123
    """

    pending: int
    ack_pending: int

    def __post_init__(self) -> None:
        for name in ("pending", "ack_pending"):
            value = getattr(self, name)
            if not is_int(value) or not 0 <= value <= MAX_BACKLOG:
                raise InvalidInputError(
                    "invalid-backlog",
                    f"{name}={brief(value)} must be a whole number of messages, 0 .. 2**64-1 "
                    "(JetStream counts in unsigned 64 bits)",
                    "pass the consumer's num_pending and num_ack_pending as integers; "
                    "if they could not be read, observe the parent as Unobserved(reason)",
                )

    @property
    def lag(self) -> int:
        """``pending + ack_pending``: KEDA's nats-jetstream metric."""
        return self.pending + self.ack_pending

    def to_dict(self) -> dict[str, int]:
        return {"pending": self.pending, "ack_pending": self.ack_pending}


@dataclass(frozen=True, slots=True)
class Unobserved:
    """A parent whose backlog could not be read (docs/scaling.md's ``Unknown(reason)``).

    It is never read as zero: a decision with an unobserved parent is unknown.
    (:class:`vfcore.Unknown`, the cluster's unknown fact, is accepted too.)

    >>> Unobserved("nats monitoring timed out after 5 s").to_dict()
    {'unknown': 'nats monitoring timed out after 5 s'}
    """

    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"unknown": self.reason}


Observation = Backlog | Unobserved
NOT_OBSERVED = "required but not observed"


def as_observation(parent: str, value: object) -> Observation:
    if isinstance(value, Backlog | Unobserved):
        return value
    if isinstance(value, ClusterUnknown):
        return Unobserved(value.reason)
    raise InvalidInputError(
        "invalid-observation",
        f"parent {parent!r} is observed as {type(value).__name__} {value!r}",
        "observe each parent as Backlog(pending, ack_pending) or Unobserved(reason)",
    )


# -- the observations document ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeObservation:
    """One node's entry of an observations file: its current count and each parent's backlog."""

    current: int | None
    parents: tuple[tuple[str, Observation], ...]

    @property
    def parents_map(self) -> dict[str, Observation]:
        return dict(self.parents)

    def to_dict(self) -> dict[str, Any]:
        return {
            "current": self.current,
            "parents": {p: o.to_dict() for p, o in self.parents},
        }


def _obs_error(where: str, problem: str) -> InvalidInputError:
    return InvalidInputError(
        "invalid-observations",
        f"{where}: {problem}",
        'write it as {"<node>": {"current": 2, "parents": {"<parent>": '
        '{"pending": 120, "ack_pending": 3} or {"unknown": "<reason>"}}}}',
    )


def observations_from_dict(doc: object) -> dict[str, NodeObservation]:
    """Parse an observations document (the ``--observations`` format of docs/scaling.md).

    ``{"<node>": {"current": 2, "parents": {"<parent>": {"pending": 120,
    "ack_pending": 3} | {"unknown": "<reason>"}}}}``. ``current`` may be
    omitted. Both counts are required: a missing ``ack_pending`` is not zero.

    >>> obs = observations_from_dict({"det": {"current": 2, "parents": {
    ...     "cams": {"pending": 120, "ack_pending": 3}}}})
    >>> obs["det"].current, obs["det"].parents_map["cams"].lag
    (2, 123)
    """
    if not isinstance(doc, Mapping):
        raise _obs_error(
            "the document", f"must be a JSON object of nodes, got {type(doc).__name__}"
        )
    out: dict[str, NodeObservation] = {}
    for node, entry in sorted(doc.items()):
        if not isinstance(node, str):
            raise _obs_error("the document", f"node name {node!r} is not a string")
        if not isinstance(entry, Mapping):
            raise _obs_error(node, f"must be an object with 'parents', got {type(entry).__name__}")
        extra = sorted(set(entry) - {"current", "parents"})
        if extra:
            raise _obs_error(node, f"unknown key(s) {extra}; only 'current' and 'parents' are read")
        current = entry.get("current")
        if current is not None and (not is_int(current) or not 0 <= current <= MAX_CURRENT):
            raise _obs_error(
                node, f"current={brief(current)} must be a replica count, 0 .. {MAX_CURRENT:,}"
            )
        parents = entry.get("parents")
        if not isinstance(parents, Mapping):
            raise _obs_error(node, "needs 'parents': an object of parent name → backlog")
        parsed: list[tuple[str, Observation]] = []
        for parent, value in sorted(parents.items()):
            where = f"{node}.parents.{parent}"
            if not isinstance(value, Mapping):
                raise _obs_error(where, f"must be an object, got {type(value).__name__}")
            if "unknown" in value:
                if set(value) != {"unknown"} or not isinstance(value["unknown"], str):
                    raise _obs_error(where, 'an unknown parent is {"unknown": "<reason>"} alone')
                parsed.append((parent, Unobserved(value["unknown"])))
                continue
            if set(value) != {"pending", "ack_pending"}:
                missing = sorted({"pending", "ack_pending"} - set(value))
                extra = sorted(set(value) - {"pending", "ack_pending"})
                what = f"missing {missing}" if missing else f"unknown key(s) {extra}"
                raise _obs_error(
                    where,
                    f"{what}; a backlog has exactly 'pending' and 'ack_pending' "
                    '(a count that could not be read is {"unknown": reason}, never 0)',
                )
            pending, ack = value["pending"], value["ack_pending"]
            for name, count in (("pending", pending), ("ack_pending", ack)):
                if not is_int(count) or not 0 <= count <= MAX_BACKLOG:
                    raise _obs_error(
                        where,
                        f"{name}={brief(count)} must be an int, 0 .. 2**64-1 (JetStream counts "
                        "messages in unsigned 64 bits)",
                    )
            parsed.append((parent, Backlog(pending, ack)))
        out[node] = NodeObservation(current, tuple(parsed))
    return out
