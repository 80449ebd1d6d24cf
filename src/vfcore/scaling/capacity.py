"""The capacity cap: how many replicas of one node the exact packing can place
(:func:`capacity_cap`, answered as a :class:`CapacityCap`).

The packer and the plan (vfcore.placement.packing / .plan, which hold the
CP-SAT model) are imported when a cap is computed, not when this module loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from vfcore.errors import InvalidInputError, brief
from vfcore.flow.gpu_mode import GpuMode, parse_gpu_mode
from vfcore.flow.params import MAX_REPLICAS_PER_NODE
from vfcore.flow.spec import to_spec
from vfcore.placement.claims import pod_requests
from vfcore.placement.demand import pod_name
from vfcore.placement.packing import SolverConfig
from vfcore.placement.plan import plan_pods
from vfcore.scaling.observations import is_int

if TYPE_CHECKING:
    from vfcore.cluster import ClusterSnapshot
    from vfcore.flow.authoring import Flow
    from vfcore.flow.spec import FlowSpec
    from vfcore.placement.claims import PodRequest
    from vfcore.placement.plan import Plan


@dataclass(frozen=True, slots=True)
class CapacityCap:
    """How many replicas of one node the cluster can place, with the rest of the flow in place.

    ``placeable`` is the largest count proven to fit (the exact packing, every
    node of unknown occupancy counted as full), up to ``checked_up_to``.
    ``limit`` is ``placeable`` when one more replica is proven *not* to fit, and
    ``None`` when nothing limits it up to ``checked_up_to`` or when the next
    count is unknown (unknown never caps a decision). ``unlock`` says what
    would let more replicas land; ``blocker`` is the scheduler-style line for
    the first replica that does not fit.
    """

    node: str
    placeable: int
    limit: int | None
    checked_up_to: int
    verdicts: tuple[tuple[int, str], ...]
    unlock: str | None = None
    blocker: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "placeable": self.placeable,
            "limit": self.limit,
            "checked_up_to": self.checked_up_to,
            "verdicts": {str(k): v for k, v in self.verdicts},
            "unlock": self.unlock,
            "blocker": self.blocker,
        }


def capacity_cap(
    flow_or_spec: Flow | FlowSpec,
    cluster: ClusterSnapshot,
    node: str,
    *,
    up_to: int,
    replicas: Mapping[str, int] | None = None,
    gpu_mode: GpuMode | str | None = "exclusive",
    gpu_resource_name: str | None = None,
    gpu_node_selector: tuple[str, str] | None = None,
    resources: Mapping[str, Mapping[str, str | int | float]] | None = None,
    solver: SolverConfig | None = None,
) -> CapacityCap:
    """The largest count of ``node``'s replicas (≤ ``up_to``) that the exact packing places.

    Every other node of the flow keeps its pods in place (``replicas``
    overrides their counts, e.g. what runs now; default ``nb_tasks``). Each
    probe is :func:`vfcore.plan.plan_pods` on the pods of the whole flow; a
    count *fits* only if the plan's verdict is ``fits``. Feasibility only
    shrinks as the count grows (dropping one pod keeps a packing valid), so a
    binary search over ``[0, up_to]`` needs about ``log2(up_to)`` probes.

    Worked example (``examples/clusters/gpu-pool``: 3, 5, 1 and 4 free GPUs on
    four hosts): a detector taking 2 GPUs per replica fits 1 + 2 + 0 + 2 = 5
    replicas, so asking for 8 gives ``placeable=5, limit=5``, and the sixth
    replica's line reads ``0/6 nodes fit detector/5: …``.
    """
    spec = to_spec(flow_or_spec)
    if node not in spec.names:
        raise InvalidInputError(
            "unknown-node",
            f"capacity_cap names {node!r}, which the flow does not have "
            f"(nodes: {sorted(spec.names)})",
            "name a node as the flow declares it",
        )
    if not is_int(up_to) or not 0 <= up_to <= MAX_REPLICAS_PER_NODE:
        raise InvalidInputError(
            "invalid-capacity",
            f"up_to={brief(up_to)} must be a replica count, 0 .. {MAX_REPLICAS_PER_NODE:,}",
            "ask up to the count the backlog calls for, e.g. the decision's floor",
        )
    for name, count in sorted((replicas or {}).items(), key=lambda kv: str(kv[0])):
        if is_int(count) and count > MAX_REPLICAS_PER_NODE:
            raise InvalidInputError(
                "invalid-capacity",
                f"replicas[{name!r}]={brief(count)} is over {MAX_REPLICAS_PER_NODE:,}, the most "
                "replicas vfcore plans for one node",
                "pass each other node's current replica count",
            )
    mode = parse_gpu_mode(gpu_mode)
    cfg = solver or SolverConfig.deterministic(max_deterministic_time=10.0)
    cfg = replace(cfg, optimize=False)
    pods = pod_requests(
        spec,
        gpu_mode=mode,
        gpu_resource_name=gpu_resource_name,
        gpu_node_selector=gpu_node_selector,
        resources=resources,
    )
    counts = {n.name: n.replicas for n in spec.nodes}
    for name, count in (replicas or {}).items():
        if name in counts and name != node and is_int(count) and count >= 0:
            counts[name] = count
    templates: dict[str, PodRequest] = {}
    for pod in pods:
        templates.setdefault(pod.node, pod)
    others: list[PodRequest] = []
    for name, other in templates.items():
        if name == node:
            continue
        others.extend(replace(other, pod=pod_name(name, i), replica=i) for i in range(counts[name]))
    template = templates.get(node)
    plans: dict[int, Plan] = {}

    def probe(k: int) -> str:
        if k not in plans:
            mine = (
                [replace(template, pod=pod_name(node, i), replica=i) for i in range(k)]
                if template is not None
                else []
            )
            plans[k] = plan_pods(
                [*others, *mine], cluster, gpu_mode=mode, solver=cfg, predict_scheduler=False
            )
        return plans[k].verdict

    if probe(up_to) == "fits":
        return CapacityCap(node, up_to, None, up_to, _verdicts(plans))
    lo, hi = -1, up_to  # fits(lo) (or lo = -1), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if probe(mid) == "fits":
            lo = mid
        else:
            hi = mid
    placeable = max(lo, 0)
    proven = plans[hi].verdict == "does-not-fit"
    first = plans[hi]
    blocker = next((u.summary for u in first.unplaced if u.pod.startswith(f"{node}/")), None)
    if blocker is None and first.unplaced:
        blocker = first.unplaced[0].summary
    if lo < 0:
        unlock = (
            "the rest of the flow does not fit on this cluster by itself; run `vf plan` "
            "and fix that first"
        )
    elif proven:
        unlock = _unlock_text(node, placeable, first)
    else:
        unknown = "; ".join(f"{u.what}: {u.reason}" for u in first.unknown) or "unknown"
        unlock = (
            f"{placeable} replica(s) are proven to fit; whether {placeable + 1} fit is "
            f"unknown ({unknown}), so no cap is applied"
        )
    return CapacityCap(
        node,
        placeable,
        placeable if proven else None,
        up_to,
        _verdicts(plans),
        unlock,
        blocker,
    )


def _verdicts(plans: Mapping[int, Plan]) -> tuple[tuple[int, str], ...]:
    return tuple(sorted((k, p.verdict) for k, p in plans.items()))


def _unlock_text(node: str, placeable: int, plan: Plan) -> str:
    mine = [u for u in plan.unplaced if u.pod.startswith(f"{node}/")]
    fixes = [u.fix for u in mine if u.fix]
    text = f"{placeable} replica(s) of {node} fit; to place replica {placeable + 1}: "
    if plan.fix:
        return text + plan.fix
    if fixes:
        return text + fixes[0]
    return text + "free capacity on a GPU host, or add a GPU node"
