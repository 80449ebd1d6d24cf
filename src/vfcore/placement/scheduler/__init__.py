"""A model of kube-scheduler's greedy placement, and a remedy when it strands pods.

kube-scheduler places pods one at a time, in queue order, each on the
highest-scoring node that passes the filters, breaking score ties uniformly at
random. It never looks ahead, so it can strand a pod that an exact packing
places. This module predicts whether that happens for the pods a flow creates,
in the order they are applied (``docs/scheduler-model.md`` has the full story).

**Filters** (NodeResourcesFit and friends, :mod:`vfcore.fit`): the node is
Ready and schedulable, matches the pod's node selector (and, for a remedy, its
required node affinity), tolerates the node's ``NoSchedule``/``NoExecute``
taints, has one more pod slot, and for every resource the pod requests
``request <= allocatable - requested``.

**Scores** (integer arithmetic, as the Go code does it; ``requested`` includes
the pod being scored):

- NodeResourcesFit, per scored resource, then the weighted mean ``Σ s·w // Σ w``:

  - LeastAllocated ``(capacity - requested) * 100 // capacity`` (0 when over);
  - MostAllocated ``min(requested, capacity) * 100 // capacity``;
  - RequestedToCapacityRatio: the piecewise-linear ``shape`` (scores 0–10,
    scaled ×10) at ``requested * 100 // capacity``; only positive resource
    scores enter the mean, which is rounded half away from zero.

  A resource the node does not advertise (allocatable 0) is skipped; so is an
  extended resource the pod does not request. For cpu and memory the scheduler
  counts a pod that requests none as requesting 100 millicores and 200 MiB
  (``NonZeroRequested``). The default scores cpu and memory only: **GPUs are
  not scored** unless the configuration lists them.
- NodeResourcesBalancedAllocation: ``int((1 - std) * 100)`` where ``std`` is
  the standard deviation of the fractions ``requested / allocatable`` (each
  capped at 1) over ``balanced_resources``; for two resources ``|f1 - f2| / 2``.
  Computed in IEEE doubles exactly as Go does. A pod requesting none of them is
  skipped (score 0 everywhere).
- The total is ``fit_weight * fit + balanced_weight * balanced``. Every other
  default score plugin (TaintToleration, NodeAffinity, PodTopologySpread,
  InterPodAffinity, ImageLocality) is treated as constant across nodes: see the
  docs for what that leaves out.

Worked example (§1.5 of the scheduling reference): nodes ``a`` and ``b`` with
4 GPUs each, GPUs scored by LeastAllocated, pods of 2, 2 and 4 GPUs in that
order. P1 scores 50 on both: a tie, say ``a``. P2 scores ``(4-4)*100//4 = 0``
on ``a`` and ``(4-2)*100//4 = 50`` on ``b``: ``b``. P3 then finds 2 free GPUs
on each node and strands, in both tie-break outcomes — although {P1, P2} on
``a`` and P3 on ``b`` places all three. Applying the 4-GPU pod first (a wave
of its own, bound before the 2-GPU pods) lands every pod.

Ties: identical nodes with identical loads are interchangeable, so the model
keeps nodes in equivalence classes (same allocatable, labels, taints,
condition and load) and a tie between members of one class is no branch at all.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Literal, Protocol, TypeAlias, cast

from vfcore.claims import PodRequest
from vfcore.cluster import ClusterSnapshot, NodeState
from vfcore.errors import InvalidInputError
from vfcore.fit import SELECTOR_MISMATCH, eligibility_reasons, resource_reasons, summarise
from vfcore.quantity import CPU, MEMORY, PODS

__all__ = [
    "DEFAULT_MAX_BRANCHES",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "DEFAULT_SAMPLES",
    "HOSTNAME_LABEL",
    "NodeScore",
    "Remedy",
    "RemedyKind",
    "SchedulerPrediction",
    "SchedulerReport",
    "ScoringConfig",
    "Simulation",
    "Step",
    "StrandedPod",
    "Strategy",
    "TieBreak",
    "Verdict",
    "claim_size",
    "node_score",
    "predict",
    "predict_for_plan",
    "remedy",
    "simulate",
    "waves_of",
]

Strategy = Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]
Verdict = Literal["lands", "strands", "at-risk", "unknown"]
RemedyKind = Literal["none", "waves", "affinity", "waves+affinity"]
#: How a simulation breaks a score tie: ``"first"`` takes the tied node whose
#: name sorts first, ``"last"`` the one that sorts last, and a seeded
#: ``random.Random`` draws uniformly among the tied nodes (what kube-scheduler's
#: reservoir sampling does).
TieBreak: TypeAlias = "Literal['first', 'last'] | random.Random"

STRATEGIES: tuple[Strategy, ...] = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
MAX_NODE_SCORE = 100
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100
#: What kube-scheduler's scoring assumes for a pod that requests no cpu / memory.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
#: The label a remedy's required node affinity selects on.
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Search nodes (pod × cluster load state) the exhaustive tie search may visit.
DEFAULT_MAX_BRANCHES = 20_000
#: Seeded random tie policies the bounded search runs (besides first and last).
DEFAULT_SAMPLES = 8
EPHEMERAL_STORAGE = "ephemeral-storage"

_VERDICT_RANK: dict[str, int] = {"lands": 0, "at-risk": 1, "unknown": 2, "strands": 3}


# -- configuration -------------------------------------------------------------


def _bad(rule: str, message: str, hint: str) -> InvalidInputError:
    return InvalidInputError(rule, message, hint)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class ScoringConfig:
    """The score plugins' configuration (``KubeSchedulerConfiguration`` in miniature).

    ``strategy`` and ``resources`` (name, weight 1–100) are
    ``NodeResourcesFitArgs.scoringStrategy``; ``shape`` is its
    ``requestedToCapacityRatio.shape`` as (utilization 0–100, score 0–10)
    points, used only by ``RequestedToCapacityRatio``. ``fit_weight`` and
    ``balanced_weight`` are the plugin weights (0 turns a plugin off);
    ``balanced_resources`` are ``NodeResourcesBalancedAllocationArgs.resources``.
    The default is kube-scheduler's: LeastAllocated on cpu and memory, weight 1
    each, both plugins at weight 1 — GPUs are not scored.

    >>> ScoringConfig(resources=(("nvidia.com/gpu", 1),)).describe()
    'LeastAllocated on nvidia.com/gpu×1 (weight 1) + BalancedAllocation on cpu, memory (weight 1)'
    """

    strategy: Strategy = "LeastAllocated"
    resources: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))
    shape: tuple[tuple[int, int], ...] = ((0, 0), (100, 10))
    fit_weight: int = 1
    balanced_weight: int = 1
    balanced_resources: tuple[str, ...] = (CPU, MEMORY)

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise _bad(
                "invalid-scoring-strategy",
                f"scoring strategy {self.strategy!r} is not one of {', '.join(STRATEGIES)}",
                "use LeastAllocated (the default), MostAllocated or RequestedToCapacityRatio",
            )
        resources = tuple((str(name), weight) for name, weight in self.resources)
        names = [name for name, _ in resources]
        if not resources:
            raise _bad(
                "invalid-scoring-resources",
                "the scoring strategy lists no resources",
                "list at least one, e.g. resources=(('cpu', 1), ('memory', 1))",
            )
        for name, weight in resources:
            if not name:
                raise _bad(
                    "invalid-scoring-resources",
                    "a scored resource has an empty name",
                    "name it, e.g. 'nvidia.com/gpu'",
                )
            if not _is_int(weight) or not 1 <= weight <= 100:
                raise _bad(
                    "invalid-scoring-resources",
                    f"resource {name} has weight {weight!r}, outside 1..100",
                    "give every scored resource an integer weight from 1 to 100",
                )
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise _bad(
                "invalid-scoring-resources",
                f"resources {duplicates} are listed more than once",
                "list each resource once",
            )
        shape = tuple((u, s) for u, s in self.shape)
        if not shape:
            raise _bad(
                "invalid-scoring-shape",
                "the RequestedToCapacityRatio shape has no points",
                "give at least one (utilization, score) point, e.g. ((0, 0), (100, 10))",
            )
        for utilization, score in shape:
            if not (_is_int(utilization) and _is_int(score)):
                raise _bad(
                    "invalid-scoring-shape",
                    f"shape point ({utilization!r}, {score!r}) is not a pair of integers",
                    "write points as (utilization 0..100, score 0..10)",
                )
            if not 0 <= utilization <= MAX_UTILIZATION or not 0 <= score <= 10:
                raise _bad(
                    "invalid-scoring-shape",
                    f"shape point ({utilization}, {score}) is outside utilization 0..100, score 0..10",
                    "write points as (utilization 0..100, score 0..10)",
                )
        utilizations = [u for u, _ in shape]
        if any(b <= a for a, b in itertools.pairwise(utilizations)):
            raise _bad(
                "invalid-scoring-shape",
                f"shape utilizations {utilizations} are not strictly increasing",
                "sort the points by utilization, each once",
            )
        for label, weight in (
            ("fit_weight", self.fit_weight),
            ("balanced_weight", self.balanced_weight),
        ):
            if not _is_int(weight) or weight < 0:
                raise _bad(
                    "invalid-plugin-weight",
                    f"{label} is {weight!r}; a plugin weight is an integer >= 0",
                    "use 1 (the default), a larger integer, or 0 to turn the plugin off",
                )
        balanced = tuple(str(r) for r in self.balanced_resources)
        if len(set(balanced)) != len(balanced) or any(not r for r in balanced):
            raise _bad(
                "invalid-balanced-resources",
                f"balanced_resources {list(balanced)} has an empty or repeated name",
                "list each resource once, e.g. ('cpu', 'memory')",
            )
        object.__setattr__(self, "resources", resources)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "balanced_resources", balanced)

    def describe(self) -> str:
        scored = ", ".join(f"{n}×{w}" for n, w in self.resources)
        fit = f"{self.strategy} on {scored} (weight {self.fit_weight})"
        if self.strategy == "RequestedToCapacityRatio":
            fit += f" shape {[list(p) for p in self.shape]}"
        balanced = f"BalancedAllocation on {', '.join(self.balanced_resources)} (weight {self.balanced_weight})"
        return f"{fit} + {balanced}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "resources": [{"name": n, "weight": w} for n, w in self.resources],
            "shape": [{"utilization": u, "score": s} for u, s in self.shape],
            "fit_weight": self.fit_weight,
            "balanced_weight": self.balanced_weight,
            "balanced_resources": list(self.balanced_resources),
        }


# -- score formulas --------------------------------------------------------------


def _is_scalar(resource: str) -> bool:
    """Extended, hugepages and attachable-volume resources (Go's ``IsScalarResourceName``)."""
    return "/" in resource or resource.startswith(("hugepages-", "attachable-volumes-"))


def _go_div(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    """``helper.BuildBrokenLinearFunction`` with scores already scaled to 0–100."""
    for i, (utilization, score) in enumerate(shape):
        if p <= utilization:
            if i == 0:
                return score
            u0, s0 = shape[i - 1]
            return s0 + _go_div((score - s0) * (p - u0), utilization - u0)
    return shape[-1][1]


@dataclass(frozen=True, slots=True)
class NodeScore:
    """What the two resource score plugins give one pod on one node, and the weighted total."""

    fit: int
    balanced: int
    total: int

    def to_dict(self) -> dict[str, int]:
        return {"fit": self.fit, "balanced": self.balanced, "total": self.total}


def _scores(
    config: ScoringConfig,
    pod: Mapping[str, int],
    alloc: Mapping[str, int],
    used: Mapping[str, int],
    used_nonzero_cpu: int,
    used_nonzero_memory: int,
) -> NodeScore:
    """The plugin scores for a pod requesting ``pod`` on a node with ``alloc`` and ``used``.

    ``used`` is what is bound (and assumed) on the node; ``used_nonzero_*`` the
    same for cpu and memory with the scheduler's defaults for pods that
    request none.
    """
    fit = _fit_score(config, pod, alloc, used, used_nonzero_cpu, used_nonzero_memory)
    balanced = _balanced_score(config.balanced_resources, pod, alloc, used)
    return NodeScore(fit, balanced, config.fit_weight * fit + config.balanced_weight * balanced)


def _fit_score(
    config: ScoringConfig,
    pod: Mapping[str, int],
    alloc: Mapping[str, int],
    used: Mapping[str, int],
    used_nonzero_cpu: int,
    used_nonzero_memory: int,
) -> int:
    node_score = 0
    weight_sum = 0
    for resource, weight in config.resources:
        request = pod.get(resource, 0)
        if resource == CPU:
            requested = used_nonzero_cpu + (request or DEFAULT_MILLI_CPU_REQUEST)
        elif resource == MEMORY:
            requested = used_nonzero_memory + (request or DEFAULT_MEMORY_REQUEST)
        elif resource == EPHEMERAL_STORAGE or (_is_scalar(resource) and request > 0):
            requested = used.get(resource, 0) + request
        else:
            continue  # an extended resource the pod does not ask for, or `pods`: not scored
        capacity = alloc.get(resource, 0)
        if capacity == 0:
            continue
        if config.strategy == "LeastAllocated":
            score = (
                0 if requested > capacity else (capacity - requested) * MAX_NODE_SCORE // capacity
            )
        elif config.strategy == "MostAllocated":
            score = min(requested, capacity) * MAX_NODE_SCORE // capacity
        else:
            utilization = (
                MAX_UTILIZATION if requested > capacity else requested * MAX_UTILIZATION // capacity
            )
            scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
            score = _broken_linear([(u, s * scale) for u, s in config.shape], utilization)
            if score <= 0:
                continue  # only positive resource scores enter the RTCR mean
        node_score += score * weight
        weight_sum += weight
    if weight_sum == 0:
        return 0
    if config.strategy == "RequestedToCapacityRatio":
        return (2 * node_score + weight_sum) // (2 * weight_sum)  # math.Round, non-negative
    return node_score // weight_sum


def _balanced_score(
    resources: Sequence[str],
    pod: Mapping[str, int],
    alloc: Mapping[str, int],
    used: Mapping[str, int],
) -> int:
    if all(pod.get(r, 0) == 0 for r in resources):
        return 0  # a best-effort pod: the plugin skips it (kubernetes#129138)
    fractions: list[float] = []
    total = 0.0
    for resource in resources:
        request = pod.get(resource, 0)
        if _is_scalar(resource):
            if request == 0:
                continue
        elif resource not in (CPU, MEMORY, EPHEMERAL_STORAGE):
            continue
        capacity = alloc.get(resource, 0)
        if capacity == 0:
            continue
        fraction = float(used.get(resource, 0) + request) / float(capacity)
        fraction = min(fraction, 1.0)
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / float(len(fractions))
        acc = 0.0
        for fraction in fractions:
            acc = acc + (fraction - mean) * (fraction - mean)
        std = math.sqrt(acc / float(len(fractions)))
    return int((1 - std) * float(MAX_NODE_SCORE))


def _nonzero(pod: Mapping[str, int], resource: str) -> int:
    default = DEFAULT_MILLI_CPU_REQUEST if resource == CPU else DEFAULT_MEMORY_REQUEST
    return pod.get(resource, 0) or default


def node_score(
    pod: PodRequest,
    node: NodeState,
    *,
    config: ScoringConfig | None = None,
    placed: Iterable[PodRequest] = (),
) -> NodeScore:
    """The scores kube-scheduler gives ``pod`` on ``node`` with ``placed`` already bound there.

    The pod's own request counts (as in the scheduler). A node whose occupancy
    is unknown is scored as if nothing were bound. Fit is not checked here.

    >>> from vfcore.cluster import node as mk
    >>> a = mk("a", allocatable={"nvidia.com/gpu": 4})
    >>> p = PodRequest("p/0", "p", 0, (("nvidia.com/gpu", 2),))
    >>> cfg = ScoringConfig(resources=(("nvidia.com/gpu", 1),))
    >>> node_score(p, a, config=cfg).fit, node_score(p, a, config=cfg, placed=[p]).fit
    (50, 0)
    """
    cfg = config or ScoringConfig()
    used = dict(node.requested or ())
    nonzero_cpu = used.get(CPU, 0)
    nonzero_memory = used.get(MEMORY, 0)
    for other in placed:
        requests = dict(other.requests)
        for resource, units in requests.items():
            used[resource] = used.get(resource, 0) + units
        nonzero_cpu += _nonzero(requests, CPU)
        nonzero_memory += _nonzero(requests, MEMORY)
    return _scores(
        cfg, dict(pod.requests), dict(node.allocatable), used, nonzero_cpu, nonzero_memory
    )


# -- results -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StrandedPod:
    """A pod the model leaves Pending, with the scheduler-style line saying why."""

    pod: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"pod": self.pod, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Step:
    """One scheduling cycle: where the pod went, its score, and how big the tie was.

    ``tied_nodes`` counts the nodes sharing the top score; ``tied_states`` the
    distinct (node kind, load) states among them — the real branching, since
    identical nodes with identical loads are interchangeable. A stranded pod
    has ``node=None`` and zero ties.
    """

    pod: str
    node: str | None
    score: int | None
    tied_nodes: int
    tied_states: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "node": self.node,
            "score": self.score,
            "tied_nodes": self.tied_nodes,
            "tied_states": self.tied_states,
        }


@dataclass(frozen=True, slots=True)
class Simulation:
    """One greedy run: each pod in ``order`` bound to a node or stranded.

    ``placements`` pairs pods with nodes in apply order. A stranded pod's
    reason is judged against the cluster at the end of the run (what
    ``kubectl describe`` shows after the last retry: capacity only shrinks, so
    a stranded pod never fits later). Nodes of unknown occupancy were
    simulated as ``unknown_as`` (empty or full).
    """

    order: tuple[str, ...]
    placements: tuple[tuple[str, str], ...]
    stranded: tuple[StrandedPod, ...]
    steps: tuple[Step, ...]
    tie: str
    config: ScoringConfig
    unknown_nodes: tuple[str, ...] = ()
    unknown_as: Literal["empty", "full"] = "empty"

    @property
    def lands(self) -> bool:
        return not self.stranded

    @property
    def placement(self) -> dict[str, str]:
        return dict(self.placements)

    @property
    def ties(self) -> tuple[Step, ...]:
        """The steps where more than one distinct node state shared the top score."""
        return tuple(s for s in self.steps if s.tied_states > 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lands": self.lands,
            "order": list(self.order),
            "placements": dict(self.placements),
            "stranded": [s.to_dict() for s in self.stranded],
            "ties": [s.to_dict() for s in self.ties],
            "tie": self.tie,
            "config": self.config.to_dict(),
            "unknown_nodes": list(self.unknown_nodes),
            "unknown_as": self.unknown_as,
        }


@dataclass(frozen=True, slots=True)
class SchedulerPrediction:
    """The model's verdict over every tie-break outcome (or a documented sample of them).

    - ``lands``: every explored outcome places every pod;
    - ``strands``: every explored outcome strands some pod;
    - ``at-risk``: some outcomes land and some strand — it depends on tie-breaks;
    - ``unknown``: a node the pods could use has unknown occupancy and the
      verdict differs between treating such nodes as full and as empty
      (``brackets``), or the node list itself is unknown.

    ``exhaustive`` says every tie-break outcome was explored (up to swapping
    interchangeable nodes); otherwise the verdict comes from the bounded search
    (see :func:`predict`), which can miss outcomes: its ``lands`` is a sample.
    ``outcomes_explored`` counts distinct outcomes (paths through the collapsed
    tie tree) or runs of the bounded search; ``search_nodes`` the (pod, load
    state) pairs the exhaustive search visited. When exhaustive,
    ``node_outcomes`` counts the node-level tie-break sequences the real
    scheduler can produce (§1.5's "2/2 outcomes": two symmetric nodes are two
    node outcomes but one collapsed outcome) and ``strand_probability`` is the
    exact chance that some pod strands when every tie is broken uniformly at
    random, as kube-scheduler's reservoir sampling does.
    """

    verdict: Verdict
    exhaustive: bool
    outcomes_explored: int
    search_nodes: int
    stranded_sometimes: tuple[str, ...]
    stranded_always: tuple[str, ...]
    example_stranding: Simulation | None
    example_landing: Simulation | None
    order: tuple[str, ...]
    config: ScoringConfig
    reason: str
    unknown_nodes: tuple[str, ...] = ()
    brackets: tuple[tuple[str, str], ...] = ()
    node_outcomes: int | None = None
    strand_probability: Fraction | None = None

    @property
    def stranded(self) -> tuple[str, ...]:
        """Pods stranded in at least one explored outcome, in apply order."""
        return self.stranded_sometimes

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "exhaustive": self.exhaustive,
            "outcomes_explored": self.outcomes_explored,
            "search_nodes": self.search_nodes,
            "node_outcomes": self.node_outcomes,
            "strand_probability": None
            if self.strand_probability is None
            else str(self.strand_probability),
            "stranded": list(self.stranded),
            "stranded_sometimes": list(self.stranded_sometimes),
            "stranded_always": list(self.stranded_always),
            "example_stranding": None
            if self.example_stranding is None
            else self.example_stranding.to_dict(),
            "order": list(self.order),
            "config": self.config.to_dict(),
            "unknown_nodes": list(self.unknown_nodes),
            "brackets": {name: verdict for name, verdict in self.brackets},
        }


