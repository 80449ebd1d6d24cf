"""Bounds: sums that prove no placement exists, with their numbers (step 1)."""

from __future__ import annotations

from vfcore.placement.packing.shapes import NodeRoom, Shape, max_on_node

__all__ = ["bound_proofs"]


def bound_proofs(shapes: list[Shape], nodes: list[NodeRoom]) -> list[str]:
    """Sums that prove no placement exists (empty when the sums allow one)."""
    proofs: list[str] = []
    for shape in shapes:
        capacity = sum(max_on_node(shape, nodes[i]) for i in shape.eligible)
        if capacity < shape.count:
            first = shape.pods[0].pod
            proofs.append(
                f"the {shape.count} pod(s) shaped like {first} fit at most {capacity} time(s) "
                f"on the {len(shape.eligible)} node(s) eligible for them"
            )
    resources = sorted({r for s in shapes for r in s.requests})
    for resource in resources:
        demand = sum(s.count * s.requests.get(resource, 0) for s in shapes)
        eligible = sorted({i for s in shapes if s.requests.get(resource) for i in s.eligible})
        free = sum(max(nodes[i].free.get(resource, 0), 0) for i in eligible)
        if demand > free:
            proofs.append(
                f"{resource}: the pods request {demand} in total but eligible nodes have {free} free"
            )
    return proofs
