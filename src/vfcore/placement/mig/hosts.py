"""What each node can do in mix mode: its MIG facts, its cards' states, and the pods grouped by need.

A node's GPU labels say whether it hosts MIG instances or whole cards; its
bound pods say which cards are busy (:func:`analyse_host`).
:func:`mix_reasons` and :func:`could_host` answer, per pod and node, why not
and whether ever.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from vfcore.cluster import NodeState
from vfcore.placement.claims import PodRequest
from vfcore.placement.fit import could_ever_hold, free_units
from vfcore.placement.mig.catalogue import (
    GIB,
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    MigFamily,
    mig_family,
)
from vfcore.placement.mig.choice import choice_for_mib
from vfcore.placement.mig.layouts import LAYOUTS, Counts, counts_of
from vfcore.quantity import PODS

__all__ = ["could_host", "mix_reasons"]


NO_GPU = "node(s) had no GPUs"
SINGLE_STRATEGY = "node(s) used the single MIG strategy (one profile per node, as nvidia.com/gpu)"

CardState = Counts | None  # None: MIG disabled (a whole card)
BusyNodes = Literal["keep", "partition-idle-cards", "drain"]


@dataclass(slots=True)
class Host:
    index: int
    state: NodeState
    family: MigFamily | None
    hosts_mig: bool
    mig_reason: str | None
    whole_ok: bool
    whole_reason: str | None
    touchable: bool
    touch_reason: str | None
    cards: int
    groups: list[tuple[CardState, int]] = field(default_factory=list)
    block: tuple[Counts, int] | None = None
    pool: dict[str, int] = field(default_factory=dict)  # fixed instances of busy MIG cards
    free: dict[str, int] = field(default_factory=dict)
    free_pods: int = 0

    @property
    def name(self) -> str:
        return self.state.name

    @property
    def mig_cards(self) -> int:
        """Cards in MIG mode today (a block's included)."""
        block = self.block[1] if self.block is not None else 0
        return block + sum(c for s, c in self.groups if s is not None)

    @property
    def whole_cards(self) -> int:
        """Idle MIG-disabled cards today."""
        return sum(c for s, c in self.groups if s is None)

    @property
    def order_known(self) -> bool:
        """Whether a config can name the right cards by index.

        True when every card of the node is in the same state today (then any
        order is the same); kubectl never says which index holds which card, so
        a node with cards in different states (or MIG cards of unknown layouts)
        has its order unknown.
        """
        kinds = {s for s, _ in self.groups}
        return self.block is None and len(kinds) <= 1


def is_gpu_resource(resource: str) -> bool:
    return resource == GPU_RESOURCE or resource.startswith(MIG_RESOURCE_PREFIX)


def _bound_gpu(node: NodeState) -> dict[str, int]:
    if node.requested is None:
        return {}
    return {r: u for r, u in node.requested if u > 0 and is_gpu_resource(r)}


def drained(node: NodeState) -> NodeState:
    """The node with its bound GPU pods gone (cpu and memory they hold stay held)."""
    if node.requested is None:
        return node
    kept = tuple((r, u) for r, u in node.requested if not is_gpu_resource(r))
    return replace(node, requested=kept)


@dataclass(frozen=True, slots=True)
class _Facts:
    """What a node's labels say about MIG, before any occupancy is considered."""

    family: MigFamily | None
    hosts_mig: bool
    mig_reason: str | None
    whole_ok: bool
    whole_reason: str | None


def _facts(node: NodeState) -> _Facts:
    gpu = node.gpu
    if gpu is None:
        return _Facts(None, False, NO_GPU, True, None)
    family = mig_family(gpu.product, gpu.memory_mib)
    strategy = gpu.mig_strategy
    if strategy == "single":
        return _Facts(family, False, SINGLE_STRATEGY, False, SINGLE_STRATEGY)
    if strategy != "mixed":
        why = (
            f"node(s) had MIG strategy {strategy or 'none'}, not mixed"
            if family is not None or gpu.mig_capable
            else "node(s) had no MIG-capable cards"
        )
        return _Facts(family, False, why, True, None)
    if gpu.sharing != "none":
        why = f"node(s) shared GPUs by {gpu.sharing} (MIG planning needs unshared cards)"
        return _Facts(family, False, why, True, None)
    if family is None:
        why = f"node(s) had no catalogued MIG geometry ({gpu.product or 'no product label'})"
        return _Facts(None, False, why, True, None)
    advertised = {
        r[len(MIG_RESOURCE_PREFIX) :]
        for r, u in node.allocatable
        if u > 0 and r.startswith(MIG_RESOURCE_PREFIX)
    }
    strangers = sorted(
        n for n in set(dict(gpu.mig_profiles)) | advertised if family.profile(n) is None
    )
    if strangers:
        why = f"node(s) advertised MIG profiles {', '.join(strangers)} that {family.name} lacks"
        return _Facts(family, False, why, True, None)
    return _Facts(family, True, None, True, None)


def mix_reasons(pod: PodRequest, node: NodeState) -> tuple[str, ...]:
    """Mix-mode eligibility beyond kube-scheduler's filters (empty: eligible).

    A MIG pod needs a mixed-strategy node whose card family has its profile
    with enough usable memory; a whole-card pod cannot use a single-strategy
    node (there ``nvidia.com/gpu`` are MIG devices). Pass it to
    :func:`vfcore.placement.packing.check_placement` as ``extra_reasons``.
    """
    facts = _facts(node)
    if pod.slice == "mig":
        profiles = [
            r[len(MIG_RESOURCE_PREFIX) :]
            for r, _ in pod.requests
            if r.startswith(MIG_RESOURCE_PREFIX)
        ]
        if not profiles:
            return ("no MIG profile could be chosen for its flow node",)
        if not facts.hosts_mig or facts.family is None:
            return (facts.mig_reason or NO_GPU,)
        demand = pod.gpu_memory_mib or 0
        if not covers(facts.family, profiles[0], demand):
            return (f"node(s) had no {profiles[0]} with {demand / GIB:g} GiB usable",)
        return ()
    if not facts.whole_ok and pod.request(GPU_RESOURCE):
        return (facts.whole_reason or SINGLE_STRATEGY,)
    return ()


def analyse_host(index: int, node: NodeState, busy: BusyNodes = "keep") -> Host:
    gpu = node.gpu
    facts = _facts(node)
    host = Host(
        index=index,
        state=node,
        family=facts.family,
        hosts_mig=facts.hosts_mig,
        mig_reason=facts.mig_reason,
        whole_ok=facts.whole_ok,
        whole_reason=facts.whole_reason,
        touchable=False,
        touch_reason=None,
        cards=(gpu.count or 0) if gpu else 0,
        free={r: free_units(node, r) for r, _ in node.allocatable},
        free_pods=free_units(node, PODS),
    )
    if facts.hosts_mig and gpu is not None and facts.family is not None:
        # the device plugin spells ``1g.10gb+me`` as ``mig-1g.10gb.me``: catalogue names inside
        fam = facts.family
        advertised = {
            fam.canonical(r[len(MIG_RESOURCE_PREFIX) :]): u
            for r, u in node.allocatable
            if r.startswith(MIG_RESOURCE_PREFIX) and u > 0
        }
        labelled = {fam.canonical(n): c for n, c in gpu.mig_profiles}
        _attribute_cards(host, node, labelled, advertised, busy)
    return host


def _attribute_cards(
    host: Host,
    node: NodeState,
    labelled: dict[str, int],
    advertised: dict[str, int],
    busy: BusyNodes = "keep",
) -> None:
    """Decide whether the node's cards may be re-partitioned, and what each holds today.

    With ``busy="partition-idle-cards"`` a node with GPU pods bound may still
    partition its idle MIG-disabled cards (their number is known, which ones
    they are is not), and keeps its MIG cards as a fixed pool if any of their
    instances is in use. Planning never does this; it only tells whether busy
    nodes stand in the way.
    """
    gpu = node.gpu
    assert gpu is not None and host.family is not None
    bound = _bound_gpu(node)
    state = node.label("nvidia.com/mig.config.state")
    whole = node.allocatable_of(GPU_RESOURCE)
    if not node.occupancy_known:
        host.touch_reason = "occupancy unknown"
    elif bound and busy == "keep":
        held = ", ".join(f"{r} {u}" for r, u in sorted(bound.items()))
        host.touch_reason = (
            f"GPU pods are bound there ({held} in use) and kubectl cannot tell which card "
            "each holds, so none of its cards is re-partitioned"
        )
    elif not node.ready or node.unschedulable:
        host.touch_reason = "not ready or cordoned"
    elif not gpu.count:
        host.touch_reason = "no nvidia.com/gpu.count label: the number of cards is unknown"
    elif state not in (None, "success"):
        host.touch_reason = f"a MIG reconfiguration is in state {state!r}"
    elif labelled != advertised:
        host.touch_reason = "MIG labels and allocatable disagree (a reconfiguration in flight?)"
    elif gpu.count < whole:
        host.touch_reason = f"{whole} whole cards advertised but nvidia.com/gpu.count={gpu.count}"
    elif gpu.count == whole and labelled:
        host.touch_reason = "MIG devices advertised but every card is MIG-disabled"
    if host.touch_reason is not None:
        return
    host.touchable = True
    mig_cards = (gpu.count or 0) - whole
    union = counts_of(labelled)
    table = LAYOUTS[host.family.name]
    if mig_cards and any(r.startswith(MIG_RESOURCE_PREFIX) for r in bound):
        host.pool = {p: max(host.free.get(_resource(host.family, p), 0), 0) for p, _ in union}
    elif mig_cards:
        each = tuple((p, c // mig_cards) for p, c in union)
        if all(c % mig_cards == 0 for _, c in union) and each in table:
            host.groups.append((each, mig_cards))
        else:
            host.block = (union, mig_cards)
    idle_whole = whole - bound.get(GPU_RESOURCE, 0)
    if idle_whole > 0:
        host.groups.append((None, idle_whole))


@dataclass(slots=True)
class PodGroup:
    """Interchangeable pods: same shape (and, for MIG pods, same flow node)."""

    index: int
    pods: list[PodRequest]
    requests: dict[str, int]
    mig: bool
    demand_mib: int
    flow_node: str
    eligible: list[int] = field(default_factory=list)  # non-MIG: host indices
    pairs: list[tuple[int, str]] = field(default_factory=list)  # MIG: (host, profile)

    @property
    def count(self) -> int:
        return len(self.pods)


def pod_groups(pods: Sequence[PodRequest]) -> list[PodGroup]:
    buckets: dict[tuple[object, ...], list[PodRequest]] = {}
    for pod in pods:
        key = (pod.shape, pod.node) if pod.slice == "mig" else (pod.shape, None)
        buckets.setdefault(key, []).append(pod)
    for members in buckets.values():
        members.sort(key=lambda p: (p.node, p.replica, p.pod))
    ordered = sorted(buckets.values(), key=lambda g: g[0].pod)
    return [
        PodGroup(
            index=i,
            pods=g,
            requests=dict(g[0].requests),
            mig=g[0].slice == "mig",
            demand_mib=g[0].gpu_memory_mib or 0,
            flow_node=g[0].node,
        )
        for i, g in enumerate(ordered)
    ]


def _resource(family: MigFamily, profile: str) -> str:
    p = family.profile(profile)
    return MIG_RESOURCE_PREFIX + profile if p is None else p.resource


def covers(family: MigFamily, profile: str, demand_mib: int) -> bool:
    p = family.profile(profile)
    return p is not None and p.plain and p.usable_mib >= demand_mib


def could_host(pod: PodRequest, node: NodeState) -> bool:
    """Could ``node`` ever hold ``pod`` in mix mode (after any re-partitioning of idle cards)?

    The fit rule's :func:`vfcore.placement.fit.could_ever_hold`, with what the
    node could advertise once its idle cards are re-partitioned: a MIG pod's
    slice when the node's family has a profile for it, and every card as
    ``nvidia.com/gpu`` on a node whose cards may be re-partitioned.
    """
    host = analyse_host(0, drained(node.as_empty()) if node.requested is None else drained(node))
    capacity: dict[str, int] = {}
    if pod.slice == "mig":
        if not host.hosts_mig or host.family is None or not pod.gpu_memory_mib:
            return False
        if not choice_for_mib(host.family, pod.gpu_memory_mib).resolvable:
            return False
        capacity = {r: u for r, u in pod.requests if is_gpu_resource(r)}
    elif not host.whole_ok and pod.request(GPU_RESOURCE):
        return False
    elif host.touchable:
        capacity = {GPU_RESOURCE: max(node.allocatable_of(GPU_RESOURCE), host.cards)}
    return could_ever_hold(pod, node, capacity)
