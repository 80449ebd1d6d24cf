"""The model's compiled cluster: node equivalence classes, load states and memoised scores.

Identical nodes with identical loads are interchangeable, so the engine keeps
nodes in equivalence classes (same allocatable, labels, taints, condition and
load) and scores each distinct (pod kind, node state) once. The greedy run
(:mod:`.simulation`) and the tie search (:mod:`.prediction`) both drive it.

Workloads and cluster facts (:mod:`.context`) add to a state what the other
plugins read: per spread selector, how many matching pods the node holds
(extra slots of the load vector); per node, the InterPodAffinity and
ImageLocality tables of each pod kind and, where preemption can happen, the
node itself (its lower-priority pods are its own). Plugins normalised across
the feasible nodes (TaintToleration, NodeAffinity, InterPodAffinity,
PodTopologySpread) are added per scheduling cycle (:meth:`Engine.best`).

DRA pods (:mod:`.dynamic_resources`) add the DynamicResources filter: a node's
devices are one more entry of its load (the id of its DRA state), and binding
such a pod may leave the node in several states (:meth:`Engine.successors`),
one per order the allocator can walk the node's device slices in.
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
from vfcore.placement.scheduler.cluster_facts import BoundPod, SchedulingFacts
from vfcore.placement.scheduler.context import (
    InterpodTable,
    SpreadPlan,
    WorkloadSpread,
    existing_slot_counts,
    image_scores,
    interpod_table,
    node_labels,
    plan_spread,
    potential_victims,
)
from vfcore.placement.scheduler.dynamic_resources import CANNOT_ALLOCATE, DynamicResources
from vfcore.placement.scheduler.plugins import (
    EXISTING_ANTI_AFFINITY,
    normalize_interpod,
    spread_filter_fails,
    spread_scores_by_value,
)
from vfcore.placement.scheduler.preemption import (
    Candidate,
    Preemption,
    pick_node,
    preemption_of,
    select_victims,
)
from vfcore.placement.scheduler.scoring import (
    ScoringConfig,
    intolerable_prefer_no_schedule,
    nonzero_request,
    normalised_totals,
    plugin_scores,
)
from vfcore.placement.scheduler.workloads import HOSTNAME_KEY, Workload
from vfcore.quantity import CPU, MEMORY, PODS

__all__ = ["DYNAMIC_COST", "Budget", "Engine", "num_feasible_nodes_to_find"]

#: Work units one node state costs a pod whose plugins are added per cycle (normalised across
#: the feasible nodes, or spreading) instead of one: Python builds its plugin scores anew.
DYNAMIC_COST = 8

_MISSING = object()


class Engine:
    """Compiled pods and nodes: integer vectors, node classes and memoised evaluations.

    A node *state* is (static id, load vector). The static id groups nodes that
    no pod can tell apart except by load: same allocatable, labels, taints,
    condition and remedy affinity (and, with workloads and facts, the same
    affinity and image tables; a node holding pods that may be preempted is
    its own). The load vector holds the requested units of every relevant
    resource (``pods`` counts pods), cpu and memory as the scorer counts them
    (``NonZeroRequested``), then one count per spread selector. Each distinct
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
        workloads: Mapping[str, Workload] | None = None,
        facts: SchedulingFacts | None = None,
        memo: dict[tuple[object, ...], object] | None = None,
    ) -> None:
        self.pods = pods
        self.position = {p.pod: i for i, p in enumerate(pods)}
        self.config = config
        self.affinity = affinity
        self.unknown_as = unknown_as
        self.cluster = cluster
        self.workloads = dict(workloads or {})
        self.facts = facts
        names = {PODS, CPU, MEMORY}
        names.update(r for p in pods for r, _ in p.requests)
        names.update(r for r, _ in config.resources)
        names.update(config.balanced_resources)
        self.resources: tuple[str, ...] = tuple(sorted(names))
        self.index = {r: i for i, r in enumerate(self.resources)}
        self.width = len(self.resources)
        self.nz_cpu = self.width
        self.nz_memory = self.width + 1
        self.slot_base = self.width + 2
        used_workloads = {p.node: self.workloads[p.node] for p in pods if p.node in self.workloads}
        self.spread: SpreadPlan = plan_spread(
            used_workloads, config.default_spread, scored=config.spread_weight > 0
        )
        self.n_slots = len(self.spread.keys)
        # DynamicResources: one more load entry, the node's DRA state (only with DRA pods)
        self.dra = (
            DynamicResources.of(pods, cluster, unknown_as, memo)
            if any(p.dra for p in pods)
            else None
        )
        self.dra_slot = self.slot_base + self.n_slots
        self._kinds(pods)
        self._nodes(cluster)
        self.state_ids: dict[tuple[int, tuple[int, ...]], int] = {}
        self.states: list[tuple[int, tuple[int, ...]]] = []
        self._eligible: dict[tuple[int, int], tuple[str, ...]] = {}
        self._evals: list[dict[int, int | None]] = [{} for _ in self.kind_pod]
        self._next: list[dict[int, tuple[int, ...]]] = [{} for _ in self.kind_pod]
        # static plugin inputs per (kind, static node): taint count, preferred node affinity,
        # InterPodAffinity raw score, ImageLocality score; and per kind whether any is non-zero
        self._soft_raw: dict[tuple[int, int], tuple[int, int, int, int]] = {}
        self._soft_kind: dict[int, bool] = {}
        self._victim_vectors: dict[str, tuple[int, ...]] = {}
        self._topologies: dict[tuple[int, int], tuple[bool, bool, tuple[str | None, ...]]] = {}
        self._matching: dict[tuple[int, int], bool] = {}

    # compiling ----------------------------------------------------------------------
    def _kinds(self, pods: Sequence[PodRequest]) -> None:
        """Pods grouped into kinds: equal shape, affinity and workload part → interchangeable."""
        facts = self.facts
        self.interpod: dict[str, InterpodTable] = {}
        self.images: dict[str, dict[str, int]] = {}
        if facts is not None:
            for name, workload in sorted(self.workloads.items()):
                if any(p.node == name for p in pods):
                    table = interpod_table(workload, facts, self.cluster)
                    if table.active or table.blocked or table.unknown:
                        self.interpod[name] = table
                    scores = image_scores(workload, facts, self.cluster)
                    if scores:
                        self.images[name] = scores
        kind_ids: dict[tuple[object, ...], int] = {}
        self.kind_of: list[int] = []
        self.kind_pod: list[PodRequest] = []
        self.kind_vector: list[tuple[int, ...]] = []
        self.kind_checked: list[tuple[int, ...]] = []
        self.kind_spread: list[WorkloadSpread | None] = []
        self.kind_priority: list[int | None] = []
        self.kind_preempts: list[bool] = []
        self.kind_claim: list[tuple[int, int] | None] = []
        for pod in pods:
            restricted = pod.node if pod.node in self.affinity else None
            owner = self.workloads.get(pod.node)
            spread = self.spread.of(pod.node)
            specific = (
                spread is not None
                or pod.node in self.interpod
                or pod.node in self.images
                or (owner is not None and owner.priority not in (0, None))
            )
            kind_key = (pod.shape, restricted, pod.node if specific else None)
            kid = kind_ids.get(kind_key)
            if kid is None:
                kid = kind_ids[kind_key] = len(self.kind_pod)
                requests = dict(pod.requests)
                vector = [requests.get(r, 0) for r in self.resources]
                vector[self.index[PODS]] = 1  # the pod itself, against the node's pod limit
                vector += [nonzero_request(requests, CPU), nonzero_request(requests, MEMORY)]
                slots = [0] * self.n_slots
                for s in spread.member_of if spread is not None else ():
                    slots[s] = 1
                self.kind_pod.append(pod)
                extra = [0] if self.dra is not None else []
                self.kind_vector.append((*vector, *slots, *extra))
                self.kind_claim.append(None if self.dra is None else self.dra.request_of(pod))
                self.kind_checked.append(tuple(i for i in range(self.width) if vector[i] > 0))
                self.kind_spread.append(
                    spread if spread is not None and spread.constraints else None
                )
                priority = 0 if owner is None else owner.priority
                self.kind_priority.append(priority)
                self.kind_preempts.append(
                    owner is not None
                    and priority is not None
                    and owner.preemption_policy != "Never"
                    and pod.dra is None  # freeing victims' devices is not modelled
                )
            self.kind_of.append(kid)

    def _nodes(self, cluster: ClusterSnapshot) -> None:
        """Nodes, bracketed where occupancy is unknown, grouped into static classes."""
        facts = self.facts
        pods_on = facts.pods if facts is not None and facts.pods_unknown is None else ()
        seeded = existing_slot_counts(self.spread, self.workloads, pods_on)
        top = max((p for p in self.kind_priority if p is not None), default=0)
        self.victims_of_node = (
            potential_victims(facts, cluster, top) if any(self.kind_preempts) else {}
        )
        self.nodes: dict[str, NodeState] = {}
        self.unknown_nodes = tuple(n.name for n in cluster.nodes if not n.occupancy_known)
        self.base: dict[str, tuple[int, ...]] = {}
        self.static_of: dict[str, int] = {}
        self._static_ids: dict[tuple[object, ...], int] = {}
        self.static_alloc: list[tuple[int, ...]] = []
        self.static_node: list[NodeState] = []
        self.static_allowed: list[frozenset[str]] = []
        self.static_labels: list[dict[str, str]] = []
        self.static_victims: list[tuple[BoundPod, ...]] = []
        label_keys = {k for p in self.pods for k, _ in p.node_selector}
        for spread in self.spread.workloads.values():
            label_keys.update(c.topology_key for c in spread.constraints)
        label_keys.discard(HOSTNAME_KEY)  # every node has its own: spread counts by node instead
        extras_of = sorted(set(self.interpod) | set(self.images))
        for n in cluster.nodes:
            state = n
            if not n.occupancy_known:
                state = (
                    n.as_empty()
                    if self.unknown_as == "empty"
                    else replace(n, requested=n.allocatable, unknown_reason=None)
                )
            self.nodes[n.name] = state
            alloc = tuple(state.allocatable_of(r) for r in self.resources)
            used = [used_units(state, r) for r in self.resources]
            used += [state.nonzero_of(CPU), state.nonzero_of(MEMORY)]  # NonZeroRequested
            used += seeded.get(n.name, [0] * self.n_slots)
            if self.dra is not None:
                used.append(self.dra.initial(n.name))
            self.base[n.name] = tuple(used)
            allowed = frozenset(w for w, hosts in self.affinity.items() if n.name in hosts)
            # Only labels some pod selects or spreads on tell nodes apart: every real node has its
            # own kubernetes.io/hostname label, and keying on all labels made each node a class.
            labels = tuple((k, v) for k, v in n.labels if k in label_keys)
            full = node_labels(n)
            extras = tuple(
                (
                    self.interpod[w].raw(full) if w in self.interpod else 0,
                    self.interpod[w].blocks(full) if w in self.interpod else False,
                    self.images.get(w, {}).get(n.name, 0),
                )
                for w in extras_of
            )
            victims = self.victims_of_node.get(n.name, ())
            own = n.name if victims else None  # a node whose pods may be evicted is its own class
            key = (alloc, labels, n.taints, n.ready, n.unschedulable, allowed, extras, own)
            self.static_of[n.name] = self._static(key, alloc, state, allowed, full, victims)

    def _static(
        self,
        key: tuple[object, ...],
        alloc: tuple[int, ...],
        node: NodeState,
        allowed: frozenset[str],
        labels: dict[str, str],
        victims: tuple[BoundPod, ...],
    ) -> int:
        sid = self._static_ids.get(key)
        if sid is None:
            sid = self._static_ids[key] = len(self.static_alloc)
            self.static_alloc.append(alloc)
            self.static_node.append(node)
            self.static_allowed.append(allowed)
            self.static_labels.append(labels)
            self.static_victims.append(victims)
        return sid

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

    def _interpod_blocks(self, kind: int, static: int) -> bool:
        table = self.interpod.get(self.kind_pod[kind].node)
        return table is not None and table.blocks(self.static_labels[static])

    def _matches_affinity(self, kind: int, static: int) -> bool:
        """Whether the node matches the pod's node selector and required node affinity."""
        key = (kind, static)
        found = self._matching.get(key)
        if found is None:
            pod = self.kind_pod[kind]
            labels = self.static_labels[static]
            found = all(labels.get(k) == v for k, v in pod.node_selector) and (
                pod.node not in self.affinity or pod.node in self.static_allowed[static]
            )
            self._matching[key] = found
        return found

    def evaluate(self, kind: int, sid: int) -> int | None:
        """The total score of a pod of ``kind`` on a node in state ``sid``; None if it does not fit.

        PodTopologySpread's filter is not in it: it depends on the other nodes
        (:meth:`best` applies it).
        """
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
            claim = self.kind_claim[kind]
            if (
                all(vector[i] <= alloc[i] - load[i] for i in self.kind_checked[kind])
                and not self._interpod_blocks(kind, static)
                and (
                    claim is None
                    or (
                        self.dra is not None and bool(self.dra.outcomes(claim, load[self.dra_slot]))
                    )
                )
            ):
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
            dict(zip(self.resources, load[: self.width], strict=True)),
            load[self.nz_cpu],
            load[self.nz_memory],
        ).total

    def successor(self, kind: int, sid: int) -> int:
        """The state of a node in state ``sid`` after a pod of ``kind`` is bound to it (for a
        DRA pod with several, the first: :meth:`successors`)."""
        return self.successors(kind, sid)[0]

    def successors(self, kind: int, sid: int) -> tuple[int, ...]:
        """Every state a node in state ``sid`` may be in after a pod of ``kind`` is bound to
        it: one, except for a DRA pod, whose devices depend on the order the allocator walks
        the node's device slices in (each a tie the search explores)."""
        cache = self._next[kind]
        found = cache.get(sid)
        if found is None:
            static, load = self.states[sid]
            vector = self.kind_vector[kind]
            after = tuple(a + b for a, b in zip(load, vector, strict=True))
            claim = self.kind_claim[kind]
            if claim is None or self.dra is None:
                found = (self.state_id(static, after),)
            else:
                outcomes = self.dra.outcomes(claim, load[self.dra_slot]) or (load[self.dra_slot],)
                slot = self.dra_slot
                found = tuple(
                    self.state_id(static, (*after[:slot], o, *after[slot + 1 :])) for o in outcomes
                )
            cache[sid] = found
        return found

    def soft_raw(self, kind: int, static: int) -> tuple[int, int, int, int]:
        """The static plugins' raw scores for a pod of ``kind`` on a static node.

        (TaintToleration's intolerable count, NodeAffinity's preferred weight —
        0: a PodRequest carries no preferred terms, a remedy's affinity is
        required —, InterPodAffinity's raw sum, ImageLocality's score.)
        """
        key = (kind, static)
        found = self._soft_raw.get(key)
        if found is None:
            pod = self.kind_pod[kind]
            node = self.static_node[static]
            table = self.interpod.get(pod.node)
            found = (
                intolerable_prefer_no_schedule(node.taints, pod.tolerations),
                0,
                0 if table is None else table.raw(self.static_labels[static]),
                self.images.get(pod.node, {}).get(node.name, 0),
            )
            self._soft_raw[key] = found
        return found

    def cost(self, kind: int, states: int) -> int:
        """The work units of scoring ``states`` node states for a pod of ``kind``."""
        return states * (DYNAMIC_COST if self.is_dynamic(kind) else 1)

    def is_dynamic(self, kind: int) -> bool:
        """Whether the kind's score needs the per-cycle path (normalised or spread plugins)."""
        found = self._soft_kind.get(kind)
        if found is None:
            pod = self.kind_pod[kind]
            table = self.interpod.get(pod.node)
            found = (
                self.kind_spread[kind] is not None
                or (table is not None and table.active)
                or pod.node in self.images
                or any(
                    self.soft_raw(kind, static)[:2] != (0, 0)
                    for static in range(len(self.static_node))
                )
            )
            self._soft_kind[kind] = found
        return found

    def _topology(self, kind: int, static: int) -> tuple[bool, bool, tuple[str | None, ...]]:
        """(matches the pod's node affinity, has every constraint's key, each key's value)."""
        key = (kind, static)
        found = self._topologies.get(key)
        if found is None:
            spread = self.kind_spread[kind]
            assert spread is not None
            labels = self.static_labels[static]
            values = tuple(labels.get(c.topology_key) for c in spread.constraints)
            found = (
                self._matches_affinity(kind, static),
                all(v is not None for v in values),
                values,
            )
            self._topologies[key] = found
        return found

    def _spread_counts(
        self, kind: int, spread: WorkloadSpread, entries: Iterable[tuple[int, int]]
    ) -> tuple[list[dict[str, int]], list[int]]:
        """Per constraint: matching pods per domain (nodes matching the pod's affinity), and
        the smallest count over the domains of the eligible nodes (for the hard filter)."""
        n = len(spread.constraints)
        domains: list[dict[str, int]] = [{} for _ in range(n)]
        minimum: list[int | None] = [None] * n
        soft = [i for i, c in enumerate(spread.constraints) if not c.is_hard]
        hard = [i for i, c in enumerate(spread.constraints) if c.is_hard]
        host = [c.topology_key == HOSTNAME_KEY for c in spread.constraints]
        slots = [self.slot_base + s for s in spread.slots]
        require_all = spread.require_all
        for sid, count in entries:
            static, load = self.states[sid]
            matches, has_all, values = self._topology(kind, static)
            if not matches:
                continue
            if not require_all or has_all:
                for i in soft:
                    pods = load[slots[i]]
                    if pods:
                        value = values[i] or ""
                        domains[i][value] = domains[i].get(value, 0) + pods * count
                    elif not host[i]:
                        domains[i].setdefault(values[i] or "", 0)
            if has_all:
                for i in hard:
                    pods = load[slots[i]]
                    if host[i]:
                        low = minimum[i]
                        minimum[i] = pods if low is None else min(low, pods)
                    else:
                        value = values[i] or ""
                        domains[i][value] = domains[i].get(value, 0) + pods * count
        for i in hard:
            if not host[i]:
                minimum[i] = min(domains[i].values(), default=0)
        return domains, [m or 0 for m in minimum]

    def _spread_blocks(
        self,
        spread: WorkloadSpread,
        static: int,
        load: tuple[int, ...],
        domains: list[dict[str, int]],
        minimum: list[int],
    ) -> str | None:
        labels = self.static_labels[static]
        counts = [
            load[self.slot_base + slot]
            if c.topology_key == HOSTNAME_KEY
            else domains[i].get(labels.get(c.topology_key, ""), 0)
            for i, (c, slot) in enumerate(zip(spread.constraints, spread.slots, strict=True))
        ]
        return spread_filter_fails(spread.constraints, labels, counts, minimum, spread.self_match)

    def _best_dynamic(
        self, kind: int, sizes: Mapping[int, int], scanned: Mapping[int, int]
    ) -> tuple[int | None, list[int]]:
        """:meth:`best` when a plugin is normalised across the feasible nodes or spreads.

        TaintToleration, NodeAffinity, InterPodAffinity and PodTopologySpread
        are normalised across the feasible nodes (max over states is max over
        nodes, every state holding at least one node), so they are added per
        call rather than cached per state; a plugin equal on every feasible
        node is left out. PodTopologySpread also filters (``DoNotSchedule``).
        ``sizes`` are every node's states (spread counts run over the whole
        cluster), ``scanned`` the states and node counts the scan looked at
        (the scan window; every node below 100).
        """
        feasible = [
            (sid, count, score)
            for sid, count in scanned.items()
            if (score := self.evaluate(kind, sid)) is not None
        ]
        spread = self.kind_spread[kind]
        domains: list[dict[str, int]] = []
        if spread is not None:
            domains, minimum = self._spread_counts(kind, spread, list(sizes.items()))
            if spread.has_hard:
                feasible = [
                    f
                    for f in feasible
                    if self._spread_blocks(spread, *self.states[f[0]], domains, minimum) is None
                ]
        if not feasible:
            return None, []
        raws = [self.soft_raw(kind, self.states[sid][0]) for sid, _, _ in feasible]
        totals = normalised_totals(
            self.config, [s for _, _, s in feasible], [r[0] for r in raws], [r[1] for r in raws]
        )
        table = self.interpod.get(self.kind_pod[kind].node)
        extra: list[tuple[int, list[int]]] = []
        if table is not None and table.active:
            extra.append(
                (self.config.interpod_weight, normalize_interpod([r[2] for r in raws], active=True))
            )
        extra.append((self.config.image_weight, [r[3] for r in raws]))
        if spread is not None and spread.has_soft and self.config.spread_weight:
            extra.append(
                (
                    self.config.spread_weight,
                    spread_scores_by_value(
                        spread.constraints,
                        require_all=spread.require_all,
                        values=[
                            tuple(
                                "" if c.topology_key == HOSTNAME_KEY else v
                                for c, v in zip(
                                    spread.constraints,
                                    self._topology(kind, self.states[sid][0])[2],
                                    strict=True,
                                )
                            )
                            for sid, _, _ in feasible
                        ],
                        own_counts=[
                            [self.states[sid][1][self.slot_base + s] for s in spread.slots]
                            for sid, _, _ in feasible
                        ],
                        domain_counts=domains,
                        multiplicity=[count for _, count, _ in feasible],
                    ),
                )
            )
        for weight, scores in extra:
            if weight and len(set(scores)) > 1:
                totals = [t + weight * s for t, s in zip(totals, scores, strict=True)]
        top = max(totals)
        return top, [sid for (sid, _, _), t in zip(feasible, totals, strict=True) if t == top]

    def best(
        self, kind: int, sids: Iterable[int], sizes: Mapping[int, int] | None = None
    ) -> tuple[int | None, list[int]]:
        """The top score among ``sids`` (the states of every node of the cluster) and the states
        that reach it (empty: nothing fits).

        ``sizes`` (state id → its number of nodes) is read only when a plugin
        is normalised or spreads (:meth:`is_dynamic`); callers pass it then.
        """
        if self.is_dynamic(kind):
            if sizes is None:
                raise ValueError("best() needs sizes for a kind with per-cycle plugins")
            return self._best_dynamic(kind, sizes, sizes)
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

    def best_in_window(
        self, kind: int, sizes: Mapping[int, int], window: Mapping[int, int]
    ) -> tuple[int | None, list[int]]:
        """:meth:`best` over the nodes of a scan window (``window``: state → nodes of it in the
        window); counts for spreading still run over every node (``sizes``)."""
        if self.is_dynamic(kind):
            return self._best_dynamic(kind, sizes, window)
        return self.best(kind, window)

    # preemption -------------------------------------------------------------------------
    def _victim_vector(self, pod: BoundPod) -> tuple[int, ...]:
        found = self._victim_vectors.get(pod.id)
        if found is not None:
            return found
        requests = dict(pod.requests)
        vector = [requests.get(r, 0) for r in self.resources]
        vector[self.index[PODS]] = 1
        vector += [pod.nonzero[0], pod.nonzero[1]]
        slots = existing_slot_counts(self.spread, self.workloads, [replace(pod, node="-")])
        found = self._victim_vectors[pod.id] = (*vector, *slots.get("-", [0] * self.n_slots))
        return found

    def can_preempt(self, kind: int) -> bool:
        """Whether a pod of ``kind`` may preempt: a known priority, a policy that allows it, and
        some node holding pods of lower priority."""
        return self.kind_preempts[kind] and bool(self.victims_of_node)

    def preempt(
        self, kind: int, pod: str, sizes: Mapping[int, int]
    ) -> tuple[int, int, Preemption] | None:
        """DefaultPreemption for a pod of ``kind`` that fits no node: (from state, to state with
        the pod bound and the victims gone, the report), or None when no node has victims.

        ``sizes`` maps every state of the cluster to its number of nodes.
        """
        priority = self.kind_priority[kind]
        if not self.can_preempt(kind) or priority is None:
            return None
        candidates: list[tuple[Candidate, int]] = []
        potential = 0
        budgets = self.facts.budgets if self.facts is not None else None
        for sid, size in sizes.items():
            static, load = self.states[sid]
            if self.eligibility(kind, static):
                continue  # unschedulable, a taint, a selector: eviction cannot help
            potential += size
            pods = [p for p in self.static_victims[static] if p.priority < priority]
            if not pods:
                continue
            alloc = self.static_alloc[static]
            vector = self.kind_vector[kind]
            checked = self.kind_checked[kind]

            def fits_without(
                removed: Sequence[BoundPod],
                alloc: tuple[int, ...] = alloc,
                load: tuple[int, ...] = load,
                vector: tuple[int, ...] = vector,
                checked: tuple[int, ...] = checked,
            ) -> bool:
                free = list(load)
                for victim in removed:
                    for i, units in enumerate(self._victim_vector(victim)):
                        free[i] -= units
                return all(vector[i] <= alloc[i] - free[i] for i in checked)

            chosen = select_victims(priority, pods, fits_without, budgets or ())
            if chosen is not None:
                candidates.append((Candidate(self.static_node[static].name, *chosen), sid))
        if not candidates:
            return None
        best, tied = pick_node([c for c, _ in candidates])
        sid = next(s for c, s in candidates if c is best)
        static, load = self.states[sid]
        gone = {v.id for v in best.victims}
        left = tuple(p for p in self.static_victims[static] if p.id not in gone)
        node = self.static_node[static]
        new_static = self._static(
            ("preempted", static, frozenset(gone)),
            self.static_alloc[static],
            node,
            self.static_allowed[static],
            self.static_labels[static],
            left,
        )
        freed = list(load)
        for victim in best.victims:
            for i, units in enumerate(self._victim_vector(victim)):
                freed[i] -= units
        after = self.successor(kind, self.state_id(new_static, tuple(freed)))
        report = preemption_of(
            pod, best, len(candidates), potential, tied, budgets_known=budgets is not None
        )
        return sid, after, report

    def reasons_line(self, kind: int, pod: PodRequest, classes: Mapping[int, list[str]]) -> str:
        """``0/N nodes fit <pod>: …`` for ``pod`` (of ``kind``) against the nodes in ``classes``."""
        per_node: list[tuple[str, ...]] = []
        spread = self.kind_spread[kind]
        domains: list[dict[str, int]] = []
        minimum: list[int] = []
        if spread is not None and spread.has_hard:
            domains, minimum = self._spread_counts(
                kind, spread, [(sid, len(m)) for sid, m in classes.items()]
            )
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
            if not reasons and spread is not None and spread.has_hard:
                why = self._spread_blocks(spread, static, load, domains, minimum)
                reasons = () if why is None else (why,)
            if not reasons and self._interpod_blocks(kind, static):
                reasons = (EXISTING_ANTI_AFFINITY,)
            claim = self.kind_claim[kind]
            if (
                not reasons
                and claim is not None
                and self.dra is not None
                and not self.dra.outcomes(claim, load[self.dra_slot])
            ):
                reasons = (CANNOT_ALLOCATE,)
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
        # what the runs one budget pays for may share (DRA inventories and the allocator's memo)
        self.memo: dict[tuple[object, ...], object] = {}

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
        child.memo = self.memo
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
