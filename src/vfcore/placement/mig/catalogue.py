"""The MIG catalogue, as data: each card family's profiles, their slices, start slots and usable memory.

A MIG-capable card (A100, H100, H200) has 8 memory slices and 7 compute
slices; each :class:`MigProfile` says how many of each an instance takes, how
many instances fit at most, where they may start, and the memory an instance
really has (``nvidia-smi mig -lgip``). :data:`MIG_FAMILIES` holds every
family; :func:`mig_family` names the one a node's GPU labels describe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vfcore.errors import InvalidInputError

__all__ = ["MIG_FAMILIES", "MIG_RESOURCE_PREFIX", "MigFamily", "MigProfile", "mig_family"]


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

    @property
    def media_extensions(self) -> bool:
        """``+me`` variants carry the media engines (NVDEC/NVJPG/OFA) of the card."""
        return self.name.endswith("+me")

    @property
    def resource(self) -> str:
        """The extended resource the mixed strategy advertises: ``nvidia.com/mig-1g.10gb``."""
        return MIG_RESOURCE_PREFIX + self.name

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
            "resource": self.resource,
        }


@dataclass(frozen=True, slots=True)
class MigFamily:
    """A card family with one MIG geometry: its profiles, slices and sources.

    ``starts_inferred`` marks families whose start slots no captured
    ``nvidia-smi mig -lgipp`` confirms (H200: inferred from the identical GH100
    layout); confirm them on hardware before relying on a plan for that family.
    """

    name: str
    profiles: tuple[MigProfile, ...]
    memory_slices: int = 8
    compute_slices: int = 7
    starts_inferred: bool = False
    sources: str = ""

    def profile(self, name: str) -> MigProfile | None:
        for p in self.profiles:
            if p.name == name:
                return p
        return None

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
            "profiles": [p.to_dict() for p in self.profiles],
        }


def _mib(gib: float) -> int:
    # -lgip prints GiB with two decimals; converted like a pod's gpu_memory_gib, so a demand
    # equal to the printed figure fits
    return round(gib * GIB)


_ALL = (0, 1, 2, 3, 4, 5, 6)
_EVEN = (0, 2, 4, 6)
_TWO = (0, 2, 4)
_HALF = (0, 4)
_ZERO = (0,)


def _family(
    name: str,
    sizes: tuple[str, str, str, str],
    usable: tuple[float, float, float, float, float],
    *,
    inferred: frozenset[str] = frozenset(),
    starts_inferred: bool = False,
    sources: str,
) -> MigFamily:
    """The GA100/GH100 geometry, named per card: ``sizes`` = (1g, 1g-with-2-slices, 3g/4g, 7g)
    memory suffixes; ``usable`` GiB for 1 / 2 / 4 / 8 memory slices and ``2 slices, 2g``."""
    small, double, half, full = sizes
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
            MigProfile(n, m, c, k, s, _mib(u), usable_inferred=n in inferred)
            for n, m, c, k, s, u in rows
        ),
        starts_inferred=starts_inferred,
        sources=sources,
    )


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
    )
}


_PRODUCT_SUFFIXES = re.compile(r"(-MIG-.*|-SHARED)$", re.IGNORECASE)


def mig_family(product: str | None, memory_mib: int | None = None) -> MigFamily | None:
    """The MIG family of a GFD ``nvidia.com/gpu.product`` label (``None``: not MIG-capable here).

    The label may carry the single strategy's ``-MIG-<profile>`` or the sharing
    ``-SHARED`` suffix; both are ignored. Where the name does not say the
    memory size, ``memory_mib`` (``nvidia.com/gpu.memory``) decides.

    >>> mig_family("NVIDIA-A100-SXM4-80GB").name
    'A100-80GB'
    >>> mig_family("NVIDIA-H100-NVL").name, mig_family("NVIDIA-H200").name
    ('H100-94GB', 'H200-141GB')
    >>> mig_family("Tesla-T4") is None
    True
    """
    if not product:
        return None
    text = _PRODUCT_SUFFIXES.sub("", product.strip()).upper()
    words = set(re.split(r"[-_ ]+", text))
    if "GH200" in words or "GB200" in words:
        return None  # Grace-Hopper parts have other memory sizes; not catalogued
    if "H200" in words:
        return MIG_FAMILIES["H200-141GB"]
    if words & {"H100", "H800"}:
        if "96GB" in words:
            return None  # H100-96GB (GH200 480GB, H20): 3g.48gb etc., not catalogued
        if "NVL" in words or "94GB" in words:
            return MIG_FAMILIES["H100-94GB"]
        if "80GB" in words:
            return MIG_FAMILIES["H100-80GB"]
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
