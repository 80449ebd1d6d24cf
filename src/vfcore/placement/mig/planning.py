"""Mix-mode planning: :func:`pack_mix`, and from a CP-SAT solution to a :class:`MigPlan`.

Pods with ``gpu_memory_gib`` take one MIG instance, pods with ``gpu_count``
whole MIG-disabled cards, all in one exact model (:mod:`.model`) with the pods'
cpu, memory, selectors and taints; with the layouts fixed,
:func:`vfcore.placement.packing.pack` places the pods exactly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from vfcore.cluster import NodeState
from vfcore.placement.claims import PodRequest
from vfcore.placement.mig.apply import (
    ApplyOutcome,
    State,
    WorstCase,
    apply_entries,
    worst_over_orders,
)
from vfcore.placement.mig.catalogue import GPU_RESOURCE, MIG_FAMILIES, MIG_RESOURCE_PREFIX
from vfcore.placement.mig.choice import ProfileChoice, choice_for_mib
from vfcore.placement.mig.config import config_name
from vfcore.placement.mig.explain import explain_unplaced, plan_issues
from vfcore.placement.mig.hosts import (
    BusyNodes,
    CardState,
    Host,
    analyse_host,
    drained,
    is_gpu_resource,
    mix_reasons,
    pod_groups,
)
from vfcore.placement.mig.layouts import fit_layout
from vfcore.placement.mig.model import (
    WIDEN,
    MixContext,
    MixModel,
    MixSolution,
    combined_report,
    eligibility,
    key_order,
    node_types,
    option_label,
    relevant_profiles,
    unit_widths,
)
from vfcore.placement.mig.results import (
    NOTHING_TO_APPLY,
    CardAction,
    MigCard,
    MigInstance,
    MigNodePlan,
    MigPlan,
    MixPacking,
)
from vfcore.placement.packing import (
    PackingResult,
    SolverConfig,
    SolverReport,
    pack,
)

__all__ = ["pack_mix"]


def pack_mix(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeState],
    *,
    config: SolverConfig | None = None,
    busy_nodes: BusyNodes = "keep",
) -> MixPacking:
    """Place pods in mix mode, exactly: MIG pods on MIG instances, whole-card pods on cards.

    Nodes are taken as they are (an unknown occupancy counts as nothing bound;
    :func:`vfcore.placement.plan.plan` brackets unknowns). A node with GPU pods bound is
    never re-partitioned (``busy_nodes="keep"``); to tell whether such nodes
    stand in the way, ``"partition-idle-cards"`` lets them partition their idle
    MIG-disabled cards, and ``"drain"`` plans as if their GPU pods were gone.

    How: (1) an aggregated CP-SAT model over node *types* (identical nodes
    merged) chooses each flow node's profile and how many cards of each type
    take each layout, minimising cards reconfigured, then nodes touched; it is a
    relaxation, so its infeasibility proves the pods do not fit and its bound
    is a lower bound. (2) The card changes are given to as few nodes as
    possible. (3) With the layouts fixed, :func:`vfcore.placement.packing.pack` places
    the pods exactly on what the nodes will advertise. If (2)–(3) fail, the
    per-node model decides (exact, slower).
    """
    cfg = config or SolverConfig()
    ordered = sorted(nodes, key=lambda n: n.name)
    hosts = [
        analyse_host(i, drained(n) if busy_nodes == "drain" else n, busy_nodes)
        for i, n in enumerate(ordered)
    ]
    groups = pod_groups(pods)
    candidates = eligibility(groups, hosts)
    ctx = MixContext(groups, hosts, candidates, relevant_profiles(groups, hosts), cfg)
    if not pods:
        report = SolverReport("OPTIMAL", "bounds", objective=0.0)
        return _assemble(ctx, {}, [], {}, set(), PackingResult(True, (), (), report), 0)
    types = node_types(ctx)
    proofs = tuple(
        f"the {g.count} pod(s) shaped like {g.pods[0].pod} have no node that can host them"
        for g in groups
        if not (g.pairs if g.mig else g.eligible)
    )
    if proofs:
        return _infeasible(ctx, types, proofs, None)
    agg = MixModel(ctx, types).solve(require_all=True)
    if agg.status == "INFEASIBLE":
        proof = (
            "cp-sat proved it infeasible: the nodes' MIG and whole-card capacity cannot hold "
            "the pods even summed over identical nodes",
        )
        return _infeasible(ctx, types, proof, agg.report)
    if agg.status not in ("OPTIMAL", "FEASIBLE"):
        packing = PackingResult(None, (), tuple(sorted(p.pod for p in pods)), agg.report)
        return _assemble(ctx, _choices_of(ctx, types, agg), [], {}, set(), packing, None)
    profile_of = _choices_of(ctx, types, agg)
    quick = replace(
        cfg, optimize=False, max_deterministic_time=min(cfg.max_deterministic_time, 2.0)
    )
    last: PackingResult | None = None
    tried: set[tuple[tuple[int, int], ...]] = set()
    for widen in WIDEN:
        widths = unit_widths(types, agg, widen)
        if widths in tried:
            continue
        tried.add(widths)
        cards_after, touched = _disaggregate(ctx, types, agg, dict(widths))
        realised_nodes = [
            _realised_node(h, cards_after.get(h.index), h.index in touched) for h in hosts
        ]
        realised_pods = [_realised_pod(p, profile_of) for g in groups for p in g.pods]
        placing = pack(realised_pods, realised_nodes, config=quick, extra_reasons=mix_reasons)
        last = placing
        if placing.feasible is True:
            report = combined_report(agg, placing, widen)
            packing = PackingResult(True, placing.assignments, (), report)
            placed = _placed_from(ctx, placing.assignments, profile_of)
            return _assemble(
                ctx, profile_of, placed, cards_after, touched, packing, agg.lower_bound
            )
    singles = [[h] for t in types for h in t]
    full = MixModel(ctx, singles).solve(require_all=True)
    if full.status in ("OPTIMAL", "FEASIBLE"):
        profile_of = _choices_of(ctx, singles, full)
        cards_after, touched = _disaggregate(ctx, singles, full)
        placed = _placed_from_counts(ctx, singles, full)
        report = replace(
            full.report,
            objective=float(sum(_changed(ctx, singles, full).values())),
            bound=float(max(agg.lower_bound or 0, full.lower_bound or 0)),
            notes=(*agg.report.notes, "per-node model (the aggregated layouts did not pack)"),
        )
        packing = PackingResult(
            True, tuple(sorted((p.pod, hosts[i].name) for p, i, _ in placed)), (), report
        )
        lower = max(agg.lower_bound or 0, full.lower_bound or 0)
        return _assemble(ctx, profile_of, placed, cards_after, touched, packing, lower)
    if full.status == "INFEASIBLE":
        return _infeasible(
            ctx, types, ("cp-sat proved it infeasible (per-node model)",), full.report
        )
    assert last is not None
    report = replace(full.report, notes=(*full.report.notes, "timed out: the verdict is unknown"))
    placed = _placed_from(ctx, last.assignments, profile_of)
    unplaced = tuple(sorted(p.pod for p in pods if p.pod not in dict(last.assignments)))
    packing = PackingResult(None, last.assignments, unplaced, report)
    cards_after, touched = _disaggregate(ctx, types, agg)
    return _assemble(ctx, profile_of, placed, cards_after, touched, packing, agg.lower_bound)


def _infeasible(
    ctx: MixContext,
    types: list[list[int]],
    proofs: tuple[str, ...],
    first: SolverReport | None,
) -> MixPacking:
    """Proven not to fit: place as many pods as the aggregated layouts allow, to explain the rest."""
    partial = MixModel(ctx, types).solve(require_all=False)
    profile_of = _choices_of(ctx, types, partial)
    cards_after, touched = _disaggregate(ctx, types, partial)
    realised_nodes = [
        _realised_node(h, cards_after.get(h.index), h.index in touched) for h in ctx.hosts
    ]
    realised_pods = [_realised_pod(p, profile_of) for g in ctx.groups for p in g.pods]
    quick = replace(
        ctx.config,
        optimize=False,
        max_deterministic_time=min(ctx.config.max_deterministic_time, 5.0),
    )
    placing = pack(realised_pods, realised_nodes, config=quick, extra_reasons=mix_reasons)
    source = first or partial.report
    report = replace(
        source,
        status="INFEASIBLE",
        method="bounds" if first is None else "cp-sat",
        objective=None,
        bound=None,
        wall_s=source.wall_s + partial.report.wall_s + placing.report.wall_s,
        notes=(
            *source.notes,
            "partial placement: as many pods as possible, to explain the rest",
        ),
    )
    placed = _placed_from(ctx, placing.assignments, profile_of)
    names = dict(placing.assignments)
    unplaced = tuple(sorted(p.pod for g in ctx.groups for p in g.pods if p.pod not in names))
    packing = PackingResult(False, placing.assignments, unplaced, report, (), proofs)
    return _assemble(ctx, profile_of, placed, cards_after, touched, packing, None)


# -- from a solution to a plan --------------------------------------------------------------------


def _choices_of(ctx: MixContext, units: list[list[int]], sol: MixSolution) -> dict[str, str]:
    """Each MIG flow node's profile: the one its counted pods use, else its first candidate."""
    out: dict[str, str] = {}
    for (g, _u, p), n in sorted(sol.x.items(), key=lambda kv: key_order(kv[0])):
        if p is not None and n:
            out.setdefault(ctx.groups[g].flow_node, p)
    for flow_node, names in sorted(ctx.candidates.items()):
        if names:
            out.setdefault(flow_node, names[0])
    return out


