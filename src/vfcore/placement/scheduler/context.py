"""Workloads and cluster facts compiled for one model run: spread slots, affinity tables, victims.

The engine (:mod:`.engine`) keeps a node as a *state*: its static facts and a
load vector. PodTopologySpread needs, per node, how many pods each spread
selector matches, so each distinct selector gets a **slot** in the load
vector (:class:`SpreadPlan`): a pod adds 1 to every slot whose selector
matches it, and existing pods that match seed the slots
(:func:`existing_slot_counts`). InterPodAffinity and ImageLocality depend
only on existing pods and images, so they are tables per workload and node
(:func:`interpod_table`, :func:`image_scores`). Preemption needs each node's
lower-priority pods (:func:`potential_victims`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from vfcore.cluster import ClusterSnapshot, NodeState
from vfcore.placement.scheduler.cluster_facts import (
    BoundPod,
    SchedulingFacts,
    normalized_image_name,
)
from vfcore.placement.scheduler.plugins import image_locality_score
from vfcore.placement.scheduler.workloads import (
    HOSTNAME_KEY,
    LabelSelector,
    SpreadConstraint,
    Workload,
)

__all__ = [
    "InterpodTable",
    "SpreadPlan",
    "existing_slot_counts",
    "image_scores",
    "interpod_table",
    "node_labels",
    "plan_spread",
    "potential_victims",
]

SlotKey = tuple[object, ...]


def node_labels(node: NodeState) -> dict[str, str]:
    """A node's labels with ``kubernetes.io/hostname`` defaulted to its name (kubelet sets it)."""
    return {HOSTNAME_KEY: node.name, **dict(node.labels)}


def _slot_key(workload: Workload, constraint: SpreadConstraint) -> SlotKey:
    if constraint.selector is None:
        return ("own", workload.name)
    return ("selector", workload.namespace, constraint.selector)


@dataclass(frozen=True, slots=True)
class WorkloadSpread:
    """One workload's constraints, the slot each counts in, and the slots its pods add to."""

    constraints: tuple[SpreadConstraint, ...]
    slots: tuple[int, ...]
    require_all: bool
    self_match: tuple[bool, ...]
    member_of: tuple[int, ...]

    @property
    def has_soft(self) -> bool:
        return any(not c.is_hard for c in self.constraints)

    @property
    def has_hard(self) -> bool:
        return any(c.is_hard for c in self.constraints)


@dataclass(frozen=True, slots=True)
class SpreadPlan:
    """Every spread slot of a run and each workload's part in them."""

    keys: tuple[SlotKey, ...] = ()
    workloads: Mapping[str, WorkloadSpread] = field(default_factory=dict)

    def of(self, workload: str) -> WorkloadSpread | None:
        return self.workloads.get(workload)


def _matches(key: SlotKey, workload: Workload) -> bool:
    if key[0] == "own":
        return key[1] == workload.name
    namespace, selector = key[1], key[2]
    assert isinstance(selector, LabelSelector)
    return workload.namespace == namespace and selector.matches(workload.label_map)


def plan_spread(
    workloads: Mapping[str, Workload],
    defaults: Sequence[SpreadConstraint],
    *,
    scored: bool,
) -> SpreadPlan:
    """The slots of every workload's effective constraints (``scored``: soft ones count too).

    Soft constraints are left out when ``scored`` is false (the plugin's
    weight is 0); hard ones always filter.
    """
    keys: list[SlotKey] = []
    index: dict[SlotKey, int] = {}
    chosen: dict[str, tuple[SpreadConstraint, ...]] = {}
    for name, workload in sorted(workloads.items()):
        constraints = tuple(c for c in workload.constraints(defaults) if c.is_hard or scored)
        chosen[name] = constraints
        for constraint in constraints:
            key = _slot_key(workload, constraint)
            if key not in index:
                index[key] = len(keys)
                keys.append(key)
    out: dict[str, WorkloadSpread] = {}
    for name, workload in sorted(workloads.items()):
        constraints = chosen[name]
        member_of = tuple(i for i, key in enumerate(keys) if _matches(key, workload))
        if not constraints and not member_of:
            continue
        slots = tuple(index[_slot_key(workload, c)] for c in constraints)
        out[name] = WorkloadSpread(
            constraints=constraints,
            slots=slots,
            require_all=bool(workload.spread),
            self_match=tuple(_matches(keys[s], workload) for s in slots),
            member_of=member_of,
        )
    return SpreadPlan(tuple(keys), out)


