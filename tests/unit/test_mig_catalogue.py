"""The MIG catalogue against NVIDIA's published tables and layouts (issue 16, item 8).

Two sources, held here as data:

- ``GUIDE``: the per-GPU "Supported MIG Profiles" tables of the NVIDIA MIG User
  Guide (docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html):
  each profile's memory and compute slices (its fractions times the card's
  slices) and its "Number of Instances Available".
- ``PARTED``: the layouts NVIDIA's default mig-parted config names
  (NVIDIA/mig-parted ``deployments/systemd/config-default.yaml``), per device
  group. Every one must be feasible in vfcore, and each ``all-balanced`` one
  must be found by the maximal-layout enumeration.

Parts the guide has no table for are either catalogued from another public
source, held in ``OTHER`` with the source named, and marked inferred (B300; GB300
is taken to be the same GPU), or not catalogued (GB200, GH200 144G HBM3e; see
``UNCATALOGUED`` and docs/mig.md).
"""

from __future__ import annotations

import pytest

from tests.support.mig import CONFIG, assert_config_realises, mig_pod
from vfcore.cluster import GpuInfo, node
from vfcore.placement.mig import MIG_FAMILIES, fit_layout, maximal_layouts, mig_family, pack_mix
from vfcore.placement.mig.catalogue import (
    INFERRED_USABLE_PER_GB,
    UNCATALOGUED,
    nominal_gb,
)

# (profile, memory slices, compute slices, number of instances available), per the guide's tables
_GA100 = ((1, 1, 7), (1, 1, 1), (2, 1, 4), (2, 2, 3), (4, 3, 2), (4, 4, 1), (8, 7, 1))


def _seven(names: str) -> tuple[tuple[str, int, int, int], ...]:
    return tuple((n, *row) for n, row in zip(names.split(), _GA100, strict=True))


GUIDE: dict[str, tuple[tuple[str, int, int, int], ...]] = {
    # A100-SXM4-40GB table (1/8 memory, 1/7 SMs, ...)
    "A100-40GB": _seven("1g.5gb 1g.5gb+me 1g.10gb 2g.10gb 3g.20gb 4g.20gb 7g.40gb"),
    # "For A100-SXM4-80GB, the profile names will change according to the memory proportion"
    "A100-80GB": _seven("1g.10gb 1g.10gb+me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb"),
    "H100-80GB": _seven("1g.10gb 1g.10gb+me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb"),
    "H100-94GB": _seven("1g.12gb 1g.12gb+me 1g.24gb 2g.24gb 3g.47gb 4g.47gb 7g.94gb"),
    "H100-96GB": _seven("1g.12gb 1g.12gb+me 1g.24gb 2g.24gb 3g.48gb 4g.48gb 7g.96gb"),
    "H200-141GB": _seven("1g.18gb 1g.18gb+me 1g.35gb 2g.35gb 3g.71gb 4g.71gb 7g.141gb"),
    "B200-180GB": _seven("1g.23gb 1g.23gb+me 1g.45gb 2g.45gb 3g.90gb 4g.90gb 7g.180gb"),
    # A30-24GB table: fractions of 4
    "A30-24GB": (
        ("1g.6gb", 1, 1, 4),
        ("1g.6gb+me", 1, 1, 1),
        ("2g.12gb", 2, 2, 2),
        ("2g.12gb+me", 2, 2, 1),
        ("4g.24gb", 4, 4, 1),
    ),
    # RTX PRO 6000 Blackwell (Server, Workstation, Max-Q) 96GB table: fractions of 4
    "RTX-PRO-6000-96GB": (
        ("1g.24gb", 1, 1, 4),
        ("1g.24gb+me", 1, 1, 1),
        ("1g.24gb+gfx", 1, 1, 4),
        ("1g.24gb+me.all", 1, 1, 1),
        ("1g.24gb-me", 1, 1, 4),
        ("2g.48gb", 2, 2, 2),
        ("2g.48gb+gfx", 2, 2, 2),
        ("2g.48gb+me.all", 2, 2, 1),
        ("2g.48gb-me", 2, 2, 2),
        ("4g.96gb", 4, 4, 1),
        ("4g.96gb+gfx", 4, 4, 1),
    ),
}


_H100_80 = {
    "all-1g.10gb": {"1g.10gb": 7},
    "all-1g.10gb.me": {"1g.10gb+me": 1},
    "all-1g.20gb": {"1g.20gb": 4},
    "all-2g.20gb": {"2g.20gb": 3},
    "all-3g.40gb": {"3g.40gb": 2},
    "all-4g.40gb": {"4g.40gb": 1},
    "all-7g.80gb": {"7g.80gb": 1},
    "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
}

