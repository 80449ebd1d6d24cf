"""Every tie-break outcome: the exhaustive, memoised search, its bounded fallback, and :func:`predict`."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Literal, TypeAlias

from vfcore.cluster import ClusterSnapshot
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import PodRequest
from vfcore.placement.scheduler.engine import Budget, Engine, num_feasible_nodes_to_find
from vfcore.placement.scheduler.results import SchedulerPrediction, Simulation, Verdict
from vfcore.placement.scheduler.scoring import ScoringConfig
from vfcore.placement.scheduler.simulation import (
    ByPodCount,
    FirstTie,
    LastTie,
    RandomTie,
    ScriptedTies,
    TiePolicy,
    normalise_affinity,
    ordered_pods,
    run_bounded,
    run_greedy,
)

__all__ = [
    "DEFAULT_MAX_BRANCHES",
    "DEFAULT_MAX_WORK",
    "DEFAULT_SAMPLES",
    "MAX_SEARCH_WORK",
    "predict",
]

#: Search nodes (pod × cluster load state) the exhaustive tie search may visit.
DEFAULT_MAX_BRANCHES = 20_000
#: Node states (one pod against one distinct node state) one prediction may scan, tie
#: search and bounded runs together: about a second of Python; past it the search stops
#: and says so (``docs/scheduler-model.md``, "Bounds and the scan window").
DEFAULT_MAX_WORK = 2_000_000
#: The most of it the exhaustive tie search may take (its memo holds what it scanned).
MAX_SEARCH_WORK = 150_000
#: Seeded random tie policies the bounded search runs (besides first and last).
DEFAULT_SAMPLES = 8


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_Path: TypeAlias = tuple[Any, ...]  # () or (choice, rest): a cons list of branch choices
_State: TypeAlias = tuple[tuple[int, int], ...]  # sorted (state id, node count)


@dataclass(frozen=True, slots=True)
class _Sub:
    """What happens from one (pod index, cluster state) to the end, over every tie outcome.

    ``outcomes`` counts paths through the tie tree with interchangeable nodes
    collapsed; ``node_outcomes`` counts node-level choice sequences (what a
    reservoir sampler can produce); ``p_strand`` is the exact probability that
    some pod strands when every tie is broken uniformly at random.
    """

    outcomes: int
    node_outcomes: int
    p_strand: Fraction
    all_land: bool
    any_land: bool
    sometimes: frozenset[int]
    always: frozenset[int]
    strand_path: _Path | None
    land_path: _Path | None


_LEAF = _Sub(1, 1, Fraction(0), True, True, frozenset(), frozenset(), None, ())


class _OverBudget(Exception):
    pass


class _Frame:
    """One branch-free stretch of the search, from ``start`` to a branch point or the end."""

    __slots__ = (
        "branch",
        "chain",
        "children",
        "i",
        "multiplier",
        "results",
        "start",
        "state",
        "tail",
        "weights",
    )

    def __init__(self, i: int, state: _State) -> None:
        self.i = i
        self.state = state
        self.start = (i, state)
        self.chain: list[int] = []  # pods stranded on the way
        self.multiplier = 1  # node-level choices on the way (a tie inside one state)
        self.branch: tuple[int, _State] | None = None
        self.children: list[_State] | None = None
        self.weights: list[int] = []  # tied nodes per child state
        self.results: list[_Sub] = []
        self.tail: _Sub | None = None


def _move(state: _State, sid: int, target: int) -> _State:
    counts = dict(state)
    counts[sid] -= 1
    if not counts[sid]:
        del counts[sid]
    counts[target] = counts.get(target, 0) + 1
    return tuple(sorted(counts.items()))


def _combine(results: list[_Sub], weights: list[int]) -> _Sub:
    strand_path = next(
        ((j, r.strand_path) for j, r in enumerate(results) if r.strand_path is not None), None
    )
    land_path = next(
        ((j, r.land_path) for j, r in enumerate(results) if r.land_path is not None), None
    )
    tied = sum(weights)
    return _Sub(
        outcomes=sum(r.outcomes for r in results),
        node_outcomes=sum(w * r.node_outcomes for w, r in zip(weights, results, strict=True)),
        p_strand=sum(
            (Fraction(w, tied) * r.p_strand for w, r in zip(weights, results, strict=True)),
            Fraction(0),
        ),
        all_land=all(r.all_land for r in results),
        any_land=any(r.any_land for r in results),
        sometimes=frozenset().union(*(r.sometimes for r in results)),
        always=frozenset.intersection(*(r.always for r in results)),
        strand_path=strand_path,
        land_path=land_path,
    )


def _with_chain(sub: _Sub, chain: list[int], multiplier: int) -> _Sub:
    if not chain and multiplier == 1:
        return sub
    if not chain:
        return replace(sub, node_outcomes=sub.node_outcomes * multiplier)
    return _Sub(
        outcomes=sub.outcomes,
        node_outcomes=sub.node_outcomes * multiplier,
        p_strand=Fraction(1),
        all_land=False,
        any_land=False,
        sometimes=sub.sometimes.union(chain),
        always=sub.always.union(chain),
        strand_path=sub.strand_path if sub.strand_path is not None else sub.land_path,
        land_path=None,
    )


def _explore(engine: Engine, budget: int, meter: Budget | None = None) -> tuple[_Sub, int]:
    """Depth-first over every tie-break outcome, memoised on (pod index, multiset of node states).

    Forced steps (one best state, or none) are followed in a loop; only real
    branch points open a frame, so the Python stack never grows. Raises
    ``_OverBudget`` past ``budget`` search nodes. Returns the root result and
    the number of search nodes visited.
    """
    memo: dict[tuple[int, _State], _Sub] = {}
    n = len(engine.pods)
    visited = 0

    def advance(frame: _Frame) -> None:
        nonlocal visited
        i, state = frame.i, frame.state
        while True:
            if i == n:
                frame.tail = _LEAF
                return
            hit = memo.get((i, state))
            if hit is not None:
                frame.tail = hit
                return
            visited += 1
            if visited > budget or (meter is not None and not meter.charge(len(state))):
                raise _OverBudget
            kind = engine.kind_of[i]
            _, tied = engine.best(kind, (sid for sid, _ in state))
            if not tied:
                frame.chain.append(i)
            elif len(tied) == 1:
                frame.multiplier *= dict(state)[tied[0]]
                state = _move(state, tied[0], engine.successor(kind, tied[0]))
            else:
                # building a child state per tied state copies the state: charge it first
                if meter is not None and not meter.charge(len(state) * len(tied)):
                    raise _OverBudget
                counts = dict(state)
                frame.branch = (i, state)
                frame.children = [_move(state, sid, engine.successor(kind, sid)) for sid in tied]
                frame.weights = [counts[sid] for sid in tied]
                return
            i += 1

    classes = engine.initial_classes()
    root_state: _State = tuple(sorted((sid, len(m)) for sid, m in classes.items()))
    root = _Frame(0, root_state)
    advance(root)
    stack = [root]
    result = _LEAF
    while stack:
        frame = stack[-1]
        if frame.children is not None and len(frame.results) < len(frame.children):
            assert frame.branch is not None
            child = _Frame(frame.branch[0] + 1, frame.children[len(frame.results)])
            advance(child)
            stack.append(child)
            continue
        if frame.children is None:
            assert frame.tail is not None
            sub = frame.tail
        else:
            assert frame.branch is not None
            sub = _combine(frame.results, frame.weights)
            memo[frame.branch] = sub
        sub = _with_chain(sub, frame.chain, frame.multiplier)
        memo[frame.start] = sub
        stack.pop()
        if stack:
            stack[-1].results.append(sub)
        else:
            result = sub
    return result, visited


def _unpack(path: _Path | None) -> list[int] | None:
    if path is None:
        return None
    out: list[int] = []
    while path:
        out.append(path[0])
        path = path[1]
    return out


def _verdict_of(lands: int, strands: int) -> Verdict:
    if strands == 0:
        return "lands"
    if lands == 0:
        return "strands"
    return "at-risk"


def _names(pods: Sequence[PodRequest], indices: Iterable[int]) -> tuple[str, ...]:
    return tuple(pods[i].pod for i in sorted(indices))


def _reason(
    verdict: Verdict,
    outcomes: int,
    exhaustive: bool,
    sometimes: tuple[str, ...],
    p_strand: Fraction | None,
) -> str:
    scope = (
        f"{outcomes} tie-break outcome(s)"
        if exhaustive
        else f"{outcomes} sampled tie policies (bounded search)"
    )
    shown = ", ".join(sometimes[:5]) + (
        f" and {len(sometimes) - 5} more" if len(sometimes) > 5 else ""
    )
    if verdict == "lands":
        return f"every pod lands in all {scope}"
    if verdict == "strands":
        return f"some pod strands in all {scope}: {shown}"
    chance = "" if p_strand is None else f"; P(strand) = {p_strand} with uniform ties (up to 1.35)"
    return f"it depends on tie-breaks: over {scope}, some land and some strand {shown}{chance}"


def _predict_known(
    pods: tuple[PodRequest, ...],
    cluster: ClusterSnapshot,
    config: ScoringConfig,
    affinity: dict[str, tuple[str, ...]],
    unknown_as: Literal["empty", "full"],
    max_branches: int,
    samples: int,
    budget: Budget,
) -> SchedulerPrediction:
    engine = Engine(pods, cluster, config, affinity, unknown_as)
    order = tuple(p.pod for p in pods)
    window = _window(engine)
    meter = budget.share(min(max(0, budget.work - budget.used) // 4, MAX_SEARCH_WORK))
    try:
        sub, visited = _explore(engine, max_branches, meter)
    except _OverBudget:
        budget.used += meter.used
        return _predict_sampled(engine, pods, samples, meter, budget, window)
    budget.used += meter.used
    verdict: Verdict = "lands" if sub.all_land else ("at-risk" if sub.any_land else "strands")
    # A probability only where the scheduler draws ties uniformly (up to 1.35; see results.py).
    p_strand = sub.p_strand if config.uniform_ties else None
    reason = _reason(verdict, sub.outcomes, True, _names(pods, sub.sometimes), p_strand)
    verdict, reason = _windowed(verdict, reason, window)
    strand_choices = _unpack(sub.strand_path)
    land_choices = _unpack(sub.land_path)
    sometimes = _names(pods, sub.sometimes)
    return SchedulerPrediction(
        verdict=verdict,
        exhaustive=True,
        outcomes_explored=sub.outcomes,
        search_nodes=visited,
        stranded_sometimes=sometimes,
        stranded_always=_names(pods, sub.always),
        example_stranding=None
        if strand_choices is None
        else run_greedy(engine, ScriptedTies(strand_choices)),
        example_landing=None
        if land_choices is None
        else run_greedy(engine, ScriptedTies(land_choices)),
        order=order,
        config=config,
        reason=reason,
        node_outcomes=sub.node_outcomes,
        strand_probability=sub.p_strand,
    )


def _window(engine: Engine) -> tuple[int, int]:
    """(most nodes any pod fits on the cluster as given, kube-scheduler's numFeasibleNodesToFind).

    Capacity only shrinks as pods bind, so no pod ever has more feasible nodes
    than it has here: when this count is within the window, kube-scheduler
    scores every feasible node and the window cannot change a placement.
    """
    classes = engine.initial_classes()
    widest = 0
    for kind in range(len(engine.kind_pod)):
        feasible = sum(
            len(members)
            for sid, members in classes.items()
            if engine.evaluate(kind, sid) is not None
        )
        widest = max(widest, feasible)
    return widest, num_feasible_nodes_to_find(len(engine.nodes))


def _windowed(verdict: Verdict, reason: str, window: tuple[int, int]) -> tuple[Verdict, str]:
    """``lands`` becomes ``at-risk`` when the scan window could change which node a pod gets."""
    widest, scored = window
    if verdict != "lands" or widest <= scored:
        return verdict, reason
    return "at-risk", (
        f"{reason}; but a pod fits on {widest} nodes and kube-scheduler scores only the first "
        f"{scored} feasible nodes it finds (numFeasibleNodesToFind, scan starting at a rotating "
        "index), which the model does not follow: at-risk rather than lands"
    )


def _predict_sampled(
    engine: Engine,
    pods: tuple[PodRequest, ...],
    samples: int,
    meter: Budget,
    budget: Budget,
    window: tuple[int, int],
) -> SchedulerPrediction:
    policies: list[TiePolicy] = [FirstTie(), LastTie()]
    policies += [ByPodCount(engine, fewest=True), ByPodCount(engine, fewest=False)]
    policies += [RandomTie(random.Random(seed)) for seed in range(samples)]
    runs: list[Simulation] = []
    for policy in policies:
        run = run_bounded(engine, policy, budget)
        if run is None:
            break
        runs.append(run)
    if len(runs) < len(policies):
        budget.cut.append("scheduler model")
    landing = [r for r in runs if r.lands]
    stranding = [r for r in runs if not r.lands]
    position = {p.pod: i for i, p in enumerate(pods)}
    stranded_sets = [{position[s.pod] for s in r.stranded} for r in runs]
    sometimes = _names(pods, set().union(*stranded_sets))
    always = _names(pods, set.intersection(*stranded_sets)) if stranded_sets else ()
    verdict: Verdict = _verdict_of(len(landing), len(stranding)) if runs else "unknown"
    if verdict == "lands":
        verdict = "at-risk"  # a sample of tie policies is not every outcome: never a silent guess
    names = ", ".join(p.name for p in policies[: len(runs)])
    why = (
        "work bound"
        if meter.used > meter.work
        else ("time limit" if meter.out_of_time() else "search-node bound")
    )
    explored = (
        f"bounded search: the tie search stopped at its {why} after {meter.used} node-state "
        f"scans, then {len(runs)} of {len(policies)} tie policies ran ({names or 'none'})"
    )
    shown = ", ".join(sometimes[:5]) + (
        f" and {len(sometimes) - 5} more" if len(sometimes) > 5 else ""
    )
    if not runs:
        reason = f"{explored}: cut short before one run finished, so the verdict is unknown"
    elif not stranding:
        reason = (
            f"{explored}: every run lands, but not every tie-break outcome was explored, "
            "so the verdict is at-risk rather than lands"
        )
    elif not landing:
        reason = f"{explored}: some pod strands in every run: {shown}"
    else:
        reason = f"{explored}: some runs land and some strand {shown}"
    verdict, reason = _windowed(verdict, reason, window)
    return SchedulerPrediction(
        verdict=verdict,
        exhaustive=False,
        outcomes_explored=len(runs),
        search_nodes=meter.used,
        stranded_sometimes=sometimes,
        stranded_always=always,
        example_stranding=stranding[0] if stranding else None,
        example_landing=landing[0] if landing else None,
        order=tuple(p.pod for p in pods),
        config=engine.config,
        reason=reason,
    )


def predict(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    *,
    config: ScoringConfig | None = None,
    order: Sequence[str] | None = None,
    affinity: Mapping[str, Iterable[str]] | None = None,
    max_branches: int = DEFAULT_MAX_BRANCHES,
    samples: int = DEFAULT_SAMPLES,
    budget: Budget | None = None,
) -> SchedulerPrediction:
    """Whether kube-scheduler lands every pod, over every tie-break outcome.

    The pods arrive in apply order (``order`` or the given sequence: flow
    order, replicas in order). The search is a depth-first walk over the tie
    branches, memoised on the multiset of node states so that interchangeable
    nodes cost nothing; it is exhaustive while it visits at most
    ``max_branches`` (pod, cluster state) search nodes. Beyond that it runs a
    bounded search — the ``first`` and ``last`` tie policies, ``spread`` and
    ``pack`` (the tied node with the fewest / most pods), and ``samples``
    uniform random ones seeded 0, 1, … — and says ``exhaustive=False``.

    ``budget`` (default: :data:`DEFAULT_MAX_WORK` node-state scans, no
    deadline) bounds the whole prediction: the tie search gets a quarter of what is
    left (at most :data:`MAX_SEARCH_WORK`: its memo grows with it), the bounded runs the rest, and runs that would pass the bound or the
    budget's deadline are not started. A bounded search never answers
    ``lands`` (every run landing gives ``at-risk``, saying what ran); nothing
    run gives ``unknown``. When some pod fits on more nodes than
    kube-scheduler's scan window scores (:func:`num_feasible_nodes_to_find`),
    ``lands`` becomes ``at-risk`` too.

    Unknown occupancy: when a node that some pod could use has unknown
    occupancy, the model runs twice, with such nodes full and empty; equal
    verdicts of ``lands`` or ``strands`` stand, anything else is ``unknown``.
    (Greedy placement is not monotone in capacity, so this brackets the two
    ends only.)
    """
    if not _is_int(max_branches) or max_branches < 1 or not _is_int(samples) or samples < 0:
        raise InvalidInputError(
            "invalid-search-budget",
            f"max_branches={max_branches!r}, samples={samples!r}",
            "use max_branches >= 1 and samples >= 0",
        )
    cfg = config or ScoringConfig()
    meter = budget if budget is not None else Budget(DEFAULT_MAX_WORK)
    ordered = ordered_pods(pods, order)
    names = tuple(p.pod for p in ordered)
    groups = normalise_affinity(affinity)
    if cluster.nodes_unknown is not None:
        return SchedulerPrediction(
            verdict="unknown",
            exhaustive=False,
            outcomes_explored=0,
            search_nodes=0,
            stranded_sometimes=(),
            stranded_always=(),
            example_stranding=None,
            example_landing=None,
            order=names,
            config=cfg,
            reason=f"the node list is unknown: {cluster.nodes_unknown}",
        )
    probe = Engine(ordered, cluster, cfg, groups, "full")
    relevant = tuple(
        n.name
        for n in cluster.nodes
        if not n.occupancy_known
        and any(
            not probe.eligibility(k, probe.static_of[n.name]) for k in range(len(probe.kind_pod))
        )
    )
    if not relevant:
        return _predict_known(ordered, cluster, cfg, groups, "full", max_branches, samples, meter)
    full = _predict_known(ordered, cluster, cfg, groups, "full", max_branches, samples, meter)
    empty = _predict_known(ordered, cluster, cfg, groups, "empty", max_branches, samples, meter)
    verdict: Verdict = (
        full.verdict
        if full.verdict == empty.verdict and full.verdict in ("lands", "strands")
        else "unknown"
    )
    sometimes_set = set(full.stranded_sometimes) | set(empty.stranded_sometimes)
    always_set = set(full.stranded_always) & set(empty.stranded_always)
    reason = (
        f"nodes {list(relevant)} have unknown occupancy; with them full: {full.verdict}, "
        f"with them empty: {empty.verdict}"
    )
    return SchedulerPrediction(
        verdict=verdict,
        exhaustive=full.exhaustive and empty.exhaustive,
        outcomes_explored=full.outcomes_explored + empty.outcomes_explored,
        search_nodes=full.search_nodes + empty.search_nodes,
        stranded_sometimes=tuple(n for n in names if n in sometimes_set),
        stranded_always=tuple(n for n in names if n in always_set),
        example_stranding=full.example_stranding or empty.example_stranding,
        example_landing=empty.example_landing or full.example_landing,
        order=names,
        config=cfg,
        reason=reason,
        unknown_nodes=relevant,
        brackets=(("unknown-full", full.verdict), ("unknown-empty", empty.verdict)),
    )