def existing_slot_counts(
    plan: SpreadPlan, workloads: Mapping[str, Workload], pods: Sequence[BoundPod]
) -> dict[str, list[int]]:
    """Per node, the existing pods each slot's selector matches (terminating pods never count)."""
    out: dict[str, list[int]] = {}
    if not plan.keys:
        return out
    for pod in pods:
        if pod.terminating:
            continue
        labels = pod.label_map
        for i, key in enumerate(plan.keys):
            if key[0] == "own":
                owner = workloads.get(str(key[1]))
                hit = owner is not None and owner.counts_as_own(labels, pod.namespace)
            else:
                selector = key[2]
                assert isinstance(selector, LabelSelector)
                hit = pod.namespace == key[1] and not selector.is_empty and selector.matches(labels)
            if hit:
                out.setdefault(pod.node, [0] * len(plan.keys))[i] += 1
    return out


@dataclass(frozen=True, slots=True)
class InterpodTable:
    """Existing pods' affinity terms as they apply to one workload's pods.

    ``scores[key][value]``: the summed weights of the terms that select the
    pods, per topology value (``topologyScore``); ``blocked``: the topology
    pairs their required anti-affinity terms close; ``unknown``: terms whose
    match could not be decided (the pods' labels or a namespace selector).
    """

    scores: Mapping[str, Mapping[str, int]]
    blocked: frozenset[tuple[str, str]]
    unknown: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.scores)

    def raw(self, labels: Mapping[str, str]) -> int:
        return sum(
            values.get(labels[key], 0) for key, values in self.scores.items() if key in labels
        )

    def blocks(self, labels: Mapping[str, str]) -> bool:
        return any(labels.get(key) == value for key, value in self.blocked)


#: hardPodAffinityWeight: what an existing pod's *required* affinity term adds to the score.
HARD_POD_AFFINITY_WEIGHT = 1


def interpod_table(
    workload: Workload, facts: SchedulingFacts, cluster: ClusterSnapshot
) -> InterpodTable:
    """The :class:`InterpodTable` of ``workload`` on the cluster (existing pods' terms only)."""
    labels = workload.label_map
    by_name = {n.name: n for n in cluster.nodes}
    scores: dict[str, dict[str, int]] = {}
    blocked: set[tuple[str, str]] = set()
    unknown: list[str] = []
    for pod in facts.pods:
        if not pod.terms or pod.node not in by_name:
            continue
        where = node_labels(by_name[pod.node])
        for term in pod.terms:
            selected = term.selects(labels, workload.namespace)
            if (workload.labels is None and term.selector is not None) or selected is None:
                unknown.append(f"{pod.id} ({term.kind} on {term.topology_key})")
                continue
            value = where.get(term.topology_key)
            if not selected or value is None:
                continue
            if term.kind == "required-anti":
                blocked.add((term.topology_key, value))
                continue
            delta = {
                "preferred-affinity": term.weight,
                "preferred-anti": -term.weight,
                "required-affinity": HARD_POD_AFFINITY_WEIGHT,
            }[term.kind]
            bucket = scores.setdefault(term.topology_key, {})
            bucket[value] = bucket.get(value, 0) + delta
    return InterpodTable(scores, frozenset(blocked), tuple(sorted(set(unknown))))


def image_scores(
    workload: Workload, facts: SchedulingFacts, cluster: ClusterSnapshot
) -> dict[str, int]:
    """ImageLocality's score of every node for the workload's pods (nodes scoring 0 left out)."""
    images = [normalized_image_name(i) for i in workload.images]
    if not images or not facts.images:
        return {}
    on_nodes = facts.image_map
    nodes_with: dict[str, int] = {}
    for held in on_nodes.values():
        for image in held:
            nodes_with[image] = nodes_with.get(image, 0) + 1
    total = len(cluster.nodes)
    out: dict[str, int] = {}
    for node in cluster.nodes:
        score = image_locality_score(images, on_nodes.get(node.name, {}), nodes_with, total)
        if score:
            out[node.name] = score
    return out


def potential_victims(
    facts: SchedulingFacts | None, cluster: ClusterSnapshot, below: int
) -> dict[str, tuple[BoundPod, ...]]:
    """Per node of known occupancy, the pods of priority below ``below`` (most important first)."""
    if facts is None or facts.pods_unknown is not None:
        return {}
    known = {n.name for n in cluster.nodes if n.occupancy_known}
    out: dict[str, list[BoundPod]] = {}
    for pod in facts.pods:
        if pod.node in known and pod.priority < below and not pod.terminating:
            out.setdefault(pod.node, []).append(pod)
    return {node: tuple(pods) for node, pods in sorted(out.items())}
