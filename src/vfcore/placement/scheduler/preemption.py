"""DefaultPreemption as kube-scheduler 1.36 runs it: victims on a node, then the nominated node.

When a pod fits no node, DefaultPreemption (a PostFilter) looks for nodes
where evicting pods of **lower** priority makes room (never equal or higher:
with one priority everywhere it finds "No preemption victims found"). A node
helps only when the pod failed there for a reason eviction can fix (too few
resources or pod slots), not a taint, a selector or a cordon.

**Victims on one node** (:func:`select_victims`, ``SelectVictimsOnNode``):

1. remove every pod of lower priority; if the pod still does not fit, the node
   is no candidate;
2. sort them most important first: higher priority, then the one started
   earlier (``MoreImportantPod``);
3. split them into those whose eviction would violate a PodDisruptionBudget
   (each matching budget's ``disruptionsAllowed`` counted down in that order;
   below 0 is a violation) and the rest;
4. give back (reprieve) pods in that order — violating ones first — as long
   as the pod still fits; the pods not given back are the victims.

**The nominated node** (:func:`pick_node`, ``pickOneNodeForPreemption``):
fewest PDB violations, then the lowest highest-victim priority, then the
lowest sum of victim priorities (each shifted by 2³¹), then the fewest victims,
then the latest start among the highest-priority victims; a tie after all
that goes to whichever node Go's map iteration yields first, so the model
names every tied node (``tied``) and takes the first by name.

With more than 100 candidate nodes (and more than 10 % of the nodes)
kube-scheduler dry-runs a random sample (``minCandidateNodesPercentage`` 10,
``minCandidateNodesAbsolute`` 100); the model takes the best over every
candidate and says so (``sampled``).

Worked example: a 4-GPU pod of priority 1000 on two full 4-GPU nodes; ``a``
runs two 2-GPU pods of priority 0, ``b`` one 4-GPU pod of priority 500 and
nothing else. Both need every lower-priority pod gone. ``a``'s highest victim
priority is 0, ``b``'s 500: the pod is nominated to ``a`` and both of ``a``'s
pods are evicted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from vfcore.placement.scheduler.cluster_facts import BoundPod, DisruptionBudget, start_key

__all__ = [
    "MIN_CANDIDATE_NODES_ABSOLUTE",
    "MIN_CANDIDATE_NODES_PERCENTAGE",
    "Candidate",
    "Preemption",
    "num_candidates",
    "pick_node",
    "preemption_of",
    "select_victims",
    "split_by_budget",
]

#: DefaultPreemptionArgs' defaults.
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
_SHIFT = 2**31


def _importance(pod: BoundPod) -> tuple[int, float, str]:
    """Sort key, most important first: higher priority, then earlier start, then name."""
    return (-pod.priority, start_key(pod.start_time), pod.id)


def split_by_budget(
    pods: Sequence[BoundPod], budgets: Iterable[DisruptionBudget]
) -> tuple[list[BoundPod], list[BoundPod]]:
    """``filterPodsWithPDBViolation``: (evicting these violates a budget, these do not), order kept."""
    listed = list(budgets)
    allowed = [b.disruptions_allowed for b in listed]
    violating: list[BoundPod] = []
    fine: list[BoundPod] = []
    for pod in pods:
        violated = False
        for i, budget in enumerate(listed):
            if budget.covers(pod):
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else fine).append(pod)
    return violating, fine


def select_victims(
    priority: int,
    pods: Sequence[BoundPod],
    fits_without: Callable[[Sequence[BoundPod]], bool],
    budgets: Iterable[DisruptionBudget] = (),
) -> tuple[tuple[BoundPod, ...], int] | None:
    """The victims on one node and how many of them violate a budget (``None``: not a candidate).

    ``fits_without(removed)`` says whether the preemptor fits once ``removed``
    are gone. ``None`` when no pod has a lower priority, or when the pod does
    not fit even without all of them.

    >>> low = [BoundPod("ns", "x", "a", priority=0, requests=(("nvidia.com/gpu", 2),)),
    ...        BoundPod("ns", "y", "a", priority=10, requests=(("nvidia.com/gpu", 2),))]
    >>> free = lambda removed: sum(dict(p.requests)["nvidia.com/gpu"] for p in removed) >= 2
    >>> victims, violations = select_victims(100, low, free)
    >>> [p.name for p in victims], violations
    (['x'], 0)
    """
    potential = sorted((p for p in pods if p.priority < priority), key=_importance)
    if not potential or not fits_without(potential):
        return None
    violating, fine = split_by_budget(potential, budgets)
    removed = list(potential)
    victims: list[BoundPod] = []
    violations = 0
    for group, counts in ((violating, True), (fine, False)):
        for pod in group:
            trial = [p for p in removed if p is not pod]
            if fits_without(trial):
                removed = trial  # reprieved: it stays
            else:
                victims.append(pod)
                violations += 1 if counts else 0
    if violating and fine:
        victims.sort(key=_importance)
    return tuple(victims), violations


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node where preemption makes room, with its victims (most important first)."""

    node: str
    victims: tuple[BoundPod, ...]
    violations: int

    def criteria(self) -> tuple[int, int, int, int, float]:
        """``pickOneNodeForPreemption``'s order, smaller first."""
        top = self.victims[0].priority
        latest = min(
            (start_key(p.start_time) for p in self.victims if p.priority == top),
            default=float("inf"),
        )
        return (
            self.violations,
            top,
            sum(p.priority + _SHIFT for p in self.victims),
            len(self.victims),
            -latest,
        )