#: Families the guide has no table for, from another public source: B300's profile names and
#: instance counts as cloud tooling lists them (aws/sagemaker-hyperpod-cli #403: "1g.34gb (x7),
#: 1g.67gb (x4), 2g.67gb (x3), 3g.135gb (x2), 4g.135gb (x1), 7g.269gb (x1)"); the slices and the
#: ``+me`` variant are INFERRED from the GB100 grid.
OTHER: dict[str, tuple[tuple[str, int, int, int], ...]] = {
    "B300-288GB": _seven("1g.34gb 1g.34gb+me 1g.67gb 2g.67gb 3g.135gb 4g.135gb 7g.269gb"),
}

#: NVIDIA/mig-parted deployments/systemd/config-default.yaml: the layouts each device group gets
#: (by its comments and device-filter); ``all-1g.45gb`` ... name no group, but only B200 has them.
PARTED: dict[str, dict[str, dict[str, int]]] = {
    "A100-40GB": {
        "all-1g.5gb": {"1g.5gb": 7},
        "all-1g.5gb.me": {"1g.5gb+me": 1},
        "all-1g.10gb": {"1g.10gb": 4},  # the A100-40GB device-filter entry
        "all-2g.10gb": {"2g.10gb": 3},
        "all-3g.20gb": {"3g.20gb": 2},
        "all-4g.20gb": {"4g.20gb": 1},
        "all-7g.40gb": {"7g.40gb": 1},
        "all-balanced": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    },
    "A100-80GB": _H100_80,
    "H100-80GB": _H100_80,
    "H100-94GB": {
        "all-1g.12gb": {"1g.12gb": 7},
        "all-1g.12gb.me": {"1g.12gb+me": 1},
        "all-1g.24gb": {"1g.24gb": 4},  # the "H100 NVL 94GB" device-filter entry
        "all-2g.24gb": {"2g.24gb": 3},
        "all-3g.47gb": {"3g.47gb": 2},
        "all-4g.47gb": {"4g.47gb": 1},
        "all-7g.94gb": {"7g.94gb": 1},
        "all-balanced": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
    },
    "H100-96GB": {  # "H100-96GB, PG506-96GB, GH200" (+ H20 in all-balanced)
        "all-1g.12gb": {"1g.12gb": 7},
        "all-1g.12gb.me": {"1g.12gb+me": 1},
        "all-2g.24gb": {"2g.24gb": 3},
        "all-3g.48gb": {"3g.48gb": 2},
        "all-4g.48gb": {"4g.48gb": 1},
        "all-7g.96gb": {"7g.96gb": 1},
        "all-balanced": {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
    },
    "H200-141GB": {
        "all-1g.18gb": {"1g.18gb": 7},
        "all-1g.18gb.me": {"1g.18gb+me": 1},
        "all-1g.35gb": {"1g.35gb": 4},
        "all-2g.35gb": {"2g.35gb": 3},
        "all-3g.71gb": {"3g.71gb": 2},
        "all-4g.71gb": {"4g.71gb": 1},
        "all-7g.141gb": {"7g.141gb": 1},
        "all-balanced": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    },
    "B200-180GB": {
        "all-1g.23gb": {"1g.23gb": 7},
        "all-1g.23gb.me": {"1g.23gb+me": 1},
        "all-1g.45gb": {"1g.45gb": 4},
        "all-2g.45gb": {"2g.45gb": 3},
        "all-3g.90gb": {"3g.90gb": 2},
        "all-4g.90gb": {"4g.90gb": 1},
        "all-7g.180gb": {"7g.180gb": 1},
        "all-balanced": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
    },
    "A30-24GB": {
        "all-1g.6gb": {"1g.6gb": 4},
        "all-1g.6gb.me": {"1g.6gb+me": 1},
        "all-2g.12gb": {"2g.12gb": 2},
        "all-2g.12gb.me": {"2g.12gb+me": 1},
        "all-4g.24gb": {"4g.24gb": 1},
        "all-balanced": {"1g.6gb": 2, "2g.12gb": 1},
    },
    "RTX-PRO-6000-96GB": {
        "all-1g.24gb": {"1g.24gb": 4},  # the RTX-PRO-6000-96GB device-filter entry
        "all-1g.24gb.me": {"1g.24gb+me": 1},
        "all-1g.24gb.gfx": {"1g.24gb+gfx": 4},
        "all-1g.24gb.me.all": {"1g.24gb+me.all": 1},
        "all-1g.24gb-me": {"1g.24gb-me": 4},
        "all-2g.48gb": {"2g.48gb": 2},
        "all-2g.48gb.gfx": {"2g.48gb+gfx": 2},
        "all-2g.48gb.me.all": {"2g.48gb+me.all": 1},
        "all-2g.48gb-me": {"2g.48gb-me": 2},
        "all-4g.96gb": {"4g.96gb": 1},
        "all-4g.96gb.gfx": {"4g.96gb+gfx": 1},
        "all-balanced": {"1g.24gb": 2, "2g.48gb": 1},
    },
}


def test_every_catalogued_family_has_a_guide_table_and_parted_layouts():
    assert set(MIG_FAMILIES) == set(GUIDE) | set(OTHER)
    assert set(GUIDE) == set(PARTED)
    assert set(UNCATALOGUED) == {"GH200-144GB", "GB200"}


@pytest.mark.parametrize("family", sorted(OTHER))
def test_a_family_from_another_source_matches_it_and_says_it_is_inferred(family):
    fam = MIG_FAMILIES[family]
    got = tuple((p.name, p.memory_slices, p.compute_slices, p.max_count) for p in fam.profiles)
    assert got == OTHER[family]
    assert fam.starts_inferred and all(p.usable_inferred for p in fam.profiles)
    assert "INFERRED" in fam.sources
    for name, _, _, count in OTHER[family]:
        if "+" not in name:  # each plain profile, as many as the source lists, fits one card
            assert fit_layout(family, {name: count}).feasible
            assert not fit_layout(family, {name: count + 1}).feasible


@pytest.mark.parametrize("family", sorted(GUIDE))
def test_the_catalogue_matches_the_guide_table(family):
    fam = MIG_FAMILIES[family]
    got = tuple((p.name, p.memory_slices, p.compute_slices, p.max_count) for p in fam.profiles)
    assert got == GUIDE[family]
    full = max(GUIDE[family], key=lambda row: row[1])
    assert (fam.memory_slices, fam.compute_slices) == (full[1], full[2])


@pytest.mark.parametrize(
    ("family", "config", "counts"),
    [(f, c, counts) for f, layouts in sorted(PARTED.items()) for c, counts in layouts.items()],
)
def test_every_layout_of_nvidias_default_config_is_feasible(family, config, counts):
    fit = fit_layout(family, counts)
    assert fit.feasible, (config, fit.reason)


@pytest.mark.parametrize("family", sorted(PARTED))
def test_each_all_balanced_layout_is_a_maximal_layout(family):
    balanced = PARTED[family]["all-balanced"]
    found = maximal_layouts(family, balanced)
    assert tuple(sorted(balanced.items())) in found


@pytest.mark.parametrize("family", sorted(PARTED))
def test_each_all_layout_of_one_plain_profile_is_the_most_of_it_a_card_holds(family):
    for config, counts in PARTED[family].items():
        if len(counts) != 1 or config == "all-balanced":
            continue
        ((name, n),) = counts.items()
        assert fit_layout(family, {name: n}).feasible
        assert not fit_layout(family, {name: n + 1}).feasible, config


def test_the_inferred_usable_memory_is_below_every_captured_figure():
    """Families without an ``-lgip`` capture get ``0.88 × nominal GB`` GiB: no captured profile
    has less, so the inference never promises memory a real instance lacks."""
    captured = inferred = 0
    for fam in MIG_FAMILIES.values():
        for p in fam.profiles:
            rule = round(round(nominal_gb(p.name) * INFERRED_USABLE_PER_GB, 2) * 1024)
            if p.usable_inferred and fam.name not in ("H200-141GB",):
                assert p.usable_mib == rule, p
                inferred += 1
            elif not p.usable_inferred:
                assert p.usable_mib >= rule, p
                captured += 1
    assert captured >= 30 and inferred >= 30


def test_media_engines_bound_the_variants_on_rtx_pro_6000_and_a30():
    fam = "RTX-PRO-6000-96GB"
    assert fit_layout(fam, {"1g.24gb+me.all": 1, "1g.24gb-me": 3}).feasible
    assert fit_layout(fam, {"1g.24gb+me.all": 1, "1g.24gb": 1}).reason == (
        "needs 5 NVDEC; a card has 4"
    )
    assert fit_layout(fam, {"1g.24gb+me": 1, "1g.24gb": 3}).feasible
    assert fit_layout(fam, {"2g.48gb+gfx": 1, "1g.24gb+gfx": 2}).feasible
    assert fit_layout("A30-24GB", {"1g.6gb+me": 1, "2g.12gb": 1, "1g.6gb": 1}).feasible
    assert fit_layout("A30-24GB", {"1g.6gb+me": 1, "2g.12gb+me": 1}).reason == (
        "needs 2 JPEG; a card has 1"
    )


def test_the_device_plugin_spelling_of_a_variant_names_the_same_profile():
    fam = MIG_FAMILIES["RTX-PRO-6000-96GB"]
    assert fam.canonical("1g.24gb.me.all") == "1g.24gb+me.all"
    assert fam.canonical("2g.48gb.gfx") == "2g.48gb+gfx"
    assert fam.canonical("1g.24gb-me") == "1g.24gb-me"
    assert fam.profile("4g.96gb+gfx").resource == "nvidia.com/mig-4g.96gb.gfx"  # type: ignore[union-attr]
    assert [p.variant for p in fam.profiles if not p.plain] == [
        "+me", "+gfx", "+me.all", "-me", "+gfx", "+me.all", "-me", "+gfx",
    ]  # fmt: skip


PARTS = {
    "B200-180GB": ("NVIDIA-B200", 183_359),
    "A30-24GB": ("NVIDIA-A30", 24_576),
    "RTX-PRO-6000-96GB": ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", 97_887),
    "H100-96GB": ("NVIDIA-GH200-480GB", 97_871),
    "H100-80GB": ("NVIDIA-H100-80GB-HBM3", 81_559),
}


def idle_node(name: str, family: str, cards: int = 1, mig: dict[str, int] | None = None):
    """An idle mixed-strategy node; ``mig``: the instances of its one MIG card (device-plugin names)."""
    product, memory = PARTS[family]
    assert mig_family(product, memory).name == family  # type: ignore[union-attr]
    mig = mig or {}
    alloc = {
        "cpu": 64000,
        "memory": 2**39,
        "pods": 110,
        "nvidia.com/gpu": cards - (1 if mig else 0),
    }
    alloc |= {f"nvidia.com/mig-{p}": n for p, n in mig.items()}
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
            mig_profiles=tuple(sorted(mig.items())),
        ),
    )


