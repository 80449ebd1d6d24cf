"""Our replica rule: :func:`decide_replicas` and the :class:`ReplicaDecision` it answers.

For each parent, ``lag = pending + ack_pending`` asks for ``ceil(lag / target)``
replicas; the decision is the largest ask, clamped to ``[min_replicas,
max_replicas]``. An unobserved parent makes the decision unknown (its
``floor`` is what the known parents justify); the diagnosis is ``idle``,
``backlog``, ``starved``, ``unknown`` or ``capacity-capped`` (see the package
docstring and docs/scaling.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.cluster import Unknown as ClusterUnknown
from vfcore.errors import InvalidInputError
from vfcore.flow.join_policy import JoinPolicy
from vfcore.scaling.capacity import CapacityCap
from vfcore.scaling.observations import (
    NOT_OBSERVED,
    Backlog,
    Observation,
    Unobserved,
    as_observation,
    is_int,
)

#: KEDA's nats-jetstream ``lagThreshold`` default: messages one replica may have waiting.
DEFAULT_LAG_THRESHOLD = 10
#: The ``--max-replicas`` default (videoflow's and ours).
DEFAULT_MAX_REPLICAS = 10

Status = Literal["known", "unknown"]
Diagnosis = Literal["idle", "backlog", "starved", "unknown", "capacity-capped"]


def check_scaling_rule(target: object, min_replicas: object, max_replicas: object) -> None:
    """Raise ``invalid-scaling-rule`` unless ``target >= 1``, ``min >= 1`` and ``max >= min``.

    Every problem is named at once, each with its numbers and a fix.
    """
    if (
        type(target) is int
        and type(min_replicas) is int
        and type(max_replicas) is int
        and target >= 1
        and 1 <= min_replicas <= max_replicas
    ):
        return
    problems: list[str] = []
    fixes: list[str] = []
    if not is_int(target) or target < 1:  # type: ignore[operator]
        problems.append(f"target={target!r} must be an int >= 1 (messages per replica)")
        fixes.append("use the trigger's lagThreshold, e.g. target=10")
    if not is_int(min_replicas) or min_replicas < 1:  # type: ignore[operator]
        problems.append(f"min_replicas={min_replicas!r} must be an int >= 1")
        fixes.append("use the node's nb_tasks (at least 1); KEDA alone handles 0 <-> 1")
    if not is_int(max_replicas) or max_replicas < 1:  # type: ignore[operator]
        problems.append(f"max_replicas={max_replicas!r} must be an int >= 1")
        fixes.append("pass --max-replicas with a positive count, e.g. 10")
    elif is_int(min_replicas) and max_replicas < min_replicas:  # type: ignore[operator]
        problems.append(f"max_replicas={max_replicas} is below min_replicas={min_replicas}")
        fixes.append(f"raise max_replicas to at least {min_replicas}, or lower min_replicas")
    raise InvalidInputError("invalid-scaling-rule", "; ".join(problems), "; ".join(fixes))


@dataclass(frozen=True, slots=True)
class ParentLoad:
    """One parent in a decision: its numbers and what it asks for (``None`` when unobserved)."""

    parent: str
    pending: int | None
    ack_pending: int | None
    lag: int | None
    wants: int | None
    unknown_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.unknown_reason is not None:
            return {"unknown": self.unknown_reason}
        return {
            "pending": self.pending,
            "ack_pending": self.ack_pending,
            "lag": self.lag,
            "wants": self.wants,
        }


@dataclass(frozen=True, slots=True)
class ReplicaDecision:
    """How many replicas a node should run, and why (the answer of :func:`decide_replicas`).

    ``replicas`` is ``None`` exactly when ``status == 'unknown'``. ``floor`` is
    the clamped maximum over the *known* parents: for a known decision it is
    the decision before any capacity cap; for an unknown one, the least the
    true decision can be. ``observed`` holds every parent's observation in name
    order (the decision is canonical: it does not depend on the order parents
    were given in). ``capacity`` is the largest placeable count when a
    cluster cap was applied or checked.
    """

    status: Status
    replicas: int | None
    floor: int
    diagnosis: Diagnosis
    target: int
    min_replicas: int
    max_replicas: int
    observed: tuple[tuple[str, Observation], ...]
    unknown_parents: tuple[str, ...]
    starved_parents: tuple[str, ...]
    backed_up_parents: tuple[str, ...]
    capacity: int | None = None
    capacity_detail: CapacityCap | None = None
    join_policy: JoinPolicy | None = None

    @property
    def is_known(self) -> bool:
        return self.status == "known"

    @property
    def is_join(self) -> bool:
        return len(self.observed) >= 2

    @property
    def is_capped(self) -> bool:
        """The cluster cannot place what the backlog asks for (``replicas < floor``)."""
        return self.replicas is not None and self.replicas < self.floor

    @property
    def parents(self) -> tuple[ParentLoad, ...]:
        out = []
        for name, obs in self.observed:
            if isinstance(obs, Backlog):
                lag = obs.pending + obs.ack_pending
                out.append(
                    ParentLoad(name, obs.pending, obs.ack_pending, lag, -(-lag // self.target))
                )
            else:
                out.append(ParentLoad(name, None, None, None, None, obs.reason))
        return tuple(out)

    def next_replicas(self, current: int, *, policy: Literal["hold", "up-only"] = "hold") -> int:
        """The count to run next, from ``current``.

        Known: ``replicas``. Unknown: ``hold`` keeps ``current``; ``up-only``
        may rise to ``floor`` (what the known parents already justify). Neither
        ever lowers ``current`` while a parent is unobserved.

        >>> d = decide_replicas({"a": Backlog(60, 0), "b": Unobserved("timeout")},
        ...                     target=10, min_replicas=1, max_replicas=10)
        >>> d.replicas, d.floor, d.next_replicas(4), d.next_replicas(4, policy="up-only")
        (None, 6, 4, 6)
        """
        if not is_int(current) or current < 0:
            raise InvalidInputError(
                "invalid-current-replicas",
                f"current={current!r} must be a replica count >= 0",
                "pass the number of replicas the node runs now",
            )
        if self.replicas is not None:
            return self.replicas
        if policy == "hold":
            return current
        if policy == "up-only":
            return max(current, self.floor)
        raise InvalidInputError(
            "invalid-unknown-policy",
            f"policy={policy!r} is not a way to act on an unknown decision",
            "use policy='hold' (keep the count) or policy='up-only' (rise to the floor)",
        )

    @property
    def message(self) -> str:
        """One sentence with the numbers that decided it."""
        loads = self.parents
        shown = ", ".join(
            f"{p.parent} lag {p.lag} → {p.wants}"
            if p.unknown_reason is None
            else f"{p.parent} unknown ({p.unknown_reason})"
            for p in loads
        )
        rng = f"[{self.min_replicas}, {self.max_replicas}]"
        if not loads:
            return "no parent was observed: the backlog is unknown"
        if self.status == "unknown":
            return (
                f"unknown: {len(self.unknown_parents)} of {len(loads)} parent(s) unobserved "
                f"({shown}); the known parents alone justify {self.floor} (clamped to {rng})"
            )
        head = f"max over parents of ceil(lag / {self.target}) clamped to {rng} = {self.floor}"
        text = f"{head} ({shown})"
        if self.is_capped:
            text += (
                f"; capped at {self.replicas}: only {self.capacity} replica(s) can be "
                "placed on the cluster with the rest of the flow in place"
            )
        if self.diagnosis == "starved":
            text += (
                f"; starved join: {_they(self.starved_parents, 'has', 'have')} nothing pending "
                f"while {_they(self.backed_up_parents, 'backs', 'back')} up"
            )
        return text

    @property
    def hint(self) -> str | None:
        """What to do about it, when there is something to do."""
        if self.status == "unknown":
            return (
                f"restore the broker's monitoring for {', '.join(self.unknown_parents)}; "
                "meanwhile hold the current count (KEDA: fallback.behavior currentReplicas)"
            )
        if self.diagnosis == "starved":
            policy = self.join_policy
            if policy is not None and _repairs_starvation(policy):
                return (
                    f"the join already has a repairing policy ({policy.describe()}): waiting "
                    f"halves leave after the timeout; find out why {_they(self.starved_parents, 'produces', 'produce')} nothing"
                )
            current = f" (now: {policy.describe()})" if policy is not None else ""
            return (
                "more replicas cannot drain a starved join; give it a join policy with a "
                "timeout that drops the waiting halves, or a quorum (time mode)"
                f"{current}, e.g. JoinPolicy(mode='trace', timeout_ms=10000, missing='drop'), "
                f"and find out why {_they(self.starved_parents, 'produces', 'produce')} nothing"
            )
        if self.is_capped:
            detail = self.capacity_detail
            if detail is not None and detail.unlock:
                return detail.unlock
            return "free GPU capacity or add a GPU node to place more replicas"
        return None

    def to_dict(self) -> dict[str, Any]:
        detail = self.capacity_detail
        return {
            "status": self.status,
            "replicas": self.replicas,
            "floor": self.floor,
            "diagnosis": self.diagnosis,
            "target": self.target,
            "min_replicas": self.min_replicas,
            "max_replicas": self.max_replicas,
            "parents": {p.parent: p.to_dict() for p in self.parents},
            "unknown_parents": list(self.unknown_parents),
            "starved_parents": list(self.starved_parents),
            "backed_up_parents": list(self.backed_up_parents),
            "capacity": self.capacity,
            "capacity_detail": None if detail is None else detail.to_dict(),
            "message": self.message,
            "hint": self.hint,
        }


def _they(names: Sequence[str], singular: str, plural: str) -> str:
    """``('a',)`` → ``'a has'``; ``('a', 'b')`` → ``'a, b have'``."""
    return f"{', '.join(names)} {singular if len(names) == 1 else plural}"


def _repairs_starvation(policy: JoinPolicy) -> bool:
    """A timeout that lets waiting halves go (drop or error), or a quorum, unblocks a join."""
    return (policy.timeout_ms is not None and policy.missing != "wait") or policy.quorum is not None


def decide_replicas(
    observations: Mapping[str, Observation | ClusterUnknown],
    *,
    target: int = DEFAULT_LAG_THRESHOLD,
    min_replicas: int = 1,
    max_replicas: int = DEFAULT_MAX_REPLICAS,
    required: Iterable[str] = (),
    join_policy: JoinPolicy | None = None,
    capacity: int | CapacityCap | None = None,
) -> ReplicaDecision:
    """The replica count a node's observed backlog calls for.

    ``observations`` maps each parent to :class:`Backlog` or :class:`Unobserved`;
    a parent in ``required`` that is missing counts as unobserved. ``target``
    is the lag one replica absorbs (KEDA's ``lagThreshold``). ``capacity`` (an
    int, or a :func:`capacity_cap` result) caps a known decision at what the
    cluster can place, never below ``min_replicas``. ``join_policy`` only
    shapes the hint of a starved join.

    >>> d = decide_replicas({"a": Backlog(15, 0), "b": Backlog(40, 2), "c": Backlog(3, 0)},
    ...                     target=10, min_replicas=1, max_replicas=10)
    >>> d.replicas, d.diagnosis
    (5, 'backlog')
    >>> decide_replicas({"left": Backlog(0, 0), "right": Backlog(120, 0)},
    ...                 target=10, min_replicas=1, max_replicas=10).starved_parents
    ('left',)
    """
    check_scaling_rule(target, min_replicas, max_replicas)
    names = sorted(set(observations).union(required)) if required else sorted(observations)
    observed: list[tuple[str, Observation]] = []
    unknown: list[str] = []
    empty: list[str] = []
    backed: list[str] = []
    most = 0
    get = observations.get
    for name in names:
        obs = get(name)
        if type(obs) is not Backlog:
            obs = as_observation(name, obs) if obs is not None else Unobserved(NOT_OBSERVED)
            if type(obs) is Unobserved:
                unknown.append(name)
                observed.append((name, obs))
                continue
        lag = obs.pending + obs.ack_pending  # type: ignore[union-attr]
        if lag == 0:
            empty.append(name)
        else:
            if lag >= target:
                backed.append(name)
            wants = -(-lag // target)
            if wants > most:
                most = wants
        observed.append((name, obs))
    floor = min_replicas if most < min_replicas else (max_replicas if most > max_replicas else most)
    starved = tuple(empty) if len(names) >= 2 and empty and backed else ()
    backed_up = tuple(backed) if starved else ()
    limit = capacity.limit if isinstance(capacity, CapacityCap) else capacity
    if limit is not None and (not is_int(limit) or limit < 0):
        raise InvalidInputError(
            "invalid-capacity",
            f"capacity={limit!r} must be a replica count >= 0",
            "pass the largest placeable count, e.g. from capacity_cap(...)",
        )
    detail = capacity if isinstance(capacity, CapacityCap) else None
    if unknown or not names:
        return ReplicaDecision(
            "unknown",
            None,
            floor,
            "unknown",
            target,
            min_replicas,
            max_replicas,
            tuple(observed),
            tuple(unknown),
            starved,
            backed_up,
            limit,
            detail,
            join_policy,
        )
    replicas = floor
    diagnosis: Diagnosis = "backlog" if most else "idle"
    if limit is not None and floor > limit:
        replicas = limit if limit > min_replicas else min_replicas
        if replicas < floor:
            diagnosis = "capacity-capped"
    if starved:
        diagnosis = "starved"
    return ReplicaDecision(
        "known",
        replicas,
        floor,
        diagnosis,
        target,
        min_replicas,
        max_replicas,
        tuple(observed),
        (),
        starved,
        backed_up,
        limit,
        detail,
        join_policy,
    )
