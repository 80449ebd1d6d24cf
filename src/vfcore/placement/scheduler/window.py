"""kube-scheduler's scan window: which feasible nodes a pod is scored against, from 100 nodes up.

``findNodesThatPassFilters`` (1.36, ``pkg/scheduler/schedule_one.go``) does not
filter every node when the cluster has 100 or more. It walks the scheduler's
node list from ``nextStartNodeIndex``, stops once it has found
``numFeasibleNodesToFind`` feasible nodes (:func:`.engine.num_feasible_nodes_to_find`:
``max(100, N · max(5, 50 − N/125) / 100)``), scores only those, and moves the
start index on by the nodes it looked at. So each pod sees a *window* of the
cluster that rotates from pod to pod, and the best node of the window is not
always the best of the cluster. Three things decide which window a pod gets,
and vfcore can see none of them exactly:

- **the node list**: the node tree lists zones round-robin, each zone's nodes
  in the order the scheduler learned them (by name when it started with them
  listed): :func:`scheduler_node_order`;
- **the start index** where the first pod's scan begins: whatever the
  scheduler scheduled before. The runs take several;
- **parallel filtering**: 16 workers take chunks of the list at once
  (``chunkSizeFor``: ``min(√N, N/16 + 1)``), and the first feasible nodes to
  *finish* fill the window. A jittered run lets each node finish at its scan
  position plus a uniform delay of up to 16 chunks (seeded).

Ties inside the window go to the node found first (1.36's score heap, with no
extenders, pops it in most cases). :func:`run_windowed` is one such run; the
prediction (:func:`.prediction.predict`) runs a few (start index 0 in list
order, then other starts with jitter) next to its full-cluster tie search and
reports the stranded pods over all of them as a range.

Worked example (the issue's 200-node pool, 366 pods): the window is 100 of
200 nodes. With every feasible node scored, 3 pods strand; windowed runs
from four start indices strand 20–34, as a real kube-scheduler 1.36 did
(docs/scheduler-model.md, "The scan window").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vfcore.cluster import ClusterSnapshot, NodeState
from vfcore.placement.claims import PodRequest
from vfcore.placement.scheduler.engine import Budget, Engine
from vfcore.placement.scheduler.preemption import Preemption
from vfcore.placement.scheduler.results import Simulation, Step
from vfcore.placement.scheduler.simulation import finish_run, preempt_and_bind, rebind

__all__ = [
    "DYNAMIC_STATE_COST",
    "FILTER_WORKERS",
    "WindowRun",
    "chunk_size",
    "run_windowed",
    "scheduler_node_order",
    "zone_key",
]

#: kube-scheduler's default ``parallelism``: workers filtering nodes at once.
FILTER_WORKERS = 16
#: What one node state costs, in vectorised node checks, for a pod whose plugins are added per
#: cycle in Python (spreading, normalised plugins): about fifty times one numpy node check.
DYNAMIC_STATE_COST = 50
_ZONE_LABELS = ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone")
_REGION_LABELS = ("failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region")


def zone_key(node: NodeState) -> str:
    """``GetZoneKey``: ``region:\\x00:zone`` from the (beta, then GA) labels; ``""`` for none."""
    labels = dict(node.labels)
    zone = next((labels[k] for k in _ZONE_LABELS if k in labels), "")
    region = next((labels[k] for k in _REGION_LABELS if k in labels), "")
    if not zone and not region:
        return ""
    return f"{region}:\x00:{zone}"


def scheduler_node_order(cluster: ClusterSnapshot) -> tuple[str, ...]:
    """The node tree's list: zones round-robin (in order of first appearance), nodes by name.

    >>> from vfcore.cluster import node
    >>> z = lambda n, zone: node(n, allocatable={"cpu": 1},
    ...                          labels={"topology.kubernetes.io/zone": zone})
    >>> scheduler_node_order(ClusterSnapshot.of([z("a", "z1"), z("b", "z1"), z("c", "z2")]))
    ('a', 'c', 'b')
    """
    zones: dict[str, list[str]] = {}
    for n in cluster.nodes:  # sorted by name
        zones.setdefault(zone_key(n), []).append(n.name)
    lists = list(zones.values())
    out: list[str] = []
    for i in range(max((len(z) for z in lists), default=0)):
        out.extend(z[i] for z in lists if i < len(z))
    return tuple(out)


def chunk_size(nodes: int, workers: int = FILTER_WORKERS) -> int:
    """``parallelize.chunkSizeFor``: ``min(√n, n/workers + 1)``, at least 1.

    >>> chunk_size(200), chunk_size(2_000), chunk_size(10)
    (13, 44, 1)
    """
    size = int(math.sqrt(nodes))
    size = min(size, nodes // workers + 1)
    return max(size, 1)


@dataclass(frozen=True, slots=True)
class WindowRun:
    """One windowed run: where its scan started, whether parallel filtering was jittered, and
    the run itself (``stranded`` counts its stranded pods)."""

    start: int
    jitter_seed: int | None
    simulation: Simulation

    @property
    def stranded(self) -> int:
        return len(self.simulation.stranded)

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "jitter_seed": self.jitter_seed,
            "stranded": self.stranded,
            "stranded_pods": [s.pod for s in self.simulation.stranded],
        }


class _Scores:
    """Per pod kind, the score of every node state as a growing numpy table (-2: not yet
    evaluated, -1: does not fit)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.tables: list[np.ndarray] = [np.full(64, -2, dtype=np.int64) for _ in engine.kind_pod]

    def of(self, kind: int, sids: np.ndarray) -> np.ndarray:
        table = self.tables[kind]
        top = len(self.engine.states)
        if len(table) < top:
            grown = np.full(max(top, 2 * len(table)), -2, dtype=np.int64)
            grown[: len(table)] = table
            table = self.tables[kind] = grown
        values = table[sids]
        missing = values == -2
        if missing.any():
            for sid in np.unique(sids[missing]).tolist():
                score = self.engine.evaluate(kind, int(sid))
                table[sid] = -1 if score is None else score
            values = table[sids]
        out: np.ndarray = values
        return out


