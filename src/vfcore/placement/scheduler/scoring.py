"""The score plugins: NodeResourcesFit and NodeResourcesBalancedAllocation, in Go's arithmetic.

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
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.cluster import NodeState
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import PodRequest
from vfcore.quantity import CPU, MEMORY

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "EPHEMERAL_STORAGE",
    "STRATEGIES",
    "NodeScore",
    "ScoringConfig",
    "Strategy",
    "node_score",
    "nonzero_request",
    "plugin_scores",
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

    def __post_init__(self) -> None:
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
    nonzero_cpu = used.get(CPU, 0)
    nonzero_memory = used.get(MEMORY, 0)
    for other in placed:
        requests = dict(other.requests)
        for resource, units in requests.items():
            used[resource] = used.get(resource, 0) + units
        nonzero_cpu += nonzero_request(requests, CPU)
        nonzero_memory += nonzero_request(requests, MEMORY)
    return plugin_scores(
        cfg, dict(pod.requests), dict(node.allocatable), used, nonzero_cpu, nonzero_memory
    )
