"""Laws of the fit rule (vfcore.placement.fit): it agrees with the independent checker.

:func:`vfcore.placement.packing.check_placement` re-checks a whole placement by
summing each node's load; the fit rule judges one pod against one node and
what is already placed there. On random nodes and pods they must agree — on
the verdict, and on the numbers each :class:`Insufficient` carries.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.property.cluster_strategies import node_lists, pod_lists
from vfcore.placement.fit import Insufficient, could_ever_hold, never_reasons, reasons_on
from vfcore.placement.packing import check_placement
from vfcore.quantity import PODS


def _all_on(pods, node):
    return {p.pod: node.name for p in pods}


@settings(max_examples=300, deadline=None)
@given(node_lists(max_nodes=1), pod_lists(max_pods=7), st.booleans())
def test_fit_rule_agrees_with_check_placement(nodes, pods, unknown):
    node = nodes[0]
    if unknown:  # unknown occupancy: both judge it empty (callers bracket it)
        node = replace(node, requested=None, unknown_reason="Forbidden")
    *others, pod = pods
    placed = []  # a valid load by construction: the others the checker accepts, in order
    for p in others:
        if not check_placement([*placed, p], [node], _all_on([*placed, p], node)):
            placed.append(p)
    load: Counter[str] = Counter({PODS: len(placed)})
    for p in placed:
        load.update(dict(p.requests))

    reasons = reasons_on(pod, node, load)
    problems = check_placement([*placed, pod], [node], _all_on([*placed, pod], node))
    kinds = sorted({type(r).__name__ for r in reasons}) or ["fits"]
    event(f"fit rule says: {'+'.join(kinds)}")
    event("pods placed before" if placed else "nothing placed before")
    assert (not reasons) == (not problems), (reasons, problems)
    for r in reasons:
        if isinstance(r, Insufficient):
            assert r.used == (node.requested_of(r.resource) or 0) + load[r.resource]
            assert r.capacity == node.allocatable_of(r.resource)
            total = load[r.resource] + r.requested
            free = r.free + load[r.resource]
            line = f"{node.name}: {r.resource} over capacity ({total} requested > {free} free)"
            assert line in problems, (r, problems)
        else:
            assert any(
                q.startswith(f"{pod.pod} on {node.name}: ") and r.message in q for q in problems
            ), (r, problems)


@settings(max_examples=300, deadline=None)
@given(node_lists(max_nodes=1), pod_lists(max_pods=1))
def test_could_ever_hold_is_fitting_alone_on_the_emptied_node(nodes, pods):
    node, pod = nodes[0], pods[0]
    alone = check_placement([pod], [node.as_empty()], _all_on([pod], node))
    could = could_ever_hold(pod, node)
    event(f"could ever hold: {could}; node busy: {bool(node.requested)}")
    assert could == (not alone), (never_reasons(pod, node), alone)
    assert all(r.used == 0 for r in never_reasons(pod, node) if isinstance(r, Insufficient))
