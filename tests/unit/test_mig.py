"""vfcore.placement.mig: the catalogue against the reference tables, layouts, profile choice, and cases.

The laws (brute force over start slots, the planning oracle) are in
``tests/property/test_mig_laws.py``; this file pins the facts and the
examples the issue names.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.mig import (
    assert_config_realises,
    assert_valid,
    independent_check,
    mig_node,
    mig_pod,
    whole_pod,
)
from vfcore.cluster import ClusterSnapshot, GpuInfo, node
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import pod_requests
from vfcore.placement.mig import (
    MIG_FAMILIES,
    Placement,
    check_layout,
    choose_profile,
    config_name,
    fit_layout,
    maximal_layouts,
    mig_family,
    mig_parted_yaml,
    pack_mix,
)
from vfcore.placement.packing import SolverConfig
from vfcore.placement.plan import plan, plan_pods

REPO = Path(__file__).resolve().parents[2]
CONFIG = SolverConfig.deterministic(max_deterministic_time=20.0)

# -- the catalogue is NVIDIA's MIG profile tables (docs/mig.md) --------------------------------------

# profile: (memory slices, compute slices, max count, valid starts)
GEOMETRY = {
    "1g": (1, 1, 7, (0, 1, 2, 3, 4, 5, 6)),
    "1g+me": (1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
    "1g-double": (2, 1, 4, (0, 2, 4, 6)),
    "2g": (2, 2, 3, (0, 2, 4)),
    "3g": (4, 3, 2, (0, 4)),
    "4g": (4, 4, 1, (0,)),
    "7g": (8, 7, 1, (0,)),
}
NAMES = {
    "A100-40GB": ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100-80GB": ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100-80GB": ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100-94GB": ("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    "H200-141GB": (
        "1g.18gb",
        "1g.18gb+me",
        "1g.35gb",
        "2g.35gb",
        "3g.71gb",
        "4g.71gb",
        "7g.141gb",
    ),
}
# usable GiB from `nvidia-smi mig -lgip` (the reference's tables where it gives them)
USABLE = {
    "H100-80GB": (9.75, 9.75, 19.62, 19.62, 39.50, 39.50, 79.25),
    "H100-94GB": (10.75, 10.75, 21.62, 21.62, 46.38, 46.38, 93.12),
    "A100-80GB": (9.50, 9.50, 19.50, 19.50, 39.25, 39.25, 78.50),
    "A100-40GB": (4.75, 4.75, 9.62, 9.62, 19.50, 19.50, 39.25),
    "H200-141GB": (16.00, 16.00, 32.50, 32.50, 69.75, 69.75, 140.00),
}


@pytest.mark.parametrize("family", sorted(NAMES))
def test_every_profile_has_the_reference_geometry_and_usable_memory(family):
    fam = MIG_FAMILIES[family]
    assert fam.names == NAMES[family]
    assert (fam.memory_slices, fam.compute_slices) == (8, 7)
    for profile, kind, gib in zip(fam.profiles, GEOMETRY, USABLE[family], strict=True):
        assert (
            profile.memory_slices,
            profile.compute_slices,
            profile.max_count,
            profile.starts,
        ) == GEOMETRY[kind], profile
        assert profile.usable_mib == round(gib * 1024)
        # the device plugin advertises ``1g.10gb+me`` as ``nvidia.com/mig-1g.10gb.me``
        assert profile.resource == f"nvidia.com/mig-{profile.name.replace('+', '.')}"
        assert profile.media_extensions is kind.endswith("+me")
        assert profile.plain is not kind.endswith("+me")


def test_start_slots_without_an_lgipp_capture_are_marked_inferred():
    inferred = {f.name for f in MIG_FAMILIES.values() if f.starts_inferred}
    assert inferred == {
        "H200-141GB",
        "H100-96GB",
        "B200-180GB",
        "B300-288GB",
        "A30-24GB",
        "RTX-PRO-6000-96GB",
    }
    for name in inferred:
        assert "INFERRED" in MIG_FAMILIES[name].sources, name


@pytest.mark.parametrize(
    ("product", "memory", "family"),
    [
        ("NVIDIA-A100-SXM4-40GB", None, "A100-40GB"),
        ("NVIDIA-A100-PCIE-40GB", None, "A100-40GB"),
        ("NVIDIA-A100-SXM4-80GB", None, "A100-80GB"),
        ("NVIDIA-A100-80GB-PCIe", None, "A100-80GB"),
        ("NVIDIA-A100-SXM4", 81920, "A100-80GB"),
        ("NVIDIA-A800-SXM4-80GB", None, "A100-80GB"),
        ("NVIDIA-H100-80GB-HBM3", None, "H100-80GB"),
        ("NVIDIA-H100-PCIe", 81559, "H100-80GB"),
        ("NVIDIA-H800-80GB-HBM3", None, "H100-80GB"),
        ("NVIDIA-H100-NVL", None, "H100-94GB"),
        ("NVIDIA-H100-SXM5-94GB", None, "H100-94GB"),
        ("NVIDIA-H100-PCIe", 95830, "H100-94GB"),
        ("NVIDIA-H200", None, "H200-141GB"),
        ("NVIDIA-H200-NVL", None, "H200-141GB"),
        ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", None, "A100-80GB"),  # single strategy suffix
        ("NVIDIA-H100-80GB-HBM3-SHARED", None, "H100-80GB"),  # time-slicing suffix
        ("Tesla-T4", 15360, None),
        ("NVIDIA-L40S", 46068, None),
        ("NVIDIA-GH200-480GB", None, "H100-96GB"),
        ("NVIDIA-GH200-144G-HBM3e", None, None),
        ("NVIDIA-GH200", 146_000, None),
        ("NVIDIA-H20", None, "H100-96GB"),
        ("NVIDIA-H100-96GB-HBM3", None, "H100-96GB"),
        ("NVIDIA-H100", 97_871, "H100-96GB"),
        ("NVIDIA-B200", 183_359, "B200-180GB"),
        ("NVIDIA-B200-MIG-1g.23gb", None, "B200-180GB"),
        ("NVIDIA-GB200", None, None),
        ("NVIDIA-B300-SXM6-AC", None, "B300-288GB"),
        ("NVIDIA-GB300", None, "B300-288GB"),
        ("NVIDIA-A30", 24_576, "A30-24GB"),
        ("NVIDIA-A30-MIG-1g.6gb", None, "A30-24GB"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", None, "RTX-PRO-6000-96GB"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition", None, "RTX-PRO-6000-96GB"),
        ("NVIDIA-RTX-6000-Ada-Generation", None, None),
        ("", None, None),
        (None, None, None),
    ],
)
def test_the_gfd_product_label_names_the_family(product, memory, family):
    found = mig_family(product, memory)
    assert (found.name if found else None) == family


def test_an_unknown_family_name_is_refused_with_a_hint():
    with pytest.raises(InvalidInputError) as err:
        fit_layout("GB200", ["1g.23gb"])
    assert err.value.rule == "unknown-mig-family"


# -- layouts: the cases -----------------------------------------------------------------------


def test_seven_1g10gb_instances_fill_an_h100_80gb():
    fit = fit_layout("H100-80GB", ["1g.10gb"] * 7)
    assert fit.feasible and [p.start for p in fit.placements] == list(range(7))
    for more in ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb"):
        assert not fit_layout("H100-80GB", ["1g.10gb"] * 7 + [more]).feasible
    assert fit_layout("H100-80GB", ["1g.10gb"] * 8).reason == (
        "8 × 1g.10gb exceeds its maximum of 7 per card"
    )


def test_3g_plus_3g_fills_the_memory_and_forbids_a_further_1g():
    fit = fit_layout("H100-80GB", ["3g.40gb", "3g.40gb"])
    assert [str(p) for p in fit.placements] == ["3g.40gb@0", "3g.40gb@4"]
    more = fit_layout("H100-80GB", ["3g.40gb", "3g.40gb", "1g.10gb"])
    assert not more.feasible
    assert more.reason == "needs 9 memory slices; a card has 8"  # 7 compute slices would do


def test_3g_at_4_with_2g_at_0_and_1g_at_2_and_3_is_valid():
    layout = [
        Placement(4, "3g.40gb"),
        Placement(0, "2g.20gb"),
        Placement(2, "1g.10gb"),
        Placement(3, "1g.10gb"),
    ]
    assert check_layout("H100-80GB", layout) == ()
    assert check_layout("A100-80GB", layout) == ()
    fit = fit_layout("H100-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2})  # all-balanced
    assert fit.feasible and fit.first_fit
    assert sorted(fit.placements) == sorted(layout)


def test_fragmentation_blocks_a_3g_where_the_1g_instances_sit():
    """kubernetes-sigs/dra-driver-nvidia-gpu#933: 1g at 0, 1 and 5 leave no room for a 3g."""
    stuck = [Placement(0, "1g.10gb"), Placement(1, "1g.10gb"), Placement(5, "1g.10gb")]
    for start in (0, 4):
        assert check_layout("H100-80GB", [*stuck, Placement(start, "3g.40gb")])
    compact = [Placement(0, "1g.10gb"), Placement(1, "1g.10gb"), Placement(2, "1g.10gb")]
    assert check_layout("H100-80GB", [*compact, Placement(4, "3g.40gb")]) == ()
    assert fit_layout("H100-80GB", {"1g.10gb": 3, "3g.40gb": 1}).feasible