# -- the engine: node equivalence classes ------------------------------------------

_MISSING = object()


class _Engine:
    """Compiled pods and nodes: integer vectors, node classes and memoised evaluations.

    A node *state* is (static id, load vector). The static id groups nodes that
    no pod can tell apart except by load: same allocatable, labels, taints,
    condition and remedy affinity. The load vector holds the requested units of
    every relevant resource (``pods`` counts pods) and two extra slots: cpu and
    memory as the scorer counts them (``NonZeroRequested``). Each distinct
    state gets a small integer id; scores and successors are cached per
    (pod kind, state id).
    """

    def __init__(
        self,
        pods: Sequence[PodRequest],
        cluster: ClusterSnapshot,
        config: ScoringConfig,
        affinity: Mapping[str, tuple[str, ...]],
        unknown_as: Literal["empty", "full"],
    ) -> None:
        self.pods = pods
        self.position = {p.pod: i for i, p in enumerate(pods)}
        self.config = config
        self.affinity = affinity
        self.unknown_as = unknown_as
        names = {PODS, CPU, MEMORY}
        names.update(r for p in pods for r, _ in p.requests)
        names.update(r for r, _ in config.resources)
        names.update(config.balanced_resources)
        self.resources: tuple[str, ...] = tuple(sorted(names))
        self.index = {r: i for i, r in enumerate(self.resources)}
        self.width = len(self.resources)
        self.nz_cpu = self.width
        self.nz_memory = self.width + 1

        # Nodes, bracketed where occupancy is unknown.
        self.nodes: dict[str, NodeState] = {}
        self.unknown_nodes = tuple(n.name for n in cluster.nodes if not n.occupancy_known)
        self.base: dict[str, tuple[int, ...]] = {}
        self.static_of: dict[str, int] = {}
        static_ids: dict[tuple[object, ...], int] = {}
        self.static_alloc: list[tuple[int, ...]] = []
        self.static_node: list[NodeState] = []
        self.static_allowed: list[frozenset[str]] = []
        for n in cluster.nodes:
            state = n
            if not n.occupancy_known:
                state = (
                    n.as_empty()
                    if unknown_as == "empty"
                    else replace(n, requested=n.allocatable, unknown_reason=None)
                )
            self.nodes[n.name] = state
            alloc = tuple(state.allocatable_of(r) for r in self.resources)
            used = [state.requested_of(r) or 0 for r in self.resources]
            used += [used[self.index[CPU]], used[self.index[MEMORY]]]
            self.base[n.name] = tuple(used)
            allowed = frozenset(w for w, hosts in affinity.items() if n.name in hosts)
            key = (alloc, n.labels, n.taints, n.ready, n.unschedulable, allowed)
            sid = static_ids.get(key)
            if sid is None:
                sid = static_ids[key] = len(self.static_alloc)
                self.static_alloc.append(alloc)
                self.static_node.append(state)
                self.static_allowed.append(allowed)
            self.static_of[n.name] = sid

        # Pods, grouped into kinds (equal shape and affinity → interchangeable).
        kind_ids: dict[tuple[object, ...], int] = {}
        self.kind_of: list[int] = []
        self.kind_pod: list[PodRequest] = []
        self.kind_vector: list[tuple[int, ...]] = []
        self.kind_checked: list[tuple[int, ...]] = []
        for pod in pods:
            restricted = pod.node if pod.node in affinity else None
            kind_key = (pod.shape, restricted)
            kid = kind_ids.get(kind_key)
            if kid is None:
                kid = kind_ids[kind_key] = len(self.kind_pod)
                requests = dict(pod.requests)
                vector = [requests.get(r, 0) for r in self.resources]
                vector[self.index[PODS]] = 1  # the pod itself, against the node's pod limit
                vector += [_nonzero(requests, CPU), _nonzero(requests, MEMORY)]
                self.kind_pod.append(pod)
                self.kind_vector.append(tuple(vector))
                self.kind_checked.append(tuple(i for i in range(self.width) if vector[i] > 0))
            self.kind_of.append(kid)

        self.state_ids: dict[tuple[int, tuple[int, ...]], int] = {}
        self.states: list[tuple[int, tuple[int, ...]]] = []
        self._eligible: dict[tuple[int, int], tuple[str, ...]] = {}
        self._evals: list[dict[int, int | None]] = [{} for _ in self.kind_pod]
        self._next: list[dict[int, int]] = [{} for _ in self.kind_pod]

    # state ids ------------------------------------------------------------------
    def state_id(self, static: int, load: tuple[int, ...]) -> int:
        key = (static, load)
        sid = self.state_ids.get(key)
        if sid is None:
            sid = self.state_ids[key] = len(self.states)
            self.states.append(key)
        return sid

    def initial_classes(self) -> dict[int, list[str]]:
        classes: dict[int, list[str]] = {}
        for name in self.nodes:  # the snapshot keeps nodes sorted by name
            sid = self.state_id(self.static_of[name], self.base[name])
            classes.setdefault(sid, []).append(name)
        return classes

    # filters and scores -------------------------------------------------------------
    def eligibility(self, kind: int, static: int) -> tuple[str, ...]:
        key = (kind, static)
        found = self._eligible.get(key)
        if found is None:
            pod = self.kind_pod[kind]
            found = eligibility_reasons(pod, self.static_node[static])
            if pod.node in self.affinity and pod.node not in self.static_allowed[static]:
                found = (*found, SELECTOR_MISMATCH)
            self._eligible[key] = found
        return found

    def evaluate(self, kind: int, sid: int) -> int | None:
        """The total score of a pod of ``kind`` on a node in state ``sid``; None if it does not fit."""
        cache = self._evals[kind]
        found = cache.get(sid, _MISSING)
        if found is not _MISSING:
            return cast("int | None", found)
        static, load = self.states[sid]
        result: int | None = None
        if not self.eligibility(kind, static):
            alloc = self.static_alloc[static]
            vector = self.kind_vector[kind]
            if all(vector[i] <= alloc[i] - load[i] for i in self.kind_checked[kind]):
                result = self._score(kind, alloc, load)
        cache[sid] = result
        return result

    def _score(self, kind: int, alloc: tuple[int, ...], load: tuple[int, ...]) -> int:
        vector = self.kind_vector[kind]
        pod = {r: vector[i] for i, r in enumerate(self.resources) if r != PODS and vector[i]}
        return _scores(
            self.config,
            pod,
            dict(zip(self.resources, alloc, strict=True)),
            dict(zip(self.resources, load, strict=False)),
            load[self.nz_cpu],
            load[self.nz_memory],
        ).total

    def successor(self, kind: int, sid: int) -> int:
        """The state of a node in state ``sid`` after a pod of ``kind`` is bound to it."""
        cache = self._next[kind]
        found = cache.get(sid)
        if found is None:
            static, load = self.states[sid]
            vector = self.kind_vector[kind]
            found = cache[sid] = self.state_id(
                static, tuple(a + b for a, b in zip(load, vector, strict=True))
            )
        return found

    def best(self, kind: int, sids: Iterable[int]) -> tuple[int | None, list[int]]:
        """The top score among ``sids`` and the states that reach it (empty: nothing fits)."""
        top = -1
        tied: list[int] = []
        cache = self._evals[kind]
        for sid in sids:
            score = cache.get(sid, -1)  # the hot loop: one dict lookup per state
            if score == -1:  # not evaluated yet (scores are >= 0; None is "does not fit")
                score = self.evaluate(kind, sid)
            if score is None:
                continue
            if score > top:
                top = score
                tied = [sid]
            elif score == top:
                tied.append(sid)
        return (top if tied else None), tied

    def reasons_line(self, kind: int, pod: PodRequest, classes: Mapping[int, list[str]]) -> str:
        """``0/N nodes fit <pod>: …`` for ``pod`` (of ``kind``) against the nodes in ``classes``."""
        per_node: list[tuple[str, ...]] = []
        for sid, members in classes.items():
            static, load = self.states[sid]
            reasons = self.eligibility(kind, static)
            representative = members[0]
            node = self.nodes[representative]
            base = self.base[representative]
            if not reasons:  # the framework stops at a node's first failing filter
                extra = {
                    r: load[i] - base[i] for i, r in enumerate(self.resources) if load[i] != base[i]
                }
                reasons = resource_reasons(pod, node, extra)
            per_node.extend([reasons] * len(members))
        return summarise(pod.pod, len(self.nodes), per_node)


