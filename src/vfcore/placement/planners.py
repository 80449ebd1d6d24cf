"""One planner per GPU mode, behind one interface: what :func:`vfcore.plan_pods` asks of a mode.

:func:`planner_for` picks the planner once, from the parsed
:class:`~vfcore.flow.gpu_mode.GpuMode`; ``plan_pods`` then runs the same steps for
every mode (split the pods, solve on the nodes of known occupancy, bracket the
unknown ones, explain what did not fit, add the mode's findings) and never
asks which mode it is in.

- :class:`WholeCardPlanner` (``exclusive`` and ``shared``): the exact packing
  (:func:`vfcore.placement.packing.pack`). Pods that take a MIG slice are
  deferred: MIG layouts are planned in mix mode only.
- :class:`MixPlanner` (``mix``): MIG layouts planned with the packing
  (:func:`vfcore.placement.mig.pack_mix`, loaded on first use: it needs
  OR-Tools); nodes whose idle cards could be (re)partitioned count as
  advertising every profile, and a plan that does not fit says whether busy
  cards stand in the way.
- ``DraPlanner`` (``dra``, :mod:`vfcore.placement.dra.planner`, loaded on first
  use): every claim and its devices planned on the cluster's ResourceSlices;
  nodes whose devices are of unknown use, or unknown, are bracketed
  (:meth:`ModePlanner.bracket`).

Worked example: in exclusive mode a pod ``det/0`` that takes a MIG slice is
deferred (``unplanned``, with the fix "plan with --gpu-mode mix"); in mix
mode the same pod is planned on a MIG instance, and
``MixPlanner().realised(cluster, solved)`` is the cluster advertising the
planned layouts, on which the scheduler model then runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from vfcore.cluster import ClusterSnapshot, NodeState
from vfcore.errors import Problem
from vfcore.flow.gpu_mode import GpuMode
from vfcore.placement.claims import PodRequest
from vfcore.placement.fit import (
    FitReason,
    Ineligible,
    Unplaced,
    UnplacedKind,
    card_vram_mib,
    could_ever_hold,
    distinct_reasons,
    eligibility_reasons,
    gib,
    reasons_on,
    shortfalls,
    summarise,
)
from vfcore.placement.packing import ExtraReasons, PackingResult, SolverConfig, pack
from vfcore.quantity import PODS, format_human, format_quantity

if TYPE_CHECKING:
    from vfcore.placement.mig import MigPlan
    from vfcore.placement.mig.hosts import BusyNodes

__all__ = [
    "MixPlanner",
    "ModePlanner",
    "Solved",
    "WholeCardPlanner",
    "hopeful_note",
    "name_list",
    "placed_load",
    "planner_for",
    "readable_quantity",
]


@dataclass(frozen=True, slots=True)
class Solved:
    """A packing, and the problem it solved as the checker and the scheduler model see it.

    ``unplaced`` is set when the solver explains its unplaced pods itself (mix
    mode); ``issues`` are the solver's findings about the layouts.
    """

    packing: PackingResult
    pods: tuple[PodRequest, ...]
    nodes: tuple[NodeState, ...]
    mig: MigPlan | None = None
    unplaced: tuple[Unplaced, ...] | None = None
    issues: tuple[Problem, ...] = ()
    extra_reasons: ExtraReasons | None = None
    dra: object = None  # dra mode: the devices planned (vfcore.placement.dra.planner.DraSolution)


class ModePlanner(ABC):
    """What one GPU mode decides in a plan; the defaults are the whole-card behaviour."""

    mode: GpuMode

    def split(
        self, pods: Sequence[PodRequest]
    ) -> tuple[tuple[PodRequest, ...], tuple[PodRequest, ...]]:
        """``(planned, deferred)``: the pods this mode places, and those it leaves unplanned."""
        return (
            tuple(p for p in pods if p.slice != "mig"),
            tuple(p for p in pods if p.slice == "mig"),
        )

    @abstractmethod
    def solve(
        self,
        pods: Sequence[PodRequest],
        nodes: Sequence[NodeState],
        cfg: SolverConfig,
        *,
        optimistic: bool = False,
    ) -> Solved:
        """Place ``pods`` on ``nodes`` exactly; ``optimistic``: the "does not fit" end of the
        bracket (facts of unknown value taken at their most generous)."""

    def bracket(self, pods: Sequence[PodRequest], cluster: ClusterSnapshot) -> Any:
        """Nodes the mode itself cannot read (beyond their occupancy): an object with
        ``unknown`` and ``unbounded`` (name → reason) and ``facts`` (unknowns), or None."""
        return None

    @abstractmethod
    def could_hold(self, pod: PodRequest, node: NodeState) -> bool:
        """Could ``node`` ever hold ``pod`` (whatever is bound there) under this mode?"""

    def advertisable(self, nodes: Sequence[NodeState]) -> set[str]:
        """Resources nodes could advertise beyond their allocatable under this mode."""
        return set()

    @abstractmethod
    def explain(
        self,
        pods: Sequence[PodRequest],
        cluster: ClusterSnapshot,
        considered: Sequence[NodeState],
        solved: Solved,
        unknown_nodes: Sequence[NodeState] = (),
        unbounded: Sequence[str] = (),
    ) -> tuple[Unplaced, ...]:
        """Why each unplaced pod has no place, and the fix when one is certain.

        ``unknown_nodes`` are the nodes the verdict brackets (unknown occupancy,
        and the upper bounds of unreadable nodes); ``unbounded`` names unreadable
        nodes nothing bounds. A pod one of them could hold is ``unknown``, with no fix.
        """

    def layout_violations(self, solved: Solved) -> tuple[str, ...]:
        """What the independent checkers find wrong in the mode's own decisions (none: ``()``)."""
        return ()

    def findings(
        self, pods: Sequence[PodRequest], cluster: ClusterSnapshot, solved: Solved
    ) -> tuple[Problem, ...]:
        """The mode's problems with a plan (each with its fix)."""
        return ()

    def blocking_findings(
        self, pods: Sequence[PodRequest], nodes: Sequence[NodeState], cfg: SolverConfig
    ) -> tuple[Problem, ...]:
        """When the flow does not fit: what stands in the way that the mode can name."""
        return ()

    def realised(self, cluster: ClusterSnapshot, solved: Solved) -> ClusterSnapshot:
        """The cluster as it will advertise itself once the plan is applied."""
        return cluster