def test_seven_16_gib_sharers_fit_one_b200():
    """Before: a B200 had no MIG family, so seven 16 GiB sharers did not fit one card."""
    nodes = [idle_node("b", "B200-180GB")]
    result = pack_mix([mig_pod("share", r, 16) for r in range(7)], nodes, config=CONFIG)
    assert result.packing.feasible is True
    plan = result.mig.node("b")
    assert plan.family == "B200-180GB" and plan.touched
    assert [dict(c.profiles) for c in plan.cards] == [{"1g.23gb": 7}]
    config = result.mig.mig_parted_config()
    assert config is not None and plan.config_name in config["mig-configs"]
    (warning,) = [i for i in result.issues if i.id == "mig-starts-inferred"]
    assert "B200-180GB" in warning.message and "usable memory" in warning.message
    assert_config_realises(result.mig, nodes)


@pytest.mark.parametrize(
    ("family", "gib", "fit", "profile"),
    [
        ("RTX-PRO-6000-96GB", 20, 4, "1g.24gb"),  # 4 instances at most: a fifth does not fit
        ("A30-24GB", 5, 4, "1g.6gb"),
        ("A30-24GB", 10, 2, "2g.12gb"),
        ("H100-96GB", 40, 2, "3g.48gb"),
    ],
)
def test_a_card_with_its_own_geometry_holds_what_the_guide_allows(family, gib, fit, profile):
    nodes = [idle_node("n", family)]
    ok = pack_mix([mig_pod("share", r, gib) for r in range(fit)], nodes, config=CONFIG)
    assert ok.packing.feasible is True
    plan = ok.mig.node("n")
    assert plan.family == family and [dict(c.profiles) for c in plan.cards] == [{profile: fit}]
    assert_config_realises(ok.mig, nodes)
    too_many = pack_mix([mig_pod("share", r, gib) for r in range(fit + 1)], nodes, config=CONFIG)
    assert too_many.packing.feasible is False


def test_a_node_advertising_a_variant_in_the_device_plugin_spelling_keeps_mig():
    """``nvidia.com/mig-1g.10gb.me`` is the ``1g.10gb+me`` instance, not a profile the card lacks."""
    nodes = [idle_node("h", "H100-80GB", cards=2, mig={"1g.10gb.me": 1, "1g.10gb": 6})]
    result = pack_mix([mig_pod("share", r, 9) for r in range(6)], nodes, config=CONFIG)
    assert result.packing.feasible is True
    plan = result.mig.node("h")
    assert plan.family == "H100-80GB" and plan.cards_reconfigured == 0
