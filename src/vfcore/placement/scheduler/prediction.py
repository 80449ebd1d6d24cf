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
from vfcore.placement.scheduler.cluster_facts import SchedulingFacts
from vfcore.placement.scheduler.engine import Budget, Engine, num_feasible_nodes_to_find
from vfcore.placement.scheduler.preemption import Preemption
from vfcore.placement.scheduler.results import (
    SchedulerPrediction,
    Simulation,
    Verdict,
    WindowReport,
)
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
from vfcore.placement.scheduler.window import WindowRun, run_windowed, scheduler_node_order
from vfcore.placement.scheduler.workloads import Workload

__all__ = [
    "DEFAULT_MAX_BRANCHES",
    "DEFAULT_MAX_WORK",
    "DEFAULT_SAMPLES",
    "DEFAULT_WINDOW_RUNS",
    "DEFAULT_WINDOW_WORK",
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
#: Windowed runs (:mod:`.window`) a prediction makes when the scan window can matter.
DEFAULT_WINDOW_RUNS = 4
#: Node checks (one pod against one node of the list, vectorised) the windowed runs may make
#: in all: four runs of 12,500 pods on 2,000 nodes (about half a second each).
DEFAULT_WINDOW_WORK = 100_000_000


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
    fewest: int = 0
    most: int = 0
    evicted: frozenset[str] = frozenset()


_LEAF = _Sub(1, 1, Fraction(0), True, True, frozenset(), frozenset(), None, ())


class _OverBudget(Exception):
    pass


class _Frame:
    """One branch-free stretch of the search, from ``start`` to a branch point or the end."""

    __slots__ = (
        "branch",
        "chain",
        "children",
        "evicted",
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
        self.evicted: list[str] = []  # pods preempted on the way
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
    """The outcomes of a branch point from its children's (one pass over them)."""
    strand_path: _Path | None = None
    land_path: _Path | None = None
    outcomes = node_outcomes = 0
    weighted = Fraction(0)  # Σ w · p_strand, divided by the tied nodes at the end
    all_land, any_land = True, False
    sometimes: frozenset[int] = frozenset()
    always: frozenset[int] | None = None
    fewest, most = results[0].fewest, results[0].most
    evicted: frozenset[str] = frozenset()
    for j, (w, r) in enumerate(zip(weights, results, strict=True)):
        if strand_path is None and r.strand_path is not None:
            strand_path = (j, r.strand_path)
        if land_path is None and r.land_path is not None:
            land_path = (j, r.land_path)
        outcomes += r.outcomes
        node_outcomes += w * r.node_outcomes
        if r.p_strand:
            weighted += w * r.p_strand
        all_land = all_land and r.all_land
        any_land = any_land or r.any_land
        if r.sometimes:
            sometimes = sometimes | r.sometimes
        always = r.always if always is None else always & r.always
        fewest, most = min(fewest, r.fewest), max(most, r.most)
        if r.evicted:
            evicted = evicted | r.evicted
    return _Sub(
        outcomes=outcomes,
        node_outcomes=node_outcomes,
        p_strand=weighted / sum(weights) if weighted else Fraction(0),
        all_land=all_land,
        any_land=any_land,
        sometimes=sometimes,
        always=always if always is not None else frozenset(),
        strand_path=strand_path,
        land_path=land_path,
        fewest=fewest,
        most=most,
        evicted=evicted,
    )


def _with_chain(sub: _Sub, chain: list[int], multiplier: int, evicted: list[str]) -> _Sub:
    if evicted:
        sub = replace(sub, evicted=sub.evicted.union(evicted))
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
        fewest=sub.fewest + len(chain),
        most=sub.most + len(chain),
        evicted=sub.evicted,
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
    dynamic = [engine.is_dynamic(k) for k in range(len(engine.kind_pod))]

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
            kind = engine.kind_of[i]
            if visited > budget or (
                meter is not None and not meter.charge(engine.cost(kind, len(state)))
            ):
                raise _OverBudget
            sizes = dict(state) if dynamic[kind] else None
            _, tied = engine.best(kind, (sid for sid, _ in state), sizes)
            if not tied:
                preempted = (
                    engine.preempt(kind, engine.pods[i].pod, sizes or dict(state))
                    if engine.can_preempt(kind)
                    else None
                )
                if preempted is None:
                    frame.chain.append(i)
                else:
                    source, target, report = preempted
                    state = _move(state, source, target)
                    frame.evicted.extend(report.victims)
            elif len(tied) == 1 and len(engine.successors(kind, tied[0])) == 1:
                frame.multiplier *= dict(state)[tied[0]]
                state = _move(state, tied[0], engine.successor(kind, tied[0]))
            else:
                # a child per tied state, and per state a DRA pod may leave it in (the order the
                # allocator walks its device slices); building each copies the state: charge it
                pairs = [(sid, t) for sid in tied for t in engine.successors(kind, sid)]
                if meter is not None and not meter.charge(len(state) * len(pairs)):
                    raise _OverBudget
                counts = dict(state)
                frame.branch = (i, state)
                frame.children = [_move(state, sid, t) for sid, t in pairs]
                frame.weights = [counts[sid] for sid, _ in pairs]
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
        sub = _with_chain(sub, frame.chain, frame.multiplier, frame.evicted)
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


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What every run of one prediction shares."""

    pods: tuple[PodRequest, ...]
    cluster: ClusterSnapshot
    config: ScoringConfig
    affinity: dict[str, tuple[str, ...]]
    workloads: Mapping[str, Workload] | None
    facts: SchedulingFacts | None
    max_branches: int
    samples: int
    window_runs: int


def _predict_known(
    inputs: _Inputs, unknown_as: Literal["empty", "full"], budget: Budget
) -> SchedulerPrediction:
    pods, config = inputs.pods, inputs.config
    engine = Engine(
        pods,
        inputs.cluster,
        config,
        inputs.affinity,
        unknown_as,
        inputs.workloads,
        inputs.facts,
        memo=budget.memo,
    )
    order = tuple(p.pod for p in pods)
    window = _window(engine)
    meter = budget.share(min(max(0, budget.work - budget.used) // 4, MAX_SEARCH_WORK))
    try:
        sub, visited = _explore(engine, inputs.max_branches, meter)
    except _OverBudget:
        budget.used += meter.used
        sampled = _predict_sampled(engine, pods, inputs.samples, meter, budget)
        return _with_window(sampled, engine, window, budget, inputs.window_runs)
    budget.used += meter.used
    verdict: Verdict = "lands" if sub.all_land else ("at-risk" if sub.any_land else "strands")
    # A probability only where the scheduler draws ties uniformly (up to 1.35; see results.py).
    p_strand = sub.p_strand if config.uniform_ties else None
    reason = _reason(verdict, sub.outcomes, True, _names(pods, sub.sometimes), p_strand)
    strand_choices = _unpack(sub.strand_path)
    land_choices = _unpack(sub.land_path)
    sometimes = _names(pods, sub.sometimes)
    example_stranding = (
        None if strand_choices is None else run_greedy(engine, ScriptedTies(strand_choices))
    )
    example_landing = (
        None if land_choices is None else run_greedy(engine, ScriptedTies(land_choices))
    )
    if verdict == "lands" and engine.dra is not None and engine.dra.model.sampled:
        verdict = "at-risk"  # some device-slice orders were sampled: never a silent guess
        reason = f"{reason}; but the allocator's slice orders were sampled, not all explored"
    prediction = SchedulerPrediction(
        verdict=verdict,
        exhaustive=True,
        outcomes_explored=sub.outcomes,
        search_nodes=visited,
        stranded_sometimes=sometimes,
        stranded_always=_names(pods, sub.always),
        example_stranding=example_stranding,
        example_landing=example_landing,
        order=order,
        config=config,
        reason=reason,
        node_outcomes=sub.node_outcomes,
        strand_probability=sub.p_strand,
        stranded_range=(sub.fewest, sub.most),
        evicted=tuple(sorted(sub.evicted)),
        preemptions=_preemptions_of(example_landing, example_stranding),
        notes=_notes(engine),
    )
    return _with_window(prediction, engine, window, budget, inputs.window_runs)


def _preemptions_of(*runs: Simulation | None) -> tuple[Preemption, ...]:
    seen: dict[str, Preemption] = {}
    for run in runs:
        for p in run.preemptions if run is not None else ():
            seen.setdefault(p.pod, p)
    return tuple(seen[k] for k in sorted(seen))


def _notes(engine: Engine) -> tuple[str, ...]:
    """What the model could not decide, per workload (and for DRA pods, their devices)."""
    notes: list[str] = list(engine.dra.notes()) if engine.dra is not None else []
    for workload, table in sorted(engine.interpod.items()):
        if table.unknown:
            shown = ", ".join(table.unknown[:3]) + (
                f" and {len(table.unknown) - 3} more" if len(table.unknown) > 3 else ""
            )
            notes.append(
                f"{workload}: whether existing pods' affinity terms select its pods is unknown "
                f"({shown}): the pods' labels or a namespace selector are not known; those terms "
                "were left out"
            )
    return tuple(notes)


def _window(engine: Engine) -> tuple[int, int]:
    """(most nodes any pod fits on the cluster as given, kube-scheduler's numFeasibleNodesToFind).

    Capacity only shrinks as pods bind, so no pod ever has more feasible nodes
    than it has here: when this count is within the window, kube-scheduler
    scores every feasible node and the window cannot change a placement.
    (Preemption can free room, but a pod that preempts fit no node at all.)
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
    to_find = num_feasible_nodes_to_find(
        len(engine.nodes), engine.config.percentage_of_nodes_to_score
    )
    return widest, to_find


def _window_starts(nodes: int, runs: int) -> list[tuple[int, int | None]]:
    """(start index, jitter seed) of each windowed run: the list's start in list order, then
    starts spread over the list with parallel-filtering jitter seeded 0, 1, …"""
    if runs <= 0:
        return []
    out: list[tuple[int, int | None]] = [(0, None)]
    out += [(nodes * k // runs, k - 1) for k in range(1, runs)]
    return out[:runs]


def _with_window(
    prediction: SchedulerPrediction,
    engine: Engine,
    window: tuple[int, int],
    budget: Budget,
    runs: int,
) -> SchedulerPrediction:
    """The prediction once kube-scheduler's scan window is taken into account.

    Below the window (every pod fits on at most ``to_find`` nodes) nothing
    changes. Otherwise the windowed runs (:func:`.window.run_windowed`) join
    the outcomes: the stranded range spans both, ``strands`` stands when
    every outcome explored strands, ``at-risk`` when some land and some
    strand, and a ``lands`` becomes ``at-risk`` (the windows are sampled, not
    all explored).
    """
    widest, to_find = window
    if widest <= to_find:
        return prediction
    full = prediction.stranded_range
    order = scheduler_node_order(engine.cluster)
    meter = budget.share(DEFAULT_WINDOW_WORK)
    done: list[WindowRun] = []
    planned = _window_starts(len(order), runs)
    for start, seed in planned:
        run = run_windowed(
            engine, order, start=start, to_find=to_find, jitter_seed=seed, budget=meter
        )
        if run is None:
            if "scan window" not in budget.cut:
                budget.cut.append("scan window")
            break
        done.append(run)
    report = WindowReport(
        nodes=len(order),
        to_find=to_find,
        widest=widest,
        full=full,
        runs=tuple(r.to_dict() for r in done),
        planned=len(planned),
    )
    n = len(prediction.order)
    counts = [*(full or ()), *(r.stranded for r in done)]
    cause = (
        f"a pod fits on up to {widest} nodes and kube-scheduler scores only the first "
        f"{to_find} feasible nodes it finds (numFeasibleNodesToFind of {len(order)}), its scan "
        "starting where the last one stopped"
    )
    if not done:
        verdict = prediction.verdict
        if verdict == "lands":
            verdict = "at-risk"
        why = "no windowed run finished within the bound" if planned else "no windowed run was made"
        outcome = (
            "at-risk rather than lands"
            if prediction.verdict == "lands"
            else "the window's outcomes are not explored"
        )
        reason = f"{prediction.reason}; but {cause}, and {why}: {outcome}"
        return replace(prediction, verdict=verdict, reason=reason, window=report)
    low, high = min(counts), max(counts)
    window_low, window_high = report.window_range or (0, 0)
    window_verdict: Verdict = "strands" if low > 0 else "at-risk"
    said = f"{low}–{high}" if low != high else str(low)
    scored = (
        f"{full[0]}–{full[1]} with every feasible node scored ({prediction.reason})"
        if full is not None
        else f"no outcome with every feasible node scored finished ({prediction.reason})"
    )
    reason = (
        f"{said} of {n} pods strand: {scored}, {window_low}–{window_high} over {len(done)} "
        f"run(s) of the scan window; {cause}"
    )
    if high == 0:
        reason += "; the windows are sampled, not all explored: at-risk rather than lands"
    stranded_sets = [{s.pod for s in r.simulation.stranded} for r in done]
    sometimes = set(prediction.stranded_sometimes).union(*stranded_sets)
    always = set(prediction.stranded_always).intersection(*stranded_sets)
    evicted = set(prediction.evicted).union(
        *({v for p in r.simulation.preemptions for v in p.victims} for r in done)
    )
    return replace(
        prediction,
        verdict=window_verdict,
        reason=reason,
        stranded_sometimes=tuple(p for p in prediction.order if p in sometimes),
        stranded_always=tuple(p for p in prediction.order if p in always),
        example_stranding=prediction.example_stranding
        or next((r.simulation for r in done if not r.simulation.lands), None),
        stranded_range=(low, high),
        window=report,
        evicted=tuple(sorted(evicted)),
        preemptions=prediction.preemptions or _preemptions_of(*(r.simulation for r in done)),
    )


def _predict_sampled(
    engine: Engine,
    pods: tuple[PodRequest, ...],
    samples: int,
    meter: Budget,
    budget: Budget,
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
    counts = [len(r.stranded) for r in runs]
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
        stranded_range=(min(counts), max(counts)) if counts else None,
        evicted=tuple(sorted({v for r in runs for p in r.preemptions for v in p.victims})),
        preemptions=_preemptions_of(*runs),
        notes=_notes(engine),
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
    workloads: Mapping[str, Workload] | None = None,
    facts: SchedulingFacts | None = None,
    window_runs: int = DEFAULT_WINDOW_RUNS,
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

    ``workloads`` (flow node → :class:`~.workloads.Workload`) say how the pods
    are created — a Deployment's or StatefulSet's pods spread by hostname and
    zone, a pod of higher priority preempts — and ``facts``
    (:class:`~.cluster_facts.SchedulingFacts`) what else the cluster holds:
    its pods (for spreading, affinity terms and preemption), images, PDBs and
    priority classes. Without them the pods are bare pods on an otherwise
    empty cluster, as before.

    ``budget`` (default: :data:`DEFAULT_MAX_WORK` node-state scans, no
    deadline) bounds the whole prediction: the tie search gets a quarter of what is
    left (at most :data:`MAX_SEARCH_WORK`: its memo grows with it), the bounded runs the rest, and runs that would pass the bound or the
    budget's deadline are not started. A bounded search never answers
    ``lands`` (every run landing gives ``at-risk``, saying what ran); nothing
    run gives ``unknown``.

    **The scan window.** When some pod fits on more nodes than kube-scheduler
    scores (:func:`num_feasible_nodes_to_find`, from 100 nodes), up to
    ``window_runs`` windowed runs (:mod:`.window`; :data:`DEFAULT_WINDOW_WORK`
    node checks in all) join the outcomes: ``stranded_range`` spans them,
    ``strands`` means every explored outcome strands, ``at-risk`` that some
    land, and a ``lands`` becomes ``at-risk``.

    Unknown occupancy: when a node that some pod could use has unknown
    occupancy, the model runs twice, with such nodes full and empty; equal
    verdicts of ``lands`` or ``strands`` stand, anything else is ``unknown``.
    (Greedy placement is not monotone in capacity, so this brackets the two
    ends only.)
    """
    if (
        not _is_int(max_branches)
        or max_branches < 1
        or not _is_int(samples)
        or samples < 0
        or not _is_int(window_runs)
        or window_runs < 0
    ):
        raise InvalidInputError(
            "invalid-search-budget",
            f"max_branches={max_branches!r}, samples={samples!r}, window_runs={window_runs!r}",
            "use max_branches >= 1, samples >= 0 and window_runs >= 0",
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
    inputs = _Inputs(
        ordered, cluster, cfg, groups, workloads, facts, max_branches, samples, window_runs
    )
    probe = Engine(ordered, cluster, cfg, groups, "full", memo=meter.memo)
    dra_unknown = probe.dra.inventory.unknown_nodes if probe.dra is not None else {}
    relevant = tuple(
        n.name
        for n in cluster.nodes
        if (not n.occupancy_known or n.name in dra_unknown)
        and any(
            not probe.eligibility(k, probe.static_of[n.name])
            and (n.occupancy_known is False or probe.kind_claim[k] is not None)
            for k in range(len(probe.kind_pod))
        )
    )
    if not relevant:
        return _with_unknown_priority(_predict_known(inputs, "full", meter), workloads, facts)
    full = _predict_known(inputs, "full", meter)
    empty = _predict_known(inputs, "empty", meter)
    verdict: Verdict = (
        full.verdict
        if full.verdict == empty.verdict and full.verdict in ("lands", "strands")
        else "unknown"
    )
    sometimes_set = set(full.stranded_sometimes) | set(empty.stranded_sometimes)
    always_set = set(full.stranded_always) & set(empty.stranded_always)
    reason = (
        f"nodes {list(relevant)} have unknown occupancy (or devices of unknown use); with "
        f"them full: {full.verdict}, "
        f"with them empty: {empty.verdict}"
    )
    ranges = [r for r in (full.stranded_range, empty.stranded_range) if r is not None]
    return _with_unknown_priority(
        SchedulerPrediction(
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
            stranded_range=(min(r[0] for r in ranges), max(r[1] for r in ranges))
            if ranges
            else None,
            window=full.window,
            evicted=tuple(sorted(set(full.evicted) | set(empty.evicted))),
            preemptions=full.preemptions or empty.preemptions,
            notes=tuple(sorted(set(full.notes) | set(empty.notes))),
        ),
        workloads,
        facts,
    )


def _with_unknown_priority(
    prediction: SchedulerPrediction,
    workloads: Mapping[str, Workload] | None,
    facts: SchedulingFacts | None,
) -> SchedulerPrediction:
    """A stranding verdict becomes ``unknown`` when a stranded pod's priority is unknown and the
    cluster holds pods it might preempt (or its pods are unknown)."""
    if prediction.verdict in ("lands", "unknown") or not workloads:
        return prediction
    unknown = sorted(
        {
            name.rsplit("/", 1)[0]
            for name in prediction.stranded_sometimes
            if (w := workloads.get(name.rsplit("/", 1)[0])) is not None and w.priority is None
        }
    )
    if not unknown or (facts is not None and facts.pods_unknown is None and not facts.pods):
        return prediction
    classes = sorted({str(workloads[w].priority_class) for w in unknown})
    note = (
        f"the priority of {', '.join(unknown)} is unknown (PriorityClass {', '.join(classes)} is "
        "not in the cluster's listing), so whether a stranded pod would preempt others is unknown"
    )
    return replace(
        prediction,
        verdict="unknown",
        reason=f"{prediction.reason}; {note}",
        notes=(*prediction.notes, note),
    )
