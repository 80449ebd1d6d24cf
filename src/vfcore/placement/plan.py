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
from typing import TYPE_CHECKING, Any, Literal

from vfcore.cluster import ClusterSnapshot, NodeState, Unknown
from vfcore.errors import Problem
from vfcore.placement.claims import PodRequest, pod_requests
from vfcore.placement.fit import (
    Unplaced,
    UnplacedKind,
    could_ever_hold,
    distinct_reasons,
    reasons_on,
    shortfalls,
    summarise,
)
from vfcore.placement.packing import (
    ExtraReasons,
    PackingResult,
    SolverConfig,
    SolverReport,
    check_placement,
    pack,
)
from vfcore.quantity import PODS, format_quantity
from vfcore.validate import check_gpu_mode, require_valid, to_spec

if TYPE_CHECKING:
    from vfcore.flow import Flow
    from vfcore.placement.mig import MigPlan
    from vfcore.placement.mig.hosts import BusyNodes
    from vfcore.placement.scheduler import SchedulerReport
    from vfcore.spec import FlowSpec

__all__ = ["NodeUsage", "Plan", "Problem", "Unplaced", "plan", "plan_pods"]

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
    gpu_mode: str
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
            "gpu_mode": self.gpu_mode,
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
            "solver": self.solver.to_dict(),
        }


def plan(
    flow_or_spec: Flow | FlowSpec,
    cluster: ClusterSnapshot,
    *,
    gpu_mode: str | None = "exclusive",
    gpu_resource_name: str | None = None,
    gpu_runtime_class: str | None = None,
    gpu_node_selector: tuple[str, str] | None = None,
    resources: Mapping[str, Mapping[str, str | int | float]] | None = None,
    solver: SolverConfig | None = None,
    predict_scheduler: bool = True,
) -> Plan:
    """Place every pod of a valid flow on ``cluster``, exactly, with a three-valued verdict."""
    spec = require_valid(
        to_spec(flow_or_spec), gpu_mode=gpu_mode, gpu_resource_name=gpu_resource_name
    )
    mode = check_gpu_mode(gpu_mode)
    cfg = solver or SolverConfig.deterministic()
    all_pods = pod_requests(
        spec,
        gpu_mode=mode,
        gpu_resource_name=gpu_resource_name,
        gpu_node_selector=gpu_node_selector,
        resources=resources,
    )
    return plan_pods(
        all_pods,
        cluster,
        gpu_mode=mode,
        gpu_runtime_class=gpu_runtime_class,
        solver=cfg,
        predict_scheduler=predict_scheduler,
    )


