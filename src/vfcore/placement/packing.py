"""Exact placement of pods on nodes: arithmetic bounds, first-fit-decreasing, then CP-SAT.

The question is bin packing with many dimensions: can every pod go to a node
that is eligible for it (Ready, not cordoned, selector matched, taints
tolerated, GPU sharing compatible) such that, on every node and for every
resource, the pods' requests fit what is free — and, in shared mode, each
shared pod's VRAM fits a card of its node?

The solver answers in three steps, cheapest first:

1. **Bounds.** A pod shape with no node able to hold it, or a resource whose
   total demand exceeds what every eligible node has free together, is a proof
   of infeasibility with numbers. (CP-SAT needs seconds to prove what a sum
   proves at once.)
2. **First-fit-decreasing.** Pods, largest first, each to the first node (by
   name) with room. Success is a proof of feasibility.
3. **CP-SAT.** One integer per (pod shape, node): how many pods of that shape
   the node takes — identical pods are aggregated, and identical nodes are
   ordered to break symmetry. With every pod required it decides feasibility
   exactly (and, given time, minimises the nodes used, starting from the FFD
   packing, so it never uses more nodes than FFD); when infeasible, a second
   model places as many pods as possible so that the rest can be explained.

:func:`check_placement` re-checks any placement without OR-Tools.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from vfcore.cluster import NodeState
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import PodRequest
from vfcore.placement.fit import free_units, static_reasons
from vfcore.quantity import PODS

__all__ = [
    "PackingResult",
    "SolverConfig",
    "SolverReport",
    "check_placement",
    "first_fit_decreasing",
    "pack",
]

Status = Literal["OPTIMAL", "FEASIBLE", "INFEASIBLE", "UNKNOWN", "MODEL_INVALID", "NOT_RUN"]


@dataclass(frozen=True, slots=True)
class SolverConfig:
    """How CP-SAT runs. The default is deterministic: one worker, a fixed seed and a
    deterministic time limit, so the same input gives the same placement on any machine.

    ``max_time_s`` (wall clock) makes results machine-dependent; the CLI uses it
    and reports it. ``optimize`` spends up to ``optimize_deterministic_time`` on
    minimising the number of nodes used once a packing is found.
    """

    num_workers: int = 1
    random_seed: int = 0
    max_deterministic_time: float = 60.0
    max_time_s: float | None = None
    optimize: bool = True
    optimize_deterministic_time: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.num_workers, int) or self.num_workers < 1:
            raise InvalidInputError(
                "invalid-solver-config",
                f"num_workers={self.num_workers!r} must be an int >= 1",
                "use SolverConfig.deterministic() for reproducible runs",
            )
        if self.max_time_s is not None and not self.max_time_s > 0:
            raise InvalidInputError(
                "invalid-solver-config",
                f"max_time_s={self.max_time_s!r} must be > 0",
                "give a wall-clock limit in seconds, e.g. 30",
            )

    @classmethod
    def deterministic(cls, max_deterministic_time: float = 60.0) -> SolverConfig:
        return cls(num_workers=1, random_seed=0, max_deterministic_time=max_deterministic_time)

    @classmethod
    def wall_clock(cls, seconds: float, workers: int = 2) -> SolverConfig:
        return cls(num_workers=workers, max_time_s=seconds)

    @property
    def is_deterministic(self) -> bool:
        return self.num_workers == 1 and self.max_time_s is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_workers": self.num_workers,
            "random_seed": self.random_seed,
            "max_deterministic_time": self.max_deterministic_time,
            "max_time_s": self.max_time_s,
            "optimize": self.optimize,
            "deterministic": self.is_deterministic,
        }


@dataclass(frozen=True, slots=True)
class SolverReport:
    """What the solver did: ``method`` decided the verdict (bounds, ffd or cp-sat)."""

    status: Status
    method: str
    objective: float | None = None
    bound: float | None = None
    wall_s: float = 0.0
    deterministic: bool = True
    timed_out: bool = False
    variables: int = 0
    notes: tuple[str, ...] = ()

    @property
    def gap(self) -> float | None:
        if self.objective is None or self.bound is None:
            return None
        if self.objective == 0:
            return 0.0
        return abs(self.objective - self.bound) / abs(self.objective)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "method": self.method,
            "objective": self.objective,
            "bound": self.bound,
            "gap": self.gap,
            "wall_s": round(self.wall_s, 6),
            "deterministic": self.deterministic,
            "timed_out": self.timed_out,
            "variables": self.variables,
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class PackingResult:
    """A packing: ``feasible`` is True (all placed), False (proven impossible) or None (unknown).

    ``assignments`` maps placed pods to nodes; when infeasible it is a maximal
    partial placement (as many pods as the solver could place), used to
    explain the rest. ``cards`` gives the card index of each shared-mode pod.
    """

    feasible: bool | None
    assignments: tuple[tuple[str, str], ...]
    unplaced: tuple[str, ...]
    report: SolverReport
    cards: tuple[tuple[str, int], ...] = ()
    proofs: tuple[str, ...] = ()

    @property
    def nodes_used(self) -> int:
        return len({n for _, n in self.assignments})


# -- the shapes ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Shape:
    index: int
    requests: dict[str, int]
    pods: list[PodRequest]
    vram_mib: int  # shared-mode VRAM per pod (0 if not shared)
    eligible: list[int] = field(default_factory=list)  # node indices

    @property
    def count(self) -> int:
        return len(self.pods)

    def size_key(self) -> tuple[Any, ...]:
        ext = sorted(
            (
                v
                for r, v in self.requests.items()
                if r not in ("cpu", "memory", "ephemeral-storage")
            ),
            reverse=True,
        )
        return (
            tuple(ext),
            self.vram_mib,
            self.requests.get("cpu", 0),
            self.requests.get("memory", 0),
        )


@dataclass(slots=True)
class _Node:
    index: int
    state: NodeState
    free: dict[str, int]
    free_pods: int
    cards: int
    card_mib: int


def _shapes(pods: Sequence[PodRequest]) -> list[_Shape]:
    groups: dict[tuple[object, ...], list[PodRequest]] = {}
    for pod in pods:
        groups.setdefault(pod.shape, []).append(pod)
    for members in groups.values():  # input order must not matter: replicas in order
        members.sort(key=lambda p: (p.node, p.replica, p.pod))
    ordered = sorted(groups.values(), key=lambda g: g[0].pod)
    return [
        _Shape(
            index=i,
            requests=dict(g[0].requests),
            pods=g,
            vram_mib=(g[0].gpu_memory_mib or 0) if g[0].slice == "shared" else 0,
        )
        for i, g in enumerate(ordered)
    ]


def _nodes(nodes: Sequence[NodeState]) -> list[_Node]:
    out = []
    for i, n in enumerate(nodes):
        free = {r: free_units(n, r) for r, _ in n.allocatable}
        gpu = n.gpu
        out.append(
            _Node(
                index=i,
                state=n,
                free=free,
                free_pods=free_units(n, PODS),
                cards=(gpu.count or 0) if gpu else 0,
                card_mib=(gpu.memory_mib or 0) if gpu else 0,
            )
        )
    return out


def _max_on_node(shape: _Shape, node: _Node) -> int:
    """How many pods of ``shape`` fit on an otherwise empty-of-new-pods ``node``."""
    best = node.free_pods
    for resource, units in shape.requests.items():
        best = min(best, node.free.get(resource, 0) // units)
    if shape.vram_mib:
        best = min(best, node.cards * (node.card_mib // shape.vram_mib) if node.card_mib else 0)
    return max(best, 0)


# -- bounds ----------------------------------------------------------------------------------


def _bound_proofs(shapes: list[_Shape], nodes: list[_Node]) -> list[str]:
    """Sums that prove no placement exists (empty when the sums allow one)."""
    proofs: list[str] = []
    for shape in shapes:
        capacity = sum(_max_on_node(shape, nodes[i]) for i in shape.eligible)
        if capacity < shape.count:
            first = shape.pods[0].pod
            proofs.append(
                f"the {shape.count} pod(s) shaped like {first} fit at most {capacity} time(s) "
                f"on the {len(shape.eligible)} node(s) eligible for them"
            )
    resources = sorted({r for s in shapes for r in s.requests})
    for resource in resources:
        demand = sum(s.count * s.requests.get(resource, 0) for s in shapes)
        eligible = sorted({i for s in shapes if s.requests.get(resource) for i in s.eligible})
        free = sum(max(nodes[i].free.get(resource, 0), 0) for i in eligible)
        if demand > free:
            proofs.append(
                f"{resource}: the pods request {demand} in total but eligible nodes have {free} free"
            )
    return proofs


# -- first-fit-decreasing ------------------------------------------------------------------------


def _ffd(
    shapes: list[_Shape], nodes: list[_Node]
) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """FFD over shapes: returns ({shape: [node per placed pod]}, {shape: [card per placed pod]})."""
    free = [dict(n.free) for n in nodes]
    free_pods = [n.free_pods for n in nodes]
    card_free = [[n.card_mib] * n.cards for n in nodes]
    placed: dict[int, list[int]] = defaultdict(list)
    cards: dict[int, list[int]] = defaultdict(list)
    for shape in sorted(shapes, key=lambda s: (s.size_key(), -s.index), reverse=True):
        eligible = sorted(shape.eligible)
        cursor = 0
        for _ in range(shape.count):
            while cursor < len(eligible):
                i = eligible[cursor]
                if free_pods[i] >= 1 and all(
                    free[i].get(r, 0) >= u for r, u in shape.requests.items()
                ):
                    card = -1
                    if shape.vram_mib:
                        card = next(
                            (c for c, m in enumerate(card_free[i]) if m >= shape.vram_mib), -1
                        )
                        if card < 0:
                            cursor += 1
                            continue
                        card_free[i][card] -= shape.vram_mib
                    for r, u in shape.requests.items():
                        free[i][r] = free[i].get(r, 0) - u
                    free_pods[i] -= 1
                    placed[shape.index].append(i)
                    cards[shape.index].append(card)
                    break
                cursor += 1  # loads only grow: a node full for this shape stays full
            else:
                break
    return placed, cards


def first_fit_decreasing(pods: Sequence[PodRequest], nodes: Sequence[NodeState]) -> dict[str, str]:
    """The FFD baseline alone: pods largest first, each to the first node (by name) with room.

    Returns the pods it placed; a pod missing from the result did not fit.
    """
    shapes, node_list = _prepare(pods, nodes)
    placed, _ = _ffd(shapes, node_list)
    return dict(_name_assignments(shapes, node_list, placed))


#: Extra eligibility a caller adds to kube-scheduler's filters: reasons a pod may not go to a
#: node (empty: it may). Mix mode uses it to keep MIG pods on cards whose profile covers them.
ExtraReasons = Callable[[PodRequest, NodeState], tuple[str, ...]]


def _prepare(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeState],
    extra_reasons: ExtraReasons | None = None,
) -> tuple[list[_Shape], list[_Node]]:
    ordered_nodes = sorted(nodes, key=lambda n: n.name)
    shapes = _shapes(pods)
    node_list = _nodes(ordered_nodes)
    for shape in shapes:
        probe = shape.pods[0]
        shape.eligible = [
            n.index
            for n in node_list
            if not static_reasons(probe, n.state)
            and not (extra_reasons is not None and extra_reasons(probe, n.state))
        ]
    return shapes, node_list


def _name_assignments(
    shapes: list[_Shape], nodes: list[_Node], placed: Mapping[int, Sequence[int]]
) -> list[tuple[str, str]]:
    out = []
    for shape in shapes:
        targets = sorted(placed.get(shape.index, ()), key=lambda i: nodes[i].state.name)
        for pod, i in zip(shape.pods, targets, strict=False):
            out.append((pod.pod, nodes[i].state.name))
    return sorted(out)


# -- CP-SAT ------------------------------------------------------------------------------------------


def _cp_model() -> Any:
    try:
        from ortools.sat.python import cp_model
    except ImportError:  # pragma: no cover - depends on the installation
        raise InvalidInputError(
            "solver-not-installed",
            "deciding this placement needs OR-Tools CP-SAT, which is not installed",
            "pip install 'vfcore[solver]'",
        ) from None
    return cp_model


def _run_solver(
    model: Any, config: SolverConfig, deterministic_time: float, *, has_objective: bool
) -> tuple[Any, int, Status, SolverReport]:
    """Solve with the configured determinism; the report without variables and notes."""
    cp_model = _cp_model()
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


def _solve_cp_sat(
    shapes: list[_Shape],
    nodes: list[_Node],
    config: SolverConfig,
    *,
    require_all: bool,
    hint: Mapping[int, Sequence[int]] | None,
    minimise_nodes: bool,
    deterministic_time: float,
) -> tuple[Status, dict[int, list[int]], dict[int, list[int]], SolverReport]:
    cp_model = _cp_model()
    model = cp_model.CpModel()
    x: dict[tuple[int, int], Any] = {}
    for shape in shapes:
        for i in shape.eligible:
            cap = min(shape.count, _max_on_node(shape, nodes[i]))
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
    by_node: dict[int, list[tuple[_Shape, Any]]] = defaultdict(list)
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
        shared = [(shape, var) for shape, var in terms if shape.vram_mib]
        if shared:  # each shared pod on one card; a card's pods fit its VRAM
            for c in range(node.cards):
                load = []
                for shape, _var in shared:
                    v = model.new_int_var(0, shape.count, f"card[{shape.index},{i},{c}]")
                    y[shape.index, i, c] = v
                    load.append(shape.vram_mib * v)
                model.add(sum(load) <= node.card_mib)
            for shape, var in shared:
                model.add(sum(y[shape.index, i, c] for c in range(node.cards)) == var)
        if minimise_nodes:
            u = model.new_bool_var(f"used[{i}]")
            used[i] = u
            for shape, var in terms:
                model.add(var <= min(shape.count, _max_on_node(shape, node)) * u)

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
    solver, code, status, report = _run_solver(
        model, config, deterministic_time, has_objective=has_objective
    )
    placed: dict[int, list[int]] = defaultdict(list)
    cards: dict[int, list[int]] = defaultdict(list)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        for (s, i), var in sorted(x.items()):
            n = solver.value(var)
            placed[s].extend([i] * n)
            if shapes[s].vram_mib and n:
                for c in range(nodes[i].cards):
                    cards_on = solver.value(y[s, i, c]) if (s, i, c) in y else 0
                    cards[s].extend([c] * cards_on)
    return status, placed, cards, replace(report, variables=len(x) + len(used) + len(y))


# -- CP-SAT over node types and packing patterns ----------------------------------------------

_PATTERN_SEARCH_LIMIT = 200_000


def _node_types(shapes: list[_Shape], nodes: list[_Node]) -> list[list[int]]:
    """Nodes that are interchangeable for every shape (same free vector, same eligibility)."""
    eligible_for: dict[int, set[int]] = defaultdict(set)
    for shape in shapes:
        for i in shape.eligible:
            eligible_for[i].add(shape.index)
    groups: dict[tuple[object, ...], list[int]] = {}
    for node in nodes:
        if not eligible_for.get(node.index):
            continue
        key = (
            tuple(sorted(node.free.items())),
            node.free_pods,
            tuple(sorted(eligible_for[node.index])),
        )
        groups.setdefault(key, []).append(node.index)
    return list(groups.values())


def _maximal_patterns(
    shapes: list[_Shape], node: _Node, limit: int
) -> list[tuple[int, ...]] | None:
    """Every maximal way to fill one node (a count per shape); None past ``limit`` steps.

    A pattern is maximal when no pod of any eligible shape can be added (within
    that shape's own count). Feasibility only ever needs maximal patterns: a
    packing using a smaller one uses a maximal one with slots left empty.
    """
    eligible = [s for s in shapes if node.index in s.eligible]
    free = dict(node.free)
    counts = [0] * len(shapes)
    out: list[tuple[int, ...]] = []
    steps = 0
    pods_left = node.free_pods

    def room_for(shape: _Shape) -> bool:
        return pods_left >= 1 and all(free.get(r, 0) >= u for r, u in shape.requests.items())

    def visit(k: int) -> bool:
        nonlocal steps, pods_left
        steps += 1
        if steps > limit:
            return False
        if k == len(eligible):
            if not any(counts[s.index] < s.count and room_for(s) for s in eligible):
                out.append(tuple(counts))
            return True
        shape = eligible[k]
        most = min(shape.count, _max_on_node(shape, node))
        for r, u in shape.requests.items():
            most = min(most, free.get(r, 0) // u)
        most = min(most, pods_left)
        for c in range(most, -1, -1):
            counts[shape.index] = c
            for r, u in shape.requests.items():
                free[r] = free.get(r, 0) - c * u
            pods_left -= c
            ok = visit(k + 1)
            for r, u in shape.requests.items():
                free[r] += c * u
            pods_left += c
            counts[shape.index] = 0
            if not ok:
                return False
        return True

    return out if visit(0) else None


def _solve_patterns(
    shapes: list[_Shape],
    nodes: list[_Node],
    config: SolverConfig,
    *,
    require_all: bool,
    minimise_nodes: bool,
    deterministic_time: float,
) -> tuple[Status, dict[int, list[int]], dict[int, list[int]], SolverReport] | None:
    """The aggregated model: how many nodes of each type use each packing pattern.

    Exact, and free of the symmetry between identical nodes that makes the
    per-node model slow on tight instances. ``None`` when it does not apply
    (shared-mode VRAM, or too many patterns); the per-node model runs instead.
    """
    if any(s.vram_mib for s in shapes):
        return None
    types = _node_types(shapes, nodes)
    if len(types) * 4 > len(nodes) + 3:
        return None  # few identical nodes: nothing to aggregate
    patterns: list[list[tuple[int, ...]]] = []
    budget = _PATTERN_SEARCH_LIMIT
    for members in types:
        found = _maximal_patterns(shapes, nodes[members[0]], budget)
        if found is None:
            return None
        budget -= len(found)
        patterns.append(found)

    cp_model = _cp_model()
    model = cp_model.CpModel()
    z: dict[tuple[int, int], Any] = {}
    for t, (members, pats) in enumerate(zip(types, patterns, strict=True)):
        for k, pattern in enumerate(pats):
            if any(pattern):
                z[t, k] = model.new_int_var(0, len(members), f"nodes[{t},{k}]")
        model.add(sum(z[t, k] for k in range(len(pats)) if (t, k) in z) <= len(members))
    placed_of: dict[int, Any] = {}
    for shape in shapes:
        slots = sum(
            patterns[t][k][shape.index] * var
            for (t, k), var in z.items()
            if patterns[t][k][shape.index]
        )
        if require_all:
            model.add(slots >= shape.count)
        else:
            got = model.new_int_var(0, shape.count, f"placed[{shape.index}]")
            placed_of[shape.index] = got
            model.add(got <= slots)
    if minimise_nodes:
        model.minimize(sum(z.values()))
    elif not require_all:
        model.maximize(sum(placed_of.values()))

    solver, code, status, report = _run_solver(
        model, config, deterministic_time, has_objective=minimise_nodes or not require_all
    )
    placed: dict[int, list[int]] = defaultdict(list)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        left = {s.index: s.count for s in shapes}
        for t, members in enumerate(types):
            queue = sorted(members, key=lambda i: nodes[i].state.name)
            for k, pattern in enumerate(patterns[t]):
                if (t, k) not in z:
                    continue
                for _ in range(solver.value(z[t, k])):
                    i = queue.pop(0)
                    for s, c in enumerate(pattern):
                        take = min(c, left[s])
                        placed[s].extend([i] * take)
                        left[s] -= take
    report = replace(
        report,
        variables=len(z) + len(placed_of),
        notes=(
            f"aggregated model: {len(types)} node type(s), "
            f"{sum(len(p) for p in patterns)} packing pattern(s)",
        ),
    )
    return status, placed, {}, report


def _solve(
    shapes: list[_Shape],
    nodes: list[_Node],
    config: SolverConfig,
    *,
    require_all: bool,
    hint: Mapping[int, Sequence[int]] | None,
    minimise_nodes: bool,
    deterministic_time: float,
) -> tuple[Status, dict[int, list[int]], dict[int, list[int]], SolverReport]:
    """The aggregated pattern model where it applies, else the per-node model."""
    aggregated = _solve_patterns(
        shapes,
        nodes,
        config,
        require_all=require_all,
        minimise_nodes=minimise_nodes,
        deterministic_time=deterministic_time,
    )
    if aggregated is not None:
        return aggregated
    return _solve_cp_sat(
        shapes,
        nodes,
        config,
        require_all=require_all,
        hint=hint,
        minimise_nodes=minimise_nodes,
        deterministic_time=deterministic_time,
    )


# -- the entry point ----------------------------------------------------------------------------------


def pack(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeState],
    *,
    config: SolverConfig | None = None,
    extra_reasons: ExtraReasons | None = None,
) -> PackingResult:
    """Place every pod on a node, exactly, or prove that it cannot be done.

    Nodes are taken as they are: a node whose occupancy is unknown is treated as
    having nothing bound (callers bracket unknowns; see :func:`vfcore.plan`).
    ``extra_reasons`` adds eligibility rules of the caller's (see ``ExtraReasons``).
    """
    cfg = config or SolverConfig()
    shapes, node_list = _prepare(pods, nodes, extra_reasons)
    if not pods:
        return PackingResult(True, (), (), SolverReport("OPTIMAL", "bounds", objective=0.0))

    proofs = _bound_proofs(shapes, node_list)
    ffd_placed, ffd_cards = _ffd(shapes, node_list)
    ffd_complete = all(len(ffd_placed.get(s.index, ())) == s.count for s in shapes)

    if proofs:
        return _partial(shapes, node_list, cfg, ffd_placed, ffd_cards, "bounds", tuple(proofs))

    if ffd_complete:
        ffd_nodes = len({i for targets in ffd_placed.values() for i in targets})
        best_placed, best_cards = ffd_placed, ffd_cards
        report = SolverReport("FEASIBLE", "ffd", objective=float(ffd_nodes), deterministic=True)
        if cfg.optimize and ffd_nodes > 1:
            status, placed, cards, cp_report = _solve(
                shapes,
                node_list,
                cfg,
                require_all=True,
                hint=ffd_placed,
                minimise_nodes=True,
                deterministic_time=cfg.optimize_deterministic_time,
            )
            if status in ("OPTIMAL", "FEASIBLE") and cp_report.objective is not None:
                if cp_report.objective <= ffd_nodes:
                    best_placed, best_cards = placed, cards
                    report = cp_report
                else:  # pragma: no cover - CP-SAT starts from the FFD hint
                    report = _with_note(report, "cp-sat found no better packing than ffd")
            else:
                report = _with_note(
                    report, f"cp-sat could not improve on ffd ({status}); the ffd packing stands"
                )
        return _result(True, shapes, node_list, best_placed, best_cards, report)

    status, placed, cards, report = _solve(
        shapes,
        node_list,
        cfg,
        require_all=True,
        hint=ffd_placed,
        minimise_nodes=False,
        deterministic_time=cfg.max_deterministic_time,
    )
    if status in ("OPTIMAL", "FEASIBLE"):
        return _result(True, shapes, node_list, placed, cards, report)
    if status == "INFEASIBLE":
        partial = _partial(
            shapes,
            node_list,
            cfg,
            ffd_placed,
            ffd_cards,
            "cp-sat",
            ("cp-sat proved it infeasible",),
        )
        return PackingResult(
            False,
            partial.assignments,
            partial.unplaced,
            _with_note(report, *partial.report.notes),
            partial.cards,
            partial.proofs,
        )
    # timed out or invalid: unknown, never an unproven "does not fit"
    return _result(None, shapes, node_list, ffd_placed, ffd_cards, report)


def _with_note(report: SolverReport, *notes: str) -> SolverReport:
    return replace(report, notes=report.notes + tuple(notes))


def _partial(
    shapes: list[_Shape],
    nodes: list[_Node],
    cfg: SolverConfig,
    ffd_placed: dict[int, list[int]],
    ffd_cards: dict[int, list[int]],
    method: str,
    proofs: tuple[str, ...],
) -> PackingResult:
    """Infeasible: place as many pods as possible (CP-SAT, from FFD) to explain the rest."""
    status, placed, cards, report = _solve(
        shapes,
        nodes,
        cfg,
        require_all=False,
        hint=ffd_placed,
        minimise_nodes=False,
        deterministic_time=min(cfg.max_deterministic_time, 5.0),
    )
    ffd_count = sum(len(v) for v in ffd_placed.values())
    if status not in ("OPTIMAL", "FEASIBLE") or sum(len(v) for v in placed.values()) < ffd_count:
        placed, cards = ffd_placed, ffd_cards
    final = SolverReport(
        status="INFEASIBLE",
        method=method,
        objective=report.objective,
        bound=report.bound,
        wall_s=report.wall_s,
        deterministic=cfg.is_deterministic,
        variables=report.variables,
        notes=("partial placement: as many pods as possible, to explain the rest",),
    )
    result = _result(False, shapes, nodes, placed, cards, final)
    return PackingResult(False, result.assignments, result.unplaced, final, result.cards, proofs)


def _result(
    feasible: bool | None,
    shapes: list[_Shape],
    nodes: list[_Node],
    placed: Mapping[int, Sequence[int]],
    cards: Mapping[int, Sequence[int]],
    report: SolverReport,
) -> PackingResult:
    assignments: list[tuple[str, str]] = []
    card_of: list[tuple[str, int]] = []
    unplaced: list[str] = []
    for shape in shapes:
        pairs = sorted(
            zip(
                placed.get(shape.index, ()),
                cards.get(shape.index, ()) or [-1] * shape.count,
                strict=False,
            ),
            key=lambda t: (nodes[t[0]].state.name, t[1]),
        )
        for k, pod in enumerate(shape.pods):
            if k < len(pairs):
                i, card = pairs[k]
                assignments.append((pod.pod, nodes[i].state.name))
                if shape.vram_mib and card >= 0:
                    card_of.append((pod.pod, card))
            else:
                unplaced.append(pod.pod)
    if feasible is True and unplaced:  # pragma: no cover - defensive
        feasible = None
    return PackingResult(
        feasible,
        tuple(sorted(assignments)),
        tuple(sorted(unplaced)),
        report,
        tuple(sorted(card_of)),
    )


# -- the independent checker ------------------------------------------------------------------------


def check_placement(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeState],
    assignments: Mapping[str, str] | Iterable[tuple[str, str]],
    *,
    cards: Mapping[str, int] | None = None,
    extra_reasons: ExtraReasons | None = None,
) -> tuple[str, ...]:
    """Every way a placement breaks the rules (empty: it is valid). Uses no solver.

    Checks that each pod is placed at most once, on a known node that is
    eligible for it, that no node's free resources or pod limit are exceeded,
    and — given ``cards`` — that shared pods' VRAM fits each card. Given
    ``extra_reasons``, a pod must pass those rules too (mix mode passes
    :func:`vfcore.placement.mig.mix_reasons`).
    """
    mapping = dict(assignments)
    by_name = {p.pod: p for p in pods}
    node_by_name = {n.name: n for n in nodes}
    problems: list[str] = []
    load: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    card_load: dict[tuple[str, int], int] = defaultdict(int)
    for pod_name_, node_name in sorted(mapping.items()):
        pod = by_name.get(pod_name_)
        node = node_by_name.get(node_name)
        if pod is None:
            problems.append(f"{pod_name_}: not a pod of the flow")
            continue
        if node is None:
            problems.append(f"{pod_name_}: placed on unknown node {node_name!r}")
            continue
        reasons = static_reasons(pod, node)
        if extra_reasons is not None:
            reasons = (*reasons, *extra_reasons(pod, node))
        if reasons:
            problems.append(f"{pod_name_} on {node_name}: {'; '.join(reasons)}")
        for r, u in pod.requests:
            load[node_name][r] += u
        load[node_name][PODS] += 1
        if pod.slice == "shared" and pod.gpu_memory_mib and cards is not None:
            card = cards.get(pod_name_)
            count = node.gpu.count if node.gpu and node.gpu.count else 0
            if card is None or not 0 <= card < count:
                problems.append(f"{pod_name_} on {node_name}: no valid card index ({card!r})")
            else:
                card_load[node_name, card] += pod.gpu_memory_mib
    for node_name, used in sorted(load.items()):
        node = node_by_name[node_name]
        for r, u in sorted(used.items()):
            free = free_units(node, r)
            if u > free:
                problems.append(f"{node_name}: {r} over capacity ({u} requested > {free} free)")
    for (node_name, card), mib in sorted(card_load.items()):
        node = node_by_name[node_name]
        size = node.gpu.memory_mib if node.gpu and node.gpu.memory_mib else 0
        if mib > size:
            problems.append(f"{node_name} card {card}: VRAM over capacity ({mib} MiB > {size} MiB)")
    return tuple(problems)
