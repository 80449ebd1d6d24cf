"""What a mix-mode plan says: cards, instances and nodes (:class:`MigPlan`), unplaced pods and issues."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.cluster import NodeState
from vfcore.errors import Problem
from vfcore.placement.claims import PodRequest
from vfcore.placement.fit import Unplaced
from vfcore.placement.mig.choice import ProfileChoice
from vfcore.placement.mig.config import mig_parted_yaml
from vfcore.placement.mig.layouts import Counts, Placement, counts_of
from vfcore.placement.packing import (
    PackingResult,
)

__all__ = [
    "MigCard",
    "MigInstance",
    "MigIssue",
    "MigNodePlan",
    "MigPlan",
    "MigUnplaced",
    "MixPacking",
]


# -- the plan: cards, layouts, configs -----------------------------------------------------------

CardAction = Literal["keep", "partition", "repartition", "disable"]


@dataclass(frozen=True, slots=True)
class MigInstance:
    """One GPU instance of a planned card, and the pod planned on it (if any).

    ``start`` is ``None`` on a card kept as it is: the driver placed its
    instances long ago, and nothing kubectl returns says where.
    """

    profile: str
    start: int | None
    pod: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "start": self.start, "pod": self.pod}


@dataclass(frozen=True, slots=True)
class MigCard:
    """One card of a node the plan reconfigures: what it becomes and what runs on it.

    ``action``: ``keep`` (unchanged), ``partition`` (MIG-disabled → a layout),
    ``repartition`` (one layout → another) or ``disable`` (a layout → a whole
    card). Every action but ``keep`` wipes the card. ``pods`` are whole-card
    pods planned on a MIG-disabled card. Which instance (or card) of a node a
    pod gets is the device plugin's choice; the mapping shown is one that works.
    """

    index: int
    action: CardAction
    mig_enabled: bool
    instances: tuple[MigInstance, ...] = ()
    creation_order: tuple[Placement, ...] = ()
    pods: tuple[str, ...] = ()

    @property
    def reconfigured(self) -> bool:
        return self.action != "keep"

    @property
    def profiles(self) -> Counts:
        return counts_of(i.profile for i in self.instances)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "action": self.action,
            "reconfigured": self.reconfigured,
            "mig_enabled": self.mig_enabled,
            "profiles": dict(self.profiles),
            "instances": [i.to_dict() for i in self.instances],
            "creation_order": [p.to_dict() for p in self.creation_order],
            "pods": list(self.pods),
        }


@dataclass(frozen=True, slots=True)
class MigNodePlan:
    """MIG on one node: its cards (where the plan reconfigures it) or its pool of instances.

    A node the plan *touches* is idle (no GPU pod bound), so every card is
    listed with its index and the node gets a mig-parted config
    (``config_name``). ``indices_assumed`` is True when the node's cards are in
    different states today: kubectl does not say which index holds which, and
    the config assumes the MIG-enabled ones come first.

    A node left as it is contributes its kept partitions' free instances as a
    per-node ``pool`` (``{profile: free}``): the device plugin advertises them
    per node, and which card each sits on is not visible, so ``pool_pods`` maps
    pods to profiles only.
    """

    node: str
    family: str | None
    touched: bool
    config_name: str | None = None
    indices_assumed: bool = False
    cards: tuple[MigCard, ...] = ()
    pool: Counts = ()
    pool_pods: tuple[tuple[str, str], ...] = ()
    note: str | None = None

    @property
    def cards_reconfigured(self) -> int:
        return sum(1 for c in self.cards if c.reconfigured)

    def mig_parted_entries(self) -> list[dict[str, Any]]:
        """This node's mig-parted entries: every card's target state, cards with equal states merged."""
        by_state: dict[tuple[bool, Counts], list[int]] = {}
        order: dict[tuple[bool, Counts], tuple[Placement, ...]] = {}
        for card in self.cards:
            key = (card.mig_enabled, card.profiles)
            by_state.setdefault(key, []).append(card.index)
            if card.creation_order and key not in order:
                order[key] = card.creation_order
        entries: list[dict[str, Any]] = []
        for (enabled, profiles), devices in sorted(by_state.items(), key=lambda kv: kv[1][0]):
            entry: dict[str, Any] = {"devices": devices, "mig-enabled": enabled}
            if enabled:
                first = [p.profile for p in order.get((enabled, profiles), ())]
                names = sorted(
                    dict(profiles), key=lambda n: (n not in first, *_first_index(first, n))
                )
                entry["mig-devices"] = {n: dict(profiles)[n] for n in names}
            entries.append(entry)
        return entries

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "family": self.family,
            "touched": self.touched,
            "config_name": self.config_name,
            "label": None
            if self.config_name is None
            else f"kubectl label node {self.node} nvidia.com/mig.config={self.config_name} --overwrite",
            "indices_assumed": self.indices_assumed,
            "cards_reconfigured": self.cards_reconfigured,
            "cards": [c.to_dict() for c in self.cards],
            "pool": dict(self.pool),
            "pool_pods": dict(self.pool_pods),
            "note": self.note,
        }


def _first_index(names: list[str], name: str) -> tuple[int, str]:
    return (names.index(name) if name in names else len(names), name)


@dataclass(frozen=True, slots=True)
class MigPlan:
    """The MIG half of a mix-mode plan.

    ``resources``: the extended resource each flow node's pods request
    (``nvidia.com/mig-<profile>``; one per flow node, since its replicas share
    one pod template). ``choices``: the smallest covering profile per flow node
    and card family present. ``cards_reconfigured`` is what the plan minimises
    (then ``nodes_touched``); ``cards_lower_bound`` is the solver's proven bound
    on it (equal when the plan is optimal).
    """

    nodes: tuple[MigNodePlan, ...] = ()
    resources: tuple[tuple[str, str], ...] = ()
    pod_resources: tuple[tuple[str, str], ...] = ()
    choices: tuple[tuple[str, ProfileChoice], ...] = ()
    cards_reconfigured: int = 0
    nodes_touched: int = 0
    cards_lower_bound: int | None = None
    notes: tuple[str, ...] = ()

    def node(self, name: str) -> MigNodePlan:
        for n in self.nodes:
            if n.node == name:
                return n
        raise KeyError(name)

    def mig_parted_config(self) -> dict[str, Any]:
        """A mig-parted config (``version: v1``) with one named config per touched node."""
        return {
            "version": "v1",
            "mig-configs": {
                n.config_name: n.mig_parted_entries()
                for n in self.nodes
                if n.touched and n.config_name is not None
            },
        }

    def mig_parted_yaml(self) -> str:
        """:meth:`mig_parted_config` as YAML text (what ``nvidia-mig-parted apply -f`` reads)."""
        return mig_parted_yaml(self.mig_parted_config())

    def to_dict(self) -> dict[str, Any]:
        choices: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for flow_node, choice in self.choices:
            choices[flow_node].append(choice.to_dict())
        return {
            "resources": dict(self.resources),
            "pod_resources": dict(self.pod_resources),
            "choices": dict(choices),
            "cards_reconfigured": self.cards_reconfigured,
            "cards_lower_bound": self.cards_lower_bound,
            "nodes_touched": self.nodes_touched,
            "nodes": [n.to_dict() for n in self.nodes],
            "mig_parted_config": self.mig_parted_config(),
            "notes": list(self.notes),
        }


# -- unplaced pods, issues, and what pack_mix returns -----------------------------------------


#: A pod with no place in a mix-mode plan: the one :class:`vfcore.placement.fit.Unplaced`.
MigUnplaced = Unplaced

#: A mix-mode finding with its fix: the plan's :class:`vfcore.errors.Problem` itself.
MigIssue = Problem


@dataclass(frozen=True, slots=True)
class MixPacking:
    """What :func:`pack_mix` decided.

    ``packing`` is the placement (same shape as :func:`vfcore.placement.packing.pack`'s).
    ``pods`` and ``nodes`` are the *realised* problem: each MIG pod requests
    its ``nvidia.com/mig-<profile>``, and each node's allocatable is what it
    advertises once the planned layouts are applied — so
    :func:`vfcore.placement.packing.check_placement` re-checks the plan, and the
    scheduler model can run on it.
    """

    packing: PackingResult
    pods: tuple[PodRequest, ...]
    nodes: tuple[NodeState, ...]
    mig: MigPlan
    unplaced: tuple[Unplaced, ...]
    issues: tuple[Problem, ...]
