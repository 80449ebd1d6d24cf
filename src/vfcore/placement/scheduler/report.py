"""The ``scheduler`` section of a plan (``vf plan``): the model's verdict and, when needed, a remedy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from vfcore.cluster import ClusterSnapshot
from vfcore.placement.claims import PodRequest
from vfcore.placement.scheduler.prediction import predict
from vfcore.placement.scheduler.remedy import Remedy, remedy
from vfcore.placement.scheduler.results import SchedulerPrediction, Verdict
from vfcore.placement.scheduler.scoring import ScoringConfig

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
    exact packing places them all (``None`` otherwise).
    """

    prediction: SchedulerPrediction
    remedy: Remedy | None

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.prediction.verdict,
            "reason": self.prediction.reason,
            "stranded": list(self.prediction.stranded),
            "stranded_always": list(self.prediction.stranded_always),
            "exhaustive": self.prediction.exhaustive,
            "strand_probability": None
            if self.prediction.strand_probability is None
            else str(self.prediction.strand_probability),
            "config": self.prediction.config.to_dict(),
            "remedy": None if self.remedy is None else self.remedy.to_dict(),
            "verdict_with_remedy": self.verdict_with_remedy,
        }


def predict_for_plan(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    plan: _PlanLike,
    *,
    config: ScoringConfig | None = None,
) -> SchedulerReport:
    """The model's verdict for a plan's pods, plus a remedy when greedy misses an exact packing."""
    cfg = config or ScoringConfig()
    prediction = predict(pods, cluster, config=cfg)
    placement = plan.placement
    exact = plan.verdict == "fits" and all(p.pod in placement for p in pods)
    fix = None
    if prediction.verdict != "lands" and exact:
        fix = remedy(pods, cluster, placement, config=cfg)
    return SchedulerReport(prediction, fix)