@pytest.mark.parametrize(
    ("layout", "problem"),
    [
        ([Placement(2, "3g.40gb")], "2 is not a valid start"),
        ([Placement(0, "2g.20gb"), Placement(1, "1g.10gb")], "already taken by 2g.20gb@0"),
        ([Placement(s, "3g.40gb") for s in (0, 4)] + [Placement(0, "4g.40gb")], "already taken"),
        ([Placement(0, "4g.40gb"), Placement(4, "3g.40gb"), Placement(0, "7g.80gb")], "compute"),
        ([Placement(0, "1g.10gb+me"), Placement(1, "1g.10gb+me")], "exceeds its maximum of 1"),
        ([Placement(0, "1g.5gb")], "not a H100-80GB profile"),
    ],
    ids=[
        "start-not-valid",
        "memory-overlap",
        "4g-over-two-3g",
        "compute-over-7",
        "me-variant-at-most-one",
        "foreign-profile",
    ],
)
def test_check_layout_names_every_broken_rule(layout, problem):
    problems = check_layout("H100-80GB", layout)
    assert any(problem in p for p in problems), problems
    assert not independent_check("H100-80GB", layout)


def test_a_card_full_of_compute_with_memory_left_is_valid():
    layout = [Placement(0, "4g.40gb"), Placement(4, "2g.20gb"), Placement(6, "1g.10gb")]
    assert check_layout("H100-80GB", layout) == ()  # 7/7 compute, 7/8 memory


