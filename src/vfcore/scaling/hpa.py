"""What KEDA and the HPA will do: :func:`predict_hpa`, one evaluation replayed
exactly, and :func:`simulate_hpa` over a series of them.

The model follows KEDA's scale executor and fallback and the HPA controller's
``reconcileAutoscaler``: the tolerance, the stabilisation windows, the rate
policies and the partial-failure rule. Nothing reads a clock: time (``now_s``)
and the controllers' memory (:class:`HpaState`) are arguments.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple

from vfcore.cluster import Unknown as ClusterUnknown
from vfcore.errors import InvalidInputError
from vfcore.scaling.keda import HpaBehavior, KedaScaler, ScalingRules, Trigger
from vfcore.scaling.observations import (
    NOT_OBSERVED,
    Backlog,
    Observation,
    as_observation,
    is_int,
)

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True, order=True)
class Recommendation:
    """One unstabilised recommendation the HPA remembers (for its stabilisation windows)."""

    at_s: float
    replicas: int

    def to_dict(self) -> dict[str, Any]:
        return {"at_s": self.at_s, "replicas": self.replicas}


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """One scale change the HPA remembers (for its rate policies): ``change`` pods at ``at_s``."""

    at_s: float
    change: int
    outdated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"at_s": self.at_s, "change": self.change, "outdated": self.outdated}


@dataclass(frozen=True, slots=True)
class HpaState:
    """What KEDA and the HPA controller know before an evaluation.

    ``replicas`` is the target's ``spec.replicas``; ``status_replicas`` the pods
    that exist (``status.replicas``, default ``replicas``) and ``ready_replicas``
    those Running and Ready (default ``status_replicas``). ``recommendations``
    and the scale events are the controller's memory (empty for a fresh
    controller); ``failures`` counts each trigger's consecutive failures
    (KEDA's ``status.health``); ``last_active_s`` is KEDA's
    ``status.lastActiveTime``.
    """

    replicas: int
    status_replicas: int | None = None
    ready_replicas: int | None = None
    recommendations: tuple[Recommendation, ...] = ()
    scale_up_events: tuple[ScaleEvent, ...] = ()
    scale_down_events: tuple[ScaleEvent, ...] = ()
    failures: tuple[tuple[str, int], ...] = ()
    last_active_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("replicas", "status_replicas", "ready_replicas"):
            value = getattr(self, name)
            if value is not None and (not is_int(value) or value < 0):
                raise InvalidInputError(
                    "invalid-hpa-state",
                    f"{name}={value!r} must be a replica count >= 0",
                    "pass the target's spec.replicas (and status.replicas / ready pods)",
                )
        object.__setattr__(self, "failures", tuple(sorted(dict(self.failures).items())))

    def to_dict(self) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "status_replicas": self.status_replicas,
            "ready_replicas": self.ready_replicas,
            "recommendations": [r.to_dict() for r in self.recommendations],
            "scale_up_events": [e.to_dict() for e in self.scale_up_events],
            "scale_down_events": [e.to_dict() for e in self.scale_down_events],
            "failures": dict(self.failures),
            "last_active_s": self.last_active_s,
        }


@dataclass(frozen=True, slots=True)
class TriggerReading:
    """What one trigger gave the HPA in one evaluation.

    ``source``: ``metric`` (the lag), ``fallback`` (KEDA's synthetic value) or
    ``error`` (no value: the HPA sees a failed metric). ``raw`` is
    ``ceil(lag / threshold)`` with no tolerance (our rule's per-parent ask);
    ``proposal`` is what the HPA takes from it, tolerance applied.
    """

    parent: str
    threshold: int
    source: Literal["metric", "fallback", "error"]
    lag: int | None
    value_milli: int | None
    raw: int | None
    proposal: int | None
    ratio: float | None
    within_tolerance: bool | None
    failures: int

    def to_dict(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "parent": self.parent,
            "threshold": self.threshold,
            "source": self.source,
            "lag": self.lag,
            "value_milli": self.value_milli,
            "raw": self.raw,
            "proposal": self.proposal,
            "ratio": None if ratio is None or not math.isfinite(ratio) else round(ratio, 6),
            "within_tolerance": self.within_tolerance,
            "failures": self.failures,
        }


Actor = Literal["keda", "hpa", "none"]


@dataclass(frozen=True, slots=True)
class HpaPrediction:
    """What KEDA and the HPA set in one evaluation at ``now_s``, stage by stage.

    ``replicas`` is the count the target has afterwards; ``actor`` says who set
    it (``keda`` for 0 ↔ 1 activation, scale to 0 and raising to
    ``minReplicaCount``; ``hpa`` otherwise; ``none`` when nobody acts). Stages
    (``None`` when not reached): ``metric_replicas`` = the max over trigger
    proposals; ``stabilized`` = after the stabilisation window; ``replicas`` =
    after the rate limits and min/max. ``reason`` is the controller's
    condition reason (``ScaleDownStabilized``, ``FailedGetExternalMetric``, …).
    ``state`` is the memory to pass to the next evaluation.
    """

    replicas: int
    previous: int
    actor: Actor
    reason: str
    active: bool
    readings: tuple[TriggerReading, ...]
    metric_replicas: int | None
    stabilized: int | None
    state: HpaState
    steps: tuple[str, ...]
    now_s: float

    @property
    def raw(self) -> int | None:
        """Max over healthy triggers of ``ceil(lag / threshold)`` (no tolerance)."""
        values = [r.raw for r in self.readings if r.raw is not None]
        return max(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "previous": self.previous,
            "actor": self.actor,
            "reason": self.reason,
            "active": self.active,
            "raw": self.raw,
            "metric_replicas": self.metric_replicas,
            "stabilized": self.stabilized,
            "readings": [r.to_dict() for r in self.readings],
            "steps": list(self.steps),
            "now_s": self.now_s,
            "state": self.state.to_dict(),
        }


def _within(ratio: float, down: float, up: float) -> bool:
    """The HPA's ``Tolerances.isWithin``: ``1 - down <= ratio <= 1 + up`` (NaN is never within)."""
    return (1.0 - down) <= ratio <= (1.0 + up)


def _ceil_int32(x: float) -> int:
    if x > _INT32_MAX:
        return _INT32_MAX
    return math.ceil(x)


class _TriggerValue(NamedTuple):
    """What KEDA hands the HPA for one trigger: the lag's value, a fallback value, or an error."""

    trigger: Trigger
    source: str  # "metric", "fallback" or "error"
    lag: int | None
    value_milli: int | None


@dataclass(frozen=True, slots=True)
class _Evaluation:
    """One evaluation in progress: its inputs, what KEDA read, and the steps told so far."""

    state: HpaState
    now_s: float
    values: tuple[_TriggerValue, ...]
    failures: Mapping[str, int]  # each trigger's consecutive failures after this read
    active: bool
    steps: list[str]

    @property
    def current(self) -> int:
        return self.state.replicas

    def prediction(
        self,
        replicas: int,
        actor: Actor,
        reason: str,
        readings: Sequence[TriggerReading],
        metric_replicas: int | None,
        stabilized: int | None,
        memory: tuple[Sequence[Recommendation], Sequence[ScaleEvent], Sequence[ScaleEvent]],
    ) -> HpaPrediction:
        """The answer, with the state the next evaluation starts from (``memory``: the
        controller's recommendations, scale-up and scale-down events)."""
        recommendations, ups, downs = memory
        next_state = HpaState(
            replicas,
            recommendations=tuple(recommendations),
            scale_up_events=tuple(ups),
            scale_down_events=tuple(downs),
            failures=tuple(sorted(self.failures.items())),
            last_active_s=self.now_s if self.active else self.state.last_active_s,
        )
        return HpaPrediction(
            replicas,
            self.current,
            actor,
            reason,
            self.active,
            tuple(readings),
            metric_replicas,
            stabilized,
            next_state,
            tuple(self.steps),
            self.now_s,
        )

    def keda_sets(self, replicas: int, reason: str) -> HpaPrediction:
        """KEDA's executor scales the target itself; the HPA's memory is left as it was."""
        self.steps.append(f"KEDA sets {replicas} replica(s): {reason}")
        readings = [
            _reading(v.trigger, v.source, v.lag, v.value_milli, None, None, self.failures)
            for v in self.values
        ]
        state = self.state
        memory = (state.recommendations, state.scale_up_events, state.scale_down_events)
        return self.prediction(replicas, "keda", reason, readings, None, None, memory)


def _read_triggers(
    observations: Mapping[str, Observation | ClusterUnknown],
    scaler: KedaScaler,
    state: HpaState,
    ready: int,
) -> tuple[tuple[_TriggerValue, ...], dict[str, int], list[str]]:
    """KEDA's side: each trigger's metric, or its fallback value, or an error.

    KEDA tracks a trigger's health (``status.health[*].numberOfFailures``) only
    when the ScaledObject has a fallback (``GetMetricsWithFallback`` in
    ``pkg/fallback/fallback.go``: "Health is only tracked for ScaledObjects with
    a valid fallback configured. For all others we must leave the status
    untouched"): without one, a failure does not count and a success does not
    reset the count — ``failures`` comes back as it was given.
    """
    failures = dict(state.failures)
    out: list[_TriggerValue] = []
    steps: list[str] = []
    fb = scaler.fallback
    for trig in scaler.triggers:
        raw_obs = observations.get(trig.parent)
        obs = None if raw_obs is None else as_observation(trig.parent, raw_obs)
        if isinstance(obs, Backlog):
            if fb is not None:
                failures[trig.parent] = 0
            out.append(_TriggerValue(trig, "metric", obs.lag, obs.lag * 1000))
            continue
        reason = NOT_OBSERVED if obs is None else obs.reason
        if fb is None:  # no fallback: KEDA leaves the failure count untouched
            out.append(_TriggerValue(trig, "error", None, None))
            steps.append(f"{trig.parent}: metric unavailable ({reason}); no fallback")
            continue
        count = failures.get(trig.parent, 0) + 1
        failures[trig.parent] = count
        # The stored KEDA only substitutes AverageValue metrics; the reference's newer
        # version also substitutes Value metrics as target × F / ready pods.
        if count > fb.failure_threshold:
            f = fb.replicas_for(state.replicas)
            target_milli = trig.lag_threshold * 1000
            if trig.metric_type == "AverageValue":
                out.append(_TriggerValue(trig, "fallback", None, target_milli * f))
                steps.append(
                    f"{trig.parent}: failing ({reason}) {count} time(s) > failureThreshold "
                    f"{fb.failure_threshold}: KEDA reports fallback {trig.lag_threshold} × {f}"
                )
                continue
            if ready > 0:
                out.append(_TriggerValue(trig, "fallback", None, (target_milli * f) // ready))
                steps.append(
                    f"{trig.parent}: failing {count} time(s): KEDA reports fallback "
                    f"{trig.lag_threshold} × {f} / {ready} ready pods"
                )
                continue
        out.append(_TriggerValue(trig, "error", None, None))
        steps.append(f"{trig.parent}: metric unavailable ({reason}), failure {count}")
    return tuple(out), failures, steps


def predict_hpa(
    observations: Mapping[str, Observation | ClusterUnknown],
    *,
    scaler: KedaScaler,
    state: HpaState,
    now_s: float,
) -> HpaPrediction:
    """One evaluation of KEDA and the HPA at ``now_s``: the replica count they set, and why.

    The model follows KEDA's scale executor and fallback, and the HPA
    controller's ``reconcileAutoscaler`` (``kubernetes/pkg/controller/podautoscaler``):

    1. **KEDA reads the triggers.** A healthy trigger reports ``lag``; a failing
       one an error, or — after more than ``failureThreshold`` consecutive
       failures with a fallback — ``lagThreshold × F``.
    2. **KEDA's executor (0 ↔ 1).** Active (some healthy ``lag >
       activationLagThreshold``) at 0 replicas: scale to ``max(min, 1)``.
       Inactive with ``minReplicaCount = 0``: scale to 0 once the cooldown has
       passed since the last activity — unless a trigger errors and a fallback
       with non-zero ``replicas`` is set. Below ``minReplicaCount``: raise it.
    3. **The HPA** (only at ≥ 1 replica): per trigger, AverageValue:
       ``ratio = value / (threshold × status.replicas)``, within ``1 ± tolerance``
       keeps ``status.replicas``, else ``ceil(value / threshold)``; Value:
       ``ceil(value / threshold × ready)``. The max over triggers. If every
       trigger failed, or one failed and the max is below the current count,
       nothing changes. Then stabilisation and limits: with no ``behavior``
       (KEDA's default), the highest recommendation of the last 300 s, then
       ``[max(min, 1), min(max, max(2 × current, 4))]``; with a ``behavior``,
       the up/down windows and rate policies.

    >>> scaler = KedaScaler((Trigger("a", 10),), min_replica_count=1, max_replica_count=20)
    >>> predict_hpa({"a": Backlog(95, 0)}, scaler=scaler, state=HpaState(9), now_s=0).replicas
    9
    """
    status = state.replicas if state.status_replicas is None else state.status_replicas
    ready = status if state.ready_replicas is None else state.ready_replicas
    # the stages above, one function each: 1 KEDA reads, 2 KEDA's executor, 3 the HPA
    values, failures, steps = _read_triggers(observations, scaler, state, ready)
    evaluation = _Evaluation(state, now_s, values, failures, _is_active(values), steps)
    keda = _keda_executor(scaler, evaluation)
    if keda is not None:
        return evaluation.keda_sets(*keda)
    return _hpa_controller(scaler, evaluation, status, ready)


def _is_active(values: Sequence[_TriggerValue]) -> bool:
    """KEDA's activation: some trigger's metric (not a fallback) above its activation threshold."""
    return any(
        v.source == "metric" and v.lag is not None and v.lag > v.trigger.activation_lag_threshold
        for v in values
    )


def _keda_executor(scaler: KedaScaler, ev: _Evaluation) -> tuple[int, str] | None:
    """KEDA's scale executor: the count it sets itself and why, or ``None`` to leave it to the HPA.

    Active: from 0 to ``max(minReplicaCount, 1)``, or up to ``minReplicaCount``.
    Inactive: to 0 when ``minReplicaCount`` is 0 and the cooldown has passed since
    the last activity (``lastActive + cooldownPeriod < now``; never active counts as
    passed), up to ``minReplicaCount`` when below it — but never while a trigger
    errors (or is on fallback) and the fallback's ``replicas`` is not 0.

    Worked example: ``minReplicaCount`` 0, cooldown 300 s, last active at 1000, no
    trigger active: at 1200 KEDA does not act (cooling down until 1300); at 1301 it sets 0.
    """
    cur, min_count = ev.current, scaler.min_replica_count
    if ev.active:
        if cur == 0:
            return max(min_count, 1), "activated from 0 (a trigger is active)"
        if cur < min_count:
            return min_count, "below minReplicaCount while active"
        return None
    # A trigger on fallback is still a failing scaler to KEDA's executor.
    is_error = any(v.source != "metric" for v in ev.values)
    fb = scaler.fallback
    last_active_s = ev.state.last_active_s
    if is_error and fb is not None and fb.replicas != 0:
        ev.steps.append("KEDA: no trigger active, one errors, fallback set: KEDA leaves it")
    elif cur > 0 and min_count == 0:
        if last_active_s is None or last_active_s + scaler.cooldown_period_s < ev.now_s:
            return 0, "no trigger active and the cooldown has passed"
        ev.steps.append(
            f"KEDA: inactive, cooling down until {last_active_s} + {scaler.cooldown_period_s} s"
        )
    elif cur < min_count:
        return min_count, "below minReplicaCount"
    return None


def _hpa_controller(scaler: KedaScaler, ev: _Evaluation, status: int, ready: int) -> HpaPrediction:
    """``reconcileAutoscaler``: the HPA's count from the triggers' values, and why.

    In order: each trigger's proposal (:func:`_replicas_for_metric`); a target
    at 0 (scaling disabled) or outside ``[minReplicas, maxReplicas]`` (set to the
    bound); the max over proposals (:func:`_metric_replicas`), unless failed
    metrics hold the count (:func:`_held_by_failed_metrics`); then stabilisation
    and limits (:func:`_normalize_legacy` without a ``behavior``,
    :func:`_normalize_with_behaviors` with one). A change is remembered for
    the rate policies (:func:`_store_event`).
    """
    cur, now_s, behavior = ev.current, ev.now_s, scaler.behavior
    recommendations = list(ev.state.recommendations) or [Recommendation(now_s, cur)]
    ups, downs = list(ev.state.scale_up_events), list(ev.state.scale_down_events)
    tolerances = _tolerances(scaler)
    readings = [_replicas_for_metric(v, cur, status, ready, tolerances, ev) for v in ev.values]

    bounded = _range_bound(cur, scaler.hpa_min_replicas, scaler.max_replica_count, ev.steps)
    if bounded is not None:
        new, who, why = bounded
        ups, downs = _store_event(behavior, ups, downs, cur, new, now_s)
        return ev.prediction(new, who, why, readings, None, None, (recommendations, ups, downs))

    metric_replicas = _metric_replicas(readings)
    if metric_replicas is None:
        ev.steps.append("HPA: every metric failed: no scaling (ScalingActive=False)")
    if metric_replicas is None or _held_by_failed_metrics(readings, metric_replicas, cur, ev.steps):
        memory = (recommendations, ups, downs)
        reason = "FailedGetExternalMetric"
        return ev.prediction(cur, "none", reason, readings, metric_replicas, None, memory)
    ev.steps.append(f"HPA: max over metrics = {metric_replicas}")

    if behavior is None:
        normalized = _normalize_legacy(scaler, recommendations, metric_replicas, ev)
    else:
        normalized = _normalize_with_behaviors(
            scaler, behavior, recommendations, metric_replicas, ev, ups, downs
        )
    final = normalized.replicas
    if final != cur:
        ups, downs = _store_event(behavior, ups, downs, cur, final, now_s)
        ev.steps.append(f"HPA sets {final} replica(s)")
        actor: Actor = "hpa"
    else:
        ev.steps.append(f"HPA keeps {cur} replica(s)")
        actor = "none"
    memory = (normalized.recommendations, ups, downs)
    return ev.prediction(
        final, actor, normalized.reason, readings, metric_replicas, normalized.stabilized, memory
    )


def _tolerances(scaler: KedaScaler) -> tuple[float, float]:
    """``(down, up)``: the HPA's tolerance each way (a ``behavior``'s own, else the scaler's)."""
    if scaler.behavior is None:
        return float(scaler.tolerance), float(scaler.tolerance)
    up_rules, down_rules = scaler.behavior.resolved()
    tol_up = up_rules.tolerance if up_rules.tolerance is not None else scaler.tolerance
    tol_down = down_rules.tolerance if down_rules.tolerance is not None else scaler.tolerance
    return float(tol_down), float(tol_up)


def _replicas_for_metric(
    v: _TriggerValue,
    cur: int,
    status: int,
    ready: int,
    tolerances: tuple[float, float],
    ev: _Evaluation,
) -> TriggerReading:
    """One trigger's proposal, as the HPA's replica calculator computes it:
    ``GetExternalPerPodMetricReplicas`` (AverageValue) or ``GetExternalMetricReplicas`` (Value).

    AverageValue: ``ratio = value / (threshold × status.replicas)``; within
    ``1 ± tolerance`` it keeps ``status.replicas``, else ``ceil(value / threshold)``.
    Value: ``ratio = value / threshold``; within tolerance it keeps the current
    count, else ``ceil(ratio × ready)`` (at 0 replicas, ``ceil(ratio)``).

    Worked example: lag 95 on a threshold of 10 at 9 pods (AverageValue):
    ratio 95 / 90 = 1.056, within 1 ± 0.1: keeps 9 (not ``ceil(9.5)`` = 10).
    """
    trig, src, lag, value = v
    if value is None:
        return _reading(trig, src, lag, None, None, None, ev.failures)
    tol_down, tol_up = tolerances
    target_milli = trig.lag_threshold * 1000
    if trig.metric_type == "AverageValue":
        ratio = _ratio(value, float(target_milli) * float(status))
        within = _within(ratio, tol_down, tol_up)
        proposal = status if within else _ceil_int32(float(value) / float(target_milli))
        per = f"({trig.lag_threshold} × {status})"
    else:
        ratio = float(value) / float(target_milli)
        if cur != 0:
            within = _within(ratio, tol_down, tol_up)
            proposal = cur if within else _ceil_int32(ratio * float(ready))
        else:
            within = False
            proposal = _ceil_int32(ratio)
        per = str(trig.lag_threshold)
    ev.steps.append(
        f"HPA: {trig.parent} {value / 1000:g} / {per} = {fmt_ratio(ratio)}"
        + (f", within 1 ± tolerance: keeps {proposal}" if within else f" → proposes {proposal}")
    )
    return _reading(trig, src, lag, value, proposal, (ratio, within), ev.failures)


def _ratio(value: int, denominator: float) -> float:
    """``value / denominator``; over no pods (0), infinite for a positive value, NaN for 0."""
    if denominator:
        return float(value) / denominator
    return math.inf if value > 0 else math.nan


def _range_bound(
    cur: int, hpa_min: int, hpa_max: int, steps: list[str]
) -> tuple[int, Actor, str] | None:
    """Before any metric: a target at 0 is left alone (``ScalingDisabled``); one outside
    ``[minReplicas, maxReplicas]`` is set to the bound. ``None``: within the range."""
    if cur == 0:
        steps.append("HPA: scaling is disabled since the replica count of the target is zero")
        return 0, "none", "ScalingDisabled"
    if cur > hpa_max:
        steps.append(f"HPA: current {cur} above maxReplicas {hpa_max}: set to {hpa_max}")
        return hpa_max, "hpa", "TooManyReplicas"
    if cur < hpa_min:
        steps.append(f"HPA: current {cur} below minReplicas {hpa_min}: set to {hpa_min}")
        return hpa_min, "hpa", "TooFewReplicas"
    return None


def _metric_replicas(readings: Sequence[TriggerReading]) -> int | None:
    """The largest proposal of the triggers that gave one (``None``: every metric failed).

    As ``computeReplicasForMetrics`` takes it: the first proposal, then any larger one.
    """
    valid = [r.proposal for r in readings if r.proposal is not None]
    if not valid:
        return None
    metric_replicas = 0
    for p in valid:
        if metric_replicas == 0 or p > metric_replicas:
            metric_replicas = p
    return metric_replicas


def _held_by_failed_metrics(
    readings: Sequence[TriggerReading], metric_replicas: int, cur: int, steps: list[str]
) -> bool:
    """The partial-failure rule: with a failed metric, the others may scale up, never down.

    Worked example: trigger ``a`` proposes 3, trigger ``b`` failed, at 5 replicas:
    the HPA keeps 5 (``FailedGetExternalMetric``); had ``a`` proposed 7, it would go on
    with 7 to stabilisation and limits.
    """
    invalid = sum(1 for r in readings if r.proposal is None)
    if invalid > 0 and metric_replicas < cur:
        steps.append(
            f"HPA: {invalid} metric(s) failed and the others propose {metric_replicas} < "
            f"{cur}: scale-down skipped"
        )
        return True
    return False


class _Normalized(NamedTuple):
    """The count after stabilisation and limits, why, and the recommendations to remember."""

    stabilized: int
    replicas: int
    reason: str
    recommendations: list[Recommendation]


def _normalize_legacy(
    scaler: KedaScaler,
    recommendations: list[Recommendation],
    desired: int,
    ev: _Evaluation,
) -> _Normalized:
    """``normalizeDesiredReplicas`` (no ``behavior``): stabilise downwards, then limit.

    The highest recommendation of the last ``downscale_stabilization_s`` (300 s)
    holds; then ``[max(minReplicas, 1), min(maxReplicas, max(2 × current, 4))]``.
    Worked example: at 3 replicas the metrics ask 20 and ``maxReplicas`` is 10:
    the limit is ``max(2 × 3, 4)`` = 6 (``ScaleUpLimit``).
    """
    cur, hpa_min, hpa_max = ev.current, scaler.hpa_min_replicas, scaler.max_replica_count
    window_s = scaler.downscale_stabilization_s
    stabilized, recommendations = _stabilize_legacy(recommendations, desired, ev.now_s, window_s)
    limit_up = max(2 * cur, 4)
    allowed_max = min(hpa_max, limit_up)
    final = min(max(stabilized, hpa_min), allowed_max)
    reason = "DesiredWithinRange"
    if stabilized != desired:
        reason = "ScaleDownStabilized"
        ev.steps.append(
            f"HPA: the highest recommendation of the last {window_s} s "
            f"is {stabilized}: holds {stabilized}"
        )
    if final != stabilized:  # convertDesiredReplicasWithRules
        if stabilized < hpa_min:
            reason = "TooFewReplicas"
        elif limit_up < hpa_max:
            reason = "ScaleUpLimit"
        else:
            reason = "TooManyReplicas"
        ev.steps.append(f"HPA: limited to {final} (min {hpa_min}, max {allowed_max}: {reason})")
    return _Normalized(stabilized, final, reason, recommendations)


def _normalize_with_behaviors(
    scaler: KedaScaler,
    behavior: HpaBehavior,
    recommendations: list[Recommendation],
    desired: int,
    ev: _Evaluation,
    ups: Sequence[ScaleEvent],
    downs: Sequence[ScaleEvent],
) -> _Normalized:
    """``normalizeDesiredReplicasWithBehaviors``: the up/down stabilisation windows
    (:func:`_stabilize_behaviors`), then the rate policies and min/max (:func:`_rate_limited`).

    The down window defaults to ``downscale_stabilization_s``, the up window to 0.
    """
    cur = ev.current
    up_rules, down_rules = behavior.resolved()
    down_window = (
        down_rules.stabilization_window_s
        if down_rules.stabilization_window_s is not None
        else scaler.downscale_stabilization_s
    )
    up_window = up_rules.stabilization_window_s or 0
    stabilized, recommendations = _stabilize_behaviors(
        recommendations, desired, cur, ev.now_s, up_window, down_window
    )
    if stabilized != desired:
        reason = "ScaleUpStabilized" if desired >= cur else "ScaleDownStabilized"
        ev.steps.append(f"HPA: stabilisation windows hold {stabilized}")
    else:
        reason = "DesiredWithinRange"
    final, limit_reason = _rate_limited(
        stabilized,
        cur,
        scaler.hpa_min_replicas,
        scaler.max_replica_count,
        up_rules,
        down_rules,
        ups,
        downs,
        ev.now_s,
    )
    if final != stabilized:
        reason = limit_reason
        ev.steps.append(f"HPA: rate/limits allow {final} ({limit_reason})")
    return _Normalized(stabilized, final, reason, recommendations)


def fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    if not math.isfinite(ratio):
        return str(ratio)
    return f"{ratio:.3f}"


def _reading(
    trig: Trigger,
    src: str,
    lag: int | None,
    value: int | None,
    proposal: int | None,
    ratio_within: tuple[float, bool] | None,
    failures: Mapping[str, int],
) -> TriggerReading:
    raw = None if lag is None else -(-lag // trig.lag_threshold)
    ratio, within = (None, None) if ratio_within is None else ratio_within
    return TriggerReading(
        trig.parent,
        trig.lag_threshold,
        src,  # type: ignore[arg-type]
        lag,
        value,
        raw,
        proposal,
        ratio,
        within,
        failures.get(trig.parent, 0),
    )


def _stabilize_legacy(
    recs: list[Recommendation], desired: int, now_s: float, window_s: int
) -> tuple[int, list[Recommendation]]:
    """``stabilizeRecommendation``: the max of recommendations not older than the window."""
    cutoff = now_s - window_s
    best = desired
    old_index = -1
    for i, rec in enumerate(recs):
        if rec.at_s < cutoff:
            old_index = i
        elif rec.replicas > best:
            best = rec.replicas
    out = list(recs)
    if old_index >= 0:
        out[old_index] = Recommendation(now_s, desired)
    else:
        out.append(Recommendation(now_s, desired))
    return best, out


def _stabilize_behaviors(
    recs: list[Recommendation],
    desired: int,
    current: int,
    now_s: float,
    up_window_s: int,
    down_window_s: int,
) -> tuple[int, list[Recommendation]]:
    """``stabilizeRecommendationWithBehaviors``: min over the up window, max over the down one."""
    up_cutoff = now_s - up_window_s
    down_cutoff = now_s - down_window_s
    up_rec = down_rec = desired
    old_index = -1
    for i, rec in enumerate(recs):
        if rec.at_s > up_cutoff:
            up_rec = min(rec.replicas, up_rec)
        if rec.at_s > down_cutoff:
            down_rec = max(rec.replicas, down_rec)
        if rec.at_s < up_cutoff and rec.at_s < down_cutoff:
            old_index = i
    recommendation = current
    if recommendation < up_rec:
        recommendation = up_rec
    if recommendation > down_rec:
        recommendation = down_rec
    out = list(recs)
    if old_index >= 0:
        out[old_index] = Recommendation(now_s, desired)
    else:
        out.append(Recommendation(now_s, desired))
    return recommendation, out


def _changed_in_period(events: Sequence[ScaleEvent], period_s: int, now_s: float) -> int:
    cutoff = now_s - period_s
    return sum(e.change for e in events if e.at_s > cutoff)


def _rate_limit(
    current: int,
    ups: Sequence[ScaleEvent],
    downs: Sequence[ScaleEvent],
    rules: ScalingRules,
    now_s: float,
    *,
    up: bool,
) -> int:
    """The bound the rate policies put on one sync, upwards or downwards.

    As the HPA computes it: each policy proposes a limit from the replica count
    at the start of its period; ``selectPolicy: Min`` keeps the smallest change
    (the lowest limit upwards, the highest downwards), ``Max`` the largest.
    """
    if rules.select_policy == "Disabled":
        return current
    smallest_change = rules.select_policy == "Min"
    choose = min if smallest_change == up else max
    result: int | None = None
    for policy in rules.policies or ():
        start = (
            current
            - _changed_in_period(ups, policy.period_s, now_s)
            + _changed_in_period(downs, policy.period_s, now_s)
        )
        if policy.type == "Pods":
            proposed = start + policy.value if up else start - policy.value
        elif up:
            proposed = math.ceil(float(start) * (1 + float(policy.value) / 100))
        else:
            proposed = int(float(start) * (1 - float(policy.value) / 100))
        result = proposed if result is None else choose(result, proposed)
    if result is None:  # no policy: no limit in the direction that is chosen
        return _INT32_MAX if choose is min else -_INT32_MAX - 1
    return result


def _rate_limited(
    desired: int,
    current: int,
    hpa_min: int,
    hpa_max: int,
    up_rules: ScalingRules,
    down_rules: ScalingRules,
    ups: Sequence[ScaleEvent],
    downs: Sequence[ScaleEvent],
    now_s: float,
) -> tuple[int, str]:
    """``convertDesiredReplicasWithBehaviorRate``."""
    if desired > current:
        limit = _rate_limit(current, ups, downs, up_rules, now_s, up=True)
        limit = max(limit, current)
        if hpa_max > limit:
            allowed, reason = limit, "ScaleUpLimit"
        else:
            allowed, reason = hpa_max, "TooManyReplicas"
        if desired > allowed:
            return allowed, reason
    elif desired < current:
        limit = _rate_limit(current, ups, downs, down_rules, now_s, up=False)
        limit = min(limit, current)
        if hpa_min < limit:
            allowed, reason = limit, "ScaleDownLimit"
        else:
            allowed, reason = hpa_min, "TooFewReplicas"
        if desired < allowed:
            return allowed, reason
    return desired, "DesiredWithinRange"


def _store_event(
    behavior: HpaBehavior | None,
    ups: list[ScaleEvent],
    downs: list[ScaleEvent],
    previous: int,
    new: int,
    now_s: float,
) -> tuple[list[ScaleEvent], list[ScaleEvent]]:
    """``storeScaleEvent``: only with a behavior; reuse the last outdated slot."""
    if behavior is None or new == previous:
        return ups, downs
    up_rules, down_rules = behavior.resolved()
    if new > previous:
        events, rules, change = list(ups), up_rules, new - previous
    else:
        events, rules, change = list(downs), down_rules, previous - new
    longest = max((p.period_s for p in rules.policies or ()), default=0)
    cutoff = now_s - longest
    events = [
        replace(e, outdated=True) if e.at_s < cutoff and not e.outdated else e for e in events
    ]
    old_index = -1
    for i, e in enumerate(events):
        if e.outdated:
            old_index = i
    event = ScaleEvent(now_s, change)
    if old_index >= 0:
        events[old_index] = event
    else:
        events.append(event)
    return (events, list(downs)) if new > previous else (list(ups), events)


def simulate_hpa(
    samples: Iterable[tuple[float, Mapping[str, Observation | ClusterUnknown]]],
    *,
    scaler: KedaScaler,
    state: HpaState,
) -> tuple[HpaPrediction, ...]:
    """:func:`predict_hpa` over a series of ``(now_s, observations)``, each from the last state.

    Pods are assumed to exist and be ready as soon as they are asked for
    (``status_replicas = ready_replicas = replicas`` after the first step).

    >>> s = KedaScaler((Trigger("a"),), min_replica_count=1, max_replica_count=20)
    >>> steps = simulate_hpa([(t, {"a": Backlog(80, 0)}) for t in (0, 15, 300, 315)],
    ...                      scaler=s, state=HpaState(10))
    >>> [p.replicas for p in steps]
    [10, 10, 10, 8]
    """
    out: list[HpaPrediction] = []
    current = state
    for now_s, observations in samples:
        prediction = predict_hpa(observations, scaler=scaler, state=current, now_s=now_s)
        out.append(prediction)
        current = prediction.state
    return tuple(out)
