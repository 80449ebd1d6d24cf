"""The model's compiled cluster: node equivalence classes, load states and memoised scores.

Identical nodes with identical loads are interchangeable, so the engine keeps
nodes in equivalence classes (same allocatable, labels, taints, condition and
load) and scores each distinct (pod kind, node state) once. The greedy run
(:mod:`.simulation`) and the tie search (:mod:`.prediction`) both drive it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Literal, cast

from vfcore.cluster import ClusterSnapshot, NodeState
from vfcore.placement.claims import PodRequest
from vfcore.placement.fit import (
    SELECTOR_MISMATCH,
    eligibility_reasons,
    resource_reasons,
    summarise,
    used_units,
)
from vfcore.placement.scheduler.scoring import (
    ScoringConfig,
    intolerable_prefer_no_schedule,
    nonzero_request,
    normalised_totals,
    plugin_scores,
)
from vfcore.quantity import CPU, MEMORY, PODS

__all__ = ["Budget", "Engine", "num_feasible_nodes_to_find"]

_MISSING = object()


class Engine:
    """Compiled pods and nodes: integer vectors, node classes and memoised evaluations.

    A node *state* is (static id, load vector). The static id groups nodes that
    no pod can tell apart except by load: same allocatable, labels, taints,
    condition and remedy affinity. The load vector holds the requested units of
    every relevant resource (``pods`` counts pods) and two extra slots: cpu and
    memory as the scorer counts them (``NonZeroRequested``). Each distinct
    state gets a small integer id; scores and successors are cached per
    (pod kind, state id).
    """

    def __init__(
        self,
        pods: Sequence[PodRequest],
        cluster: ClusterSnapshot,
        config: ScoringConfig,
        affinity: Mapping[str, tuple[str, ...]],
        unknown_as: Literal["empty", "full"],
    ) -> None:
        self.pods = pods
        self.position = {p.pod: i for i, p in enumerate(pods)}
        self.config = config
        self.affinity = affinity
        self.unknown_as = unknown_as
        names = {PODS, CPU, MEMORY}
        names.update(r for p in pods for r, _ in p.requests)
        names.update(r for r, _ in config.resources)
        names.update(config.balanced_resources)
        self.resources: tuple[str, ...] = tuple(sorted(names))
        self.index = {r: i for i, r in enumerate(self.resources)}
        self.width = len(self.resources)
        self.nz_cpu = self.width
        self.nz_memory = self.width + 1

        # Nodes, bracketed where occupancy is unknown.
        self.nodes: dict[str, NodeState] = {}
        self.unknown_nodes = tuple(n.name for n in cluster.nodes if not n.occupancy_known)
        self.base: dict[str, tuple[int, ...]] = {}
        self.static_of: dict[str, int] = {}
        static_ids: dict[tuple[object, ...], int] = {}
        self.static_alloc: list[tuple[int, ...]] = []
        self.static_node: list[NodeState] = []
        self.static_allowed: list[frozenset[str]] = []
        label_keys = {k for p in pods for k, _ in p.node_selector}
        for n in cluster.nodes:
            state = n
            if not n.occupancy_known:
                state = (
                    n.as_empty()
                    if unknown_as == "empty"
                    else replace(n, requested=n.allocatable, unknown_reason=None)
                )
            self.nodes[n.name] = state
            alloc = tuple(state.allocatable_of(r) for r in self.resources)
            used = [used_units(state, r) for r in self.resources]
            used += [state.nonzero_of(CPU), state.nonzero_of(MEMORY)]  # NonZeroRequested
            self.base[n.name] = tuple(used)
            allowed = frozenset(w for w, hosts in affinity.items() if n.name in hosts)
            # Only labels some pod selects on tell nodes apart: every real node has its own
            # kubernetes.io/hostname label, and keying on all labels made each node a class.
            labels = tuple((k, v) for k, v in n.labels if k in label_keys)
            key = (alloc, labels, n.taints, n.ready, n.unschedulable, allowed)
            sid = static_ids.get(key)
            if sid is None:
                sid = static_ids[key] = len(self.static_alloc)
                self.static_alloc.append(alloc)
                self.static_node.append(state)
                self.static_allowed.append(allowed)
            self.static_of[n.name] = sid

        # Pods, grouped into kinds (equal shape and affinity → interchangeable).
        kind_ids: dict[tuple[object, ...], int] = {}
        self.kind_of: list[int] = []
        self.kind_pod: list[PodRequest] = []
        self.kind_vector: list[tuple[int, ...]] = []
        self.kind_checked: list[tuple[int, ...]] = []
        for pod in pods:
            restricted = pod.node if pod.node in affinity else None
            kind_key = (pod.shape, restricted)
            kid = kind_ids.get(kind_key)
            if kid is None:
                kid = kind_ids[kind_key] = len(self.kind_pod)
                requests = dict(pod.requests)
                vector = [requests.get(r, 0) for r in self.resources]
                vector[self.index[PODS]] = 1  # the pod itself, against the node's pod limit
                vector += [nonzero_request(requests, CPU), nonzero_request(requests, MEMORY)]
                self.kind_pod.append(pod)
                self.kind_vector.append(tuple(vector))
                self.kind_checked.append(tuple(i for i in range(self.width) if vector[i] > 0))
            self.kind_of.append(kid)

        self.state_ids: dict[tuple[int, tuple[int, ...]], int] = {}
        self.states: list[tuple[int, tuple[int, ...]]] = []
        self._eligible: dict[tuple[int, int], tuple[str, ...]] = {}
        self._evals: list[dict[int, int | None]] = [{} for _ in self.kind_pod]
        self._next: list[dict[int, int]] = [{} for _ in self.kind_pod]
        # TaintToleration / NodeAffinity raw scores per (kind, static node), and per kind
        # whether any node gives a non-zero one (only then do they need normalising).
        self._soft_raw: dict[tuple[int, int], tuple[int, int]] = {}
        self._soft_kind: dict[int, bool] = {}

    # state ids ------------------------------------------------------------------
    def state_id(self, static: int, load: tuple[int, ...]) -> int:
        key = (static, load)
        sid = self.state_ids.get(key)
        if sid is None:
            sid = self.state_ids[key] = len(self.states)
            self.states.append(key)
        return sid

    def initial_classes(self) -> dict[int, list[str]]:
        classes: dict[int, list[str]] = {}
        for name in self.nodes:  # the snapshot keeps nodes sorted by name
            sid = self.state_id(self.static_of[name], self.base[name])
            classes.setdefault(sid, []).append(name)
        return classes

    # filters and scores -------------------------------------------------------------
    def eligibility(self, kind: int, static: int) -> tuple[str, ...]:
        key = (kind, static)
        found = self._eligible.get(key)
        if found is None:
            pod = self.kind_pod[kind]
            found = eligibility_reasons(pod, self.static_node[static])
            # NodeAffinity comes after eligibility_reasons' filters: a node counts at its first.
            allowed = self.static_allowed[static]
            if not found and pod.node in self.affinity and pod.node not in allowed:
                found = (SELECTOR_MISMATCH,)
            self._eligible[key] = found
        return found

    def evaluate(self, kind: int, sid: int) -> int | None:
        """The total score of a pod of ``kind`` on a node in state ``sid``; None if it does not fit."""
        cache = self._evals[kind]
        found = cache.get(sid, _MISSING)
        if found is not _MISSING:
            return cast("int | None", found)
        static, load = self.states[sid]
        result: int | None = None
        if not self.eligibility(kind, static):
            alloc = self.static_alloc[static]
            vector = self.kind_vector[kind]
            # vfcore.placement.fit's rule (request <= allocatable - used) on the compiled
            # vectors: this is the simulation's hot loop; reasons_line words it with fit.
            if all(vector[i] <= alloc[i] - load[i] for i in self.kind_checked[kind]):
                result = self._score(kind, alloc, load)
        cache[sid] = result
        return result

    def _score(self, kind: int, alloc: tuple[int, ...], load: tuple[int, ...]) -> int:
        vector = self.kind_vector[kind]
        pod = {r: vector[i] for i, r in enumerate(self.resources) if r != PODS and vector[i]}
        return plugin_scores(
            self.config,
            pod,
            dict(zip(self.resources, alloc, strict=True)),
            dict(zip(self.resources, load, strict=False)),
            load[self.nz_cpu],
            load[self.nz_memory],
        ).total

    def successor(self, kind: int, sid: int) -> int:
        """The state of a node in state ``sid`` after a pod of ``kind`` is bound to it."""
        cache = self._next[kind]
        found = cache.get(sid)
        if found is None:
            static, load = self.states[sid]
            vector = self.kind_vector[kind]
            found = cache[sid] = self.state_id(
                static, tuple(a + b for a, b in zip(load, vector, strict=True))
            )
        return found

    def soft_raw(self, kind: int, static: int) -> tuple[int, int]:
        """TaintToleration's and NodeAffinity's raw scores for a pod of ``kind`` on a static node.

        NodeAffinity's is 0: a PodRequest carries no preferred terms (a remedy's
        affinity is required, which NodeAffinity filters on but does not score).
        """
        key = (kind, static)
        found = self._soft_raw.get(key)
        if found is None:
            pod = self.kind_pod[kind]
            node = self.static_node[static]
            found = (intolerable_prefer_no_schedule(node.taints, pod.tolerations), 0)
            self._soft_raw[key] = found
        return found

    def _soft(self, kind: int) -> bool:
        found = self._soft_kind.get(kind)
        if found is None:
            found = any(
                self.soft_raw(kind, static) != (0, 0) for static in range(len(self.static_node))
            )
            self._soft_kind[kind] = found
        return found

    def _best_normalised(self, kind: int, sids: Iterable[int]) -> tuple[int | None, list[int]]:
        """:meth:`best` when TaintToleration or NodeAffinity can differ between nodes.

        Their scores are normalised across the feasible nodes (max over states is
        max over nodes, every state holding at least one node), so they are added
        per call rather than cached per state.
        """
        feasible = [(sid, score) for sid in sids if (score := self.evaluate(kind, sid)) is not None]
        if not feasible:
            return None, []
        raws = [self.soft_raw(kind, self.states[sid][0]) for sid, _ in feasible]
        totals = normalised_totals(
            self.config, [s for _, s in feasible], [t for t, _ in raws], [a for _, a in raws]
        )
        top = max(totals)
        return top, [sid for (sid, _), t in zip(feasible, totals, strict=True) if t == top]

    def best(self, kind: int, sids: Iterable[int]) -> tuple[int | None, list[int]]:
        """The top score among ``sids`` and the states that reach it (empty: nothing fits)."""
        if self._soft(kind):
            return self._best_normalised(kind, sids)
        top = -1
        tied: list[int] = []
        cache = self._evals[kind]
        for sid in sids:
            score = cache.get(sid, -1)  # the hot loop: one dict lookup per state
            if score == -1:  # not evaluated yet (scores are >= 0; None is "does not fit")
                score = self.evaluate(kind, sid)
            if score is None:
                continue
            if score > top:
                top = score
                tied = [sid]
            elif score == top:
                tied.append(sid)
        return (top if tied else None), tied

    def reasons_line(self, kind: int, pod: PodRequest, classes: Mapping[int, list[str]]) -> str:
        """``0/N nodes fit <pod>: …`` for ``pod`` (of ``kind``) against the nodes in ``classes``."""
        per_node: list[tuple[str, ...]] = []
        for sid, members in classes.items():
            static, load = self.states[sid]
            reasons = self.eligibility(kind, static)
            representative = members[0]
            node = self.nodes[representative]
            base = self.base[representative]
            if not reasons:  # the framework stops at a node's first failing filter
                extra = {
                    r: load[i] - base[i] for i, r in enumerate(self.resources) if load[i] != base[i]
                }
                reasons = resource_reasons(pod, node, extra)
            per_node.extend([reasons] * len(members))
        return summarise(pod.pod, len(self.nodes), per_node)


class Budget:
    """How much the model may spend: a work bound and, when a clock is given, a deadline.

    ``work`` counts node states scanned (one pod against one distinct node
    state), the unit the tie search and the greedy runs spend; ``seconds``
    bounds the wall clock read from ``clock`` (the caller's, e.g.
    ``time.monotonic``; vfcore reads no clock itself). ``spent`` says whether
    either bound was reached; ``cut`` records each phase that was cut short.
    """

    def __init__(
        self,
        work: int,
        *,
        seconds: float | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.work = work
        self.used = 0
        self.clock = clock
        self.deadline = None if seconds is None or clock is None else clock() + seconds
        self.cut: list[str] = []

    def charge(self, units: int) -> bool:
        """Spend ``units``; False once the work bound or the deadline is passed."""
        self.used += units
        if self.used > self.work:
            return False
        return not self.out_of_time()

    def out_of_time(self) -> bool:
        return self.deadline is not None and self.clock is not None and self.clock() > self.deadline

    def share(self, work: int) -> Budget:
        """A child budget of at most ``work`` units that keeps this one's deadline."""
        child = Budget(work)
        child.clock = self.clock
        child.deadline = self.deadline
        return child


#: kube-scheduler's ``minFeasibleNodesToFind`` and ``minFeasibleNodesPercentageToFind``.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes kube-scheduler looks for before it stops filtering.

    ``schedulePod``'s ``numFeasibleNodesToFind`` with ``percentageOfNodesToScore``
    unset (0, adaptive): below 100 nodes, all of them; otherwise
    ``50 - N/125`` percent of the ``N`` nodes (at least 5 %), never fewer than
    100. The scan starts where the previous cycle stopped (a rotating index),
    so which nodes make the sample changes from pod to pod.

    >>> num_feasible_nodes_to_find(50), num_feasible_nodes_to_find(200)
    (50, 100)
    >>> num_feasible_nodes_to_find(2_000), num_feasible_nodes_to_find(10_000)
    (680, 500)
    """
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_all_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = 50 - num_all_nodes // 125
        adaptive = max(adaptive, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    found = num_all_nodes * adaptive // 100
    return max(found, MIN_FEASIBLE_NODES_TO_FIND)
