"""Exact MIG layouts on one card: feasibility, start slots, creation order and re-checks.

:func:`fit_layout` decides whether a multiset of profiles coexists on one card
and returns a witness (a start slot per instance) and a creation order;
:func:`check_layout` re-checks any placed layout; :func:`feasible_layouts` and
:func:`maximal_layouts` enumerate what a family allows.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vfcore.errors import InvalidInputError
from vfcore.placement.mig.catalogue import MIG_FAMILIES, MigFamily, MigProfile, as_family

__all__ = [
    "LayoutFit",
    "Placement",
    "check_layout",
    "feasible_layouts",
    "fit_layout",
    "maximal_layouts",
]


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


def counts_of(profiles: Iterable[str] | Mapping[str, int]) -> Counts:
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


_ENGINES = ("NVDEC", "NVENC", "JPEG", "OFA")


def _media_over(family: MigFamily, tally: Mapping[str, int]) -> str | None:
    """Which media engine the instances over-use on a family that counts them (None: none)."""
    if family.media is None:
        return None
    for k, total in enumerate(family.media):
        used = 0
        for name, n in tally.items():
            p = family.profile(name)
            if p is not None and p.media is not None:
                used += p.media[k] * n
        if used > total:
            return f"needs {used} {_ENGINES[k]}; a card has {total}"
    return None


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
            counts[j] += 1
            over = _media_over(family, {profiles[i].name: c for i, c in enumerate(counts) if c})
            counts[j] -= 1
            if over is not None:
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


LAYOUTS: Mapping[str, Mapping[Counts, tuple[Placement, ...]]] = {
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
    witness = LAYOUTS[family.name][counts]
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
    fam = as_family(family)
    counts = counts_of(profiles)
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
    over = _media_over(family, dict(counts))
    if over is not None:
        return over
    if counts not in LAYOUTS[family.name]:
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
    fam = as_family(family)
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
    over = _media_over(fam, tally)
    if over is not None:
        problems.append(over)
    return tuple(problems)


def feasible_layouts(family: MigFamily | str) -> tuple[Counts, ...]:
    """Every multiset of profiles one card of ``family`` can hold (the empty one included)."""
    return tuple(sorted(LAYOUTS[as_family(family).name]))


def maximal_layouts(family: MigFamily | str, profiles: Iterable[str]) -> tuple[Counts, ...]:
    """The feasible multisets over ``profiles`` to which no instance of ``profiles`` can be added.

    Enough for planning: any layout over these profiles is contained in a
    maximal one, and a spare instance never hurts.

    >>> maximal_layouts("H100-80GB", ["3g.40gb", "1g.10gb"])
    ((('1g.10gb', 4), ('3g.40gb', 1)), (('1g.10gb', 7),), (('3g.40gb', 2),))
    """
    fam = as_family(family)
    allowed = sorted(set(profiles))
    for name in allowed:
        _profile(fam, name)
    table = LAYOUTS[fam.name]
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