class WholeCardPlanner(ModePlanner):
    """``exclusive`` and ``shared``: the exact packing; MIG slices are not planned."""

    def __init__(self, mode: GpuMode) -> None:
        if mode is GpuMode.MIX:
            raise ValueError("mix mode plans MIG layouts: use MixPlanner")
        if mode is GpuMode.DRA:
            raise ValueError("dra mode plans claims on ResourceSlices: use planner_for")
        self.mode = mode

    def solve(
        self,
        pods: Sequence[PodRequest],
        nodes: Sequence[NodeState],
        cfg: SolverConfig,
        *,
        optimistic: bool = False,
    ) -> Solved:
        return Solved(pack(pods, nodes, config=cfg), tuple(pods), tuple(nodes))

    def could_hold(self, pod: PodRequest, node: NodeState) -> bool:
        return could_ever_hold(pod, node)

    def explain(
        self,
        pods: Sequence[PodRequest],
        cluster: ClusterSnapshot,
        considered: Sequence[NodeState],
        solved: Solved,
        unknown_nodes: Sequence[NodeState] = (),
        unbounded: Sequence[str] = (),
    ) -> tuple[Unplaced, ...]:
        return _explain_unplaced(
            pods, cluster, considered, solved.packing, unknown_nodes, unbounded
        )


