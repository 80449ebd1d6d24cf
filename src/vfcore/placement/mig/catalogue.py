"""The MIG catalogue, as data: each card family's profiles, their slices, start slots and usable memory.

A GA100/GH100/GB100 card (A100, H100, H200, B200) has 8 memory slices and 7
compute slices; an A30 or an RTX PRO 6000 Blackwell has 4 of each. Each
:class:`MigProfile` says how many slices an instance takes, how many instances
fit at most, where they may start, and the memory an instance really has
(``nvidia-smi mig -lgip``). :data:`MIG_FAMILIES` holds every family;
:func:`mig_family` names the one a node's GPU labels describe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vfcore.errors import InvalidInputError

__all__ = [
    "MIG_FAMILIES",
    "MIG_RESOURCE_PREFIX",
    "UNCATALOGUED",
    "MigFamily",
    "MigProfile",
    "mig_family",
]


MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
GPU_RESOURCE = "nvidia.com/gpu"
GIB = 1024  # MiB


# -- the catalogue ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU-instance profile of one card family.

    ``memory_slices`` of 8 and ``compute_slices`` of 7; ``max_count`` instances
    at most; each instance starts at one of ``starts`` and covers
    ``memory_slices`` consecutive memory slices. ``usable_mib`` is the memory
    the instance really has (``nvidia-smi mig -lgip``, GiB × 1024, rounded like
    a pod's ``gpu_memory_gib``), not the nominal size in the name; ``usable_inferred`` marks a figure
    no capture of that exact profile confirms (derived from a sibling profile
    with the same memory slices, or from a single third-party capture).
    """

    name: str
    memory_slices: int
    compute_slices: int
    max_count: int
    starts: tuple[int, ...]
    usable_mib: int
    usable_inferred: bool = False
    media: tuple[int, int, int, int] | None = None

    @property
    def variant(self) -> str:
        """The suffix after ``<n>g.<m>gb``: ``""`` (plain), ``+me``, ``+me.all``, ``+gfx`` or ``-me``."""
        found = _NAME.match(self.name)
        return (found.group(3) or "") if found else ""

    @property
    def plain(self) -> bool:
        """A profile without a variant suffix: the only kind planning chooses for a pod."""
        return not self.variant

    @property
    def media_extensions(self) -> bool:
        """``+me`` / ``+me.all`` variants carry media engines (NVDEC/NVJPG/OFA) the plain one lacks."""
        return self.variant in ("+me", "+me.all")

    @property
    def resource(self) -> str:
        """The extended resource the mixed strategy advertises: ``nvidia.com/mig-1g.10gb``.

        The device plugin spells a profile's ``+`` as ``.``: ``1g.10gb+me`` is
        advertised as ``nvidia.com/mig-1g.10gb.me``.
        """
        return MIG_RESOURCE_PREFIX + self.name.replace("+", ".")

    @property
    def usable_gib(self) -> float:
        return self.usable_mib / GIB

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "memory_slices": self.memory_slices,
            "compute_slices": self.compute_slices,
            "max_count": self.max_count,
            "starts": list(self.starts),
            "usable_mib": self.usable_mib,
            "usable_gib": round(self.usable_gib, 2),
            "usable_inferred": self.usable_inferred,
            "media": None if self.media is None else list(self.media),
            "resource": self.resource,
        }


@dataclass(frozen=True, slots=True)
class MigFamily:
    """A card family with one MIG geometry: its profiles, slices and sources.

    ``starts_inferred`` marks families whose start slots no captured
    ``nvidia-smi mig -lgipp`` confirms (H200: inferred from the identical GH100
    layout); confirm them on hardware before relying on a plan for that family.
    ``media`` (NVDEC, NVENC, JPEG, OFA of the whole card), where set, bounds the
    instances' :attr:`MigProfile.media` summed over a card: a ``+me.all``
    instance takes every media engine, so only ``-me`` instances sit beside it.
    """

    name: str
    profiles: tuple[MigProfile, ...]
    memory_slices: int = 8
    compute_slices: int = 7
    starts_inferred: bool = False
    sources: str = ""
    media: tuple[int, int, int, int] | None = None

    def profile(self, name: str) -> MigProfile | None:
        """The profile of this name, in mig-parted's spelling (``1g.10gb+me``) or the
        device plugin's (``1g.10gb.me``)."""
        for p in self.profiles:
            if p.name == name or p.resource == MIG_RESOURCE_PREFIX + name:
                return p
        return None

    def canonical(self, name: str) -> str:
        """The catalogue's spelling of a profile name (unknown names are returned as they are)."""
        p = self.profile(name)
        return name if p is None else p.name

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "memory_slices": self.memory_slices,
            "compute_slices": self.compute_slices,
            "starts_inferred": self.starts_inferred,
            "sources": self.sources,
            "media": None if self.media is None else list(self.media),
            "profiles": [p.to_dict() for p in self.profiles],
        }


