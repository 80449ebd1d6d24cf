"""What the scheduler model reports: one greedy run (:class:`Simulation`) and the verdict
over every tie-break outcome (:class:`SchedulerPrediction`)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from vfcore.placement.scheduler.preemption import Preemption
from vfcore.placement.scheduler.scoring import ScoringConfig

__all__ = [
    "SchedulerPrediction",
    "Simulation",
    "Step",
    "StrandedPod",
    "Verdict",
    "WindowReport",
]

Verdict = Literal["lands", "strands", "at-risk", "unknown"]


@dataclass(frozen=True, slots=True)
class StrandedPod:
    """A pod the model leaves Pending, with the scheduler-style line saying why."""

    pod: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"pod": self.pod, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Step:
    """One scheduling cycle: where the pod went, its score, and how big the tie was.

    ``tied_nodes`` counts the nodes sharing the top score; ``tied_states`` the
    distinct (node kind, load) states among them — the real branching, since
    identical nodes with identical loads are interchangeable. A stranded pod
    has ``node=None`` and zero ties.
    """

    pod: str
    node: str | None
    score: int | None
    tied_nodes: int
    tied_states: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "node": self.node,
            "score": self.score,
            "tied_nodes": self.tied_nodes,
            "tied_states": self.tied_states,
        }


@dataclass(frozen=True, slots=True)
class Simulation:
    """One greedy run: each pod in ``order`` bound to a node or stranded.

    ``placements`` pairs pods with nodes in apply order. A stranded pod's
    reason is judged against the cluster at the end of the run (what
    ``kubectl describe`` shows after the last retry: capacity only shrinks, so
    a stranded pod never fits later). Nodes of unknown occupancy were
    simulated as ``unknown_as`` (empty or full). ``dra_layouts`` (DRA pods) says,
    per node, which devices the allocator took in each block (a GPU's slice with
    DynamicMIG: ``mig-3g40gb-9-0`` with the GPU's number left out, since which
    GPU it was is the slice order's tie), blocks sorted.
    """

    order: tuple[str, ...]
    placements: tuple[tuple[str, str], ...]
    stranded: tuple[StrandedPod, ...]
    steps: tuple[Step, ...]
    tie: str
    config: ScoringConfig
    unknown_nodes: tuple[str, ...] = ()
    unknown_as: Literal["empty", "full"] = "empty"
    preemptions: tuple[Preemption, ...] = ()
    dra_layouts: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = ()

    @property
    def lands(self) -> bool:
        return not self.stranded

    @property
    def placement(self) -> dict[str, str]:
        return dict(self.placements)

    @property
    def ties(self) -> tuple[Step, ...]:
        """The steps where more than one distinct node state shared the top score."""
        return tuple(s for s in self.steps if s.tied_states > 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lands": self.lands,
            "order": list(self.order),
            "placements": dict(self.placements),
            "stranded": [s.to_dict() for s in self.stranded],
            "ties": [s.to_dict() for s in self.ties],
            "tie": self.tie,
            "config": self.config.to_dict(),
            "unknown_nodes": list(self.unknown_nodes),
            "unknown_as": self.unknown_as,
            "preemptions": [p.to_dict() for p in self.preemptions],
            **(
                {"dra_layouts": {n: [list(b) for b in blocks] for n, blocks in self.dra_layouts}}
                if self.dra_layouts
                else {}
            ),
        }


@dataclass(frozen=True, slots=True)
class WindowReport:
    """What kube-scheduler's scan window does to a prediction (clusters of 100 nodes and more).

    ``to_find`` of ``nodes`` feasible nodes are scored per pod
    (``numFeasibleNodesToFind``); ``widest`` is the most nodes any pod fits
    on. ``full`` is the stranded count over the outcomes explored with every
    feasible node scored (the tie search; ``None`` when none finished),
    ``runs`` the windowed runs
    (:class:`vfcore.placement.scheduler.window.WindowRun` documents: start
    index, jitter seed, stranded), ``planned`` how many were to run (fewer
    ran when the work bound or time limit cut them short).
    """

    nodes: int
    to_find: int
    widest: int
    full: tuple[int, int] | None
    runs: tuple[dict[str, Any], ...]
    planned: int

    @property
    def matters(self) -> bool:
        """Whether some pod fits on more nodes than the window scores."""
        return self.widest > self.to_find

    @property
    def window_range(self) -> tuple[int, int] | None:
        counts = [int(r["stranded"]) for r in self.runs]
        return (min(counts), max(counts)) if counts else None

    def to_dict(self) -> dict[str, Any]:
        window = self.window_range
        return {
            "nodes": self.nodes,
            "to_find": self.to_find,
            "widest": self.widest,
            "matters": self.matters,
            "full_window_stranded": None if self.full is None else list(self.full),
            "windowed_stranded": None if window is None else list(window),
            "runs": list(self.runs),
            "planned_runs": self.planned,
        }


@dataclass(frozen=True, slots=True)
class SchedulerPrediction:
    """The model's verdict over every tie-break outcome (or a documented sample of them).

    - ``lands``: every explored outcome places every pod;
    - ``strands``: every explored outcome strands some pod;
    - ``at-risk``: some outcomes land and some strand — it depends on tie-breaks;
    - ``unknown``: a node the pods could use has unknown occupancy and the
      verdict differs between treating such nodes as full and as empty
      (``brackets``), or the node list itself is unknown.

    ``exhaustive`` says every tie-break outcome was explored (up to swapping
    interchangeable nodes); otherwise the verdict comes from the bounded search
    (see :func:`predict`), which can miss outcomes: its ``lands`` is a sample.
    ``outcomes_explored`` counts distinct outcomes (paths through the collapsed
    tie tree) or runs of the bounded search; ``search_nodes`` the (pod, load
    state) pairs the exhaustive search visited. When exhaustive,
    ``node_outcomes`` counts the node-level tie-break sequences the real
    scheduler can produce (the worked example's "2/2 outcomes" in docs/scheduler-model.md: two symmetric nodes are two
    node outcomes but one collapsed outcome) and ``strand_probability`` is the
    exact chance that some pod strands when every tie is broken uniformly at
    random, as kube-scheduler's reservoir sampling does up to 1.35.

    **Ties from 1.36.** kube-scheduler 1.36 takes the winner from a score heap
    and sets its random tie-break value only when scheduler extenders are
    configured, so a tie usually goes to the node earliest in its node list:
    not a uniform draw. The *set* of outcomes explored is still what the
    scheduler can do (which node is earliest depends on the informer's list
    order, which vfcore cannot see), but a probability over them is not one the
    scheduler has. So for ``kube_version`` 1.36 :attr:`scheduler_strand_probability`
    is None, ``to_dict`` prints none and the reason speaks of outcomes
    explored only; ``strand_probability`` keeps the uniform-ties figure for
    callers that want it, under that name's documented meaning.
    """

    verdict: Verdict
    exhaustive: bool
    outcomes_explored: int
    search_nodes: int
    stranded_sometimes: tuple[str, ...]
    stranded_always: tuple[str, ...]
    example_stranding: Simulation | None
    example_landing: Simulation | None
    order: tuple[str, ...]
    config: ScoringConfig
    reason: str
    unknown_nodes: tuple[str, ...] = ()
    brackets: tuple[tuple[str, str], ...] = ()
    node_outcomes: int | None = None
    strand_probability: Fraction | None = None
    stranded_range: tuple[int, int] | None = None
    window: WindowReport | None = None
    evicted: tuple[str, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def stranded(self) -> tuple[str, ...]:
        """Pods stranded in at least one explored outcome, in apply order."""
        return self.stranded_sometimes

    @property
    def tie_break(self) -> str:
        """How the predicted version breaks score ties: ``uniform-random`` or ``earliest-node``."""
        return "uniform-random" if self.config.uniform_ties else "earliest-node"

    @property
    def scheduler_strand_probability(self) -> Fraction | None:
        """``strand_probability`` where it is the scheduler's own (uniform ties, up to 1.35)."""
        return self.strand_probability if self.config.uniform_ties else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "exhaustive": self.exhaustive,
            "outcomes_explored": self.outcomes_explored,
            "search_nodes": self.search_nodes,
            "node_outcomes": self.node_outcomes,
            "strand_probability": None
            if self.scheduler_strand_probability is None
            else str(self.scheduler_strand_probability),
            "tie_break": self.tie_break,
            "stranded": list(self.stranded),
            "stranded_sometimes": list(self.stranded_sometimes),
            "stranded_always": list(self.stranded_always),
            "example_stranding": None
            if self.example_stranding is None
            else self.example_stranding.to_dict(),
            "order": list(self.order),
            "config": self.config.to_dict(),
            "unknown_nodes": list(self.unknown_nodes),
            "brackets": {name: verdict for name, verdict in self.brackets},
            "stranded_range": None if self.stranded_range is None else list(self.stranded_range),
            "window": None if self.window is None else self.window.to_dict(),
            "evicted": list(self.evicted),
            "preemptions": [p.to_dict() for p in self.preemptions],
            "notes": list(self.notes),
        }
