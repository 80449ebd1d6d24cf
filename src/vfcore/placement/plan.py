"""plan(): will a flow fit on a cluster, where will each pod land, and what if not?

The verdict is three-valued (docs/planning.md). With ``K`` the nodes whose occupancy
is known and ``U`` those whose occupancy is unknown:

- **fits** if the pods fit on ``K`` alone — i.e. even if every unknown node is full;
- **does-not-fit** if they cannot fit even with every node of ``U`` empty
  (proven: by a sum, or by CP-SAT's infeasibility proof);
- **unknown** otherwise, naming what was unknown. A solver that runs out of
  time also yields unknown: never an unproven "does not fit".

Worked example: pods claiming 2, 2 and 2 GPUs on two nodes with 3 free each
*do not fit* (each node holds one 2-GPU pod: 2 < 3 pods), and the plan says
``0/2 nodes fit p/2: 2 Insufficient nvidia.com/gpu`` and that freeing 1
nvidia.com/gpu on one host, or adding a node shaped like either, would fix it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

from vfcore.cluster import ClusterSnapshot, NodeState, Unknown
from vfcore.errors import Problem
from vfcore.flow.gpu_mode import GpuMode, parse_gpu_mode
from vfcore.flow.spec import to_spec
from vfcore.flow.validate import require_valid
from vfcore.placement.claims import (
    DEFAULT_DRA_DEVICE_CLASS,
    DEFAULT_DRA_DRIVER,
    DEFAULT_DRA_MIG_DEVICE_CLASS,
    PodRequest,
    pod_requests,
)
from vfcore.placement.fit import SHARED_POOL_RESOURCES, Unplaced
from vfcore.placement.packing import PackingResult, SolverConfig, SolverReport, check_placement
from vfcore.placement.planners import (
    ModePlanner,
    Solved,
    name_list,
    placed_load,
    planner_for,
    readable_quantity,
)
from vfcore.placement.sharing import SharedPool, shared_pools

if TYPE_CHECKING:
    from vfcore.flow.authoring import Flow
    from vfcore.flow.spec import FlowSpec
    from vfcore.placement.dra.inventory import DraInventory
    from vfcore.placement.dra.planning import DraPlan
    from vfcore.placement.mig import MigPlan
    from vfcore.placement.scheduler import SchedulerReport
    from vfcore.placement.scheduler.cluster_facts import SchedulingFacts
    from vfcore.placement.scheduler.workloads import Workload

__all__ = [
    "NodeUsage",
    "Plan",
    "PlanOptions",
    "PlanSettings",
    "Problem",
    "Unplaced",
    "plan",
    "plan_pods",
]

Verdict = Literal["fits", "does-not-fit", "unknown"]


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """One node's resources: allocatable, free before the flow, planned for it, free after."""

    node: str
    resource: str
    allocatable: int
    free_before: int | None
    planned: int
    free_after: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "resource": self.resource,
            "allocatable": self.allocatable,
            "free_before": self.free_before,
            "planned": self.planned,
            "free_after": self.free_after,
        }