def _mib(gib: float) -> int:
    # -lgip prints GiB with two decimals; converted like a pod's gpu_memory_gib, so a demand
    # equal to the printed figure fits
    return round(gib * GIB)


_NAME = re.compile(r"^(\d+)g\.(\d+)gb(\+me\.all|\+me|\+gfx|-me)?$")

#: Usable GiB per GB of a profile's nominal size where no capture exists: below every captured
#: figure of the captured families (tightest: H200 ``1g.18gb`` 16.00 GiB = 0.889 per GB), so an
#: inferred figure never promises memory the instance lacks. tests/unit/test_mig_catalogue.py checks it.
INFERRED_USABLE_PER_GB = 0.88


def nominal_gb(name: str) -> int:
    """The size in a profile's name: ``3g.90gb+me`` → 90."""
    found = _NAME.match(name)
    if found is None:
        raise ValueError(f"{name!r} is not a MIG profile name")
    return int(found.group(2))


def _inferred_usable(name: str) -> float:
    return round(nominal_gb(name) * INFERRED_USABLE_PER_GB, 2)


_ALL = (0, 1, 2, 3, 4, 5, 6)
_EVEN = (0, 2, 4, 6)
_TWO = (0, 2, 4)
_HALF = (0, 4)
_ZERO = (0,)


def _family(
    name: str,
    sizes: tuple[str, str, str, str],
    usable: tuple[float, float, float, float, float] | None,
    *,
    inferred: frozenset[str] = frozenset(),
    starts_inferred: bool = False,
    sources: str,
) -> MigFamily:
    """The GA100/GH100/GB100 geometry, named per card: ``sizes`` = (1g, 1g-with-2-slices, 3g/4g,
    7g) memory suffixes; ``usable`` GiB for 1 / 2 / 4 / 8 memory slices and ``2 slices, 2g``
    (``None``: no capture, every figure inferred from the names)."""
    small, double, half, full = sizes
    if usable is None:
        usable = tuple(_inferred_usable(f"1g.{s}") for s in (small, double, half, full, double))  # type: ignore[assignment]
        inferred = frozenset({"*"})
    assert usable is not None
    u1, u2, u4, u8, u2g = usable
    rows = (
        (f"1g.{small}", 1, 1, 7, _ALL, u1),
        (f"1g.{small}+me", 1, 1, 1, _ALL, u1),
        (f"1g.{double}", 2, 1, 4, _EVEN, u2),
        (f"2g.{double}", 2, 2, 3, _TWO, u2g),
        (f"3g.{half}", 4, 3, 2, _HALF, u4),
        (f"4g.{half}", 4, 4, 1, _ZERO, u4),
        (f"7g.{full}", 8, 7, 1, _ZERO, u8),
    )
    return MigFamily(
        name=name,
        profiles=tuple(
            MigProfile(n, m, c, k, s, _mib(u), usable_inferred="*" in inferred or n in inferred)
            for n, m, c, k, s, u in rows
        ),
        starts_inferred=starts_inferred,
        sources=sources,
    )


_QUARTER = {1: (0, 1, 2, 3), 2: (0, 2), 4: (0,)}

Media = tuple[int, int, int, int]


