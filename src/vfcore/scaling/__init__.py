"""Replica decisions from observed backlogs, and an exact model of what KEDA and the HPA will do.

**The rule** (:func:`decide_replicas`). A processor's replicas are competing
consumers of its parents' streams. For each parent, *lag* = ``pending +
ack_pending`` (what KEDA's nats-jetstream scaler measures:
``num_pending + num_ack_pending`` of the node's consumer), and the parent asks
for ``ceil(lag / target)`` replicas, ``target`` being the messages one replica
may have waiting (KEDA's ``lagThreshold``, default 10). The decision is the
largest ask over the parents, clamped to ``[min_replicas, max_replicas]``.

Worked example: three parents with lags 15, 42 and 3 at ``target=10`` ask for
2, 5 and 1 replicas; the decision is 5 (inside ``[1, 10]``). A lag of exactly
10 asks for 1 replica; 11 asks for 2; 0 asks for none, so an idle node holds
``min_replicas``.

**Unknown is its own value.** A parent observed as :class:`Unobserved` (its
broker could not be read), or one that is required but absent, makes the
decision ``unknown`` with ``replicas=None``. The known parents' numbers stay
in the answer, and so does their clamped maximum as ``floor``: the true
decision is at least that (an unknown parent can only add demand), so an
up-only policy may scale to it, and nothing may scale below the current count
(:meth:`ReplicaDecision.next_replicas`).

**Diagnosis.** ``idle`` (every lag 0), ``backlog``, ``starved`` (a join whose
parents are unbalanced: some have no message while others hold at least a
replica's worth — the waiting halves need counterparts that are not coming,
and no replica count repairs that; a join policy with a timeout or quorum
does), ``unknown``, and ``capacity-capped`` (a GPU node wants more replicas
than the exact packing can place on the cluster with the rest of the flow in
place; see :func:`capacity_cap`).

**What the cluster will do** (:func:`predict_hpa`). The ScaledObject we render
has one nats-jetstream trigger per parent, and KEDA hands each to the HPA as an
External metric with ``AverageValue = lagThreshold``. The HPA is *not* our
rule: a proposal within the 0.1 tolerance keeps the current count (lag 95 at
threshold 10 and 9 replicas: 95 / 90 = 1.056 → stays 9), scale-downs wait for
the highest recommendation of the last 300 s, scale-ups are rate limited, a
failing trigger allows scale-up but no scale-down, KEDA's fallback feeds a
synthetic metric worth ``threshold × F`` (which goes through the tolerance:
F = 10 at 11 replicas → 10/11 = 0.909 → stays 11), and KEDA alone moves
between 0 and 1 replica. :func:`predict_hpa` replays that logic exactly, one
evaluation at a time, with time and the controllers' memory as arguments;
:func:`compare_with_cluster` says where it departs from :func:`decide_replicas`
and why; :func:`fallback_for_unknown` gives the fallback settings under which
the cluster honours our unknown rule (hold, never scale down).

Nothing here reads a clock: every time is an argument in seconds (``now_s``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from vfcore.cluster import Unknown as ClusterUnknown
from vfcore.errors import InvalidInputError
from vfcore.gpu_mode import GpuMode, parse_gpu_mode
from vfcore.join_policy import JoinPolicy

if TYPE_CHECKING:
    from vfcore.cluster import ClusterSnapshot
    from vfcore.demand import AutoscalingOptions, Reason
    from vfcore.flow import Flow
    from vfcore.placement.claims import PodRequest
    from vfcore.placement.packing import SolverConfig
    from vfcore.placement.plan import Plan
    from vfcore.spec import FlowSpec

__all__ = [
    "DEFAULT_LAG_THRESHOLD",
    "DEFAULT_MAX_REPLICAS",
    "Backlog",
    "CapacityCap",
    "Fallback",
    "FlowScaling",
    "HpaBehavior",
    "HpaPrediction",
    "HpaState",
    "KedaScaler",
    "NodeObservation",
    "NodeScaling",
    "Observation",
    "ParentLoad",
    "Recommendation",
    "ReplicaDecision",
    "ScaleEvent",
    "ScalingComparison",
    "ScalingPolicy",
    "ScalingRules",
    "Trigger",
    "TriggerReading",
    "Unobserved",
    "capacity_cap",
    "check_scaling_rule",
    "compare_with_cluster",
    "decide_flow",
    "decide_replicas",
    "fallback_for_unknown",
    "observations_from_dict",
    "predict_hpa",
    "simulate_hpa",
]

#: KEDA's nats-jetstream ``lagThreshold`` default: messages one replica may have waiting.
DEFAULT_LAG_THRESHOLD = 10
#: The ``--max-replicas`` default (videoflow's and ours).
DEFAULT_MAX_REPLICAS = 10
#: The HPA controller's ``--horizontal-pod-autoscaler-tolerance`` default.
DEFAULT_TOLERANCE = 0.1
#: The HPA controller's ``--horizontal-pod-autoscaler-downscale-stabilization`` default.
DEFAULT_DOWNSCALE_STABILIZATION_S = 300
#: KEDA's ``cooldownPeriod`` default (it only governs scaling to 0).
DEFAULT_COOLDOWN_S = 300
#: KEDA's ``maxReplicaCount`` default.
KEDA_DEFAULT_MAX = 100
_INT32_MAX = 2**31 - 1

Status = Literal["known", "unknown"]
Diagnosis = Literal["idle", "backlog", "starved", "unknown", "capacity-capped"]
MetricType = Literal["AverageValue", "Value"]
FallbackBehavior = Literal[
    "static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"
]
FALLBACK_BEHAVIORS: tuple[str, ...] = (
    "static",
    "currentReplicas",
    "currentReplicasIfHigher",
    "currentReplicasIfLower",
)
SelectPolicy = Literal["Max", "Min", "Disabled"]
PolicyType = Literal["Pods", "Percent"]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- observations ------------------------------------------------------------------------------


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
            if not _is_int(value) or value < 0:
                raise InvalidInputError(
                    "invalid-backlog",
                    f"{name}={value!r} must be a whole number of messages >= 0",
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
_NOT_OBSERVED = "required but not observed"


def _as_observation(parent: str, value: object) -> Observation:
    if isinstance(value, Backlog | Unobserved):
        return value
    if isinstance(value, ClusterUnknown):
        return Unobserved(value.reason)
    raise InvalidInputError(
        "invalid-observation",
        f"parent {parent!r} is observed as {type(value).__name__} {value!r}",
        "observe each parent as Backlog(pending, ack_pending) or Unobserved(reason)",
    )


# -- the rule ---------------------------------------------------------------------------------


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
    if not _is_int(target) or target < 1:  # type: ignore[operator]
        problems.append(f"target={target!r} must be an int >= 1 (messages per replica)")
        fixes.append("use the trigger's lagThreshold, e.g. target=10")
    if not _is_int(min_replicas) or min_replicas < 1:  # type: ignore[operator]
        problems.append(f"min_replicas={min_replicas!r} must be an int >= 1")
        fixes.append("use the node's nb_tasks (at least 1); KEDA alone handles 0 <-> 1")
    if not _is_int(max_replicas) or max_replicas < 1:  # type: ignore[operator]
        problems.append(f"max_replicas={max_replicas!r} must be an int >= 1")
        fixes.append("pass --max-replicas with a positive count, e.g. 10")
    elif _is_int(min_replicas) and max_replicas < min_replicas:  # type: ignore[operator]
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
        if not _is_int(current) or current < 0:
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
            obs = _as_observation(name, obs) if obs is not None else Unobserved(_NOT_OBSERVED)
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
    if limit is not None and (not _is_int(limit) or limit < 0):
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


# -- the capacity cap ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CapacityCap:
    """How many replicas of one node the cluster can place, with the rest of the flow in place.

    ``placeable`` is the largest count proven to fit (the exact packing, every
    node of unknown occupancy counted as full), up to ``checked_up_to``.
    ``limit`` is ``placeable`` when one more replica is proven *not* to fit, and
    ``None`` when nothing limits it up to ``checked_up_to`` or when the next
    count is unknown (unknown never caps a decision). ``unlock`` says what
    would let more replicas land; ``blocker`` is the scheduler-style line for
    the first replica that does not fit.
    """

    node: str
    placeable: int
    limit: int | None
    checked_up_to: int
    verdicts: tuple[tuple[int, str], ...]
    unlock: str | None = None
    blocker: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "placeable": self.placeable,
            "limit": self.limit,
            "checked_up_to": self.checked_up_to,
            "verdicts": {str(k): v for k, v in self.verdicts},
            "unlock": self.unlock,
            "blocker": self.blocker,
        }


def capacity_cap(
    flow_or_spec: Flow | FlowSpec,
    cluster: ClusterSnapshot,
    node: str,
    *,
    up_to: int,
    replicas: Mapping[str, int] | None = None,
    gpu_mode: GpuMode | str | None = "exclusive",
    gpu_resource_name: str | None = None,
    gpu_node_selector: tuple[str, str] | None = None,
    resources: Mapping[str, Mapping[str, str | int | float]] | None = None,
    solver: SolverConfig | None = None,
) -> CapacityCap:
    """The largest count of ``node``'s replicas (≤ ``up_to``) that the exact packing places.

    Every other node of the flow keeps its pods in place (``replicas``
    overrides their counts, e.g. what runs now; default ``nb_tasks``). Each
    probe is :func:`vfcore.plan.plan_pods` on the pods of the whole flow; a
    count *fits* only if the plan's verdict is ``fits``. Feasibility only
    shrinks as the count grows (dropping one pod keeps a packing valid), so a
    binary search over ``[0, up_to]`` needs about ``log2(up_to)`` probes.

    Worked example (``examples/clusters/gpu-pool``: 3, 5, 1 and 4 free GPUs on
    four hosts): a detector taking 2 GPUs per replica fits 1 + 2 + 0 + 2 = 5
    replicas, so asking for 8 gives ``placeable=5, limit=5``, and the sixth
    replica's line reads ``0/6 nodes fit detector/5: …``.
    """
    from vfcore.demand import pod_name
    from vfcore.placement.claims import pod_requests
    from vfcore.placement.packing import SolverConfig
    from vfcore.placement.plan import plan_pods
    from vfcore.validate import effective_replicas, to_spec

    spec = to_spec(flow_or_spec)
    if node not in spec.names:
        raise InvalidInputError(
            "unknown-node",
            f"capacity_cap names {node!r}, which the flow does not have "
            f"(nodes: {sorted(spec.names)})",
            "name a node as the flow declares it",
        )
    if not _is_int(up_to) or up_to < 0:
        raise InvalidInputError(
            "invalid-capacity",
            f"up_to={up_to!r} must be a replica count >= 0",
            "ask up to the count the backlog calls for, e.g. the decision's floor",
        )
    mode = parse_gpu_mode(gpu_mode)
    cfg = solver or SolverConfig.deterministic(max_deterministic_time=10.0)
    cfg = replace(cfg, optimize=False)
    pods = pod_requests(
        spec,
        gpu_mode=mode,
        gpu_resource_name=gpu_resource_name,
        gpu_node_selector=gpu_node_selector,
        resources=resources,
    )
    counts = {n.name: effective_replicas(n) for n in spec.nodes}
    for name, count in (replicas or {}).items():
        if name in counts and name != node and _is_int(count) and count >= 0:
            counts[name] = count
    templates: dict[str, PodRequest] = {}
    for pod in pods:
        templates.setdefault(pod.node, pod)
    others: list[PodRequest] = []
    for name, other in templates.items():
        if name == node:
            continue
        others.extend(replace(other, pod=pod_name(name, i), replica=i) for i in range(counts[name]))
    template = templates.get(node)
    plans: dict[int, Plan] = {}

    def probe(k: int) -> str:
        if k not in plans:
            mine = (
                [replace(template, pod=pod_name(node, i), replica=i) for i in range(k)]
                if template is not None
                else []
            )
            plans[k] = plan_pods(
                [*others, *mine], cluster, gpu_mode=mode, solver=cfg, predict_scheduler=False
            )
        return plans[k].verdict

    if probe(up_to) == "fits":
        return CapacityCap(node, up_to, None, up_to, _verdicts(plans))
    lo, hi = -1, up_to  # fits(lo) (or lo = -1), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if probe(mid) == "fits":
            lo = mid
        else:
            hi = mid
    placeable = max(lo, 0)
    proven = plans[hi].verdict == "does-not-fit"
    first = plans[hi]
    blocker = next((u.summary for u in first.unplaced if u.pod.startswith(f"{node}/")), None)
    if blocker is None and first.unplaced:
        blocker = first.unplaced[0].summary
    if lo < 0:
        unlock = (
            "the rest of the flow does not fit on this cluster by itself; run `vf plan` "
            "and fix that first"
        )
    elif proven:
        unlock = _unlock_text(node, placeable, first)
    else:
        unknown = "; ".join(f"{u.what}: {u.reason}" for u in first.unknown) or "unknown"
        unlock = (
            f"{placeable} replica(s) are proven to fit; whether {placeable + 1} fit is "
            f"unknown ({unknown}), so no cap is applied"
        )
    return CapacityCap(
        node,
        placeable,
        placeable if proven else None,
        up_to,
        _verdicts(plans),
        unlock,
        blocker,
    )


def _verdicts(plans: Mapping[int, Plan]) -> tuple[tuple[int, str], ...]:
    return tuple(sorted((k, p.verdict) for k, p in plans.items()))


def _unlock_text(node: str, placeable: int, plan: Plan) -> str:
    mine = [u for u in plan.unplaced if u.pod.startswith(f"{node}/")]
    fixes = [u.fix for u in mine if u.fix]
    text = f"{placeable} replica(s) of {node} fit; to place replica {placeable + 1}: "
    if plan.fix:
        return text + plan.fix
    if fixes:
        return text + fixes[0]
    return text + "free capacity on a GPU host, or add a GPU node"


# -- KEDA and the HPA: configuration -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Trigger:
    """One nats-jetstream trigger: the consumer of one parent's stream.

    The metric is ``lag = num_pending + num_ack_pending``; the trigger is
    *active* when ``lag > activation_lag_threshold``. ``metric_type``
    ``AverageValue`` (KEDA's default) makes the HPA propose
    ``ceil(lag / lag_threshold)``; ``Value`` makes it scale the ready pods by
    ``lag / lag_threshold``.
    """

    parent: str
    lag_threshold: int = DEFAULT_LAG_THRESHOLD
    activation_lag_threshold: int = 0
    metric_type: MetricType = "AverageValue"

    def __post_init__(self) -> None:
        if not _is_int(self.lag_threshold) or self.lag_threshold < 1:
            raise InvalidInputError(
                "invalid-trigger",
                f"trigger {self.parent!r}: lagThreshold={self.lag_threshold!r} must be an int >= 1",
                "use the messages one replica may have waiting, e.g. 10",
            )
        if not _is_int(self.activation_lag_threshold) or self.activation_lag_threshold < 0:
            raise InvalidInputError(
                "invalid-trigger",
                f"trigger {self.parent!r}: activationLagThreshold="
                f"{self.activation_lag_threshold!r} must be an int >= 0",
                "use 0 (any message activates the scaler from 0 replicas)",
            )
        if self.metric_type not in ("AverageValue", "Value"):
            raise InvalidInputError(
                "invalid-trigger",
                f"trigger {self.parent!r}: metricType={self.metric_type!r} is not supported",
                "use AverageValue (KEDA's default) or Value",
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "parent": self.parent,
            "lagThreshold": self.lag_threshold,
            "activationLagThreshold": self.activation_lag_threshold,
            "metricType": self.metric_type,
        }


@dataclass(frozen=True, slots=True)
class Fallback:
    """KEDA's ``spec.fallback``: a synthetic metric once a trigger fails too often.

    After more than ``failure_threshold`` consecutive failures of a trigger,
    KEDA reports ``lagThreshold × F`` for it (AverageValue), with F from
    ``behavior``: ``static`` = ``replicas``; ``currentReplicas`` = the current
    count; ``currentReplicasIfHigher`` / ``…IfLower`` = the max / min of both.
    ``to_dict()`` is the CRD's shape.
    """

    failure_threshold: int
    replicas: int
    behavior: FallbackBehavior = "static"

    def __post_init__(self) -> None:
        for name in ("failure_threshold", "replicas"):
            value = getattr(self, name)
            if not _is_int(value) or value < 0:
                raise InvalidInputError(
                    "invalid-fallback",
                    f"fallback.{name}={value!r} must be an int >= 0",
                    "e.g. Fallback(failure_threshold=3, replicas=1, behavior='currentReplicas')",
                )
        if self.behavior not in FALLBACK_BEHAVIORS:
            raise InvalidInputError(
                "invalid-fallback",
                f"fallback.behavior={self.behavior!r} is not a KEDA fallback behavior",
                f"use one of {', '.join(FALLBACK_BEHAVIORS)}",
            )

    def replicas_for(self, current: int) -> int:
        """F for a target running ``current`` replicas."""
        if self.behavior == "currentReplicas":
            return current
        if self.behavior == "currentReplicasIfHigher":
            return max(current, self.replicas)
        if self.behavior == "currentReplicasIfLower":
            return min(current, self.replicas)
        return self.replicas

    def to_dict(self) -> dict[str, Any]:
        return {
            "failureThreshold": self.failure_threshold,
            "replicas": self.replicas,
            "behavior": self.behavior,
        }


def fallback_for_unknown(*, min_replicas: int = 1, failure_threshold: int = 3) -> Fallback:
    """The fallback under which KEDA holds the current count while a parent is unobservable.

    ``behavior: currentReplicas`` makes the failing trigger report
    ``lagThreshold × current``, a ratio of exactly 1 to the current count, so
    the HPA proposes no change from it (healthy triggers may still raise the
    count: the per-metric max makes the held count a floor). Before
    ``failure_threshold`` failures the error reaches the HPA, whose partial
    failure rule also forbids a scale-down. ``replicas`` is never used by this
    behavior, but KEDA's executor only refrains from scaling an erroring
    target to 0 when it is non-zero, so it is set to ``min_replicas`` (≥ 1).

    >>> fallback_for_unknown(min_replicas=2).to_dict()
    {'failureThreshold': 3, 'replicas': 2, 'behavior': 'currentReplicas'}
    """
    if not _is_int(min_replicas) or min_replicas < 1:
        raise InvalidInputError(
            "invalid-fallback",
            f"min_replicas={min_replicas!r} must be an int >= 1",
            "pass the node's nb_tasks",
        )
    return Fallback(failure_threshold, max(min_replicas, 1), "currentReplicas")


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """One HPA rate policy: change by ``value`` pods (or percent) per ``period_s`` seconds."""

    type: PolicyType
    value: int
    period_s: int

    def __post_init__(self) -> None:
        if self.type not in ("Pods", "Percent"):
            raise InvalidInputError(
                "invalid-hpa-behavior",
                f"policy type {self.type!r} is neither Pods nor Percent",
                "use ScalingPolicy('Pods', 4, 15) or ScalingPolicy('Percent', 100, 15)",
            )
        if not _is_int(self.value) or self.value < 1:
            raise InvalidInputError(
                "invalid-hpa-behavior",
                f"policy value={self.value!r} must be an int >= 1",
                "use a positive count of pods or percent",
            )
        if not _is_int(self.period_s) or not 1 <= self.period_s <= 1800:
            raise InvalidInputError(
                "invalid-hpa-behavior",
                f"policy periodSeconds={self.period_s!r} must be an int in 1..1800",
                "use e.g. 15 (the default policies' period)",
            )

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "value": self.value, "periodSeconds": self.period_s}


@dataclass(frozen=True, slots=True)
class ScalingRules:
    """``behavior.scaleUp`` or ``behavior.scaleDown``; ``None`` fields take the HPA's defaults."""

    stabilization_window_s: int | None = None
    select_policy: SelectPolicy | None = None
    policies: tuple[ScalingPolicy, ...] | None = None
    tolerance: float | None = None

    def __post_init__(self) -> None:
        w = self.stabilization_window_s
        if w is not None and (not _is_int(w) or not 0 <= w <= 3600):
            raise InvalidInputError(
                "invalid-hpa-behavior",
                f"stabilizationWindowSeconds={w!r} must be an int in 0..3600",
                "use e.g. 0 for scale-up and 300 for scale-down",
            )
        if self.select_policy not in (None, "Max", "Min", "Disabled"):
            raise InvalidInputError(
                "invalid-hpa-behavior",
                f"selectPolicy={self.select_policy!r} is not Max, Min or Disabled",
                "use Max (the default)",
            )
        if self.policies is not None:
            object.__setattr__(self, "policies", tuple(self.policies))
        t = self.tolerance
        if t is not None and (isinstance(t, bool) or not isinstance(t, int | float) or t < 0):
            raise InvalidInputError(
                "invalid-hpa-behavior",
                f"tolerance={t!r} must be a number >= 0",
                "use e.g. 0.1 (10 %)",
            )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.stabilization_window_s is not None:
            out["stabilizationWindowSeconds"] = self.stabilization_window_s
        if self.select_policy is not None:
            out["selectPolicy"] = self.select_policy
        if self.policies is not None:
            out["policies"] = [p.to_dict() for p in self.policies]
        if self.tolerance is not None:
            out["tolerance"] = str(self.tolerance)
        return out


_DEFAULT_UP = ScalingRules(
    stabilization_window_s=0,
    select_policy="Max",
    policies=(ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)),
)
_DEFAULT_DOWN = ScalingRules(
    stabilization_window_s=None,  # the controller's --horizontal-pod-autoscaler-downscale-stabilization
    select_policy="Max",
    policies=(ScalingPolicy("Percent", 100, 15),),
)