def plan_pods(
    all_pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    *,
    gpu_mode: str = "exclusive",
    gpu_runtime_class: str | None = None,
    solver: SolverConfig | None = None,
    predict_scheduler: bool = True,
) -> Plan:
    """:func:`plan` for pods already built (from :func:`vfcore.placement.claims.pod_requests` or by hand)."""
    mode = check_gpu_mode(gpu_mode)
    cfg = solver or SolverConfig.deterministic()
    all_pods = tuple(all_pods)
    problems = _problems(all_pods, cluster, mode, gpu_runtime_class)
    unknown = list(cluster.unknowns)
    mix = mode == "mix"
    if mix:  # MIG pods are planned with the rest (vfcore.placement.mig)
        planned, deferred = list(all_pods), []
    else:
        planned = [p for p in all_pods if p.slice != "mig"]
        deferred = [p for p in all_pods if p.slice == "mig"]
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
        if cluster.nodes_unknown not in {u.reason for u in unknown}:
            unknown.append(Unknown("nodes", cluster.nodes_unknown))
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

    solve = _solve_mix if mix else _solve_plain
    known = [n for n in cluster.nodes if n.occupancy_known]
    unknown_nodes = [n for n in cluster.nodes if not n.occupancy_known]
    # nodes that exist but cannot be read: absent for "fits", their upper bound for
    # "does not fit"; one with no bound could hold anything, so nothing is proven without it
    bounds = [u.bound for u in cluster.unreadable_nodes if u.bound is not None]
    unbounded = [u.name for u in cluster.unreadable_nodes if u.bound is None]
    unknown = [_bracketed(u, cluster) for u in unknown]
    solved = solve(planned, known, cfg)
    result = solved.packing
    considered: list[NodeState] = known
    if result.feasible is True:
        verdict = "unknown" if deferred else "fits"
    elif not unknown_nodes and not cluster.unreadable_nodes:
        verdict = "does-not-fit" if result.feasible is False else "unknown"
    elif unbounded:
        verdict = "unknown"
        result = _with_note(
            result,
            f"fits only if unreadable node(s) have room ({_names(unbounded)}); nothing bounds "
            "what they hold, so it cannot be proven not to fit",
        )
        solved = replace(solved, packing=result)
    else:
        optimistic_nodes = known + [n.as_empty() for n in unknown_nodes] + bounds
        optimistic = solve(planned, optimistic_nodes, cfg)
        if optimistic.packing.feasible is False:
            verdict, solved, considered = "does-not-fit", optimistic, optimistic_nodes
            result = solved.packing
        else:
            verdict = "unknown"
            if optimistic.packing.feasible is True:
                result = _with_unknown_note(result, optimistic.packing)
                solved = replace(solved, packing=result)
    violations = check_placement(
        solved.pods,
        solved.nodes,
        result.assignments,
        cards=dict(result.cards),
        extra_reasons=solved.extra_reasons,
    )
    violations += _layout_violations(solved.mig)
    if violations:  # pragma: no cover - the checkers guard the solver
        raise AssertionError(f"the solver produced an invalid placement: {violations}")

    if solved.unplaced is not None:
        from vfcore.placement.mig import could_host, mix_issues

        by_pod = {p.pod: p for p in planned}
        explained = []
        for u in solved.unplaced:
            kind: UnplacedKind = u.kind
            summary = u.summary
            hopeful = [
                n.name
                for n in [*unknown_nodes, *bounds]
                if n not in considered and could_host(by_pod[u.pod], n)
            ] + unbounded
            fix = u.fix
            if hopeful:
                kind = "unknown"
                summary += _hopeful_note(hopeful)
                fix = None  # a fix would rest on a guess about those nodes
            explained.append(Unplaced(u.pod, kind, summary, u.reasons, fix))
        unplaced = tuple(explained)
        problems += mix_issues(all_pods, cluster.nodes, unplaced=result.unplaced)
        problems += solved.issues
    else:
        unplaced = _explain_unplaced(
            planned, cluster, considered, result, [*unknown_nodes, *bounds], unbounded
        )
    unplaced += tuple(
        Unplaced(
            p.pod,
            "unplanned",
            f"{p.pod} takes a MIG slice of >= {p.gpu_memory_mib} MiB: not planned here",
            (),
            "plan with --gpu-mode mix to plan MIG layouts",
        )
        for p in deferred
    )
    fix = (
        _smallest_fix(planned, cluster, considered, result, cfg, mix=mix)
        if verdict == "does-not-fit" and not cluster.unreadable_nodes
        else None  # with unreadable nodes, the fix would rest on a guess of their size
    )
    if mix and verdict == "does-not-fit":
        hopeless = {u.pod for u in unplaced if u.kind == "unresolvable"}
        problems += _busy_cards([p for p in planned if p.pod not in hopeless], considered, cfg)
    realised = _realised_cluster(cluster, solved.nodes) if mix else cluster
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
        mig=solved.mig,
    )
    if predict_scheduler:
        out = _with_scheduler(out, solved.pods, realised)
    return out


# -- the two solvers: plain packing, and mix mode (MIG layouts with the packing) ------------------


@dataclass(frozen=True, slots=True)
class _Solved:
    """A packing, and the problem it solved as the checker and the scheduler model see it."""

    packing: PackingResult
    pods: tuple[PodRequest, ...]
    nodes: tuple[NodeState, ...]
    mig: MigPlan | None = None
    unplaced: tuple[Unplaced, ...] | None = None  # when the solver explains (mix mode)
    issues: tuple[Problem, ...] = ()  # mix mode's findings about the layouts
    extra_reasons: ExtraReasons | None = None


