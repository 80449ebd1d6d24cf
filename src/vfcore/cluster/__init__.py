"""Cluster: what is known about a cluster's nodes, and what is not.

:mod:`vfcore.cluster.nodes` holds the node types (a node's state, taints,
tolerations, GPU facts, unreadable nodes, unknowns);
:mod:`vfcore.cluster.kubeparse` reads kubectl/API JSON into those, importing
nothing but them; :mod:`vfcore.cluster.dra` holds the Dynamic Resource
Allocation facts (ResourceSlices, DeviceClasses, allocated ResourceClaims);
:mod:`vfcore.cluster.snapshot` holds :class:`ClusterSnapshot`, which builds
itself from that parse. Imports point one way: nodes ← dra ← kubeparse ← snapshot.
"""

from vfcore.cluster.nodes import (
    GPU_PRESENT_LABEL,
    GpuInfo,
    NodeState,
    Note,
    RuntimeClassInfo,
    Taint,
    TaintEffect,
    Toleration,
    Unknown,
    UnreadableNode,
    node,
)
from vfcore.cluster.snapshot import ClusterSnapshot, snapshot_from_kubernetes, snapshot_from_list
from vfcore.cluster.storage import (
    DEFAULT_CLASS_ANNOTATION,
    NO_PROVISIONER,
    ClaimInfo,
    StorageClassInfo,
    StorageFacts,
    VolumeInfo,
    storage_facts,
)

__all__ = [
    "DEFAULT_CLASS_ANNOTATION",
    "GPU_PRESENT_LABEL",
    "NO_PROVISIONER",
    "ClaimInfo",
    "ClusterSnapshot",
    "GpuInfo",
    "NodeState",
    "Note",
    "RuntimeClassInfo",
    "StorageClassInfo",
    "StorageFacts",
    "Taint",
    "TaintEffect",
    "Toleration",
    "Unknown",
    "UnreadableNode",
    "VolumeInfo",
    "node",
    "snapshot_from_kubernetes",
    "snapshot_from_list",
    "storage_facts",
]