def _filled(rules: ScalingRules | None, default: ScalingRules) -> ScalingRules:
    """The API server's defaulting (``copyHPAScalingRules``): set fields win, others default."""
    if rules is None:
        return default
    return ScalingRules(
        stabilization_window_s=rules.stabilization_window_s
        if rules.stabilization_window_s is not None
        else default.stabilization_window_s,
        select_policy=rules.select_policy or default.select_policy,
        policies=rules.policies if rules.policies is not None else default.policies,
        tolerance=rules.tolerance if rules.tolerance is not None else default.tolerance,
    )


@dataclass(frozen=True, slots=True)
class HpaBehavior:
    """``advanced.horizontalPodAutoscalerConfig.behavior``; unset parts take the HPA defaults.

    Defaults: scale-up window 0 s, ``max(4 pods, 100 %)`` per 15 s; scale-down
    window = the controller's 300 s, 100 % per 15 s. (With *no* behavior at
    all — what KEDA renders unless told — the HPA uses its older rules
    instead: see :func:`predict_hpa`.)
    """

    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None

    def resolved(self) -> tuple[ScalingRules, ScalingRules]:
        return _filled(self.scale_up, _DEFAULT_UP), _filled(self.scale_down, _DEFAULT_DOWN)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.scale_up is not None:
            out["scaleUp"] = self.scale_up.to_dict()
        if self.scale_down is not None:
            out["scaleDown"] = self.scale_down.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class KedaScaler:
    """The parts of a ScaledObject, and of the HPA controller's flags, that decide replicas.

    ``min_replica_count``/``max_replica_count`` are KEDA's (the generated HPA
    gets ``max(min, 1)`` and ``max``); ``tolerance`` and
    ``downscale_stabilization_s`` are the controller's flags (0.1 and 300 s).
    ``behavior=None`` is what KEDA renders by default (no HPA behavior).
    """

    triggers: tuple[Trigger, ...]
    min_replica_count: int = 0
    max_replica_count: int = KEDA_DEFAULT_MAX
    cooldown_period_s: int = DEFAULT_COOLDOWN_S
    fallback: Fallback | None = None
    behavior: HpaBehavior | None = None
    tolerance: float = DEFAULT_TOLERANCE
    downscale_stabilization_s: int = DEFAULT_DOWNSCALE_STABILIZATION_S

    def __post_init__(self) -> None:
        triggers = tuple(sorted(self.triggers, key=lambda t: t.parent))
        object.__setattr__(self, "triggers", triggers)
        problems: list[str] = []
        if not triggers:
            problems.append("a ScaledObject needs at least one trigger")
        if len({t.parent for t in triggers}) != len(triggers):
            problems.append("two triggers watch the same parent")
        lo, hi = self.min_replica_count, self.max_replica_count
        if not _is_int(lo) or lo < 0:
            problems.append(f"minReplicaCount={lo!r} must be an int >= 0")
        if not _is_int(hi) or hi < 1:
            problems.append(f"maxReplicaCount={hi!r} must be an int >= 1")
        elif _is_int(lo) and lo > hi:
            problems.append(f"minReplicaCount={lo} exceeds maxReplicaCount={hi}")
        if not _is_int(self.cooldown_period_s) or self.cooldown_period_s < 0:
            problems.append(f"cooldownPeriod={self.cooldown_period_s!r} must be an int >= 0")
        t = self.tolerance
        if isinstance(t, bool) or not isinstance(t, int | float) or t < 0:
            problems.append(f"tolerance={t!r} must be a number >= 0")
        if problems:
            raise InvalidInputError(
                "invalid-scaled-object",
                "; ".join(problems),
                "one trigger per parent, 0 <= minReplicaCount <= maxReplicaCount, "
                "maxReplicaCount >= 1",
            )

    @property
    def hpa_min_replicas(self) -> int:
        """The generated HPA's ``minReplicas``: ``max(minReplicaCount, 1)`` (KEDA owns 0 ↔ 1)."""
        return max(self.min_replica_count, 1)

    @classmethod
    def for_parents(
        cls,
        parents: Iterable[str],
        *,
        target: int = DEFAULT_LAG_THRESHOLD,
        min_replicas: int = 1,
        max_replicas: int = DEFAULT_MAX_REPLICAS,
        fallback: Fallback | Literal["hold"] | None = "hold",
        behavior: HpaBehavior | None = None,
    ) -> KedaScaler:
        """What we render for a node: one trigger per parent, min = nb_tasks, hold on unknown."""
        check_scaling_rule(target, min_replicas, max_replicas)
        chosen = fallback_for_unknown(min_replicas=min_replicas) if fallback == "hold" else fallback
        return cls(
            triggers=tuple(Trigger(p, target) for p in parents),
            min_replica_count=min_replicas,
            max_replica_count=max_replicas,
            fallback=chosen if isinstance(chosen, Fallback) else None,
            behavior=behavior,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "triggers": [t.to_dict() for t in self.triggers],
            "minReplicaCount": self.min_replica_count,
            "maxReplicaCount": self.max_replica_count,
            "cooldownPeriod": self.cooldown_period_s,
            "fallback": None if self.fallback is None else self.fallback.to_dict(),
            "behavior": None if self.behavior is None else self.behavior.to_dict(),
            "tolerance": self.tolerance,
            "downscale_stabilization_s": self.downscale_stabilization_s,
        }


