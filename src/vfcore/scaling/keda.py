"""What we render for KEDA and the HPA: :class:`KedaScaler` (a ScaledObject's
triggers, replica counts, fallback and HPA behavior), and the settings under
which the cluster honours our unknown rule (:func:`fallback_for_unknown`).

The defaults are KEDA's and the HPA controller's; :mod:`vfcore.scaling.hpa`
replays what the cluster does with them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.errors import InvalidInputError
from vfcore.scaling.observations import is_int
from vfcore.scaling.rule import DEFAULT_LAG_THRESHOLD, DEFAULT_MAX_REPLICAS, check_scaling_rule

#: The HPA controller's ``--horizontal-pod-autoscaler-tolerance`` default.
DEFAULT_TOLERANCE = 0.1
#: The HPA controller's ``--horizontal-pod-autoscaler-downscale-stabilization`` default.
DEFAULT_DOWNSCALE_STABILIZATION_S = 300
#: KEDA's ``cooldownPeriod`` default (it only governs scaling to 0).
DEFAULT_COOLDOWN_S = 300
#: KEDA's ``maxReplicaCount`` default.
KEDA_DEFAULT_MAX = 100

MetricType = Literal["AverageValue", "Value"]
FallbackBehavior = Literal[
    "static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"
]
FALLBACK_BEHAVIORS: tuple[str, ...] = (
    "static",
    "currentReplicas",
    "currentReplicasIfHigher",
    "currentReplicasIfLower",
)
SelectPolicy = Literal["Max", "Min", "Disabled"]
PolicyType = Literal["Pods", "Percent"]


@dataclass(frozen=True, slots=True)
class Trigger:
    """One nats-jetstream trigger: the consumer of one parent's stream.

    The metric is ``lag = num_pending + num_ack_pending``; the trigger is
    *active* when ``lag > activation_lag_threshold``. ``metric_type``
    ``AverageValue`` (KEDA's default) makes the HPA propose
    ``ceil(lag / lag_threshold)``; ``Value`` makes it scale the ready pods by
    ``lag / lag_threshold``.
    """

    parent: str
    lag_threshold: int = DEFAULT_LAG_THRESHOLD
    activation_lag_threshold: int = 0
    metric_type: MetricType = "AverageValue"

    def __post_init__(self) -> None:
        if not is_int(self.lag_threshold) or self.lag_threshold < 1:
            raise InvalidInputError(
                "invalid-trigger",
                f"trigger {self.parent!r}: lagThreshold={self.lag_threshold!r} must be an int >= 1",
                "use the messages one replica may have waiting, e.g. 10",
            )
        if not is_int(self.activation_lag_threshold) or self.activation_lag_threshold < 0:
            raise InvalidInputError(
                "invalid-trigger",
                f"trigger {self.parent!r}: activationLagThreshold="
                f"{self.activation_lag_threshold!r} must be an int >= 0",
                "use 0 (any message activates the scaler from 0 replicas)",
            )
        if self.metric_type not in ("AverageValue", "Value"):
            raise InvalidInputError(
                "invalid-trigger",
                f"trigger {self.parent!r}: metricType={self.metric_type!r} is not supported",
                "use AverageValue (KEDA's default) or Value",
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "parent": self.parent,
            "lagThreshold": self.lag_threshold,
            "activationLagThreshold": self.activation_lag_threshold,
            "metricType": self.metric_type,
        }


@dataclass(frozen=True, slots=True)
class Fallback:
    """KEDA's ``spec.fallback``: a synthetic metric once a trigger fails too often.

    After more than ``failure_threshold`` consecutive failures of a trigger,
    KEDA reports ``lagThreshold × F`` for it (AverageValue), with F from
    ``behavior``: ``static`` = ``replicas``; ``currentReplicas`` = the current
    count; ``currentReplicasIfHigher`` / ``…IfLower`` = the max / min of both.
    ``to_dict()`` is the CRD's shape.
    """

    failure_threshold: int
    replicas: int
    behavior: FallbackBehavior = "static"

    def __post_init__(self) -> None:
        for name in ("failure_threshold", "replicas"):
            value = getattr(self, name)
            if not is_int(value) or value < 0:
                raise InvalidInputError(
                    "invalid-fallback",
                    f"fallback.{name}={value!r} must be an int >= 0",
                    "e.g. Fallback(failure_threshold=3, replicas=1, behavior='currentReplicas')",
                )
        if self.behavior not in FALLBACK_BEHAVIORS:
            raise InvalidInputError(
                "invalid-fallback",
                f"fallback.behavior={self.behavior!r} is not a KEDA fallback behavior",
                f"use one of {', '.join(FALLBACK_BEHAVIORS)}",
            )

    def replicas_for(self, current: int) -> int:
        """F for a target running ``current`` replicas."""
        if self.behavior == "currentReplicas":
            return current
        if self.behavior == "currentReplicasIfHigher":
            return max(current, self.replicas)
        if self.behavior == "currentReplicasIfLower":
            return min(current, self.replicas)
        return self.replicas

    def to_dict(self) -> dict[str, Any]:
        return {
            "failureThreshold": self.failure_threshold,
            "replicas": self.replicas,
            "behavior": self.behavior,
        }


def fallback_for_unknown(*, min_replicas: int = 1, failure_threshold: int = 3) -> Fallback:
    """The fallback under which KEDA holds the current count while a parent is unobservable.

    ``behavior: currentReplicas`` makes the failing trigger report
    ``lagThreshold × current``, a ratio of exactly 1 to the current count, so
    the HPA proposes no change from it (healthy triggers may still raise the
    count: the per-metric max makes the held count a floor). Before
    ``failure_threshold`` failures the error reaches the HPA, whose partial
    failure rule also forbids a scale-down. ``replicas`` is never used by this
    behavior, but KEDA's executor only refrains from scaling an erroring
    target to 0 when it is non-zero, so it is set to ``min_replicas`` (≥ 1).

    >>> fallback_for_unknown(min_replicas=2).to_dict()
    {'failureThreshold': 3, 'replicas': 2, 'behavior': 'currentReplicas'}
    """
    if not is_int(min_replicas) or min_replicas < 1:
        raise InvalidInputError(
            "invalid-fallback",
            f"min_replicas={min_replicas!r} must be an int >= 1",
            "pass the node's nb_tasks",
        )
    return Fallback(failure_threshold, max(min_replicas, 1), "currentReplicas")


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """One HPA rate policy: change by ``value`` pods (or percent) per ``period_s`` seconds."""

    type: PolicyType
    value: int
    period_s: int

    def __post_init__(self) -> None:
        if self.type not in ("Pods", "Percent"):
            raise InvalidInputError(
                "invalid-hpa-behavior",
                f"policy type {self.type!r} is neither Pods nor Percent",
                "use ScalingPolicy('Pods', 4, 15) or ScalingPolicy('Percent', 100, 15)",
            )
        if not is_int(self.value) or self.value < 1:
            raise InvalidInputError(
                "invalid-hpa-behavior",
                f"policy value={self.value!r} must be an int >= 1",
                "use a positive count of pods or percent",
            )
        if not is_int(self.period_s) or not 1 <= self.period_s <= 1800:
            raise InvalidInputError(
                "invalid-hpa-behavior",
                f"policy periodSeconds={self.period_s!r} must be an int in 1..1800",
                "use e.g. 15 (the default policies' period)",
            )

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "value": self.value, "periodSeconds": self.period_s}


@dataclass(frozen=True, slots=True)
class ScalingRules:
    """``behavior.scaleUp`` or ``behavior.scaleDown``; ``None`` fields take the HPA's defaults."""

    stabilization_window_s: int | None = None
    select_policy: SelectPolicy | None = None
    policies: tuple[ScalingPolicy, ...] | None = None
    tolerance: float | None = None

    def __post_init__(self) -> None:
        w = self.stabilization_window_s
        if w is not None and (not is_int(w) or not 0 <= w <= 3600):
            raise InvalidInputError(
                "invalid-hpa-behavior",
                f"stabilizationWindowSeconds={w!r} must be an int in 0..3600",
                "use e.g. 0 for scale-up and 300 for scale-down",
            )
        if self.select_policy not in (None, "Max", "Min", "Disabled"):
            raise InvalidInputError(
                "invalid-hpa-behavior",
                f"selectPolicy={self.select_policy!r} is not Max, Min or Disabled",
                "use Max (the default)",
            )
        if self.policies is not None:
            object.__setattr__(self, "policies", tuple(self.policies))
        t = self.tolerance
        if t is not None and (isinstance(t, bool) or not isinstance(t, int | float) or t < 0):
            raise InvalidInputError(
                "invalid-hpa-behavior",
                f"tolerance={t!r} must be a number >= 0",
                "use e.g. 0.1 (10 %)",
            )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.stabilization_window_s is not None:
            out["stabilizationWindowSeconds"] = self.stabilization_window_s
        if self.select_policy is not None:
            out["selectPolicy"] = self.select_policy
        if self.policies is not None:
            out["policies"] = [p.to_dict() for p in self.policies]
        if self.tolerance is not None:
            out["tolerance"] = str(self.tolerance)
        return out


_DEFAULT_UP = ScalingRules(
    stabilization_window_s=0,
    select_policy="Max",
    policies=(ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)),
)
_DEFAULT_DOWN = ScalingRules(
    stabilization_window_s=None,  # the controller's --horizontal-pod-autoscaler-downscale-stabilization
    select_policy="Max",
    policies=(ScalingPolicy("Percent", 100, 15),),
)


