"""Assembling the facts: nodes, pods and runtime classes → :class:`ClusterFacts`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vfcore.cluster.kubeparse.documents import (
    NODE_LIST,
    POD_LIST,
    RUNTIME_CLASS_LIST,
    items_of,
    parse_document,
    read_runtime_classes,
    status_reason,
)
from vfcore.cluster.kubeparse.fields import add_into
from vfcore.cluster.kubeparse.node_objects import NodeOutcome, read_node
from vfcore.cluster.kubeparse.pods import read_pod
from vfcore.cluster.nodes import NodeState, Note, RuntimeClassInfo, Unknown, UnreadableNode
from vfcore.quantity import PODS

__all__ = ["ClusterFacts", "parse_kubernetes", "parse_list"]


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What a dump says about a cluster: the fields of a ``ClusterSnapshot``, in order.

    :class:`vfcore.cluster.ClusterSnapshot` is built from these; see it for
    what each field means.
    """

    nodes: tuple[NodeState, ...]
    unknowns: tuple[Unknown, ...]
    nodes_unknown: str | None
    runtime_classes: tuple[RuntimeClassInfo, ...] | None
    unreadable_nodes: tuple[UnreadableNode, ...]
    notes: tuple[Note, ...] = ()


def _assemble(
    node_items: list[tuple[str, Any]] | None,
    nodes_reason: str | None,
    pod_items: list[tuple[str, Any]] | None,
    pods_reason: str | None,
    runtime_items: list[tuple[str, Any]] | None,
    runtime_reason: str | None,
    unknowns: list[Unknown],
) -> ClusterFacts:
    if nodes_reason is not None:
        unknowns.append(Unknown("nodes", nodes_reason))
    if pods_reason is not None:
        unknowns.append(Unknown("pods", pods_reason))
    if runtime_reason is not None:
        unknowns.append(Unknown("runtimeclasses", runtime_reason))

    versions: dict[str, list[NodeOutcome]] = {}
    unreadable: dict[str, UnreadableNode] = {}
    notes: set[Note] = set()
    for where, item in node_items or []:
        outcome = read_node(item, where)
        unknowns.extend(Unknown(outcome.what, p) for p in outcome.problems)
        notes.update(outcome.notes)
        if outcome.name is not None:
            versions.setdefault(outcome.name, []).append(outcome)
        elif outcome.unreadable is not None:  # not even a name: still a node that exists
            unreadable[outcome.unreadable.name] = outcome.unreadable
    states: dict[str, NodeState] = {}
    for name, outcomes in sorted(versions.items()):
        first = outcomes[0]
        if any((o.state, o.unreadable) != (first.state, first.unreadable) for o in outcomes):
            unknowns.append(
                Unknown(f"node/{name}", "is listed twice with different contents; left out")
            )
            unreadable[name] = UnreadableNode(
                name, "is listed twice with different contents: which one holds is unknown"
            )
        elif first.state is not None:
            states[name] = first.state
        elif first.unreadable is not None:
            unreadable[name] = first.unreadable

    requested: dict[str, dict[str, int]] = {name: {PODS: 0} for name in states}
    nonzero: dict[str, list[int]] = {name: [0, 0] for name in states}
    broken: dict[str, list[str]] = {}
    orphans: dict[str, list[str]] = {}
    anywhere: list[str] = []
    for where, item in pod_items or []:
        pod = read_pod(item, where)
        if pod is None:
            continue
        if pod.anywhere:
            unknowns.append(
                Unknown(
                    pod.what,
                    f"{pod.problem}; whether and where it is bound is unknown, so every "
                    "node's occupancy is unknown",
                )
            )
            anywhere.append(pod.what)
            continue
        if pod.node is not None and pod.node not in states and pod.node not in unreadable:
            orphans.setdefault(pod.node, []).append(pod.what)
        if pod.problem is not None:
            bound = pod.node if pod.node in states else None
            consequence = f"; node {bound}'s occupancy is unknown" if bound else ""
            unknowns.append(Unknown(pod.what, pod.problem + consequence))
            if bound is not None:
                broken.setdefault(bound, []).append(f"{pod.what} cannot be read: {pod.problem}")
            continue
        if pod.node not in states or pod.requests is None:
            continue  # an unreadable node, or one missing from the node list (below)
        totals = requested[pod.node]
        add_into(totals, pod.requests)
        totals[PODS] += 1
        if pod.nonzero is not None:
            nonzero[pod.node][0] += pod.nonzero[0]
            nonzero[pod.node][1] += pod.nonzero[1]
    if nodes_reason is None:
        for name, pod_names in sorted(orphans.items()):
            shown = ", ".join(sorted(pod_names)[:3]) + ("…" if len(pod_names) > 3 else "")
            reason = (
                f"is not in the node list, yet {len(pod_names)} pod(s) are bound to it "
                f"({shown}): the node list may be partial or stale, so what this node "
                "holds is unknown"
            )
            unknowns.append(Unknown(f"node/{name}", reason))
            unreadable[name] = UnreadableNode(name, reason)

    if anywhere:
        shown = ", ".join(sorted(anywhere)[:3]) + ("…" if len(anywhere) > 3 else "")
        for name in states:
            broken.setdefault(name, []).append(
                f"{len(anywhere)} pod(s) that cannot be read may be bound to it ({shown})"
            )
    nodes: list[NodeState] = []
    for name, state in sorted(states.items()):
        if pods_reason is not None:
            nodes.append(_unknown_occupancy(state, pods_reason))
        elif name in broken:
            nodes.append(_unknown_occupancy(state, "; ".join(sorted(broken[name]))))
        else:
            nodes.append(_with_requested(state, requested[name], nonzero[name]))

    runtime_classes: tuple[RuntimeClassInfo, ...] | None = None
    if runtime_items is not None:
        runtime_classes, bad_classes = read_runtime_classes(runtime_items)
        unknowns.extend(bad_classes)

    return ClusterFacts(
        nodes=() if nodes_reason is not None else tuple(nodes),
        unknowns=tuple(sorted(set(unknowns), key=lambda u: (u.what, u.reason))),
        nodes_unknown=nodes_reason,
        runtime_classes=runtime_classes,
        unreadable_nodes=() if nodes_reason is not None else tuple(unreadable.values()),
        notes=()
        if nodes_reason is not None
        else tuple(sorted(notes, key=lambda n: (n.what, n.code))),
    )