def test_maximal_layouts_for_the_profiles_a_flow_needs():
    assert maximal_layouts("H100-80GB", ["3g.40gb", "1g.10gb"]) == (
        (("1g.10gb", 4), ("3g.40gb", 1)),
        (("1g.10gb", 7),),
        (("3g.40gb", 2),),
    )
    assert maximal_layouts("H100-80GB", ["7g.80gb"]) == ((("7g.80gb", 1),),)


# -- profile choice -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "gib", "profile"),
    [
        ("H100-80GB", 9, "1g.10gb"),  # 9.75 GiB usable covers 9
        ("H100-80GB", 9.75, "1g.10gb"),  # equality edge: usable == demand fits
        ("H100-80GB", 10, "1g.20gb"),  # 10 GiB > 9.75 usable, although the name says 10gb
        ("H100-80GB", 19.62, "1g.20gb"),
        ("H100-80GB", 20, "3g.40gb"),
        ("H100-80GB", 79.25, "7g.80gb"),
        ("H200-141GB", 9, "1g.18gb"),
        ("H200-141GB", 17, "1g.35gb"),
        ("A100-80GB", 9.6, "1g.20gb"),  # 9.50 usable on an A100-80GB
        ("A100-40GB", 4.75, "1g.5gb"),
        ("A100-40GB", 5, "1g.10gb"),
        ("H100-94GB", 11, "1g.24gb"),
    ],
)
def test_the_smallest_profile_whose_usable_memory_covers_the_demand(family, gib, profile):
    choice = choose_profile(family, gib)
    assert choice.profile is not None and choice.profile.name == profile


