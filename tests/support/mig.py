"""MIG oracles, builders and checks shared by the MIG tests (layouts, mix planning, mig-parted).

Independent of ``vfcore.placement.mig``'s search: ``brute_force_fits`` tries every
assignment of start slots (identical instances take distinct starts) and checks
memory runs and compute slices; ``independent_check`` re-checks a placed layout
from the catalogue alone; ``mig_parted`` models NVIDIA's mig-parted applying a
config to cards in a given order, and ``assert_config_realises`` applies a plan's
config on every true order of the cards.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from vfcore.cluster import GpuInfo, NodeState, node
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.mig import (
    MIG_FAMILIES,
    MigPlan,
    Placement,
)
from vfcore.placement.packing import SolverConfig, check_placement

CONFIG = SolverConfig.deterministic(max_deterministic_time=20.0)
GPU_LABEL = ("nvidia.com/gpu.present", "true")
PRODUCTS = {"H100-80GB": "NVIDIA-H100-80GB-HBM3", "A100-40GB": "NVIDIA-A100-SXM4-40GB"}


# -- layout oracles --------------------------------------------------------------------------


def brute_force_fits(family: str, counts: Mapping[str, int]) -> bool:
    """Every assignment of start slots, exhaustively (identical instances: distinct starts)."""
    fam = MIG_FAMILIES[family]
    choices = []
    compute = 0
    for name, n in sorted(counts.items()):
        p = fam.profile(name)
        if p is None or n > p.max_count:
            return False
        compute += n * p.compute_slices
        choices.append(
            [(p.memory_slices, starts) for starts in itertools.combinations(p.starts, n)]
        )
    if compute > fam.compute_slices or not media_fits(family, counts):
        return False
    for assignment in itertools.product(*choices):
        taken: set[int] = set()
        ok = True
        for size, starts in assignment:
            for s in starts:
                cells = set(range(s, s + size))
                if max(cells) >= fam.memory_slices or cells & taken:
                    ok = False
                    break
                taken |= cells
            if not ok:
                break
        if ok:
            return True
    return False


def media_fits(family: str, counts: Mapping[str, int]) -> bool:
    """Media engines (NVDEC, NVENC, JPEG, OFA) summed over the instances, where the family counts them."""
    fam = MIG_FAMILIES[family]
    if fam.media is None:
        return True
    used = [0, 0, 0, 0]
    for name, n in counts.items():
        media = fam.profile(name).media  # type: ignore[union-attr]
        assert media is not None
        used = [u + m * n for u, m in zip(used, media, strict=True)]
    return all(u <= t for u, t in zip(used, fam.media, strict=True))


def independent_check(family: str, placements: Sequence[Placement]) -> bool:
    fam = MIG_FAMILIES[family]
    taken: list[int] = []
    compute = 0
    tally: Counter[str] = Counter()
    for pl in placements:
        p = fam.profile(pl.profile)
        if p is None or pl.start not in p.starts:
            return False
        taken += range(pl.start, pl.start + p.memory_slices)
        compute += p.compute_slices
        tally[p.name] += 1
    if len(taken) != len(set(taken)) or any(s >= fam.memory_slices for s in taken):
        return False
    if any(n > fam.profile(name).max_count for name, n in tally.items()):  # type: ignore[union-attr]
        return False
    return compute <= fam.compute_slices and media_fits(family, tally)


# -- nodes and pods for the planning laws -----------------------------------------------------


def mig_node(
    name: str,
    family: str,
    *,
    cards: int,
    layout: Mapping[str, int] | None = None,
    bound: Mapping[str, int] | None = None,
    cpu: int = 16000,
    pods: int = 110,
    strategy: str = "mixed",
    unknown: bool = False,
) -> NodeState:
    """A node of ``cards`` cards; with ``layout``, card 0 is MIG-enabled with those instances."""
    alloc: dict[str, int] = {"cpu": cpu, "memory": 2**36, "pods": pods}
    whole = cards - (1 if layout else 0)
    alloc["nvidia.com/gpu"] = whole
    for p, c in (layout or {}).items():
        alloc[f"nvidia.com/mig-{p}"] = c
    requested = None
    if not unknown:
        requested = dict(bound or {})
        if bound:
            requested["pods"] = 1
    return node(
        name,
        allocatable=alloc,
        requested=requested,
        labels=dict([GPU_LABEL]),
        unknown_reason="pods unreadable" if unknown else None,
        gpu=GpuInfo(
            product=PRODUCTS[family],
            memory_mib=81559 if family == "H100-80GB" else 40960,
            count=cards,
            mig_capable=True,
            mig_strategy=strategy,
            mig_profiles=tuple(sorted((layout or {}).items())),
        ),
    )


def mig_pod(flow_node: str, replica: int, gib: float, cpu: int = 1000) -> PodRequest:
    return PodRequest(
        pod=f"{flow_node}/{replica}",
        node=flow_node,
        replica=replica,
        requests=(("cpu", cpu),) if cpu else (),
        node_selector=(GPU_LABEL,),
        tolerations=(GPU_TOLERATION,),
        gpu_memory_mib=round(gib * 1024),
        slice="mig",
    )


def whole_pod(flow_node: str, replica: int, k: int, cpu: int = 1000) -> PodRequest:
    return PodRequest(
        pod=f"{flow_node}/{replica}",
        node=flow_node,
        replica=replica,
        requests=((("cpu", cpu),) if cpu else ()) + (("nvidia.com/gpu", k),),
        node_selector=(GPU_LABEL,),
        tolerations=(GPU_TOLERATION,),
        slice="whole",
    )


def fit_layouts_cache(family: str) -> list[tuple[tuple[str, int], ...]]:
    from vfcore.placement.mig import feasible_layouts

    return list(feasible_layouts(family))


def assert_valid(result: Any, nodes: Sequence[NodeState]) -> None:
    """The placement passes the packing checker, every layout the layout checkers."""
    from vfcore.placement.mig import mix_reasons

    assert (
        check_placement(
            result.pods, result.nodes, result.packing.assignments, extra_reasons=mix_reasons
        )
        == ()
    )
    for plan_node in result.mig.nodes:
        for card in plan_node.cards:
            placed = [Placement(i.start, i.profile) for i in card.instances if i.start is not None]
            if placed:
                assert independent_check(plan_node.family, placed), card
    assert_config_realises(result.mig, nodes)


# -- an independent mig-parted, written from its facts (docs/mig.md, "How mig-parted applies") --


#: parser rules: version v1; >= 1 config; >= 1 entry each; devices + mig-enabled required;
#: mig-devices required when enabled, empty when disabled; no other fields
def parser_accepts(config: Any) -> bool:
    if not isinstance(config, dict) or set(config) != {"version", "mig-configs"}:
        return False
    if config["version"] != "v1" or not config["mig-configs"]:
        return False
    for entries in config["mig-configs"].values():
        if not entries:
            return False
        for e in entries:
            if (
                not {"devices", "mig-enabled"}
                <= set(e)
                <= {"devices", "mig-enabled", "mig-devices"}
            ):
                return False
            if e["devices"] != "all" and not all(type(d) is int for d in e["devices"]):
                return False
            if e["mig-enabled"] is True and e.get("mig-devices") is None:
                return False
            if e["mig-enabled"] is False and e.get("mig-devices"):
                return False
    return True


def mig_parted(
    cards: Sequence[Any], entries: Sequence[Mapping[str, Any]]
) -> tuple[list[Any], set[int]]:
    """Fact 1-3 on ``cards`` (None: MIG off; a dict: instances; "?": MIG on, unknown):
    the states after and the cards whose instances (or mode) did not survive."""
    want: dict[int, Any] = {}
    for e in entries:
        for d in range(len(cards)) if e["devices"] == "all" else e["devices"]:
            want[d] = dict(e["mig-devices"]) if e["mig-enabled"] else None
    now = [None if c is None else (c if c == "?" else dict(c)) for c in cards]
    hit: set[int] = set()
    if any((now[d] is None) != (w is None) for d, w in want.items()):  # fact 1
        for d, w in want.items():
            if now[d] is not None:
                if now[d]:
                    hit.add(d)
                now[d] = {}
            if (now[d] is None) != (w is None):
                hit.add(d)
                now[d] = None if w is None else {}
    for d, w in want.items():  # fact 2: counts per profile, not slots
        if w is not None and now[d] != w:
            if now[d]:
                hit.add(d)
            now[d] = w
    for d, c in enumerate(cards):
        if now[d] != (None if c is None else (c if c == "?" else dict(c))):
            hit.add(d)
    return now, hit


def cards_today(node_: NodeState) -> list[Any]:
    """The node's cards as kubectl shows them: MIG cards (their layout when they split it
    evenly, else unknown) then whole ones; the order is what a plan cannot know."""
    gpu = node_.gpu
    assert gpu is not None and gpu.count is not None
    whole = node_.allocatable_of("nvidia.com/gpu")
    mig = gpu.count - whole
    union = dict(gpu.mig_profiles)
    if mig and all(c % mig == 0 for c in union.values()):
        each: Any = {p: c // mig for p, c in union.items()}
    else:
        each = "?"
    return [each] * mig + [None] * whole


def card_orders(cards: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Every distinct arrangement of the cards (a multiset) over indices."""
    kinds: dict[str, Any] = {repr(c): c for c in cards}
    left = Counter(repr(c) for c in cards)
    out: list[tuple[Any, ...]] = []

    def grow(prefix: list[Any]) -> None:
        if len(prefix) == len(cards):
            out.append(tuple(prefix))
            return
        for k in sorted(left):
            if left[k]:
                left[k] -= 1
                grow([*prefix, kinds[k]])
                left[k] += 1

    grow([])
    return out


