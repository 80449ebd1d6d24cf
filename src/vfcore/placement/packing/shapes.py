"""The packing's view of its input: identical pods grouped into shapes, nodes with
the room they have, and which node each shape may go to (kube-scheduler's static
filters, via :mod:`vfcore.placement.fit`, plus a caller's :data:`ExtraReasons`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vfcore.cluster import NodeState
from vfcore.placement.claims import PodRequest
from vfcore.placement.fit import card_vram_mib, free_units, static_reasons
from vfcore.quantity import PODS

__all__ = [
    "ExtraReasons",
    "NodeRoom",
    "Shape",
    "max_on_node",
    "name_assignments",
    "node_rooms",
    "prepare",
    "shapes_of",
    "vram_on",
]


@dataclass(slots=True)
class Shape:
    index: int
    requests: dict[str, int]
    pods: list[PodRequest]
    vram_mib: int  # shared-mode VRAM per pod (0 if not shared)
    eligible: list[int] = field(default_factory=list)  # node indices
    declared_mib: int = 0  # VRAM a whole-unit pod declares: counted on time-sliced cards

    @property
    def count(self) -> int:
        return len(self.pods)

    def size_key(self) -> tuple[Any, ...]:
        ext = sorted(
            (
                v
                for r, v in self.requests.items()
                if r not in ("cpu", "memory", "ephemeral-storage")
            ),
            reverse=True,
        )
        return (
            tuple(ext),
            self.vram_mib,
            self.requests.get("cpu", 0),
            self.requests.get("memory", 0),
        )


@dataclass(slots=True)
class NodeRoom:
    index: int
    state: NodeState
    free: dict[str, int]
    free_pods: int
    cards: int
    card_mib: int
    time_sliced: bool = False  # pods' declared VRAM shares each card (memory and count known)


def shapes_of(pods: Sequence[PodRequest]) -> list[Shape]:
    groups: dict[tuple[object, ...], list[PodRequest]] = {}
    for pod in pods:
        groups.setdefault(pod.shape, []).append(pod)
    for members in groups.values():  # input order must not matter: replicas in order
        members.sort(key=lambda p: (p.node, p.replica, p.pod))
    ordered = sorted(groups.values(), key=lambda g: g[0].pod)
    return [
        Shape(
            index=i,
            requests=dict(g[0].requests),
            pods=g,
            vram_mib=(g[0].gpu_memory_mib or 0) if g[0].slice == "shared" else 0,
            declared_mib=(g[0].gpu_memory_mib or 0) if g[0].slice == "whole" else 0,
        )
        for i, g in enumerate(ordered)
    ]


def node_rooms(nodes: Sequence[NodeState]) -> list[NodeRoom]:
    out = []
    for i, n in enumerate(nodes):
        free = {r: free_units(n, r) for r, _ in n.allocatable}
        gpu = n.gpu
        out.append(
            NodeRoom(
                index=i,
                state=n,
                free=free,
                free_pods=free_units(n, PODS),
                cards=(gpu.count or 0) if gpu else 0,
                card_mib=(gpu.memory_mib or 0) if gpu else 0,
                time_sliced=bool(
                    gpu and gpu.sharing == "time-slicing" and gpu.memory_mib and gpu.count
                ),
            )
        )
    return out


def vram_on(shape: Shape, node: NodeRoom) -> int:
    """The VRAM (MiB) one pod of ``shape`` adds to a card of ``node`` (0: none counted).

    The packing's fast form of :func:`vfcore.placement.fit.card_vram_mib`: a
    shared slice everywhere, a whole-unit pod's declared VRAM on a time-sliced
    node (where the pod is eligible, it takes a unit of the pool).
    """
    if shape.vram_mib:
        return shape.vram_mib
    if shape.declared_mib and node.time_sliced:
        return card_vram_mib(shape.pods[0], node.state)
    return 0


def max_on_node(shape: Shape, node: NodeRoom) -> int:
    """How many pods of ``shape`` fit on an otherwise empty-of-new-pods ``node``."""
    best = node.free_pods
    for resource, units in shape.requests.items():
        best = min(best, node.free.get(resource, 0) // units)
    vram = vram_on(shape, node)
    if vram:
        best = min(best, node.cards * (node.card_mib // vram) if node.card_mib else 0)
    return max(best, 0)


#: Extra eligibility a caller adds to kube-scheduler's filters: reasons a pod may not go to a
#: node (empty: it may). Mix mode uses it to keep MIG pods on cards whose profile covers them.
ExtraReasons = Callable[[PodRequest, NodeState], tuple[str, ...]]


def prepare(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeState],
    extra_reasons: ExtraReasons | None = None,
) -> tuple[list[Shape], list[NodeRoom]]:
    ordered_nodes = sorted(nodes, key=lambda n: n.name)
    shapes = shapes_of(pods)
    node_list = node_rooms(ordered_nodes)
    for shape in shapes:
        probe = shape.pods[0]
        shape.eligible = [
            n.index
            for n in node_list
            if not static_reasons(probe, n.state)
            and not (extra_reasons is not None and extra_reasons(probe, n.state))
        ]
    return shapes, node_list


def name_assignments(
    shapes: list[Shape], nodes: list[NodeRoom], placed: Mapping[int, Sequence[int]]
) -> list[tuple[str, str]]:
    out = []
    for shape in shapes:
        targets = sorted(placed.get(shape.index, ()), key=lambda i: nodes[i].state.name)
        for pod, i in zip(shape.pods, targets, strict=False):
            out.append((pod.pod, nodes[i].state.name))
    return sorted(out)
