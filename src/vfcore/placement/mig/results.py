"""What a mix-mode plan says: cards, instances and nodes (:class:`MigPlan`), unplaced pods and issues."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Literal

from vfcore.cluster import NodeState
from vfcore.errors import Problem
from vfcore.placement.claims import PodRequest
from vfcore.placement.fit import Unplaced
from vfcore.placement.mig.choice import ProfileChoice
from vfcore.placement.mig.config import mig_parted_yaml
from vfcore.placement.mig.layouts import Counts, counts_of
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

NOTHING_TO_APPLY = "no card needs reconfiguring: nothing to apply"

CardAction = Literal["keep", "partition", "repartition", "recreate", "disable"]


@dataclass(frozen=True, slots=True)
class MigInstance:
    """One GPU instance of a planned card, and the pod planned on it (if any).

    ``start`` is one valid slot for it (a witness that the layout fits), not a
    position anyone applies: mig-parted lets the driver choose. It is ``None``
    on a card whose instances survive the apply: the driver placed them long
    ago, and nothing kubectl returns says where.
    """

    profile: str
    start: int | None
    pod: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "start": self.start, "pod": self.pod}


@dataclass(frozen=True, slots=True)
class MigCard:
    """One card of a node the plan reconfigures: what it becomes and what runs on it.

    ``action`` is what applying the node's config does to it (the apply model,
    :mod:`.apply`): ``keep`` (its instances, or its whole-card use, survive),
    ``partition`` (MIG-disabled → a layout), ``repartition`` (one layout →
    another), ``recreate`` (same counts, but its instances are destroyed and
    created again: a mode change elsewhere on the node clears it) or
    ``disable`` (a layout → a whole card). ``pods`` are whole-card pods planned
    on a MIG-disabled card. Which instance (or card) of a node a pod gets is
    the device plugin's choice; the mapping shown is one that works.
    """

    index: int
    action: CardAction
    mig_enabled: bool
    instances: tuple[MigInstance, ...] = ()
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
            "pods": list(self.pods),
        }


@dataclass(frozen=True, slots=True)
class MigNodePlan:
    """MIG on one node: its cards (where the plan reconfigures it) or its pool of instances.

    A node the plan *touches* is idle (no GPU pod bound), so every card is
    listed with its index and the node gets a mig-parted config
    (``config_name``). Where the card order is known (every card in the same
    state today) the config lists only the cards that change, and
    ``cards_reconfigured`` is exactly what mig-parted disrupts. Where it is not
    (``indices_assumed``: kubectl does not say which index holds which card)
    the config lists every card, so that any true order ends with the same set
    of card states, and ``cards_reconfigured`` is the most cards any order
    disrupts ("up to N"). ``mode_change``: some card changes MIG mode, and if
    the driver cannot switch it in place mig-parted resets every GPU of the node.

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
    disrupted: int = 0
    mode_change: bool = False

    @property
    def cards_reconfigured(self) -> int:
        return self.disrupted

    def mig_parted_entries(self) -> list[dict[str, Any]]:
        """This node's mig-parted entries: the cards it lists, cards with equal states merged.

        Only the cards that change where the order is known (mig-parted leaves
        unlisted cards alone); every card where it is not.
        """
        by_state: dict[tuple[bool, Counts], list[int]] = {}
        for card in self.cards:
            if self.indices_assumed or card.reconfigured:
                by_state.setdefault((card.mig_enabled, card.profiles), []).append(card.index)
        entries: list[dict[str, Any]] = []
        for (enabled, profiles), devices in sorted(by_state.items(), key=lambda kv: kv[1][0]):
            entry: dict[str, Any] = {"devices": devices, "mig-enabled": enabled}
            if enabled:
                entry["mig-devices"] = dict(profiles)
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
            "mode_change": self.mode_change,
            "cards": [c.to_dict() for c in self.cards],
            "pool": dict(self.pool),
            "pool_pods": dict(self.pool_pods),
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class MigPlan:
    """The MIG half of a mix-mode plan.

    ``resources``: the extended resource each flow node's pods request
    (``nvidia.com/mig-<profile>``; one per flow node, since its replicas share
    one pod template). ``choices``: the smallest covering profile per flow node
    and card family present. ``cards_reconfigured`` is what the plan minimises
    (then ``nodes_touched``): the cards mig-parted disrupts applying the
    configs (at most, on nodes whose card order is assumed);
    ``cards_lower_bound`` is the solver's proven bound on it (equal when the
    plan is optimal). ``config_withheld`` says why no config is offered (no node
    is touched, or the flow does not fit): then :meth:`mig_parted_config` is
    ``None``.
    """

    nodes: tuple[MigNodePlan, ...] = ()
    resources: tuple[tuple[str, str], ...] = ()
    pod_resources: tuple[tuple[str, str], ...] = ()
    choices: tuple[tuple[str, ProfileChoice], ...] = ()
    cards_reconfigured: int = 0
    nodes_touched: int = 0
    cards_lower_bound: int | None = None
    notes: tuple[str, ...] = ()
    config_withheld: str | None = None

    def node(self, name: str) -> MigNodePlan:
        for n in self.nodes:
            if n.node == name:
                return n
        raise KeyError(name)

    def withhold(self, reason: str) -> MigPlan:
        """The same plan with no config offered, and why (a verdict's reason first)."""
        if self.config_withheld not in (None, NOTHING_TO_APPLY):
            return self
        return replace(self, config_withheld=reason)

    def layouts(self) -> dict[str, list[dict[str, Any]]]:
        """Each touched node's mig-parted entries, for inspection (even when withheld)."""
        return {
            n.config_name: n.mig_parted_entries()
            for n in self.nodes
            if n.touched and n.config_name is not None
        }

    def mig_parted_config(self) -> dict[str, Any] | None:
        """A mig-parted config (``version: v1``) with one named config per touched node.

        ``None`` when there is nothing to apply (``config_withheld`` says why).
        """
        configs = self.layouts()
        if self.config_withheld is not None or not configs:
            return None
        return {"version": "v1", "mig-configs": configs}

    def mig_parted_yaml(self) -> str | None:
        """:meth:`mig_parted_config` as YAML text (what ``nvidia-mig-parted apply -f`` reads)."""
        config = self.mig_parted_config()
        return None if config is None else mig_parted_yaml(config)

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
            "nodes": [
                {**d, "label": None} if self.mig_parted_config() is None else d
                for d in (n.to_dict() for n in self.nodes)
            ],
            "mig_parted_config": self.mig_parted_config(),
            "config_withheld": self.config_withheld,
            "layouts": self.layouts(),
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