def _changed(ctx: MixContext, units: list[list[int]], sol: MixSolution) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for u, rows in sol.rows.items():
        rep = ctx.hosts[units[u][0]]
        for gi, option, n in rows:
            if gi == -1 or option != rep.groups[gi][0]:
                out[u] += n
    return dict(out)


def _disaggregate(
    ctx: MixContext,
    units: list[list[int]],
    sol: MixSolution,
    widths: Mapping[int, int] | None = None,
) -> tuple[dict[int, list[tuple[CardState | str, CardState]]], set[int]]:
    """Give each unit's card changes to its nodes, round-robin, each layout evenly.

    Over the last ``widths[u]`` nodes of the type (default: as many as the
    model says it touches, the fewest). Returns, per touched node, every card
    as (state before, state after) in index order (see :func:`_host_cards`),
    and the set of touched nodes.
    """
    cards_after: dict[int, list[tuple[CardState | str, CardState]]] = {}
    touched: set[int] = set()
    for u, members in enumerate(units):
        rep = ctx.hosts[members[0]]
        if not rep.touchable:
            continue
        per_group: dict[int, list[CardState]] = defaultdict(list)
        for gi, option, n in sorted(sol.rows.get(u, ()), key=lambda t: (t[0], option_label(t[1]))):
            if gi == -1 or option != rep.groups[gi][0]:
                per_group[gi].extend([option] * n)
        assigned: dict[int, dict[int, list[CardState]]] = defaultdict(lambda: defaultdict(list))
        count = (widths or {}).get(u) or sol.touched_nodes.get(u) or len(members)
        chosen = members[len(members) - min(count, len(members)) :]
        cursor = 0
        for gi, changes in sorted(per_group.items()):
            for option in changes:  # a node gets at most ceil(changes / T) <= its own cards
                assigned[chosen[cursor % len(chosen)]][gi].append(option)
                cursor += 1
        for h, mine in sorted(assigned.items()):
            touched.add(h)
            cards_after[h] = _host_cards(ctx.hosts[h], mine)
    return cards_after, touched


