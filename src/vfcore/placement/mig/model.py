"""The CP-SAT model of mix-mode planning (:class:`MixModel`), over node types, in named steps.

The solver is imported on first use; this module only builds the model and
reads its solution (:class:`MixSolution`), with the problem's context
(:class:`MixContext`).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from vfcore.errors import InvalidInputError
from vfcore.placement.fit import static_reasons
from vfcore.placement.mig.catalogue import GPU_RESOURCE, MIG_FAMILIES, MIG_RESOURCE_PREFIX
from vfcore.placement.mig.choice import choice_for_mib
from vfcore.placement.mig.hosts import CardState, Host, PodGroup, covers, is_gpu_resource
from vfcore.placement.mig.layouts import maximal_layouts
from vfcore.placement.packing import (
    PackingResult,
    SolverConfig,
    SolverReport,
    Status,
)
from vfcore.quantity import PODS

__all__ = []


#: Deterministic seconds for the cards-only solve with CP-SAT's default linearization, before
#: it goes on with full linearization (which proves the cards of mixed-state nodes faster, and
#: idle ones slower); and for the tie-breaks (nodes touched, mode changes) at the card count.
QUICK = 0.3
TIE_BREAKS = 1.0

#: How far past the fewest nodes the card changes may spread when the pods do not fit
#: the nodes they touch (their cpu, memory or pod slots): +0, +1, +25 %, +50 %, every node.
WIDEN: tuple[float, ...] = (0.0, 1e-9, 0.25, 0.5, float("inf"))


def unit_widths(
    units: list[list[int]], sol: MixSolution, widen: float
) -> tuple[tuple[int, int], ...]:
    out = []
    for u, members in enumerate(units):
        fewest = sol.touched_nodes.get(u, 0)
        if not fewest:
            continue
        if math.isinf(widen):
            wider = len(members)
        elif widen == 0:
            wider = fewest
        else:
            wider = max(fewest + 1, math.ceil(fewest * (1 + widen)))
        out.append((u, min(len(members), wider)))
    return tuple(out)


@dataclass(slots=True)
class MixContext:
    groups: list[PodGroup]
    hosts: list[Host]
    candidates: dict[str, tuple[str, ...]]
    relevant: dict[str, tuple[str, ...]]
    config: SolverConfig


def combined_report(agg: MixSolution, placing: PackingResult, widen: float) -> SolverReport:
    notes = [
        *agg.report.notes,
        f"layouts: {agg.report.status} with {agg.cards_changed} card(s) reconfigured "
        f"(lower bound {agg.lower_bound})",
        f"pods placed on the planned layouts by {placing.report.method} ({placing.report.status})",
    ]
    if widen:
        notes.append(
            "card changes spread over more than the fewest nodes (on the fewest, the pods' "
            "cpu, memory or pod slots did not fit)"
        )
    return SolverReport(
        status=agg.report.status,
        method="cp-sat",
        objective=float(agg.cards_changed),
        bound=None if agg.lower_bound is None else float(agg.lower_bound),
        wall_s=agg.report.wall_s + placing.report.wall_s,
        deterministic=agg.report.deterministic and placing.report.deterministic,
        timed_out=agg.report.timed_out,
        variables=agg.report.variables + placing.report.variables,
        notes=tuple(notes),
    )


def node_types(ctx: MixContext) -> list[list[int]]:
    """Interchangeable nodes: same card states, free resources, eligibility (a block: alone)."""
    eligible_for: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for g in ctx.groups:
        for i in g.eligible:
            eligible_for[i].append((g.index, ""))
        for i, p in g.pairs:
            eligible_for[i].append((g.index, p))
    types: dict[tuple[object, ...], list[int]] = {}
    for host in ctx.hosts:
        if host.index not in eligible_for:
            continue
        key: tuple[object, ...] = (
            host.touchable,
            host.family.name if host.family else None,
            tuple(host.groups),
            tuple(sorted(host.pool.items())),
            host.cards,
            tuple(sorted(host.free.items())),
            host.free_pods,
            tuple(sorted(eligible_for[host.index])),
        )
        if not host.order_known:  # its cost is not additive over nodes: never merged
            key = (host.index,)
        types.setdefault(key, []).append(host.index)
    return sorted(types.values(), key=lambda members: members[0])


def eligibility(groups: list[PodGroup], hosts: list[Host]) -> dict[str, tuple[str, ...]]:
    """Fill each group's eligible hosts / (host, profile) pairs; return each flow node's candidates."""
    candidates: dict[str, set[str]] = defaultdict(set)
    mig_hosts: dict[int, list[int]] = {}
    for g in groups:
        probe = g.pods[0]
        ok = [h.index for h in hosts if not static_reasons(probe, h.state)]
        if not g.mig:
            g.eligible = [i for i in ok if hosts[i].whole_ok or not g.requests.get(GPU_RESOURCE)]
            continue
        mig_hosts[g.index] = [i for i in ok if hosts[i].hosts_mig and g.demand_mib > 0]
        for i in mig_hosts[g.index]:
            family = hosts[i].family
            assert family is not None
            choice = choice_for_mib(family, g.demand_mib)
            if choice.profile is not None:
                candidates[g.flow_node].add(choice.profile.name)
    for g in groups:
        if not g.mig:
            continue
        names = sorted(candidates.get(g.flow_node, ()))
        for i in mig_hosts[g.index]:
            family = hosts[i].family
            assert family is not None
            g.pairs.extend((i, p) for p in names if covers(family, p, g.demand_mib))
    return {f: tuple(sorted(c)) for f, c in sorted(candidates.items())}


def relevant_profiles(groups: list[PodGroup], hosts: list[Host]) -> dict[str, tuple[str, ...]]:
    """Per family, the profiles some pod could take there."""
    relevant: dict[str, set[str]] = defaultdict(set)
    for g in groups:
        for i, p in g.pairs:
            family = hosts[i].family
            assert family is not None
            relevant[family.name].add(p)
        for r in g.requests:
            if r.startswith(MIG_RESOURCE_PREFIX):
                for i in g.eligible:
                    family = hosts[i].family
                    name = r[len(MIG_RESOURCE_PREFIX) :]
                    if family is not None and family.profile(name) is not None:
                        relevant[family.name].add(name)
    return {f: tuple(sorted(ps)) for f, ps in relevant.items()}


@dataclass(slots=True)
class MixSolution:
    status: Status
    x: dict[tuple[int, int, str | None], int]  # (group, unit, profile or None) -> pods
    rows: dict[int, list[tuple[int, CardState, int]]]  # unit -> [(card group | -1 block, state, n)]
    report: SolverReport
    lower_bound: int | None
    cards_changed: int = 0
    touched_nodes: dict[int, int] = field(default_factory=dict)  # unit -> nodes it touches


class MixModel:
    """The CP-SAT model over *units* (a node type: identical nodes, or one node), in named steps.

    Per unit: pods of each group (and profile) it takes; how many of its cards
    keep their state or take each maximal layout; how many of its nodes it
    touches. With every unit a single node the model is exact; with identical
    nodes merged it is a relaxation (resources summed over the type).
    """

    def __init__(self, ctx: MixContext, units: list[list[int]]) -> None:
        self.ctx = ctx
        self.groups = ctx.groups
        self.hosts = ctx.hosts
        self.units = units
        self.rep = [ctx.hosts[members[0]] for members in units]
        self.size = [len(members) for members in units]
        unit_of = {h: u for u, members in enumerate(units) for h in members}
        self.unit_of = unit_of
        self.options: dict[str, list[CardState]] = {
            name: [*maximal_layouts(MIG_FAMILIES[name], profiles), None]
            for name, profiles in sorted(ctx.relevant.items())
        }

    def _options_for(self, host: Host) -> list[CardState]:
        assert host.family is not None
        return self.options.get(host.family.name, [None])

    def _upper(self, g: PodGroup, u: int) -> int:
        host, m = self.rep[u], self.size[u]
        best = min(g.count, m * max(host.free_pods, 0))
        for r, units in g.requests.items():
            if units <= 0 or (host.touchable and is_gpu_resource(r)):
                continue
            best = min(best, m * (max(host.free.get(r, 0), 0) // units))
        return max(best, 0)

    def solve(self, *, require_all: bool) -> MixSolution:
        try:
            from ortools.sat.python import cp_model
        except ImportError:  # pragma: no cover - depends on the installation
            raise InvalidInputError(
                "solver-not-installed",
                "planning MIG layouts needs OR-Tools CP-SAT, which is not installed",
                "pip install 'vfcore[solver]'",
            ) from None

        self.model = cp_model.CpModel()
        self.wall_s = 0.0
        self.det_s = 0.0
        self._add_pod_counts(require_all)
        self._add_profile_choice()
        self._add_card_layouts()
        self._add_capacity()
        self._add_symmetry_breaking()
        self._add_objective(require_all)

        cfg = self.ctx.config
        budget = cfg.max_deterministic_time if require_all else min(cfg.max_deterministic_time, 5.0)
        lexicographic = require_all and self.has_objective
        if lexicographic:
            # cards first, proven on their own; then nodes and mode changes at that card count
            self.model.minimize(sum(self.reconf.values()))
        solver, code = self._run(min(budget, QUICK) if lexicographic else budget)
        if lexicographic and budget > QUICK and code in (cp_model.FEASIBLE, cp_model.UNKNOWN):
            # not proven quickly: go on with the LP relaxation of every constraint (the
            # min and the big-M of touched nodes), from the solution found
            if code == cp_model.FEASIBLE:
                for var in self._all_vars():
                    self.model.add_hint(var, solver.value(var))
            solver, code = self._run(budget - self.det_s, linearization=2)
            self.model.clear_hints()  # type: ignore[no-untyped-call]
        found = code in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        lower: int | None = None
        objective: float | None = None
        bound: float | None = None
        if found and lexicographic:
            cards_found = round(solver.objective_value)
            lower = max(0, math.ceil(solver.best_objective_bound - 1e-6))
            first = solver
            for var in self._all_vars():
                self.model.add_hint(var, solver.value(var))
            self.model.add(sum(self.reconf.values()) <= cards_found)
            self.model.minimize(self.secondary)
            # the tie-breaks get a short budget: proving the fewest nodes is as hard as the
            # cards were before the cut, and a plan's promise is its card count
            second, code2 = self._run(max(min(budget - self.det_s, TIE_BREAKS), 0.1))
            if code2 in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                solver = second
                if code != cp_model.OPTIMAL or code2 != cp_model.OPTIMAL:
                    code = cp_model.FEASIBLE
                bound = self.big * lower + (
                    second.best_objective_bound if lower == cards_found else 0
                )
            else:
                solver = first
                code = cp_model.FEASIBLE
                bound = float(self.big * lower)
            objective = self.big * cards_found + self._secondary_value(solver)
        status: Status = solver.status_name(code)
        x: dict[tuple[int, int, str | None], int] = {}
        cards: dict[int, list[tuple[int, CardState, int]]] = defaultdict(list)
        changed = 0
        touched_nodes: dict[int, int] = {}
        if found:
            for key, var in self.x.items():
                v = solver.value(var)
                if v:
                    x[key] = v
            for (u, gi, option), var in self.n.items():
                v = solver.value(var)
                if v:
                    cards[u].append((gi, option, v))
            changed = sum(solver.value(r) for r in self.reconf.values())
            touched_nodes = {u: solver.value(t) for u, t in self.touched.items()}
            if require_all and not lexicographic:
                lower = changed
        if found and self.has_objective and not lexicographic:
            objective = solver.objective_value
            bound = solver.best_objective_bound
        touchable = sum(self.size[u] for u in range(len(self.units)) if self.rep[u].touchable)
        report = SolverReport(
            status=status,
            method="cp-sat",
            objective=objective,
            bound=bound,
            wall_s=self.wall_s,
            deterministic=cfg.is_deterministic,
            timed_out=code == cp_model.UNKNOWN,
            variables=len(self.x) + len(self.n) + len(self.touched) + len(self.keep_block),
            notes=(
                f"mix model: {sum(self.size)} node(s) in {len(self.units)} type(s), "
                f"{touchable} re-partitionable; {sum(len(v) - 1 for v in self.options.values())} "
                "maximal card layout(s)",
            ),
        )
        return MixSolution(status, x, dict(cards), report, lower, changed, touched_nodes)

    def _run(self, deterministic_time: float, linearization: int | None = None) -> tuple[Any, Any]:
        from ortools.sat.python import cp_model

        solver = cp_model.CpSolver()
        cfg = self.ctx.config
        solver.parameters.catch_sigint_signal = False  # Ctrl-C is the caller's (see packing)
        solver.parameters.num_workers = cfg.num_workers
        solver.parameters.random_seed = cfg.random_seed
        solver.parameters.max_deterministic_time = deterministic_time
        if linearization is not None:
            solver.parameters.linearization_level = linearization
        if cfg.max_time_s is not None:
            solver.parameters.max_time_in_seconds = max(cfg.max_time_s - self.wall_s, 0.01)
        code = solver.solve(self.model)
        self.wall_s += solver.wall_time
        self.det_s += solver.response_proto.deterministic_time
        return solver, code

    def _all_vars(self) -> list[Any]:
        return [
            *self.x.values(),
            *self.use.values(),
            *self.n.values(),
            *self.keep_block.values(),
            *self.touched.values(),
            *self.reconf.values(),
        ]

    def _secondary_value(self, solver: Any) -> int:
        return int(
            self.nodes_weight * sum(solver.value(t) for t in self.touched.values())
            + sum(solver.value(v) for v in self.mode_changes)
        )

    def _add_pod_counts(self, require_all: bool) -> None:
        m = self.model
        self.x: dict[tuple[int, int, str | None], Any] = {}
        self.placed: list[Any] = []
        for g in self.groups:
            keys: dict[tuple[int, str | None], None] = {}
            if g.mig:
                for i, p in g.pairs:
                    keys[self.unit_of[i], p] = None
            else:
                for i in g.eligible:
                    keys[self.unit_of[i], None] = None
            terms = []
            for u, prof in keys:
                ub = self._upper(g, u)
                if ub > 0:
                    var = m.new_int_var(0, ub, f"count[{g.index},{u},{prof or '-'}]")
                    self.x[g.index, u, prof] = var
                    terms.append(var)
            if require_all:
                m.add(sum(terms) == g.count)
            else:
                m.add(sum(terms) <= g.count)
            self.placed.extend(terms)

    def _add_profile_choice(self) -> None:
        """Replicas of one flow node share a pod template: one profile per flow node."""
        m = self.model
        self.use: dict[tuple[str, str], Any] = {}
        for flow_node, names in self.ctx.candidates.items():
            if len(names) < 2:
                continue
            for name in names:
                self.use[flow_node, name] = m.new_bool_var(f"use[{flow_node},{name}]")
            m.add_exactly_one(self.use[flow_node, name] for name in names)
        for (g, _u, p), var in self.x.items():
            group = self.groups[g]
            if group.mig and p is not None and (group.flow_node, p) in self.use:
                m.add(var <= group.count * self.use[group.flow_node, p])

    def _add_card_layouts(self) -> None:
        """Each card of a re-partitionable node keeps its state or takes one layout."""
        m = self.model
        self.n: dict[tuple[int, int, CardState], Any] = {}
        self.keep_block: dict[int, Any] = {}
        self.touched: dict[int, Any] = {}
        self.reconf: dict[int, Any] = {}
        self.mode_changes: list[Any] = []  # cards whose MIG mode changes
        active = {u for (_g, u, _p) in self.x}
        for u in sorted(active):
            host, size = self.rep[u], self.size[u]
            if not host.touchable:
                continue
            options = self._options_for(host)
            changed_all: list[Any] = []
            enabled_after: list[Any] = []
            touched = m.new_int_var(0, size, f"touched[{u}]")
            for gi, (state, count) in enumerate(host.groups):
                choices = options if state in options else [*options, state]
                terms, changed = [], []
                for option in choices:
                    var = m.new_int_var(0, size * count, f"cards[{u},{gi},{option_label(option)}]")
                    self.n[u, gi, option] = var
                    terms.append(var)
                    if option != state:
                        changed.append(var)
                    if (option is None) != (state is None):
                        self.mode_changes.append(var)
                    if option is not None:
                        enabled_after.append(var)
                m.add(sum(terms) == size * count)
                m.add(sum(changed) <= count * touched)  # a node changes at most its own cards
                changed_all += changed
            if host.block is not None:  # a block is never merged: size is 1
                _union, count = host.block
                keep = m.new_bool_var(f"keep_block[{u}]")
                self.keep_block[u] = keep
                terms = []
                for option in options:
                    var = m.new_int_var(0, count, f"cards[{u},-1,{option_label(option)}]")
                    self.n[u, -1, option] = var
                    terms.append(var)
                    if option is None:
                        self.mode_changes.append(var)
                    else:
                        enabled_after.append(var)
                enabled_after.append(count * keep)
                changed_all += terms
                m.add(sum(terms) + count * keep == count)
                # a touched node is re-laid entirely; an untouched one keeps its block
                m.add(keep + touched == 1)
            reconf = m.new_int_var(0, size * host.cards, f"reconfigured[{u}]")
            if host.order_known:  # the config lists the changed cards only: exactly those
                m.add(reconf == sum(changed_all))
            else:
                # every card is listed in some order: in the worst order a mode change
                # clears every MIG card, and whole cards land where a layout is wanted
                # (docs/mig.md, "Unknown card order"); a single node (size 1)
                whole = host.whole_cards
                landed = m.new_int_var(0, whole, f"landed[{u}]")
                m.add_min_equality(landed, [whole * touched, sum(enabled_after)])
                # a valid cut the LP relaxation of the min lacks: untouched, no card changes
                # (MIG after = MIG cards); touched, MIG after <= MIG cards + whole, so
                # min(whole, MIG after) >= MIG after - MIG cards. Each card newly enabled
                # costs one in the relaxation too, which is what lets it prove bounds.
                m.add(landed >= sum(enabled_after) - host.mig_cards)
                m.add(reconf == host.mig_cards * touched + landed)
            m.add(touched <= reconf)
            self.touched[u] = touched
            self.reconf[u] = reconf

    def _capacity(self, u: int, resource: str) -> Any:
        host, size = self.rep[u], self.size[u]
        if not (host.touchable and is_gpu_resource(resource)):
            return size * max(host.free.get(resource, 0), 0)
        terms: list[Any] = []
        if resource == GPU_RESOURCE:
            for (uu, _gi, option), var in self.n.items():
                if uu == u and option is None:
                    terms.append(var)
            return sum(terms)
        profile = resource[len(MIG_RESOURCE_PREFIX) :]
        for (uu, _gi, option), var in self.n.items():
            if uu == u and option:
                c = dict(option).get(profile, 0)
                if c:
                    terms.append(c * var)
        if host.block is not None and u in self.keep_block:
            c = dict(host.block[0]).get(profile, 0)
            if c:
                terms.append(c * self.keep_block[u])
        return sum(terms) + size * host.pool.get(profile, 0)

    def _add_capacity(self) -> None:
        """Per unit: every resource, the pod limit; MIG pods draw on their profile's instances."""
        m = self.model
        demand: dict[tuple[int, str], list[Any]] = defaultdict(list)
        count: dict[int, list[Any]] = defaultdict(list)
        for (g, u, p), var in self.x.items():
            group = self.groups[g]
            count[u].append(var)
            for r, units in group.requests.items():
                demand[u, r].append(units * var)
            if group.mig and p is not None:
                demand[u, MIG_RESOURCE_PREFIX + p].append(var)
        for (u, r), terms in sorted(demand.items()):
            m.add(sum(terms) <= self._capacity(u, r))
        for u, terms in sorted(count.items()):
            m.add(sum(terms) <= self.size[u] * max(self.rep[u].free_pods, 0))
        self.load = {u: sum(terms) for u, terms in count.items()}
        self._add_mig_pods_on_touched_nodes()

    def _add_mig_pods_on_touched_nodes(self) -> None:
        """On a type whose cards are all MIG-disabled, MIG pods run only on the nodes it touches.

        A valid cut for merged nodes: their cpu, memory and pod slots are
        ``touched × free``, not the type's total. It makes the aggregated model
        touch enough nodes for the pods' other resources, not just their cards.
        """
        m = self.model
        for u, touched in sorted(self.touched.items()):
            host = self.rep[u]
            if host.block is not None or host.pool or any(s is not None for s, _ in host.groups):
                continue
            demand: dict[str, list[Any]] = defaultdict(list)
            for (g, uu, p), var in self.x.items():
                group = self.groups[g]
                if uu != u or not group.mig or p is None:
                    continue
                demand[PODS].append(var)
                for r, units in group.requests.items():
                    if units > 0 and not is_gpu_resource(r):
                        demand[r].append(units * var)
            for r, terms in sorted(demand.items()):
                free = host.free_pods if r == PODS else host.free.get(r, 0)
                m.add(sum(terms) <= max(free, 0) * touched)

    def _add_symmetry_breaking(self) -> None:
        """Identical single-node units are interchangeable: order them by (cards changed, pods)."""
        m = self.model
        scale = max((h.free_pods for h in self.hosts), default=0) + 1
        signature: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for g, u, p in self.x:
            signature[u].append((g, p or ""))
        types: dict[tuple[object, ...], list[int]] = defaultdict(list)
        for u in sorted(self.load):
            host = self.rep[u]
            if self.size[u] != 1 or host.block is not None:
                continue
            key = (
                host.touchable,
                host.family.name if host.family else None,
                tuple(host.groups),
                tuple(sorted(host.pool.items())),
                tuple(sorted(host.free.items())),
                host.free_pods,
                tuple(sorted(signature[u])),
            )
            types[key].append(u)
        for members in types.values():
            for a, b in itertools.pairwise(members):
                load_a, load_b = self.load[a], self.load[b]
                if a in self.reconf and b in self.reconf:
                    m.add(scale * self.reconf[a] + load_a >= scale * self.reconf[b] + load_b)
                else:
                    m.add(load_a >= load_b)

    def _add_objective(self, require_all: bool) -> None:
        """Fewest cards reconfigured, then fewest nodes touched, then fewest MIG mode changes
        (a re-laid MIG card before a mode change, which may reset the node's GPUs;
        partial: most pods first).

        ``big`` weighs one card above any number of nodes and layouts, so the
        proven bound on cards is ``floor(bound / big)``. With every pod required the
        solve is lexicographic (:meth:`solve`): cards alone first (proven bound), then
        ``secondary`` at that card count, on a short budget.
        """
        cards = sum(self.size[u] * self.rep[u].cards for u in self.touched)
        self.nodes_weight = cards + 1
        self.big = self.nodes_weight * (sum(self.size[u] for u in self.touched) + 1)
        self.secondary = self.nodes_weight * sum(self.touched.values()) + sum(self.mode_changes)
        wipe = self.big * sum(self.reconf.values()) + self.secondary
        self.has_objective = bool(self.touched) and self.ctx.config.optimize
        if require_all:
            if self.has_objective:
                self.model.minimize(wipe)
            return
        self.has_objective = True
        weight = self.big * (cards + 1)
        self.model.maximize(weight * sum(self.placed) - wipe)


def option_label(option: CardState) -> str:
    if option is None:
        return "whole"
    return "+".join(f"{c}x{p}" for p, c in option) or "empty"


def key_order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(("", "") if k is None else (type(k).__name__, k) for k in key)
