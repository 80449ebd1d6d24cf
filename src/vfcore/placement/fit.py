"""Whether a pod fits a node, and why not — NodeResourcesFit and friends, as data.

The filters follow kube-scheduler's default profile, in its order
(``pkg/scheduler/apis/config/v1/default_plugins.go``), and a node is counted
once, at its *first* failing filter, as the scheduling framework does
(``RunFilterPlugins`` stops at the first plugin that rejects a node):

1. NodeUnschedulable — a cordoned node (``spec.unschedulable``), unless the
   pod tolerates ``node.kubernetes.io/unschedulable:NoSchedule``;
2. NodeName — not modelled (flow pods name no node);
3. TaintToleration — every taint with effect ``NoSchedule`` or ``NoExecute``
   must be tolerated. A node that is not Ready carries the node lifecycle
   controller's ``node.kubernetes.io/not-ready:NoSchedule`` taint (added here
   when a snapshot lacks it), so it fails *here*, not on a readiness check of
   its own;
4. NodeAffinity — the pod's node selector (and required affinity) must match;
5. NodePorts — not modelled (flow pods ask for no host ports);
6. NodeResourcesFit — for every resource the pod requests,
   ``request <= allocatable - requested``, plus one more pod within the node's
   ``pods`` limit. This one plugin reports *every* short resource of the node
   (``fitsRequest``), so a node short of cpu and memory counts under both;
7. vfcore's own rules, after every kube-scheduler filter (kube-scheduler would
   place the pod there; the device plugin or kubelet would not serve it): a
   GPU-sharing pool cannot serve a pod that needs more than one card, and a
   ``shared`` slice needs the node's GPU memory facts.

This module is the one place that rule is written: a shortfall is an
:class:`Insufficient` carrying its numbers, any other filter an
:class:`Ineligible`, and :func:`never_reasons` says whether a node could ever
hold a pod, whatever is bound there. Reasons use kube-scheduler v1.36's words
(taints as ``node(s) had untolerated taint(s)``, without naming the taint),
and many nodes' reasons become one line that counts each reason string over
the nodes, sorted as ``FitError.Error()`` sorts them::

    0/12 nodes fit detector/3: 3 node(s) had untolerated taint(s), 9 Insufficient nvidia.com/gpu

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

from vfcore.cluster import NodeState, Taint
from vfcore.placement.claims import PodRequest
from vfcore.quantity import PODS

__all__ = [
    "NOT_READY_TAINT",
    "NO_GPU_MEMORY_FACTS",
    "SELECTOR_MISMATCH",
    "SHARED_POOL",
    "SHARED_POOL_RESOURCES",
    "TOO_MANY_PODS",
    "UNSCHEDULABLE",
    "UNSCHEDULABLE_TAINT",
    "UNTOLERATED_TAINT",
    "FitReason",
    "Ineligible",
    "Insufficient",
    "Unplaced",
    "UnplacedKind",
    "card_vram_mib",
    "could_ever_hold",
    "distinct_reasons",
    "effective_taints",
    "eligibility_reasons",
    "fits",
    "free_units",
    "gib",
    "message_of",
    "never_reasons",
    "pool_resource",
    "pool_vram_reason",
    "reasons_on",
    "resource_reasons",
    "scheduler_message",
    "sharing_reason",
    "shortfalls",
    "static_reasons",
    "summarise",
    "used_units",
]

# kube-scheduler v1.36's words: nodeunschedulable.ErrReasonUnschedulable,
# tainttoleration.ErrReasonNotMatch, nodeaffinity.ErrReasonPod, and fitsRequest's "Too many pods".
UNSCHEDULABLE = "node(s) were unschedulable"
UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"
SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
# The taint the node lifecycle controller puts on a NotReady node (TaintNodesByCondition), and
# the one a pod must tolerate to pass NodeUnschedulable on a cordoned node.
NOT_READY_TAINT = Taint("node.kubernetes.io/not-ready", "", "NoSchedule")
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
_CONDITION_TAINT_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
SHARED_POOL = (
    "node(s) share GPUs by {sharing}: a pod needing {units} {resource} gets no whole cards"
)
NO_GPU_MEMORY_FACTS = "node(s) had no GPU memory facts (nvidia.com/gpu.memory, .count)"
#: The resources a time-sliced or MPS pool advertises: replicas of cards, not cards
#: (``nvidia.com/gpu.shared`` when the device plugin's ``renameByDefault`` is set).
SHARED_POOL_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
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


def effective_taints(node: NodeState) -> tuple[Taint, ...]:
    """The node's taints as kube-scheduler sees them.

    A node that is not Ready carries ``node.kubernetes.io/not-ready:NoSchedule``
    (or ``unreachable``) from the node lifecycle controller; a snapshot without
    it (hand-written, or taken before the controller acted) gets it here.

    >>> from vfcore.cluster import node
    >>> effective_taints(node("a", allocatable={}, ready=False))
    (Taint(key='node.kubernetes.io/not-ready', value='', effect='NoSchedule'),)
    >>> effective_taints(node("a", allocatable={}))
    ()
    """
    if node.ready or any(
        t.key in _CONDITION_TAINT_KEYS and t.effect == "NoSchedule" for t in node.taints
    ):
        return node.taints
    return (*node.taints, NOT_READY_TAINT)


def _tolerated(pod: PodRequest, taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in pod.tolerations)


def eligibility_reasons(pod: PodRequest, node: NodeState) -> tuple[str, ...]:
    """The first kube-scheduler filter, other than capacity, that rejects ``pod`` on ``node``.

    At most one reason (empty: eligible): NodeUnschedulable, TaintToleration,
    NodeAffinity, in the default profile's order — the framework stops at a
    node's first failing filter, so a cordoned node with an untolerated taint
    counts only as ``node(s) were unschedulable``.
    """
    if node.unschedulable and not _tolerated(pod, UNSCHEDULABLE_TAINT):
        return (UNSCHEDULABLE,)
    for taint in effective_taints(node):
        if taint.effect in _HARD_EFFECTS and not _tolerated(pod, taint):
            return (UNTOLERATED_TAINT,)
    if pod.node_selector:
        labels = dict(node.labels)
        if any(labels.get(k) != v for k, v in pod.node_selector):
            return (SELECTOR_MISMATCH,)
    return ()


def _is_pool_resource(resource: str) -> bool:
    return resource in SHARED_POOL_RESOURCES or resource.startswith("nvidia.com/mig-")


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
        if units > 1 and _is_pool_resource(resource):
            return SHARED_POOL.format(sharing=gpu.sharing, units=units, resource=resource)
    return None


def pool_resource(pod: PodRequest, node: NodeState) -> str | None:
    """The shared-pool resource ``pod`` takes a unit of on ``node`` (``None``: not a pool pod).

    A time-sliced or MPS node advertises ``replicas`` units per card as
    ``nvidia.com/gpu`` (or ``nvidia.com/gpu.shared`` when the device plugin
    renames it); a pod requesting one of those that the node advertises takes
    a share of one card.
    """
    gpu = node.gpu
    if gpu is None or gpu.sharing == "none":
        return None
    for resource, units in pod.requests:
        if units > 0 and resource in SHARED_POOL_RESOURCES and node.allocatable_of(resource) > 0:
            return resource
    return None


def gib(mib: int | float) -> str:
    """MiB as GiB with two decimals: ``gib(9728) == '9.50 GiB'``."""
    return f"{mib / 1024:,.2f} GiB"


def card_vram_mib(pod: PodRequest, node: NodeState) -> int:
    """The VRAM (MiB) ``pod`` adds to the one card of ``node`` it lands on; 0: none is counted.

    A ``shared`` slice (shared mode) counts its declared VRAM on every GPU node.
    A whole-unit pod that declares ``gpu_memory_gib`` counts it on a
    time-sliced pool whose card memory and count are known: time-slicing
    isolates no memory, so the pods on one card share its VRAM. On MPS each
    client is capped at memory / replicas instead (:func:`pool_vram_reason`),
    and on an unshared node a unit is a whole card.

    >>> from vfcore.cluster import GpuInfo, node
    >>> t4 = node("t4", allocatable={"nvidia.com/gpu": 4},
    ...     gpu=GpuInfo(memory_mib=15360, count=1, sharing="time-slicing", replicas=4))
    >>> p = PodRequest("p/0", "p", 0, (("nvidia.com/gpu", 1),), gpu_memory_mib=6144, slice="whole")
    >>> card_vram_mib(p, t4)
    6144
    """
    if pod.slice == "shared":
        return pod.gpu_memory_mib or 0
    gpu = node.gpu
    if (
        pod.gpu_memory_mib
        and gpu is not None
        and gpu.sharing == "time-slicing"
        and gpu.memory_mib
        and gpu.count
        and pool_resource(pod, node) is not None
    ):
        return pod.gpu_memory_mib
    return 0


def pool_vram_reason(pod: PodRequest, node: NodeState) -> str | None:
    """A pool pod declaring more VRAM than one share of a card can give, with the numbers.

    Time-slicing: more than the card's memory (all sharers use the same VRAM,
    so one pod alone must fit). MPS: more than memory / replicas, the cap the
    device plugin's MPS daemon sets on each client. ``None`` where the pod
    fits, declares nothing, or the card's memory is unknown (never a refusal
    from an unknown).

    >>> from vfcore.cluster import GpuInfo, node
    >>> mps = node("t4", allocatable={"nvidia.com/gpu": 4},
    ...     gpu=GpuInfo(memory_mib=15360, count=1, sharing="mps", replicas=4))
    >>> p = PodRequest("p/0", "p", 0, (("nvidia.com/gpu", 1),), gpu_memory_mib=6144, slice="whole")
    >>> pool_vram_reason(p, mps)
    'node(s) share GPUs by mps: 6.00 GiB of VRAM asked, each of 4 clients of a 15.00 GiB card gets 3.75 GiB'
    """
    gpu = node.gpu
    asked = pod.gpu_memory_mib
    if not asked or gpu is None or not gpu.memory_mib or pool_resource(pod, node) is None:
        return None
    if gpu.sharing == "time-slicing" and asked > gpu.memory_mib:
        return (
            f"node(s) share GPUs by time-slicing: {gib(asked)} of VRAM asked, "
            f"{gib(gpu.memory_mib)} per card"
        )
    if gpu.sharing == "mps" and asked * gpu.replicas > gpu.memory_mib:
        return (
            f"node(s) share GPUs by mps: {gib(asked)} of VRAM asked, each of {gpu.replicas} "
            f"clients of a {gib(gpu.memory_mib)} card gets {gib(gpu.memory_mib / gpu.replicas)}"
        )
    return None


def _vfcore_reasons(pod: PodRequest, node: NodeState) -> tuple[str, ...]:
    """vfcore's own rules, checked after every kube-scheduler filter (at most one reason)."""
    if pod.slice == "shared" and (
        node.gpu is None or not node.gpu.memory_mib or not node.gpu.count
    ):
        return (NO_GPU_MEMORY_FACTS,)
    gpu = node.gpu
    if (
        pod.slice == "shared"
        and pod.gpu_memory_mib
        and gpu is not None
        and gpu.memory_mib
        and pod.gpu_memory_mib > gpu.memory_mib
    ):
        return (
            f"node(s) had too little VRAM per card: {gib(pod.gpu_memory_mib)} asked, "
            f"{gib(gpu.memory_mib)} per card",
        )
    shared = sharing_reason(pod, node) or pool_vram_reason(pod, node)
    return (shared,) if shared else ()