def run_windowed(
    engine: Engine,
    order: Sequence[str],
    *,
    start: int,
    to_find: int,
    jitter_seed: int | None = None,
    budget: Budget | None = None,
) -> WindowRun | None:
    """One greedy run in which each pod is scored against its scan window only.

    ``order`` is the scheduler's node list (:func:`scheduler_node_order`),
    ``start`` the index where the first pod's scan begins, ``to_find`` the
    window (``numFeasibleNodesToFind``). With ``jitter_seed`` the window is
    the first ``to_find`` feasible nodes to *finish* when each node's check
    ends at its position plus a seeded uniform delay of up to
    ``FILTER_WORKERS`` chunks (parallel filtering); without, the first
    ``to_find`` in list order. A pod that fits no node preempts as in
    :func:`.simulation.run_bounded`. Each pod costs ``len(order)`` work units
    of ``budget`` (plus :data:`DYNAMIC_STATE_COST` per node state when its
    plugins run per cycle); ``None`` when it runs out.
    """
    n = len(order)
    position = {name: i for i, name in enumerate(order)}
    classes = engine.initial_classes()
    node_sid = np.empty(n, dtype=np.int64)
    for sid, members in classes.items():
        for name in members:
            node_sid[position[name]] = sid
    scores = _Scores(engine)
    rng = np.random.default_rng(jitter_seed) if jitter_seed is not None else None
    begin = start
    spread = FILTER_WORKERS * chunk_size(n)
    placements: list[tuple[str, str]] = []
    stranded: list[PodRequest] = []
    steps: list[Step] = []
    preemptions: list[Preemption] = []
    dynamic = [engine.is_dynamic(k) for k in range(len(engine.kind_pod))]
    for index, pod in enumerate(engine.pods):
        kind = engine.kind_of[index]
        cost = n + (DYNAMIC_STATE_COST * len(classes) if dynamic[kind] else 0)
        if budget is not None and not budget.charge(cost):
            return None
        rotated = np.concatenate((node_sid[start:], node_sid[:start]))
        base = scores.of(kind, rotated)
        feasible = np.flatnonzero(base >= 0)
        if rng is not None and len(feasible) > to_find:
            finish = feasible + rng.uniform(0.0, float(spread), len(feasible))
            first = np.argpartition(finish, to_find - 1)[:to_find]
            ranked = first[np.argsort(finish[first], kind="stable")]
            found = feasible[ranked]
            processed = min(n, int(finish[ranked[-1]]) + 1)
        else:
            found = feasible[:to_find]
            processed = n if len(feasible) <= to_find else int(found[-1]) + 1
        origin = start
        start = (start + processed) % n
        if not len(found):
            report = preempt_and_bind(engine, kind, pod, classes)
            if report is None:
                stranded.append(pod)
                steps.append(Step(pod.pod, None, None, 0, 0))
                continue
            node_sid[position[report.node]] = next(
                s for s, m in classes.items() if report.node in m
            )
            placements.append((pod.pod, report.node))
            steps.append(Step(pod.pod, report.node, None, 0, 0))
            preemptions.append(report)
            continue
        window_sids = rotated[found]
        if dynamic[kind]:
            in_window: dict[int, int] = {}
            for sid in window_sids.tolist():
                in_window[sid] = in_window.get(sid, 0) + 1
            sizes = {s: len(m) for s, m in classes.items()}
            top, tied = engine.best_in_window(kind, sizes, in_window)
            tied_set = set(tied)
            picks = [i for i, sid in enumerate(window_sids.tolist()) if sid in tied_set]
        else:
            window_scores = base[found]
            top = int(window_scores.max())
            picks = np.flatnonzero(window_scores == top).tolist()
            tied = sorted(set(window_sids[picks].tolist()))
        chosen = int(found[picks[0]])  # the tied node found first
        name = order[(origin + chosen) % n]
        sid = int(node_sid[position[name]])
        target = engine.successor(kind, sid)
        rebind(classes, sid, classes[sid].index(name), target)
        node_sid[position[name]] = target
        placements.append((pod.pod, name))
        steps.append(Step(pod.pod, name, top, len(picks), len(tied)))
    tie = f"window(start={begin}, jitter={jitter_seed})"
    return WindowRun(
        begin,
        jitter_seed,
        finish_run(engine, tie, classes, placements, stranded, steps, preemptions),
    )