def _host_cards(
    host: Host, changed: Mapping[int, list[CardState]]
) -> list[tuple[CardState | str, CardState]]:
    """Every card of a touched node as (before, after), in the order the config numbers them.

    MIG-enabled cards first (those attributed a layout, then the unattributed
    block, marked ``"?"``), then MIG-disabled ones; within each, reconfigured
    cards before kept ones.
    """
    sections: list[tuple[int, CardState | str, int]] = [
        (gi, state, count) for gi, (state, count) in enumerate(host.groups) if state is not None
    ]
    if host.block is not None:
        sections.append((-1, "?", host.block[1]))
    sections += [
        (gi, None, count) for gi, (state, count) in enumerate(host.groups) if state is None
    ]
    out: list[tuple[CardState | str, CardState]] = []
    for gi, before, count in sections:
        mine = sorted(changed.get(gi, ()), key=option_label)
        out.extend((before, option) for option in mine)
        kept = count - len(mine)
        if kept and before != "?":
            out.extend([(before, before)] * kept)  # type: ignore[list-item]
    return out


def _placed_from(
    ctx: MixContext, assignments: Iterable[tuple[str, str]], profile_of: Mapping[str, str]
) -> list[tuple[PodRequest, int, str | None]]:
    index = {h.name: h.index for h in ctx.hosts}
    pods = {p.pod: p for g in ctx.groups for p in g.pods}
    out = []
    for pod_name, node_name in sorted(assignments):
        pod = pods[pod_name]
        out.append(
            (pod, index[node_name], profile_of.get(pod.node) if pod.slice == "mig" else None)
        )
    return out


