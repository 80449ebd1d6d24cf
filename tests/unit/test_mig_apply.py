"""The apply model (what ``nvidia-mig-parted apply`` does) and the 7 + 1 node of issue 16."""

from __future__ import annotations

import pytest

from tests.support.mig import (
    CONFIG,
    assert_config_realises,
    cards_today,
    mig_parted,
    mig_pod,
    parser_accepts,
)
from vfcore.cluster import GpuInfo, node
from vfcore.placement.mig import (
    UNKNOWN_LAYOUT,
    apply_entries,
    config_problems,
    pack_mix,
    worst_over_orders,
)

SEVEN = (("1g.10gb", 7),)


def test_a_listed_card_that_changes_mode_clears_every_listed_mig_card():
    cards = [SEVEN, SEVEN, None]
    entries = [
        {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"devices": [2], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
    ]
    out = apply_entries(cards, entries)
    assert out.mode_phase and out.reset_possible
    assert out.disrupted == (0, 1, 2)  # 0 and 1 end as they were, but recreated
    assert out.after == (SEVEN, SEVEN, (("3g.40gb", 2),))


def test_only_the_listed_cards_are_touched():
    out = apply_entries(
        [SEVEN, SEVEN, None], [{"devices": [2], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
    )
    assert out.disrupted == (2,)
    out = apply_entries(
        [SEVEN, SEVEN, None], [{"devices": [1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
    )
    assert out.disrupted == (1,) and not out.mode_phase and not out.reset_possible


def test_counts_not_slots_decide_whether_a_card_is_redone():
    same = [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
    assert apply_entries([SEVEN], same).disrupted == ()
    assert apply_entries([UNKNOWN_LAYOUT], same).disrupted == (0,)


def test_worst_over_orders_of_the_seven_plus_one_node():
    today = [SEVEN] * 7 + [None]
    relay_one = [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        {"devices": [1, 2, 3, 4, 5, 6], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"devices": [7], "mig-enabled": False},
    ]
    worst = worst_over_orders(today, relay_one)
    assert worst.orders == 8 and worst.same_outcome
    assert (worst.fewest_disrupted, worst.most_disrupted) == (1, 8)


@pytest.mark.parametrize(
    "config, problem",
    [
        ({"version": "v1", "mig-configs": {}}, "at least one entry in 'mig-configs' is required"),
        (
            {"version": "v2", "mig-configs": {"a": [{"devices": "all", "mig-enabled": False}]}},
            "unknown version",
        ),
        ({"version": "v1", "mig-configs": {"a": []}}, "at least one entry in 'a' is required"),
        (
            {"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True}]}},
            "missing required field 'mig-devices'",
        ),
        (
            {
                "version": "v1",
                "mig-configs": {
                    "a": [{"devices": [0], "mig-enabled": False, "mig-devices": {"1g.10gb": 1}}]
                },
            },
            "MIG devices included",
        ),
        (
            {"version": "v1", "mig-configs": {"a": [{"devices": "some", "mig-enabled": False}]}},
            "devices must be",
        ),
        (
            {
                "version": "v1",
                "mig-configs": {"a": [{"devices": [0], "mig-enabled": False, "x": 1}]},
            },
            "unexpected field: x",
        ),
        (
            {"version": "v1", "mig-configs": {"a": [{"mig-enabled": False}]}},
            "missing required field: devices",
        ),
    ],
)
def test_config_problems_follow_the_parser_rules(config, problem):
    found = config_problems(config)
    assert any(problem in p for p in found), found
    assert not parser_accepts(config)


# -- the 7 + 1 node: seven MIG cards (7 x 1g each) and one whole card, idle -------------------------

PARTS = {
    "A100-80GB": ("NVIDIA-A100-SXM4-80GB", "1g.10gb", 81920),
    "H100-80GB": ("NVIDIA-H100-80GB-HBM3", "1g.10gb", 81559),
    "H200-141GB": ("NVIDIA-H200", "1g.18gb", 143771),
}


def seven_plus_one(name: str, family: str, *, mig: int = 7, cards: int = 8):
    product, small, memory = PARTS[family]
    alloc = {"cpu": 64000, "memory": 2**39, "pods": 110, "nvidia.com/gpu": cards - mig}
    if mig:
        alloc[f"nvidia.com/mig-{small}"] = 7 * mig
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
            mig_profiles=((small, 7 * mig),) if mig else (),
        ),
    )


@pytest.mark.parametrize("family", sorted(PARTS))
def test_the_seven_plus_one_node_counts_what_mig_parted_disrupts(family):
    """Before: "1 card reconfigured", while mig-parted disrupted all 8. Now the plan says up to
    8 (the card order is unknown) and every order of the cards ends as the plan shows."""
    gib = 30 if family != "H200-141GB" else 60
    pods = [mig_pod("share", r, gib) for r in range(2)]
    nodes = [seven_plus_one("a", family)]
    result = pack_mix(pods, nodes, config=CONFIG)
    assert result.packing.feasible is True
    plan_node = result.mig.node("a")
    assert plan_node.indices_assumed
    assert result.mig.cards_reconfigured == plan_node.cards_reconfigured == 8
    assert result.mig.cards_lower_bound == 8
    assert_config_realises(result.mig, nodes)


@pytest.mark.parametrize("family", sorted(PARTS))
def test_a_node_of_known_order_is_preferred_and_only_its_changed_cards_listed(family):
    """Beside the 7 + 1 node, a node of eight 7 x 1g cards: re-laying one card disrupts 1."""
    gib = 30 if family != "H200-141GB" else 60
    pods = [mig_pod("share", r, gib) for r in range(2)]
    nodes = [seven_plus_one("a", family), seven_plus_one("b", family, mig=8)]
    result = pack_mix(pods, nodes, config=CONFIG)
    assert result.packing.feasible is True
    assert [n.node for n in result.mig.nodes if n.touched] == ["b"]
    b = result.mig.node("b")
    assert not b.indices_assumed and not b.mode_change
    assert result.mig.cards_reconfigured == 1
    config = result.mig.mig_parted_config()
    assert config is not None
    assert [e["devices"] for e in config["mig-configs"][b.config_name]] == [[0]]
    assert_config_realises(result.mig, nodes)
    _after, hit = mig_parted(cards_today(nodes[1]), config["mig-configs"][b.config_name])
    assert hit == {0}


def test_re_laying_is_preferred_to_a_mode_change():
    """Node a: two 7 x 1g cards; node b: two whole cards. One card either way; a's has no mode change."""
    pods = [mig_pod("share", r, 30) for r in range(2)]
    nodes = [
        seven_plus_one("a", "H100-80GB", mig=2, cards=2),
        seven_plus_one("b", "H100-80GB", mig=0, cards=2),
    ]
    result = pack_mix(pods, nodes, config=CONFIG)
    assert [n.node for n in result.mig.nodes if n.touched] == ["a"]
    assert result.mig.cards_reconfigured == 1
    only_b = pack_mix(pods, nodes[1:], config=CONFIG)
    assert only_b.mig.node("b").mode_change
    assert any("resets every GPU" in n for n in only_b.mig.notes)


def test_no_config_when_the_flow_does_not_fit():
    pods = [mig_pod("share", r, 30) for r in range(5)]  # 2 per card, 2 cards
    result = pack_mix(pods, [seven_plus_one("b", "H100-80GB", mig=0, cards=2)], config=CONFIG)
    assert result.packing.feasible is False
    assert result.mig.mig_parted_config() is None and result.mig.mig_parted_yaml() is None
    assert result.mig.config_withheld == "the flow does not fit"
    assert all(n["label"] is None for n in result.mig.to_dict()["nodes"])


def test_a_96gb_h100_is_not_taken_for_the_94gb_part():
    """H100-96GB cards have 3g.48gb, not the H100-94GB's 3g.47gb: a family of their own."""
    from vfcore.placement.mig import mig_family

    found = mig_family("NVIDIA-H100-96GB-HBM3")
    assert found is not None and found.name == "H100-96GB" and "3g.48gb" in found.names
    assert "3g.47gb" not in found.names
    assert mig_family("NVIDIA-H100-NVL").name == "H100-94GB"  # type: ignore[union-attr]