class MixPlanner(ModePlanner):
    """``mix``: MIG layouts planned with the packing (OR-Tools, loaded on first use)."""

    mode = GpuMode.MIX

    def split(
        self, pods: Sequence[PodRequest]
    ) -> tuple[tuple[PodRequest, ...], tuple[PodRequest, ...]]:
        return tuple(pods), ()  # MIG pods are planned with the rest

    def solve(
        self,
        pods: Sequence[PodRequest],
        nodes: Sequence[NodeState],
        cfg: SolverConfig,
        *,
        optimistic: bool = False,
    ) -> Solved:
        from vfcore.placement.mig import mix_reasons, pack_mix

        mixed = pack_mix(pods, nodes, config=cfg)
        return Solved(
            mixed.packing,
            mixed.pods,
            mixed.nodes,
            mixed.mig,
            mixed.unplaced,
            mixed.issues,
            mix_reasons,
        )

    def could_hold(self, pod: PodRequest, node: NodeState) -> bool:
        from vfcore.placement.mig import could_host

        return could_host(pod, node)

    def advertisable(self, nodes: Sequence[NodeState]) -> set[str]:
        """Idle MIG-capable cards can become what is missing."""
        from vfcore.placement.mig import advertisable

        return advertisable(nodes)

    def explain(
        self,
        pods: Sequence[PodRequest],
        cluster: ClusterSnapshot,
        considered: Sequence[NodeState],
        solved: Solved,
        unknown_nodes: Sequence[NodeState] = (),
        unbounded: Sequence[str] = (),
    ) -> tuple[Unplaced, ...]:
        by_pod = {p.pod: p for p in pods}
        explained = []
        for u in solved.unplaced or ():
            hopeful = [
                n.name
                for n in unknown_nodes
                if n not in considered and self.could_hold(by_pod[u.pod], n)
            ] + list(unbounded)
            if hopeful:  # a fix would rest on a guess about those nodes
                u = replace(u, kind="unknown", summary=u.summary + hopeful_note(hopeful), fix=None)
            explained.append(u)
        return tuple(explained)

    def layout_violations(self, solved: Solved) -> tuple[str, ...]:
        """Every planned card layout, re-checked by the independent layout checker."""
        return _layout_violations(solved.mig)

    def findings(
        self, pods: Sequence[PodRequest], cluster: ClusterSnapshot, solved: Solved
    ) -> tuple[Problem, ...]:
        from vfcore.placement.mig import mix_issues

        return mix_issues(pods, cluster.nodes, unplaced=solved.packing.unplaced) + solved.issues

    def blocking_findings(
        self, pods: Sequence[PodRequest], nodes: Sequence[NodeState], cfg: SolverConfig
    ) -> tuple[Problem, ...]:
        return _busy_cards(pods, nodes, cfg)

    def realised(self, cluster: ClusterSnapshot, solved: Solved) -> ClusterSnapshot:
        return _realised_cluster(cluster, solved.nodes)


def planner_for(mode: GpuMode, cluster: ClusterSnapshot | None = None) -> ModePlanner:
    """The planner of a parsed mode: the one place a plan chooses by mode (DRA mode plans on
    ``cluster``'s ResourceSlices)."""
    if mode is GpuMode.DRA:
        from vfcore.placement.dra.planner import DraPlanner

        return DraPlanner(cluster if cluster is not None else ClusterSnapshot.of([]))
    return MixPlanner() if mode is GpuMode.MIX else WholeCardPlanner(mode)


# -- shared by the planners and the plan -------------------------------------------------------


def name_list(names: Sequence[str]) -> str:
    """Up to three names, then an ellipsis: ``a, b, c…``."""
    return f"{', '.join(names[:3])}{'…' if len(names) > 3 else ''}"


def hopeful_note(names: Sequence[str]) -> str:
    """What an unplaced pod's summary adds when bracketed nodes could hold it."""
    return (
        f"; {len(names)} node(s) of unknown occupancy or unreadable allocatable could hold it "
        f"({name_list(names)})"
    )


def placed_load(
    pods: Sequence[PodRequest], assignments: Sequence[tuple[str, str]]
) -> dict[str, dict[str, int]]:
    """Units of every resource (and pod slots) the assigned pods take, per node."""
    by_name = {p.pod: p for p in pods}
    load: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod_name_, node_name in assignments:
        for r, u in by_name[pod_name_].requests:
            load[node_name][r] += u
        load[node_name][PODS] += 1
    return load


# -- whole cards: explaining what did not fit ------------------------------------------------------


