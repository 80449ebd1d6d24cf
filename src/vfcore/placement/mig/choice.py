"""Profile choice: the smallest MIG profile whose *usable* memory covers a pod's demand.

9 GiB → ``1g.10gb`` on an H100-80GB (9.75 GiB usable), but 10 GiB does not fit
that and gets ``1g.20gb`` (19.62 GiB). See :func:`choose_profile`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vfcore.errors import InvalidInputError
from vfcore.placement.mig.catalogue import GIB, MigFamily, MigProfile, as_family

__all__ = ["ProfileChoice", "choose_profile"]


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
        need = f"{self.demand_mib / GIB:g} GiB"
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


def choice_for_mib(family: MigFamily, demand_mib: int) -> ProfileChoice:
    plain = [p for p in family.profiles if p.plain]
    ranked = sorted(plain, key=lambda p: (p.usable_mib, p.memory_slices, p.compute_slices, p.name))
    chosen = next((p for p in ranked if p.usable_mib >= demand_mib), None)
    return ProfileChoice(family.name, demand_mib, chosen, ranked[-1])


def choose_profile(family: MigFamily | str, gpu_memory_gib: float) -> ProfileChoice:
    """The smallest profile whose *usable* memory covers ``gpu_memory_gib`` (variants excluded).

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
    return choice_for_mib(as_family(family), round(gpu_memory_gib * GIB))
