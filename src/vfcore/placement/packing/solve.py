"""The entry point: :func:`pack` runs bounds, FFD, then CP-SAT (the aggregated model
where it applies, else the per-node one), and explains an infeasible packing
with a maximal partial placement."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from vfcore.cluster import NodeState
from vfcore.placement.claims import PodRequest
from vfcore.placement.packing.bounds import bound_proofs
from vfcore.placement.packing.cpsat import solve_per_node
from vfcore.placement.packing.ffd import ffd
from vfcore.placement.packing.patterns import solve_patterns
from vfcore.placement.packing.report import PackingResult, SolverConfig, SolverReport, Status
from vfcore.placement.packing.shapes import ExtraReasons, NodeRoom, Shape, prepare

__all__ = ["pack"]


def _solve(
    shapes: list[Shape],
    nodes: list[NodeRoom],
    config: SolverConfig,
    *,
    require_all: bool,
    hint: Mapping[int, Sequence[int]] | None,
    minimise_nodes: bool,
    deterministic_time: float,
) -> tuple[Status, dict[int, list[int]], dict[int, list[int]], SolverReport]:
    """The aggregated pattern model where it applies, else the per-node model."""
    aggregated = solve_patterns(
        shapes,
        nodes,
        config,
        require_all=require_all,
        minimise_nodes=minimise_nodes,
        deterministic_time=deterministic_time,
    )
    if aggregated is not None:
        return aggregated
    return solve_per_node(
        shapes,
        nodes,
        config,
        require_all=require_all,
        hint=hint,
        minimise_nodes=minimise_nodes,
        deterministic_time=deterministic_time,
    )


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
    shapes, node_list = prepare(pods, nodes, extra_reasons)
    if not pods:
        return PackingResult(True, (), (), SolverReport("OPTIMAL", "bounds", objective=0.0))

    proofs = bound_proofs(shapes, node_list)
    ffd_placed, ffd_cards = ffd(shapes, node_list)
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
    shapes: list[Shape],
    nodes: list[NodeRoom],
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
    shapes: list[Shape],
    nodes: list[NodeRoom],
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
                if card >= 0:
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
