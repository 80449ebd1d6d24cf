"""The independent checker: every way a placement breaks the rules, without a solver."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from vfcore.cluster import NodeState
from vfcore.placement.claims import PodRequest
from vfcore.placement.fit import card_vram_mib, free_units, static_reasons
from vfcore.placement.packing.shapes import ExtraReasons
from vfcore.quantity import PODS

__all__ = ["check_placement"]


def check_placement(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeState],
    assignments: Mapping[str, str] | Iterable[tuple[str, str]],
    *,
    cards: Mapping[str, int] | None = None,
    extra_reasons: ExtraReasons | None = None,
) -> tuple[str, ...]:
    """Every way a placement breaks the rules (empty: it is valid). Uses no solver.

    Checks that each pod is placed at most once, on a known node that is
    eligible for it, that no node's free resources or pod limit are exceeded,
    and — given ``cards`` — that shared pods' VRAM fits each card. Given
    ``extra_reasons``, a pod must pass those rules too (mix mode passes
    :func:`vfcore.placement.mig.mix_reasons`).
    """
    mapping = dict(assignments)
    by_name = {p.pod: p for p in pods}
    node_by_name = {n.name: n for n in nodes}
    problems: list[str] = []
    load: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    card_load: dict[tuple[str, int], int] = defaultdict(int)
    for pod_name_, node_name in sorted(mapping.items()):
        pod = by_name.get(pod_name_)
        node = node_by_name.get(node_name)
        if pod is None:
            problems.append(f"{pod_name_}: not a pod of the flow")
            continue
        if node is None:
            problems.append(f"{pod_name_}: placed on unknown node {node_name!r}")
            continue
        reasons = static_reasons(pod, node)
        if extra_reasons is not None:
            reasons = (*reasons, *extra_reasons(pod, node))
        if reasons:
            problems.append(f"{pod_name_} on {node_name}: {'; '.join(reasons)}")
        for r, u in pod.requests:
            load[node_name][r] += u
        load[node_name][PODS] += 1
        vram = card_vram_mib(pod, node)
        if vram and cards is not None:
            card = cards.get(pod_name_)
            count = node.gpu.count if node.gpu and node.gpu.count else 0
            if card is None or not 0 <= card < count:
                problems.append(f"{pod_name_} on {node_name}: no valid card index ({card!r})")
            else:
                card_load[node_name, card] += vram
    for node_name, used in sorted(load.items()):
        node = node_by_name[node_name]
        for r, u in sorted(used.items()):
            free = free_units(node, r)
            if u > free:
                problems.append(f"{node_name}: {r} over capacity ({u} requested > {free} free)")
    for (node_name, card), mib in sorted(card_load.items()):
        node = node_by_name[node_name]
        size = node.gpu.memory_mib if node.gpu and node.gpu.memory_mib else 0
        if mib > size:
            problems.append(f"{node_name} card {card}: VRAM over capacity ({mib} MiB > {size} MiB)")
    return tuple(problems)