# -- one greedy run ------------------------------------------------------------------


class _Policy:
    """Which tied node a run takes; ``choose`` returns (state id, index among its members)."""

    name = "policy"

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        raise NotImplementedError


class _First(_Policy):
    name = "first"

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        return min(tied, key=lambda sid: classes[sid][0]), 0


class _Last(_Policy):
    name = "last"

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        sid = max(tied, key=lambda s: classes[s][-1])
        return sid, len(classes[sid]) - 1


class _Random(_Policy):
    """Uniform over the tied *nodes*, as reservoir sampling is (one draw per tie)."""

    name = "random"

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        if len(tied) == 1 and len(classes[tied[0]]) == 1:
            return tied[0], 0
        ordered = sorted(tied, key=lambda sid: classes[sid][0])
        pick = self.rng.randrange(sum(len(classes[sid]) for sid in ordered))
        for sid in ordered:
            size = len(classes[sid])
            if pick < size:
                return sid, pick
            pick -= size
        raise AssertionError("unreachable")  # pragma: no cover


class _ByPodCount(_Policy):
    """The tied node already running the fewest pods (``spread``) or the most (``pack``).

    Not a kube-scheduler behaviour: the two extremes the bounded search tries
    because stranding usually comes from spreading or from packing too early.
    Ties between them go to the name that sorts first.
    """

    def __init__(self, engine: _Engine, *, fewest: bool) -> None:
        self.pods_at = engine.index[PODS]
        self.states = engine.states
        self.sign = 1 if fewest else -1
        self.name = "spread" if fewest else "pack"

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        sid = min(tied, key=lambda s: (self.sign * self.states[s][1][self.pods_at], classes[s][0]))
        return sid, 0


