"""ClusterSnapshot: the nodes of a cluster, what is free on them, and what is unknown.

A snapshot is built from what a user can dump with kubectl
(:meth:`ClusterSnapshot.from_kubernetes`: ``kubectl get nodes -o json`` and
``kubectl get pods -A -o json``; :func:`snapshot_from_list` for one ``List``).
The node types it holds are in :mod:`vfcore.cluster.nodes`, the parsing rules
in :mod:`vfcore.cluster.kubeparse`.

Unknown is its own value. A node list or pod list that is missing, empty,
unparsable or a Kubernetes ``Status`` (a refused request) makes the matching
facts *unknown* with the reason — never an empty cluster, never an idle pool.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from vfcore.cluster.dra import DraFacts
from vfcore.cluster.kubeparse import (
    ClusterFacts,
    parse_dra,
    parse_dra_list,
    parse_kubernetes,
    parse_list,
)
from vfcore.cluster.nodes import NodeState, Note, RuntimeClassInfo, Unknown, UnreadableNode

__all__ = ["ClusterSnapshot", "snapshot_from_kubernetes", "snapshot_from_list"]


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """What is known about a cluster's nodes, and what is not.

    ``nodes_unknown`` (a reason) means the node list itself could not be read:
    ``nodes`` is then empty and nothing can be concluded about capacity.
    ``unknowns`` lists every unknown fact with its reason, malformed objects
    included (with their name and field). ``unreadable_nodes`` are the nodes
    that exist but cannot be read (see :class:`UnreadableNode`). ``notes``
    are facts read as the API server would read them (a Node with
    ``status.capacity`` and no ``status.allocatable``: allocatable = capacity).
    ``dra`` holds the Dynamic Resource Allocation facts (ResourceSlices,
    DeviceClasses, allocated ResourceClaims; :class:`vfcore.cluster.dra.DraFacts`),
    ``None`` when none were read.
    """

    nodes: tuple[NodeState, ...]
    unknowns: tuple[Unknown, ...] = ()
    nodes_unknown: str | None = None
    runtime_classes: tuple[RuntimeClassInfo, ...] | None = None
    unreadable_nodes: tuple[UnreadableNode, ...] = ()
    notes: tuple[Note, ...] = ()
    dra: DraFacts | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(sorted(self.nodes, key=lambda n: n.name)))
        object.__setattr__(
            self, "unreadable_nodes", tuple(sorted(self.unreadable_nodes, key=lambda u: u.name))
        )

    @property
    def is_fully_known(self) -> bool:
        return (
            self.nodes_unknown is None
            and not self.unreadable_nodes
            and all(n.occupancy_known for n in self.nodes)
        )

    def node(self, name: str) -> NodeState:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def resources(self) -> tuple[str, ...]:
        """Every resource some node advertises, sorted."""
        return tuple(sorted({r for n in self.nodes for r, _ in n.allocatable}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [n.to_dict() for n in self.nodes],
            "unknowns": [u.to_dict() for u in self.unknowns],
            "nodes_unknown": self.nodes_unknown,
            "runtime_classes": None
            if self.runtime_classes is None
            else [r.to_dict() for r in self.runtime_classes],
            "unreadable_nodes": [u.to_dict() for u in self.unreadable_nodes],
            "notes": [n.to_dict() for n in self.notes],
            **({} if self.dra is None else {"dra": self.dra.to_dict()}),
        }

    @classmethod
    def of(
        cls,
        nodes: Iterable[NodeState],
        *,
        runtime_classes: Iterable[RuntimeClassInfo] | None = None,
    ) -> ClusterSnapshot:
        """A fully built snapshot (for notebooks and tests); unknown nodes become unknowns."""
        built = tuple(nodes)
        unknowns = tuple(
            Unknown(f"node/{n.name}", n.unknown_reason or "occupancy unknown")
            for n in built
            if not n.occupancy_known
        )
        return cls(
            nodes=built,
            unknowns=unknowns,
            runtime_classes=None if runtime_classes is None else tuple(runtime_classes),
        )

    @classmethod
    def from_kubernetes(
        cls,
        nodes_json: object,
        pods_json: object,
        runtime_classes_json: object = None,
    ) -> ClusterSnapshot:
        """A snapshot from ``kubectl get nodes -o json`` and ``kubectl get pods -A -o json``.

        Each argument is the parsed JSON document, its text, or ``None`` when
        the file is missing. See :mod:`vfcore.cluster.kubeparse` for the rules.
        """
        return snapshot_from_kubernetes(nodes_json, pods_json, runtime_classes_json)


#: Marks a DRA document the caller did not give (``None`` is a document that is missing).
_NOT_GIVEN: Any = object()


def snapshot_from_kubernetes(
    nodes_json: object,
    pods_json: object,
    runtime_classes_json: object = None,
    *,
    nodes_source: str = "nodes.json",
    pods_source: str = "pods.json",
    runtime_classes_source: str = "runtimeclasses.json",
    resourceslices_json: object = _NOT_GIVEN,
    deviceclasses_json: object = _NOT_GIVEN,
    resourceclaims_json: object = _NOT_GIVEN,
    dra_sources: tuple[str, str, str] = (
        "resourceslices.json",
        "deviceclasses.json",
        "resourceclaims.json",
    ),
) -> ClusterSnapshot:
    """A snapshot from ``kubectl get nodes -o json`` and ``kubectl get pods -A -o json``.

    Each document is a parsed object, its JSON text (``str``/``bytes``) or
    ``None`` (the file is missing); ``*_source`` names it in reasons. See
    :mod:`vfcore.cluster.kubeparse` for every rule.

    >>> nodes = {"kind": "NodeList", "items": [{"kind": "Node", "metadata": {"name": "a"},
    ...     "status": {"allocatable": {"cpu": "4", "nvidia.com/gpu": "8", "pods": "110"},
    ...                "conditions": [{"type": "Ready", "status": "True"}]}}]}
    >>> pods = {"kind": "PodList", "items": [{"kind": "Pod",
    ...     "metadata": {"namespace": "ml", "name": "train"}, "spec": {"nodeName": "a",
    ...     "containers": [{"resources": {"limits": {"nvidia.com/gpu": "5"}}}]},
    ...     "status": {"phase": "Running"}}]}
    >>> snapshot_from_kubernetes(nodes, pods).node("a").free_of("nvidia.com/gpu")
    3
    >>> snapshot_from_kubernetes(nodes, None).node("a").unknown_reason
    'pods.json is missing'

    The DRA documents (``kubectl get resourceslices -o json``, ``deviceclasses``,
    ``resourceclaims -A``) are read when any of them is given (``None``: that
    file is missing, so those facts are unknown); given none, ``dra`` is ``None``.
    """
    facts = parse_kubernetes(
        nodes_json,
        pods_json,
        runtime_classes_json,
        nodes_source=nodes_source,
        pods_source=pods_source,
        runtime_classes_source=runtime_classes_source,
    )
    snapshot = _snapshot_of(facts)
    given = [resourceslices_json, deviceclasses_json, resourceclaims_json]
    if all(d is _NOT_GIVEN for d in given):
        return snapshot
    docs = [None if d is _NOT_GIVEN else d for d in given]
    slices_source, classes_source, claims_source = dra_sources
    dra = parse_dra(
        *docs,
        slices_source=slices_source,
        classes_source=classes_source,
        claims_source=claims_source,
    )
    return replace(snapshot, dra=dra)


def snapshot_from_list(doc: object, *, source: str = "cluster.json") -> ClusterSnapshot:
    """A snapshot from one ``List`` holding Node and Pod (and RuntimeClass) items.

    ``kubectl get nodes,pods,runtimeclasses -A -o json`` prints one. When a
    kind is refused, kubectl still prints the others (and the error on
    stderr), so a List with no Pod items means *pod occupancy unknown*, never
    "nothing bound"; no Node items means the nodes are unknown; no
    RuntimeClass items leaves ``runtime_classes`` unknown (``None``). Its
    ResourceSlice, DeviceClass and ResourceClaim items are the DRA facts; a
    kind with no items is unknown there (kubectl prints what it could list).
    """
    snapshot = _snapshot_of(parse_list(doc, source=source))
    return replace(snapshot, dra=parse_dra_list(doc, source=source))


def _snapshot_of(facts: ClusterFacts) -> ClusterSnapshot:
    return ClusterSnapshot(
        nodes=facts.nodes,
        unknowns=facts.unknowns,
        nodes_unknown=facts.nodes_unknown,
        runtime_classes=facts.runtime_classes,
        unreadable_nodes=facts.unreadable_nodes,
        notes=facts.notes,
    )