def test_a_demand_no_profile_covers_is_unresolvable_and_names_the_largest():
    choice = choose_profile("H100-80GB", 80)
    assert not choice.resolvable and choice.largest.name == "7g.80gb"
    assert choice.message == (
        "80 GiB exceeds every H100-80GB profile: the largest, 7g.80gb, has 79.25 GiB usable"
    )
    assert choose_profile("H200-141GB", 80).profile.name == "7g.141gb"


@pytest.mark.parametrize("bad", [0, -1, True, float("nan")])
def test_choose_profile_refuses_a_demand_that_is_not_positive(bad):
    with pytest.raises(InvalidInputError):
        choose_profile("H100-80GB", bad)


# -- planning cases -----------------------------------------------------------------------------------


def cluster(*nodes):
    return ClusterSnapshot.of(nodes)


def mix_plan(pods, nodes):
    return plan_pods(pods, cluster(*nodes), gpu_mode="mix", solver=CONFIG)


def test_whole_card_claims_4_3_3_2_2_2_fit_two_8_card_hosts():
    """videoflow's greedy layout solver fails this; 4+2+2 and 3+3+2 fit exactly."""
    sizes = (4, 3, 3, 2, 2, 2)
    pods = [whole_pod(f"w{i}", 0, k) for i, k in enumerate(sizes)]
    nodes = [mig_node("a", "H100-80GB", cards=8), mig_node("b", "H100-80GB", cards=8)]
    result = mix_plan(pods, nodes)
    assert result.verdict == "fits"
    per_node = {"a": 0, "b": 0}
    for pod, host in result.assignments:
        per_node[host] += dict(zip((f"w{i}/0" for i in range(6)), sizes, strict=True))[pod]
    assert per_node == {"a": 8, "b": 8}
    assert result.mig.cards_reconfigured == 0
    assert result.mig.mig_parted_config() is None  # nothing to apply: no config offered
    assert result.mig.config_withheld == "no card needs reconfiguring: nothing to apply"


def test_seven_9gib_pods_fill_one_idle_h100_card():
    pods = [mig_pod("det", r, 9) for r in range(7)]
    nodes = [mig_node("a", "H100-80GB", cards=1)]
    result = pack_mix(pods, nodes, config=CONFIG)
    assert result.packing.feasible is True
    (card,) = result.mig.node("a").cards
    assert card.action == "partition" and card.profiles == (("1g.10gb", 7),)
    assert sorted(i.pod for i in card.instances) == [f"det/{r}" for r in range(7)]
    assert result.mig.resources == (("det", "nvidia.com/mig-1g.10gb"),)
    assert_valid(result, nodes)
    eighth = pack_mix([*pods, mig_pod("det", 7, 9)], nodes, config=CONFIG)
    assert eighth.packing.feasible is False
    assert eighth.unplaced[0].kind == "unschedulable"


def test_a_10gib_demand_takes_1g20gb_and_a_9gib_demand_1g10gb():
    pods = [mig_pod("small", 0, 9), mig_pod("big", 0, 10)]
    result = pack_mix(pods, [mig_node("a", "H100-80GB", cards=1)], config=CONFIG)
    assert dict(result.mig.resources) == {
        "big": "nvidia.com/mig-1g.20gb",
        "small": "nvidia.com/mig-1g.10gb",
    }
    assert dict(result.mig.pod_resources) == {
        "big/0": "nvidia.com/mig-1g.20gb",
        "small/0": "nvidia.com/mig-1g.10gb",
    }


def test_the_plan_minimises_cards_then_nodes():
    pods = [mig_pod("det", r, 9) for r in range(4)] + [mig_pod("emb", r, 30) for r in range(2)]
    nodes = [mig_node(n, "H100-80GB", cards=4) for n in ("a", "b", "c")]
    result = pack_mix(pods, nodes, config=CONFIG)
    assert (result.mig.cards_reconfigured, result.mig.nodes_touched) == (2, 1)
    assert result.mig.cards_lower_bound == 2