class _Script(_Policy):
    """Replays the exhaustive search's choices: at each branch, the j-th tied state by id."""

    name = "scripted"

    def __init__(self, choices: Iterable[int]) -> None:
        self.choices: Iterator[int] = iter(choices)

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        if len(tied) == 1:
            return tied[0], 0
        return sorted(tied)[next(self.choices)], 0


def _policy(tie: object) -> _Policy:
    if isinstance(tie, _Policy):
        return tie
    if tie == "first":
        return _First()
    if tie == "last":
        return _Last()
    if isinstance(tie, random.Random):
        return _Random(tie)
    raise _bad(
        "invalid-tie-policy",
        f"tie policy {tie!r} is not 'first', 'last' or a random.Random",
        "pass tie='first', tie='last' or tie=random.Random(<seed>)",
    )


def _run(engine: _Engine, policy: _Policy) -> Simulation:
    classes = engine.initial_classes()
    placements: list[tuple[str, str]] = []
    stranded: list[PodRequest] = []
    steps: list[Step] = []
    for position, pod in enumerate(engine.pods):
        kind = engine.kind_of[position]
        top, tied = engine.best(kind, classes)
        if not tied:
            stranded.append(pod)
            steps.append(Step(pod.pod, None, None, 0, 0))
            continue
        tied_nodes = sum(len(classes[s]) for s in tied)
        sid, member = policy.choose(tied, classes)
        members = classes[sid]
        name = members.pop(member)
        if not members:
            del classes[sid]
        target = engine.successor(kind, sid)
        bisect.insort(classes.setdefault(target, []), name)
        placements.append((pod.pod, name))
        steps.append(Step(pod.pod, name, top, tied_nodes, len(tied)))
    lines: dict[int, str] = {}
    out: list[StrandedPod] = []
    sentinel = "\x00pod\x00"
    for pod in stranded:
        kind = engine.kind_of[engine.position[pod.pod]]
        template = lines.get(kind)
        if template is None:
            template = lines[kind] = engine.reasons_line(kind, replace(pod, pod=sentinel), classes)
        out.append(StrandedPod(pod.pod, template.replace(sentinel, pod.pod)))
    return Simulation(
        order=tuple(p.pod for p in engine.pods),
        placements=tuple(placements),
        stranded=tuple(out),
        steps=tuple(steps),
        tie=policy.name,
        config=engine.config,
        unknown_nodes=engine.unknown_nodes,
        unknown_as=engine.unknown_as,
    )