def _solve_plain(
    pods: Sequence[PodRequest], nodes: Sequence[NodeState], cfg: SolverConfig
) -> _Solved:
    return _Solved(pack(pods, nodes, config=cfg), tuple(pods), tuple(nodes))


def _solve_mix(
    pods: Sequence[PodRequest], nodes: Sequence[NodeState], cfg: SolverConfig
) -> _Solved:
    from vfcore.placement.mig import mix_reasons, pack_mix

    mixed = pack_mix(pods, nodes, config=cfg)
    return _Solved(
        mixed.packing,
        mixed.pods,
        mixed.nodes,
        mixed.mig,
        mixed.unplaced,
        mixed.issues,
        mix_reasons,
    )


def _layout_violations(mig: MigPlan | None) -> tuple[str, ...]:
    """Every planned card layout, re-checked by the independent layout checker."""
    if mig is None:
        return ()
    from vfcore.placement.mig import Placement, check_layout

    out: list[str] = []
    for node in mig.nodes:
        for card in node.cards:
            placed = [Placement(i.start, i.profile) for i in card.instances if i.start is not None]
            if node.family is not None and placed:
                out += [
                    f"{node.node} card {card.index}: {v}" for v in check_layout(node.family, placed)
                ]
    return tuple(out)


def _busy_cards(
    pods: Sequence[PodRequest], nodes: Sequence[NodeState], cfg: SolverConfig
) -> tuple[Problem, ...]:
    """Do nodes with GPU pods bound stand in the way? Two what-ifs, each with its fix.

    First: would the pods fit if those nodes partitioned their idle cards (how
    many are idle is known; which ones, kubectl does not say)? Else: would they
    fit if those nodes' GPU pods were gone (cards in use wiped)? ``pods`` leaves
    out the pods no node could ever hold (they fail either way).
    """
    from vfcore.placement.mig import pack_mix

    if not pods:
        return ()
    quick = replace(cfg, max_deterministic_time=min(cfg.max_deterministic_time, 5.0))
    by_name = {n.name: n for n in nodes}

    def blocking(mode: BusyNodes) -> list[str]:
        relaxed = pack_mix(pods, nodes, config=quick, busy_nodes=mode)
        if relaxed.packing.feasible is not True:
            return []
        out = []
        for node_plan in relaxed.mig.nodes:
            held = [
                f"{u} {r}"
                for r, u in (by_name[node_plan.node].requested or ())
                if u > 0 and (r == "nvidia.com/gpu" or r.startswith("nvidia.com/mig-"))
            ]
            if node_plan.touched and held:
                out.append(
                    f"{node_plan.node} ({node_plan.cards_reconfigured} card(s); "
                    f"{', '.join(held)} in use)"
                )
        return out

    idle = blocking("partition-idle-cards")
    if idle:
        return (
            Problem(
                "mig-busy-cards",
                "error",
                None,
                "the flow fits only if idle cards were partitioned on node(s) where GPU pods are "
                f"bound: {'; '.join(idle)}; kubectl cannot tell which of their cards the pods "
                "hold, and a layout change wipes a whole card, so vfcore does not plan it",
                "find the idle cards with `nvidia-smi` on those nodes and partition them "
                "yourself, or drain the nodes' GPU pods first, or add an idle MIG-capable node; "
                "then plan again",
            ),
        )
    wiped = blocking("drain")
    if wiped:
        return (
            Problem(
                "mig-busy-cards",
                "error",
                None,
                "the flow fits only if cards in use were re-partitioned on node(s): "
                f"{'; '.join(wiped)}; a layout change wipes a whole card, with the pods on it",
                "move or drain the GPU pods from those nodes (they must fit elsewhere), or add "
                "an idle MIG-capable node; then plan again",
            ),
        )
    return ()


def _realised_cluster(cluster: ClusterSnapshot, nodes: Sequence[NodeState]) -> ClusterSnapshot:
    """The cluster as it will advertise itself once the planned MIG layouts are applied."""
    after = {n.name: n for n in nodes}
    return replace(
        cluster,
        nodes=tuple(
            replace(n, allocatable=after[n.name].allocatable, gpu=after[n.name].gpu)
            if n.name in after and after[n.name].allocatable != n.allocatable
            else n
            for n in cluster.nodes
        ),
    )