def state_bag(states: Sequence[Any]) -> list[str]:
    return sorted(repr(None if s is None else sorted(s.items())) for s in states)


def assert_config_realises(mig: MigPlan, nodes: Sequence[NodeState]) -> None:
    """The config parses, and mig-parted (modelled above) applying it on *every* true order of
    the cards leaves the node with the card states the plan shows, disrupting exactly the
    cards the plan counts (known order) or at most that many, reached by some order."""
    config = mig.mig_parted_config()
    touched = [n for n in mig.nodes if n.touched]
    if config is None:
        assert not touched or mig.config_withheld
        return
    assert parser_accepts(config), config
    assert yaml.safe_load(mig.mig_parted_yaml() or "") == config
    by_name = {n.name: n for n in nodes}
    total = 0
    for plan_node in mig.nodes:
        if not plan_node.touched:
            assert plan_node.config_name is None
            continue
        entries = config["mig-configs"][plan_node.config_name]
        for entry in entries:
            for index in entry["devices"]:
                assert plan_node.cards[index].mig_enabled is entry["mig-enabled"]
                if entry["mig-enabled"]:
                    assert brute_force_fits(plan_node.family, entry["mig-devices"])
        shown = [dict(c.profiles) if c.mig_enabled else None for c in plan_node.cards]
        today = cards_today(by_name[plan_node.node])
        orders = card_orders(today)
        known = len(orders) == 1 and "?" not in today
        assert plan_node.indices_assumed is not known
        most = 0
        for order in orders:
            after, hit = mig_parted(order, entries)
            assert state_bag(after) == state_bag(shown), (order, entries)
            if known:
                assert after == shown
                assert len(hit) == plan_node.cards_reconfigured
                assert {c.index for c in plan_node.cards if c.reconfigured} == hit
            most = max(most, len(hit))
        assert most == plan_node.cards_reconfigured, (today, entries)
        total += most
    assert total == mig.cards_reconfigured
