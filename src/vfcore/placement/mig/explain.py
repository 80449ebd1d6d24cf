"""Explaining what did not fit in mix mode: per-pod reasons, fixes and plan-level issues."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from vfcore.cluster import NodeState
from vfcore.errors import Problem
from vfcore.placement.claims import PodRequest
from vfcore.placement.fit import (
    FitReason,
    Ineligible,
    Unplaced,
    distinct_reasons,
    free_units,
    shortfalls,
    static_reasons,
    summarise,
)
from vfcore.placement.mig.catalogue import GIB, GPU_RESOURCE, MIG_FAMILIES, MIG_RESOURCE_PREFIX
from vfcore.placement.mig.choice import choice_for_mib
from vfcore.placement.mig.hosts import (
    NO_GPU,
    SINGLE_STRATEGY,
    Host,
    analyse_host,
    could_host,
    covers,
    is_gpu_resource,
)
from vfcore.placement.mig.model import MixContext
from vfcore.placement.mig.results import MigPlan
from vfcore.quantity import PODS

__all__ = ["advertisable", "mix_issues"]


# -- explaining what did not fit --------------------------------------------------------------


def explain_unplaced(
    model: MixContext,
    realised: Sequence[NodeState],
    by_pod: Mapping[str, PodRequest],
    placed: list[tuple[PodRequest, int, str | None]],
    unplaced: Sequence[str],
    profile_of: Mapping[str, str],
) -> tuple[Unplaced, ...]:
    hosts = model.hosts
    load: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod, i, _p in placed:
        for r, u in by_pod[pod.pod].requests:
            load[i][r] += u
        load[i][PODS] += 1
    out = []
    for name in unplaced:
        pod = by_pod[name]
        per_node = []
        ever = False
        for host in hosts:
            reasons, could = _reasons(pod, host, realised[host.index], load[host.index], profile_of)
            per_node.append(reasons)
            ever = ever or could
        fix = _fix(pod, hosts, ever, profile_of)
        out.append(
            Unplaced(
                pod=name,
                kind="unschedulable" if ever else "unresolvable",
                summary=summarise(name, len(hosts), per_node),
                reasons=distinct_reasons(per_node),
                fix=fix,
            )
        )
    return tuple(out)


def _reasons(
    pod: PodRequest,
    host: Host,
    realised: NodeState,
    extra: Mapping[str, int],
    profile_of: Mapping[str, str],
) -> tuple[tuple[FitReason, ...], bool]:
    """Why ``pod`` is not on ``host`` now, and whether the host could ever hold it."""
    static = static_reasons(pod, host.state)
    if static:
        return tuple(Ineligible(r) for r in static), False
    reasons: list[FitReason] = []
    if pod.slice == "mig":
        if not host.hosts_mig or host.family is None:
            return (Ineligible(host.mig_reason or NO_GPU),), False
        demand = pod.gpu_memory_mib or 0
        choice = choice_for_mib(host.family, demand)
        if choice.profile is None:
            return (
                Ineligible(
                    f"node(s) had no MIG profile with {demand / GIB:g} GiB usable "
                    f"(largest: {choice.largest.name}, {choice.largest.usable_gib:g} GiB)"
                ),
            ), False
        p = profile_of.get(pod.node)
        if p is not None and not covers(host.family, p, demand):
            reasons.append(Ineligible(f"node(s) had no {p} with {demand / GIB:g} GiB usable"))
        elif (
            not host.touchable
            and p is not None
            and free_units(realised, MIG_RESOURCE_PREFIX + p, extra) < 1
        ):
            reasons.append(Ineligible("node(s) had cards in use (not re-partitioned)"))
    elif not host.whole_ok and pod.request(GPU_RESOURCE):
        return (Ineligible(host.whole_reason or SINGLE_STRATEGY),), False
    reasons += shortfalls(pod, realised, extra)
    return tuple(reasons), could_host(pod, host.state)


def _fix(
    pod: PodRequest, hosts: Sequence[Host], ever: bool, profile_of: Mapping[str, str]
) -> str | None:
    eligible = [h for h in hosts if not static_reasons(pod, h.state)]
    if pod.slice == "mig":
        mig_hosts = [h for h in eligible if h.hosts_mig and h.family is not None]
        if not eligible:
            return f"no node is eligible for {pod.pod}: fix its selector/tolerations or the nodes' labels"
        if not mig_hosts:
            return (
                "no eligible node can host MIG slices: run the device plugin with the mixed MIG "
                "strategy (migStrategy=mixed) on MIG-capable nodes, or give "
                f"{pod.node} whole cards (gpu_count, no gpu_memory_gib)"
            )
        if not ever:
            best = max(
                (
                    (choice_for_mib(h.family, 1).largest, h.family.name)
                    for h in mig_hosts
                    if h.family
                ),
                key=lambda t: (t[0].usable_mib, t[1]),
            )
            return (
                f"lower {pod.node}'s gpu_memory_gib to at most {best[0].usable_gib:g} "
                f"({best[0].name} on {best[1]} has that much usable), or give it a whole card "
                "(gpu_count without gpu_memory_gib)"
            )
        busy = sorted(h.name for h in mig_hosts if not h.touchable and h.touch_reason)
        if busy:
            shown = ", ".join(busy[:3]) + ("…" if len(busy) > 3 else "")
            return (
                f"cards on {shown} are not re-partitioned while GPU pods are bound there; "
                "drain them (so their cards are idle) or add an idle MIG-capable node"
            )
        return None
    if not ever:
        if not eligible:
            return f"no node is eligible for {pod.pod}: fix its selector/tolerations or the nodes' labels"
        return (
            f"{pod.pod} needs {', '.join(f'{u} {r}' for r, u in pod.requests if is_gpu_resource(r))} "
            "on one node: no node can ever hold it; use fewer GPUs per replica or add a larger node"
        )
    return None


def plan_issues(
    model: MixContext, plan: MigPlan, profile_of: Mapping[str, str]
) -> tuple[Problem, ...]:
    out: list[Problem] = []
    inferred = [
        n
        for n in plan.nodes
        if n.touched and n.family is not None and MIG_FAMILIES[n.family].starts_inferred
    ]
    if inferred:
        names = [n.node for n in inferred]
        families = ", ".join(sorted({str(n.family) for n in inferred}))
        usable = sorted(
            {
                str(n.family)
                for n in inferred
                if all(p.usable_inferred for p in MIG_FAMILIES[str(n.family)].profiles)
            }
        )
        also = f", and {', '.join(usable)} usable memory from the profile names" if usable else ""
        out.append(
            Problem(
                "mig-starts-inferred",
                "warning",
                None,
                f"the plan re-partitions cards of {len(names)} {families} node(s) "
                f"({', '.join(names[:4])}{'…' if len(names) > 4 else ''}); their start slots are "
                f"inferred (no `nvidia-smi mig -lgipp` capture){also}",
                "run `nvidia-smi mig -lgipp` and `-lgip` on one of them and compare with "
                "docs/mig.md before applying the mig-parted config",
            )
        )
    assumed = [n.node for n in plan.nodes if n.indices_assumed]
    if assumed:
        out.append(
            Problem(
                "mig-card-indices-assumed",
                "warning",
                None,
                f"{len(assumed)} node(s) ({', '.join(assumed[:4])}{'…' if len(assumed) > 4 else ''}) "
                "have cards in different states today (MIG-enabled and MIG-disabled, or MIG "
                "layouts kubectl cannot attribute), and kubectl does not say which index is "
                "which; their mig-parted configs list every card, so any order ends with the "
                "card states planned, and the plan counts the most cards any order disrupts",
                "check with `nvidia-smi --query-gpu=index,mig.mode.current --format=csv` on each "
                "and, knowing the order, list only the cards that change (the nodes are idle, "
                "so at worst idle cards are wiped), or add a node whose cards are all alike",
            )
        )
    for flow_node, p in sorted(profile_of.items()):
        demand = max(
            (g.demand_mib for g in model.groups if g.mig and g.flow_node == flow_node), default=0
        )
        probe = next(g.pods[0] for g in model.groups if g.mig and g.flow_node == flow_node)
        short = sorted(
            h.name
            for h in model.hosts
            if h.hosts_mig
            and h.family is not None
            and h.family.profile(p) is not None
            and not covers(h.family, p, demand)
            and not static_reasons(probe, h.state)
        )
        if short:
            out.append(
                Problem(
                    "mig-profile-ambiguous",
                    "warning",
                    flow_node,
                    f"{flow_node} requests {MIG_RESOURCE_PREFIX}{p} for {demand / GIB:g} GiB, but "
                    f"on {', '.join(short[:4])}{'…' if len(short) > 4 else ''} that profile has "
                    "less usable memory; kube-scheduler may place its pods there",
                    f"add a node selector on nvidia.com/gpu.product for {flow_node}, or raise its "
                    "gpu_memory_gib to the next profile",
                )
            )
    return tuple(out)


def advertisable(nodes: Iterable[NodeState]) -> set[str]:
    """Resources some node could advertise once its idle cards are (re)partitioned.

    ``nvidia.com/gpu`` on a re-partitionable node with cards, and every
    profile of its family as ``nvidia.com/mig-<profile>``.
    """
    out: set[str] = set()
    for i, n in enumerate(nodes):
        host = analyse_host(i, n)
        if host.touchable and host.family is not None and host.cards:
            out.add(GPU_RESOURCE)
            out |= {p.resource for p in host.family.profiles}
    return out


def mix_issues(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeState],
    *,
    unplaced: Iterable[str] | None = None,
) -> tuple[Problem, ...]:
    """Problems of a mix-mode flow on a cluster that need no solver, each with its fix.

    ``mig-multi-gpu`` (a multi-GPU pod cannot use MIG slices; given
    ``unplaced``, only for flow nodes with an unplaced pod),
    ``mig-single-strategy`` (a single-strategy pool cannot host mixed profiles),
    ``mig-demand-unresolvable`` (no card of the cluster can host a demand).
    """
    left = None if unplaced is None else set(unplaced)
    pods = sorted(pods, key=lambda p: (p.node, p.replica, p.pod))
    out: list[Problem] = []
    hosts = [analyse_host(i, n) for i, n in enumerate(sorted(nodes, key=lambda n: n.name))]
    mig_pods = [p for p in pods if p.slice == "mig"]
    has_mig_cards = any(
        h.state.gpu is not None
        and (h.state.gpu.mig_capable or h.state.gpu.mig_strategy in ("mixed", "single"))
        for h in hosts
    )
    seen: set[str] = set()
    for pod in pods:
        k = pod.request(GPU_RESOURCE)
        relevant = left is None or any(p.pod in left for p in pods if p.node == pod.node)
        if k > 1 and has_mig_cards and pod.node not in seen and relevant:
            seen.add(pod.node)
            out.append(
                Problem(
                    "mig-multi-gpu",
                    "warning",
                    pod.node,
                    f"{pod.node} needs {k} GPUs per pod: a process cannot combine MIG slices, "
                    f"so each pod takes {k} whole MIG-disabled cards on one node "
                    "(nvidia.com/gpu), which partitioned cards cannot provide",
                    f"leave {k} cards of a node unpartitioned per replica, or fit the model "
                    "on one card and declare gpu_memory_gib instead of gpu_count",
                )
            )
    single = [
        h.name for h in hosts if h.state.gpu is not None and h.state.gpu.mig_strategy == "single"
    ]
    if single and any(p.slice in ("mig", "whole") for p in pods):
        mixed_exists = any(h.hosts_mig for h in hosts)
        out.append(
            Problem(
                "mig-single-strategy",
                "error" if mig_pods and not mixed_exists else "warning",
                None,
                f"{len(single)} node(s) ({', '.join(single[:4])}{'…' if len(single) > 4 else ''}) "
                "use the device plugin's single MIG strategy: each advertises one profile as "
                "nvidia.com/gpu, so it cannot host mixed profiles, and a whole-card pod there "
                "would get a MIG device; mix mode plans nothing on them",
                "switch them to the mixed strategy (device plugin migStrategy=mixed, or the GPU "
                "Operator's mig.strategy=mixed) to use them in mix mode",
            )
        )
    families = {h.family.name: h.family for h in hosts if h.hosts_mig and h.family is not None}
    flow_nodes: dict[str, int] = {}
    for pod in mig_pods:
        flow_nodes[pod.node] = max(flow_nodes.get(pod.node, 0), pod.gpu_memory_mib or 0)
    for flow_node, demand in sorted(flow_nodes.items()):
        if not families:
            out.append(
                Problem(
                    "mig-demand-unresolvable",
                    "error",
                    flow_node,
                    f"{flow_node} needs a MIG slice of {demand / GIB:g} GiB, but no node can host "
                    "MIG slices (none runs the mixed MIG strategy with a catalogued MIG card: "
                    f"{', '.join(MIG_FAMILIES)})",
                    "enable MIG with the mixed strategy on MIG-capable nodes, or give "
                    f"{flow_node} whole cards (gpu_count, no gpu_memory_gib)",
                )
            )
            continue
        choices = [choice_for_mib(f, demand) for _, f in sorted(families.items())]
        if not any(c.resolvable for c in choices):
            best = max(choices, key=lambda c: c.largest.usable_mib)
            out.append(
                Problem(
                    "mig-demand-unresolvable",
                    "error",
                    flow_node,
                    f"{flow_node} needs {demand / GIB:g} GiB, more than any MIG profile of this "
                    f"cluster holds: {'; '.join(c.message for c in choices)}",
                    f"lower gpu_memory_gib to at most {best.largest.usable_gib:g} "
                    f"({best.largest.name} on {best.family}), or give it a whole card "
                    "(gpu_count without gpu_memory_gib)",
                )
            )
    return tuple(out)
