"""Where the cluster departs from our rule: :func:`compare_with_cluster` puts a
:class:`ReplicaDecision` next to an :class:`HpaPrediction` and names the stage
behind every difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vfcore.scaling.hpa import HpaPrediction, fmt_ratio
from vfcore.scaling.rule import ReplicaDecision


@dataclass(frozen=True, slots=True)
class ScalingComparison:
    """Our decision next to what the cluster will set, and every reason they differ."""

    ours: int
    cluster: int
    agree: bool
    differences: tuple[str, ...]
    violates_unknown_rule: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "ours": self.ours,
            "cluster": self.cluster,
            "agree": self.agree,
            "differences": list(self.differences),
            "violates_unknown_rule": self.violates_unknown_rule,
        }


def compare_with_cluster(
    decision: ReplicaDecision, prediction: HpaPrediction, *, current: int
) -> ScalingComparison:
    """Where :func:`predict_hpa` (the cluster) departs from :func:`decide_replicas` (our rule).

    ``ours`` is the decision applied to ``current`` (an unknown decision
    holds). Each difference is attributed to the stage that causes it: KEDA's
    activation or cooldown, the tolerance, the partial-failure rule, the
    stabilisation window, rate limits, min/max, or our capacity cap.

    >>> from vfcore.scaling import Backlog, HpaState, KedaScaler, Trigger, decide_replicas
    >>> from vfcore.scaling import predict_hpa
    >>> d = decide_replicas({"a": Backlog(95, 0)}, target=10, min_replicas=1, max_replicas=20)
    >>> s = KedaScaler((Trigger("a"),), min_replica_count=1, max_replica_count=20)
    >>> p = predict_hpa({"a": Backlog(95, 0)}, scaler=s, state=HpaState(9), now_s=0)
    >>> compare_with_cluster(d, p, current=9).differences[0][:29]
    'tolerance: a asks for 10, but'
    """
    ours = decision.next_replicas(current)
    theirs = prediction.replicas
    out: list[str] = []
    violates = decision.status == "unknown" and theirs < current
    if decision.status == "unknown":
        if theirs < current:
            out.append(
                f"unknown: {', '.join(decision.unknown_parents)} unobserved; we hold {current}, "
                f"the cluster scales down to {theirs} ({prediction.reason})"
            )
        elif theirs > current:
            out.append(
                f"unknown: we hold {current}; the cluster scales up to {theirs} on the healthy "
                "triggers (its partial-failure rule allows scale-up)"
            )
    elif theirs != ours:
        if prediction.actor == "keda":
            out.append(f"KEDA: {prediction.reason} ({prediction.previous} → {theirs})")
        if prediction.reason == "FailedGetExternalMetric":
            out.append(f"metrics failed: the HPA does not rescale ({current} stays)")
        for r in prediction.readings:
            if r.within_tolerance and r.raw is not None and r.raw != r.proposal:
                out.append(
                    f"tolerance: {r.parent} asks for {r.raw}, but its ratio {fmt_ratio(r.ratio)} "
                    f"(lag {r.lag} over {r.threshold} × {r.proposal}) is within 1 ± tolerance, "
                    f"so the HPA keeps {r.proposal}"
                )
        if (
            prediction.stabilized is not None
            and prediction.metric_replicas is not None
            and prediction.stabilized != prediction.metric_replicas
        ):
            out.append(
                f"stabilisation: the HPA proposes {prediction.metric_replicas}, but its window "
                f"holds {prediction.stabilized} (a higher recent recommendation)"
                if prediction.stabilized > prediction.metric_replicas
                else f"stabilisation: the scale-up window holds {prediction.stabilized}"
            )
        if prediction.stabilized is not None and theirs != prediction.stabilized:
            out.append(f"limits: {prediction.reason} turns {prediction.stabilized} into {theirs}")
        if decision.is_capped:
            out.append(
                f"capacity: we cap at {decision.replicas} (placeable); the backlog asks for "
                f"{decision.floor}, and pods beyond {decision.capacity} would stay Pending"
            )
        if not out:
            out.append(f"min/max or thresholds differ: we decide {ours}, the cluster sets {theirs}")
    return ScalingComparison(ours, theirs, ours == theirs, tuple(out), violates)
