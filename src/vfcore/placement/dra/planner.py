"""``dra`` mode's planner: the exact plan of claims behind :class:`~vfcore.placement.planners.ModePlanner`.

:func:`vfcore.plan` runs the same steps for every mode; in DRA mode this
planner places every pod and its devices (:func:`.planning.pack_dra`), says
which nodes the verdict must bracket (:meth:`DraPlanner.bracket`: devices of
unknown use — ``full`` for "fits", free for "does not fit" — and nodes whose
devices are unknown, which no "does not fit" may rest on), explains what did
not fit in kube-scheduler's words (``cannot allocate all claims``, with the
numbers), re-checks every device (:func:`.planning.check_devices`) and names
the problems (a DeviceClass that does not exist, a selector outside the CEL
subset, no device that a claim accepts).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from vfcore.cluster import ClusterSnapshot, NodeState, Unknown
from vfcore.errors import Problem
from vfcore.flow.gpu_mode import GpuMode
from vfcore.placement.claims import PodRequest
from vfcore.placement.dra.inventory import ACCEPT, ERROR, DraInventory, SelectorAnswers
from vfcore.placement.dra.planning import (
    DeviceRegions,
    DraPlan,
    NodeDevices,
    check_devices,
    pack_dra,
)
from vfcore.placement.fit import (
    FitReason,
    Ineligible,
    Unplaced,
    UnplacedKind,
    could_ever_hold,
    distinct_reasons,
    reasons_on,
    static_reasons,
    summarise,
)
from vfcore.placement.packing import SolverConfig
from vfcore.placement.planners import ModePlanner, Solved, hopeful_note, placed_load

__all__ = ["DraBracket", "DraPlanner", "DraSolution"]

Bracket = Literal["full", "empty"]


@dataclass(frozen=True, slots=True)
class DraSolution:
    """What :meth:`DraPlanner.solve` adds to a packing: the devices, and the inventory they
    were planned on (the checker re-reads it)."""

    plan: DraPlan
    inventory: DraInventory


@dataclass(frozen=True, slots=True)
class DraBracket:
    """The nodes a DRA verdict brackets: of unknown device use (``unknown``), and whose devices
    are unknown (``unbounded``), each with its reason; ``facts``: the unknown listings."""

    unknown: dict[str, str]
    unbounded: dict[str, str]
    facts: tuple[Unknown, ...] = ()


class DraPlanner(ModePlanner):
    """``dra``: every GPU pod's claim is planned on the cluster's ResourceSlices."""

    mode = GpuMode.DRA

    def __init__(self, cluster: ClusterSnapshot) -> None:
        self.cluster = cluster
        self._inventories: dict[tuple[Bracket, tuple[object, ...]], DraInventory] = {}
        self._answers = SelectorAnswers()

    def inventory(self, pods: Sequence[PodRequest], bracket: Bracket = "full") -> DraInventory:
        requests = tuple(sorted({p.dra for p in pods if p.dra is not None}))
        for (kind, known), inv in self._inventories.items():
            # with no device of unknown use, both brackets compile alike
            if (kind == bracket or not inv.unknown_nodes) and set(requests) <= set(known):
                return inv
        inv = DraInventory(self.cluster, requests, unknown_as=bracket, answers=self._answers)
        self._inventories[bracket, requests] = inv
        return inv

    def split(
        self, pods: Sequence[PodRequest]
    ) -> tuple[tuple[PodRequest, ...], tuple[PodRequest, ...]]:
        return tuple(pods), ()

    # brackets ---------------------------------------------------------------------------------
    def bracket(self, pods: Sequence[PodRequest], cluster: ClusterSnapshot) -> DraBracket:
        dra_pods = [p for p in pods if p.dra is not None]
        if not dra_pods:
            return DraBracket({}, {})
        inv = self.inventory(pods)
        probes = list({p.shape: p for p in dra_pods}.values())

        def eligible(node: NodeState) -> bool:
            return any(not static_reasons(p, node) for p in probes)

        unknown = {n: r for n, r in inv.unknown_nodes.items() if self._eligible(n, eligible)}
        unbounded = {n: r for n, r in inv.unbounded_nodes.items() if self._eligible(n, eligible)}
        judged = [r for r in inv.requests if r.problem is not None and not r.missing_class]
        if judged:
            reason = f"claims cannot be judged: {judged[0].problem}"
            for node in cluster.nodes:
                if eligible(node):
                    unbounded.setdefault(node.name, reason)
        facts = inv.facts
        listed = tuple(
            u
            for u in facts.unknowns
            if u.what in ("resourceslices", "deviceclasses", "resourceclaims")
        )
        return DraBracket(unknown, unbounded, listed)

    def _eligible(self, name: str, test: object) -> bool:
        for node in self.cluster.nodes:
            if node.name == name:
                return bool(test(node))  # type: ignore[operator]
        return False

    # solving ----------------------------------------------------------------------------------
    def solve(
        self,
        pods: Sequence[PodRequest],
        nodes: Sequence[NodeState],
        cfg: SolverConfig,
        *,
        optimistic: bool = False,
    ) -> Solved:
        inv = self.inventory(pods, "empty" if optimistic else "full")
        packing, plan = pack_dra(pods, nodes, inv, blocks_of=self._blocks_of(inv), config=cfg)
        return Solved(packing, tuple(pods), tuple(nodes), dra=DraSolution(plan, inv))

    @staticmethod
    def _blocks_of(inv: DraInventory) -> Callable[[str], tuple[int, ...]]:
        def blocks_of(name: str) -> tuple[int, ...]:
            if name in inv.blocks:
                return tuple(b.type_id for b in inv.blocks[name])
            base, sep, _ = name.partition("+new")  # a node the smallest fix adds
            return tuple(b.type_id for b in inv.fresh_blocks(base)) if sep else ()

        return blocks_of

    def could_hold(self, pod: PodRequest, node: NodeState) -> bool:
        if not could_ever_hold(pod, node):
            return False
        if pod.dra is None:
            return True
        inv = self.inventory([pod])
        r = inv.request_index(pod.dra)
        devices = NodeDevices(
            DeviceRegions(inv, [r]), [b.type_id for b in inv.fresh_blocks(node.name)]
        )
        return devices.serves((pod.dra.count,))

    # explaining --------------------------------------------------------------------------------
    def explain(
        self,
        pods: Sequence[PodRequest],
        cluster: ClusterSnapshot,
        considered: Sequence[NodeState],
        solved: Solved,
        unknown_nodes: Sequence[NodeState] = (),
        unbounded: Sequence[str] = (),
    ) -> tuple[Unplaced, ...]:
        by_name = {p.pod: p for p in pods}
        result = solved.packing
        load = placed_load(pods, result.assignments)
        solution = solved.dra if isinstance(solved.dra, DraSolution) else None
        inv = solution.inventory if solution is not None else self.inventory(pods)
        requests = sorted({inv.request_index(p.dra) for p in pods if p.dra is not None})
        regions = DeviceRegions(inv, requests)
        blocks_of = self._blocks_of(inv)
        demand_on: dict[str, list[int]] = defaultdict(lambda: [0] * len(requests))
        for pod_name, host in result.assignments:
            pod = by_name[pod_name]
            if pod.dra is not None:
                demand_on[host][requests.index(inv.request_index(pod.dra))] += pod.dra.count
        out = []
        explained: dict[
            tuple[object, ...], tuple[list[tuple[FitReason, ...]], bool, list[str]]
        ] = {}
        for name in result.unplaced:
            pod = by_name[name]
            if pod.shape not in explained:
                per_node = []
                for node in considered:
                    reasons: tuple[FitReason, ...] = reasons_on(pod, node, load.get(node.name, {}))
                    if not reasons and pod.dra is not None:
                        reasons = self._device_reason(
                            pod, node, inv, regions, requests, demand_on, blocks_of
                        )
                    per_node.append(reasons)
                ever = any(self.could_hold(pod, n) for n in [*cluster.nodes, *considered])
                hopeful = [
                    n.name for n in unknown_nodes if n not in considered and self.could_hold(pod, n)
                ] + list(unbounded)
                explained[pod.shape] = (per_node, ever, hopeful)
            per_node, ever, hopeful = explained[pod.shape]
            summary = summarise(name, len(considered), per_node)
            kind: UnplacedKind = "unschedulable" if ever else "unresolvable"
            fix = None
            if not ever and pod.dra is not None:
                fix = (
                    f"no node can ever allocate {pod.dra.describe()}: check the DeviceClass and "
                    "the selectors against the ResourceSlices (kubectl get resourceslices -o yaml)"
                )
            if hopeful:
                kind = "unknown"
                summary += hopeful_note(hopeful)
                fix = None
            out.append(Unplaced(name, kind, summary, distinct_reasons(per_node), fix))
        return tuple(out)

    @staticmethod
    def _device_reason(
        pod: PodRequest,
        node: NodeState,
        inv: DraInventory,
        regions: DeviceRegions,
        requests: list[int],
        demand_on: dict[str, list[int]],
        blocks_of: Callable[[str], tuple[int, ...]],
    ) -> tuple[FitReason, ...]:
        assert pod.dra is not None
        r = inv.request_index(pod.dra)
        j = requests.index(r)
        demand = list(demand_on[node.name])
        demand[j] += pod.dra.count
        devices = NodeDevices(regions, blocks_of(node.name))
        if devices.serves(tuple(demand)):
            return ()
        return (Ineligible("cannot allocate all claims"),)

    # checks and findings -----------------------------------------------------------------------
    def layout_violations(self, solved: Solved) -> tuple[str, ...]:
        solution = solved.dra
        if not isinstance(solution, DraSolution):
            return ()
        return check_devices(
            solved.pods, dict(solved.packing.assignments), solution.plan, solution.inventory
        )

    def findings(
        self, pods: Sequence[PodRequest], cluster: ClusterSnapshot, solved: Solved
    ) -> tuple[Problem, ...]:
        dra_pods = [p for p in pods if p.dra is not None]
        if not dra_pods:
            return ()
        inv = self.inventory(pods)
        out: list[Problem] = []
        if cluster.dra is None or inv.facts.slices_unknown is not None:
            out.append(
                Problem(
                    "dra-facts-unknown",
                    "warning",
                    None,
                    "the cluster's ResourceSlices are unknown "
                    f"({inv.facts.slices_unknown or 'none were read'}): no DRA claim can be "
                    "planned on them",
                    "dump them with `kubectl get resourceslices -o json > DIR/resourceslices.json` "
                    "(and deviceclasses.json, resourceclaims.json) beside nodes.json",
                )
            )
        by_request: dict[int, list[str]] = defaultdict(list)
        for p in dra_pods:
            by_request[inv.request_index(p.dra)].append(p.node)  # type: ignore[arg-type]
        for info in inv.requests:
            nodes = sorted(set(by_request.get(info.index, [])))
            if not nodes:
                continue
            shown = ", ".join(nodes[:3]) + ("…" if len(nodes) > 3 else "")
            if info.missing_class:
                out.append(
                    Problem(
                        "dra-device-class-missing",
                        "error",
                        None,
                        f"{info.problem}, which the claims of {shown} name: kube-scheduler "
                        "refuses their pods",
                        "install the DRA driver's DeviceClasses, or pass --dra-device-class / "
                        "--dra-mig-device-class with a class the cluster has",
                    )
                )
            elif info.problem is not None and "dra-cel" in info.problem:
                out.append(
                    Problem(
                        "dra-cel-unsupported",
                        "error",
                        None,
                        f"the claims of {shown} cannot be judged: {info.problem}",
                        "vfcore evaluates the CEL subset docs/dra.md lists; a selector outside "
                        "it is never guessed",
                    )
                )
            elif info.problem is None and inv.facts.slices_unknown is None:
                answers = {
                    t.answers[info.index][d]
                    for node_blocks in inv.blocks.values()
                    for b in node_blocks
                    for t in [inv.types[b.type_id]]
                    for d in range(t.size)
                }
                if ACCEPT not in answers and not inv.unbounded_nodes:
                    out.append(
                        Problem(
                            "dra-no-devices",
                            "error",
                            None,
                            f"no device published in any ResourceSlice is accepted by "
                            f"{info.request.describe()} (the claims of {shown})",
                            "check the DeviceClass and the selectors against "
                            "`kubectl get resourceslices -o yaml`, or the driver's installation",
                        )
                    )
                if ERROR in answers:
                    out.append(
                        Problem(
                            "dra-cel-error",
                            "warning",
                            None,
                            f"a selector of {info.request.describe()} errs on some published "
                            "devices (a missing attribute): where the allocator reaches such a "
                            "device, kube-scheduler fails the pod's attempt",
                            'guard the attribute with `"name" in device.attributes[domain]`',
                        )
                    )
        for note in inv.notes:
            out.append(
                Problem(
                    "dra-unmodelled-devices",
                    "info",
                    None,
                    note,
                    "plan node-local devices only, or see docs/dra.md (what is not modelled)",
                )
            )
        return tuple(out)
