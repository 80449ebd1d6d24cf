"""One greedy kube-scheduler run: filter, score, bind each pod in apply order; break ties by a policy."""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Literal, TypeAlias

from vfcore.cluster import ClusterSnapshot
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import PodRequest
from vfcore.placement.scheduler.cluster_facts import SchedulingFacts
from vfcore.placement.scheduler.engine import Budget, Engine
from vfcore.placement.scheduler.preemption import Preemption
from vfcore.placement.scheduler.results import Simulation, Step, StrandedPod
from vfcore.placement.scheduler.scoring import ScoringConfig
from vfcore.placement.scheduler.workloads import Workload
from vfcore.quantity import PODS

__all__ = [
    "ByPodCount",
    "FirstTie",
    "LastTie",
    "RandomTie",
    "ScriptedTies",
    "TieBreak",
    "TiePolicy",
    "finish_run",
    "normalise_affinity",
    "ordered_pods",
    "preempt_and_bind",
    "rebind",
    "run_bounded",
    "run_greedy",
    "simulate",
    "tie_policy",
]

#: How a simulation breaks a score tie: ``"first"`` takes the tied node whose
#: name sorts first, ``"last"`` the one that sorts last, and a seeded
#: ``random.Random`` draws uniformly among the tied nodes (what kube-scheduler's
#: reservoir sampling did up to 1.35; 1.36 usually gives a tie to the earliest node
#: in its list, so ``"first"`` is the closer single run there).
TieBreak: TypeAlias = "Literal['first', 'last'] | random.Random"


class TiePolicy:
    """Which tied node a run takes; ``choose`` returns (state id, index among its members).

    ``pick`` adds the state the node moves to: for a DRA pod several may be possible
    (:meth:`Engine.successors`); the default takes the first.
    """

    name = "policy"

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        raise NotImplementedError

    def outcome(self, successors: tuple[int, ...]) -> int:
        return successors[0]

    def pick(
        self, engine: Engine, kind: int, tied: list[int], classes: Mapping[int, list[str]]
    ) -> tuple[int, int, int]:
        """(state id, member index, the state it moves to)."""
        sid, member = self.choose(tied, classes)
        return sid, member, self.outcome(engine.successors(kind, sid))


class FirstTie(TiePolicy):
    name = "first"

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        return min(tied, key=lambda sid: classes[sid][0]), 0


class LastTie(TiePolicy):
    name = "last"

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        sid = max(tied, key=lambda s: classes[s][-1])
        return sid, len(classes[sid]) - 1

    def outcome(self, successors: tuple[int, ...]) -> int:
        return successors[-1]


class RandomTie(TiePolicy):
    """Uniform over the tied *nodes*, as reservoir sampling was up to 1.35 (one draw per tie)."""

    name = "random"

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        if len(tied) == 1 and len(classes[tied[0]]) == 1:
            return tied[0], 0
        ordered = sorted(tied, key=lambda sid: classes[sid][0])
        pick = self.rng.randrange(sum(len(classes[sid]) for sid in ordered))
        for sid in ordered:
            size = len(classes[sid])
            if pick < size:
                return sid, pick
            pick -= size
        raise AssertionError("unreachable")  # pragma: no cover

    def outcome(self, successors: tuple[int, ...]) -> int:
        return successors[0] if len(successors) == 1 else self.rng.choice(successors)


class ByPodCount(TiePolicy):
    """The tied node already running the fewest pods (``spread``) or the most (``pack``).

    Not a kube-scheduler behaviour: the two extremes the bounded search tries
    because stranding usually comes from spreading or from packing too early.
    Ties between them go to the name that sorts first.
    """

    def __init__(self, engine: Engine, *, fewest: bool) -> None:
        self.pods_at = engine.index[PODS]
        self.states = engine.states
        self.sign = 1 if fewest else -1
        self.name = "spread" if fewest else "pack"

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        sid = min(tied, key=lambda s: (self.sign * self.states[s][1][self.pods_at], classes[s][0]))
        return sid, 0