def _quarter_family(
    name: str, rows: tuple[tuple[str, int, Media], ...], *, media: Media, sources: str
) -> MigFamily:
    """A 4-slice card (A30, RTX PRO 6000 Blackwell): ``rows`` = (profile, max count, media
    engines NVDEC/NVENC/JPEG/OFA); an ``<n>g`` profile takes n memory and n compute slices,
    starts at a multiple of n (INFERRED from the guide's diagrams), and its usable memory is
    inferred from its name (no capture)."""
    profiles = []
    for n, k, m in rows:
        g = int(n.split("g", 1)[0])
        profiles.append(
            MigProfile(n, g, g, k, _QUARTER[g], _mib(_inferred_usable(n)), True, media=m)
        )
    return MigFamily(
        name=name,
        profiles=tuple(profiles),
        memory_slices=4,
        compute_slices=4,
        starts_inferred=True,
        sources=sources,
        media=media,
    )


_GUIDE = "NVIDIA MIG User Guide, Supported MIG Profiles"
_PARTED = "NVIDIA/mig-parted deployments/systemd/config-default.yaml"


#: Every supported family, by name. Geometry (slices, maximum counts, start
#: slots) from the NVIDIA MIG User Guide (v580) tables and mig-parted's
#: config-default; usable memory from ``nvidia-smi mig -lgip`` captures (the
#: lowest figure seen across driver versions where captures disagree).
MIG_FAMILIES: Mapping[str, MigFamily] = {
    f.name: f
    for f in (
        _family(
            "A100-40GB",
            ("5gb", "10gb", "20gb", "40gb"),
            (4.75, 9.62, 19.50, 39.25, 9.62),
            sources="MIG User Guide (A100-SXM4-40GB table and -lgip example); "
            "later drivers report up to 9.75/19.62/39.50 GiB",
        ),
        _family(
            "A100-80GB",
            ("10gb", "20gb", "40gb", "80gb"),
            (9.50, 19.50, 39.25, 78.50, 19.50),
            sources="MIG User Guide; NVIDIA/mig-parted#97 -lgip (9.50/19.50/39.25 GiB); "
            "7g.80gb 78.50-78.75 GiB in A100-80GB -lgip captures",
        ),
        _family(
            "H100-80GB",
            ("10gb", "20gb", "40gb", "80gb"),
            (9.75, 19.62, 39.50, 79.25, 19.62),
            sources="MIG User Guide (H100 table); H100-80GB -lgip (jbarrow.ai field notes)",
        ),
        _family(
            "H100-94GB",
            ("12gb", "24gb", "47gb", "94gb"),
            (10.75, 21.62, 46.38, 93.12, 21.62),
            sources="mig-parted config-default (H100 NVL); H100 NVL -lgip/-lgipp capture",
        ),
        _family(
            "H200-141GB",
            ("18gb", "35gb", "71gb", "141gb"),
            (16.00, 32.50, 69.75, 140.00, 32.50),
            inferred=frozenset({"1g.35gb", "2g.35gb", "4g.71gb", "7g.141gb"}),
            starts_inferred=True,
            sources="MIG User Guide (H200 table); 1g.18gb 16.00 GiB and 3g.71gb 69.75 GiB "
            "seen on H200 MIG devices; start slots INFERRED from the GH100 layout "
            "(confirm with `nvidia-smi mig -lgipp`)",
        ),
        _family(
            "H100-96GB",
            ("12gb", "24gb", "48gb", "96gb"),
            None,
            starts_inferred=True,
            sources=f"{_GUIDE} (H100 96GB table: H100 on GH200; H20 96GB per Supported GPUs); "
            f"names and counts cross-checked with {_PARTED} (all-balanced for H100-96GB, GH200, "
            "H20; all-3g.48gb, all-4g.48gb, all-7g.96gb); start slots INFERRED from the GH100 "
            "layout; usable memory INFERRED from the names (no -lgip capture)",
        ),
        _family(
            "B200-180GB",
            ("23gb", "45gb", "90gb", "180gb"),
            None,
            starts_inferred=True,
            sources=f"{_GUIDE} (B200 180 GB table); names and counts cross-checked with {_PARTED} "
            "(all-balanced for B200, all-1g.23gb ... all-7g.180gb); start slots INFERRED from the "
            "GH100 layout (the guide's B200 diagram has the same 8 x 7 grid); usable memory "
            "INFERRED from the names (no -lgip capture)",
        ),
        _family(
            "B300-288GB",
            ("34gb", "67gb", "135gb", "269gb"),
            None,
            starts_inferred=True,
            sources="profile names and counts from public cloud tooling for 8 x B300 instances "
            "(1g.34gb x7, 1g.67gb x4, 2g.67gb x3, 3g.135gb x2, 4g.135gb x1, 7g.269gb x1; "
            "aws/sagemaker-hyperpod-cli #403, citing NVIDIA GPU Operator v25.3.0 device-filter "
            "0x318210DE); the MIG User Guide found has no B300 table: slices and start slots "
            "INFERRED from the GB100 (B200) 8 x 7 layout; usable memory INFERRED from the names; "
            "GB300 (the same Blackwell Ultra 288 GB GPU) INFERRED to share it",
        ),
        _quarter_family(
            "A30-24GB",
            (
                ("1g.6gb", 4, (0, 0, 0, 0)),
                ("1g.6gb+me", 1, (1, 0, 1, 1)),
                ("2g.12gb", 2, (2, 0, 0, 0)),
                ("2g.12gb+me", 1, (2, 0, 1, 1)),
                ("4g.24gb", 1, (4, 0, 1, 1)),
            ),
            media=(4, 0, 1, 1),
            sources=f"{_GUIDE} (A30-24GB table: fractions, media engines, instances); names and "
            f"counts cross-checked with {_PARTED} (all-1g.6gb ... all-4g.24gb, all-balanced); "
            "start slots INFERRED (an <n>g instance at a multiple of n); media engines summed "
            "against the 4g.24gb's (INFERRED); usable memory INFERRED from the names",
        ),
        _quarter_family(
            "RTX-PRO-6000-96GB",
            (
                ("1g.24gb", 4, (1, 1, 1, 0)),
                ("1g.24gb+me", 1, (1, 1, 1, 1)),
                ("1g.24gb+gfx", 4, (1, 1, 1, 0)),
                ("1g.24gb+me.all", 1, (4, 4, 4, 1)),
                ("1g.24gb-me", 4, (0, 0, 0, 0)),
                ("2g.48gb", 2, (2, 2, 2, 0)),
                ("2g.48gb+gfx", 2, (2, 2, 2, 0)),
                ("2g.48gb+me.all", 1, (4, 4, 4, 1)),
                ("2g.48gb-me", 2, (0, 0, 0, 0)),
                ("4g.96gb", 1, (4, 4, 4, 1)),
                ("4g.96gb+gfx", 1, (4, 4, 4, 1)),
            ),
            media=(4, 4, 4, 1),
            sources=f"{_GUIDE} (RTX PRO 6000 Blackwell Server/Workstation/Max-Q 96GB table: "
            f"fractions, NVDEC/NVENC/JPEG/OFA, instances); names and counts cross-checked with "
            f"{_PARTED} (all-1g.24gb.gfx ... all-4g.96gb.gfx, all-balanced); start slots INFERRED "
            "(an <n>g instance at a multiple of n); media engines summed against the 4g.96gb's "
            "(INFERRED: +me.all takes them all); usable memory INFERRED from the names",
        ),
    )
}

