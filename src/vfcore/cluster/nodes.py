"""The nodes of a cluster: what each holds, what is free on it, and what is unknown.

Every resource is an integer in vfcore's canonical unit (see
:mod:`vfcore.quantity`): cpu in millicores, memory in bytes, pods and extended
resources in whole units. A node whose occupancy is unknown has
``requested = None``; planning then brackets it (full for "fits", empty for
"does not fit").

A node that exists but cannot be read (no ``status.allocatable``, a quantity
that does not parse, listed twice with different contents, named only by the
pods bound to it) is an :class:`UnreadableNode`: left out of the snapshot's
``nodes``, and bracketed the same way — absent for "fits", as big as it could
possibly be (its ``bound``, or unbounded when nothing bounds it) for "does not
fit". The snapshot itself is :class:`vfcore.cluster.ClusterSnapshot`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from vfcore.quantity import PODS

__all__ = [
    "GPU_PRESENT_LABEL",
    "GpuInfo",
    "NodeState",
    "Note",
    "RuntimeClassInfo",
    "Taint",
    "TaintEffect",
    "Toleration",
    "Unknown",
    "UnreadableNode",
    "node",
]

GPU_PRESENT_LABEL = ("nvidia.com/gpu.present", "true")

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


@dataclass(frozen=True, slots=True, order=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def to_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}

    def describe(self) -> str:
        return f"{{{self.key}: {self.value}}}"


@dataclass(frozen=True, slots=True, order=True)
class Toleration:
    """A pod's toleration; ``effect=None`` tolerates every effect, ``key=None`` every key."""

    key: str | None = None
    operator: str = "Equal"
    value: str = ""
    effect: str | None = None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key is None:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value

    def to_dict(self) -> dict[str, str | None]:
        return {
            "key": self.key,
            "operator": self.operator,
            "value": self.value,
            "effect": self.effect,
        }