class ScriptedTies(TiePolicy):
    """Replays the exhaustive search's choices: at each branch, the j-th tied state by id."""

    name = "scripted"

    def __init__(self, choices: Iterable[int]) -> None:
        self.choices: Iterator[int] = iter(choices)

    def choose(self, tied: list[int], classes: Mapping[int, list[str]]) -> tuple[int, int]:
        if len(tied) == 1:
            return tied[0], 0
        return sorted(tied)[next(self.choices)], 0

    def pick(
        self, engine: Engine, kind: int, tied: list[int], classes: Mapping[int, list[str]]
    ) -> tuple[int, int, int]:
        """The j-th of the search's children: each tied state by id, each of its successors."""
        children = [(sid, t) for sid in sorted(tied) for t in engine.successors(kind, sid)]
        if len(children) == 1:
            return children[0][0], 0, children[0][1]
        sid, target = children[next(self.choices)]
        return sid, 0, target


def tie_policy(tie: object) -> TiePolicy:
    if isinstance(tie, TiePolicy):
        return tie
    if tie == "first":
        return FirstTie()
    if tie == "last":
        return LastTie()
    if isinstance(tie, random.Random):
        return RandomTie(tie)
    raise InvalidInputError(
        "invalid-tie-policy",
        f"tie policy {tie!r} is not 'first', 'last' or a random.Random",
        "pass tie='first', tie='last' or tie=random.Random(<seed>)",
    )


def run_greedy(engine: Engine, policy: TiePolicy) -> Simulation:
    """One run under ``policy``, to the end."""
    sim = run_bounded(engine, policy, None)
    assert sim is not None  # no budget, so never cut short
    return sim


def run_bounded(engine: Engine, policy: TiePolicy, budget: Budget | None) -> Simulation | None:
    """One run under ``policy``; None when ``budget`` runs out first (each pod costs its node
    states, :meth:`Engine.cost`)."""
    classes = engine.initial_classes()
    placements: list[tuple[str, str]] = []
    stranded: list[PodRequest] = []
    steps: list[Step] = []
    preemptions: list[Preemption] = []
    dynamic = [engine.is_dynamic(k) for k in range(len(engine.kind_pod))]
    for position, pod in enumerate(engine.pods):
        kind = engine.kind_of[position]
        if budget is not None and not budget.charge(engine.cost(kind, len(classes))):
            return None
        sizes = {s: len(m) for s, m in classes.items()} if dynamic[kind] else None
        top, tied = engine.best(kind, classes, sizes)
        if not tied:
            report = preempt_and_bind(engine, kind, pod, classes)
            if report is None:
                stranded.append(pod)
                steps.append(Step(pod.pod, None, None, 0, 0))
                continue
            placements.append((pod.pod, report.node))
            steps.append(Step(pod.pod, report.node, None, 0, 0))
            preemptions.append(report)
            continue
        tied_nodes = sum(len(classes[s]) for s in tied)
        sid, member, target = policy.pick(engine, kind, tied, classes)
        name = rebind(classes, sid, member, target)
        placements.append((pod.pod, name))
        steps.append(Step(pod.pod, name, top, tied_nodes, len(tied)))
    return finish_run(engine, policy.name, classes, placements, stranded, steps, preemptions)


def preempt_and_bind(
    engine: Engine, kind: int, pod: PodRequest, classes: dict[int, list[str]]
) -> Preemption | None:
    """DefaultPreemption for ``pod``, which fits no node: the victims' node takes its new state
    (victims gone, the pod bound) in ``classes``; None when nothing can be preempted."""
    if not engine.can_preempt(kind):
        return None
    preempted = engine.preempt(kind, pod.pod, {s: len(m) for s, m in classes.items()})
    if preempted is None:
        return None
    source, target, report = preempted
    rebind(classes, source, 0, target)
    return report


def rebind(classes: dict[int, list[str]], sid: int, member: int, target: int) -> str:
    """Move the ``member``-th node of state ``sid`` to state ``target``; its name."""
    members = classes[sid]
    name = members.pop(member)
    if not members:
        del classes[sid]
    bisect.insort(classes.setdefault(target, []), name)
    return name