def pick_node(candidates: Sequence[Candidate]) -> tuple[Candidate, tuple[str, ...]]:
    """The nominated candidate and every node tied with it on all five criteria (sorted).

    >>> a = Candidate("a", (BoundPod("ns", "x", "a", priority=0),), 0)
    >>> b = Candidate("b", (BoundPod("ns", "y", "b", priority=500),), 0)
    >>> pick_node([b, a])[0].node
    'a'
    """
    best = min(c.criteria() for c in candidates)
    tied = sorted((c for c in candidates if c.criteria() == best), key=lambda c: c.node)
    return tied[0], tuple(c.node for c in tied)


def num_candidates(potential_nodes: int) -> int:
    """``calculateNumCandidates``: 10 % of the potential nodes, at least 100, at most all of them.

    >>> num_candidates(50), num_candidates(500), num_candidates(5_000)
    (50, 100, 500)
    """
    n = potential_nodes * MIN_CANDIDATE_NODES_PERCENTAGE // 100
    return min(max(n, MIN_CANDIDATE_NODES_ABSOLUTE), potential_nodes)


@dataclass(frozen=True, slots=True)
class Preemption:
    """A stranded pod that lands by evicting lower-priority pods (what ``vf plan`` reports).

    ``victims`` are ``namespace/name`` of the evicted pods, most important
    first, and ``owners`` their controllers (``ReplicaSet/x``: the workload
    that loses a replica and recreates it); ``tied`` the nodes kube-scheduler
    could nominate as well; ``budgets_known`` false when no PDB listing was
    read (no eviction then counts as a violation, which may be wrong);
    ``sampled`` when there were more candidates than kube-scheduler dry-runs.
    """

    pod: str
    node: str
    victims: tuple[str, ...]
    owners: tuple[str, ...]
    priorities: tuple[int, ...]
    pdb_violations: int
    candidates: int
    tied: tuple[str, ...]
    budgets_known: bool
    sampled: bool

    def describe(self) -> str:
        shown = ", ".join(
            f"{v} (priority {p}{', ' + o if o else ''})"
            for v, p, o in zip(self.victims, self.priorities, self.owners, strict=True)
        )
        also = (
            f"; tied with {', '.join(t for t in self.tied if t != self.node)}"
            if len(self.tied) > 1
            else ""
        )
        budgets = "" if self.budgets_known else "; PodDisruptionBudgets not read"
        return (
            f"{self.pod} preempts {len(self.victims)} pod(s) on {self.node}: {shown} "
            f"({self.pdb_violations} PDB violation(s), {self.candidates} candidate node(s){also}"
            f"{budgets})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "node": self.node,
            "victims": [
                {"pod": v, "priority": p, "owner": o or None}
                for v, p, o in zip(self.victims, self.priorities, self.owners, strict=True)
            ],
            "pdb_violations": self.pdb_violations,
            "candidates": self.candidates,
            "tied": list(self.tied),
            "budgets_known": self.budgets_known,
            "sampled": self.sampled,
        }


def preemption_of(
    pod: str,
    chosen: Candidate,
    candidates: int,
    potential: int,
    tied: tuple[str, ...],
    *,
    budgets_known: bool,
) -> Preemption:
    """The report of one preemption (``potential``: the nodes where eviction could help)."""
    return Preemption(
        pod=pod,
        node=chosen.node,
        victims=tuple(v.id for v in chosen.victims),
        owners=tuple(
            "" if v.owner is None else f"{v.owner[0]}/{v.owner[1]}" for v in chosen.victims
        ),
        priorities=tuple(v.priority for v in chosen.victims),
        pdb_violations=chosen.violations,
        candidates=candidates,
        tied=tied,
        budgets_known=budgets_known,
        sampled=candidates > num_candidates(potential),
    )