def _explain_unplaced(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    considered: Sequence[NodeState],
    result: PackingResult,
    unknown_nodes: Sequence[NodeState] = (),
    unbounded: Sequence[str] = (),
) -> tuple[Unplaced, ...]:
    """:meth:`ModePlanner.explain` for the exact packing: every node's fit reasons."""
    by_name = {p.pod: p for p in pods}
    load = placed_load(pods, result.assignments)
    bounds = {n.name for n in cluster.unreadable_nodes if n.bound is not None}
    readable = [n for n in considered if n.name not in bounds]  # fixes name real nodes only
    out = []
    # Pods of one shape get the same reasons against the same load: work them out once per
    # shape (90,000 unplaced replicas of ten nodes are ten explanations, not 90,000).
    by_shape: dict[
        tuple[object, ...], tuple[list[tuple[FitReason, ...]], bool, str | None, list[str]]
    ] = {}
    for name in result.unplaced:
        pod = by_name[name]
        if pod.shape not in by_shape:
            per_node_ = [
                reasons_on(pod, n, load.get(n.name, {})) or _card_vram_reason(pod, n, pods, result)
                for n in considered
            ]
            ever_ = any(could_ever_hold(pod, n) for n in [*cluster.nodes, *considered])
            free_fix = _free_on_one_host(pod, readable, load) if ever_ else None
            hopeful_ = [
                n.name for n in unknown_nodes if n not in considered and could_ever_hold(pod, n)
            ] + list(unbounded)
            by_shape[pod.shape] = (per_node_, ever_, free_fix, hopeful_)
        per_node, ever, fix, hopeful = by_shape[pod.shape]
        if not ever:
            fix = _unresolvable_fix(pod, cluster)
        summary = summarise(name, len(considered), per_node)
        kind: UnplacedKind = "unschedulable" if ever else "unresolvable"
        if hopeful:
            kind = "unknown"
            summary += hopeful_note(hopeful)
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


def readable_quantity(resource: str, units: int) -> str:
    """A quantity for a message: exact where short (``1Ti``, ``96``), else in human units.

    >>> readable_quantity("memory", 2**40), readable_quantity("memory", 16492126208)
    ('1Ti', '15.4Gi')
    >>> readable_quantity("cpu", 47900), readable_quantity("nvidia.com/gpu", 8)
    ('47.9', '8')
    """
    exact = format_quantity(resource, units)
    if exact.endswith(("Gi", "Ti")) or (exact.isdigit() and units < 10**6):
        return exact
    return format_human(resource, units)


def _card_vram_reason(
    pod: PodRequest, node: NodeState, pods: Sequence[PodRequest], result: PackingResult
) -> tuple[FitReason, ...]:
    """Why a pod that passes every filter still has no card on ``node``: the VRAM left per card.

    Time-sliced cards (and shared-mode cards) hold the VRAM their pods declare;
    the planned pods' load is read from the packing's card mapping.
    """
    vram = card_vram_mib(pod, node)
    gpu = node.gpu
    if not vram or gpu is None or not gpu.memory_mib or not gpu.count:
        return ()
    by_name = {p.pod: p for p in pods}
    placed_on = dict(result.assignments)
    used = [0] * gpu.count
    for name, card in result.cards:
        other = by_name.get(name)
        if other is not None and 0 <= card < gpu.count and placed_on.get(name) == node.name:
            used[card] += card_vram_mib(other, node)
    left = gpu.memory_mib - min(used)
    how = " (time-slicing)" if gpu.sharing == "time-slicing" else ""
    return (
        Ineligible(
            f"node(s) had too little VRAM left on any card{how}: {gib(vram)} asked, "
            f"at most {gib(left)} of {gib(gpu.memory_mib)} left after the planned pods"
        ),
    )


def _as_ready(node: NodeState) -> NodeState:
    """``node`` as if Ready: without the node lifecycle controller's condition taints."""
    kept = tuple(t for t in node.taints if t.key not in _CONDITION_TAINT_KEYS)
    return replace(node, ready=True, taints=kept)


_CONDITION_TAINT_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _unresolvable_fix(pod: PodRequest, cluster: ClusterSnapshot) -> str:
    hosts = [*cluster.nodes, *(u.bound for u in cluster.unreadable_nodes if u.bound is not None)]
    biggest = {r: max((n.allocatable_of(r) for n in hosts), default=0) for r, _ in pod.requests}
    short = [
        f"{readable_quantity(r, u)} {r} (the largest host has {readable_quantity(r, biggest[r])})"
        for r, u in pod.requests
        if u > biggest[r]
    ]
    if short:
        return (
            f"{pod.pod} needs {', '.join(short)} on one host: no node can ever hold it; "
            "ask for less per replica or add a larger node"
        )
    not_ready = sorted(
        n.name for n in cluster.nodes if not n.ready and not eligibility_reasons(pod, _as_ready(n))
    )
    if not_ready:
        return (
            f"{len(not_ready)} node(s) that could hold {pod.pod} are not Ready "
            f"({name_list(not_ready)}): the node lifecycle controller's not-ready taint keeps "
            "pods off; find out why (`kubectl describe node`), bring them back or replace them"
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


# -- mix mode ---------------------------------------------------------------------------------------


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