# -- KEDA and the HPA: state and prediction -----------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class Recommendation:
    """One unstabilised recommendation the HPA remembers (for its stabilisation windows)."""

    at_s: float
    replicas: int

    def to_dict(self) -> dict[str, Any]:
        return {"at_s": self.at_s, "replicas": self.replicas}


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """One scale change the HPA remembers (for its rate policies): ``change`` pods at ``at_s``."""

    at_s: float
    change: int
    outdated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"at_s": self.at_s, "change": self.change, "outdated": self.outdated}


@dataclass(frozen=True, slots=True)
class HpaState:
    """What KEDA and the HPA controller know before an evaluation.

    ``replicas`` is the target's ``spec.replicas``; ``status_replicas`` the pods
    that exist (``status.replicas``, default ``replicas``) and ``ready_replicas``
    those Running and Ready (default ``status_replicas``). ``recommendations``
    and the scale events are the controller's memory (empty for a fresh
    controller); ``failures`` counts each trigger's consecutive failures
    (KEDA's ``status.health``); ``last_active_s`` is KEDA's
    ``status.lastActiveTime``.
    """

    replicas: int
    status_replicas: int | None = None
    ready_replicas: int | None = None
    recommendations: tuple[Recommendation, ...] = ()
    scale_up_events: tuple[ScaleEvent, ...] = ()
    scale_down_events: tuple[ScaleEvent, ...] = ()
    failures: tuple[tuple[str, int], ...] = ()
    last_active_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("replicas", "status_replicas", "ready_replicas"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 0):
                raise InvalidInputError(
                    "invalid-hpa-state",
                    f"{name}={value!r} must be a replica count >= 0",
                    "pass the target's spec.replicas (and status.replicas / ready pods)",
                )
        object.__setattr__(self, "failures", tuple(sorted(dict(self.failures).items())))

    def to_dict(self) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "status_replicas": self.status_replicas,
            "ready_replicas": self.ready_replicas,
            "recommendations": [r.to_dict() for r in self.recommendations],
            "scale_up_events": [e.to_dict() for e in self.scale_up_events],
            "scale_down_events": [e.to_dict() for e in self.scale_down_events],
            "failures": dict(self.failures),
            "last_active_s": self.last_active_s,
        }


