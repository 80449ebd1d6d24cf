"""A whole flow's scaling, the ``vf scale`` answer: :func:`decide_flow` decides
every processor from an observations document, with its eligibility, the
capacity cap and, optionally, the cluster's next evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vfcore.errors import InvalidInputError
from vfcore.flow.gpu_mode import GpuMode, parse_gpu_mode
from vfcore.flow.join_policy import JoinPolicy
from vfcore.flow.spec import REALTIME, to_spec
from vfcore.flow.validate import require_valid
from vfcore.placement.demand import AutoscalingOptions, Reason, autoscaling_rejections
from vfcore.scaling.capacity import capacity_cap
from vfcore.scaling.compare import ScalingComparison, compare_with_cluster
from vfcore.scaling.hpa import HpaPrediction, HpaState, predict_hpa
from vfcore.scaling.keda import KedaScaler
from vfcore.scaling.observations import NodeObservation, observations_from_dict
from vfcore.scaling.rule import (
    DEFAULT_LAG_THRESHOLD,
    ReplicaDecision,
    check_scaling_rule,
    decide_replicas,
)

if TYPE_CHECKING:
    from vfcore.cluster import ClusterSnapshot
    from vfcore.flow.authoring import Flow
    from vfcore.flow.spec import FlowSpec
    from vfcore.placement.packing import SolverConfig


@dataclass(frozen=True, slots=True)
class NodeScaling:
    """One processor in ``vf scale``: eligibility, decision, and (optionally) the cluster's."""

    node: str
    eligible: bool
    reasons: tuple[Reason, ...]
    current: int | None
    decision: ReplicaDecision
    scaler: KedaScaler | None = None
    prediction: HpaPrediction | None = None
    comparison: ScalingComparison | None = None

    def to_dict(self) -> dict[str, Any]:
        out = self.decision.to_dict()
        out.update(
            {
                "eligible": self.eligible,
                "reasons": [r.message for r in self.reasons],
                "reason_codes": [r.code for r in self.reasons],
                "current": self.current,
            }
        )
        if self.prediction is not None:
            hpa = self.prediction.to_dict()
            hpa["scaler"] = None if self.scaler is None else self.scaler.to_dict()
            hpa["comparison"] = None if self.comparison is None else self.comparison.to_dict()
            out["hpa"] = hpa
        return out


@dataclass(frozen=True, slots=True)
class FlowScaling:
    """Every processor's decision for one set of observations (``vf scale --json``)."""

    flow: str
    flow_type: str
    target: int
    nodes: tuple[NodeScaling, ...]
    notes: tuple[str, ...] = ()

    def node(self, name: str) -> NodeScaling:
        for n in self.nodes:
            if n.node == name:
                return n
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": {"name": self.flow, "flow_type": self.flow_type},
            "target": self.target,
            "decisions": {n.node: n.to_dict() for n in self.nodes},
            "notes": list(self.notes),
        }


