"""The score plugins, in Go's arithmetic, for the Kubernetes minor version the model predicts.

Modelled: NodeResourcesFit, NodeResourcesBalancedAllocation, TaintToleration
and NodeAffinity (preferred terms), each with the default profile's weight
(1, 1, 3, 2). ``ScoringConfig.kube_version`` (default ``"1.36"``, accepted
1.29–1.36, see :func:`parse_kube_version`) picks the BalancedAllocation
formula: kubernetes PR #135573 changed it in 1.36.

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
- NodeResourcesBalancedAllocation. The *balance* of a node is
  ``int((1 - std) * 100)`` where ``std`` is the standard deviation of the
  fractions ``requested / allocatable`` (each capped at 1) over
  ``balanced_resources``; for two resources ``|f1 - f2| / 2``. Computed in
  IEEE doubles exactly as Go does. Up to 1.35 the score is the balance with
  the pod. From 1.36 it is the *change* the pod causes:
  ``50 + (50 + with - without) / 2`` (Go integer division), ``with`` and
  ``without`` the balance with and without the pod — 75 when the pod leaves
  the balance as it was, 50 for perfectly balanced → perfectly unbalanced, 100
  for the reverse. A pod requesting none of the resources is skipped (score 0
  everywhere, both formulas).
- TaintToleration: the number of the node's ``PreferNoSchedule`` taints the
  pod does not tolerate, normalised across the feasible nodes with
  ``DefaultNormalizeScore(100, reverse=True)`` (:func:`normalize_scores`).
- NodeAffinity: the summed weights of the pod's preferred terms the node
  matches, normalised with ``DefaultNormalizeScore(100, reverse=False)``.
- The total is ``fit_weight * fit + balanced_weight * balanced`` plus, where
  they differ between the feasible nodes, ``taint_weight * taint`` and
  ``node_affinity_weight * affinity`` (:func:`normalised_totals`). A plugin
  that gives every feasible node the same score cannot change the choice and
  is left out of the total. PodTopologySpread (2), InterPodAffinity (2) and
  ImageLocality (1) are in :mod:`.plugins`; the engine adds them the same
  way (``spread_weight``, ``interpod_weight``, ``image_weight``), and
  ``default_spread`` is ``PodTopologySpreadArgs``' default constraints
  (the system defaults unless told).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.cluster import NodeState, Taint, Toleration
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import PodRequest
from vfcore.placement.scheduler.workloads import (
    SYSTEM_DEFAULT_SPREAD,
    SpreadConstraint,
    requirement_holds,
)
from vfcore.quantity import CPU, MEMORY

__all__ = [
    "DEFAULT_KUBE_VERSION",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "EPHEMERAL_STORAGE",
    "KUBE_VERSIONS",
    "STRATEGIES",
    "NodeScore",
    "PreferredTerm",
    "ScoringConfig",
    "Strategy",
    "balance",
    "intolerable_prefer_no_schedule",
    "node_score",
    "nonzero_request",
    "normalised_totals",
    "normalize_scores",
    "parse_kube_version",
    "plugin_scores",
    "preferred_affinity_score",
]

Strategy = Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]

STRATEGIES: tuple[Strategy, ...] = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
MAX_NODE_SCORE = 100
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100
#: What kube-scheduler's scoring assumes for a pod that requests no cpu / memory.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
EPHEMERAL_STORAGE = "ephemeral-storage"
#: The Kubernetes minor versions the model predicts, oldest first.
KUBE_VERSIONS: tuple[str, ...] = tuple(f"1.{minor}" for minor in range(29, 37))
DEFAULT_KUBE_VERSION = "1.36"
#: The first minor version whose BalancedAllocation scores the change the pod causes.
BALANCED_CHANGE_SINCE = 36
_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?")


def parse_kube_version(text: object) -> str:
    """``"1.36"``, ``"v1.36"`` or ``"1.36.2"`` → ``"1.36"``; checked against :data:`KUBE_VERSIONS`.

    Only the minor version changes what the model predicts (a patch release
    does not change scoring), so a patch number is accepted and dropped.

    >>> parse_kube_version("v1.35.4")
    '1.35'
    >>> parse_kube_version("1.20")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vfcore.errors.InvalidInputError: unsupported-kube-version: Kubernetes 1.20 is not modelled: ...
    """
    raw = text.strip() if isinstance(text, str) else text
    match = _VERSION.fullmatch(raw) if isinstance(raw, str) else None
    if match is None:
        raise InvalidInputError(
            "invalid-kube-version",
            f"kube version {text!r} is not a Kubernetes minor version such as 1.36",
            f"give MAJOR.MINOR, e.g. --kube-version {DEFAULT_KUBE_VERSION} (a v prefix and a patch "
            "number are accepted)",
        )
    version = f"{int(match.group(1))}.{int(match.group(2))}"
    if version not in KUBE_VERSIONS:
        raise InvalidInputError(
            "unsupported-kube-version",
            f"Kubernetes {version} is not modelled: the model predicts "
            f"{KUBE_VERSIONS[0]} to {KUBE_VERSIONS[-1]}",
            f"give one of {', '.join(KUBE_VERSIONS)}; a newer cluster is closest to "
            f"{KUBE_VERSIONS[-1]}, an older one to {KUBE_VERSIONS[0]}",
        )
    return version


# -- configuration -------------------------------------------------------------


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
    kube_version: str = DEFAULT_KUBE_VERSION
    taint_weight: int = 3
    node_affinity_weight: int = 2
    spread_weight: int = 2
    interpod_weight: int = 2
    image_weight: int = 1
    default_spread: tuple[SpreadConstraint, ...] = SYSTEM_DEFAULT_SPREAD
    percentage_of_nodes_to_score: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kube_version", parse_kube_version(self.kube_version))
        if self.strategy not in STRATEGIES:
            raise InvalidInputError(
                "invalid-scoring-strategy",
                f"scoring strategy {self.strategy!r} is not one of {', '.join(STRATEGIES)}",
                "use LeastAllocated (the default), MostAllocated or RequestedToCapacityRatio",
            )
        resources = tuple((str(name), weight) for name, weight in self.resources)
        names = [name for name, _ in resources]
        if not resources:
            raise InvalidInputError(
                "invalid-scoring-resources",
                "the scoring strategy lists no resources",
                "list at least one, e.g. resources=(('cpu', 1), ('memory', 1))",
            )
        for name, weight in resources:
            if not name:
                raise InvalidInputError(
                    "invalid-scoring-resources",
                    "a scored resource has an empty name",
                    "name it, e.g. 'nvidia.com/gpu'",
                )
            if not _is_int(weight) or not 1 <= weight <= 100:
                raise InvalidInputError(
                    "invalid-scoring-resources",
                    f"resource {name} has weight {weight!r}, outside 1..100",
                    "give every scored resource an integer weight from 1 to 100",
                )
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise InvalidInputError(
                "invalid-scoring-resources",
                f"resources {duplicates} are listed more than once",
                "list each resource once",
            )
        shape = tuple((u, s) for u, s in self.shape)
        if not shape:
            raise InvalidInputError(
                "invalid-scoring-shape",
                "the RequestedToCapacityRatio shape has no points",
                "give at least one (utilization, score) point, e.g. ((0, 0), (100, 10))",
            )
        for utilization, score in shape:
            if not (_is_int(utilization) and _is_int(score)):
                raise InvalidInputError(
                    "invalid-scoring-shape",
                    f"shape point ({utilization!r}, {score!r}) is not a pair of integers",
                    "write points as (utilization 0..100, score 0..10)",
                )
            if not 0 <= utilization <= MAX_UTILIZATION or not 0 <= score <= 10:
                raise InvalidInputError(
                    "invalid-scoring-shape",
                    f"shape point ({utilization}, {score}) is outside utilization 0..100, score 0..10",
                    "write points as (utilization 0..100, score 0..10)",
                )
        utilizations = [u for u, _ in shape]
        if any(b <= a for a, b in itertools.pairwise(utilizations)):
            raise InvalidInputError(
                "invalid-scoring-shape",
                f"shape utilizations {utilizations} are not strictly increasing",
                "sort the points by utilization, each once",
            )
        for label, weight in (
            ("fit_weight", self.fit_weight),
            ("balanced_weight", self.balanced_weight),
            ("taint_weight", self.taint_weight),
            ("node_affinity_weight", self.node_affinity_weight),
            ("spread_weight", self.spread_weight),
            ("interpod_weight", self.interpod_weight),
            ("image_weight", self.image_weight),
        ):
            if not _is_int(weight) or weight < 0:
                raise InvalidInputError(
                    "invalid-plugin-weight",
                    f"{label} is {weight!r}; a plugin weight is an integer >= 0",
                    "use 1 (the default), a larger integer, or 0 to turn the plugin off",
                )
        balanced = tuple(str(r) for r in self.balanced_resources)
        if len(set(balanced)) != len(balanced) or any(not r for r in balanced):
            raise InvalidInputError(
                "invalid-balanced-resources",
                f"balanced_resources {list(balanced)} has an empty or repeated name",
                "list each resource once, e.g. ('cpu', 'memory')",
            )
        object.__setattr__(self, "resources", resources)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "balanced_resources", balanced)
        defaults = tuple(self.default_spread)
        if not all(isinstance(c, SpreadConstraint) and c.selector is None for c in defaults):
            raise InvalidInputError(
                "invalid-default-spread",
                "default_spread holds something other than selector-less SpreadConstraints",
                "give PodTopologySpreadArgs.defaultConstraints as SpreadConstraint(max_skew, "
                "topology_key, when_unsatisfiable) without a selector, or () for none",
            )
        object.__setattr__(self, "default_spread", defaults)
        percentage = self.percentage_of_nodes_to_score
        if not _is_int(percentage) or not 0 <= percentage <= 100:
            raise InvalidInputError(
                "invalid-percentage-of-nodes-to-score",
                f"percentage_of_nodes_to_score is {percentage!r}, outside 0..100",
                "use 0 (adaptive, the default) or a percentage from 1 to 100",
            )

    @property
    def kube_minor(self) -> int:
        """The minor version, e.g. 36 for ``"1.36"``."""
        return int(self.kube_version.split(".")[1])

    @property
    def balanced_scores_change(self) -> bool:
        """Whether BalancedAllocation scores the change the pod causes (1.36 on)."""
        return self.kube_minor >= BALANCED_CHANGE_SINCE

    @property
    def uniform_ties(self) -> bool:
        """Whether the scheduler breaks score ties uniformly at random (up to 1.35).

        1.36 draws the winner from a score heap and sets its random tie-break
        value only when scheduler extenders are configured, so a tie usually
        goes to the node earliest in the scheduler's node list: the *set* of
        outcomes stays, a probability over them is not the scheduler's.
        """
        return self.kube_minor < BALANCED_CHANGE_SINCE

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
            "kube_version": self.kube_version,
            "taint_weight": self.taint_weight,
            "node_affinity_weight": self.node_affinity_weight,
            "spread_weight": self.spread_weight,
            "interpod_weight": self.interpod_weight,
            "image_weight": self.image_weight,
            "default_spread": [c.to_dict() for c in self.default_spread],
            "percentage_of_nodes_to_score": self.percentage_of_nodes_to_score,
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


def plugin_scores(
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
    balanced = _balanced_score(
        config.balanced_resources, pod, alloc, used, config.balanced_scores_change
    )
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


def balance(fractions: Sequence[float]) -> int:
    """A node's balance, ``int((1 - std) * 100)``, from its capped ``requested / allocatable`` fractions.

    ``balancedResourceScorer`` up to 1.35 (the score itself) and the per-side
    balance from 1.36. Two fractions use ``|f1 - f2| / 2``; more, the
    population standard deviation; fewer than two, ``std = 0`` (balance 100).

    >>> balance([0.0, 0.5]), balance([0.25, 0.25]), balance([0.3]), balance([])
    (75, 100, 100, 100)
    """
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        total = 0.0
        for fraction in fractions:
            total += fraction
        mean = total / float(len(fractions))
        acc = 0.0
        for fraction in fractions:
            acc = acc + (fraction - mean) * (fraction - mean)
        std = math.sqrt(acc / float(len(fractions)))
    return int((1 - std) * float(MAX_NODE_SCORE))


def _balanced_score(
    resources: Sequence[str],
    pod: Mapping[str, int],
    alloc: Mapping[str, int],
    used: Mapping[str, int],
    scores_change: bool = True,
) -> int:
    """NodeResourcesBalancedAllocation's score; ``scores_change`` selects the 1.36 formula.

    1.36 (kubernetes PR #135573): ``50 + (50 + with - without) / 2`` in Go's
    int64 arithmetic (``MaxNodeScore/2 + (MaxNodeScore/2 + scoreWithPod -
    scoreWithoutPod)/2``), where ``with`` is :func:`balance` of the fractions
    ``(used + request) / allocatable`` and ``without`` of ``used /
    allocatable``, over the same resources (a resource with allocatable 0, or
    an extended resource the pod does not request, is left out of both). Both
    balances lie in 50..100 (a standard deviation of fractions in [0, 1] is at
    most 0.5), so ``50 + with - without`` is never negative and Go's
    truncating division is a floor. One scored resource (or none) gives
    ``std = 0`` on both sides: 75. What was checked, and where: the PR's
    description (no change → 75, balanced → unbalanced → 50, the reverse →
    100; the old scores ranged 50–100 and the new ones keep that range) and
    ``balancedResourceScorer(requested, allocated, allocatable)`` in
    ``pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go``
    as quoted from kubernetes master after the PR; the file at the PR's own
    commit was not in the searchable corpus, so the worked numbers in
    tests/unit/test_scheduler_versions.py are computed by hand from that
    formula and from the project's measurements against kube-scheduler
    v1.36 (docs/scheduler-model.md).

    Worked example (two resources, 4 cpu / 16 GiB node already holding a
    4 GiB pod that asks no cpu, a second such pod): without = ``1 - |0 -
    0.25|/2`` → 87; with = ``1 - |0 - 0.5|/2`` → 75; score ``50 + (50 + 75 -
    87) // 2 = 50 + 38 // 2 = 69``. Up to 1.35 the score is ``with`` = 75.
    """
    if all(pod.get(r, 0) == 0 for r in resources):
        return 0  # a best-effort pod: the plugin skips it (kubernetes#129138)
    with_pod: list[float] = []
    without_pod: list[float] = []
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
        before = used.get(resource, 0)
        with_pod.append(min(float(before + request) / float(capacity), 1.0))
        without_pod.append(min(float(before) / float(capacity), 1.0))
    with_score = balance(with_pod)
    if not scores_change:
        return with_score
    half = MAX_NODE_SCORE // 2
    return half + _go_div(half + with_score - balance(without_pod), 2)


def nonzero_request(pod: Mapping[str, int], resource: str) -> int:
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
    nonzero_cpu = node.nonzero_of(CPU)  # bound pods' containers without requests count defaults
    nonzero_memory = node.nonzero_of(MEMORY)
    for other in placed:
        requests = dict(other.requests)
        for resource, units in requests.items():
            used[resource] = used.get(resource, 0) + units
        nonzero_cpu += nonzero_request(requests, CPU)
        nonzero_memory += nonzero_request(requests, MEMORY)
    return plugin_scores(
        cfg, dict(pod.requests), dict(node.allocatable), used, nonzero_cpu, nonzero_memory
    )


# -- TaintToleration and NodeAffinity (preferred) ---------------------------------


def intolerable_prefer_no_schedule(
    taints: Iterable[Taint], tolerations: Sequence[Toleration]
) -> int:
    """TaintToleration's raw score: the node's ``PreferNoSchedule`` taints the pod does not tolerate.

    ``countIntolerableTaintsPreferNoSchedule`` over the tolerations whose
    effect is empty (every effect) or ``PreferNoSchedule``
    (``getAllTolerationPreferNoSchedule``); a toleration for ``NoSchedule``
    does not tolerate a ``PreferNoSchedule`` taint. ``NoSchedule`` and
    ``NoExecute`` taints are the filter's business, not the score's.

    >>> soft = Taint("nvidia.com/gpu", "present", "PreferNoSchedule")
    >>> gpu = Toleration("nvidia.com/gpu", "Exists", effect="NoSchedule")
    >>> intolerable_prefer_no_schedule([soft], [gpu]), intolerable_prefer_no_schedule([soft], [])
    (1, 1)
    >>> intolerable_prefer_no_schedule([soft], [Toleration("nvidia.com/gpu", "Exists")])
    0
    """
    preferred = [t for t in tolerations if t.effect in (None, "", "PreferNoSchedule")]
    return sum(
        1
        for taint in taints
        if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in preferred)
    )


_TERM_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """One ``preferredDuringSchedulingIgnoredDuringExecution`` term: a weight and label requirements.

    ``expressions`` are ``(key, operator, values)`` node-selector requirements
    (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``), all of
    which must hold (``matchExpressions`` are ANDed). ``weight`` is 1–100.
    """

    weight: int
    expressions: tuple[tuple[str, str, tuple[str, ...]], ...]

    def __post_init__(self) -> None:
        if not _is_int(self.weight) or not 1 <= self.weight <= 100:
            raise InvalidInputError(
                "invalid-preferred-term",
                f"a preferred node-affinity term has weight {self.weight!r}, outside 1..100",
                "give each preferred term an integer weight from 1 to 100",
            )
        for key, operator, _ in self.expressions:
            if operator not in _TERM_OPERATORS:
                raise InvalidInputError(
                    "invalid-preferred-term",
                    f"requirement on {key!r} has operator {operator!r}",
                    f"use one of {', '.join(_TERM_OPERATORS)}",
                )

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, operator, values in self.expressions:
            value = labels.get(key)
            if operator not in ("Gt", "Lt"):
                ok = requirement_holds(value, operator, values)
            else:  # Gt / Lt: one integer value, compared with the label parsed as an integer
                try:
                    have, bound = int(value or ""), int(values[0])
                except (ValueError, IndexError):
                    return False
                ok = have > bound if operator == "Gt" else have < bound
            if not ok:
                return False
        return True


def preferred_affinity_score(terms: Sequence[PreferredTerm], labels: Mapping[str, str]) -> int:
    """NodeAffinity's raw score: the summed weights of the preferred terms the node's labels match.

    >>> t = (PreferredTerm(80, (("zone", "In", ("a",)),)), PreferredTerm(20, ()))
    >>> preferred_affinity_score(t, {"zone": "a"}), preferred_affinity_score(t, {"zone": "b"})
    (100, 20)

    (An empty term matches every node here; the API rejects one, so none comes
    from a manifest.)
    """
    return sum(term.weight for term in terms if term.matches(labels))


def normalize_scores(scores: Sequence[int], *, reverse: bool) -> list[int]:
    """``helper.DefaultNormalizeScore(MaxNodeScore, reverse, scores)`` in Go's int64 arithmetic.

    ``max`` is the largest raw score (at least 0). When it is 0 every node
    gets 100 with ``reverse`` and keeps its score (0) without; otherwise a
    node gets ``100 * score // max``, subtracted from 100 with ``reverse``.
    Worked numbers: TaintToleration's intolerable counts ``[0, 1, 2]`` →
    ``[100, 50, 0]``; ``[0, 0]`` → ``[100, 100]``; NodeAffinity's weights
    ``[0, 30, 80]`` → ``[0, 37, 100]`` (``3000 // 80 = 37``).

    >>> normalize_scores([0, 1, 2], reverse=True), normalize_scores([0, 30, 80], reverse=False)
    ([100, 50, 0], [0, 37, 100])
    """
    top = max([0, *scores])
    if top == 0:
        return [MAX_NODE_SCORE] * len(scores) if reverse else list(scores)
    out = [MAX_NODE_SCORE * s // top for s in scores]
    return [MAX_NODE_SCORE - s for s in out] if reverse else out


def normalised_totals(
    config: ScoringConfig,
    totals: Sequence[int],
    taint_counts: Sequence[int],
    affinity_scores: Sequence[int],
) -> list[int]:
    """Each feasible node's total once TaintToleration and NodeAffinity are normalised across them.

    ``totals`` are the resource plugins' weighted sums (:class:`NodeScore`
    ``.total``), ``taint_counts`` :func:`intolerable_prefer_no_schedule` and
    ``affinity_scores`` :func:`preferred_affinity_score`, one per feasible
    node. A plugin whose normalised score is the same on every node adds
    nothing (it cannot change the choice, and leaving it out keeps totals
    comparable with a cluster without such taints or terms).

    Worked example (the PreferNoSchedule case in docs/scheduler-model.md,
    the second 2-GPU pod): resource totals ``[75, 125]`` (fit 0 + balanced 75
    on the half-full node, 50 + 75 on the tainted empty one), taint counts
    ``[0, 1]`` → TaintToleration ``[100, 0]`` × 3 → totals ``[375, 125]``: the
    untainted node wins although the resource plugins prefer the other.

    >>> normalised_totals(ScoringConfig(), [75, 125], [0, 1], [0, 0])
    [375, 125]
    """
    out = list(totals)
    for raw, reverse, weight in (
        (taint_counts, True, config.taint_weight),
        (affinity_scores, False, config.node_affinity_weight),
    ):
        if weight == 0 or len(set(raw)) <= 1:
            continue
        for i, score in enumerate(normalize_scores(raw, reverse=reverse)):
            out[i] += weight * score
    return out
