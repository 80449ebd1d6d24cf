"""Replica decisions from observed backlogs, and an exact model of what KEDA and the HPA will do.

**The rule** (:func:`decide_replicas`). A processor's replicas are competing
consumers of its parents' streams. For each parent, *lag* = ``pending +
ack_pending`` (what KEDA's nats-jetstream scaler measures:
``num_pending + num_ack_pending`` of the node's consumer), and the parent asks
for ``ceil(lag / target)`` replicas, ``target`` being the messages one replica
may have waiting (KEDA's ``lagThreshold``, default 10). The decision is the
largest ask over the parents, clamped to ``[min_replicas, max_replicas]``.

Worked example: three parents with lags 15, 42 and 3 at ``target=10`` ask for
2, 5 and 1 replicas; the decision is 5 (inside ``[1, 10]``). A lag of exactly
10 asks for 1 replica; 11 asks for 2; 0 asks for none, so an idle node holds
``min_replicas``.

**Unknown is its own value.** A parent observed as :class:`Unobserved` (its
broker could not be read), or one that is required but absent, makes the
decision ``unknown`` with ``replicas=None``. The known parents' numbers stay
in the answer, and so does their clamped maximum as ``floor``: the true
decision is at least that (an unknown parent can only add demand), so an
up-only policy may scale to it, and nothing may scale below the current count
(:meth:`ReplicaDecision.next_replicas`).

**Diagnosis.** ``idle`` (every lag 0), ``backlog``, ``starved`` (a join whose
parents are unbalanced: some have no message while others hold at least a
replica's worth — the waiting halves need counterparts that are not coming,
and no replica count repairs that; a join policy with a timeout or quorum
does), ``unknown``, and ``capacity-capped`` (a GPU node wants more replicas
than the exact packing can place on the cluster with the rest of the flow in
place; see :func:`capacity_cap`).

**What the cluster will do** (:func:`predict_hpa`). The ScaledObject we render
has one nats-jetstream trigger per parent, and KEDA hands each to the HPA as an
External metric with ``AverageValue = lagThreshold``. The HPA is *not* our
rule: a proposal within the 0.1 tolerance keeps the current count (lag 95 at
threshold 10 and 9 replicas: 95 / 90 = 1.056 → stays 9), scale-downs wait for
the highest recommendation of the last 300 s, scale-ups are rate limited, a
failing trigger allows scale-up but no scale-down, KEDA's fallback feeds a
synthetic metric worth ``threshold × F`` (which goes through the tolerance:
F = 10 at 11 replicas → 10/11 = 0.909 → stays 11), and KEDA alone moves
between 0 and 1 replica. :func:`predict_hpa` replays that logic exactly, one
evaluation at a time, with time and the controllers' memory as arguments;
:func:`compare_with_cluster` says where it departs from :func:`decide_replicas`
and why; :func:`fallback_for_unknown` gives the fallback settings under which
the cluster honours our unknown rule (hold, never scale down).

Nothing here reads a clock: every time is an argument in seconds (``now_s``).

**The modules.** :mod:`~vfcore.scaling.observations` (what was observed, and
the ``--observations`` document), :mod:`~vfcore.scaling.rule` (our rule),
:mod:`~vfcore.scaling.capacity` (the capacity cap), :mod:`~vfcore.scaling.keda`
(what we render for KEDA and the HPA), :mod:`~vfcore.scaling.hpa` (what they
do with it), :mod:`~vfcore.scaling.compare` (where that departs from our
rule) and :mod:`~vfcore.scaling.flow_scaling` (a whole flow: ``vf scale``).
Every public name is importable from ``vfcore.scaling``.
"""

from vfcore.scaling.capacity import CapacityCap, capacity_cap
from vfcore.scaling.compare import ScalingComparison, compare_with_cluster
from vfcore.scaling.flow_scaling import FlowScaling, NodeScaling, decide_flow
from vfcore.scaling.hpa import (
    HpaPrediction,
    HpaState,
    Recommendation,
    ScaleEvent,
    TriggerReading,
    predict_hpa,
    simulate_hpa,
)
from vfcore.scaling.keda import (
    Fallback,
    HpaBehavior,
    KedaScaler,
    ScalingPolicy,
    ScalingRules,
    Trigger,
    fallback_for_unknown,
)
from vfcore.scaling.observations import (
    Backlog,
    NodeObservation,
    Observation,
    Unobserved,
    observations_from_dict,
)
from vfcore.scaling.rule import (
    DEFAULT_LAG_THRESHOLD,
    DEFAULT_MAX_REPLICAS,
    ParentLoad,
    ReplicaDecision,
    check_scaling_rule,
    decide_replicas,
)

__all__ = [
    "DEFAULT_LAG_THRESHOLD",
    "DEFAULT_MAX_REPLICAS",
    "Backlog",
    "CapacityCap",
    "Fallback",
    "FlowScaling",
    "HpaBehavior",
    "HpaPrediction",
    "HpaState",
    "KedaScaler",
    "NodeObservation",
    "NodeScaling",
    "Observation",
    "ParentLoad",
    "Recommendation",
    "ReplicaDecision",
    "ScaleEvent",
    "ScalingComparison",
    "ScalingPolicy",
    "ScalingRules",
    "Trigger",
    "TriggerReading",
    "Unobserved",
    "capacity_cap",
    "check_scaling_rule",
    "compare_with_cluster",
    "decide_flow",
    "decide_replicas",
    "fallback_for_unknown",
    "observations_from_dict",
    "predict_hpa",
    "simulate_hpa",
]