#: MIG-capable parts NVIDIA's default mig-parted config names that are deliberately NOT
#: catalogued, and why (their nodes serve whole cards in mix mode). See docs/mig.md.
UNCATALOGUED: Mapping[str, str] = {
    "GH200-144GB": "the MIG User Guide has no GH200 144G HBM3e table; only mig-parted's layout "
    "names (1g.18gb, 2g.36gb, 3g.72gb, ...) were found, with no slices or counts to verify",
    "GB200": "the MIG User Guide lists GB200 (186 GB, 7 instances: the B200's 8 x 7 grid) "
    "without a profile table, and two versions of mig-parted's default config disagree on "
    "its profile names (1g.23gb / 3g.93gb vs 1g.24gb / 3g.95gb): a plan would name "
    "resources that may not exist",
}


_PRODUCT_SUFFIXES = re.compile(r"(-MIG-.*|-SHARED)$", re.IGNORECASE)


def mig_family(product: str | None, memory_mib: int | None = None) -> MigFamily | None:
    """The MIG family of a GFD ``nvidia.com/gpu.product`` label (``None``: not MIG-capable here).

    The label may carry the single strategy's ``-MIG-<profile>`` or the sharing
    ``-SHARED`` suffix; both are ignored. Where the name does not say the
    memory size, ``memory_mib`` (``nvidia.com/gpu.memory``) decides.
    Parts in :data:`UNCATALOGUED` (GB200, GH200 144G HBM3e) are ``None``; B300 and GB300
    are the (inferred) ``B300-288GB`` family.

    >>> mig_family("NVIDIA-A100-SXM4-80GB").name
    'A100-80GB'
    >>> mig_family("NVIDIA-H100-NVL").name, mig_family("NVIDIA-H200").name
    ('H100-94GB', 'H200-141GB')
    >>> mig_family("NVIDIA-B200").name, mig_family("NVIDIA-GH200-480GB").name
    ('B200-180GB', 'H100-96GB')
    >>> mig_family("Tesla-T4") is None, mig_family("NVIDIA-GB200") is None
    (True, True)
    >>> mig_family("NVIDIA-B300-SXM6-AC").name, mig_family("NVIDIA-GB300").name
    ('B300-288GB', 'B300-288GB')
    """
    if not product:
        return None
    text = _PRODUCT_SUFFIXES.sub("", product.strip()).upper()
    words = set(re.split(r"[-_ ]+", text))
    if words & {"B300", "GB300"}:
        return MIG_FAMILIES["B300-288GB"]  # GB300: the same GPU, INFERRED (see its sources)
    if "GB200" in words:
        return None  # not catalogued: see UNCATALOGUED
    if "GH200" in words:
        if words & {"144G", "144GB", "HBM3E"} or (
            memory_mib is not None and memory_mib > 110 * GIB
        ):
            return None  # GH200 144G HBM3e: not catalogued
        return MIG_FAMILIES["H100-96GB"]  # GH200 480GB: the H100 96GB on GH200
    if "H20" in words:
        return MIG_FAMILIES["H100-96GB"]
    if "B200" in words:
        return MIG_FAMILIES["B200-180GB"]
    if "A30" in words:
        return MIG_FAMILIES["A30-24GB"]
    if {"RTX", "PRO", "6000", "BLACKWELL"} <= words:
        return MIG_FAMILIES["RTX-PRO-6000-96GB"]  # Server, Workstation and Max-Q editions
    if "H200" in words:
        return MIG_FAMILIES["H200-141GB"]
    if words & {"H100", "H800"}:
        if "96GB" in words:
            return MIG_FAMILIES["H100-96GB"]
        if "NVL" in words or "94GB" in words:
            return MIG_FAMILIES["H100-94GB"]
        if "80GB" in words:
            return MIG_FAMILIES["H100-80GB"]
        if memory_mib is not None and memory_mib > 96 * 1000:
            return MIG_FAMILIES["H100-96GB"]  # 96 GB HBM3 reports ~97,871 MiB; 94 GB ~95,830
        if memory_mib is not None and memory_mib > 90 * GIB:
            return MIG_FAMILIES["H100-94GB"]
        return MIG_FAMILIES["H100-80GB"]
    if words & {"A100", "A800"}:
        if "80GB" in words:
            return MIG_FAMILIES["A100-80GB"]
        if "40GB" in words:
            return MIG_FAMILIES["A100-40GB"]
        if memory_mib is not None:
            return MIG_FAMILIES["A100-80GB" if memory_mib > 50 * GIB else "A100-40GB"]
        return MIG_FAMILIES["A100-40GB"]  # A100-SXM4/PCIE without a size: the 40 GB part
    return None


def as_family(family: MigFamily | str) -> MigFamily:
    if isinstance(family, MigFamily):
        return family
    found = MIG_FAMILIES.get(family)
    if found is None:
        raise InvalidInputError(
            "unknown-mig-family",
            f"{family!r} is not a catalogued MIG family (known: {sorted(MIG_FAMILIES)})",
            "pass one of the known names, or mig_family(<GFD product label>)",
        )
    return found