def _ordered(pods: Sequence[PodRequest], order: Sequence[str] | None) -> tuple[PodRequest, ...]:
    by_name: dict[str, PodRequest] = {}
    for pod in pods:
        if pod.pod in by_name:
            raise _bad(
                "duplicate-pod",
                f"pod {pod.pod} is listed twice",
                "pass each pod once (pods are named <node>/<replica>)",
            )
        by_name[pod.pod] = pod
    if order is None:
        return tuple(pods)
    names = list(order)
    if sorted(names) != sorted(by_name):
        missing = sorted(set(by_name) - set(names))
        extra = sorted(set(names) - set(by_name))
        raise _bad(
            "invalid-order",
            f"the apply order is not a permutation of the pods (missing {missing}, "
            f"unknown or repeated {extra or sorted({n for n in names if names.count(n) > 1})})",
            "list every pod exactly once",
        )
    return tuple(by_name[name] for name in names)


def _affinity(affinity: Mapping[str, Iterable[str]] | None) -> dict[str, tuple[str, ...]]:
    return {w: tuple(sorted(set(hosts))) for w, hosts in sorted((affinity or {}).items())}


def simulate(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    *,
    config: ScoringConfig | None = None,
    order: Sequence[str] | None = None,
    tie: Literal["first", "last"] | random.Random = "first",
    affinity: Mapping[str, Iterable[str]] | None = None,
    unknown_as: Literal["empty", "full"] = "empty",
) -> Simulation:
    """One greedy kube-scheduler run over ``pods`` in apply order (``order``: pod names).

    ``affinity`` maps a workload (``PodRequest.node``) to the only cluster
    nodes its pods may use — a required node affinity on
    ``kubernetes.io/hostname`` (hostnames are taken to equal node names).
    Nodes of unknown occupancy are simulated as ``unknown_as``. A
    ``random.Random`` tie policy is advanced by the run (pass a fresh
    ``random.Random(seed)`` to repeat a run).

    Cost: O(pods × distinct node states), not pods × nodes: identical nodes
    with identical loads are scored once.
    """
    if unknown_as not in ("empty", "full"):
        raise _bad(
            "invalid-unknown-bracket",
            f"unknown_as is {unknown_as!r}",
            "use 'empty' or 'full'",
        )
    policy = _policy(tie)
    engine = _Engine(
        _ordered(pods, order), cluster, config or ScoringConfig(), _affinity(affinity), unknown_as
    )
    return _run(engine, policy)


# -- every tie-break outcome -----------------------------------------------------------

_Path: TypeAlias = tuple[Any, ...]  # () or (choice, rest): a cons list of branch choices
_State: TypeAlias = tuple[tuple[int, int], ...]  # sorted (state id, node count)


@dataclass(frozen=True, slots=True)
class _Sub:
    """What happens from one (pod index, cluster state) to the end, over every tie outcome.

    ``outcomes`` counts paths through the tie tree with interchangeable nodes
    collapsed; ``node_outcomes`` counts node-level choice sequences (what a
    reservoir sampler can produce); ``p_strand`` is the exact probability that
    some pod strands when every tie is broken uniformly at random.
    """

    outcomes: int
    node_outcomes: int
    p_strand: Fraction
    all_land: bool
    any_land: bool
    sometimes: frozenset[int]
    always: frozenset[int]
    strand_path: _Path | None
    land_path: _Path | None


_LEAF = _Sub(1, 1, Fraction(0), True, True, frozenset(), frozenset(), None, ())


class _OverBudget(Exception):
    pass


class _Frame:
    """One branch-free stretch of the search, from ``start`` to a branch point or the end."""

    __slots__ = (
        "branch",
        "chain",
        "children",
        "i",
        "multiplier",
        "results",
        "start",
        "state",
        "tail",
        "weights",
    )

    def __init__(self, i: int, state: _State) -> None:
        self.i = i
        self.state = state
        self.start = (i, state)
        self.chain: list[int] = []  # pods stranded on the way
        self.multiplier = 1  # node-level choices on the way (a tie inside one state)
        self.branch: tuple[int, _State] | None = None
        self.children: list[_State] | None = None
        self.weights: list[int] = []  # tied nodes per child state
        self.results: list[_Sub] = []
        self.tail: _Sub | None = None