@dataclass(frozen=True, slots=True)
class Plan:
    """The answer of :func:`plan`; ``to_dict()`` is the ``vf plan --json`` document."""

    verdict: Verdict
    gpu_mode: GpuMode
    pods: tuple[PodRequest, ...]
    assignments: tuple[tuple[str, str], ...]
    unplaced: tuple[Unplaced, ...]
    unknown: tuple[Unknown, ...]
    problems: tuple[Problem, ...]
    usage: tuple[NodeUsage, ...]
    cards: tuple[tuple[str, int], ...]
    solver: SolverReport
    proofs: tuple[str, ...]
    fix: str | None
    scheduler: SchedulerReport | None = None  # the scheduler model's verdict and remedy, if run
    mig: MigPlan | None = None  # in mix mode: layouts, configs, resources per pod
    shared_pools: tuple[SharedPool, ...] = ()  # time-sliced / MPS nodes and who shares a card
    dra: DraPlan | None = None  # in dra mode: the devices planned for each pod

    def shares_card_with(self) -> dict[str, list[str]]:
        """Each planned pod sharing a card of a time-sliced or MPS pool → the pods it shares with."""
        out: dict[str, list[str]] = {}
        for pool in self.shared_pools:
            for pod in pool.pods:
                others = pool.shares_with(pod)
                if others:
                    out[pod] = list(others)
        return dict(sorted(out.items()))

    @property
    def passes_preflight(self) -> bool:
        """What ``vf plan --strict-preflight`` demands: the flow fits, no problem is an
        error, and the scheduler model lands every pod (with its remedy, when one is
        needed). A plan without the scheduler model (``predict_scheduler=False``)
        does not pass: nothing says kube-scheduler would land it.
        """
        return (
            self.verdict == "fits"
            and not any(p.is_error for p in self.problems)
            and self.scheduler is not None
            and self.scheduler.verdict_with_remedy == "lands"
        )

    @property
    def placement(self) -> dict[str, str]:
        return dict(self.assignments)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "gpu_mode": self.gpu_mode.value,
            "assignments": dict(self.assignments),
            "unplaced": [u.to_dict() for u in self.unplaced],
            "unknown": [u.to_dict() for u in self.unknown],
            "problems": [p.to_dict() for p in self.problems],
            "fix": self.fix,
            "proofs": list(self.proofs),
            "cards": dict(self.cards),
            "usage": [u.to_dict() for u in self.usage],
            "pods": [p.to_dict() for p in self.pods],
            "scheduler": None if self.scheduler is None else self.scheduler.to_dict(),
            **({} if self.mig is None else {"mig": self.mig.to_dict()}),
            **({} if self.dra is None else {"dra": self.dra.to_dict()}),
            "shared_pools": [p.to_dict() for p in self.shared_pools],
            "shares_card_with": self.shares_card_with(),
            "solver": self.solver.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """How :func:`plan` plans a flow: how its pods ask for GPUs, and how hard it looks.

    How the pods ask (as ``vf deploy`` renders them; :func:`plan_pods`, given the
    pods, reads only ``gpu_mode`` and ``gpu_runtime_class`` of these):

    - ``gpu_mode``: ``exclusive`` (the default), ``shared``, ``mix`` or ``dra``
      (a :class:`~vfcore.flow.gpu_mode.GpuMode` or its name; ``None``: exclusive);
    - ``gpu_resource_name`` (e.g. ``nvidia.com/gpu.shared``), ``gpu_runtime_class``,
      ``gpu_node_selector`` (``(key, value)``);
    - ``resources``: per-node request overrides, ``{"detector": {"cpu": "2"}}``;
    - ``dra_device_class`` (whole GPUs), ``dra_mig_device_class`` (a
      memory-declaring one-GPU node) and ``dra_driver``, in ``dra`` mode.

    How the plan is made:

    - ``solver``: how CP-SAT runs (``None``: :meth:`SolverConfig.deterministic`);
    - ``predict_scheduler``: also model kube-scheduler (``Plan.scheduler``);
    - ``kube_version``: the Kubernetes minor version it models (``"1.29"`` to ``"1.36"``);
    - ``time_limit``: seconds each scheduler-model phase may take (read from
      :func:`plan`'s ``clock``); ``None``: no limit.

    >>> PlanOptions(gpu_mode="mix", predict_scheduler=False).kube_version
    '1.36'
    """

    gpu_mode: GpuMode | str | None = "exclusive"
    gpu_resource_name: str | None = None
    gpu_runtime_class: str | None = None
    gpu_node_selector: tuple[str, str] | None = None
    resources: Mapping[str, Mapping[str, str | int | float]] | None = None
    dra_device_class: str = DEFAULT_DRA_DEVICE_CLASS
    dra_mig_device_class: str = DEFAULT_DRA_MIG_DEVICE_CLASS
    dra_driver: str = DEFAULT_DRA_DRIVER
    solver: SolverConfig | None = None
    predict_scheduler: bool = True
    kube_version: str = "1.36"
    time_limit: float | None = None


