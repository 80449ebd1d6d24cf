"""Whether a pod fits a node, and why not — NodeResourcesFit and friends, as data.

The filters follow kube-scheduler: a node that is not Ready or is cordoned is
skipped; the pod's node selector must match the node's labels; every taint
with effect ``NoSchedule`` or ``NoExecute`` must be tolerated; and for every
resource the pod requests, ``request <= allocatable - requested``, plus one
more pod within the node's ``pods`` limit. This module is the one place that
rule is written: a shortfall is an :class:`Insufficient` carrying its numbers,
any other filter an :class:`Ineligible`, and :func:`never_reasons` says
whether a node could ever hold a pod, whatever is bound there. Reasons use the
scheduler's words so they read like ``kubectl describe`` output, and many
reasons become one sorted line::

    0/12 nodes fit detector/3: 3 node(s) had untolerated taint {gpu: dedicated}, 9 Insufficient nvidia.com/gpu

>>> from vfcore.cluster import node
>>> gpu = "nvidia.com/gpu"
>>> busy = node("a", allocatable={gpu: 4}, requested={gpu: 3})
>>> pod = PodRequest(pod="p/0", node="p", replica=0, requests=((gpu, 2),))
>>> shortfalls(pod, busy)
(Insufficient(resource='nvidia.com/gpu', requested=2, used=3, capacity=4),)
>>> shortfalls(pod, busy)[0].message
'Insufficient nvidia.com/gpu'
>>> never_reasons(pod, busy)  # a busy node could still hold it
()
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.cluster import NodeState
from vfcore.placement.claims import PodRequest
from vfcore.quantity import PODS

__all__ = [
    "NOT_READY",
    "NO_GPU_MEMORY_FACTS",
    "SELECTOR_MISMATCH",
    "SHARED_POOL",
    "TOO_MANY_PODS",
    "UNSCHEDULABLE",
    "FitReason",
    "Ineligible",
    "Insufficient",
    "Unplaced",
    "UnplacedKind",
    "could_ever_hold",
    "distinct_reasons",
    "eligibility_reasons",
    "fits",
    "free_units",
    "message_of",
    "never_reasons",
    "reasons_on",
    "resource_reasons",
    "sharing_reason",
    "shortfalls",
    "static_reasons",
    "summarise",
    "used_units",
]

NOT_READY = "node(s) were not ready"
UNSCHEDULABLE = "node(s) were unschedulable"
SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
SHARED_POOL = (
    "node(s) share GPUs by {sharing}: a pod needing {units} {resource} gets no whole cards"
)
NO_GPU_MEMORY_FACTS = "node(s) had no GPU memory facts (nvidia.com/gpu.memory, .count)"
_HARD_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True, order=True)
class Insufficient:
    """``requested`` units of ``resource`` do not fit: ``used`` of the node's ``capacity`` are taken.

    ``used`` counts the pods bound to the node plus what the caller already
    placed there; ``capacity`` is the node's allocatable (or, for "could it
    ever", what the node could advertise). The pod limit is the resource
    ``pods`` with ``requested=1`` and reads as the scheduler's ``Too many pods``.

    >>> Insufficient("nvidia.com/gpu", requested=4, used=6, capacity=8).message
    'Insufficient nvidia.com/gpu'
    >>> Insufficient("pods", requested=1, used=110, capacity=110).message
    'Too many pods'
    """

    resource: str
    requested: int
    used: int
    capacity: int

    @property
    def free(self) -> int:
        return self.capacity - self.used

    @property
    def short(self) -> int:
        """Units that would have to be freed for the pod to fit (always >= 1)."""
        return self.requested - self.free

    @property
    def message(self) -> str:
        return TOO_MANY_PODS if self.resource == PODS else f"Insufficient {self.resource}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "requested": self.requested,
            "used": self.used,
            "capacity": self.capacity,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True, order=True)
class Ineligible:
    """A filter other than capacity keeps the pod off the node (``message`` in the scheduler's words)."""

    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"message": self.message}


FitReason = Insufficient | Ineligible


UnplacedKind = Literal["unresolvable", "unschedulable", "unplanned", "unknown"]