def _names(names: Sequence[str]) -> str:
    return f"{', '.join(names[:3])}{'…' if len(names) > 3 else ''}"


def _hopeful_note(names: Sequence[str]) -> str:
    return (
        f"; {len(names)} node(s) of unknown occupancy or unreadable allocatable could hold it "
        f"({_names(names)})"
    )


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


def _with_scheduler(out: Plan, pods: Sequence[PodRequest], cluster: ClusterSnapshot) -> Plan:
    from vfcore.placement.scheduler import predict_for_plan

    report = predict_for_plan(pods, cluster, out)
    if cluster.unreadable_nodes:  # kube-scheduler would score those nodes too: nothing is sure
        names = [u.name for u in cluster.unreadable_nodes]
        reason = (
            f"node(s) {_names(names)} cannot be read; kube-scheduler would consider them "
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
    mode: str,
    runtime_class: str | None,
) -> tuple[Problem, ...]:
    out: list[Problem] = []
    pods = sorted(pods, key=lambda p: (p.node, p.replica, p.pod))  # input order must not matter
    gpu_pods = [p for p in pods if p.slice != "none"]
    if mode == "shared" and gpu_pods and runtime_class is None:
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
    if mode == "mix":  # idle MIG-capable cards can become what is missing
        from vfcore.placement.mig import advertisable

        advertised |= advertisable(cluster.nodes)
    # an unreadable node nothing bounds might advertise anything: "no node" is then unproven
    if cluster.nodes_unknown is None and all(u.bound for u in cluster.unreadable_nodes):
        missing: dict[str, list[str]] = defaultdict(list)
        for pod in pods:
            for resource, _ in pod.requests:
                if resource not in advertised:
                    missing[resource].append(pod.pod)
        for resource, names in sorted(missing.items()):
            out.append(
                Problem(
                    "resource-not-advertised",
                    "error",
                    None,
                    f"no node advertises {resource}, which {len(names)} pod(s) request "
                    f"({', '.join(names[:4])}{'…' if len(names) > 4 else ''})",
                    "install the device plugin that advertises it, or fix the resource name "
                    "(--gpu-resource-name)",
                )
            )
        for pod in pods:
            if any(u > 1 for r, u in pod.requests if r.startswith("nvidia.com/")):
                pools = sorted(
                    {n.gpu.sharing for n in cluster.nodes if n.gpu and n.gpu.sharing != "none"}
                )
                if pools and pod.replica == 0:
                    out.append(
                        Problem(
                            "shared-pool-multi-gpu",
                            "warning",
                            pod.node,
                            f"{pod.node} needs {max(u for _, u in pod.requests)} GPUs per pod, "
                            f"which the {'/'.join(pools)} pools cannot serve (they advertise "
                            "replicas of cards, not cards); only unshared nodes are eligible",
                            "run it on unshared GPU nodes, or split the model to one GPU per pod",
                        )
                    )
    return tuple(out)


# -- explaining what did not fit ------------------------------------------------------------------


def _placed_load(
    pods: Sequence[PodRequest], assignments: Sequence[tuple[str, str]]
) -> dict[str, dict[str, int]]:
    by_name = {p.pod: p for p in pods}
    load: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod_name_, node_name in assignments:
        for r, u in by_name[pod_name_].requests:
            load[node_name][r] += u
        load[node_name][PODS] += 1
    return load