class PlanSettings(TypedDict, total=False):
    """:class:`PlanOptions`' fields as keyword arguments of :func:`plan` and :func:`plan_pods`
    (``plan(spec, cluster, gpu_mode="mix")``): each replaces that field of ``options``."""

    gpu_mode: GpuMode | str | None
    gpu_resource_name: str | None
    gpu_runtime_class: str | None
    gpu_node_selector: tuple[str, str] | None
    resources: Mapping[str, Mapping[str, str | int | float]] | None
    dra_device_class: str
    dra_mig_device_class: str
    dra_driver: str
    solver: SolverConfig | None
    predict_scheduler: bool
    kube_version: str
    time_limit: float | None


def _options(options: PlanOptions | None, settings: PlanSettings) -> PlanOptions:
    """``options`` (``None``: the defaults) with the fields ``settings`` name replaced."""
    base = PlanOptions() if options is None else options
    return replace(base, **settings) if settings else base


def plan(
    flow_or_spec: Flow | FlowSpec,
    cluster: ClusterSnapshot,
    options: PlanOptions | None = None,
    *,
    workloads: Mapping[str, Workload] | None = None,
    facts: SchedulingFacts | None = None,
    clock: Callable[[], float] | None = None,
    progress: Callable[[str], None] | None = None,
    **settings: Unpack[PlanSettings],
) -> Plan:
    """Place every pod of a valid flow on ``cluster``, exactly, with a three-valued verdict.

    ``options`` (:class:`PlanOptions`; ``None``: the defaults) say how; any of
    their fields may be given by name instead, and then replaces the field of
    ``options``: ``plan(spec, cluster, gpu_mode="mix")`` is
    ``plan(spec, cluster, PlanOptions(gpu_mode="mix"))``. What the plan is made
    from besides the flow and the cluster are keywords of their own
    (``workloads``, ``facts``), and so are the hooks (``clock``, ``progress``).

    In ``dra`` mode each GPU pod's claim (``dra_device_class`` for whole GPUs,
    ``dra_mig_device_class`` for a memory-declaring one-GPU node) is planned on
    the cluster's ResourceSlices (``cluster.dra``), device by device
    (``docs/dra.md``); the plan's ``dra`` names the devices.

    ``kube_version`` is the Kubernetes minor version the scheduler model
    predicts (``"1.29"`` to ``"1.36"``; docs/scheduler-model.md says what
    changes between them); a bad value is an ``InvalidInputError``.

    ``workloads`` say how ``vf deploy`` creates each node's pods for the
    scheduler model (:func:`vfcore.placement.scheduler.workloads_from_objects`
    reads them from the rendered objects); without them they follow from the
    spec (:func:`vfcore.placement.scheduler.workloads_from_spec`: Deployments
    and StatefulSets spread, Jobs do not). ``facts``
    (:func:`vfcore.placement.scheduler.scheduling_facts`) are the cluster's
    pods, images, PodDisruptionBudgets and PriorityClasses, for spreading,
    inter-pod affinity, image locality and preemption.

    ``time_limit`` seconds (read from ``clock``, e.g. ``time.monotonic``; vfcore
    reads no clock itself) bound each scheduler-model phase — the prediction
    and the remedy — as ``solver`` bounds the exact plan; a phase cut short
    says so (``scheduler.cut_short``) and never answers ``lands``.
    ``progress`` is told each phase's name as it starts.
    """
    opts = _options(options, settings)
    mode = parse_gpu_mode(opts.gpu_mode)  # the API edge: everything below takes the parsed mode
    spec = require_valid(
        to_spec(flow_or_spec), gpu_mode=mode, gpu_resource_name=opts.gpu_resource_name
    )
    all_pods = pod_requests(
        spec,
        gpu_mode=mode,
        gpu_resource_name=opts.gpu_resource_name,
        gpu_node_selector=opts.gpu_node_selector,
        resources=opts.resources,
        dra_device_class=opts.dra_device_class,
        dra_mig_device_class=opts.dra_mig_device_class,
        dra_driver=opts.dra_driver,
    )
    if workloads is None and opts.predict_scheduler:
        workloads = _spec_workloads(spec, facts)
    return plan_pods(
        all_pods,
        cluster,
        replace(opts, gpu_mode=mode),
        workloads=workloads,
        facts=facts,
        clock=clock,
        progress=progress,
    )