def _placed_from_counts(
    ctx: MixContext, units: list[list[int]], sol: MixSolution
) -> list[tuple[PodRequest, int, str | None]]:
    out = []
    for g in ctx.groups:
        targets = sorted(
            (ctx.hosts[units[u][0]].name, units[u][0], p or "")
            for (gg, u, p), n in sol.x.items()
            if gg == g.index
            for _ in range(n)
        )
        for pod, (_name, h, p) in zip(g.pods, targets, strict=False):
            out.append((pod, h, p or None))
    return out


def _assemble(
    ctx: MixContext,
    profile_of: Mapping[str, str],
    placed: list[tuple[PodRequest, int, str | None]],
    cards_after: Mapping[int, list[tuple[CardState | str, CardState]]],
    touched: set[int],
    packing: PackingResult,
    lower: int | None,
) -> MixPacking:
    hosts = ctx.hosts
    card_plans = _card_plans(hosts, cards_after, touched, placed)
    realised_nodes = tuple(
        _realised_node(h, cards_after.get(h.index), h.index in touched) for h in hosts
    )
    realised_pods = tuple(
        sorted(
            (_realised_pod(p, profile_of) for g in ctx.groups for p in g.pods),
            key=lambda p: p.pod,
        )
    )
    by_pod = {p.pod: p for p in realised_pods}
    plan = _mig_plan(ctx, card_plans, placed, profile_of, lower, touched, cards_after)
    if packing.feasible is not True:
        plan = plan.withhold(
            "the flow does not fit"
            if packing.feasible is False
            else "the solver could not decide whether the flow fits"
        )
    unplaced = explain_unplaced(ctx, realised_nodes, by_pod, placed, packing.unplaced, profile_of)
    return MixPacking(
        packing=packing,
        pods=realised_pods,
        nodes=realised_nodes,
        mig=plan,
        unplaced=unplaced,
        issues=plan_issues(ctx, plan, profile_of),
    )