def _filled(rules: ScalingRules | None, default: ScalingRules) -> ScalingRules:
    """The API server's defaulting (``copyHPAScalingRules``): set fields win, others default."""
    if rules is None:
        return default
    return ScalingRules(
        stabilization_window_s=rules.stabilization_window_s
        if rules.stabilization_window_s is not None
        else default.stabilization_window_s,
        select_policy=rules.select_policy or default.select_policy,
        policies=rules.policies if rules.policies is not None else default.policies,
        tolerance=rules.tolerance if rules.tolerance is not None else default.tolerance,
    )


@dataclass(frozen=True, slots=True)
class HpaBehavior:
    """``advanced.horizontalPodAutoscalerConfig.behavior``; unset parts take the HPA defaults.

    Defaults: scale-up window 0 s, ``max(4 pods, 100 %)`` per 15 s; scale-down
    window = the controller's 300 s, 100 % per 15 s. (With *no* behavior at
    all — what KEDA renders unless told — the HPA uses its older rules
    instead: see :func:`predict_hpa`.)
    """

    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None

    def resolved(self) -> tuple[ScalingRules, ScalingRules]:
        return _filled(self.scale_up, _DEFAULT_UP), _filled(self.scale_down, _DEFAULT_DOWN)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.scale_up is not None:
            out["scaleUp"] = self.scale_up.to_dict()
        if self.scale_down is not None:
            out["scaleDown"] = self.scale_down.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class KedaScaler:
    """The parts of a ScaledObject, and of the HPA controller's flags, that decide replicas.

    ``min_replica_count``/``max_replica_count`` are KEDA's (the generated HPA
    gets ``max(min, 1)`` and ``max``); ``tolerance`` and
    ``downscale_stabilization_s`` are the controller's flags (0.1 and 300 s).
    ``behavior=None`` is what KEDA renders by default (no HPA behavior).
    """

    triggers: tuple[Trigger, ...]
    min_replica_count: int = 0
    max_replica_count: int = KEDA_DEFAULT_MAX
    cooldown_period_s: int = DEFAULT_COOLDOWN_S
    fallback: Fallback | None = None
    behavior: HpaBehavior | None = None
    tolerance: float = DEFAULT_TOLERANCE
    downscale_stabilization_s: int = DEFAULT_DOWNSCALE_STABILIZATION_S

    def __post_init__(self) -> None:
        triggers = tuple(sorted(self.triggers, key=lambda t: t.parent))
        object.__setattr__(self, "triggers", triggers)
        problems: list[str] = []
        if not triggers:
            problems.append("a ScaledObject needs at least one trigger")
        if len({t.parent for t in triggers}) != len(triggers):
            problems.append("two triggers watch the same parent")
        lo, hi = self.min_replica_count, self.max_replica_count
        if not is_int(lo) or lo < 0:
            problems.append(f"minReplicaCount={lo!r} must be an int >= 0")
        if not is_int(hi) or hi < 1:
            problems.append(f"maxReplicaCount={hi!r} must be an int >= 1")
        elif is_int(lo) and lo > hi:
            problems.append(f"minReplicaCount={lo} exceeds maxReplicaCount={hi}")
        if not is_int(self.cooldown_period_s) or self.cooldown_period_s < 0:
            problems.append(f"cooldownPeriod={self.cooldown_period_s!r} must be an int >= 0")
        t = self.tolerance
        if isinstance(t, bool) or not isinstance(t, int | float) or t < 0:
            problems.append(f"tolerance={t!r} must be a number >= 0")
        if problems:
            raise InvalidInputError(
                "invalid-scaled-object",
                "; ".join(problems),
                "one trigger per parent, 0 <= minReplicaCount <= maxReplicaCount, "
                "maxReplicaCount >= 1",
            )

    @property
    def hpa_min_replicas(self) -> int:
        """The generated HPA's ``minReplicas``: ``max(minReplicaCount, 1)`` (KEDA owns 0 ↔ 1)."""
        return max(self.min_replica_count, 1)

    @classmethod
    def for_parents(
        cls,
        parents: Iterable[str],
        *,
        target: int = DEFAULT_LAG_THRESHOLD,
        min_replicas: int = 1,
        max_replicas: int = DEFAULT_MAX_REPLICAS,
        fallback: Fallback | Literal["hold"] | None = "hold",
        behavior: HpaBehavior | None = None,
    ) -> KedaScaler:
        """What we render for a node: one trigger per parent, min = nb_tasks, hold on unknown."""
        check_scaling_rule(target, min_replicas, max_replicas)
        chosen = fallback_for_unknown(min_replicas=min_replicas) if fallback == "hold" else fallback
        return cls(
            triggers=tuple(Trigger(p, target) for p in parents),
            min_replica_count=min_replicas,
            max_replica_count=max_replicas,
            fallback=chosen if isinstance(chosen, Fallback) else None,
            behavior=behavior,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "triggers": [t.to_dict() for t in self.triggers],
            "minReplicaCount": self.min_replica_count,
            "maxReplicaCount": self.max_replica_count,
            "cooldownPeriod": self.cooldown_period_s,
            "fallback": None if self.fallback is None else self.fallback.to_dict(),
            "behavior": None if self.behavior is None else self.behavior.to_dict(),
            "tolerance": self.tolerance,
            "downscale_stabilization_s": self.downscale_stabilization_s,
        }