def _spec_workloads(spec: FlowSpec, facts: SchedulingFacts | None) -> Mapping[str, Workload]:
    from vfcore.placement.scheduler.workloads import workloads_from_spec  # the scheduler model

    return workloads_from_spec(spec, priority=0 if facts is None else facts.default_priority)


def plan_pods(
    all_pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    options: PlanOptions | None = None,
    *,
    workloads: Mapping[str, Workload] | None = None,
    facts: SchedulingFacts | None = None,
    clock: Callable[[], float] | None = None,
    progress: Callable[[str], None] | None = None,
    **settings: Unpack[PlanSettings],
) -> Plan:
    """:func:`plan` for pods already built (from :func:`vfcore.placement.claims.pod_requests` or by hand).

    ``options`` and ``settings`` as for :func:`plan`; the pods being built, only
    ``gpu_mode``, ``gpu_runtime_class``, ``solver``, ``predict_scheduler``,
    ``kube_version`` and ``time_limit`` matter here. ``workloads`` and ``facts``
    go to the scheduler model as :func:`plan` says; without ``workloads`` the
    pods are bare pods to it.

    The mode's planner (:func:`vfcore.placement.planners.planner_for`) is
    chosen once; every step below is the same for every mode.
    """
    opts = _options(options, settings)
    mode = parse_gpu_mode(opts.gpu_mode)
    from vfcore.placement.scheduler.scoring import parse_kube_version  # the scheduler model

    version = parse_kube_version(opts.kube_version)  # the API edge: fail before solving
    if progress is not None:
        progress("exact plan")
    planner = planner_for(mode, cluster)
    cfg = opts.solver or SolverConfig.deterministic()
    all_pods = tuple(all_pods)
    problems = _problems(all_pods, cluster, planner, opts.gpu_runtime_class)
    unknown = list(cluster.unknowns)
    planned, deferred = planner.split(all_pods)
    if deferred:
        unknown.append(
            Unknown(
                "mig-slices",
                f"{len(deferred)} pod(s) take a MIG slice "
                f"({', '.join(p.pod for p in deferred[:4])}{'…' if len(deferred) > 4 else ''}); "
                f"MIG layouts are planned in mix mode only, not in {mode} mode",
            )
        )

    if cluster.nodes_unknown is not None:
        return _plan_without_node_list(
            cluster.nodes_unknown, mode, all_pods, planned, unknown, problems
        )

    nodes = _bracket_nodes(planner, planned, cluster, unknown)
    verdict, solved, considered = _solve_bracketed(planner, planned, nodes, cfg, bool(deferred))
    result = solved.packing
    _assert_valid(planner, solved)

    unplaced = planner.explain(
        planned, cluster, considered, solved, [*nodes.unknown_nodes, *nodes.bounds], nodes.unbounded
    )
    problems += planner.findings(all_pods, cluster, solved)
    unplaced += _unplanned(deferred)
    fix = (
        _smallest_fix(planner, planned, cluster, considered, result, cfg)
        if verdict == "does-not-fit" and not cluster.unreadable_nodes
        else None  # with unreadable nodes, the fix would rest on a guess of their size
    )
    if verdict == "does-not-fit":
        hopeless = {u.pod for u in unplaced if u.kind == "unresolvable"}
        helpable = [p for p in planned if p.pod not in hopeless]
        problems += planner.blocking_findings(helpable, considered, cfg)
    unknown = list(nodes.unknown)
    pools = shared_pools(solved.pods, cluster.nodes, result.assignments, dict(result.cards))
    doubtful = [p for p in pools if p.pods and p.verdict == "unknown"]
    if verdict == "fits" and doubtful:
        verdict = "unknown"  # the VRAM of pods sharing a card is not certain: never "fits"
    if verdict != "does-not-fit":
        unknown += [Unknown(f"node/{p.node}", f"shared-card-vram: {p.reason}") for p in doubtful]
    realised = planner.realised(cluster, solved)
    usage = _usage(solved.pods, realised, result.assignments)
    out = Plan(
        verdict=verdict,
        gpu_mode=mode,
        pods=all_pods,
        assignments=result.assignments,
        unplaced=unplaced,
        unknown=tuple(unknown),
        problems=problems,
        usage=usage,
        cards=result.cards,
        solver=result.report,
        proofs=result.proofs
        if verdict != "unknown"
        else tuple(f"on the readable nodes of known occupancy only: {p}" for p in result.proofs),
        fix=fix,
        mig=solved.mig
        if solved.mig is None or verdict == "fits"
        else solved.mig.withhold(f"the verdict is {verdict}, not fits"),
        shared_pools=pools,
        dra=getattr(solved.dra, "plan", None),
    )
    if opts.predict_scheduler:
        out = _with_scheduler(
            out,
            solved.pods,
            realised,
            opts.time_limit,
            clock,
            progress,
            version,
            workloads=workloads,
            facts=facts,
            dra_inventories=(solved.dra.inventory,) if hasattr(solved.dra, "inventory") else (),
        )
    return out