def test_existing_free_instances_are_used_before_any_card_is_wiped():
    busy = mig_node(
        "busy", "H100-80GB", cards=2, layout={"1g.10gb": 7}, bound={"nvidia.com/mig-1g.10gb": 3}
    )
    idle = mig_node("idle", "H100-80GB", cards=2)
    result = pack_mix([mig_pod("det", r, 9) for r in range(4)], [busy, idle], config=CONFIG)
    assert result.mig.cards_reconfigured == 0
    plan_node = result.mig.node("busy")
    assert not plan_node.touched and dict(plan_node.pool) == {"1g.10gb": 4}
    assert sorted(dict(plan_node.pool_pods)) == [f"det/{r}" for r in range(4)]
    assert "kubectl cannot tell which card" in plan_node.note


def test_an_idle_mig_card_is_repartitioned_or_disabled_and_says_so():
    uniform = mig_node("a", "H100-80GB", cards=2, layout=None)
    uniform = mig_node("a", "H100-80GB", cards=1, layout={"3g.40gb": 2})
    result = pack_mix([mig_pod("det", r, 9) for r in range(5)], [uniform], config=CONFIG)
    (card,) = result.mig.node("a").cards
    assert card.action == "repartition" and dict(card.profiles)["1g.10gb"] >= 5
    disable = pack_mix([whole_pod("w", 0, 1)], [uniform], config=CONFIG)
    (card,) = disable.mig.node("a").cards
    assert card.action == "disable" and not card.mig_enabled and card.pods == ("w/0",)
    assert_valid(disable, [uniform])


def test_a_node_with_mig_and_whole_cards_gets_a_config_with_assumed_indices():
    mixed = mig_node("a", "H100-80GB", cards=3, layout={"1g.10gb": 7})
    pods = [mig_pod("emb", r, 30) for r in range(2)]
    result = mix_plan(pods, [mixed])
    assert result.verdict == "fits"
    plan_node = result.mig.node("a")
    assert plan_node.indices_assumed
    # order unknown: the config lists every card. Partitioning a whole card changes a mode,
    # which clears the MIG card too, and in the worst order lands both whole cards in
    # MIG mode: up to 3. Re-laying the MIG card: up to 2 (the worst order puts a whole
    # card at its index). The plan re-lays.
    assert [c.action for c in plan_node.cards] == ["repartition", "keep", "keep"]
    assert plan_node.cards[0].profiles == (("3g.40gb", 2),)
    assert plan_node.cards_reconfigured == result.mig.cards_reconfigured == 2
    assert [e["devices"] for e in plan_node.mig_parted_entries()] == [[0], [1, 2]]
    assert "mig-card-indices-assumed" in {p.code for p in result.problems}


def test_an_unattributable_set_of_mig_cards_is_relaid_as_a_whole():
    """Two MIG cards holding 7×1g.10gb and 2×3g.40gb between them: who holds what is unknown."""
    node_ = mig_node("a", "H100-80GB", cards=2, layout=None)
    node_ = node(
        "a",
        allocatable={
            "cpu": 16000,
            "memory": 2**36,
            "nvidia.com/mig-1g.10gb": 7,
            "nvidia.com/mig-3g.40gb": 2,
        },
        labels={"nvidia.com/gpu.present": "true"},
        gpu=GpuInfo(
            product="NVIDIA-H100-80GB-HBM3",
            count=2,
            mig_capable=True,
            mig_strategy="mixed",
            mig_profiles=(("1g.10gb", 7), ("3g.40gb", 2)),
        ),
    )
    kept = pack_mix([mig_pod("det", r, 9) for r in range(7)], [node_], config=CONFIG)
    assert kept.mig.cards_reconfigured == 0
    relaid = pack_mix([mig_pod("det", r, 9) for r in range(10)], [node_], config=CONFIG)
    assert relaid.packing.feasible is True
    assert relaid.mig.cards_reconfigured == 2  # the whole block: its cards' layouts are unknown
    assert relaid.mig.node("a").indices_assumed
    assert_valid(relaid, [node_])