def _explain_unplaced(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    considered: Sequence[NodeState],
    result: PackingResult,
    unknown_nodes: Sequence[NodeState] = (),
    unbounded: Sequence[str] = (),
) -> tuple[Unplaced, ...]:
    """Why each unplaced pod has no place, and the fix when one is certain.

    ``unknown_nodes`` are the nodes the verdict brackets (unknown occupancy, and
    the upper bounds of unreadable nodes); ``unbounded`` names unreadable nodes
    nothing bounds. A pod one of them could hold is ``unknown``, with no fix.
    """
    by_name = {p.pod: p for p in pods}
    load = _placed_load(pods, result.assignments)
    bounds = {n.name for n in cluster.unreadable_nodes if n.bound is not None}
    readable = [n for n in considered if n.name not in bounds]  # fixes name real nodes only
    out = []
    for name in result.unplaced:
        pod = by_name[name]
        per_node = [reasons_on(pod, n, load.get(n.name, {})) for n in considered]
        ever = any(could_ever_hold(pod, n) for n in [*cluster.nodes, *considered])
        fix = None if ever else _unresolvable_fix(pod, cluster)
        if ever:
            fix = _free_on_one_host(pod, readable, load)
        summary = summarise(name, len(considered), per_node)
        kind: UnplacedKind = "unschedulable" if ever else "unresolvable"
        hopeful = [
            n.name for n in unknown_nodes if n not in considered and could_ever_hold(pod, n)
        ] + list(unbounded)
        if hopeful:
            kind = "unknown"
            summary += _hopeful_note(hopeful)
            fix = None  # it may fit as it is: no fix rests on a guess
        out.append(
            Unplaced(
                pod=name,
                kind=kind,
                summary=summary,
                reasons=distinct_reasons(per_node),
                fix=fix,
            )
        )
    return tuple(out)


def _unresolvable_fix(pod: PodRequest, cluster: ClusterSnapshot) -> str:
    hosts = [*cluster.nodes, *(u.bound for u in cluster.unreadable_nodes if u.bound is not None)]
    biggest = {r: max((n.allocatable_of(r) for n in hosts), default=0) for r, _ in pod.requests}
    short = [
        f"{u} {r} (the largest host has {biggest[r]})" for r, u in pod.requests if u > biggest[r]
    ]
    if short:
        return (
            f"{pod.pod} needs {', '.join(short)} on one host: no node can ever hold it; "
            "use fewer GPUs per replica or add a larger node"
        )
    return f"no node is eligible for {pod.pod}: fix its selector/tolerations or the nodes' labels"


def _free_on_one_host(
    pod: PodRequest, nodes: Sequence[NodeState], load: Mapping[str, Mapping[str, int]]
) -> str | None:
    best: tuple[tuple[int, int], str, list[str]] | None = None
    for node in nodes:
        if not could_ever_hold(pod, node):
            continue
        short = shortfalls(pod, node, load.get(node.name, {}))
        needs = [
            f"{format_quantity(s.resource, s.short)} {s.resource}"
            for s in short
            if s.resource != PODS
        ]
        total = sum(s.short for s in short if s.resource != PODS)
        needs += ["1 pod slot" for s in short if s.resource == PODS]
        key = (len(needs), total)
        if best is None or key < best[0]:
            best = (key, node.name, needs)
    if best is None or not best[2]:
        return None
    return f"free {', '.join(best[2])} on {best[1]}"


def _smallest_fix(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    considered: Sequence[NodeState],
    result: PackingResult,
    cfg: SolverConfig,
    *,
    mix: bool = False,
) -> str | None:
    """The first of: one more node shaped like an existing one, or k more of them."""
    unplaced = [p for p in pods if p.pod in set(result.unplaced)]
    if not unplaced:
        return None
    could_hold: Callable[[PodRequest, NodeState], bool] = could_ever_hold
    solve = _solve_mix if mix else _solve_plain
    if mix:
        from vfcore.placement.mig import could_host

        could_hold = could_host
    templates: dict[tuple[object, ...], NodeState] = {}
    for node in sorted(cluster.nodes, key=lambda n: n.name):
        if not any(could_hold(p, node) for p in unplaced):
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
            trial = solve(pods, [*considered, *clones], quick).packing
            if trial.feasible is True:
                count = "one more node" if extra == 1 else f"{extra} more nodes"
                return f"add {count} shaped like {template.name} ({_describe(template)})"
    return None


def _describe(node: NodeState) -> str:
    parts = [
        f"{format_quantity(r, v)} {r}"
        for r, v in node.allocatable
        if r in ("cpu", "memory") or "/" in r
    ]
    return ", ".join(parts)


def _usage(
    pods: Sequence[PodRequest], cluster: ClusterSnapshot, assignments: Sequence[tuple[str, str]]
) -> tuple[NodeUsage, ...]:
    load = _placed_load(pods, assignments)
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