# -- the steps of plan_pods ------------------------------------------------------------------------


def _plan_without_node_list(
    why: str,
    mode: GpuMode,
    all_pods: tuple[PodRequest, ...],
    planned: Sequence[PodRequest],
    unknown: list[Unknown],
    problems: tuple[Problem, ...],
) -> Plan:
    """The plan when the cluster's node list itself is unknown (``why``): nothing is solved;
    no pods fit (trivially), else the verdict is unknown and every planned pod unschedulable."""
    if why not in {u.reason for u in unknown}:
        unknown.append(Unknown("nodes", why))
    verdict: Verdict = "fits" if not all_pods else "unknown"
    report = SolverReport("NOT_RUN", "none", notes=("the node list is unknown",))
    unplaced = tuple(
        Unplaced(p.pod, "unschedulable", f"?/? nodes fit {p.pod}: node list unknown", (), None)
        for p in planned
    )
    return Plan(
        verdict,
        mode,
        all_pods,
        (),
        unplaced,
        tuple(unknown),
        problems,
        (),
        (),
        report,
        (),
        None,
    )


@dataclass(frozen=True, slots=True)
class _Bracket:
    """The cluster's nodes as the verdict brackets them (the module's ``K`` and ``U``)."""

    known: list[NodeState]  # K: occupancy known; "fits" is decided on these alone
    unknown_nodes: list[NodeState]  # U: occupancy unknown, taken as empty for "does not fit"
    bounds: list[NodeState]  # unreadable nodes' upper bounds, for "does not fit"
    unbounded: list[str]  # unreadable nodes nothing bounds (and the mode's): nothing is proven
    unknown: list[Unknown]  # every unknown the plan names, saying how it is bracketed
    complete: bool  # every node is in K: the exact plan on K is the verdict


def _bracket_nodes(
    planner: ModePlanner,
    planned: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    unknown: Sequence[Unknown],
) -> _Bracket:
    """Sort the nodes into known, unknown, bounded and unbounded ones.

    A node that exists but cannot be read is absent for "fits" and at its upper
    bound for "does not fit"; one with no bound could hold anything, so nothing
    is proven without it. A mode's own unknowns (dra: devices of unknown use, or
    unknown devices) bracket nodes too.
    """
    bracket = planner.bracket(planned, cluster)
    mode_unknown = dict(bracket.unknown) if bracket is not None else {}
    mode_unbounded = dict(bracket.unbounded) if bracket is not None else {}
    known = [
        n
        for n in cluster.nodes
        if n.occupancy_known and n.name not in mode_unknown and n.name not in mode_unbounded
    ]
    known_names = {n.name for n in known}
    unknown_nodes = [
        n for n in cluster.nodes if n.name not in known_names and n.name not in mode_unbounded
    ]
    bounds = [u.bound for u in cluster.unreadable_nodes if u.bound is not None]
    unbounded = [u.name for u in cluster.unreadable_nodes if u.bound is None]
    unbounded += sorted(mode_unbounded)
    named = [_bracketed(u, cluster) for u in unknown]
    if bracket is not None:
        named += list(bracket.facts)
        named += [
            Unknown(f"node/{name}", f"dra: {reason}")
            for name, reason in sorted({**mode_unknown, **mode_unbounded}.items())
        ]
    complete = not unknown_nodes and not cluster.unreadable_nodes and not mode_unbounded
    return _Bracket(known, unknown_nodes, bounds, unbounded, named, complete)