def _move(state: _State, sid: int, target: int) -> _State:
    counts = dict(state)
    counts[sid] -= 1
    if not counts[sid]:
        del counts[sid]
    counts[target] = counts.get(target, 0) + 1
    return tuple(sorted(counts.items()))


def _combine(results: list[_Sub], weights: list[int]) -> _Sub:
    strand_path = next(
        ((j, r.strand_path) for j, r in enumerate(results) if r.strand_path is not None), None
    )
    land_path = next(
        ((j, r.land_path) for j, r in enumerate(results) if r.land_path is not None), None
    )
    tied = sum(weights)
    return _Sub(
        outcomes=sum(r.outcomes for r in results),
        node_outcomes=sum(w * r.node_outcomes for w, r in zip(weights, results, strict=True)),
        p_strand=sum(
            (Fraction(w, tied) * r.p_strand for w, r in zip(weights, results, strict=True)),
            Fraction(0),
        ),
        all_land=all(r.all_land for r in results),
        any_land=any(r.any_land for r in results),
        sometimes=frozenset().union(*(r.sometimes for r in results)),
        always=frozenset.intersection(*(r.always for r in results)),
        strand_path=strand_path,
        land_path=land_path,
    )


def _with_chain(sub: _Sub, chain: list[int], multiplier: int) -> _Sub:
    if not chain and multiplier == 1:
        return sub
    if not chain:
        return replace(sub, node_outcomes=sub.node_outcomes * multiplier)
    return _Sub(
        outcomes=sub.outcomes,
        node_outcomes=sub.node_outcomes * multiplier,
        p_strand=Fraction(1),
        all_land=False,
        any_land=False,
        sometimes=sub.sometimes.union(chain),
        always=sub.always.union(chain),
        strand_path=sub.strand_path if sub.strand_path is not None else sub.land_path,
        land_path=None,
    )


def _explore(engine: _Engine, budget: int) -> tuple[_Sub, int]:
    """Depth-first over every tie-break outcome, memoised on (pod index, multiset of node states).

    Forced steps (one best state, or none) are followed in a loop; only real
    branch points open a frame, so the Python stack never grows. Raises
    ``_OverBudget`` past ``budget`` search nodes. Returns the root result and
    the number of search nodes visited.
    """
    memo: dict[tuple[int, _State], _Sub] = {}
    n = len(engine.pods)
    visited = 0

    def advance(frame: _Frame) -> None:
        nonlocal visited
        i, state = frame.i, frame.state
        while True:
            if i == n:
                frame.tail = _LEAF
                return
            hit = memo.get((i, state))
            if hit is not None:
                frame.tail = hit
                return
            visited += 1
            if visited > budget:
                raise _OverBudget
            kind = engine.kind_of[i]
            _, tied = engine.best(kind, (sid for sid, _ in state))
            if not tied:
                frame.chain.append(i)
            elif len(tied) == 1:
                frame.multiplier *= dict(state)[tied[0]]
                state = _move(state, tied[0], engine.successor(kind, tied[0]))
            else:
                counts = dict(state)
                frame.branch = (i, state)
                frame.children = [_move(state, sid, engine.successor(kind, sid)) for sid in tied]
                frame.weights = [counts[sid] for sid in tied]
                return
            i += 1

    classes = engine.initial_classes()
    root_state: _State = tuple(sorted((sid, len(m)) for sid, m in classes.items()))
    root = _Frame(0, root_state)
    advance(root)
    stack = [root]
    result = _LEAF
    while stack:
        frame = stack[-1]
        if frame.children is not None and len(frame.results) < len(frame.children):
            assert frame.branch is not None
            child = _Frame(frame.branch[0] + 1, frame.children[len(frame.results)])
            advance(child)
            stack.append(child)
            continue
        if frame.children is None:
            assert frame.tail is not None
            sub = frame.tail
        else:
            assert frame.branch is not None
            sub = _combine(frame.results, frame.weights)
            memo[frame.branch] = sub
        sub = _with_chain(sub, frame.chain, frame.multiplier)
        memo[frame.start] = sub
        stack.pop()
        if stack:
            stack[-1].results.append(sub)
        else:
            result = sub
    return result, visited


def _unpack(path: _Path | None) -> list[int] | None:
    if path is None:
        return None
    out: list[int] = []
    while path:
        out.append(path[0])
        path = path[1]
    return out


def _verdict_of(lands: int, strands: int) -> Verdict:
    if strands == 0:
        return "lands"
    if lands == 0:
        return "strands"
    return "at-risk"


def _names(pods: Sequence[PodRequest], indices: Iterable[int]) -> tuple[str, ...]:
    return tuple(pods[i].pod for i in sorted(indices))


def _reason(
    verdict: Verdict,
    outcomes: int,
    exhaustive: bool,
    sometimes: tuple[str, ...],
    p_strand: Fraction | None,
) -> str:
    scope = (
        f"{outcomes} tie-break outcome(s)"
        if exhaustive
        else f"{outcomes} sampled tie policies (bounded search)"
    )
    shown = ", ".join(sometimes[:5]) + (
        f" and {len(sometimes) - 5} more" if len(sometimes) > 5 else ""
    )
    if verdict == "lands":
        return f"every pod lands in all {scope}"
    if verdict == "strands":
        return f"some pod strands in all {scope}: {shown}"
    chance = "" if p_strand is None else f"; P(strand) = {p_strand} with uniform ties"
    return f"it depends on tie-breaks: over {scope}, some land and some strand {shown}{chance}"


def _predict_known(
    pods: tuple[PodRequest, ...],
    cluster: ClusterSnapshot,
    config: ScoringConfig,
    affinity: dict[str, tuple[str, ...]],
    unknown_as: Literal["empty", "full"],
    max_branches: int,
    samples: int,
) -> SchedulerPrediction:
    engine = _Engine(pods, cluster, config, affinity, unknown_as)
    order = tuple(p.pod for p in pods)
    try:
        sub, visited = _explore(engine, max_branches)
    except _OverBudget:
        return _predict_sampled(engine, pods, samples, max_branches)
    verdict: Verdict = "lands" if sub.all_land else ("at-risk" if sub.any_land else "strands")
    strand_choices = _unpack(sub.strand_path)
    land_choices = _unpack(sub.land_path)
    sometimes = _names(pods, sub.sometimes)
    return SchedulerPrediction(
        verdict=verdict,
        exhaustive=True,
        outcomes_explored=sub.outcomes,
        search_nodes=visited,
        stranded_sometimes=sometimes,
        stranded_always=_names(pods, sub.always),
        example_stranding=None if strand_choices is None else _run(engine, _Script(strand_choices)),
        example_landing=None if land_choices is None else _run(engine, _Script(land_choices)),
        order=order,
        config=config,
        reason=_reason(verdict, sub.outcomes, True, sometimes, sub.p_strand),
        node_outcomes=sub.node_outcomes,
        strand_probability=sub.p_strand,
    )


