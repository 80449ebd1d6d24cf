"""The ``scheduler`` section of a plan (``vf plan``): the model's verdict and, when needed, a remedy."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from vfcore.cluster import ClusterSnapshot
from vfcore.placement.claims import PodRequest
from vfcore.placement.dra.inventory import DraInventory
from vfcore.placement.scheduler.cluster_facts import SchedulingFacts
from vfcore.placement.scheduler.dynamic_resources import DynamicResources
from vfcore.placement.scheduler.engine import Budget
from vfcore.placement.scheduler.prediction import DEFAULT_MAX_WORK, predict
from vfcore.placement.scheduler.remedy import Remedy, remedy
from vfcore.placement.scheduler.results import SchedulerPrediction, Verdict
from vfcore.placement.scheduler.scoring import ScoringConfig
from vfcore.placement.scheduler.workloads import Workload

__all__ = ["SchedulerReport", "predict_for_plan"]


class _PlanLike(Protocol):
    @property
    def verdict(self) -> str: ...

    @property
    def placement(self) -> dict[str, str]: ...


@dataclass(frozen=True, slots=True)
class SchedulerReport:
    """The ``scheduler`` section of a plan: the model's verdict and, when needed, a remedy.

    ``remedy`` is computed when the model does not land every pod although the
    exact packing places them all (``None`` otherwise). ``cut_short`` names
    the phases (``scheduler model``, ``scan window``, ``remedy``) that
    stopped at their time limit or work bound; their verdicts then say what
    was explored. ``to_dict`` adds, for the flow as applied (under the
    remedy when there is one), the stranded range, the scan window's runs,
    the pods preemption evicts and notes on what the model could not decide.
    """

    prediction: SchedulerPrediction
    remedy: Remedy | None
    cut_short: tuple[str, ...] = ()

    @property
    def verdict(self) -> Verdict:
        return self.prediction.verdict

    @property
    def stranded(self) -> tuple[str, ...]:
        return self.prediction.stranded

    @property
    def verdict_with_remedy(self) -> Verdict:
        """The verdict once the remedy is applied (the model's own verdict when there is none)."""
        return self.verdict if self.remedy is None else self.remedy.verdict_after

    @property
    def applied(self) -> SchedulerPrediction:
        """The prediction for the flow as ``vf deploy`` applies it: under the remedy, if any."""
        if self.remedy is None or self.remedy.kind == "none":
            return self.prediction
        return self.remedy.prediction

    @property
    def evicted(self) -> tuple[str, ...]:
        """Pods (``namespace/name``) that preemption evicts in some outcome, as applied."""
        return self.applied.evicted

    @property
    def evicts(self) -> bool:
        """Whether applying the flow may evict other pods (``--strict-preflight`` refuses it
        unless ``--allow-preemption``)."""
        return bool(self.evicted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.prediction.verdict,
            "reason": self.prediction.reason,
            "stranded": list(self.prediction.stranded),
            "stranded_always": list(self.prediction.stranded_always),
            "exhaustive": self.prediction.exhaustive,
            "strand_probability": None
            if self.prediction.scheduler_strand_probability is None
            else str(self.prediction.scheduler_strand_probability),
            "tie_break": self.prediction.tie_break,
            "config": self.prediction.config.to_dict(),
            "remedy": None if self.remedy is None else self.remedy.to_dict(),
            "verdict_with_remedy": self.verdict_with_remedy,
            "cut_short": list(self.cut_short),
            "stranded_range": None
            if self.applied.stranded_range is None
            else list(self.applied.stranded_range),
            "window": None if self.applied.window is None else self.applied.window.to_dict(),
            "evicted": list(self.evicted),
            "preemptions": [p.to_dict() for p in self.applied.preemptions],
            "notes": list(self.applied.notes),
        }


def predict_for_plan(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    plan: _PlanLike,
    *,
    config: ScoringConfig | None = None,
    time_limit: float | None = None,
    clock: Callable[[], float] | None = None,
    phase: Callable[[str], None] | None = None,
    max_work: int = DEFAULT_MAX_WORK,
    workloads: Mapping[str, Workload] | None = None,
    facts: SchedulingFacts | None = None,
    dra_inventories: Sequence[DraInventory] = (),
) -> SchedulerReport:
    """The model's verdict for a plan's pods, plus a remedy when greedy misses an exact packing.

    Each phase (the prediction, then the remedy) gets its own bound:
    ``max_work`` node-state scans for the prediction and twice that for
    the remedy's three re-checks, and ``time_limit`` seconds of ``clock`` each
    when both are given. ``phase`` is told each phase's name as it starts.
    ``workloads`` and ``facts`` are :func:`predict`'s; ``dra_inventories``: the DRA
    inventories the plan compiled on ``cluster``, which the model reuses.
    """
    cfg = config or ScoringConfig()
    if phase is not None:
        phase("scheduler model")
    budget = Budget(max_work, seconds=time_limit, clock=clock)
    for inventory in dra_inventories:
        DynamicResources.seed(budget.memo, cluster, inventory)
    prediction = predict(pods, cluster, config=cfg, budget=budget, workloads=workloads, facts=facts)
    cut = list(budget.cut)
    placement = plan.placement
    exact = plan.verdict == "fits" and all(p.pod in placement for p in pods)
    fix = None
    if prediction.verdict != "lands" and exact:
        if phase is not None:
            phase("remedy")
        fixing = Budget(2 * max_work, seconds=time_limit, clock=clock)
        fixing.memo = budget.memo  # the remedy's runs reuse the prediction's DRA inventories
        dra = getattr(plan, "dra", None)
        fix = remedy(
            pods,
            cluster,
            placement,
            config=cfg,
            budget=fixing,
            before=prediction,
            workloads=workloads,
            facts=facts,
            devices={a.pod: a.devices for a in dra.assignments} if dra is not None else None,
        )
        cut += [c for c in fixing.cut if c not in cut]
    return SchedulerReport(prediction, fix, tuple(cut))