def _solve_bracketed(
    planner: ModePlanner,
    planned: Sequence[PodRequest],
    nodes: _Bracket,
    cfg: SolverConfig,
    some_deferred: bool,
) -> tuple[Verdict, Solved, list[NodeState]]:
    """The three-valued verdict, the solution it rests on, and the nodes that solution saw.

    **fits** if the pods fit on ``K`` (unknown while pods were deferred to another
    mode); **does-not-fit** if they do not fit on ``K`` with every node known, or
    not even with ``U`` empty and unreadable nodes at their bound (the optimistic
    solve); **unknown** otherwise — always while an unreadable node has no bound.
    """
    solved = planner.solve(planned, nodes.known, cfg)
    result = solved.packing
    if result.feasible is True:
        return ("unknown" if some_deferred else "fits"), solved, nodes.known
    if nodes.complete:
        return ("does-not-fit" if result.feasible is False else "unknown"), solved, nodes.known
    if nodes.unbounded:
        result = _with_note(
            result,
            f"fits only if unreadable node(s) have room ({name_list(nodes.unbounded)}); nothing "
            "bounds what they hold, so it cannot be proven not to fit",
        )
        return "unknown", replace(solved, packing=result), nodes.known
    optimistic_nodes = nodes.known + [n.as_empty() for n in nodes.unknown_nodes] + nodes.bounds
    optimistic = planner.solve(planned, optimistic_nodes, cfg, optimistic=True)
    if optimistic.packing.feasible is False:
        return "does-not-fit", optimistic, optimistic_nodes
    if optimistic.packing.feasible is True:
        solved = replace(solved, packing=_with_unknown_note(result, optimistic.packing))
    return "unknown", solved, nodes.known


def _assert_valid(planner: ModePlanner, solved: Solved) -> None:
    """The independent checkers re-verify the solver's placement (and the mode's layouts)."""
    result = solved.packing
    violations = check_placement(
        solved.pods,
        solved.nodes,
        result.assignments,
        cards=dict(result.cards),
        extra_reasons=solved.extra_reasons,
    )
    violations += planner.layout_violations(solved)
    if violations:  # pragma: no cover - the checkers guard the solver
        raise AssertionError(f"the solver produced an invalid placement: {violations}")


def _unplanned(deferred: Sequence[PodRequest]) -> tuple[Unplaced, ...]:
    """The MIG-slice pods a mode other than mix does not plan."""
    return tuple(
        Unplaced(
            p.pod,
            "unplanned",
            f"{p.pod} takes a MIG slice of >= {p.gpu_memory_mib} MiB: not planned here",
            (),
            "plan with --gpu-mode mix to plan MIG layouts",
        )
        for p in deferred
    )


# -- notes on what the verdict brackets ------------------------------------------------------------


def _with_note(result: PackingResult, note: str) -> PackingResult:
    return replace(result, report=replace(result.report, notes=(*result.report.notes, note)))


def _bracketed(item: Unknown, cluster: ClusterSnapshot) -> Unknown:
    """An unreadable node's unknown, saying how the plan brackets it."""
    for node in cluster.unreadable_nodes:
        if item.what in (f"node/{node.name}", node.name):
            how = (
                "nothing bounds it, so the plan never concludes does-not-fit while it is unread"
                if node.bound is None
                else "bounded by what is readable and status.capacity for does-not-fit"
            )
            return Unknown(item.what, f"{item.reason}; left out for fits, {how}")
    return item


def _with_unknown_note(result: PackingResult, optimistic: PackingResult) -> PackingResult:
    note = (
        "fits only if some node of unknown occupancy or unreadable allocatable has room "
        f"(it places {len(optimistic.assignments)} pods with those nodes empty and as large "
        "as they could be)"
    )
    return replace(result, report=replace(result.report, notes=(*result.report.notes, note)))