@dataclass(frozen=True, slots=True)
class Unknown:
    """Something vfcore could not know, and why (e.g. ``what='pods'``, reason='Forbidden …')."""

    what: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"what": self.what, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Note:
    """A fact read the way the API server would read it, worth saying (never an unknown).

    ``what`` names the object (``node/gpu-3``), ``code`` is a stable kebab-case
    id, ``message`` says what was read and why, ``hint`` what to do if that is wrong.
    """

    what: str
    code: str
    message: str
    hint: str

    def to_dict(self) -> dict[str, str]:
        return {"what": self.what, "code": self.code, "message": self.message, "hint": self.hint}


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """GPU facts from GPU Feature Discovery labels (``nvidia.com/gpu.*``, ``nvidia.com/mig.*``).

    ``memory_mib`` is per card (``nvidia.com/gpu.memory``, MiB). ``sharing`` is
    ``none``, ``time-slicing`` or ``mps`` with ``replicas`` units per card.
    ``mig_strategy`` is ``none``, ``single`` or ``mixed``: the strategy in
    effect, so ``none`` on a card that is not MIG-capable (``mig.capable=false``)
    whatever the operator's cluster-wide label says; ``mig_profiles``
    maps each mixed-strategy profile (``1g.10gb``) to the number of MIG devices
    of that profile (from ``nvidia.com/mig-<profile>.count``).
    A fact that no label gives is ``None``.
    """

    product: str | None = None
    memory_mib: int | None = None
    count: int | None = None
    sharing: str = "none"
    replicas: int = 1
    mig_capable: bool | None = None
    mig_strategy: str | None = None
    mig_profiles: tuple[tuple[str, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "product": self.product,
            "memory_mib": self.memory_mib,
            "count": self.count,
            "sharing": self.sharing,
            "replicas": self.replicas,
            "mig_capable": self.mig_capable,
            "mig_strategy": self.mig_strategy,
            "mig_profiles": dict(self.mig_profiles),
        }


@dataclass(frozen=True, slots=True)
class NodeState:
    """One node: its condition, labels, taints, allocatable and (if known) requested resources.

    ``requested`` sums the requests of the pods bound to the node (containers
    summed, init containers maxed, plus overhead; Succeeded and Failed pods
    ignored) and includes ``pods`` (their count). ``None`` means occupancy is
    unknown, with ``unknown_reason``.

    ``nonzero_requested`` is what kube-scheduler's *scoring* counts for the
    bound pods' cpu (millicores) and memory (bytes), where each container that
    requests no cpu / memory counts 100m / 200Mi (``NodeInfo.NonZeroRequested``;
    see :func:`vfcore.cluster.kubeparse.pod_nonzero_requests`). ``None``: the
    same as ``requested`` (a node built by hand); see :meth:`nonzero_of`.
    """

    name: str
    allocatable: tuple[tuple[str, int], ...]
    requested: tuple[tuple[str, int], ...] | None = ()
    ready: bool = True
    unschedulable: bool = False
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    gpu: GpuInfo | None = None
    unknown_reason: str | None = None
    nonzero_requested: tuple[int, int] | None = None
    _alloc: dict[str, int] = field(
        init=False, repr=False, compare=False, hash=False, default_factory=dict
    )
    _req: dict[str, int] = field(
        init=False, repr=False, compare=False, hash=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocatable", tuple(sorted(self.allocatable)))
        object.__setattr__(self, "labels", tuple(sorted(self.labels)))
        object.__setattr__(self, "taints", tuple(sorted(self.taints)))
        object.__setattr__(self, "_alloc", dict(self.allocatable))
        if self.requested is not None:
            object.__setattr__(self, "requested", tuple(sorted(self.requested)))
            object.__setattr__(self, "_req", dict(self.requested))

    @property
    def occupancy_known(self) -> bool:
        return self.requested is not None

    def allocatable_of(self, resource: str) -> int:
        return self._alloc.get(resource, 0)

    def requested_of(self, resource: str) -> int | None:
        """Units of ``resource`` requested by bound pods; ``None`` when occupancy is unknown."""
        if self.requested is None:
            return None
        return self._req.get(resource, 0)

    def free_of(self, resource: str) -> int | None:
        """Allocatable minus requested (``None`` when occupancy is unknown)."""
        used = self.requested_of(resource)
        return None if used is None else self.allocatable_of(resource) - used

    def nonzero_of(self, resource: str) -> int:
        """``cpu`` / ``memory`` as scoring counts the bound pods (0 when occupancy is unknown).

        >>> n = NodeState("a", (("cpu", 8000),), (("cpu", 1000),), nonzero_requested=(1100, 2**20))
        >>> n.nonzero_of("cpu"), n.nonzero_of("memory"), n.requested_of("cpu")
        (1100, 1048576, 1000)
        """
        if self.requested is None:
            return 0
        if self.nonzero_requested is not None and resource in ("cpu", "memory"):
            return self.nonzero_requested[0 if resource == "cpu" else 1]
        return self._req.get(resource, 0)

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)

    def as_empty(self) -> NodeState:
        """This node with nothing bound (the optimistic end of an unknown occupancy)."""
        return replace(self, requested=(), nonzero_requested=None, unknown_reason=None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ready": self.ready,
            "unschedulable": self.unschedulable,
            "labels": dict(self.labels),
            "taints": [t.to_dict() for t in self.taints],
            "allocatable": dict(self.allocatable),
            "requested": None if self.requested is None else dict(self.requested),
            "gpu": None if self.gpu is None else self.gpu.to_dict(),
            "unknown_reason": self.unknown_reason,
        }


@dataclass(frozen=True, slots=True)
class UnreadableNode:
    """A node that exists but whose facts cannot be read, and the most it could hold.

    ``name`` is the node's name (or where it sits in the dump when even that is
    unreadable, ``nodes.json items[3]``); ``reason`` names the field and value.
    ``bound`` is the node as big as it could possibly be — idle, allocatable
    from what is readable, ``status.capacity`` (allocatable never exceeds it)
    where allocatable is not, or :data:`vfcore.quantity.MAX_UNITS` for a
    resource nothing bounds — with its labels, taints and conditions as read.
    ``None`` means nothing bounds it at all: any pod could fit there, so
    planning can never prove "does not fit" while it is in the cluster.
    """

    name: str
    reason: str
    bound: NodeState | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "reason": self.reason,
            "bound": None if self.bound is None else self.bound.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class RuntimeClassInfo:
    name: str
    handler: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "handler": self.handler}


def node(
    name: str,
    *,
    allocatable: Mapping[str, int],
    requested: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
    ready: bool = True,
    unschedulable: bool = False,
    gpu: GpuInfo | None = None,
    unknown_reason: str | None = None,
) -> NodeState:
    """A convenient NodeState builder: ``node('a', allocatable={'nvidia.com/gpu': 4, 'pods': 110})``.

    ``requested=None`` with an ``unknown_reason`` makes occupancy unknown;
    omitted, nothing is bound. ``pods`` defaults to 110 if not given.
    """
    alloc = dict(allocatable)
    alloc.setdefault(PODS, 110)
    if requested is None and unknown_reason is None:
        req: tuple[tuple[str, int], ...] | None = ()
    elif requested is None:
        req = None
    else:
        req = tuple(requested.items())
    return NodeState(
        name=name,
        allocatable=tuple(alloc.items()),
        requested=req,
        ready=ready,
        unschedulable=unschedulable,
        labels=tuple((labels or {}).items()),
        taints=tuple(taints),
        gpu=gpu,
        unknown_reason=unknown_reason,
    )