@dataclass(frozen=True, slots=True)
class TriggerReading:
    """What one trigger gave the HPA in one evaluation.

    ``source``: ``metric`` (the lag), ``fallback`` (KEDA's synthetic value) or
    ``error`` (no value: the HPA sees a failed metric). ``raw`` is
    ``ceil(lag / threshold)`` with no tolerance (our rule's per-parent ask);
    ``proposal`` is what the HPA takes from it, tolerance applied.
    """

    parent: str
    threshold: int
    source: Literal["metric", "fallback", "error"]
    lag: int | None
    value_milli: int | None
    raw: int | None
    proposal: int | None
    ratio: float | None
    within_tolerance: bool | None
    failures: int

    def to_dict(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "parent": self.parent,
            "threshold": self.threshold,
            "source": self.source,
            "lag": self.lag,
            "value_milli": self.value_milli,
            "raw": self.raw,
            "proposal": self.proposal,
            "ratio": None if ratio is None or not math.isfinite(ratio) else round(ratio, 6),
            "within_tolerance": self.within_tolerance,
            "failures": self.failures,
        }


Actor = Literal["keda", "hpa", "none"]


@dataclass(frozen=True, slots=True)
class HpaPrediction:
    """What KEDA and the HPA set in one evaluation at ``now_s``, stage by stage.

    ``replicas`` is the count the target has afterwards; ``actor`` says who set
    it (``keda`` for 0 ↔ 1 activation, scale to 0 and raising to
    ``minReplicaCount``; ``hpa`` otherwise; ``none`` when nobody acts). Stages
    (``None`` when not reached): ``metric_replicas`` = the max over trigger
    proposals; ``stabilized`` = after the stabilisation window; ``replicas`` =
    after the rate limits and min/max. ``reason`` is the controller's
    condition reason (``ScaleDownStabilized``, ``FailedGetExternalMetric``, …).
    ``state`` is the memory to pass to the next evaluation.
    """

    replicas: int
    previous: int
    actor: Actor
    reason: str
    active: bool
    readings: tuple[TriggerReading, ...]
    metric_replicas: int | None
    stabilized: int | None
    state: HpaState
    steps: tuple[str, ...]
    now_s: float

    @property
    def raw(self) -> int | None:
        """Max over healthy triggers of ``ceil(lag / threshold)`` (no tolerance)."""
        values = [r.raw for r in self.readings if r.raw is not None]
        return max(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "previous": self.previous,
            "actor": self.actor,
            "reason": self.reason,
            "active": self.active,
            "raw": self.raw,
            "metric_replicas": self.metric_replicas,
            "stabilized": self.stabilized,
            "readings": [r.to_dict() for r in self.readings],
            "steps": list(self.steps),
            "now_s": self.now_s,
            "state": self.state.to_dict(),
        }