@dataclass(frozen=True, slots=True)
class Unplaced:
    """A pod with no place: every node's reasons, in one scheduler-style line.

    The one type for every planner (exact packing and mix mode alike).
    ``kind``: ``unresolvable`` (no node could ever hold it: it exceeds every
    host, or no host is eligible), ``unschedulable`` (it would fit if others
    moved or capacity were freed), ``unplanned`` (its kind of claim is not
    planned here), ``unknown`` (it might fit on a node whose occupancy is unknown).
    ``reasons`` holds one :data:`FitReason` per distinct message (see
    :func:`distinct_reasons`); ``fix`` is set only when a fix is certain.
    """

    pod: str
    kind: UnplacedKind
    summary: str
    reasons: tuple[FitReason, ...]
    fix: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "kind": self.kind,
            "summary": self.summary,
            "reasons": [r.message for r in self.reasons],
            "fix": self.fix,
        }


def message_of(reason: FitReason | str) -> str:
    return reason if isinstance(reason, str) else reason.message


# -- filters other than capacity ------------------------------------------------------------


def eligibility_reasons(pod: PodRequest, node: NodeState) -> tuple[str, ...]:
    """Reasons, other than capacity, that keep ``pod`` off ``node`` (empty: eligible)."""
    out: list[str] = []
    if not node.ready:
        out.append(NOT_READY)
    if node.unschedulable:
        out.append(UNSCHEDULABLE)
    if pod.node_selector:
        labels = dict(node.labels)
        if any(labels.get(k) != v for k, v in pod.node_selector):
            out.append(SELECTOR_MISMATCH)
    for taint in node.taints:
        if taint.effect in _HARD_EFFECTS and not any(t.tolerates(taint) for t in pod.tolerations):
            out.append(f"node(s) had untolerated taint {taint.describe()}")
            break
    return tuple(out)


def sharing_reason(pod: PodRequest, node: NodeState) -> str | None:
    """A GPU-sharing pool (time-slicing or MPS) cannot serve a pod that needs > 1 card.

    The device plugin advertises ``replicas`` units per card there; asking for 2
    gives two references to possibly the same card, or is refused at kubelet
    admission (``failRequestsGreaterThanOne``), never two whole cards.
    """
    gpu = node.gpu
    if gpu is None or gpu.sharing == "none":
        return None
    for resource, units in pod.requests:
        if units > 1 and (resource == "nvidia.com/gpu" or resource.startswith("nvidia.com/mig-")):
            return SHARED_POOL.format(sharing=gpu.sharing, units=units, resource=resource)
    return None


def static_reasons(pod: PodRequest, node: NodeState) -> tuple[str, ...]:
    """Why ``pod`` can never go on ``node``, whatever is bound there, capacity aside (empty: none).

    The eligibility filters (:func:`eligibility_reasons`), the sharing rule
    (:func:`sharing_reason`) and, for a ``shared`` slice, the GPU memory facts
    it is sized by.
    """
    reasons = eligibility_reasons(pod, node)
    shared = sharing_reason(pod, node)
    if pod.slice == "shared" and (
        node.gpu is None or not node.gpu.memory_mib or not node.gpu.count
    ):
        reasons = (*reasons, NO_GPU_MEMORY_FACTS)
    return (*reasons, shared) if shared else reasons


# -- capacity -------------------------------------------------------------------------------


def free_units(node: NodeState, resource: str, extra: Mapping[str, int] | None = None) -> int:
    """Units of ``resource`` free on ``node`` after its bound pods and ``extra``.

    ``extra`` is what pods already placed by the caller (a plan, a simulation)
    take on top of the node's own ``requested``. A node whose occupancy is
    unknown (:meth:`NodeState.free_of` is ``None``) is judged as if nothing were
    bound: callers bracket unknowns (as empty for "fits", as full for "does not").
    """
    free = node.free_of(resource)
    if free is None:
        free = node.allocatable_of(resource)
    return free - (extra or {}).get(resource, 0)


def used_units(node: NodeState, resource: str, extra: Mapping[str, int] | None = None) -> int:
    """Units of ``resource`` taken on ``node`` by its bound pods and ``extra`` (see :func:`free_units`)."""
    return node.allocatable_of(resource) - free_units(node, resource, extra)


def _shortfall(
    node: NodeState, resource: str, units: int, extra: Mapping[str, int] | None
) -> Insufficient | None:
    capacity = node.allocatable_of(resource)
    used = used_units(node, resource, extra)
    return Insufficient(resource, units, used, capacity) if units > capacity - used else None