def decide_flow(
    flow_or_spec: Flow | FlowSpec,
    observations: Mapping[str, NodeObservation] | Mapping[str, Any],
    *,
    target: int = DEFAULT_LAG_THRESHOLD,
    options: AutoscalingOptions | None = None,
    cluster: ClusterSnapshot | None = None,
    gpu_mode: GpuMode | str | None = "exclusive",
    gpu_resource_name: str | None = None,
    predict: bool = False,
    now_s: float = 0.0,
    solver: SolverConfig | None = None,
) -> FlowScaling:
    """Decide every processor of a valid flow from observed backlogs (``vf scale``).

    Each processor gets ``min_replicas = nb_tasks`` and ``max_replicas =
    max(options.max_replicas, nb_tasks)`` (what the rendered ScaledObject
    uses), every parent required, its eligibility from
    :func:`vfcore.autoscaling_rejections`, and — with a ``cluster`` — the
    capacity cap of GPU processors that want more than ``nb_tasks``. With
    ``predict``, the cluster's next evaluation from a fresh controller
    (:func:`predict_hpa` with an empty memory) and the comparison.
    ``observations`` is an :func:`observations_from_dict` result or the raw
    document.
    """
    mode = parse_gpu_mode(gpu_mode)
    spec = require_valid(to_spec(flow_or_spec), gpu_mode=mode, gpu_resource_name=gpu_resource_name)
    opts = options or AutoscalingOptions(enabled=True)
    check_scaling_rule(target, 1, opts.max_replicas)
    parsed: dict[str, NodeObservation] = {}
    for key, value in observations.items():
        if not isinstance(value, NodeObservation):
            parsed = observations_from_dict(observations)
            break
        parsed[key] = value
    names = set(spec.names)
    strangers = sorted(set(parsed) - names)
    if strangers:
        raise InvalidInputError(
            "unknown-node",
            f"the observations name {strangers}, which the flow does not have "
            f"(nodes: {sorted(names)})",
            "name nodes as the flow declares them",
        )
    by_name = {n.name: n for n in spec.nodes}
    notes: list[str] = []
    for name in sorted(parsed):
        if not by_name[name].is_processor:
            notes.append(f"{name} is a {by_name[name].kind}: only processors are scaled; ignored")
    for name, given in sorted(parsed.items()):
        node_spec = by_name[name]
        stray = sorted(p for p, _ in given.parents if p not in node_spec.parents)
        if stray and node_spec.is_processor:
            raise InvalidInputError(
                "unknown-parent",
                f"the observations give {name} parent(s) {stray}; its parents are "
                f"{list(node_spec.parents)}",
                "observe each parent stream the node consumes, by the parent's name",
            )
    rejections = autoscaling_rejections(spec, opts)
    current_counts = {n: e.current for n, e in parsed.items() if e.current is not None}
    out: list[NodeScaling] = []
    for node_spec in spec.nodes:
        if not node_spec.is_processor:
            continue
        name = node_spec.name
        entry = parsed.get(name)
        nb = node_spec.replicas
        lo, hi = nb, max(opts.max_replicas, nb)
        obs = entry.parents_map if entry is not None else {}
        policy = node_spec.join_policy
        if node_spec.is_join and policy is None:
            policy = JoinPolicy.default_for(spec.flow_type)
        decision = decide_replicas(
            obs,
            target=target,
            min_replicas=lo,
            max_replicas=hi,
            required=node_spec.parents,
            join_policy=policy if node_spec.is_join else None,
        )
        current = entry.current if entry is not None else None
        reasons = rejections.get(name, ())
        eligible = not reasons
        if (
            eligible
            and cluster is not None
            and node_spec.is_gpu
            and decision.is_known
            and decision.floor > nb
        ):
            cap = capacity_cap(
                spec,
                cluster,
                name,
                up_to=decision.floor,
                replicas=current_counts,
                gpu_mode=mode,
                gpu_resource_name=gpu_resource_name,
                solver=solver,
            )
            decision = decide_replicas(
                obs,
                target=target,
                min_replicas=lo,
                max_replicas=hi,
                required=node_spec.parents,
                join_policy=policy if node_spec.is_join else None,
                capacity=cap,
            )
        scaler = prediction = comparison = None
        if predict and eligible:
            scaler = KedaScaler.for_parents(
                node_spec.parents, target=target, min_replicas=lo, max_replicas=hi
            )
            now = lo if current is None else current
            prediction = predict_hpa(obs, scaler=scaler, state=HpaState(now), now_s=now_s)
            comparison = compare_with_cluster(decision, prediction, current=now)
        out.append(
            NodeScaling(
                name, not reasons, reasons, current, decision, scaler, prediction, comparison
            )
        )
    if spec.flow_type != REALTIME:
        notes.append(
            "a BATCH flow's nodes are Jobs: nothing is autoscaled; the decisions say what the "
            "backlog calls for"
        )
    if predict:
        notes.append(
            "hpa: the next evaluation of a fresh controller (no recommendation history, no "
            "failure counts): a scale-down is held by the 300 s window from the current count"
        )
    return FlowScaling(spec.name or "flow", spec.flow_type, target, tuple(out), tuple(notes))
