"""Laws of mix-mode plans against mig-parted (issue 16), on random idle clusters with mixed
card states and random true card orders.

(a) every config passes mig-parted's parser rules; (b) applying it leaves each card as the
plan shows (for every true order, as a set of card states where the order is unknown);
(c) it disrupts exactly the cards the plan counts where the order is known, at most that
many otherwise; (d) on small nodes (<= 4 cards, <= 2 profiles) no config with the same
outcome disrupts fewer cards (brute force). The mig-parted model used is the test's own
(tests/property/test_mig_laws.py: ``mig_parted``), written from the facts in docs/mig.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from tests.support.mig import (
    CONFIG,
    assert_config_realises,
    card_orders,
    cards_today,
    fit_layouts_cache,
    mig_parted,
    mig_pod,
    parser_accepts,
    state_bag,
    whole_pod,
)
from vfcore.cluster import GpuInfo, NodeState, node
from vfcore.placement.mig import pack_mix

PRODUCTS = {
    "H100-80GB": ("NVIDIA-H100-80GB-HBM3", 81559),
    "A100-40GB": ("NVIDIA-A100-SXM4-40GB", 40960),
}


def idle_node(name: str, family: str, cards: int, mig: int, layout: Mapping[str, int]) -> NodeState:
    product, memory = PRODUCTS[family]
    alloc: dict[str, int] = {
        "cpu": 64000,
        "memory": 2**38,
        "pods": 110,
        "nvidia.com/gpu": cards - mig,
    }
    union = {p: c * mig for p, c in layout.items()} if mig else {}
    for p, c in union.items():
        alloc[f"nvidia.com/mig-{p}"] = c
    return node(
        name,
        allocatable=alloc,
        requested={},
        labels={"nvidia.com/gpu.present": "true"},
        gpu=GpuInfo(
            product=product,
            memory_mib=memory,
            count=cards,
            mig_capable=True,
            mig_strategy="mixed",
            mig_profiles=tuple(sorted(union.items())),
        ),
    )


@st.composite
def idle_clusters(draw: st.DrawFn, *, max_nodes: int = 3, max_cards: int = 4) -> list[NodeState]:
    family = draw(st.sampled_from(sorted(PRODUCTS)))
    layouts = [dict(c) for c in fit_layouts_cache(family) if c and "+me" not in "".join(dict(c))]
    out = []
    for i in range(draw(st.integers(1, max_nodes))):
        cards = draw(st.integers(1, max_cards))
        mig = draw(st.integers(0, cards))
        out.append(idle_node(f"n{i}", family, cards, mig, draw(st.sampled_from(layouts))))
    return out


@st.composite
def mig_flows(draw: st.DrawFn, *, max_groups: int = 2) -> list[Any]:
    pods = []
    for g in range(draw(st.integers(1, max_groups))):
        gib = draw(st.sampled_from([4, 9, 18, 30]))
        pods += [mig_pod(f"m{g}", r, gib, 0) for r in range(draw(st.integers(1, 4)))]
    if draw(st.booleans()):  # whole cards: MIG cards may have to be disabled (a mode change)
        pods += [whole_pod("w", r, 1, 0) for r in range(draw(st.integers(1, 2)))]
    return pods


@settings(max_examples=150, deadline=None)
@given(idle_clusters(), mig_flows(), st.randoms(use_true_random=False))
def test_configs_parse_realise_the_plan_and_disrupt_what_it_counts(nodes, pods, rnd):
    result = pack_mix(pods, nodes, config=CONFIG)
    assume(result.packing.feasible is True)
    touched = [n for n in result.mig.nodes if n.touched]
    event(f"nodes touched: {min(len(touched), 2)}+")
    event("some order unknown" if any(n.indices_assumed for n in touched) else "orders known")
    config = result.mig.mig_parted_config()
    assert (config is None) is (not touched)
    if config is not None:
        assert parser_accepts(config)  # (a)
    assert_config_realises(result.mig, nodes)  # (b), (c) on every order
    by_name = {n.name: n for n in nodes}
    for plan_node in touched:  # (b), (c) on one random true order, spelled out
        assert config is not None
        today = cards_today(by_name[plan_node.node])
        true_order = list(today)
        rnd.shuffle(true_order)
        after, hit = mig_parted(true_order, config["mig-configs"][plan_node.config_name])
        shown = [dict(c.profiles) if c.mig_enabled else None for c in plan_node.cards]
        assert state_bag(after) == state_bag(shown)
        if plan_node.indices_assumed:
            assert len(hit) <= plan_node.cards_reconfigured
        else:
            assert len(hit) == plan_node.cards_reconfigured


def fewest_disrupted(today: Sequence[Any], outcome: Sequence[Any]) -> int:
    """Over every config of one node (each card unlisted or listed with a state), those
    that end with ``outcome``'s states in every true order: the fewest cards disrupted
    in the worst order."""
    states: list[Any] = [None]
    for s in [*today, *outcome]:
        if s is not None and s != "?" and s not in states:
            states.append(s)
    best = len(today) + 1
    orders = card_orders(today)
    for choice in itertools.product([-1, *range(len(states))], repeat=len(today)):
        entries = [
            {"devices": [i], "mig-enabled": states[c] is not None}
            | ({"mig-devices": dict(states[c])} if states[c] is not None else {})
            for i, c in enumerate(choice)
            if c >= 0
        ]
        worst = 0
        for order in orders:
            after, hit = mig_parted(order, entries)
            if state_bag(after) != state_bag(outcome):
                worst = len(today) + 1
                break
            worst = max(worst, len(hit))
        best = min(best, worst)
    return best


@settings(max_examples=100, deadline=None)
@given(idle_clusters(max_nodes=2, max_cards=4), mig_flows(max_groups=2))
def test_no_config_with_the_same_outcome_disrupts_fewer_cards(nodes, pods):
    result = pack_mix(pods, nodes, config=CONFIG)
    assume(result.packing.feasible is True)
    by_name = {n.name: n for n in nodes}
    touched = [n for n in result.mig.nodes if n.touched]
    assume(touched)
    event(f"cards on touched nodes: {max(len(n.cards) for n in touched)}")
    for plan_node in touched:
        profiles = {p for c in plan_node.cards for p, _ in c.profiles}
        today = cards_today(by_name[plan_node.node])
        profiles |= {p for s in today if isinstance(s, dict) for p in s}
        assume(len(profiles) <= 2)
        outcome = [dict(c.profiles) if c.mig_enabled else None for c in plan_node.cards]
        assert fewest_disrupted(today, outcome) == plan_node.cards_reconfigured, (today, outcome)