def static_reasons(pod: PodRequest, node: NodeState) -> tuple[str, ...]:
    """Why ``pod`` can never go on ``node``, whatever is bound there, capacity aside (empty: none).

    The first failing filter, capacity aside: the kube-scheduler filters
    (:func:`eligibility_reasons`), then vfcore's own — for a ``shared`` slice
    the GPU memory facts it is sized by, then the sharing rule
    (:func:`sharing_reason`). At most one reason.
    """
    return eligibility_reasons(pod, node) or _vfcore_reasons(pod, node)


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
    """Why ``pod`` is not on ``node`` now: the reasons of its first failing filter (empty: it fits).

    The kube-scheduler filters before capacity (:func:`eligibility_reasons`:
    one reason), else NodeResourcesFit's shortfalls (every short resource, as
    ``fitsRequest`` reports them), else vfcore's own rules (one reason).

    >>> from vfcore.cluster import node
    >>> p = PodRequest("p/0", "p", 0, (("cpu", 4000), ("memory", 8)))
    >>> [r.message for r in reasons_on(p, node("a", allocatable={"cpu": 1000, "memory": 1}))]
    ['Insufficient cpu', 'Insufficient memory']
    >>> full = node("b", allocatable={"cpu": 1000, "memory": 1}, unschedulable=True)
    >>> [r.message for r in reasons_on(p, full)]  # the framework stops at the first failing filter
    ['node(s) were unschedulable']
    """
    kube = eligibility_reasons(pod, node)
    if kube:
        return tuple(Ineligible(r) for r in kube)
    short = shortfalls(pod, node, extra)
    if short:
        return short
    return tuple(Ineligible(r) for r in _vfcore_reasons(pod, node))


