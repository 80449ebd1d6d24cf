"""Time-sliced and MPS pools in a plan: which pods share a card, and whether their VRAM fits.

The NVIDIA device plugin's ``sharing.timeSlicing`` and ``sharing.mps``
advertise ``replicas`` units per card (``nvidia.com/gpu``, or
``nvidia.com/gpu.shared`` when renamed); GFD labels the physical
``gpu.count``, ``gpu.memory`` (MiB) and ``gpu.replicas``. A unit is a share of
a card, not a card:

- **time-slicing** isolates no memory: the pods on one card share its VRAM, so
  their declared ``gpu_memory_gib`` must add up to at most the card's memory;
- **MPS** caps each client at memory / replicas, so each pod's declared VRAM
  must fit that share (the fit filter refuses it otherwise:
  :func:`vfcore.placement.fit.pool_vram_reason`).

Which card a pod gets is the device plugin's choice. With one card it is that
card. With several, the solver's card mapping is one the plugin *could*
choose; vfcore assumes only that no card takes more than ``replicas`` units,
and calls a node's VRAM certain only if every such mapping fits: the
``replicas`` heaviest of its pods together fit one card. Where only some
mappings fit, the assumption decides, and the pool is ``unknown``. Pods
already bound to a time-sliced node declare no VRAM: a planned pod that may
share a card with them is ``unknown`` too, never "fits".

Worked example: three pods declaring 6 GiB on one 15 GiB T4 time-sliced 4
ways: 18 GiB > 15 GiB, so the packing puts at most two there; with two
T4 cards, two pods per card fit (12 GiB), but the plugin may put three on one
card (18 GiB > 15 GiB): unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.cluster import NodeState
from vfcore.placement.claims import PodRequest
from vfcore.placement.fit import gib, pool_resource

__all__ = ["SharedPool", "shared_pools"]

PoolVerdict = Literal["fits", "unknown"]


@dataclass(frozen=True, slots=True)
class SharedPool:
    """One time-sliced or MPS node in a plan: its cards, and the planned pods sharing them.

    ``cards`` and ``memory_mib`` are GFD's ``gpu.count`` and ``gpu.memory``
    (``None`` when unknown); ``units_per_card`` is ``gpu.replicas``.
    ``pods`` are the planned pods taking a unit of the pool; ``card_groups``
    the pods known to share one card (all of them with one card; the solver's
    mapping, an assumption, with several); ``bound_units`` the units pods
    already bound hold (``None``: unknown). ``verdict`` is ``fits`` when every
    card mapping the device plugin could choose fits, else ``unknown`` with
    ``reason``.
    """

    node: str
    sharing: str
    resource: str
    cards: int | None
    units_per_card: int
    memory_mib: int | None
    pods: tuple[str, ...]
    card_groups: tuple[tuple[str, ...], ...]
    mapping_certain: bool
    bound_units: int | None
    verdict: PoolVerdict
    reason: str

    def shares_with(self, pod: str) -> tuple[str, ...]:
        """The planned pods ``pod`` shares a card with (on one card: all the others)."""
        for group in self.card_groups:
            if pod in group:
                return tuple(p for p in group if p != pod)
        return ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "sharing": self.sharing,
            "resource": self.resource,
            "cards": self.cards,
            "units_per_card": self.units_per_card,
            "memory_mib": self.memory_mib,
            "pods": list(self.pods),
            "card_groups": [list(g) for g in self.card_groups],
            "mapping_certain": self.mapping_certain,
            "bound_units": self.bound_units,
            "verdict": self.verdict,
            "reason": self.reason,
        }


def shared_pools(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeState],
    assignments: Sequence[tuple[str, str]],
    cards: Mapping[str, int],
) -> tuple[SharedPool, ...]:
    """Every time-sliced or MPS node of ``nodes``, with the planned pods on it (see the module)."""
    by_pod = {p.pod: p for p in pods}
    on_node: dict[str, list[PodRequest]] = {}
    for pod_name, node_name in sorted(assignments):
        on_node.setdefault(node_name, []).append(by_pod[pod_name])
    out = []
    for node in sorted(nodes, key=lambda n: n.name):
        gpu = node.gpu
        if gpu is None or gpu.sharing == "none":
            continue
        planned = [p for p in on_node.get(node.name, []) if pool_resource(p, node) is not None]
        resource = next(
            (r for r in ("nvidia.com/gpu.shared", "nvidia.com/gpu") if node.allocatable_of(r)),
            "nvidia.com/gpu",
        )
        if planned:
            resource = pool_resource(planned[0], node) or resource
        out.append(_pool(node, resource, planned, cards))
    return tuple(out)


def _pool(
    node: NodeState, resource: str, planned: list[PodRequest], cards: Mapping[str, int]
) -> SharedPool:
    gpu = node.gpu
    assert gpu is not None
    names = tuple(p.pod for p in planned)
    bound = node.requested_of(resource)
    if gpu.count == 1:
        groups: tuple[tuple[str, ...], ...] = (names,) if names else ()
        certain = True
    else:
        by_card: dict[int, list[str]] = {}
        for p in planned:
            if p.pod in cards:
                by_card.setdefault(cards[p.pod], []).append(p.pod)
        groups = tuple(tuple(v) for _, v in sorted(by_card.items()))
        certain = False
    verdict, reason = _verdict(node, planned, bound)
    return SharedPool(
        node=node.name,
        sharing=gpu.sharing,
        resource=resource,
        cards=gpu.count,
        units_per_card=gpu.replicas,
        memory_mib=gpu.memory_mib,
        pods=names,
        card_groups=groups,
        mapping_certain=certain,
        bound_units=bound,
        verdict=verdict,
        reason=reason,
    )


def _verdict(
    node: NodeState, planned: list[PodRequest], bound: int | None
) -> tuple[PoolVerdict, str]:
    gpu = node.gpu
    assert gpu is not None
    declared = sorted((p.gpu_memory_mib for p in planned if p.gpu_memory_mib), reverse=True)
    if not declared:
        return "fits", "no planned pod declares VRAM here" if planned else "no planned pod here"
    if not gpu.memory_mib or not gpu.count:
        return "unknown", (
            f"{len(declared)} planned pod(s) declare VRAM on a {gpu.sharing} pool whose card "
            "memory or count is unknown (nvidia.com/gpu.memory, nvidia.com/gpu.count)"
        )
    if gpu.sharing == "mps":
        share = gpu.memory_mib / gpu.replicas
        return "fits", (
            f"MPS caps each client at {gib(share)} ({gib(gpu.memory_mib)} / {gpu.replicas}); "
            f"the largest declares {gib(declared[0])}"
        )
    if bound is None or bound > 0:
        held = "an unknown number of" if bound is None else str(bound)
        return "unknown", (
            f"{held} unit(s) of this time-sliced pool are held by pods already bound, whose VRAM "
            f"is not declared; the planned pods ({gib(sum(declared))} declared) may share a "
            f"{gib(gpu.memory_mib)} card with them"
        )
    worst = declared[: gpu.replicas]
    if sum(worst) <= gpu.memory_mib:
        if gpu.count == 1:
            return "fits", (
                f"{len(declared)} pod(s) declare {gib(sum(declared))} on one "
                f"{gib(gpu.memory_mib)} card"
            )
        return "fits", (
            f"any {len(worst)} of the pods on one card declare at most {gib(sum(worst))}, "
            f"within {gib(gpu.memory_mib)}"
        )
    return "unknown", (
        f"the device plugin chooses the card: {len(worst)} of the pods here declare "
        f"{gib(sum(worst))} together, over one {gib(gpu.memory_mib)} card; the plan spreads "
        f"them over {gpu.count} cards, but nothing makes the plugin do so"
    )
