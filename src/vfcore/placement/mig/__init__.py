"""MIG: the profile catalogue, exact layouts, profile choice, and mix-mode planning.

A MIG-capable card (A100, H100, H200) has **8 memory slices** and **7 compute
slices**. A GPU instance of a profile takes a run of memory slices that must
start at one of the profile's valid start slots, plus some compute slices; the
two kinds run out separately. A ``3g.40gb`` takes 4 of the 8 memory slices but
only 3 of the 7 compute slices, so ``3g + 3g`` fills the memory while a compute
slice stays idle, and no ``1g`` fits beside them::

    >>> fit_layout("H100-80GB", ["3g.40gb", "3g.40gb"]).placements
    (Placement(start=0, profile='3g.40gb'), Placement(start=4, profile='3g.40gb'))
    >>> fit_layout("H100-80GB", ["3g.40gb", "3g.40gb", "1g.10gb"]).feasible
    False

Where an instance sits matters (fragmentation): three ``1g.10gb`` at starts 0,
1 and 5 leave 5 memory slices and 4 compute slices free, yet no ``3g`` fits (a
``3g`` needs slices 0–3 or 4–7); at 0, 1 and 2 they leave ``3g@4`` free. This
module is exact about it: :func:`fit_layout` decides whether a multiset of
profiles coexists on one card and returns a witness (a start slot per instance)
and a creation order; :func:`check_layout` re-checks any placed layout.

**Profile choice.** A pod declares ``gpu_memory_gib``; it gets the smallest
profile whose *usable* memory (what ``nvidia-smi mig -lgip`` reports) covers it:
9 GiB → ``1g.10gb`` on an H100-80GB (9.75 GiB usable), but 10 GiB does not fit
that and gets ``1g.20gb`` (19.62 GiB). See :func:`choose_profile`.

**Planning** (:func:`pack_mix`, used by ``plan(..., gpu_mode="mix")``): pods with
``gpu_memory_gib`` take one MIG instance (resource ``nvidia.com/mig-<profile>``
under the device plugin's *mixed* strategy), pods with ``gpu_count`` take whole
MIG-disabled cards (``nvidia.com/gpu``), all in one exact CP-SAT model with the
pods' cpu, memory, selectors and taints. Existing partitions are kept and their
free instances used as they are; idle cards may be (re)partitioned, and the plan
minimises the cards it reconfigures (a layout change wipes a whole card), then
the nodes it touches. See ``docs/mig.md`` for the attribution rules: what
kubectl shows, what it does not (which card a pod holds), and what follows.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from vfcore.cluster import NodeState
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import PodRequest
from vfcore.placement.fit import summarise
from vfcore.placement.packing import (
    PackingResult,
    SolverConfig,
    SolverReport,
    Status,
    pack,
    static_reasons,
)
from vfcore.quantity import PODS

__all__ = [
    "MIG_FAMILIES",
    "MIG_RESOURCE_PREFIX",
    "LayoutFit",
    "MigCard",
    "MigFamily",
    "MigInstance",
    "MigIssue",
    "MigNodePlan",
    "MigPlan",
    "MigProfile",
    "MigUnplaced",
    "MixPacking",
    "Placement",
    "ProfileChoice",
    "advertisable",
    "check_layout",
    "choose_profile",
    "config_name",
    "could_host",
    "feasible_layouts",
    "fit_layout",
    "maximal_layouts",
    "mig_family",
    "mig_parted_yaml",
    "mix_issues",
    "mix_reasons",
    "pack_mix",
]

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
GPU_RESOURCE = "nvidia.com/gpu"
_GIB = 1024  # MiB


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
        return self.usable_mib / _GIB

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
    return round(gib * _GIB)


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
        if "NVL" in words or "94GB" in words or "96GB" in words:
            return MIG_FAMILIES["H100-94GB"]
        if "80GB" in words:
            return MIG_FAMILIES["H100-80GB"]
        if memory_mib is not None and memory_mib > 90 * _GIB:
            return MIG_FAMILIES["H100-94GB"]
        return MIG_FAMILIES["H100-80GB"]
    if words & {"A100", "A800"}:
        if "80GB" in words:
            return MIG_FAMILIES["A100-80GB"]
        if "40GB" in words:
            return MIG_FAMILIES["A100-40GB"]
        if memory_mib is not None:
            return MIG_FAMILIES["A100-80GB" if memory_mib > 50 * _GIB else "A100-40GB"]
        return MIG_FAMILIES["A100-40GB"]  # A100-SXM4/PCIE without a size: the 40 GB part
    return None


def _as_family(family: MigFamily | str) -> MigFamily:
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


# -- layouts ------------------------------------------------------------------------------------

Counts = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True, order=True)
class Placement:
    """One GPU instance: its profile, at a start memory slice."""

    start: int
    profile: str

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "start": self.start}

    def __str__(self) -> str:
        return f"{self.profile}@{self.start}"


def _counts(profiles: Iterable[str] | Mapping[str, int]) -> Counts:
    tally: dict[str, int] = defaultdict(int)
    if isinstance(profiles, Mapping):
        for name, n in profiles.items():
            if n < 0:
                raise InvalidInputError(
                    "invalid-mig-layout",
                    f"profile {name!r} has a negative count ({n})",
                    "give each profile a count >= 0",
                )
            tally[name] += n
    else:
        for name in profiles:
            tally[name] += 1
    return tuple(sorted((k, v) for k, v in tally.items() if v))


def _enumerate_layouts(family: MigFamily) -> dict[Counts, tuple[Placement, ...]]:
    """Every feasible multiset of profiles on one card, with one placement each.

    A depth-first search over instances, profiles in catalogue order and, for
    repeated profiles, strictly increasing starts (identical instances are
    interchangeable). Exhaustive over placements, so a multiset it never meets
    has none. About a hundred multisets per family.
    """
    profiles = family.profiles
    found: dict[Counts, tuple[Placement, ...]] = {}
    counts = [0] * len(profiles)
    placed: list[Placement] = []

    def visit(first: int, mask: int, compute: int, last_start: int) -> None:
        key = tuple(sorted((profiles[j].name, c) for j, c in enumerate(counts) if c))
        if key not in found:
            found[key] = tuple(sorted(placed))
        for j in range(first, len(profiles)):
            p = profiles[j]
            if counts[j] >= p.max_count or compute + p.compute_slices > family.compute_slices:
                continue
            for start in p.starts:
                if j == first and counts[j] and start <= last_start:
                    continue
                bits = ((1 << p.memory_slices) - 1) << start
                if mask & bits or start + p.memory_slices > family.memory_slices:
                    continue
                counts[j] += 1
                placed.append(Placement(start, p.name))
                visit(j, mask | bits, compute + p.compute_slices, start)
                placed.pop()
                counts[j] -= 1

    visit(0, 0, 0, -1)
    return found


_LAYOUTS: Mapping[str, Mapping[Counts, tuple[Placement, ...]]] = {
    name: _enumerate_layouts(f) for name, f in MIG_FAMILIES.items()
}


@dataclass(frozen=True, slots=True)
class LayoutFit:
    """Whether a multiset of profiles coexists on one card, and how.

    ``placements`` is a witness (one start slot per instance, by start) and
    ``creation_order`` the order to create them in: creating each instance at
    the lowest free valid start slot, in this order, yields exactly
    ``placements`` (``first_fit`` is True), or — when no order does — creating
    them at the listed starts, largest first. ``reason`` says why not.
    """

    family: str
    profiles: Counts
    placements: tuple[Placement, ...] | None
    creation_order: tuple[Placement, ...] | None
    first_fit: bool
    reason: str | None

    @property
    def feasible(self) -> bool:
        return self.placements is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "profiles": dict(self.profiles),
            "feasible": self.feasible,
            "placements": None
            if self.placements is None
            else [p.to_dict() for p in self.placements],
            "creation_order": None
            if self.creation_order is None
            else [p.to_dict() for p in self.creation_order],
            "first_fit": self.first_fit,
            "reason": self.reason,
        }


def _first_fit(family: MigFamily, order: Sequence[str]) -> tuple[Placement, ...] | None:
    """Create instances in ``order``, each at its lowest free valid start; None if one fails."""
    mask = 0
    out = []
    for name in order:
        p = family.profile(name)
        assert p is not None
        for start in p.starts:
            bits = ((1 << p.memory_slices) - 1) << start
            if not mask & bits:
                mask |= bits
                out.append(Placement(start, name))
                break
        else:
            return None
    return tuple(out)


def _size_key(family: MigFamily, name: str) -> tuple[int, int, str]:
    p = family.profile(name)
    assert p is not None
    return (-p.memory_slices, -p.compute_slices, name)


def _creation(family: MigFamily, counts: Counts) -> tuple[tuple[Placement, ...], bool]:
    """A creation order and its placements: first-fit reproducible where some order allows."""
    names = sorted((n for n, c in counts for _ in range(c)), key=lambda n: _size_key(family, n))
    seen: set[tuple[str, ...]] = set()
    for order in itertools.permutations(names):
        if order in seen:
            continue
        seen.add(order)
        got = _first_fit(family, order)
        if got is not None:
            return got, True
    witness = _LAYOUTS[family.name][counts]
    order_ = tuple(sorted(witness, key=lambda p: (*_size_key(family, p.profile), p.start)))
    return order_, False


def fit_layout(family: MigFamily | str, profiles: Iterable[str] | Mapping[str, int]) -> LayoutFit:
    """Can these instances coexist on one card of ``family``? Exact, with a witness.

    ``profiles`` is a list of profile names (repeat a name for several
    instances) or a ``{profile: count}`` mapping.

    >>> fit = fit_layout("A100-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2})
    >>> [str(p) for p in fit.placements]
    ['2g.20gb@0', '1g.10gb@2', '1g.10gb@3', '3g.40gb@4']
    >>> fit_layout("H100-80GB", ["1g.10gb"] * 8).reason
    '8 × 1g.10gb exceeds its maximum of 7 per card'
    """
    fam = _as_family(family)
    counts = _counts(profiles)
    reason = _infeasibility(fam, counts)
    if reason is not None:
        return LayoutFit(fam.name, counts, None, None, False, reason)
    order, first_fit = _creation(fam, counts)
    return LayoutFit(fam.name, counts, tuple(sorted(order)), order, first_fit, None)


def _infeasibility(family: MigFamily, counts: Counts) -> str | None:
    for name, n in counts:
        p = family.profile(name)
        if p is None:
            return f"{name} is not a {family.name} profile (profiles: {', '.join(family.names)})"
        if n > p.max_count:
            return f"{n} × {name} exceeds its maximum of {p.max_count} per card"
    memory = sum(_profile(family, n).memory_slices * c for n, c in counts)
    compute = sum(_profile(family, n).compute_slices * c for n, c in counts)
    if compute > family.compute_slices:
        return f"needs {compute} compute slices; a card has {family.compute_slices}"
    if memory > family.memory_slices:
        return f"needs {memory} memory slices; a card has {family.memory_slices}"
    if counts not in _LAYOUTS[family.name]:
        return (
            f"no arrangement of start slots fits ({memory}/{family.memory_slices} memory and "
            f"{compute}/{family.compute_slices} compute slices, but the instances' valid "
            "start slots collide)"
        )
    return None


def _profile(family: MigFamily, name: str) -> MigProfile:
    p = family.profile(name)
    if p is None:
        raise InvalidInputError(
            "unknown-mig-profile",
            f"{name!r} is not a {family.name} profile (profiles: {', '.join(family.names)})",
            "use a profile name from the family's catalogue",
        )
    return p


def check_layout(family: MigFamily | str, placements: Iterable[Placement]) -> tuple[str, ...]:
    """Every way a placed layout breaks the card's rules (empty: valid). Independent of the search.

    Checks each start against the profile's valid starts, that memory runs stay
    on the card and never overlap, the compute-slice total and each profile's
    maximum count.

    >>> check_layout("H100-80GB", [Placement(4, "3g.40gb"), Placement(0, "2g.20gb"),
    ...                             Placement(2, "1g.10gb"), Placement(3, "1g.10gb")])
    ()
    >>> check_layout("H100-80GB", [Placement(2, "3g.40gb")])
    ('3g.40gb@2: 2 is not a valid start (valid: 0, 4)',)
    """
    fam = _as_family(family)
    problems: list[str] = []
    owner: dict[int, str] = {}
    compute = 0
    tally: dict[str, int] = defaultdict(int)
    for place in sorted(placements):
        p = fam.profile(place.profile)
        if p is None:
            problems.append(f"{place}: not a {fam.name} profile")
            continue
        tally[p.name] += 1
        compute += p.compute_slices
        if place.start not in p.starts:
            valid = ", ".join(str(s) for s in p.starts)
            problems.append(f"{place}: {place.start} is not a valid start (valid: {valid})")
        for s in range(place.start, place.start + p.memory_slices):
            if not 0 <= s < fam.memory_slices:
                problems.append(f"{place}: memory slice {s} is off the card")
            elif s in owner:
                problems.append(f"{place}: memory slice {s} is already taken by {owner[s]}")
            else:
                owner[s] = str(place)
    for name, n in sorted(tally.items()):
        limit = _profile(fam, name).max_count
        if n > limit:
            problems.append(f"{n} × {name} exceeds its maximum of {limit} per card")
    if compute > fam.compute_slices:
        problems.append(f"{compute} compute slices used; a card has {fam.compute_slices}")
    return tuple(problems)


def feasible_layouts(family: MigFamily | str) -> tuple[Counts, ...]:
    """Every multiset of profiles one card of ``family`` can hold (the empty one included)."""
    return tuple(sorted(_LAYOUTS[_as_family(family).name]))


def maximal_layouts(family: MigFamily | str, profiles: Iterable[str]) -> tuple[Counts, ...]:
    """The feasible multisets over ``profiles`` to which no instance of ``profiles`` can be added.

    Enough for planning: any layout over these profiles is contained in a
    maximal one, and a spare instance never hurts.

    >>> maximal_layouts("H100-80GB", ["3g.40gb", "1g.10gb"])
    ((('1g.10gb', 4), ('3g.40gb', 1)), (('1g.10gb', 7),), (('3g.40gb', 2),))
    """
    fam = _as_family(family)
    allowed = sorted(set(profiles))
    for name in allowed:
        _profile(fam, name)
    table = _LAYOUTS[fam.name]
    out = []
    for counts in table:
        if not counts or any(n not in allowed for n, _ in counts):
            continue
        grown = dict(counts)
        maximal = True
        for name in allowed:
            grown[name] = grown.get(name, 0) + 1
            if tuple(sorted(grown.items())) in table:
                maximal = False
            grown[name] -= 1
            if not grown[name]:
                del grown[name]
            if not maximal:
                break
        if maximal:
            out.append(counts)
    return tuple(sorted(out))


# -- profile choice -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProfileChoice:
    """The smallest profile of ``family`` whose usable memory covers ``demand_mib``.

    ``profile`` is ``None`` when no profile covers it (unresolvable on this
    family); ``largest`` names the profile with the most usable memory.
    """

    family: str
    demand_mib: int
    profile: MigProfile | None
    largest: MigProfile

    @property
    def resolvable(self) -> bool:
        return self.profile is not None

    @property
    def message(self) -> str:
        need = f"{self.demand_mib / _GIB:g} GiB"
        if self.profile is not None:
            return (
                f"{need} → {self.profile.name} on {self.family} "
                f"({self.profile.usable_gib:g} GiB usable)"
            )
        return (
            f"{need} exceeds every {self.family} profile: the largest, {self.largest.name}, "
            f"has {self.largest.usable_gib:g} GiB usable"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "demand_mib": self.demand_mib,
            "profile": None if self.profile is None else self.profile.name,
            "usable_gib": None if self.profile is None else round(self.profile.usable_gib, 2),
            "largest": self.largest.name,
            "resolvable": self.resolvable,
            "message": self.message,
        }


def _choose(family: MigFamily, demand_mib: int) -> ProfileChoice:
    plain = [p for p in family.profiles if not p.media_extensions]
    ranked = sorted(plain, key=lambda p: (p.usable_mib, p.memory_slices, p.compute_slices, p.name))
    chosen = next((p for p in ranked if p.usable_mib >= demand_mib), None)
    return ProfileChoice(family.name, demand_mib, chosen, ranked[-1])


def choose_profile(family: MigFamily | str, gpu_memory_gib: float) -> ProfileChoice:
    """The smallest profile whose *usable* memory covers ``gpu_memory_gib`` (``+me`` excluded).

    "Smallest" orders by usable memory, then memory slices, then compute slices:
    of ``1g.20gb`` and ``2g.20gb`` (same memory) the 1-compute-slice one wins.

    >>> choose_profile("H100-80GB", 9).profile.name
    '1g.10gb'
    >>> choose_profile("H100-80GB", 10).profile.name   # 10 GiB > 9.75 GiB usable
    '1g.20gb'
    >>> choose_profile("H200-141GB", 9).profile.name
    '1g.18gb'
    >>> choose_profile("A100-40GB", 48).message
    '48 GiB exceeds every A100-40GB profile: the largest, 7g.40gb, has 39.25 GiB usable'
    """
    if isinstance(gpu_memory_gib, bool) or not gpu_memory_gib > 0:
        raise InvalidInputError(
            "invalid-parameter",
            f"gpu_memory_gib={gpu_memory_gib!r} must be a number > 0",
            "give the VRAM one replica needs, e.g. 10",
        )
    return _choose(_as_family(family), round(gpu_memory_gib * _GIB))


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
        return _counts(i.profile for i in self.instances)

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


def mig_parted_yaml(config: Mapping[str, Any]) -> str:
    """A mig-parted config (as :meth:`MigPlan.mig_parted_config` returns it) as YAML text.

    Deterministic: configs, entries and profiles in the order given; every
    name double-quoted (a JSON string is a valid YAML scalar).
    """
    configs = config.get("mig-configs") or {}
    lines = [f"version: {config.get('version', 'v1')}", "mig-configs:" + ("" if configs else " {}")]
    for name, entries in configs.items():
        lines.append(f"  {json.dumps(name)}:")
        for entry in entries:
            devices = entry["devices"]
            shown = (
                json.dumps(devices)
                if isinstance(devices, str)
                else ("[" + ", ".join(str(d) for d in devices) + "]")
            )
            lines.append(f"    - devices: {shown}")
            lines.append(f"      mig-enabled: {'true' if entry['mig-enabled'] else 'false'}")
            if "mig-devices" in entry:
                lines.append("      mig-devices:" + ("" if entry["mig-devices"] else " {}"))
                for profile, count in entry["mig-devices"].items():
                    lines.append(f"        {json.dumps(profile)}: {count}")
    return "\n".join(lines) + "\n"


_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")


def config_name(node: str) -> str:
    """The mig-parted config name for a node, usable as the ``nvidia.com/mig.config`` label value.

    >>> config_name("gpu-a")
    'vfcore-gpu-a'
    """
    name = f"vfcore-{node}"
    if len(name) <= 63 and _LABEL_VALUE.match(name):
        return name
    digest = hashlib.sha256(node.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", node)[: 63 - len("vfcore--") - 10]
    readable = readable.strip("-_.")
    return f"vfcore-{readable}-{digest}" if readable else f"vfcore-{digest}"


# -- mix-mode planning --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MigUnplaced:
    """Why one pod has no place in a mix-mode plan (see :class:`vfcore.placement.plan.Unplaced`)."""

    pod: str
    kind: Literal["unresolvable", "unschedulable"]
    summary: str
    reasons: tuple[str, ...]
    fix: str | None


@dataclass(frozen=True, slots=True)
class MigIssue:
    """A mix-mode problem with its fix (becomes a :class:`vfcore.placement.plan.Problem`)."""

    code: str
    severity: Literal["error", "warning"]
    message: str
    hint: str


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
    unplaced: tuple[MigUnplaced, ...]
    issues: tuple[MigIssue, ...]


_NO_GPU = "node(s) had no GPUs"
_SINGLE = "node(s) used the single MIG strategy (one profile per node, as nvidia.com/gpu)"

CardState = Counts | None  # None: MIG disabled (a whole card)
BusyNodes = Literal["keep", "partition-idle-cards", "drain"]


@dataclass(slots=True)
class _Host:
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


def _is_gpu_resource(resource: str) -> bool:
    return resource == GPU_RESOURCE or resource.startswith(MIG_RESOURCE_PREFIX)


def _bound_gpu(node: NodeState) -> dict[str, int]:
    if node.requested is None:
        return {}
    return {r: u for r, u in node.requested if u > 0 and _is_gpu_resource(r)}


def _drained(node: NodeState) -> NodeState:
    """The node with its bound GPU pods gone (cpu and memory they hold stay held)."""
    if node.requested is None:
        return node
    kept = tuple((r, u) for r, u in node.requested if not _is_gpu_resource(r))
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
        return _Facts(None, False, _NO_GPU, True, None)
    family = mig_family(gpu.product, gpu.memory_mib)
    strategy = gpu.mig_strategy
    if strategy == "single":
        return _Facts(family, False, _SINGLE, False, _SINGLE)
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
    strangers = sorted((set(dict(gpu.mig_profiles)) | advertised) - set(family.names))
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
            return (facts.mig_reason or _NO_GPU,)
        demand = pod.gpu_memory_mib or 0
        if not _covers(facts.family, profiles[0], demand):
            return (f"node(s) had no {profiles[0]} with {demand / _GIB:g} GiB usable",)
        return ()
    if not facts.whole_ok and pod.request(GPU_RESOURCE):
        return (facts.whole_reason or _SINGLE,)
    return ()


def _analyse(index: int, node: NodeState, busy: BusyNodes = "keep") -> _Host:
    gpu = node.gpu
    facts = _facts(node)
    host = _Host(
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
        free={r: node.allocatable_of(r) - (node.requested_of(r) or 0) for r, _ in node.allocatable},
        free_pods=node.allocatable_of(PODS) - (node.requested_of(PODS) or 0),
    )
    if facts.hosts_mig and gpu is not None:
        advertised = {
            r[len(MIG_RESOURCE_PREFIX) :]: u
            for r, u in node.allocatable
            if r.startswith(MIG_RESOURCE_PREFIX) and u > 0
        }
        _attribute_cards(host, node, dict(gpu.mig_profiles), advertised, busy)
    return host


def _attribute_cards(
    host: _Host,
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
    union = _counts(labelled)
    table = _LAYOUTS[host.family.name]
    if mig_cards and any(r.startswith(MIG_RESOURCE_PREFIX) for r in bound):
        host.pool = {p: max(host.free.get(MIG_RESOURCE_PREFIX + p, 0), 0) for p, _ in union}
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
class _Group:
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


def _groups(pods: Sequence[PodRequest]) -> list[_Group]:
    buckets: dict[tuple[object, ...], list[PodRequest]] = {}
    for pod in pods:
        key = (pod.shape, pod.node) if pod.slice == "mig" else (pod.shape, None)
        buckets.setdefault(key, []).append(pod)
    for members in buckets.values():
        members.sort(key=lambda p: (p.node, p.replica, p.pod))
    ordered = sorted(buckets.values(), key=lambda g: g[0].pod)
    return [
        _Group(
            index=i,
            pods=g,
            requests=dict(g[0].requests),
            mig=g[0].slice == "mig",
            demand_mib=g[0].gpu_memory_mib or 0,
            flow_node=g[0].node,
        )
        for i, g in enumerate(ordered)
    ]


def _covers(family: MigFamily, profile: str, demand_mib: int) -> bool:
    p = family.profile(profile)
    return p is not None and not p.media_extensions and p.usable_mib >= demand_mib


def could_host(pod: PodRequest, node: NodeState) -> bool:
    """Could ``node`` ever hold ``pod`` in mix mode (after any re-partitioning of idle cards)?"""
    if static_reasons(pod, node):
        return False
    host = _analyse(0, _drained(node.as_empty()) if node.requested is None else _drained(node))
    if pod.slice == "mig":
        if not host.hosts_mig or host.family is None or not pod.gpu_memory_mib:
            return False
        return _choose(host.family, pod.gpu_memory_mib).resolvable and all(
            node.allocatable_of(r) >= u for r, u in pod.requests if not _is_gpu_resource(r)
        )
    if not host.whole_ok and pod.request(GPU_RESOURCE):
        return False
    for r, u in pod.requests:
        have = node.allocatable_of(r)
        if r == GPU_RESOURCE and host.touchable:
            have = max(have, host.cards)
        if have < u:
            return False
    return True


def pack_mix(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeState],
    *,
    config: SolverConfig | None = None,
    busy_nodes: BusyNodes = "keep",
) -> MixPacking:
    """Place pods in mix mode, exactly: MIG pods on MIG instances, whole-card pods on cards.

    Nodes are taken as they are (an unknown occupancy counts as nothing bound;
    :func:`vfcore.placement.plan.plan` brackets unknowns). A node with GPU pods bound is
    never re-partitioned (``busy_nodes="keep"``); to tell whether such nodes
    stand in the way, ``"partition-idle-cards"`` lets them partition their idle
    MIG-disabled cards, and ``"drain"`` plans as if their GPU pods were gone.

    How: (1) an aggregated CP-SAT model over node *types* (identical nodes
    merged) chooses each flow node's profile and how many cards of each type
    take each layout, minimising cards reconfigured, then nodes touched; it is a
    relaxation, so its infeasibility proves the pods do not fit and its bound
    is a lower bound. (2) The card changes are given to as few nodes as
    possible. (3) With the layouts fixed, :func:`vfcore.placement.packing.pack` places
    the pods exactly on what the nodes will advertise. If (2)–(3) fail, the
    per-node model decides (exact, slower).
    """
    cfg = config or SolverConfig()
    ordered = sorted(nodes, key=lambda n: n.name)
    hosts = [
        _analyse(i, _drained(n) if busy_nodes == "drain" else n, busy_nodes)
        for i, n in enumerate(ordered)
    ]
    groups = _groups(pods)
    candidates = _eligibility(groups, hosts)
    ctx = _Context(groups, hosts, candidates, _relevant_profiles(groups, hosts), cfg)
    if not pods:
        report = SolverReport("OPTIMAL", "bounds", objective=0.0)
        return _assemble(ctx, {}, [], {}, set(), PackingResult(True, (), (), report), 0)
    types = _node_types(ctx)
    proofs = tuple(
        f"the {g.count} pod(s) shaped like {g.pods[0].pod} have no node that can host them"
        for g in groups
        if not (g.pairs if g.mig else g.eligible)
    )
    if proofs:
        return _infeasible(ctx, types, proofs, None)
    agg = _MixModel(ctx, types).solve(require_all=True)
    if agg.status == "INFEASIBLE":
        proof = (
            "cp-sat proved it infeasible: the nodes' MIG and whole-card capacity cannot hold "
            "the pods even summed over identical nodes",
        )
        return _infeasible(ctx, types, proof, agg.report)
    if agg.status not in ("OPTIMAL", "FEASIBLE"):
        packing = PackingResult(None, (), tuple(sorted(p.pod for p in pods)), agg.report)
        return _assemble(ctx, _choices_of(ctx, types, agg), [], {}, set(), packing, None)
    profile_of = _choices_of(ctx, types, agg)
    quick = replace(
        cfg, optimize=False, max_deterministic_time=min(cfg.max_deterministic_time, 2.0)
    )
    last: PackingResult | None = None
    tried: set[tuple[tuple[int, int], ...]] = set()
    for widen in _WIDEN:
        widths = _widths(types, agg, widen)
        if widths in tried:
            continue
        tried.add(widths)
        cards_after, touched = _disaggregate(ctx, types, agg, dict(widths))
        realised_nodes = [
            _realised_node(h, cards_after.get(h.index), h.index in touched) for h in hosts
        ]
        realised_pods = [_realised_pod(p, profile_of) for g in groups for p in g.pods]
        placing = pack(realised_pods, realised_nodes, config=quick, extra_reasons=mix_reasons)
        last = placing
        if placing.feasible is True:
            report = _combined(agg, placing, widen)
            packing = PackingResult(True, placing.assignments, (), report)
            placed = _placed_from(ctx, placing.assignments, profile_of)
            return _assemble(
                ctx, profile_of, placed, cards_after, touched, packing, agg.lower_bound
            )
    singles = [[h] for t in types for h in t]
    full = _MixModel(ctx, singles).solve(require_all=True)
    if full.status in ("OPTIMAL", "FEASIBLE"):
        profile_of = _choices_of(ctx, singles, full)
        cards_after, touched = _disaggregate(ctx, singles, full)
        placed = _placed_from_counts(ctx, singles, full)
        report = replace(
            full.report,
            objective=float(sum(_changed(ctx, singles, full).values())),
            bound=float(max(agg.lower_bound or 0, full.lower_bound or 0)),
            notes=(*agg.report.notes, "per-node model (the aggregated layouts did not pack)"),
        )
        packing = PackingResult(
            True, tuple(sorted((p.pod, hosts[i].name) for p, i, _ in placed)), (), report
        )
        lower = max(agg.lower_bound or 0, full.lower_bound or 0)
        return _assemble(ctx, profile_of, placed, cards_after, touched, packing, lower)
    if full.status == "INFEASIBLE":
        return _infeasible(
            ctx, types, ("cp-sat proved it infeasible (per-node model)",), full.report
        )
    assert last is not None
    report = replace(full.report, notes=(*full.report.notes, "timed out: the verdict is unknown"))
    placed = _placed_from(ctx, last.assignments, profile_of)
    unplaced = tuple(sorted(p.pod for p in pods if p.pod not in dict(last.assignments)))
    packing = PackingResult(None, last.assignments, unplaced, report)
    cards_after, touched = _disaggregate(ctx, types, agg)
    return _assemble(ctx, profile_of, placed, cards_after, touched, packing, agg.lower_bound)


#: How far past the fewest nodes the card changes may spread when the pods do not fit
#: the nodes they touch (their cpu, memory or pod slots): +0, +1, +25 %, +50 %, every node.
_WIDEN: tuple[float, ...] = (0.0, 1e-9, 0.25, 0.5, float("inf"))


def _widths(units: list[list[int]], sol: _Solution, widen: float) -> tuple[tuple[int, int], ...]:
    out = []
    for u, members in enumerate(units):
        fewest = sol.touched_nodes.get(u, 0)
        if not fewest:
            continue
        if math.isinf(widen):
            wider = len(members)
        elif widen == 0:
            wider = fewest
        else:
            wider = max(fewest + 1, math.ceil(fewest * (1 + widen)))
        out.append((u, min(len(members), wider)))
    return tuple(out)


@dataclass(slots=True)
class _Context:
    groups: list[_Group]
    hosts: list[_Host]
    candidates: dict[str, tuple[str, ...]]
    relevant: dict[str, tuple[str, ...]]
    config: SolverConfig


def _infeasible(
    ctx: _Context,
    types: list[list[int]],
    proofs: tuple[str, ...],
    first: SolverReport | None,
) -> MixPacking:
    """Proven not to fit: place as many pods as the aggregated layouts allow, to explain the rest."""
    partial = _MixModel(ctx, types).solve(require_all=False)
    profile_of = _choices_of(ctx, types, partial)
    cards_after, touched = _disaggregate(ctx, types, partial)
    realised_nodes = [
        _realised_node(h, cards_after.get(h.index), h.index in touched) for h in ctx.hosts
    ]
    realised_pods = [_realised_pod(p, profile_of) for g in ctx.groups for p in g.pods]
    quick = replace(
        ctx.config,
        optimize=False,
        max_deterministic_time=min(ctx.config.max_deterministic_time, 5.0),
    )
    placing = pack(realised_pods, realised_nodes, config=quick, extra_reasons=mix_reasons)
    source = first or partial.report
    report = replace(
        source,
        status="INFEASIBLE",
        method="bounds" if first is None else "cp-sat",
        objective=None,
        bound=None,
        wall_s=source.wall_s + partial.report.wall_s + placing.report.wall_s,
        notes=(
            *source.notes,
            "partial placement: as many pods as possible, to explain the rest",
        ),
    )
    placed = _placed_from(ctx, placing.assignments, profile_of)
    names = dict(placing.assignments)
    unplaced = tuple(sorted(p.pod for g in ctx.groups for p in g.pods if p.pod not in names))
    packing = PackingResult(False, placing.assignments, unplaced, report, (), proofs)
    return _assemble(ctx, profile_of, placed, cards_after, touched, packing, None)


def _combined(agg: _Solution, placing: PackingResult, widen: float) -> SolverReport:
    notes = [
        *agg.report.notes,
        f"layouts: {agg.report.status} with {agg.cards_changed} card(s) reconfigured "
        f"(lower bound {agg.lower_bound})",
        f"pods placed on the planned layouts by {placing.report.method} ({placing.report.status})",
    ]
    if widen:
        notes.append(
            "card changes spread over more than the fewest nodes (on the fewest, the pods' "
            "cpu, memory or pod slots did not fit)"
        )
    return SolverReport(
        status=agg.report.status,
        method="cp-sat",
        objective=float(agg.cards_changed),
        bound=None if agg.lower_bound is None else float(agg.lower_bound),
        wall_s=agg.report.wall_s + placing.report.wall_s,
        deterministic=agg.report.deterministic and placing.report.deterministic,
        timed_out=agg.report.timed_out,
        variables=agg.report.variables + placing.report.variables,
        notes=tuple(notes),
    )


def _node_types(ctx: _Context) -> list[list[int]]:
    """Interchangeable nodes: same card states, free resources, eligibility (a block: alone)."""
    eligible_for: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for g in ctx.groups:
        for i in g.eligible:
            eligible_for[i].append((g.index, ""))
        for i, p in g.pairs:
            eligible_for[i].append((g.index, p))
    types: dict[tuple[object, ...], list[int]] = {}
    for host in ctx.hosts:
        if host.index not in eligible_for:
            continue
        key: tuple[object, ...] = (
            host.touchable,
            host.family.name if host.family else None,
            tuple(host.groups),
            tuple(sorted(host.pool.items())),
            host.cards,
            tuple(sorted(host.free.items())),
            host.free_pods,
            tuple(sorted(eligible_for[host.index])),
        )
        if host.block is not None:
            key = (host.index,)
        types.setdefault(key, []).append(host.index)
    return sorted(types.values(), key=lambda members: members[0])


def _eligibility(groups: list[_Group], hosts: list[_Host]) -> dict[str, tuple[str, ...]]:
    """Fill each group's eligible hosts / (host, profile) pairs; return each flow node's candidates."""
    candidates: dict[str, set[str]] = defaultdict(set)
    mig_hosts: dict[int, list[int]] = {}
    for g in groups:
        probe = g.pods[0]
        ok = [h.index for h in hosts if not static_reasons(probe, h.state)]
        if not g.mig:
            g.eligible = [i for i in ok if hosts[i].whole_ok or not g.requests.get(GPU_RESOURCE)]
            continue
        mig_hosts[g.index] = [i for i in ok if hosts[i].hosts_mig and g.demand_mib > 0]
        for i in mig_hosts[g.index]:
            family = hosts[i].family
            assert family is not None
            choice = _choose(family, g.demand_mib)
            if choice.profile is not None:
                candidates[g.flow_node].add(choice.profile.name)
    for g in groups:
        if not g.mig:
            continue
        names = sorted(candidates.get(g.flow_node, ()))
        for i in mig_hosts[g.index]:
            family = hosts[i].family
            assert family is not None
            g.pairs.extend((i, p) for p in names if _covers(family, p, g.demand_mib))
    return {f: tuple(sorted(c)) for f, c in sorted(candidates.items())}


def _relevant_profiles(groups: list[_Group], hosts: list[_Host]) -> dict[str, tuple[str, ...]]:
    """Per family, the profiles some pod could take there."""
    relevant: dict[str, set[str]] = defaultdict(set)
    for g in groups:
        for i, p in g.pairs:
            family = hosts[i].family
            assert family is not None
            relevant[family.name].add(p)
        for r in g.requests:
            if r.startswith(MIG_RESOURCE_PREFIX):
                for i in g.eligible:
                    family = hosts[i].family
                    name = r[len(MIG_RESOURCE_PREFIX) :]
                    if family is not None and family.profile(name) is not None:
                        relevant[family.name].add(name)
    return {f: tuple(sorted(ps)) for f, ps in relevant.items()}


@dataclass(slots=True)
class _Solution:
    status: Status
    x: dict[tuple[int, int, str | None], int]  # (group, unit, profile or None) -> pods
    rows: dict[int, list[tuple[int, CardState, int]]]  # unit -> [(card group | -1 block, state, n)]
    report: SolverReport
    lower_bound: int | None
    cards_changed: int = 0
    touched_nodes: dict[int, int] = field(default_factory=dict)  # unit -> nodes it touches


class _MixModel:
    """The CP-SAT model over *units* (a node type: identical nodes, or one node), in named steps.

    Per unit: pods of each group (and profile) it takes; how many of its cards
    keep their state or take each maximal layout; how many of its nodes it
    touches. With every unit a single node the model is exact; with identical
    nodes merged it is a relaxation (resources summed over the type).
    """

    def __init__(self, ctx: _Context, units: list[list[int]]) -> None:
        self.ctx = ctx
        self.groups = ctx.groups
        self.hosts = ctx.hosts
        self.units = units
        self.rep = [ctx.hosts[members[0]] for members in units]
        self.size = [len(members) for members in units]
        unit_of = {h: u for u, members in enumerate(units) for h in members}
        self.unit_of = unit_of
        self.options: dict[str, list[CardState]] = {
            name: [*maximal_layouts(MIG_FAMILIES[name], profiles), None]
            for name, profiles in sorted(ctx.relevant.items())
        }

    def _options_for(self, host: _Host) -> list[CardState]:
        assert host.family is not None
        return self.options.get(host.family.name, [None])

    def _upper(self, g: _Group, u: int) -> int:
        host, m = self.rep[u], self.size[u]
        best = min(g.count, m * max(host.free_pods, 0))
        for r, units in g.requests.items():
            if units <= 0 or (host.touchable and _is_gpu_resource(r)):
                continue
            best = min(best, m * (max(host.free.get(r, 0), 0) // units))
        return max(best, 0)

    def solve(self, *, require_all: bool) -> _Solution:
        try:
            from ortools.sat.python import cp_model
        except ImportError:  # pragma: no cover - depends on the installation
            raise InvalidInputError(
                "solver-not-installed",
                "planning MIG layouts needs OR-Tools CP-SAT, which is not installed",
                "pip install 'vfcore[solver]'",
            ) from None

        self.model = cp_model.CpModel()
        self._add_pod_counts(require_all)
        self._add_profile_choice()
        self._add_card_layouts()
        self._add_capacity()
        self._add_symmetry_breaking()
        self._add_objective(require_all)

        solver = cp_model.CpSolver()
        cfg = self.ctx.config
        solver.parameters.catch_sigint_signal = False  # Ctrl-C is the caller's (see packing)
        solver.parameters.num_workers = cfg.num_workers
        solver.parameters.random_seed = cfg.random_seed
        solver.parameters.max_deterministic_time = (
            cfg.max_deterministic_time if require_all else min(cfg.max_deterministic_time, 5.0)
        )
        if cfg.max_time_s is not None:
            solver.parameters.max_time_in_seconds = cfg.max_time_s
        code = solver.solve(self.model)
        status: Status = solver.status_name(code)  # type: ignore[assignment]
        found = code in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        x: dict[tuple[int, int, str | None], int] = {}
        cards: dict[int, list[tuple[int, CardState, int]]] = defaultdict(list)
        lower: int | None = None
        changed = 0
        touched_nodes: dict[int, int] = {}
        if found:
            for key, var in self.x.items():
                v = solver.value(var)
                if v:
                    x[key] = v
            for (u, gi, option), var in self.n.items():
                v = solver.value(var)
                if v:
                    cards[u].append((gi, option, v))
            changed = sum(solver.value(r) for r in self.reconf.values())
            touched_nodes = {u: solver.value(t) for u, t in self.touched.items()}
            if require_all:
                lower = changed
                if self.has_objective:
                    lower = max(0, int(solver.best_objective_bound + 1e-6) // self.big)
        objective = solver.objective_value if found and self.has_objective else None
        touchable = sum(self.size[u] for u in range(len(self.units)) if self.rep[u].touchable)
        report = SolverReport(
            status=status,
            method="cp-sat",
            objective=objective,
            bound=solver.best_objective_bound if found and self.has_objective else None,
            wall_s=solver.wall_time,
            deterministic=cfg.is_deterministic,
            timed_out=code == cp_model.UNKNOWN,
            variables=len(self.x) + len(self.n) + len(self.touched) + len(self.keep_block),
            notes=(
                f"mix model: {sum(self.size)} node(s) in {len(self.units)} type(s), "
                f"{touchable} re-partitionable; {sum(len(v) - 1 for v in self.options.values())} "
                "maximal card layout(s)",
            ),
        )
        return _Solution(status, x, dict(cards), report, lower, changed, touched_nodes)

    def _add_pod_counts(self, require_all: bool) -> None:
        m = self.model
        self.x: dict[tuple[int, int, str | None], Any] = {}
        self.placed: list[Any] = []
        for g in self.groups:
            keys: dict[tuple[int, str | None], None] = {}
            if g.mig:
                for i, p in g.pairs:
                    keys[self.unit_of[i], p] = None
            else:
                for i in g.eligible:
                    keys[self.unit_of[i], None] = None
            terms = []
            for u, prof in keys:
                ub = self._upper(g, u)
                if ub > 0:
                    var = m.new_int_var(0, ub, f"count[{g.index},{u},{prof or '-'}]")
                    self.x[g.index, u, prof] = var
                    terms.append(var)
            if require_all:
                m.add(sum(terms) == g.count)
            else:
                m.add(sum(terms) <= g.count)
            self.placed.extend(terms)

    def _add_profile_choice(self) -> None:
        """Replicas of one flow node share a pod template: one profile per flow node."""
        m = self.model
        self.use: dict[tuple[str, str], Any] = {}
        for flow_node, names in self.ctx.candidates.items():
            if len(names) < 2:
                continue
            for name in names:
                self.use[flow_node, name] = m.new_bool_var(f"use[{flow_node},{name}]")
            m.add_exactly_one(self.use[flow_node, name] for name in names)
        for (g, _u, p), var in self.x.items():
            group = self.groups[g]
            if group.mig and p is not None and (group.flow_node, p) in self.use:
                m.add(var <= group.count * self.use[group.flow_node, p])

    def _add_card_layouts(self) -> None:
        """Each card of a re-partitionable node keeps its state or takes one layout."""
        m = self.model
        self.n: dict[tuple[int, int, CardState], Any] = {}
        self.keep_block: dict[int, Any] = {}
        self.touched: dict[int, Any] = {}
        self.reconf: dict[int, Any] = {}
        self.relaid: list[Any] = []  # changes to cards that already have a MIG layout
        active = {u for (_g, u, _p) in self.x}
        for u in sorted(active):
            host, size = self.rep[u], self.size[u]
            if not host.touchable:
                continue
            options = self._options_for(host)
            changed_all: list[Any] = []
            touched = m.new_int_var(0, size, f"touched[{u}]")
            for gi, (state, count) in enumerate(host.groups):
                choices = options if state in options else [*options, state]
                terms, changed = [], []
                for option in choices:
                    var = m.new_int_var(0, size * count, f"cards[{u},{gi},{_label(option)}]")
                    self.n[u, gi, option] = var
                    terms.append(var)
                    if option != state:
                        changed.append(var)
                m.add(sum(terms) == size * count)
                m.add(sum(changed) <= count * touched)  # a node changes at most its own cards
                changed_all += changed
                if state is not None:
                    self.relaid += changed
            if host.block is not None:  # a block is never merged: size is 1
                _union, count = host.block
                keep = m.new_bool_var(f"keep_block[{u}]")
                self.keep_block[u] = keep
                terms = []
                for option in options:
                    var = m.new_int_var(0, count, f"cards[{u},-1,{_label(option)}]")
                    self.n[u, -1, option] = var
                    terms.append(var)
                changed_all += terms
                self.relaid += terms
                m.add(sum(terms) + count * keep == count)
                m.add(keep + touched <= 1)  # a touched node is re-laid entirely
            reconf = m.new_int_var(0, size * host.cards, f"reconfigured[{u}]")
            m.add(reconf == sum(changed_all))
            m.add(touched <= reconf)
            self.touched[u] = touched
            self.reconf[u] = reconf

    def _capacity(self, u: int, resource: str) -> Any:
        host, size = self.rep[u], self.size[u]
        if not (host.touchable and _is_gpu_resource(resource)):
            return size * max(host.free.get(resource, 0), 0)
        terms: list[Any] = []
        if resource == GPU_RESOURCE:
            for (uu, _gi, option), var in self.n.items():
                if uu == u and option is None:
                    terms.append(var)
            return sum(terms)
        profile = resource[len(MIG_RESOURCE_PREFIX) :]
        for (uu, _gi, option), var in self.n.items():
            if uu == u and option:
                c = dict(option).get(profile, 0)
                if c:
                    terms.append(c * var)
        if host.block is not None and u in self.keep_block:
            c = dict(host.block[0]).get(profile, 0)
            if c:
                terms.append(c * self.keep_block[u])
        return sum(terms) + size * host.pool.get(profile, 0)

    def _add_capacity(self) -> None:
        """Per unit: every resource, the pod limit; MIG pods draw on their profile's instances."""
        m = self.model
        demand: dict[tuple[int, str], list[Any]] = defaultdict(list)
        count: dict[int, list[Any]] = defaultdict(list)
        for (g, u, p), var in self.x.items():
            group = self.groups[g]
            count[u].append(var)
            for r, units in group.requests.items():
                demand[u, r].append(units * var)
            if group.mig and p is not None:
                demand[u, MIG_RESOURCE_PREFIX + p].append(var)
        for (u, r), terms in sorted(demand.items()):
            m.add(sum(terms) <= self._capacity(u, r))
        for u, terms in sorted(count.items()):
            m.add(sum(terms) <= self.size[u] * max(self.rep[u].free_pods, 0))
        self.load = {u: sum(terms) for u, terms in count.items()}
        self._add_mig_pods_on_touched_nodes()

    def _add_mig_pods_on_touched_nodes(self) -> None:
        """On a type whose cards are all MIG-disabled, MIG pods run only on the nodes it touches.

        A valid cut for merged nodes: their cpu, memory and pod slots are
        ``touched × free``, not the type's total. It makes the aggregated model
        touch enough nodes for the pods' other resources, not just their cards.
        """
        m = self.model
        for u, touched in sorted(self.touched.items()):
            host = self.rep[u]
            if host.block is not None or host.pool or any(s is not None for s, _ in host.groups):
                continue
            demand: dict[str, list[Any]] = defaultdict(list)
            for (g, uu, p), var in self.x.items():
                group = self.groups[g]
                if uu != u or not group.mig or p is None:
                    continue
                demand[PODS].append(var)
                for r, units in group.requests.items():
                    if units > 0 and not _is_gpu_resource(r):
                        demand[r].append(units * var)
            for r, terms in sorted(demand.items()):
                free = host.free_pods if r == PODS else host.free.get(r, 0)
                m.add(sum(terms) <= max(free, 0) * touched)

    def _add_symmetry_breaking(self) -> None:
        """Identical single-node units are interchangeable: order them by (cards changed, pods)."""
        m = self.model
        scale = max((h.free_pods for h in self.hosts), default=0) + 1
        signature: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for g, u, p in self.x:
            signature[u].append((g, p or ""))
        types: dict[tuple[object, ...], list[int]] = defaultdict(list)
        for u in sorted(self.load):
            host = self.rep[u]
            if self.size[u] != 1 or host.block is not None:
                continue
            key = (
                host.touchable,
                host.family.name if host.family else None,
                tuple(host.groups),
                tuple(sorted(host.pool.items())),
                tuple(sorted(host.free.items())),
                host.free_pods,
                tuple(sorted(signature[u])),
            )
            types[key].append(u)
        for members in types.values():
            for a, b in itertools.pairwise(members):
                load_a, load_b = self.load[a], self.load[b]
                if a in self.reconf and b in self.reconf:
                    m.add(scale * self.reconf[a] + load_a >= scale * self.reconf[b] + load_b)
                else:
                    m.add(load_a >= load_b)

    def _add_objective(self, require_all: bool) -> None:
        """Fewest cards reconfigured, then fewest nodes touched, then fewest existing layouts
        changed (partial: most pods first).

        ``big`` weighs one card above any number of nodes and layouts, so the
        proven bound on cards is ``floor(bound / big)``.
        """
        cards = sum(self.size[u] * self.rep[u].cards for u in self.touched)
        self.nodes_weight = cards + 1
        self.big = self.nodes_weight * (sum(self.size[u] for u in self.touched) + 1)
        wipe = (
            self.big * sum(self.reconf.values())
            + self.nodes_weight * sum(self.touched.values())
            + sum(self.relaid)
        )
        self.has_objective = bool(self.touched) and self.ctx.config.optimize
        if require_all:
            if self.has_objective:
                self.model.minimize(wipe)
            return
        self.has_objective = True
        weight = self.big * (cards + 1)
        self.model.maximize(weight * sum(self.placed) - wipe)


def _label(option: CardState) -> str:
    if option is None:
        return "whole"
    return "+".join(f"{c}x{p}" for p, c in option) or "empty"


def _key_order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(("", "") if k is None else (type(k).__name__, k) for k in key)


# -- from a solution to a plan --------------------------------------------------------------------


def _choices_of(ctx: _Context, units: list[list[int]], sol: _Solution) -> dict[str, str]:
    """Each MIG flow node's profile: the one its counted pods use, else its first candidate."""
    out: dict[str, str] = {}
    for (g, _u, p), n in sorted(sol.x.items(), key=lambda kv: _key_order(kv[0])):
        if p is not None and n:
            out.setdefault(ctx.groups[g].flow_node, p)
    for flow_node, names in sorted(ctx.candidates.items()):
        if names:
            out.setdefault(flow_node, names[0])
    return out


def _changed(ctx: _Context, units: list[list[int]], sol: _Solution) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for u, rows in sol.rows.items():
        rep = ctx.hosts[units[u][0]]
        for gi, option, n in rows:
            if gi == -1 or option != rep.groups[gi][0]:
                out[u] += n
    return dict(out)


def _disaggregate(
    ctx: _Context,
    units: list[list[int]],
    sol: _Solution,
    widths: Mapping[int, int] | None = None,
) -> tuple[dict[int, list[tuple[CardState | str, CardState]]], set[int]]:
    """Give each unit's card changes to its nodes, round-robin, each layout evenly.

    Over the last ``widths[u]`` nodes of the type (default: as many as the
    model says it touches, the fewest). Returns, per touched node, every card
    as (state before, state after) in index order (see :func:`_host_cards`),
    and the set of touched nodes.
    """
    cards_after: dict[int, list[tuple[CardState | str, CardState]]] = {}
    touched: set[int] = set()
    for u, members in enumerate(units):
        rep = ctx.hosts[members[0]]
        if not rep.touchable:
            continue
        per_group: dict[int, list[CardState]] = defaultdict(list)
        for gi, option, n in sorted(sol.rows.get(u, ()), key=lambda t: (t[0], _label(t[1]))):
            if gi == -1 or option != rep.groups[gi][0]:
                per_group[gi].extend([option] * n)
        assigned: dict[int, dict[int, list[CardState]]] = defaultdict(lambda: defaultdict(list))
        count = (widths or {}).get(u) or sol.touched_nodes.get(u) or len(members)
        chosen = members[len(members) - min(count, len(members)) :]
        cursor = 0
        for gi, changes in sorted(per_group.items()):
            for option in changes:  # a node gets at most ceil(changes / T) <= its own cards
                assigned[chosen[cursor % len(chosen)]][gi].append(option)
                cursor += 1
        for h, mine in sorted(assigned.items()):
            touched.add(h)
            cards_after[h] = _host_cards(ctx.hosts[h], mine)
    return cards_after, touched


def _host_cards(
    host: _Host, changed: Mapping[int, list[CardState]]
) -> list[tuple[CardState | str, CardState]]:
    """Every card of a touched node as (before, after), in the order the config numbers them.

    MIG-enabled cards first (those attributed a layout, then the unattributed
    block, marked ``"?"``), then MIG-disabled ones; within each, reconfigured
    cards before kept ones.
    """
    sections: list[tuple[int, CardState | str, int]] = [
        (gi, state, count) for gi, (state, count) in enumerate(host.groups) if state is not None
    ]
    if host.block is not None:
        sections.append((-1, "?", host.block[1]))
    sections += [
        (gi, None, count) for gi, (state, count) in enumerate(host.groups) if state is None
    ]
    out: list[tuple[CardState | str, CardState]] = []
    for gi, before, count in sections:
        mine = sorted(changed.get(gi, ()), key=_label)
        out.extend((before, option) for option in mine)
        kept = count - len(mine)
        if kept and before != "?":
            out.extend([(before, before)] * kept)  # type: ignore[list-item]
    return out


def _placed_from(
    ctx: _Context, assignments: Iterable[tuple[str, str]], profile_of: Mapping[str, str]
) -> list[tuple[PodRequest, int, str | None]]:
    index = {h.name: h.index for h in ctx.hosts}
    pods = {p.pod: p for g in ctx.groups for p in g.pods}
    out = []
    for pod_name, node_name in sorted(assignments):
        pod = pods[pod_name]
        out.append(
            (pod, index[node_name], profile_of.get(pod.node) if pod.slice == "mig" else None)
        )
    return out


def _placed_from_counts(
    ctx: _Context, units: list[list[int]], sol: _Solution
) -> list[tuple[PodRequest, int, str | None]]:
    out = []
    for g in ctx.groups:
        targets = sorted(
            (ctx.hosts[units[u][0]].name, units[u][0], p or "")
            for (gg, u, p), n in sol.x.items()
            if gg == g.index
            for _ in range(n)
        )
        for pod, (_name, h, p) in zip(g.pods, targets, strict=False):
            out.append((pod, h, p or None))
    return out


def _assemble(
    ctx: _Context,
    profile_of: Mapping[str, str],
    placed: list[tuple[PodRequest, int, str | None]],
    cards_after: Mapping[int, list[tuple[CardState | str, CardState]]],
    touched: set[int],
    packing: PackingResult,
    lower: int | None,
) -> MixPacking:
    hosts = ctx.hosts
    card_plans = _card_plans(hosts, cards_after, touched, placed)
    realised_nodes = tuple(
        _realised_node(h, cards_after.get(h.index), h.index in touched) for h in hosts
    )
    realised_pods = tuple(
        sorted(
            (_realised_pod(p, profile_of) for g in ctx.groups for p in g.pods),
            key=lambda p: p.pod,
        )
    )
    by_pod = {p.pod: p for p in realised_pods}
    plan = _mig_plan(ctx, card_plans, placed, profile_of, lower, touched)
    unplaced = _explain(ctx, realised_nodes, by_pod, placed, packing.unplaced, profile_of)
    return MixPacking(
        packing=packing,
        pods=realised_pods,
        nodes=realised_nodes,
        mig=plan,
        unplaced=unplaced,
        issues=_plan_issues(ctx, plan, profile_of),
    )


def _card_plans(
    hosts: Sequence[_Host],
    cards_after: Mapping[int, list[tuple[CardState | str, CardState]]],
    touched: set[int],
    placed: list[tuple[PodRequest, int, str | None]],
) -> dict[int, tuple[MigCard, ...]]:
    plans: dict[int, tuple[MigCard, ...]] = {}
    for h in sorted(touched):
        host = hosts[h]
        assert host.family is not None
        mig_pods = sorted((pod.pod, p) for pod, i, p in placed if i == h and p is not None)
        whole_pods = sorted(
            (pod.pod, pod.request(GPU_RESOURCE))
            for pod, i, p in placed
            if i == h and p is None and pod.request(GPU_RESOURCE)
        )
        cards: list[dict[str, Any]] = []
        for index, (before, after) in enumerate(cards_after[h]):
            if after is None:
                action: CardAction = "keep" if before is None else "disable"
                cards.append({"index": index, "action": action, "instances": [], "order": ()})
                continue
            if before == after:
                instances = [[name, None, None] for name, c in after for _ in range(c)]
                cards.append(
                    {"index": index, "action": "keep", "instances": instances, "order": ()}
                )
                continue
            fit = fit_layout(host.family, dict(after))
            assert fit.placements is not None and fit.creation_order is not None
            cards.append(
                {
                    "index": index,
                    "action": "partition" if before is None else "repartition",
                    "instances": [[pl.profile, pl.start, None] for pl in fit.placements],
                    "order": fit.creation_order,
                }
            )
        for pod_name, p in mig_pods:  # one working mapping; the device plugin picks its own
            slot = next(
                (
                    inst
                    for c in cards
                    for inst in c["instances"]
                    if inst[0] == p and inst[2] is None
                ),
                None,
            )
            if slot is not None:
                slot[2] = pod_name
        whole_cards = [c for c in cards if cards_after[h][c["index"]][1] is None]
        cursor = 0
        for pod_name, k in whole_pods:
            for c in whole_cards[cursor : cursor + k]:
                c.setdefault("pods", []).append(pod_name)
            cursor += k
        plans[h] = tuple(
            MigCard(
                index=c["index"],
                action=c["action"],
                mig_enabled=cards_after[h][c["index"]][1] is not None,
                instances=tuple(MigInstance(n, s, pod) for n, s, pod in c["instances"]),
                creation_order=c["order"],
                pods=tuple(c.get("pods", ())),
            )
            for c in cards
        )
    return plans


def _realised_node(
    host: _Host, cards: list[tuple[CardState | str, CardState]] | None, touched: bool
) -> NodeState:
    node = host.state
    if not touched or cards is None:
        return node
    whole = sum(1 for _, after in cards if after is None)
    instances: dict[str, int] = defaultdict(int)
    for _, after in cards:
        for p, c in after or ():
            instances[p] += c
    alloc = {r: u for r, u in node.allocatable if not _is_gpu_resource(r)}
    if whole:
        alloc[GPU_RESOURCE] = whole
    for p, c in instances.items():
        alloc[MIG_RESOURCE_PREFIX + p] = c
    gpu = node.gpu
    if gpu is not None:
        gpu = replace(gpu, mig_profiles=tuple(sorted(instances.items())))
    return replace(node, allocatable=tuple(sorted(alloc.items())), gpu=gpu)


def _realised_pod(pod: PodRequest, profile_of: Mapping[str, str]) -> PodRequest:
    if pod.slice != "mig" or pod.node not in profile_of:
        return pod
    requests = dict(pod.requests)
    requests[MIG_RESOURCE_PREFIX + profile_of[pod.node]] = 1
    return replace(pod, requests=tuple(sorted(requests.items())))


def _mig_plan(
    model: _Context,
    card_plans: Mapping[int, tuple[MigCard, ...]],
    placed: list[tuple[PodRequest, int, str | None]],
    profile_of: Mapping[str, str],
    lower: int | None,
    touched: set[int],
) -> MigPlan:
    hosts = model.hosts
    nodes: list[MigNodePlan] = []
    pool_pods: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for pod, i, p in placed:
        if p is not None and i not in touched:
            pool_pods[i].append((pod.pod, p))
    for host in hosts:
        h = host.index
        family = host.family.name if host.family else None
        if h in touched:
            kinds = {before is None for before, _ in _cards_before(host)}
            nodes.append(
                MigNodePlan(
                    node=host.name,
                    family=family,
                    touched=True,
                    config_name=config_name(host.name),
                    indices_assumed=len(kinds) > 1 or host.block is not None,
                    cards=card_plans[h],
                )
            )
        elif pool_pods.get(h):
            pool = tuple(
                sorted(
                    (r[len(MIG_RESOURCE_PREFIX) :], u)
                    for r, u in host.free.items()
                    if r.startswith(MIG_RESOURCE_PREFIX) and u > 0
                )
            )
            nodes.append(
                MigNodePlan(
                    node=host.name,
                    family=family,
                    touched=False,
                    pool=pool,
                    pool_pods=tuple(sorted(pool_pods[h])),
                    note=None if host.touchable else host.touch_reason,
                )
            )
    choices: list[tuple[str, ProfileChoice]] = []
    families = sorted({h.family.name for h in hosts if h.hosts_mig and h.family is not None})
    seen: set[str] = set()
    for g in model.groups:
        if not g.mig or g.flow_node in seen or not g.demand_mib:
            continue
        seen.add(g.flow_node)
        choices.extend((g.flow_node, _choose(MIG_FAMILIES[f], g.demand_mib)) for f in families)
    resources = tuple(sorted((f, MIG_RESOURCE_PREFIX + p) for f, p in profile_of.items()))
    pod_resources = tuple(
        sorted(
            (pod.pod, MIG_RESOURCE_PREFIX + profile_of[pod.node])
            for g in model.groups
            if g.mig
            for pod in g.pods
            if pod.node in profile_of
        )
    )
    reconfigured = sum(n.cards_reconfigured for n in nodes)
    notes = []
    if any(hosts[h].family is not None and hosts[h].family.starts_inferred for h in touched):  # type: ignore[union-attr]
        notes.append(
            "H200 start slots are inferred from the GH100 layout: confirm them with "
            "`nvidia-smi mig -lgipp` on the node before applying"
        )
    if any(n.indices_assumed for n in nodes):
        notes.append(
            "card indices on nodes marked indices_assumed: kubectl does not say which card is "
            "MIG-enabled; the config assumes the MIG-enabled cards have the lowest indices"
        )
    return MigPlan(
        nodes=tuple(nodes),
        resources=resources,
        pod_resources=pod_resources,
        choices=tuple(choices),
        cards_reconfigured=reconfigured,
        nodes_touched=len(touched),
        cards_lower_bound=lower,
        notes=tuple(notes),
    )


def _cards_before(host: _Host) -> list[tuple[CardState | str, int]]:
    out: list[tuple[CardState | str, int]] = [(s, c) for s, c in host.groups]
    if host.block is not None:
        out.append(("?", host.block[1]))
    return out


# -- explaining what did not fit --------------------------------------------------------------


def _explain(
    model: _Context,
    realised: Sequence[NodeState],
    by_pod: Mapping[str, PodRequest],
    placed: list[tuple[PodRequest, int, str | None]],
    unplaced: Sequence[str],
    profile_of: Mapping[str, str],
) -> tuple[MigUnplaced, ...]:
    hosts = model.hosts
    load: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod, i, _p in placed:
        for r, u in by_pod[pod.pod].requests:
            load[i][r] += u
        load[i][PODS] += 1
    out = []
    for name in unplaced:
        pod = by_pod[name]
        per_node = []
        ever = False
        for host in hosts:
            reasons, could = _reasons(pod, host, realised[host.index], load[host.index], profile_of)
            per_node.append(reasons)
            ever = ever or could
        fix = _fix(pod, hosts, ever, profile_of)
        out.append(
            MigUnplaced(
                pod=name,
                kind="unschedulable" if ever else "unresolvable",
                summary=summarise(name, len(hosts), per_node),
                reasons=tuple(sorted({r for rs in per_node for r in rs})),
                fix=fix,
            )
        )
    return tuple(out)


def _reasons(
    pod: PodRequest,
    host: _Host,
    realised: NodeState,
    extra: Mapping[str, int],
    profile_of: Mapping[str, str],
) -> tuple[tuple[str, ...], bool]:
    """Why ``pod`` is not on ``host`` now, and whether the host could ever hold it."""
    static = static_reasons(pod, host.state)
    if static:
        return static, False
    reasons: list[str] = []
    if pod.slice == "mig":
        if not host.hosts_mig or host.family is None:
            return (host.mig_reason or _NO_GPU,), False
        demand = pod.gpu_memory_mib or 0
        choice = _choose(host.family, demand)
        if choice.profile is None:
            return (
                f"node(s) had no MIG profile with {demand / _GIB:g} GiB usable "
                f"(largest: {choice.largest.name}, {choice.largest.usable_gib:g} GiB)",
            ), False
        p = profile_of.get(pod.node)
        if p is not None and not _covers(host.family, p, demand):
            reasons.append(f"node(s) had no {p} with {demand / _GIB:g} GiB usable")
        elif not host.touchable and p is not None:
            resource = MIG_RESOURCE_PREFIX + p
            free = (
                realised.allocatable_of(resource)
                - (realised.requested_of(resource) or 0)
                - extra.get(resource, 0)
            )
            if free < 1:
                reasons.append("node(s) had cards in use (not re-partitioned)")
    elif not host.whole_ok and pod.request(GPU_RESOURCE):
        return (host.whole_reason or _SINGLE,), False
    used_pods = (realised.requested_of(PODS) or 0) + extra.get(PODS, 0)
    if used_pods + 1 > realised.allocatable_of(PODS):
        reasons.append("Too many pods")
    for r, u in pod.requests:
        free = realised.allocatable_of(r) - (realised.requested_of(r) or 0) - extra.get(r, 0)
        if u > free:
            reasons.append(f"Insufficient {r}")
    return tuple(reasons), could_host(pod, host.state)


def _fix(
    pod: PodRequest, hosts: Sequence[_Host], ever: bool, profile_of: Mapping[str, str]
) -> str | None:
    eligible = [h for h in hosts if not static_reasons(pod, h.state)]
    if pod.slice == "mig":
        mig_hosts = [h for h in eligible if h.hosts_mig and h.family is not None]
        if not eligible:
            return f"no node is eligible for {pod.pod}: fix its selector/tolerations or the nodes' labels"
        if not mig_hosts:
            return (
                "no eligible node can host MIG slices: run the device plugin with the mixed MIG "
                "strategy (migStrategy=mixed) on MIG-capable nodes, or give "
                f"{pod.node} whole cards (gpu_count, no gpu_memory_gib)"
            )
        if not ever:
            best = max(
                ((_choose(h.family, 1).largest, h.family.name) for h in mig_hosts if h.family),
                key=lambda t: (t[0].usable_mib, t[1]),
            )
            return (
                f"lower {pod.node}'s gpu_memory_gib to at most {best[0].usable_gib:g} "
                f"({best[0].name} on {best[1]} has that much usable), or give it a whole card "
                "(gpu_count without gpu_memory_gib)"
            )
        busy = sorted(h.name for h in mig_hosts if not h.touchable and h.touch_reason)
        if busy:
            shown = ", ".join(busy[:3]) + ("…" if len(busy) > 3 else "")
            return (
                f"cards on {shown} are not re-partitioned while GPU pods are bound there; "
                "drain them (so their cards are idle) or add an idle MIG-capable node"
            )
        return None
    if not ever:
        if not eligible:
            return f"no node is eligible for {pod.pod}: fix its selector/tolerations or the nodes' labels"
        return (
            f"{pod.pod} needs {', '.join(f'{u} {r}' for r, u in pod.requests if _is_gpu_resource(r))} "
            "on one node: no node can ever hold it; use fewer GPUs per replica or add a larger node"
        )
    return None


def _plan_issues(
    model: _Context, plan: MigPlan, profile_of: Mapping[str, str]
) -> tuple[MigIssue, ...]:
    out: list[MigIssue] = []
    h200 = [
        n.node
        for n in plan.nodes
        if n.touched and n.family is not None and MIG_FAMILIES[n.family].starts_inferred
    ]
    if h200:
        out.append(
            MigIssue(
                "mig-starts-inferred",
                "warning",
                f"the plan re-partitions cards of {len(h200)} H200 node(s) ({', '.join(h200[:4])}"
                f"{'…' if len(h200) > 4 else ''}); H200 start slots are inferred from the GH100 "
                "layout, not read from an H200",
                "run `nvidia-smi mig -lgipp` on one of them and compare with docs/mig.md "
                "before applying the mig-parted config",
            )
        )
    assumed = [n.node for n in plan.nodes if n.indices_assumed]
    if assumed:
        out.append(
            MigIssue(
                "mig-card-indices-assumed",
                "warning",
                f"{len(assumed)} node(s) ({', '.join(assumed[:4])}{'…' if len(assumed) > 4 else ''}) "
                "have MIG-enabled and MIG-disabled cards today, and kubectl does not say which "
                "index is which; their mig-parted configs assume the MIG-enabled cards come first",
                "check with `nvidia-smi --query-gpu=index,mig.mode.current --format=csv` on each "
                "and renumber the configs' devices if needed (the nodes are idle, so a wrong "
                "guess wipes only idle cards, but may reconfigure more than planned)",
            )
        )
    for flow_node, p in sorted(profile_of.items()):
        demand = max(
            (g.demand_mib for g in model.groups if g.mig and g.flow_node == flow_node), default=0
        )
        probe = next(g.pods[0] for g in model.groups if g.mig and g.flow_node == flow_node)
        short = sorted(
            h.name
            for h in model.hosts
            if h.hosts_mig
            and h.family is not None
            and h.family.profile(p) is not None
            and not _covers(h.family, p, demand)
            and not static_reasons(probe, h.state)
        )
        if short:
            out.append(
                MigIssue(
                    "mig-profile-ambiguous",
                    "warning",
                    f"{flow_node} requests {MIG_RESOURCE_PREFIX}{p} for {demand / _GIB:g} GiB, but "
                    f"on {', '.join(short[:4])}{'…' if len(short) > 4 else ''} that profile has "
                    "less usable memory; kube-scheduler may place its pods there",
                    f"add a node selector on nvidia.com/gpu.product for {flow_node}, or raise its "
                    "gpu_memory_gib to the next profile",
                )
            )
    return tuple(out)


def advertisable(nodes: Iterable[NodeState]) -> set[str]:
    """Resources some node could advertise once its idle cards are (re)partitioned.

    ``nvidia.com/gpu`` on a re-partitionable node with cards, and every
    profile of its family as ``nvidia.com/mig-<profile>``.
    """
    out: set[str] = set()
    for i, n in enumerate(nodes):
        host = _analyse(i, n)
        if host.touchable and host.family is not None and host.cards:
            out.add(GPU_RESOURCE)
            out |= {p.resource for p in host.family.profiles}
    return out


def mix_issues(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeState],
    *,
    unplaced: Iterable[str] | None = None,
) -> tuple[MigIssue, ...]:
    """Problems of a mix-mode flow on a cluster that need no solver, each with its fix.

    ``mig-multi-gpu`` (a multi-GPU pod cannot use MIG slices; given
    ``unplaced``, only for flow nodes with an unplaced pod),
    ``mig-single-strategy`` (a single-strategy pool cannot host mixed profiles),
    ``mig-demand-unresolvable`` (no card of the cluster can host a demand).
    """
    left = None if unplaced is None else set(unplaced)
    pods = sorted(pods, key=lambda p: (p.node, p.replica, p.pod))
    out: list[MigIssue] = []
    hosts = [_analyse(i, n) for i, n in enumerate(sorted(nodes, key=lambda n: n.name))]
    mig_pods = [p for p in pods if p.slice == "mig"]
    has_mig_cards = any(
        h.state.gpu is not None
        and (h.state.gpu.mig_capable or h.state.gpu.mig_strategy in ("mixed", "single"))
        for h in hosts
    )
    seen: set[str] = set()
    for pod in pods:
        k = pod.request(GPU_RESOURCE)
        relevant = left is None or any(p.pod in left for p in pods if p.node == pod.node)
        if k > 1 and has_mig_cards and pod.node not in seen and relevant:
            seen.add(pod.node)
            out.append(
                MigIssue(
                    "mig-multi-gpu",
                    "warning",
                    f"{pod.node} needs {k} GPUs per pod: a process cannot combine MIG slices, "
                    f"so each pod takes {k} whole MIG-disabled cards on one node "
                    "(nvidia.com/gpu), which partitioned cards cannot provide",
                    f"leave {k} cards of a node unpartitioned per replica, or fit the model "
                    "on one card and declare gpu_memory_gib instead of gpu_count",
                )
            )
    single = [
        h.name for h in hosts if h.state.gpu is not None and h.state.gpu.mig_strategy == "single"
    ]
    if single and any(p.slice in ("mig", "whole") for p in pods):
        mixed_exists = any(h.hosts_mig for h in hosts)
        out.append(
            MigIssue(
                "mig-single-strategy",
                "error" if mig_pods and not mixed_exists else "warning",
                f"{len(single)} node(s) ({', '.join(single[:4])}{'…' if len(single) > 4 else ''}) "
                "use the device plugin's single MIG strategy: each advertises one profile as "
                "nvidia.com/gpu, so it cannot host mixed profiles, and a whole-card pod there "
                "would get a MIG device; mix mode plans nothing on them",
                "switch them to the mixed strategy (device plugin migStrategy=mixed, or the GPU "
                "Operator's mig.strategy=mixed) to use them in mix mode",
            )
        )
    families = {h.family.name: h.family for h in hosts if h.hosts_mig and h.family is not None}
    flow_nodes: dict[str, int] = {}
    for pod in mig_pods:
        flow_nodes[pod.node] = max(flow_nodes.get(pod.node, 0), pod.gpu_memory_mib or 0)
    for flow_node, demand in sorted(flow_nodes.items()):
        if not families:
            out.append(
                MigIssue(
                    "mig-demand-unresolvable",
                    "error",
                    f"{flow_node} needs a MIG slice of {demand / _GIB:g} GiB, but no node can host "
                    "MIG slices (none runs the mixed MIG strategy with a catalogued MIG card: "
                    f"{', '.join(MIG_FAMILIES)})",
                    "enable MIG with the mixed strategy on MIG-capable nodes, or give "
                    f"{flow_node} whole cards (gpu_count, no gpu_memory_gib)",
                )
            )
            continue
        choices = [_choose(f, demand) for _, f in sorted(families.items())]
        if not any(c.resolvable for c in choices):
            best = max(choices, key=lambda c: c.largest.usable_mib)
            out.append(
                MigIssue(
                    "mig-demand-unresolvable",
                    "error",
                    f"{flow_node} needs {demand / _GIB:g} GiB, more than any MIG profile of this "
                    f"cluster holds: {'; '.join(c.message for c in choices)}",
                    f"lower gpu_memory_gib to at most {best.largest.usable_gib:g} "
                    f"({best.largest.name} on {best.family}), or give it a whole card "
                    "(gpu_count without gpu_memory_gib)",
                )
            )
    return tuple(out)