# -- could this node ever hold this pod -----------------------------------------------------


def never_reasons(
    pod: PodRequest, node: NodeState, capacity: Mapping[str, int] | None = None
) -> tuple[FitReason, ...]:
    """Why ``node`` can never hold ``pod``, whatever is bound there (empty: it could).

    The first failing filter, as :func:`reasons_on` orders them, on the
    emptied node: the kube-scheduler filters before capacity, then every
    request above what the node could ever offer — its allocatable, or
    ``capacity[resource]`` where the caller knows the node could advertise
    more (mix mode re-partitions idle cards) — then vfcore's own rules. A busy
    node that could hold the pod once freed has none.
    """
    kube = eligibility_reasons(pod, node)
    if kube:
        return tuple(Ineligible(r) for r in kube)
    most = capacity or {}
    out: list[FitReason] = []
    for resource, units in pod.requests:
        have = most.get(resource, node.allocatable_of(resource))
        if units > have:
            out.append(Insufficient(resource, units, 0, have))
    if out:
        return tuple(out)
    return tuple(Ineligible(r) for r in _vfcore_reasons(pod, node))


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


def _histogram(reasons_per_node: Iterable[Iterable[FitReason | str]]) -> tuple[int, list[str]]:
    """How many nodes have no reason, and the sorted ``"<count> <reason>"`` strings."""
    counts: Counter[str] = Counter()
    fitting = 0
    for reasons in reasons_per_node:
        distinct = {message_of(r) for r in reasons}
        if not distinct:
            fitting += 1
        counts.update(distinct)
    return fitting, sorted(f"{n} {reason}" for reason, n in counts.items())