def _predict_sampled(
    engine: _Engine, pods: tuple[PodRequest, ...], samples: int, visited: int
) -> SchedulerPrediction:
    policies: list[_Policy] = [_First(), _Last()]
    policies += [_ByPodCount(engine, fewest=True), _ByPodCount(engine, fewest=False)]
    policies += [_Random(random.Random(seed)) for seed in range(samples)]
    runs = [_run(engine, p) for p in policies]
    landing = [r for r in runs if r.lands]
    stranding = [r for r in runs if not r.lands]
    position = {p.pod: i for i, p in enumerate(pods)}
    stranded_sets = [{position[s.pod] for s in r.stranded} for r in runs]
    sometimes = _names(pods, set().union(*stranded_sets))
    always = _names(pods, set.intersection(*stranded_sets)) if stranded_sets else ()
    verdict = _verdict_of(len(landing), len(stranding))
    return SchedulerPrediction(
        verdict=verdict,
        exhaustive=False,
        outcomes_explored=len(runs),
        search_nodes=visited,
        stranded_sometimes=sometimes,
        stranded_always=always,
        example_stranding=stranding[0] if stranding else None,
        example_landing=landing[0] if landing else None,
        order=tuple(p.pod for p in pods),
        config=engine.config,
        reason=_reason(verdict, len(runs), False, sometimes, None),
    )


def predict(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    *,
    config: ScoringConfig | None = None,
    order: Sequence[str] | None = None,
    affinity: Mapping[str, Iterable[str]] | None = None,
    max_branches: int = DEFAULT_MAX_BRANCHES,
    samples: int = DEFAULT_SAMPLES,
) -> SchedulerPrediction:
    """Whether kube-scheduler lands every pod, over every tie-break outcome.

    The pods arrive in apply order (``order`` or the given sequence: flow
    order, replicas in order). The search is a depth-first walk over the tie
    branches, memoised on the multiset of node states so that interchangeable
    nodes cost nothing; it is exhaustive while it visits at most
    ``max_branches`` (pod, cluster state) search nodes. Beyond that it runs a
    bounded search — the ``first`` and ``last`` tie policies, ``spread`` and
    ``pack`` (the tied node with the fewest / most pods), and ``samples``
    uniform random ones seeded 0, 1, … — and says ``exhaustive=False``.

    Unknown occupancy: when a node that some pod could use has unknown
    occupancy, the model runs twice, with such nodes full and empty; equal
    verdicts of ``lands`` or ``strands`` stand, anything else is ``unknown``.
    (Greedy placement is not monotone in capacity, so this brackets the two
    ends only.)
    """
    if not _is_int(max_branches) or max_branches < 1 or not _is_int(samples) or samples < 0:
        raise _bad(
            "invalid-search-budget",
            f"max_branches={max_branches!r}, samples={samples!r}",
            "use max_branches >= 1 and samples >= 0",
        )
    cfg = config or ScoringConfig()
    ordered = _ordered(pods, order)
    names = tuple(p.pod for p in ordered)
    groups = _affinity(affinity)
    if cluster.nodes_unknown is not None:
        return SchedulerPrediction(
            verdict="unknown",
            exhaustive=False,
            outcomes_explored=0,
            search_nodes=0,
            stranded_sometimes=(),
            stranded_always=(),
            example_stranding=None,
            example_landing=None,
            order=names,
            config=cfg,
            reason=f"the node list is unknown: {cluster.nodes_unknown}",
        )
    probe = _Engine(ordered, cluster, cfg, groups, "full")
    relevant = tuple(
        n.name
        for n in cluster.nodes
        if not n.occupancy_known
        and any(
            not probe.eligibility(k, probe.static_of[n.name]) for k in range(len(probe.kind_pod))
        )
    )
    if not relevant:
        return _predict_known(ordered, cluster, cfg, groups, "full", max_branches, samples)
    full = _predict_known(ordered, cluster, cfg, groups, "full", max_branches, samples)
    empty = _predict_known(ordered, cluster, cfg, groups, "empty", max_branches, samples)
    verdict: Verdict = (
        full.verdict
        if full.verdict == empty.verdict and full.verdict in ("lands", "strands")
        else "unknown"
    )
    sometimes_set = set(full.stranded_sometimes) | set(empty.stranded_sometimes)
    always_set = set(full.stranded_always) & set(empty.stranded_always)
    reason = (
        f"nodes {list(relevant)} have unknown occupancy; with them full: {full.verdict}, "
        f"with them empty: {empty.verdict}"
    )
    return SchedulerPrediction(
        verdict=verdict,
        exhaustive=full.exhaustive and empty.exhaustive,
        outcomes_explored=full.outcomes_explored + empty.outcomes_explored,
        search_nodes=full.search_nodes + empty.search_nodes,
        stranded_sometimes=tuple(n for n in names if n in sometimes_set),
        stranded_always=tuple(n for n in names if n in always_set),
        example_stranding=full.example_stranding or empty.example_stranding,
        example_landing=empty.example_landing or full.example_landing,
        order=names,
        config=cfg,
        reason=reason,
        unknown_nodes=relevant,
        brackets=(("unknown-full", full.verdict), ("unknown-empty", empty.verdict)),
    )


# -- the remedy ------------------------------------------------------------------------

_NOT_EXTENDED = frozenset({CPU, MEMORY, PODS, EPHEMERAL_STORAGE})


def claim_size(pod: PodRequest) -> tuple[int, int, int]:
    """How big a pod's claim is, for ordering waves: (largest extended-resource units, cpu, memory).

    >>> claim_size(PodRequest("d/0", "d", 0, (("cpu", 2000), ("nvidia.com/gpu", 4))))
    (4, 2000, 0)
    """
    requests = dict(pod.requests)
    extended = max((u for r, u in requests.items() if r not in _NOT_EXTENDED), default=0)
    return extended, requests.get(CPU, 0), requests.get(MEMORY, 0)


def waves_of(pods: Sequence[PodRequest]) -> tuple[tuple[str, ...], ...]:
    """Pods grouped into apply waves: largest claim first, one wave per claim size.

    Within a wave pods keep workload order and replica order. Applying wave
    by wave and waiting until each is bound before the next makes the apply
    order the wave order, whatever the controllers do within a wave.
    """
    by_size: dict[tuple[int, int, int], list[PodRequest]] = {}
    for pod in pods:
        by_size.setdefault(claim_size(pod), []).append(pod)
    return tuple(
        tuple(p.pod for p in sorted(by_size[size], key=lambda p: (p.node, p.replica, p.pod)))
        for size in sorted(by_size, reverse=True)
    )