def _with_scheduler(
    out: Plan,
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    time_limit: float | None = None,
    clock: Callable[[], float] | None = None,
    progress: Callable[[str], None] | None = None,
    kube_version: str = "1.36",
    *,
    workloads: Mapping[str, Workload] | None = None,
    facts: SchedulingFacts | None = None,
    dra_inventories: Sequence[DraInventory] = (),
) -> Plan:
    from vfcore.placement.scheduler import ScoringConfig, predict_for_plan

    report = predict_for_plan(
        pods,
        cluster,
        out,
        config=ScoringConfig(kube_version=kube_version),
        time_limit=time_limit,
        clock=clock,
        phase=progress,
        workloads=workloads,
        facts=facts,
        dra_inventories=dra_inventories,
    )
    if cluster.unreadable_nodes:  # kube-scheduler would score those nodes too: nothing is sure
        names = [u.name for u in cluster.unreadable_nodes]
        reason = (
            f"node(s) {name_list(names)} cannot be read; kube-scheduler would consider them "
            f"too, so the model cannot tell (without them: {report.prediction.verdict})"
        )
        report = replace(
            report,
            prediction=replace(report.prediction, verdict="unknown", reason=reason),
            remedy=None,
        )
    return replace(out, scheduler=report)


# -- problems the seeds name -------------------------------------------------------------------


def _problems(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    planner: ModePlanner,
    runtime_class: str | None,
) -> tuple[Problem, ...]:
    out: list[Problem] = [
        Problem(note.code, "info", None, f"{note.what}: {note.message}", note.hint)
        for note in cluster.notes
    ]
    pods = sorted(pods, key=lambda p: (p.node, p.replica, p.pod))  # input order must not matter
    gpu_pods = [p for p in pods if p.slice != "none"]
    if planner.mode.needs_runtime_class and gpu_pods and runtime_class is None:
        out.append(
            Problem(
                "shared-without-runtime-class",
                "error",
                None,
                f"shared mode gives {len(gpu_pods)} GPU pod(s) no GPU resource, so only a runtime "
                "class can inject the devices, and none was requested",
                "pass --gpu-runtime-class nvidia (the RuntimeClass of the NVIDIA runtime)",
            )
        )
    known_classes = cluster.runtime_classes
    if runtime_class is not None and known_classes is not None:
        class_names = {r.name for r in known_classes}
        if runtime_class not in class_names:
            out.append(
                Problem(
                    "runtime-class-missing",
                    "error",
                    None,
                    f"RuntimeClass {runtime_class!r} does not exist "
                    f"(the cluster has {sorted(class_names)})",
                    "create it, or pass the name of an existing one to --gpu-runtime-class",
                )
            )
    if runtime_class is None and gpu_pods and known_classes:
        nvidia = sorted(r.name for r in known_classes if "nvidia" in r.handler.lower())
        if nvidia:
            out.append(
                Problem(
                    "runtime-class-not-requested",
                    "warning",
                    None,
                    f"the cluster has NVIDIA RuntimeClass(es) {nvidia}, but the GPU pods request "
                    "none; where the NVIDIA runtime is opt-in they start without GPUs",
                    f"pass --gpu-runtime-class {nvidia[0]}",
                )
            )
    bounds = [u.bound for u in cluster.unreadable_nodes if u.bound is not None]
    advertised = {r for n in [*cluster.nodes, *bounds] for r, v in n.allocatable if v > 0}
    advertised |= planner.advertisable(cluster.nodes)  # e.g. idle MIG-capable cards
    # an unreadable node nothing bounds might advertise anything: "no node" is then unproven
    if cluster.nodes_unknown is None and all(u.bound for u in cluster.unreadable_nodes):
        missing: dict[str, list[str]] = defaultdict(list)
        for pod in pods:
            for resource, _ in pod.requests:
                if resource not in advertised:
                    missing[resource].append(pod.pod)
        for resource, names in sorted(missing.items()):
            renamed = [
                n.name for n in cluster.nodes if n.allocatable_of("nvidia.com/gpu.shared") > 0
            ]
            hint = (
                f"{len(renamed)} node(s) advertise time-sliced GPUs renamed to "
                f"nvidia.com/gpu.shared ({name_list(renamed)}): pass --gpu-resource-name "
                "nvidia.com/gpu.shared to plan on them"
                if resource == "nvidia.com/gpu" and renamed
                else "install the device plugin that advertises it, or fix the resource name "
                "(--gpu-resource-name)"
            )
            out.append(
                Problem(
                    "resource-not-advertised",
                    "error",
                    None,
                    f"no node advertises {resource}, which {len(names)} pod(s) request "
                    f"({', '.join(names[:4])}{'…' if len(names) > 4 else ''})",
                    hint,
                )
            )
        for pod in pods:
            gpus = [(u, r) for r, u in pod.requests if u > 1 and r in SHARED_POOL_RESOURCES]
            if gpus:
                pools = sorted(
                    {n.gpu.sharing for n in cluster.nodes if n.gpu and n.gpu.sharing != "none"}
                )
                if pools and pod.replica == 0:
                    units, resource = max(gpus)
                    out.append(
                        Problem(
                            "shared-pool-multi-gpu",
                            "warning",
                            pod.node,
                            f"{pod.node} needs {units} GPUs per pod ({units} {resource}), which "
                            f"the {'/'.join(pools)} pools cannot serve: there each unit is a "
                            "share of one card, not a card (and with failRequestsGreaterThanOne "
                            "the device plugin refuses more than one); only unshared nodes are "
                            "eligible",
                            "run it on unshared GPU nodes, or split the model to one GPU per pod",
                        )
                    )
    return tuple(out)


