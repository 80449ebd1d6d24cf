"""Node objects: one ``Node`` item becomes a :class:`~vfcore.cluster.NodeState`, or an
:class:`~vfcore.cluster.UnreadableNode` with the most its allocatable can be."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vfcore.cluster.kubeparse.fields import (
    Malformed,
    describe,
    read_mapping,
    read_quantity,
    read_sequence,
    read_string,
    short,
)
from vfcore.cluster.kubeparse.gpu_labels import gpu_info
from vfcore.cluster.nodes import NodeState, Note, Taint, UnreadableNode
from vfcore.quantity import MAX_UNITS, PODS

__all__ = ["NodeOutcome", "read_node"]

_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    """One node item: its state, or — when it cannot be read — what bounds it; and problems."""

    what: str
    name: str | None
    state: NodeState | None
    problems: tuple[str, ...]
    unreadable: UnreadableNode | None = None
    notes: tuple[Note, ...] = ()


def _labels(value: object) -> dict[str, str]:
    labels: dict[str, str] = {}
    for key, text in read_mapping(value, "metadata.labels").items():
        if not isinstance(text, str):
            raise Malformed(
                f'metadata.labels["{key}"]', f"= {short(text)} is {describe(text)}, not a string"
            )
        labels[str(key)] = text
    return labels


def _taints(value: object) -> tuple[Taint, ...]:
    taints: list[Taint] = []
    for i, raw in enumerate(read_sequence(value, "spec.taints")):
        field = f"spec.taints[{i}]"
        body = read_mapping(raw, field, required=True)
        key = read_string(body.get("key"), f"{field}.key", required=True)
        taint_value = read_string(body.get("value"), f"{field}.value") or ""
        effect = read_string(body.get("effect"), f"{field}.effect", required=True)
        if effect not in _TAINT_EFFECTS:
            raise Malformed(
                f"{field}.effect", f"= {effect!r} is not one of {', '.join(_TAINT_EFFECTS)}"
            )
        assert key is not None and effect is not None
        taints.append(Taint(key, taint_value, effect))
    return tuple(taints)


def _ready(status: Mapping[str, Any]) -> bool:
    for i, raw in enumerate(read_sequence(status.get("conditions"), "status.conditions")):
        condition = read_mapping(raw, f"status.conditions[{i}]", required=True)
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _lenient_resources(
    value: object, field: str, *, missing: str = "is missing"
) -> tuple[dict[str, int] | None, list[tuple[str, str]]]:
    """A ``ResourceList`` read entry by entry: the readable entries, and each bad one.

    ``(None, [problem])`` when the list itself is missing or not an object;
    otherwise the readable entries and ``(resource, problem)`` for every entry
    that is not a quantity, is negative or is over :data:`~vfcore.quantity.MAX_UNITS`.
    """
    if value is None:
        return None, [("", f"{field} {missing}")]
    if not isinstance(value, Mapping):
        return None, [("", f"{field} is {describe(value)}, not an object")]
    readable: dict[str, int] = {}
    bad: list[tuple[str, str]] = []
    for name, raw in sorted(value.items(), key=lambda kv: str(kv[0])):
        if not isinstance(name, str) or not name:
            bad.append(("", f"{field} has a resource name {short(name)} that is not a string"))
            continue
        try:
            readable[name] = read_quantity(name, raw, f'{field}["{name}"]')
        except Malformed as problem:
            bad.append((name, problem.reason))
    return readable, bad


def _upper_bound(
    allocatable: Mapping[str, int] | None,
    unreadable: Iterable[str],
    status: Mapping[str, Any],
) -> dict[str, int] | None:
    """The most this node's allocatable can be, or ``None`` when nothing bounds it.

    Kubelet computes allocatable as capacity minus reservations, so
    ``status.capacity`` bounds every entry that cannot be read; an entry that
    capacity cannot bound either is :data:`MAX_UNITS` (unbounded, for the
    solver). With no readable allocatable at all, capacity's entries are the
    only resources the node can have; with neither, nothing bounds the node.
    """
    capacity, capacity_bad = _lenient_resources(status.get("capacity"), "status.capacity")
    capacity_unbounded = {name for name, _ in capacity_bad if name}
    if allocatable is None:
        if capacity is None or any(not name for name, _ in capacity_bad):
            return None
        bound = dict(capacity)
        bound.update(dict.fromkeys(capacity_unbounded, MAX_UNITS))
    else:
        bound = dict(allocatable)
        for name in unreadable:
            if not name:
                return None  # an entry with no readable name could be any resource
            bound[name] = (capacity or {}).get(name, MAX_UNITS)
    if PODS not in bound:
        bound[PODS] = MAX_UNITS
    return bound


def read_node(item: object, where: str) -> NodeOutcome:
    """One node item; an unreadable one comes back with its upper bound (see UnreadableNode)."""
    what = where
    name: str | None = None
    if not isinstance(item, Mapping):
        reason = f"is {describe(item)}, not a Kubernetes object"
        return NodeOutcome(what, None, None, (reason,), UnreadableNode(where, reason))
    try:
        meta = read_mapping(item.get("metadata"), "metadata", required=True)
        name = read_string(meta.get("name"), "metadata.name", required=True)
        what = f"node/{name}"
        labels = _labels(meta.get("labels"))
        spec = read_mapping(item.get("spec"), "spec")
        unschedulable = spec.get("unschedulable", False)
        if not isinstance(unschedulable, bool):
            raise Malformed("spec.unschedulable", f"= {short(unschedulable)} is not a boolean")
        taints = _taints(spec.get("taints"))
        status = read_mapping(item.get("status"), "status")
        ready = _ready(status)
    except Malformed as bad:
        return NodeOutcome(
            what, name, None, (bad.reason,), UnreadableNode(name or where, bad.reason)
        )
    assert name is not None
    notes: tuple[Note, ...] = ()
    raw_allocatable = status.get("allocatable")
    if raw_allocatable is None and isinstance(status.get("capacity"), Mapping):
        # The API server defaults a missing allocatable to capacity (SetDefaults_NodeStatus in
        # pkg/apis/core/v1/defaults.go), so a stored Node always has one: read it the same way.
        raw_allocatable = status["capacity"]
        notes = (
            Note(
                what,
                "allocatable-from-capacity",
                "status.allocatable is absent; read as status.capacity, as the API server "
                "defaults it (nothing is reserved for the system on this node)",
                "if kubelet reserves resources there, dump the node with `kubectl get nodes "
                "-o json`, which carries the real status.allocatable",
            ),
        )
    allocatable, bad_entries = _lenient_resources(raw_allocatable, "status.allocatable")
    if allocatable is not None and not bad_entries and PODS not in allocatable:
        # kube-scheduler reads a missing entry as 0 pods allowed ("Too many pods"), but kubelet
        # always sets it (--max-pods, 110 by default): a dump without it is incomplete, not a
        # node that takes no pods. Unknown, bounded by status.capacity's pods if given.
        bad_entries = [
            (
                PODS,
                "status.allocatable has no pods entry (kubelet always sets one; "
                "how many pods the node takes is unknown)",
            )
        ]
    if bad_entries:
        problems = tuple(problem for _, problem in bad_entries)
        bound_alloc = _upper_bound(allocatable, (n for n, _ in bad_entries), status)
        bound = None
        if bound_alloc is not None:
            gpu, _ = gpu_info(labels, bound_alloc)  # label problems: the node is unknown anyway
            bound = NodeState(
                name=name,
                allocatable=tuple(bound_alloc.items()),
                requested=(),
                ready=ready,
                unschedulable=unschedulable,
                labels=tuple(labels.items()),
                taints=taints,
                gpu=gpu,
            )
        return NodeOutcome(
            what, name, None, problems, UnreadableNode(name, "; ".join(problems), bound)
        )
    assert allocatable is not None
    gpu, label_problems = gpu_info(labels, allocatable)
    state = NodeState(
        name=str(name),
        allocatable=tuple(allocatable.items()),
        requested=(),
        ready=ready,
        unschedulable=unschedulable,
        labels=tuple(labels.items()),
        taints=taints,
        gpu=gpu,
    )
    return NodeOutcome(what, name, state, tuple(label_problems), notes=notes)