def _within(ratio: float, down: float, up: float) -> bool:
    """The HPA's ``Tolerances.isWithin``: ``1 - down <= ratio <= 1 + up`` (NaN is never within)."""
    return (1.0 - down) <= ratio <= (1.0 + up)


def _ceil_int32(x: float) -> int:
    if x > _INT32_MAX:
        return _INT32_MAX
    return math.ceil(x)


def _read_triggers(
    observations: Mapping[str, Observation | ClusterUnknown],
    scaler: KedaScaler,
    state: HpaState,
    ready: int,
) -> tuple[list[tuple[Trigger, str, int | None, int | None]], dict[str, int], list[str]]:
    """KEDA's side: each trigger's metric, or its fallback value, or an error."""
    failures = dict(state.failures)
    out: list[tuple[Trigger, str, int | None, int | None]] = []
    steps: list[str] = []
    fb = scaler.fallback
    for trig in scaler.triggers:
        raw_obs = observations.get(trig.parent)
        obs = None if raw_obs is None else _as_observation(trig.parent, raw_obs)
        if isinstance(obs, Backlog):
            failures[trig.parent] = 0
            out.append((trig, "metric", obs.lag, obs.lag * 1000))
            continue
        count = failures.get(trig.parent, 0) + 1
        failures[trig.parent] = count
        reason = _NOT_OBSERVED if obs is None else obs.reason
        # The stored KEDA only substitutes AverageValue metrics; the reference's newer
        # version also substitutes Value metrics as target × F / ready pods.
        if fb is not None and count > fb.failure_threshold:
            f = fb.replicas_for(state.replicas)
            target_milli = trig.lag_threshold * 1000
            if trig.metric_type == "AverageValue":
                out.append((trig, "fallback", None, target_milli * f))
                steps.append(
                    f"{trig.parent}: failing ({reason}) {count} time(s) > failureThreshold "
                    f"{fb.failure_threshold}: KEDA reports fallback {trig.lag_threshold} × {f}"
                )
                continue
            if ready > 0:
                out.append((trig, "fallback", None, (target_milli * f) // ready))
                steps.append(
                    f"{trig.parent}: failing {count} time(s): KEDA reports fallback "
                    f"{trig.lag_threshold} × {f} / {ready} ready pods"
                )
                continue
        out.append((trig, "error", None, None))
        steps.append(f"{trig.parent}: metric unavailable ({reason}), failure {count}")
    return out, failures, steps


def predict_hpa(
    observations: Mapping[str, Observation | ClusterUnknown],
    *,
    scaler: KedaScaler,
    state: HpaState,
    now_s: float,
) -> HpaPrediction:
    """One evaluation of KEDA and the HPA at ``now_s``: the replica count they set, and why.

    The model follows KEDA's scale executor and fallback, and the HPA
    controller's ``reconcileAutoscaler`` (``kubernetes/pkg/controller/podautoscaler``):

    1. **KEDA reads the triggers.** A healthy trigger reports ``lag``; a failing
       one an error, or — after more than ``failureThreshold`` consecutive
       failures with a fallback — ``lagThreshold × F``.
    2. **KEDA's executor (0 ↔ 1).** Active (some healthy ``lag >
       activationLagThreshold``) at 0 replicas: scale to ``max(min, 1)``.
       Inactive with ``minReplicaCount = 0``: scale to 0 once the cooldown has
       passed since the last activity — unless a trigger errors and a fallback
       with non-zero ``replicas`` is set. Below ``minReplicaCount``: raise it.
    3. **The HPA** (only at ≥ 1 replica): per trigger, AverageValue:
       ``ratio = value / (threshold × status.replicas)``, within ``1 ± tolerance``
       keeps ``status.replicas``, else ``ceil(value / threshold)``; Value:
       ``ceil(value / threshold × ready)``. The max over triggers. If every
       trigger failed, or one failed and the max is below the current count,
       nothing changes. Then stabilisation and limits: with no ``behavior``
       (KEDA's default), the highest recommendation of the last 300 s, then
       ``[max(min, 1), min(max, max(2 × current, 4))]``; with a ``behavior``,
       the up/down windows and rate policies.

    >>> scaler = KedaScaler((Trigger("a", 10),), min_replica_count=1, max_replica_count=20)
    >>> predict_hpa({"a": Backlog(95, 0)}, scaler=scaler, state=HpaState(9), now_s=0).replicas
    9
    """
    cur = state.replicas
    status = cur if state.status_replicas is None else state.status_replicas
    ready = status if state.ready_replicas is None else state.ready_replicas
    readings_in, failures, steps = _read_triggers(observations, scaler, state, ready)
    active = any(
        src == "metric" and lag is not None and lag > t.activation_lag_threshold
        for t, src, lag, _ in readings_in
    )
    # A trigger on fallback is still a failing scaler to KEDA's executor.
    is_error = any(src != "metric" for _, src, _, _ in readings_in)
    last_active = now_s if active else state.last_active_s
    failures_t = tuple(sorted(failures.items()))

    def keda_sets(new: int, reason: str) -> HpaPrediction:
        steps.append(f"KEDA sets {new} replica(s): {reason}")
        next_state = HpaState(
            new,
            recommendations=state.recommendations,
            scale_up_events=state.scale_up_events,
            scale_down_events=state.scale_down_events,
            failures=failures_t,
            last_active_s=last_active,
        )
        readings = tuple(
            _reading(t, s, lag, v, None, None, failures) for t, s, lag, v in readings_in
        )
        return HpaPrediction(
            new, cur, "keda", reason, active, readings, None, None, next_state, tuple(steps), now_s
        )

    min_count = scaler.min_replica_count
    # -- KEDA's scale executor --
    if active:
        if cur == 0:
            return keda_sets(max(min_count, 1), "activated from 0 (a trigger is active)")
        if cur < min_count:
            return keda_sets(min_count, "below minReplicaCount while active")
    else:
        fb = scaler.fallback
        if is_error and fb is not None and fb.replicas != 0:
            steps.append("KEDA: no trigger active, one errors, fallback set: KEDA leaves it")
        elif cur > 0 and min_count == 0:
            cooled = (
                state.last_active_s is None
                or state.last_active_s + scaler.cooldown_period_s < now_s
            )
            if cooled:
                return keda_sets(0, "no trigger active and the cooldown has passed")
            steps.append(
                f"KEDA: inactive, cooling down until {state.last_active_s} + "
                f"{scaler.cooldown_period_s} s"
            )
        elif cur < min_count:
            return keda_sets(min_count, "below minReplicaCount")

    # -- the HPA controller --
    recommendations = list(state.recommendations) or [Recommendation(now_s, cur)]
    up_events = list(state.scale_up_events)
    down_events = list(state.scale_down_events)
    hpa_min, hpa_max = scaler.hpa_min_replicas, scaler.max_replica_count
    behavior = scaler.behavior
    if behavior is None:
        tol_up = tol_down = float(scaler.tolerance)
    else:
        up_rules, down_rules = behavior.resolved()
        tol_up = float(up_rules.tolerance if up_rules.tolerance is not None else scaler.tolerance)
        tol_down = float(
            down_rules.tolerance if down_rules.tolerance is not None else scaler.tolerance
        )

    readings: list[TriggerReading] = []
    for trig, src, lag, value in readings_in:
        if value is None:
            readings.append(_reading(trig, src, lag, None, None, None, failures))
            continue
        target_milli = trig.lag_threshold * 1000
        if trig.metric_type == "AverageValue":
            denominator = float(target_milli) * float(status)
            if denominator:
                ratio = float(value) / denominator
            else:
                ratio = math.inf if value > 0 else math.nan
            within = _within(ratio, tol_down, tol_up)
            proposal = status if within else _ceil_int32(float(value) / float(target_milli))
        else:
            ratio = float(value) / float(target_milli)
            if cur != 0:
                within = _within(ratio, tol_down, tol_up)
                proposal = cur if within else _ceil_int32(ratio * float(ready))
            else:
                within = False
                proposal = _ceil_int32(ratio)
        readings.append(_reading(trig, src, lag, value, proposal, (ratio, within), failures))
        per = (
            f"({trig.lag_threshold} × {status})"
            if trig.metric_type == "AverageValue"
            else (str(trig.lag_threshold))
        )
        steps.append(
            f"HPA: {trig.parent} {value / 1000:g} / {per} = {_fmt_ratio(ratio)}"
            + (f", within 1 ± tolerance: keeps {proposal}" if within else f" → proposes {proposal}")
        )

    def hpa_result(
        new: int,
        actor: Actor,
        reason: str,
        metric: int | None,
        stabilized: int | None,
        recs: Sequence[Recommendation],
        ups: Sequence[ScaleEvent],
        downs: Sequence[ScaleEvent],
    ) -> HpaPrediction:
        next_state = HpaState(
            new,
            recommendations=tuple(recs),
            scale_up_events=tuple(ups),
            scale_down_events=tuple(downs),
            failures=failures_t,
            last_active_s=last_active,
        )
        return HpaPrediction(
            new,
            cur,
            actor,
            reason,
            active,
            tuple(readings),
            metric,
            stabilized,
            next_state,
            tuple(steps),
            now_s,
        )

    if cur == 0:
        steps.append("HPA: scaling is disabled since the replica count of the target is zero")
        return hpa_result(
            0, "none", "ScalingDisabled", None, None, recommendations, up_events, down_events
        )
    if cur > hpa_max:
        steps.append(f"HPA: current {cur} above maxReplicas {hpa_max}: set to {hpa_max}")
        ups, downs = _store_event(behavior, up_events, down_events, cur, hpa_max, now_s)
        return hpa_result(
            hpa_max, "hpa", "TooManyReplicas", None, None, recommendations, ups, downs
        )
    if cur < hpa_min:
        steps.append(f"HPA: current {cur} below minReplicas {hpa_min}: set to {hpa_min}")
        ups, downs = _store_event(behavior, up_events, down_events, cur, hpa_min, now_s)
        return hpa_result(hpa_min, "hpa", "TooFewReplicas", None, None, recommendations, ups, downs)

    valid = [r.proposal for r in readings if r.proposal is not None]
    invalid = len(readings) - len(valid)
    metric_replicas = 0
    for p in valid:
        if metric_replicas == 0 or p > metric_replicas:
            metric_replicas = p
    if invalid >= len(readings):
        steps.append("HPA: every metric failed: no scaling (ScalingActive=False)")
        return hpa_result(
            cur,
            "none",
            "FailedGetExternalMetric",
            None,
            None,
            recommendations,
            up_events,
            down_events,
        )
    if invalid > 0 and metric_replicas < cur:
        steps.append(
            f"HPA: {invalid} metric(s) failed and the others propose {metric_replicas} < "
            f"{cur}: scale-down skipped"
        )
        return hpa_result(
            cur,
            "none",
            "FailedGetExternalMetric",
            metric_replicas,
            None,
            recommendations,
            up_events,
            down_events,
        )
    desired = metric_replicas
    steps.append(f"HPA: max over metrics = {desired}")

    if behavior is None:
        stabilized, recommendations = _stabilize_legacy(
            recommendations, desired, now_s, scaler.downscale_stabilization_s
        )
        limit_up = max(2 * cur, 4)
        allowed_max = min(hpa_max, limit_up)
        final = min(max(stabilized, hpa_min), allowed_max)
        reason = "DesiredWithinRange"
        if stabilized != desired:
            reason = "ScaleDownStabilized"
            steps.append(
                f"HPA: the highest recommendation of the last {scaler.downscale_stabilization_s} s "
                f"is {stabilized}: holds {stabilized}"
            )
        if final != stabilized:  # convertDesiredReplicasWithRules
            if stabilized < hpa_min:
                reason = "TooFewReplicas"
            elif limit_up < hpa_max:
                reason = "ScaleUpLimit"
            else:
                reason = "TooManyReplicas"
            steps.append(f"HPA: limited to {final} (min {hpa_min}, max {allowed_max}: {reason})")
    else:
        up_rules, down_rules = behavior.resolved()
        down_window = (
            down_rules.stabilization_window_s
            if down_rules.stabilization_window_s is not None
            else scaler.downscale_stabilization_s
        )
        up_window = up_rules.stabilization_window_s or 0
        stabilized, recommendations = _stabilize_behaviors(
            recommendations, desired, cur, now_s, up_window, down_window
        )
        if stabilized != desired:
            reason = "ScaleUpStabilized" if desired >= cur else "ScaleDownStabilized"
            steps.append(f"HPA: stabilisation windows hold {stabilized}")
        else:
            reason = "DesiredWithinRange"
        final, limit_reason = _rate_limited(
            stabilized, cur, hpa_min, hpa_max, up_rules, down_rules, up_events, down_events, now_s
        )
        if final != stabilized:
            reason = limit_reason
            steps.append(f"HPA: rate/limits allow {final} ({limit_reason})")
    if final != cur:
        up_events, down_events = _store_event(behavior, up_events, down_events, cur, final, now_s)
        steps.append(f"HPA sets {final} replica(s)")
        actor: Actor = "hpa"
    else:
        steps.append(f"HPA keeps {cur} replica(s)")
        actor = "none"
    return hpa_result(
        final, actor, reason, metric_replicas, stabilized, recommendations, up_events, down_events
    )


def _fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    if not math.isfinite(ratio):
        return str(ratio)
    return f"{ratio:.3f}"


def _reading(
    trig: Trigger,
    src: str,
    lag: int | None,
    value: int | None,
    proposal: int | None,
    ratio_within: tuple[float, bool] | None,
    failures: Mapping[str, int],
) -> TriggerReading:
    raw = None if lag is None else -(-lag // trig.lag_threshold)
    ratio, within = (None, None) if ratio_within is None else ratio_within
    return TriggerReading(
        trig.parent,
        trig.lag_threshold,
        src,  # type: ignore[arg-type]
        lag,
        value,
        raw,
        proposal,
        ratio,
        within,
        failures.get(trig.parent, 0),
    )


def _stabilize_legacy(
    recs: list[Recommendation], desired: int, now_s: float, window_s: int
) -> tuple[int, list[Recommendation]]:
    """``stabilizeRecommendation``: the max of recommendations not older than the window."""
    cutoff = now_s - window_s
    best = desired
    old_index = -1
    for i, rec in enumerate(recs):
        if rec.at_s < cutoff:
            old_index = i
        elif rec.replicas > best:
            best = rec.replicas
    out = list(recs)
    if old_index >= 0:
        out[old_index] = Recommendation(now_s, desired)
    else:
        out.append(Recommendation(now_s, desired))
    return best, out


def _stabilize_behaviors(
    recs: list[Recommendation],
    desired: int,
    current: int,
    now_s: float,
    up_window_s: int,
    down_window_s: int,
) -> tuple[int, list[Recommendation]]:
    """``stabilizeRecommendationWithBehaviors``: min over the up window, max over the down one."""
    up_cutoff = now_s - up_window_s
    down_cutoff = now_s - down_window_s
    up_rec = down_rec = desired
    old_index = -1
    for i, rec in enumerate(recs):
        if rec.at_s > up_cutoff:
            up_rec = min(rec.replicas, up_rec)
        if rec.at_s > down_cutoff:
            down_rec = max(rec.replicas, down_rec)
        if rec.at_s < up_cutoff and rec.at_s < down_cutoff:
            old_index = i
    recommendation = current
    if recommendation < up_rec:
        recommendation = up_rec
    if recommendation > down_rec:
        recommendation = down_rec
    out = list(recs)
    if old_index >= 0:
        out[old_index] = Recommendation(now_s, desired)
    else:
        out.append(Recommendation(now_s, desired))
    return recommendation, out


def _changed_in_period(events: Sequence[ScaleEvent], period_s: int, now_s: float) -> int:
    cutoff = now_s - period_s
    return sum(e.change for e in events if e.at_s > cutoff)


def _rate_limit(
    current: int,
    ups: Sequence[ScaleEvent],
    downs: Sequence[ScaleEvent],
    rules: ScalingRules,
    now_s: float,
    *,
    up: bool,
) -> int:
    """The bound the rate policies put on one sync, upwards or downwards.

    As the HPA computes it: each policy proposes a limit from the replica count
    at the start of its period; ``selectPolicy: Min`` keeps the smallest change
    (the lowest limit upwards, the highest downwards), ``Max`` the largest.
    """
    if rules.select_policy == "Disabled":
        return current
    smallest_change = rules.select_policy == "Min"
    choose = min if smallest_change == up else max
    result: int | None = None
    for policy in rules.policies or ():
        start = (
            current
            - _changed_in_period(ups, policy.period_s, now_s)
            + _changed_in_period(downs, policy.period_s, now_s)
        )
        if policy.type == "Pods":
            proposed = start + policy.value if up else start - policy.value
        elif up:
            proposed = math.ceil(float(start) * (1 + float(policy.value) / 100))
        else:
            proposed = int(float(start) * (1 - float(policy.value) / 100))
        result = proposed if result is None else choose(result, proposed)
    if result is None:  # no policy: no limit in the direction that is chosen
        return _INT32_MAX if choose is min else -_INT32_MAX - 1
    return result


def _rate_limited(
    desired: int,
    current: int,
    hpa_min: int,
    hpa_max: int,
    up_rules: ScalingRules,
    down_rules: ScalingRules,
    ups: Sequence[ScaleEvent],
    downs: Sequence[ScaleEvent],
    now_s: float,
) -> tuple[int, str]:
    """``convertDesiredReplicasWithBehaviorRate``."""
    if desired > current:
        limit = _rate_limit(current, ups, downs, up_rules, now_s, up=True)
        limit = max(limit, current)
        if hpa_max > limit:
            allowed, reason = limit, "ScaleUpLimit"
        else:
            allowed, reason = hpa_max, "TooManyReplicas"
        if desired > allowed:
            return allowed, reason
    elif desired < current:
        limit = _rate_limit(current, ups, downs, down_rules, now_s, up=False)
        limit = min(limit, current)
        if hpa_min < limit:
            allowed, reason = limit, "ScaleDownLimit"
        else:
            allowed, reason = hpa_min, "TooFewReplicas"
        if desired < allowed:
            return allowed, reason
    return desired, "DesiredWithinRange"


def _store_event(
    behavior: HpaBehavior | None,
    ups: list[ScaleEvent],
    downs: list[ScaleEvent],
    previous: int,
    new: int,
    now_s: float,
) -> tuple[list[ScaleEvent], list[ScaleEvent]]:
    """``storeScaleEvent``: only with a behavior; reuse the last outdated slot."""
    if behavior is None or new == previous:
        return ups, downs
    up_rules, down_rules = behavior.resolved()
    if new > previous:
        events, rules, change = list(ups), up_rules, new - previous
    else:
        events, rules, change = list(downs), down_rules, previous - new
    longest = max((p.period_s for p in rules.policies or ()), default=0)
    cutoff = now_s - longest
    events = [
        replace(e, outdated=True) if e.at_s < cutoff and not e.outdated else e for e in events
    ]
    old_index = -1
    for i, e in enumerate(events):
        if e.outdated:
            old_index = i
    event = ScaleEvent(now_s, change)
    if old_index >= 0:
        events[old_index] = event
    else:
        events.append(event)
    return (events, list(downs)) if new > previous else (list(ups), events)


def simulate_hpa(
    samples: Iterable[tuple[float, Mapping[str, Observation | ClusterUnknown]]],
    *,
    scaler: KedaScaler,
    state: HpaState,
) -> tuple[HpaPrediction, ...]:
    """:func:`predict_hpa` over a series of ``(now_s, observations)``, each from the last state.

    Pods are assumed to exist and be ready as soon as they are asked for
    (``status_replicas = ready_replicas = replicas`` after the first step).

    >>> s = KedaScaler((Trigger("a"),), min_replica_count=1, max_replica_count=20)
    >>> steps = simulate_hpa([(t, {"a": Backlog(80, 0)}) for t in (0, 15, 300, 315)],
    ...                      scaler=s, state=HpaState(10))
    >>> [p.replicas for p in steps]
    [10, 10, 10, 8]
    """
    out: list[HpaPrediction] = []
    current = state
    for now_s, observations in samples:
        prediction = predict_hpa(observations, scaler=scaler, state=current, now_s=now_s)
        out.append(prediction)
        current = prediction.state
    return tuple(out)


# -- where the cluster and our rule differ ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScalingComparison:
    """Our decision next to what the cluster will set, and every reason they differ."""

    ours: int
    cluster: int
    agree: bool
    differences: tuple[str, ...]
    violates_unknown_rule: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "ours": self.ours,
            "cluster": self.cluster,
            "agree": self.agree,
            "differences": list(self.differences),
            "violates_unknown_rule": self.violates_unknown_rule,
        }


def compare_with_cluster(
    decision: ReplicaDecision, prediction: HpaPrediction, *, current: int
) -> ScalingComparison:
    """Where :func:`predict_hpa` (the cluster) departs from :func:`decide_replicas` (our rule).

    ``ours`` is the decision applied to ``current`` (an unknown decision
    holds). Each difference is attributed to the stage that causes it: KEDA's
    activation or cooldown, the tolerance, the partial-failure rule, the
    stabilisation window, rate limits, min/max, or our capacity cap.

    >>> d = decide_replicas({"a": Backlog(95, 0)}, target=10, min_replicas=1, max_replicas=20)
    >>> s = KedaScaler((Trigger("a"),), min_replica_count=1, max_replica_count=20)
    >>> p = predict_hpa({"a": Backlog(95, 0)}, scaler=s, state=HpaState(9), now_s=0)
    >>> compare_with_cluster(d, p, current=9).differences[0][:29]
    'tolerance: a asks for 10, but'
    """
    ours = decision.next_replicas(current)
    theirs = prediction.replicas
    out: list[str] = []
    violates = decision.status == "unknown" and theirs < current
    if decision.status == "unknown":
        if theirs < current:
            out.append(
                f"unknown: {', '.join(decision.unknown_parents)} unobserved; we hold {current}, "
                f"the cluster scales down to {theirs} ({prediction.reason})"
            )
        elif theirs > current:
            out.append(
                f"unknown: we hold {current}; the cluster scales up to {theirs} on the healthy "
                "triggers (its partial-failure rule allows scale-up)"
            )
    elif theirs != ours:
        if prediction.actor == "keda":
            out.append(f"KEDA: {prediction.reason} ({prediction.previous} → {theirs})")
        if prediction.reason == "FailedGetExternalMetric":
            out.append(f"metrics failed: the HPA does not rescale ({current} stays)")
        for r in prediction.readings:
            if r.within_tolerance and r.raw is not None and r.raw != r.proposal:
                out.append(
                    f"tolerance: {r.parent} asks for {r.raw}, but its ratio {_fmt_ratio(r.ratio)} "
                    f"(lag {r.lag} over {r.threshold} × {r.proposal}) is within 1 ± tolerance, "
                    f"so the HPA keeps {r.proposal}"
                )
        if (
            prediction.stabilized is not None
            and prediction.metric_replicas is not None
            and prediction.stabilized != prediction.metric_replicas
        ):
            out.append(
                f"stabilisation: the HPA proposes {prediction.metric_replicas}, but its window "
                f"holds {prediction.stabilized} (a higher recent recommendation)"
                if prediction.stabilized > prediction.metric_replicas
                else f"stabilisation: the scale-up window holds {prediction.stabilized}"
            )
        if prediction.stabilized is not None and theirs != prediction.stabilized:
            out.append(f"limits: {prediction.reason} turns {prediction.stabilized} into {theirs}")
        if decision.is_capped:
            out.append(
                f"capacity: we cap at {decision.replicas} (placeable); the backlog asks for "
                f"{decision.floor}, and pods beyond {decision.capacity} would stay Pending"
            )
        if not out:
            out.append(f"min/max or thresholds differ: we decide {ours}, the cluster sets {theirs}")
    return ScalingComparison(ours, theirs, ours == theirs, tuple(out), violates)


# -- a whole flow: the `vf scale` answer --------------------------------------------------------


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
        if current is not None and (not _is_int(current) or current < 0):
            raise _obs_error(node, f"current={current!r} must be a replica count >= 0")
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
                if not _is_int(count) or count < 0:
                    raise _obs_error(where, f"{name}={count!r} must be an int >= 0")
            parsed.append((parent, Backlog(pending, ack)))
        out[node] = NodeObservation(current, tuple(parsed))
    return out


@dataclass(frozen=True, slots=True)
class NodeScaling:
    """One processor in ``vf scale``: eligibility, decision, and (optionally) the cluster's."""

    node: str
    eligible: bool
    reasons: tuple[Reason, ...]
    current: int | None
    decision: ReplicaDecision
    scaler: KedaScaler | None = None
    prediction: HpaPrediction | None = None
    comparison: ScalingComparison | None = None

    def to_dict(self) -> dict[str, Any]:
        out = self.decision.to_dict()
        out.update(
            {
                "eligible": self.eligible,
                "reasons": [r.message for r in self.reasons],
                "reason_codes": [r.code for r in self.reasons],
                "current": self.current,
            }
        )
        if self.prediction is not None:
            hpa = self.prediction.to_dict()
            hpa["scaler"] = None if self.scaler is None else self.scaler.to_dict()
            hpa["comparison"] = None if self.comparison is None else self.comparison.to_dict()
            out["hpa"] = hpa
        return out


@dataclass(frozen=True, slots=True)
class FlowScaling:
    """Every processor's decision for one set of observations (``vf scale --json``)."""

    flow: str
    flow_type: str
    target: int
    nodes: tuple[NodeScaling, ...]
    notes: tuple[str, ...] = ()

    def node(self, name: str) -> NodeScaling:
        for n in self.nodes:
            if n.node == name:
                return n
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": {"name": self.flow, "flow_type": self.flow_type},
            "target": self.target,
            "decisions": {n.node: n.to_dict() for n in self.nodes},
            "notes": list(self.notes),
        }


def decide_flow(
    flow_or_spec: Flow | FlowSpec,
    observations: Mapping[str, NodeObservation] | Mapping[str, Any],
    *,
    target: int = DEFAULT_LAG_THRESHOLD,
    options: AutoscalingOptions | None = None,
    cluster: ClusterSnapshot | None = None,
    gpu_mode: GpuMode | str | None = "exclusive",
    gpu_resource_name: str | None = None,
    predict: bool = False,
    now_s: float = 0.0,
    solver: SolverConfig | None = None,
) -> FlowScaling:
    """Decide every processor of a valid flow from observed backlogs (``vf scale``).

    Each processor gets ``min_replicas = nb_tasks`` and ``max_replicas =
    max(options.max_replicas, nb_tasks)`` (what the rendered ScaledObject
    uses), every parent required, its eligibility from
    :func:`vfcore.autoscaling_rejections`, and — with a ``cluster`` — the
    capacity cap of GPU processors that want more than ``nb_tasks``. With
    ``predict``, the cluster's next evaluation from a fresh controller
    (:func:`predict_hpa` with an empty memory) and the comparison.
    ``observations`` is an :func:`observations_from_dict` result or the raw
    document.
    """
    from vfcore.demand import AutoscalingOptions, autoscaling_rejections
    from vfcore.spec import REALTIME
    from vfcore.validate import effective_replicas, require_valid, to_spec

    mode = parse_gpu_mode(gpu_mode)
    spec = require_valid(to_spec(flow_or_spec), gpu_mode=mode, gpu_resource_name=gpu_resource_name)
    opts = options or AutoscalingOptions(enabled=True)
    check_scaling_rule(target, 1, opts.max_replicas)
    parsed: dict[str, NodeObservation] = {}
    for key, value in observations.items():
        if not isinstance(value, NodeObservation):
            parsed = observations_from_dict(observations)
            break
        parsed[key] = value
    names = set(spec.names)
    strangers = sorted(set(parsed) - names)
    if strangers:
        raise InvalidInputError(
            "unknown-node",
            f"the observations name {strangers}, which the flow does not have "
            f"(nodes: {sorted(names)})",
            "name nodes as the flow declares them",
        )
    by_name = {n.name: n for n in spec.nodes}
    notes: list[str] = []
    for name in sorted(parsed):
        if not by_name[name].is_processor:
            notes.append(f"{name} is a {by_name[name].kind}: only processors are scaled; ignored")
    for name, given in sorted(parsed.items()):
        node_spec = by_name[name]
        stray = sorted(p for p, _ in given.parents if p not in node_spec.parents)
        if stray and node_spec.is_processor:
            raise InvalidInputError(
                "unknown-parent",
                f"the observations give {name} parent(s) {stray}; its parents are "
                f"{list(node_spec.parents)}",
                "observe each parent stream the node consumes, by the parent's name",
            )
    rejections = autoscaling_rejections(spec, opts)
    current_counts = {n: e.current for n, e in parsed.items() if e.current is not None}
    out: list[NodeScaling] = []
    for node_spec in spec.nodes:
        if not node_spec.is_processor:
            continue
        name = node_spec.name
        entry = parsed.get(name)
        nb = effective_replicas(node_spec)
        lo, hi = nb, max(opts.max_replicas, nb)
        obs = entry.parents_map if entry is not None else {}
        policy = node_spec.join_policy
        if node_spec.is_join and policy is None:
            policy = JoinPolicy.default_for(spec.flow_type)
        decision = decide_replicas(
            obs,
            target=target,
            min_replicas=lo,
            max_replicas=hi,
            required=node_spec.parents,
            join_policy=policy if node_spec.is_join else None,
        )
        current = entry.current if entry is not None else None
        reasons = rejections.get(name, ())
        eligible = not reasons
        if (
            eligible
            and cluster is not None
            and node_spec.is_gpu
            and decision.is_known
            and decision.floor > nb
        ):
            cap = capacity_cap(
                spec,
                cluster,
                name,
                up_to=decision.floor,
                replicas=current_counts,
                gpu_mode=mode,
                gpu_resource_name=gpu_resource_name,
                solver=solver,
            )
            decision = decide_replicas(
                obs,
                target=target,
                min_replicas=lo,
                max_replicas=hi,
                required=node_spec.parents,
                join_policy=policy if node_spec.is_join else None,
                capacity=cap,
            )
        scaler = prediction = comparison = None
        if predict and eligible:
            scaler = KedaScaler.for_parents(
                node_spec.parents, target=target, min_replicas=lo, max_replicas=hi
            )
            now = lo if current is None else current
            prediction = predict_hpa(obs, scaler=scaler, state=HpaState(now), now_s=now_s)
            comparison = compare_with_cluster(decision, prediction, current=now)
        out.append(
            NodeScaling(
                name, not reasons, reasons, current, decision, scaler, prediction, comparison
            )
        )
    if spec.flow_type != REALTIME:
        notes.append(
            "a BATCH flow's nodes are Jobs: nothing is autoscaled; the decisions say what the "
            "backlog calls for"
        )
    if predict:
        notes.append(
            "hpa: the next evaluation of a fresh controller (no recommendation history, no "
            "failure counts): a scale-down is held by the 300 s window from the current count"
        )
    return FlowScaling(spec.name or "flow", spec.flow_type, target, tuple(out), tuple(notes))