# -- problems with fixes ------------------------------------------------------------------------------


def codes(result):
    return {p.code: p for p in result.problems}


def test_a_multi_gpu_pod_that_does_not_fit_is_told_it_cannot_use_mig():
    nodes = [mig_node("a", "H100-80GB", cards=1, layout={"1g.10gb": 7})]
    result = mix_plan([whole_pod("rerank", 0, 2)], nodes)
    assert result.verdict == "does-not-fit"
    problem = codes(result)["mig-multi-gpu"]
    assert "cannot combine MIG slices" in problem.message and "gpu_memory_gib" in problem.hint


def test_a_single_strategy_pool_cannot_host_mixed_profiles():
    single = node(
        "s",
        allocatable={"cpu": 16000, "memory": 2**36, "nvidia.com/gpu": 14},
        labels={"nvidia.com/gpu.present": "true"},
        gpu=GpuInfo(
            product="NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
            count=14,
            mig_capable=True,
            mig_strategy="single",
        ),
    )
    result = mix_plan([mig_pod("det", 0, 9), whole_pod("w", 0, 1)], [single])
    problem = codes(result)["mig-single-strategy"]
    assert problem.severity == "error" and "migStrategy=mixed" in problem.hint
    assert result.verdict == "does-not-fit"
    assert {u.kind for u in result.unplaced} == {"unresolvable"}
    assert "single MIG strategy" in result.unplaced[0].summary


def test_a_demand_no_card_can_host_is_unresolvable_with_the_largest_named():
    result = mix_plan([mig_pod("llm", 0, 90)], [mig_node("a", "H100-80GB", cards=8)])
    assert result.verdict == "does-not-fit"
    problem = codes(result)["mig-demand-unresolvable"]
    assert "7g.80gb" in problem.message and "79.25" in problem.hint
    (unplaced,) = result.unplaced
    assert unplaced.kind == "unresolvable" and "79.25" in unplaced.fix


def test_cards_that_would_have_to_be_wiped_while_busy_are_reported():
    busy = mig_node(
        "a", "H100-80GB", cards=1, layout={"1g.10gb": 7}, bound={"nvidia.com/mig-1g.10gb": 1}
    )
    result = mix_plan([mig_pod("emb", 0, 30)], [busy])
    assert result.verdict == "does-not-fit"
    problem = codes(result)["mig-busy-cards"]
    assert "a (1 card(s); 1 nvidia.com/mig-1g.10gb in use)" in problem.message
    assert "drain" in problem.hint
    assert result.fix is not None and "one more node shaped like a" in result.fix


def test_reconfiguring_an_h200_warns_that_its_start_slots_are_inferred():
    h200 = node(
        "h",
        allocatable={"cpu": 16000, "memory": 2**36, "nvidia.com/gpu": 1},
        labels={"nvidia.com/gpu.present": "true"},
        gpu=GpuInfo(product="NVIDIA-H200", count=1, mig_capable=True, mig_strategy="mixed"),
    )
    result = mix_plan([mig_pod("det", 0, 9)], [h200])
    assert dict(result.mig.resources) == {"det": "nvidia.com/mig-1g.18gb"}
    assert "lgipp" in codes(result)["mig-starts-inferred"].hint
    assert any("inferred" in n for n in result.mig.notes)


def test_a_profile_with_less_memory_on_another_family_is_flagged():
    a100 = mig_node("a100", "A100-40GB", cards=1, layout={"1g.10gb": 4})
    h100 = mig_node("h100", "H100-80GB", cards=1, layout={"1g.10gb": 7})
    result = mix_plan([mig_pod("det", 0, 9.7)], [a100, h100])  # 9.62 on A100-40GB, 9.75 on H100
    assert result.verdict == "fits" and result.placement == {"det/0": "h100"}
    assert "a100" in codes(result)["mig-profile-ambiguous"].message


def test_unknown_occupancy_is_never_an_idle_card():
    hidden = mig_node("a", "H100-80GB", cards=1, unknown=True)
    result = mix_plan([mig_pod("det", 0, 9)], [hidden])
    assert result.verdict == "unknown"
    assert result.mig.cards_reconfigured == 0