def scheduler_message(
    total_nodes: int, reasons_per_node: Iterable[Iterable[FitReason | str]]
) -> str:
    """kube-scheduler's own ``FailedScheduling`` message for these nodes, preemption aside.

    ``FitError.Error()``: ``0/N nodes are available: <sorted counts>.`` — the
    filter part only; the ``preemption: …`` suffix kube-scheduler's
    DefaultPreemption appends is not modelled.

    >>> scheduler_message(3, [["Insufficient cpu"], ["Insufficient cpu"], ["Too many pods"]])
    '0/3 nodes are available: 1 Too many pods, 2 Insufficient cpu.'
    """
    _, parts = _histogram(reasons_per_node)
    text = f"0/{total_nodes} nodes are available:"
    return f"{text} {', '.join(parts)}." if parts else text


def summarise(
    pod: str, total_nodes: int, reasons_per_node: Iterable[Iterable[FitReason | str]]
) -> str:
    """The scheduler's one-line form: ``0/3 nodes fit p/0: 1 Too many pods, 2 Insufficient cpu``.

    As kube-scheduler's ``FitError.Error()`` (package ``pkg/scheduler/framework``) builds it:
    each reason string is counted over the nodes (a node short of cpu and
    memory counts under both), and the ``"<count> <reason>"`` strings are
    sorted as strings (so ``10 …`` sorts before ``2 …``). Callers pass each
    node's first failing filter (:func:`reasons_on`). kube-scheduler prefixes
    ``0/N nodes are available:``; vfcore's prefix also says how many fit.
    """
    fitting, parts = _histogram(reasons_per_node)
    text = f"{fitting}/{total_nodes} nodes fit {pod}"
    return f"{text}: {', '.join(parts)}" if parts else text