def _affinity_groups(
    pods: Sequence[PodRequest], placement: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    groups: dict[str, set[str]] = {}
    for pod in pods:
        groups.setdefault(pod.node, set()).add(placement[pod.pod])
    return {w: tuple(sorted(hosts)) for w, hosts in sorted(groups.items())}


@dataclass(frozen=True, slots=True)
class Remedy:
    """How to apply a flow so that the scheduler lands what the exact packing places.

    ``kind`` is ``none`` (nothing needed, or nothing found that helps),
    ``waves`` (apply ``waves`` in turn, each bound before the next),
    ``affinity`` (give each workload a required node affinity
    ``kubernetes.io/hostname In [nodes]``; ``affinity`` pairs workload and
    nodes, derived from the exact placement) or ``waves+affinity`` (both).
    ``prediction`` is the model's verdict under the remedy.
    """

    kind: RemedyKind
    waves: tuple[tuple[str, ...], ...]
    affinity: tuple[tuple[str, tuple[str, ...]], ...]
    verdict_before: Verdict
    verdict_after: Verdict
    prediction: SchedulerPrediction

    @property
    def affinity_map(self) -> dict[str, tuple[str, ...]]:
        """``{workload: (node, …)}``."""
        return dict(self.affinity)

    @property
    def order(self) -> tuple[str, ...]:
        """The apply order the remedy implies."""
        return self.prediction.order

    def describe(self) -> str:
        """One paragraph a person can act on.

        >>> r = Remedy("waves", (("big/0",), ("small/0", "small/1")), (), "strands", "lands",
        ...            SchedulerPrediction("lands", True, 2, 3, (), (), None, None,
        ...                                ("big/0", "small/0", "small/1"), ScoringConfig(), "-"))
        >>> print(r.describe())
        The scheduler model strands pods when the flow is applied as is. Apply it in 2 waves, largest claims first, waiting until each wave is bound: wave 1: big/0; wave 2: small/0, small/1. Under this remedy the model says: lands (every pod lands in all 2 tie-break outcome(s) explored).
        """
        before = {
            "lands": "lands every pod",
            "strands": "strands pods",
            "at-risk": "may strand pods, depending on tie-breaks,",
            "unknown": "cannot tell whether pods land",
        }[self.verdict_before]
        parts = [f"The scheduler model {before} when the flow is applied as is."]
        if self.kind == "none" and self.verdict_before == "lands":
            parts.append("No remedy is needed.")
        elif self.kind == "none":
            parts.append(
                "No wave order or node affinity derived from the exact placement does better."
            )
        if "waves" in self.kind:
            shown = "; ".join(
                f"wave {i}: {', '.join(w[:6])}" + (f" (+{len(w) - 6} more)" if len(w) > 6 else "")
                for i, w in enumerate(self.waves, 1)
            )
            parts.append(
                f"Apply it in {len(self.waves)} waves, largest claims first, "
                f"waiting until each wave is bound: {shown}."
            )
        if "affinity" in self.kind:
            shown = "; ".join(f"{w} → {', '.join(hosts)}" for w, hosts in self.affinity)
            parts.append(
                f"Give each workload a required node affinity ({HOSTNAME_LABEL} In [...]): {shown}."
            )
        p = self.prediction
        scope = "explored" if p.exhaustive else "sampled"
        parts.append(
            f"Under this remedy the model says: {self.verdict_after} "
            f"(every pod lands in all {p.outcomes_explored} tie-break outcome(s) {scope})."
            if self.verdict_after == "lands"
            else f"Under this remedy the model says: {self.verdict_after} ({p.reason})."
        )
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "waves": [list(w) for w in self.waves],
            "affinity": {w: list(hosts) for w, hosts in self.affinity},
            "verdict_before": self.verdict_before,
            "verdict_after": self.verdict_after,
            "description": self.describe(),
            "prediction": self.prediction.to_dict(),
        }


def _check_placement(
    pods: Sequence[PodRequest], cluster: ClusterSnapshot, placement: Mapping[str, str]
) -> None:
    names = {p.pod for p in pods}
    nodes = {n.name for n in cluster.nodes}
    unknown_pods = sorted(set(placement) - names)
    if unknown_pods:
        raise _bad(
            "placement-unknown-pod",
            f"the placement names pods {unknown_pods} that are not among the pods",
            "pass the placement computed for these pods",
        )
    missing = sorted(names - set(placement))
    if missing:
        raise _bad(
            "placement-incomplete",
            f"the placement leaves pods {missing[:10]} unplaced; a remedy needs an exact packing of every pod",
            "compute a remedy only when the exact packing places every pod",
        )
    bad_nodes = sorted({n for n in placement.values() if n not in nodes})
    if bad_nodes:
        raise _bad(
            "placement-unknown-node",
            f"the placement uses nodes {bad_nodes} that the cluster does not have",
            "pass the placement computed for this cluster snapshot",
        )


def remedy(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    placement: Mapping[str, str],
    *,
    config: ScoringConfig | None = None,
    max_branches: int = DEFAULT_MAX_BRANCHES,
    samples: int = DEFAULT_SAMPLES,
) -> Remedy:
    """Find an apply order and/or node affinities under which the model lands every pod.

    ``placement`` (pod → node) is an exact packing of every pod. The steps,
    each re-checked with :func:`predict` over every tie outcome:

    1. **waves**: apply pods largest claim first (:func:`waves_of`), each wave
       bound before the next;
    2. **affinity**: restrict each workload to the nodes the exact placement
       gives its pods (replicas share one pod template, so the affinity is per
       workload), in the original order;
    3. **waves+affinity**: both.

    The first that lands wins; otherwise the best verdict found (lands, then
    at-risk, unknown, strands; then fewer pods always stranded; then the
    simpler remedy), which may be ``none``.
    """
    cfg = config or ScoringConfig()
    _check_placement(pods, cluster, placement)
    before = predict(pods, cluster, config=cfg, max_branches=max_branches, samples=samples)
    if before.verdict == "lands":
        return Remedy("none", (), (), before.verdict, before.verdict, before)
    waves = waves_of(pods)
    order = [name for wave in waves for name in wave]
    groups = _affinity_groups(pods, placement)
    affinity = tuple(groups.items())
    candidates: list[tuple[RemedyKind, SchedulerPrediction]] = [("none", before)]
    for kind, kwargs in (
        ("waves", {"order": order}),
        ("affinity", {"affinity": groups}),
        ("waves+affinity", {"order": order, "affinity": groups}),
    ):
        prediction = predict(
            pods,
            cluster,
            config=cfg,
            max_branches=max_branches,
            samples=samples,
            **cast("dict[str, Any]", kwargs),
        )
        candidates.append((cast("RemedyKind", kind), prediction))
        if prediction.verdict == "lands":
            break
    simplicity = {"none": 0, "waves": 1, "affinity": 2, "waves+affinity": 3}
    kind, after = min(
        candidates,
        key=lambda c: (
            _VERDICT_RANK[c[1].verdict],
            len(c[1].stranded_always),
            len(c[1].stranded_sometimes),
            simplicity[c[0]],
        ),
    )
    return Remedy(
        kind=kind,
        waves=waves if "waves" in kind else (),
        affinity=affinity if "affinity" in kind else (),
        verdict_before=before.verdict,
        verdict_after=after.verdict,
        prediction=after,
    )


# -- for vf plan -----------------------------------------------------------------------


class _PlanLike(Protocol):
    @property
    def verdict(self) -> str: ...

    @property
    def placement(self) -> dict[str, str]: ...


@dataclass(frozen=True, slots=True)
class SchedulerReport:
    """The ``scheduler`` section of a plan: the model's verdict and, when needed, a remedy.

    ``remedy`` is computed when the model does not land every pod although the
    exact packing places them all (``None`` otherwise).
    """

    prediction: SchedulerPrediction
    remedy: Remedy | None

    @property
    def verdict(self) -> Verdict:
        return self.prediction.verdict

    @property
    def stranded(self) -> tuple[str, ...]:
        return self.prediction.stranded

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.prediction.verdict,
            "reason": self.prediction.reason,
            "stranded": list(self.prediction.stranded),
            "stranded_always": list(self.prediction.stranded_always),
            "exhaustive": self.prediction.exhaustive,
            "strand_probability": None
            if self.prediction.strand_probability is None
            else str(self.prediction.strand_probability),
            "config": self.prediction.config.to_dict(),
            "remedy": None if self.remedy is None else self.remedy.to_dict(),
            "verdict_with_remedy": self.verdict
            if self.remedy is None
            else self.remedy.verdict_after,
        }


def predict_for_plan(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    plan: _PlanLike,
    *,
    config: ScoringConfig | None = None,
) -> SchedulerReport:
    """The model's verdict for a plan's pods, plus a remedy when greedy misses an exact packing."""
    cfg = config or ScoringConfig()
    prediction = predict(pods, cluster, config=cfg)
    placement = plan.placement
    exact = plan.verdict == "fits" and all(p.pod in placement for p in pods)
    fix = None
    if prediction.verdict != "lands" and exact:
        fix = remedy(pods, cluster, placement, config=cfg)
    return SchedulerReport(prediction, fix)