def _card_plans(
    hosts: Sequence[Host],
    cards_after: Mapping[int, list[tuple[CardState | str, CardState]]],
    touched: set[int],
    placed: list[tuple[PodRequest, int, str | None]],
) -> dict[int, tuple[MigCard, ...]]:
    plans: dict[int, tuple[MigCard, ...]] = {}
    for h in sorted(touched):
        host = hosts[h]
        assert host.family is not None
        mig_pods = sorted((pod.pod, p) for pod, i, p in placed if i == h and p is not None)
        whole_pods = sorted(
            (pod.pod, pod.request(GPU_RESOURCE))
            for pod, i, p in placed
            if i == h and p is None and pod.request(GPU_RESOURCE)
        )
        _entries, outcome, _worst = apply_of(host, cards_after[h])
        cards: list[dict[str, Any]] = []
        for card in outcome.cards:
            before, after = cards_after[h][card.index]
            if after is None:
                action: CardAction = "disable" if card.disrupted else "keep"
                if before is None:
                    action = "keep"
                cards.append({"index": card.index, "action": action, "instances": []})
                continue
            if not card.disrupted:
                instances = [[name, None, None] for name, c in after for _ in range(c)]
                cards.append({"index": card.index, "action": "keep", "instances": instances})
                continue
            fit = fit_layout(host.family, dict(after))
            assert fit.placements is not None
            action = (
                "partition"
                if before is None
                else ("recreate" if before == after else "repartition")
            )
            cards.append(
                {
                    "index": card.index,
                    "action": action,
                    "instances": [[pl.profile, pl.start, None] for pl in fit.placements],
                }
            )
        for pod_name, p in mig_pods:  # one working mapping; the device plugin picks its own
            slot = next(
                (
                    inst
                    for c in cards
                    for inst in c["instances"]
                    if inst[0] == p and inst[2] is None
                ),
                None,
            )
            if slot is not None:
                slot[2] = pod_name
        whole_cards = [c for c in cards if cards_after[h][c["index"]][1] is None]
        cursor = 0
        for pod_name, k in whole_pods:
            for c in whole_cards[cursor : cursor + k]:
                c.setdefault("pods", []).append(pod_name)
            cursor += k
        plans[h] = tuple(
            MigCard(
                index=c["index"],
                action=c["action"],
                mig_enabled=cards_after[h][c["index"]][1] is not None,
                instances=tuple(MigInstance(n, s, pod) for n, s, pod in c["instances"]),
                pods=tuple(c.get("pods", ())),
            )
            for c in cards
        )
    return plans


def _realised_node(
    host: Host, cards: list[tuple[CardState | str, CardState]] | None, touched: bool
) -> NodeState:
    node = host.state
    if not touched or cards is None:
        return node
    whole = sum(1 for _, after in cards if after is None)
    instances: dict[str, int] = defaultdict(int)
    for _, after in cards:
        for p, c in after or ():
            instances[p] += c
    alloc = {r: u for r, u in node.allocatable if not is_gpu_resource(r)}
    if whole:
        alloc[GPU_RESOURCE] = whole
    for p, c in instances.items():
        alloc[MIG_RESOURCE_PREFIX + p] = c
    gpu = node.gpu
    if gpu is not None:
        gpu = replace(gpu, mig_profiles=tuple(sorted(instances.items())))
    return replace(node, allocatable=tuple(sorted(alloc.items())), gpu=gpu)


def _realised_pod(pod: PodRequest, profile_of: Mapping[str, str]) -> PodRequest:
    if pod.slice != "mig" or pod.node not in profile_of:
        return pod
    requests = dict(pod.requests)
    requests[MIG_RESOURCE_PREFIX + profile_of[pod.node]] = 1
    return replace(pod, requests=tuple(sorted(requests.items())))