# -- the smallest fix, and the usage of every node ----------------------------------------------


def _smallest_fix(
    planner: ModePlanner,
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    considered: Sequence[NodeState],
    result: PackingResult,
    cfg: SolverConfig,
) -> str | None:
    """The first of: one more node shaped like an existing one, or k more of them."""
    missing = set(result.unplaced)
    unplaced = [p for p in pods if p.pod in missing]
    if not unplaced:
        return None
    templates: dict[tuple[object, ...], NodeState] = {}
    for node in sorted(cluster.nodes, key=lambda n: n.name):
        if not any(planner.could_hold(p, node) for p in unplaced):
            continue
        key = (node.allocatable, node.labels, node.taints, node.gpu)
        templates.setdefault(key, node)
    quick = replace(
        cfg, optimize=False, max_deterministic_time=min(cfg.max_deterministic_time, 5.0)
    )
    candidates = sorted(
        templates.values(), key=lambda n: (-sum(v for _, v in n.allocatable), n.name)
    )[:4]
    for extra in range(1, min(len(unplaced), 8) + 1):
        for template in candidates:
            clones = [
                replace(template.as_empty(), name=f"{template.name}+new{k}") for k in range(extra)
            ]
            trial = planner.solve(pods, [*considered, *clones], quick).packing
            if trial.feasible is True:
                count = "one more node" if extra == 1 else f"{extra} more nodes"
                return f"add {count} shaped like {template.name} ({_describe(template)})"
    return None


def _describe(node: NodeState) -> str:
    parts = [
        f"{readable_quantity(r, v)} {r}"
        for r, v in node.allocatable
        if r in ("cpu", "memory") or "/" in r
    ]
    return ", ".join(parts)


def _usage(
    pods: Sequence[PodRequest], cluster: ClusterSnapshot, assignments: Sequence[tuple[str, str]]
) -> tuple[NodeUsage, ...]:
    load = placed_load(pods, assignments)
    resources = sorted({r for p in pods for r, _ in p.requests} | {"cpu", "memory"})
    out = []
    for node in cluster.nodes:
        for r in resources:
            alloc = node.allocatable_of(r)
            if not alloc and r not in load.get(node.name, {}):
                continue
            free = node.free_of(r)
            planned = load.get(node.name, {}).get(r, 0)
            out.append(
                NodeUsage(
                    node=node.name,
                    resource=r,
                    allocatable=alloc,
                    free_before=free,
                    planned=planned,
                    free_after=None if free is None else free - planned,
                )
            )
    return tuple(out)
