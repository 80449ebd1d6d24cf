"""The per-node CP-SAT model (step 3): one integer per (pod shape, node).

OR-Tools is imported when a model is built (:func:`load_cp_model`), never when
this module loads.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from vfcore.errors import InvalidInputError
from vfcore.placement.packing.report import SolverConfig, SolverReport, Status
from vfcore.placement.packing.shapes import NodeRoom, Shape, max_on_node, vram_on

__all__ = ["load_cp_model", "run_solver", "solve_per_node"]


def load_cp_model() -> Any:
    try:
        from ortools.sat.python import cp_model
    except ImportError:  # pragma: no cover - depends on the installation
        raise InvalidInputError(
            "solver-not-installed",
            "deciding this placement needs OR-Tools CP-SAT, which is not installed",
            "pip install 'vfcore[solver]'",
        ) from None
    return cp_model


def run_solver(
    model: Any, config: SolverConfig, deterministic_time: float, *, has_objective: bool
) -> tuple[Any, int, Status, SolverReport]:
    """Solve with the configured determinism; the report without variables and notes."""
    cp_model = load_cp_model()
    solver = cp_model.CpSolver()
    # CP-SAT would otherwise take SIGINT for itself and stop as if the time limit were
    # reached: an interrupted solve would pass for a timed-out one (UNKNOWN, exit 0), and
    # Ctrl-C would never reach the caller. The caller decides what Ctrl-C does.
    solver.parameters.catch_sigint_signal = False
    solver.parameters.num_workers = config.num_workers
    solver.parameters.random_seed = config.random_seed
    solver.parameters.max_deterministic_time = deterministic_time
    if config.max_time_s is not None:
        solver.parameters.max_time_in_seconds = config.max_time_s
    code = solver.solve(model)
    status: Status = solver.status_name(code)
    solved = code in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    report = SolverReport(
        status=status,
        method="cp-sat",
        objective=solver.objective_value if has_objective and solved else None,
        bound=solver.best_objective_bound if has_objective and solved else None,
        wall_s=solver.wall_time,
        deterministic=config.is_deterministic,
        timed_out=code == cp_model.UNKNOWN,
    )
    return solver, code, status, report


def solve_per_node(
    shapes: list[Shape],
    nodes: list[NodeRoom],
    config: SolverConfig,
    *,
    require_all: bool,
    hint: Mapping[int, Sequence[int]] | None,
    minimise_nodes: bool,
    deterministic_time: float,
) -> tuple[Status, dict[int, list[int]], dict[int, list[int]], SolverReport]:
    cp_model = load_cp_model()
    model = cp_model.CpModel()
    x: dict[tuple[int, int], Any] = {}
    for shape in shapes:
        for i in shape.eligible:
            cap = min(shape.count, max_on_node(shape, nodes[i]))
            if cap > 0:
                x[shape.index, i] = model.new_int_var(0, cap, f"count[{shape.index},{i}]")

    # every pod placed (or as many as possible)
    for shape in shapes:
        terms = [x[shape.index, i] for i in shape.eligible if (shape.index, i) in x]
        if require_all:
            model.add(sum(terms) == shape.count)
        else:
            model.add(sum(terms) <= shape.count)

    # capacity of every node, resource by resource, and its pod limit
    by_node: dict[int, list[tuple[Shape, Any]]] = defaultdict(list)
    for (s, i), var in x.items():
        by_node[i].append((shapes[s], var))
    used: dict[int, Any] = {}
    y: dict[tuple[int, int, int], Any] = {}
    for i, terms in sorted(by_node.items()):
        node = nodes[i]
        resources = sorted({r for shape, _ in terms for r in shape.requests})
        for r in resources:
            model.add(
                sum(shape.requests[r] * var for shape, var in terms if r in shape.requests)
                <= max(node.free.get(r, 0), 0)
            )
        model.add(sum(var for _, var in terms) <= max(node.free_pods, 0))
        shared = [(shape, var) for shape, var in terms if vram_on(shape, node)]
        if shared:  # each shared pod on one card; a card's pods fit its VRAM
            for c in range(node.cards):
                load = []
                for shape, _var in shared:
                    v = model.new_int_var(0, shape.count, f"card[{shape.index},{i},{c}]")
                    y[shape.index, i, c] = v
                    load.append(vram_on(shape, node) * v)
                model.add(sum(load) <= node.card_mib)
            for shape, var in shared:
                model.add(sum(y[shape.index, i, c] for c in range(node.cards)) == var)
        if minimise_nodes:
            u = model.new_bool_var(f"used[{i}]")
            used[i] = u
            for shape, var in terms:
                model.add(var <= min(shape.count, max_on_node(shape, node)) * u)

    # identical nodes are interchangeable: fill them in name order
    groups: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for node in nodes:
        if node.index in by_node:
            key = (
                tuple(sorted(node.free.items())),
                node.free_pods,
                node.cards,
                node.card_mib,
                tuple(sorted(s for s in range(len(shapes)) if node.index in shapes[s].eligible)),
            )
            groups[key].append(node.index)
    for members in groups.values():
        for a, b in itertools.pairwise(members):
            if minimise_nodes:
                model.add(used[a] >= used[b])
            load_a = sum(var for (_, var) in by_node[a])
            load_b = sum(var for (_, var) in by_node[b])
            model.add(load_a >= load_b)

    placed_total = sum(x.values())
    if minimise_nodes and used:
        model.minimize(sum(used.values()))
    elif not require_all:
        model.maximize(placed_total)

    if hint:
        hinted: dict[tuple[int, int], int] = defaultdict(int)
        for s, targets in hint.items():
            for i in targets:
                hinted[s, i] += 1
        for pair, var in x.items():
            model.add_hint(var, hinted.get(pair, 0))

    has_objective = (minimise_nodes and bool(used)) or not require_all
    solver, code, status, report = run_solver(
        model, config, deterministic_time, has_objective=has_objective
    )
    placed: dict[int, list[int]] = defaultdict(list)
    cards: dict[int, list[int]] = defaultdict(list)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        for (s, i), var in sorted(x.items()):
            n = solver.value(var)
            placed[s].extend([i] * n)
            if n and vram_on(shapes[s], nodes[i]):
                for c in range(nodes[i].cards):
                    cards_on = solver.value(y[s, i, c]) if (s, i, c) in y else 0
                    cards[s].extend([c] * cards_on)
            else:
                cards[s].extend([-1] * n)  # no card counted here: keeps cards beside placed
    return status, placed, cards, replace(report, variables=len(x) + len(used) + len(y))