def shortfalls(
    pod: PodRequest, node: NodeState, extra: Mapping[str, int] | None = None
) -> tuple[Insufficient, ...]:
    """Every resource of ``node`` too short for ``pod`` (the pod limit first); empty: it fits.

    A request fits when ``requested <= free`` (equal fits; one more does not).
    """
    out = [s for s in [_shortfall(node, PODS, 1, extra)] if s is not None]
    for resource, units in pod.requests:
        found = _shortfall(node, resource, units, extra)
        if found is not None:
            out.append(found)
    return tuple(out)


def resource_reasons(
    pod: PodRequest, node: NodeState, extra: Mapping[str, int] | None = None
) -> tuple[str, ...]:
    """``Insufficient <resource>`` / ``Too many pods`` for ``pod`` on ``node`` (see :func:`shortfalls`)."""
    return tuple(s.message for s in shortfalls(pod, node, extra))


def fits(pod: PodRequest, node: NodeState, extra: Mapping[str, int] | None = None) -> bool:
    return not eligibility_reasons(pod, node) and not shortfalls(pod, node, extra)


def reasons_on(
    pod: PodRequest, node: NodeState, extra: Mapping[str, int] | None = None
) -> tuple[FitReason, ...]:
    """Why ``pod`` is not on ``node`` now: its static reasons if any, else its shortfalls."""
    static = static_reasons(pod, node)
    if static:
        return tuple(Ineligible(r) for r in static)
    return shortfalls(pod, node, extra)


# -- could this node ever hold this pod -----------------------------------------------------


def never_reasons(
    pod: PodRequest, node: NodeState, capacity: Mapping[str, int] | None = None
) -> tuple[FitReason, ...]:
    """Why ``node`` can never hold ``pod``, whatever is bound there (empty: it could).

    Its static reasons (:func:`static_reasons`), then every request above what
    the node could ever offer: its allocatable, or ``capacity[resource]`` where
    the caller knows the node could advertise more (mix mode re-partitions
    idle cards). A busy node that could hold the pod once freed has none.
    """
    static = static_reasons(pod, node)
    if static:
        return tuple(Ineligible(r) for r in static)
    most = capacity or {}
    out = []
    for resource, units in pod.requests:
        have = most.get(resource, node.allocatable_of(resource))
        if units > have:
            out.append(Insufficient(resource, units, 0, have))
    return tuple(out)


def could_ever_hold(
    pod: PodRequest, node: NodeState, capacity: Mapping[str, int] | None = None
) -> bool:
    """Could ``node`` hold ``pod`` once everything bound there is gone (see :func:`never_reasons`)?"""
    return not never_reasons(pod, node, capacity)


# -- many nodes' reasons ----------------------------------------------------------------------


def distinct_reasons(reasons_per_node: Iterable[Iterable[FitReason]]) -> tuple[FitReason, ...]:
    """One reason per distinct message, sorted by message: for shortfalls, the nearest miss.

    The nearest miss is the shortfall with the fewest units short (then the
    smallest numbers), so ``Insufficient nvidia.com/gpu`` carries the node
    closest to fitting.
    """
    best: dict[str, FitReason] = {}
    for reasons in reasons_per_node:
        for reason in reasons:
            key = reason.message
            held = best.get(key)
            if held is None or _nearer(reason, held):
                best[key] = reason
    return tuple(best[k] for k in sorted(best))


def _nearer(a: FitReason, b: FitReason) -> bool:
    if isinstance(a, Insufficient) and isinstance(b, Insufficient):
        return (a.short, a) < (b.short, b)
    return False


def summarise(
    pod: str, total_nodes: int, reasons_per_node: Iterable[Iterable[FitReason | str]]
) -> str:
    """The scheduler's one-line form: ``0/3 nodes fit p/0: 1 Too many pods, 2 Insufficient cpu``."""
    counts: Counter[str] = Counter()
    fitting = 0
    for reasons in reasons_per_node:
        distinct = sorted({message_of(r) for r in reasons})
        if not distinct:
            fitting += 1
        counts.update(distinct)
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    text = f"{fitting}/{total_nodes} nodes fit {pod}"
    return f"{text}: {', '.join(parts)}" if parts else text