def _unknown_occupancy(state: NodeState, reason: str) -> NodeState:
    return replace(state, requested=None, nonzero_requested=None, unknown_reason=reason)


def _with_requested(
    state: NodeState, totals: Mapping[str, int], nonzero: Sequence[int]
) -> NodeState:
    kept = tuple((k, v) for k, v in sorted(totals.items()) if v or k == PODS)
    cpu, memory = nonzero
    return replace(state, requested=kept, nonzero_requested=(cpu, memory), unknown_reason=None)


def parse_kubernetes(
    nodes_json: object,
    pods_json: object,
    runtime_classes_json: object = None,
    *,
    nodes_source: str = "nodes.json",
    pods_source: str = "pods.json",
    runtime_classes_source: str = "runtimeclasses.json",
) -> ClusterFacts:
    """The facts in ``kubectl get nodes -o json`` and ``kubectl get pods -A -o json``.

    Each document is a parsed object, its JSON text (``str``/``bytes``) or
    ``None`` (the file is missing); ``*_source`` names it in reasons. See the
    module docstring for every rule.
    """
    unknowns: list[Unknown] = []
    node_items, nodes_reason, more = items_of(nodes_json, nodes_source, NODE_LIST)
    unknowns.extend(more)
    pod_items, pods_reason, more = items_of(pods_json, pods_source, POD_LIST)
    unknowns.extend(more)
    runtime_items: list[tuple[str, Any]] | None = None
    runtime_reason: str | None = None
    if runtime_classes_json is not None:
        runtime_items, runtime_reason, more = items_of(
            runtime_classes_json, runtime_classes_source, RUNTIME_CLASS_LIST
        )
        unknowns.extend(more)
    return _assemble(
        node_items, nodes_reason, pod_items, pods_reason, runtime_items, runtime_reason, unknowns
    )


def parse_list(doc: object, *, source: str = "cluster.json") -> ClusterFacts:
    """The facts in one ``List`` holding Node and Pod (and RuntimeClass) items.

    ``kubectl get nodes,pods,runtimeclasses -A -o json`` prints one. When a
    kind is refused, kubectl still prints the others (and the error on
    stderr), so a List with no Pod items means *pod occupancy unknown*, never
    "nothing bound"; no Node items means the nodes are unknown; no
    RuntimeClass items leaves ``runtime_classes`` unknown (``None``).
    """
    parsed, reason = parse_document(doc, source, "node and pod")
    if parsed is not None and parsed.get("kind") == "Status":
        reason = status_reason(parsed, "node and pod")
        parsed = None
    elif parsed is not None and (
        parsed.get("kind") not in ("List", None) or not isinstance(parsed.get("items"), list)
    ):
        reason = (
            f"{source} is not a List of nodes and pods "
            "(dump one with `kubectl get nodes,pods,runtimeclasses -A -o json`)"
        )
        parsed = None
    if parsed is None:
        assert reason is not None
        return _assemble(None, reason, None, reason, None, None, [])
    node_items, _, unknowns = items_of(parsed, source, NODE_LIST)
    pod_items, _, _ = items_of(parsed, source, POD_LIST)
    runtime_items, _, _ = items_of(parsed, source, RUNTIME_CLASS_LIST)
    nodes_reason = None if node_items else f"{source} holds no Node items"
    pods_reason = None
    if not pod_items:
        pods_reason = (
            f"{source} holds no Pod items (was the pod listing refused? "
            "dump both with `kubectl get nodes,pods -A -o json`)"
        )
    return _assemble(
        node_items or None,
        nodes_reason,
        pod_items or None,
        pods_reason,
        runtime_items or None,
        None,
        unknowns,
    )
