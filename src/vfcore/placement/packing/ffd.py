"""First-fit-decreasing: pods largest first, each to the first node with room (step 2)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from vfcore.cluster import NodeState
from vfcore.placement.claims import PodRequest
from vfcore.placement.packing.shapes import NodeRoom, Shape, name_assignments, prepare, vram_on

__all__ = ["ffd", "first_fit_decreasing"]


def ffd(
    shapes: list[Shape], nodes: list[NodeRoom]
) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """FFD over shapes: returns ({shape: [node per placed pod]}, {shape: [card per placed pod]})."""
    free = [dict(n.free) for n in nodes]
    free_pods = [n.free_pods for n in nodes]
    card_free = [[n.card_mib] * n.cards for n in nodes]
    placed: dict[int, list[int]] = defaultdict(list)
    cards: dict[int, list[int]] = defaultdict(list)
    for shape in sorted(shapes, key=lambda s: (s.size_key(), -s.index), reverse=True):
        eligible = sorted(shape.eligible)
        cursor = 0
        for _ in range(shape.count):
            while cursor < len(eligible):
                i = eligible[cursor]
                if free_pods[i] >= 1 and all(
                    free[i].get(r, 0) >= u for r, u in shape.requests.items()
                ):
                    card = -1
                    vram = vram_on(shape, nodes[i])
                    if vram:
                        card = next((c for c, m in enumerate(card_free[i]) if m >= vram), -1)
                        if card < 0:
                            cursor += 1
                            continue
                        card_free[i][card] -= vram
                    for r, u in shape.requests.items():
                        free[i][r] = free[i].get(r, 0) - u
                    free_pods[i] -= 1
                    placed[shape.index].append(i)
                    cards[shape.index].append(card)
                    break
                cursor += 1  # loads only grow: a node full for this shape stays full
            else:
                break
    return placed, cards


def first_fit_decreasing(pods: Sequence[PodRequest], nodes: Sequence[NodeState]) -> dict[str, str]:
    """The FFD baseline alone: pods largest first, each to the first node (by name) with room.

    Returns the pods it placed; a pod missing from the result did not fit.
    """
    shapes, node_list = prepare(pods, nodes)
    placed, _ = ffd(shapes, node_list)
    return dict(name_assignments(shapes, node_list, placed))