def finish_run(
    engine: Engine,
    tie: str,
    classes: Mapping[int, list[str]],
    placements: Sequence[tuple[str, str]],
    stranded: Sequence[PodRequest],
    steps: Sequence[Step],
    preemptions: Sequence[Preemption] = (),
) -> Simulation:
    """The :class:`Simulation` of a finished run: stranded pods worded against the final cluster."""
    lines: dict[int, str] = {}
    out: list[StrandedPod] = []
    sentinel = "\x00pod\x00"
    for pod in stranded:
        kind = engine.kind_of[engine.position[pod.pod]]
        template = lines.get(kind)
        if template is None:
            template = lines[kind] = engine.reasons_line(kind, replace(pod, pod=sentinel), classes)
        out.append(StrandedPod(pod.pod, template.replace(sentinel, pod.pod)))
    layouts: list[tuple[str, tuple[tuple[str, ...], ...]]] = []
    if engine.dra is not None:
        for sid, members in classes.items():
            state = engine.states[sid][1][engine.dra_slot]
            for name in members:
                layout = engine.dra.layout(name, state)
                if layout:
                    layouts.append((name, layout))
    return Simulation(
        order=tuple(p.pod for p in engine.pods),
        placements=tuple(placements),
        stranded=tuple(out),
        steps=tuple(steps),
        tie=tie,
        config=engine.config,
        unknown_nodes=engine.unknown_nodes,
        unknown_as=engine.unknown_as,
        preemptions=tuple(preemptions),
        dra_layouts=tuple(sorted(layouts)),
    )


def ordered_pods(pods: Sequence[PodRequest], order: Sequence[str] | None) -> tuple[PodRequest, ...]:
    by_name: dict[str, PodRequest] = {}
    for pod in pods:
        if pod.pod in by_name:
            raise InvalidInputError(
                "duplicate-pod",
                f"pod {pod.pod} is listed twice",
                "pass each pod once (pods are named <node>/<replica>)",
            )
        by_name[pod.pod] = pod
    if order is None:
        return tuple(pods)
    names = list(order)
    if sorted(names) != sorted(by_name):
        missing = sorted(set(by_name) - set(names))
        extra = sorted(set(names) - set(by_name))
        raise InvalidInputError(
            "invalid-order",
            f"the apply order is not a permutation of the pods (missing {missing}, "
            f"unknown or repeated {extra or sorted({n for n in names if names.count(n) > 1})})",
            "list every pod exactly once",
        )
    return tuple(by_name[name] for name in names)


def normalise_affinity(affinity: Mapping[str, Iterable[str]] | None) -> dict[str, tuple[str, ...]]:
    return {w: tuple(sorted(set(hosts))) for w, hosts in sorted((affinity or {}).items())}


def simulate(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    *,
    config: ScoringConfig | None = None,
    order: Sequence[str] | None = None,
    tie: Literal["first", "last"] | random.Random = "first",
    affinity: Mapping[str, Iterable[str]] | None = None,
    unknown_as: Literal["empty", "full"] = "empty",
    workloads: Mapping[str, Workload] | None = None,
    facts: SchedulingFacts | None = None,
) -> Simulation:
    """One greedy kube-scheduler run over ``pods`` in apply order (``order``: pod names).

    ``affinity`` maps a workload (``PodRequest.node``) to the only cluster
    nodes its pods may use — a required node affinity on
    ``kubernetes.io/hostname`` (hostnames are taken to equal node names).
    Nodes of unknown occupancy are simulated as ``unknown_as``.
    ``workloads`` (flow node → :class:`~.workloads.Workload`) say how the
    pods are created (owners, labels, priority, images): without them every
    pod is a bare pod. ``facts`` (:class:`~.cluster_facts.SchedulingFacts`)
    are the cluster's pods, images, budgets and priority classes. A
    ``random.Random`` tie policy is advanced by the run (pass a fresh
    ``random.Random(seed)`` to repeat a run).

    Cost: O(pods × distinct node states), not pods × nodes: identical nodes
    with identical loads are scored once.
    """
    if unknown_as not in ("empty", "full"):
        raise InvalidInputError(
            "invalid-unknown-bracket",
            f"unknown_as is {unknown_as!r}",
            "use 'empty' or 'full'",
        )
    policy = tie_policy(tie)
    engine = Engine(
        ordered_pods(pods, order),
        cluster,
        config or ScoringConfig(),
        normalise_affinity(affinity),
        unknown_as,
        workloads,
        facts,
    )
    return run_greedy(engine, policy)