# -- configs and names ---------------------------------------------------------------------------------


def test_config_names_are_valid_label_values_and_distinct():
    long_a, long_b = "x" * 80 + "a", "x" * 80 + "b"
    names = {config_name(n) for n in ("gpu-a", long_a, long_b, "ip-10-0-0-1.ec2.internal")}
    assert len(names) == 4
    for name in names:
        assert len(name) <= 63 and name[0].isalnum() and name[-1].isalnum()


def test_mig_parted_yaml_follows_the_reference_format():
    config = {
        "version": "v1",
        "mig-configs": {
            "custom": [
                {"devices": [0, 1], "mig-enabled": False},
                {"devices": [2], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
                {"devices": "all", "mig-enabled": True, "mig-devices": {}},
            ]
        },
    }
    text = mig_parted_yaml(config)
    assert yaml.safe_load(text) == config
    assert text.startswith("version: v1\nmig-configs:\n")


# -- plan(): the flow API and the example clusters -------------------------------------------------------


def load_example(name):
    from vfadapters.clusterload import load_cluster

    return load_cluster(REPO / "examples" / "clusters" / name)


def test_mix_flow_on_the_mig_idle_example():
    import runpy

    flow = runpy.run_path(str(REPO / "examples" / "mix_flow.py"))["flow"]
    snapshot = load_example("mig-idle")
    result = plan(flow, snapshot, gpu_mode="mix", solver=CONFIG)
    assert result.verdict == "fits"
    assert dict(result.mig.resources) == {
        "detect": "nvidia.com/mig-1g.10gb",
        "embed": "nvidia.com/mig-3g.40gb",
    }
    assert result.mig.cards_reconfigured == result.mig.cards_lower_bound == 1
    touched = [n for n in result.mig.nodes if n.touched]
    # h100-b has GPU pods bound: never touched; re-laying a100-c's MIG card (no mode change)
    # is preferred to partitioning h100-a's whole card (a mode change)
    assert [n.node for n in touched] == ["a100-c"]
    assert_config_realises(result.mig, snapshot.nodes)
    doc = result.to_dict()
    json.dumps(doc, allow_nan=False)
    assert doc["mig"]["mig_parted_config"]["version"] == "v1"
    assert all(p.slice != "mig" or p.pod in result.placement for p in result.pods)


def test_the_mig_mixed_example_uses_free_instances_of_busy_nodes():
    snapshot = load_example("mig-mixed")
    pods = [mig_pod("det", r, 9, cpu=2000) for r in range(4)] + [mig_pod("emb", 0, 30)]
    result = plan_pods(pods, snapshot, gpu_mode="mix", solver=CONFIG)
    assert result.verdict == "fits"
    assert result.mig.cards_reconfigured == 0 and result.mig.nodes_touched == 0
    assert {result.placement[f"det/{r}"] for r in range(4)} == {"mig-a"}
    assert result.placement["emb/0"] == "mig-b"


def test_exclusive_mode_plans_have_no_mig_section():
    pods = pod_requests(
        __import__("runpy").run_path(str(REPO / "examples" / "mix_flow.py"))["flow"],
        gpu_mode="exclusive",
    )
    result = plan_pods(pods, load_example("mig-idle"), gpu_mode="exclusive", solver=CONFIG)
    assert result.mig is None and "mig" not in result.to_dict()


def test_the_docstring_examples_run():
    import doctest
    import importlib
    import pkgutil

    import vfcore.placement.mig

    modules = [vfcore.placement.mig] + [
        importlib.import_module(f"vfcore.placement.mig.{info.name}")
        for info in pkgutil.iter_modules(vfcore.placement.mig.__path__)
    ]
    results = [doctest.testmod(m, optionflags=doctest.ELLIPSIS) for m in modules]
    assert sum(r.attempted for r in results) >= 15 and sum(r.failed for r in results) == 0


def test_the_worked_example_in_docs_mig_md_runs():
    import doctest

    result = doctest.testfile(
        str(REPO / "docs" / "mig.md"), module_relative=False, optionflags=doctest.ELLIPSIS
    )
    assert result.attempted >= 10 and result.failed == 0