def _mig_plan(
    model: MixContext,
    card_plans: Mapping[int, tuple[MigCard, ...]],
    placed: list[tuple[PodRequest, int, str | None]],
    profile_of: Mapping[str, str],
    lower: int | None,
    touched: set[int],
    cards_after: Mapping[int, list[tuple[CardState | str, CardState]]],
) -> MigPlan:
    hosts = model.hosts
    nodes: list[MigNodePlan] = []
    pool_pods: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for pod, i, p in placed:
        if p is not None and i not in touched:
            pool_pods[i].append((pod.pod, p))
    for host in hosts:
        h = host.index
        family = host.family.name if host.family else None
        if h in touched:
            plan_node = MigNodePlan(
                node=host.name,
                family=family,
                touched=True,
                config_name=config_name(host.name),
                indices_assumed=not host.order_known,
                cards=card_plans[h],
            )
            _entries, outcome, worst = apply_of(host, cards_after[h])
            nodes.append(
                replace(
                    plan_node,
                    disrupted=len(outcome.disrupted) if worst is None else worst.most_disrupted,
                    mode_change=outcome.reset_possible
                    or (worst is not None and worst.reset_possible),
                )
            )
        elif pool_pods.get(h):
            pool = tuple(
                sorted(
                    (r[len(MIG_RESOURCE_PREFIX) :], u)
                    for r, u in host.free.items()
                    if r.startswith(MIG_RESOURCE_PREFIX) and u > 0
                )
            )
            nodes.append(
                MigNodePlan(
                    node=host.name,
                    family=family,
                    touched=False,
                    pool=pool,
                    pool_pods=tuple(sorted(pool_pods[h])),
                    note=None if host.touchable else host.touch_reason,
                )
            )
    choices: list[tuple[str, ProfileChoice]] = []
    families = sorted({h.family.name for h in hosts if h.hosts_mig and h.family is not None})
    seen: set[str] = set()
    for g in model.groups:
        if not g.mig or g.flow_node in seen or not g.demand_mib:
            continue
        seen.add(g.flow_node)
        choices.extend(
            (g.flow_node, choice_for_mib(MIG_FAMILIES[f], g.demand_mib)) for f in families
        )
    resources = tuple(sorted((f, MIG_RESOURCE_PREFIX + p) for f, p in profile_of.items()))
    pod_resources = tuple(
        sorted(
            (pod.pod, MIG_RESOURCE_PREFIX + profile_of[pod.node])
            for g in model.groups
            if g.mig
            for pod in g.pods
            if pod.node in profile_of
        )
    )
    reconfigured = sum(n.cards_reconfigured for n in nodes)
    notes = []
    if any(hosts[h].family is not None and hosts[h].family.starts_inferred for h in touched):  # type: ignore[union-attr]
        notes.append(
            "start slots of a family without an -lgipp capture (H200, H100-96GB, B200, A30, "
            "RTX PRO 6000) are inferred: confirm them with `nvidia-smi mig -lgipp` on the node "
            "before applying"
        )
    if any(n.indices_assumed for n in nodes):
        notes.append(
            "card order unknown on nodes marked indices_assumed (kubectl does not say which "
            "card is MIG-enabled): their config lists every card, so any order ends with the "
            "card states shown, and cards_reconfigured counts the most any order disrupts"
        )
    resetting = [n.node for n in nodes if n.mode_change]
    if resetting:
        notes.append(
            f"MIG mode changes on {', '.join(resetting)}: where the driver cannot switch a "
            "card in place, mig-parted resets every GPU of the node"
        )
    return MigPlan(
        nodes=tuple(nodes),
        resources=resources,
        pod_resources=pod_resources,
        choices=tuple(choices),
        cards_reconfigured=reconfigured,
        nodes_touched=len(touched),
        cards_lower_bound=lower,
        notes=tuple(notes),
        config_withheld=None if touched else NOTHING_TO_APPLY,
    )


def apply_of(
    host: Host, cards: Sequence[tuple[CardState | str, CardState]]
) -> tuple[list[dict[str, Any]], ApplyOutcome, WorstCase | None]:
    """A touched node's config entries, played by the apply model on the plan's card order.

    Where the order is unknown, also on every order (``WorstCase``), and the
    outcome shown is the plan's order with phase 1 (the mode phase) forced
    whenever some order triggers it.
    """
    before: list[State] = [b for b, _ in cards]  # type: ignore[misc]
    after: list[CardState] = [a for _, a in cards]
    listed = [i for i in range(len(cards)) if not host.order_known or before[i] != after[i]]
    by_state: dict[tuple[bool, CardState], list[int]] = {}
    for i in listed:
        by_state.setdefault((after[i] is not None, after[i]), []).append(i)
    entries: list[dict[str, Any]] = []
    for (enabled, state), devices in sorted(by_state.items(), key=lambda kv: kv[1][0]):
        entry: dict[str, Any] = {"devices": devices, "mig-enabled": enabled}
        if enabled:
            entry["mig-devices"] = dict(state or ())
        entries.append(entry)
    if host.order_known:
        return entries, apply_entries(before, entries), None
    worst = worst_over_orders(before, entries)
    return entries, apply_entries(before, entries, mode_phase=worst.reset_possible), worst
