"""The aggregated CP-SAT model (step 3, where it applies): how many nodes of each
type use each maximal packing pattern."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from vfcore.placement.packing.cpsat import load_cp_model, run_solver
from vfcore.placement.packing.report import SolverConfig, SolverReport, Status
from vfcore.placement.packing.shapes import NodeRoom, Shape, max_on_node

__all__ = ["Countable", "maximal_counts", "solve_patterns"]


_PATTERN_SEARCH_LIMIT = 200_000


def _node_types(shapes: list[Shape], nodes: list[NodeRoom]) -> list[list[int]]:
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


class Countable(Protocol):
    """What :func:`maximal_counts` needs of a shape: its index, how many pods it has, and
    what one pod requests."""

    @property
    def index(self) -> int: ...

    @property
    def count(self) -> int: ...

    @property
    def requests(self) -> Mapping[str, int]: ...


def maximal_counts(
    eligible: Sequence[Countable],
    width: int,
    free: Mapping[str, int],
    pods: int,
    limit: int,
    *,
    cap: Callable[[Countable], int] | None = None,
    allows: Callable[[Countable, list[int]], bool] | None = None,
) -> list[tuple[int, ...]] | None:
    """Every maximal way to fill one node: a count per shape (``width`` of them), within
    ``free`` resources and ``pods`` slots; None past ``limit`` steps.

    A pattern is maximal when no pod of any eligible shape can be added (within
    that shape's own count). Feasibility only ever needs maximal patterns: a
    packing using a smaller one uses a maximal one with slots left empty.
    ``cap`` bounds a shape's pods on the node beyond resources and slots;
    ``allows`` says whether counts (one shape's just raised) still fit what the
    resources cannot say (DRA: the node's devices).
    """
    room = dict(free)
    counts = [0] * width
    out: list[tuple[int, ...]] = []
    steps = 0
    pods_left = pods

    def fits_one_more(shape: Countable) -> bool:
        if pods_left < 1 or any(room.get(r, 0) < u for r, u in shape.requests.items()):
            return False
        if allows is None:
            return True
        counts[shape.index] += 1
        ok = allows(shape, counts)
        counts[shape.index] -= 1
        return ok

    def visit(k: int) -> bool:
        nonlocal steps, pods_left
        steps += 1
        if steps > limit:
            return False
        if k == len(eligible):
            if not any(counts[s.index] < s.count and fits_one_more(s) for s in eligible):
                out.append(tuple(counts))
            return True
        shape = eligible[k]
        most = min(shape.count, pods_left, cap(shape) if cap is not None else shape.count)
        for r, u in shape.requests.items():
            if u:
                most = min(most, room.get(r, 0) // u)
        while most > 0 and allows is not None:
            counts[shape.index] = most
            if allows(shape, counts):
                break
            most -= 1
        for c in range(most, -1, -1):
            counts[shape.index] = c
            for r, u in shape.requests.items():
                room[r] = room.get(r, 0) - c * u
            pods_left -= c
            ok = visit(k + 1)
            for r, u in shape.requests.items():
                room[r] += c * u
            pods_left += c
            counts[shape.index] = 0
            if not ok:
                return False
        return True

    return out if visit(0) else None


def _maximal_patterns(
    shapes: list[Shape], node: NodeRoom, limit: int
) -> list[tuple[int, ...]] | None:
    """Every maximal way to fill one node (a count per shape); None past ``limit`` steps."""

    def cap(shape: Countable) -> int:
        return max_on_node(shapes[shape.index], node)

    eligible = [s for s in shapes if node.index in s.eligible]
    return maximal_counts(eligible, len(shapes), node.free, node.free_pods, limit, cap=cap)


def solve_patterns(
    shapes: list[Shape],
    nodes: list[NodeRoom],
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
    if any(s.vram_mib for s in shapes) or any(
        s.declared_mib and n.time_sliced for s in shapes for n in nodes
    ):
        return None  # per-card VRAM is the per-node model's
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

    cp_model = load_cp_model()
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

    solver, code, status, report = run_solver(
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
