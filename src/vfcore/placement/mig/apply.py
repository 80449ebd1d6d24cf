"""What ``nvidia-mig-parted apply`` does to a node's cards: one pure model of an apply.

mig-parted applies a selected config in two phases (see ``docs/mig.md``):

1. **Mode.** If any device the config lists needs another MIG mode, it walks
   *every listed device*: each one in MIG mode today has all its instances
   destroyed, then its mode is set. A mode change the driver cannot activate
   in place makes it reset every GPU of the node.
2. **Instances.** For each listed device with ``mig-enabled: true`` whose
   instance *counts per profile* differ from the desired ones, it destroys every
   instance on the card and creates the desired set (the driver picks the slots).

Devices the config does not list are left alone. :func:`apply_entries` plays
one config on cards in a known order; :func:`worst_over_orders` plays it on
every order of a multiset of card states (when kubectl cannot say which index
holds which card). :func:`config_problems` checks mig-parted's parser rules.
A card state is ``None`` (MIG disabled), a :data:`Counts` layout (MIG enabled,
those instances) or :data:`UNKNOWN_LAYOUT` (MIG enabled, instances unknown).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.placement.mig.layouts import Counts, counts_of

__all__ = [
    "UNKNOWN_LAYOUT",
    "ApplyOutcome",
    "CardApply",
    "apply_entries",
    "config_problems",
    "worst_over_orders",
]

#: A MIG-enabled card whose instances are not known (treated as never equal to a target).
UNKNOWN_LAYOUT: Literal["?"] = "?"

State = Counts | None | Literal["?"]


@dataclass(frozen=True, slots=True)
class CardApply:
    """One card through an apply: before, after, and what mig-parted did to it."""

    index: int
    before: State
    after: State
    listed: bool
    destroyed: bool  # instances it had were destroyed (phase 1 or 2)
    mode_changed: bool

    @property
    def disrupted(self) -> bool:
        """Its instances (or its whole-card use) do not survive the apply."""
        return self.destroyed or self.mode_changed or self.after != self.before


@dataclass(frozen=True, slots=True)
class ApplyOutcome:
    cards: tuple[CardApply, ...]
    mode_phase: bool  # phase 1 ran (some listed device needed another mode)

    @property
    def disrupted(self) -> tuple[int, ...]:
        return tuple(c.index for c in self.cards if c.disrupted)

    @property
    def after(self) -> tuple[State, ...]:
        return tuple(c.after for c in self.cards)

    @property
    def reset_possible(self) -> bool:
        """A mode change happened: if it stays pending, mig-parted resets every GPU of the node."""
        return any(c.mode_changed for c in self.cards)


def _has_instances(state: State) -> bool:
    return state == UNKNOWN_LAYOUT or bool(state)


def targets(entries: Sequence[Mapping[str, Any]], n_cards: int) -> dict[int, Counts | None]:
    """Each listed device's desired state (later entries win, as mig-parted walks them)."""
    out: dict[int, Counts | None] = {}
    for entry in entries:
        devices = entry["devices"]
        indices = range(n_cards) if devices == "all" else devices
        want: Counts | None = (
            counts_of(dict(entry.get("mig-devices") or {})) if entry["mig-enabled"] else None
        )
        for i in indices:
            if not 0 <= i < n_cards:
                raise ValueError(f"device {i} is not one of the node's {n_cards} cards")
            out[i] = want
    return out


def apply_entries(
    cards: Sequence[State],
    entries: Sequence[Mapping[str, Any]],
    *,
    mode_phase: bool | None = None,
) -> ApplyOutcome:
    """Play one selected config's ``entries`` on ``cards`` (index ``i`` is ``cards[i]``).

    ``mode_phase`` forces phase 1 on or off (default: as mig-parted decides it).
    """
    want = targets(entries, len(cards))
    state: list[State] = list(cards)
    destroyed = [False] * len(cards)
    mode_changed = [False] * len(cards)
    needs_mode = any((state[i] is None) != (w is None) for i, w in want.items())
    phase1 = needs_mode if mode_phase is None else mode_phase
    if phase1:
        for i, w in sorted(want.items()):
            if state[i] is not None:
                destroyed[i] = destroyed[i] or _has_instances(state[i])
                state[i] = ()  # ClearMigConfig
            if (state[i] is None) != (w is None):
                mode_changed[i] = True
                state[i] = None if w is None else ()
    for i, w in sorted(want.items()):
        if w is None or state[i] is None:
            continue
        if state[i] == UNKNOWN_LAYOUT or state[i] != w:
            destroyed[i] = destroyed[i] or _has_instances(state[i])
            state[i] = w
    return ApplyOutcome(
        cards=tuple(
            CardApply(i, cards[i], state[i], i in want, destroyed[i], mode_changed[i])
            for i in range(len(cards))
        ),
        mode_phase=phase1,
    )


def _key(state: State) -> tuple[int, Any]:
    if state is None:
        return (0, ())
    if state == UNKNOWN_LAYOUT:
        return (1, ())
    return (2, state)


def distinct_orders(states: Sequence[State]) -> Iterator[tuple[State, ...]]:
    """Every distinct arrangement of a multiset of card states over indices 0..n-1."""
    tally = Counter(states)
    kinds = sorted(tally, key=_key)
    left = [tally[k] for k in kinds]
    out: list[State] = []

    def visit() -> Iterator[tuple[State, ...]]:
        if len(out) == len(states):
            yield tuple(out)
            return
        for j, kind in enumerate(kinds):
            if left[j]:
                left[j] -= 1
                out.append(kind)
                yield from visit()
                out.pop()
                left[j] += 1

    yield from visit()


@dataclass(frozen=True, slots=True)
class WorstCase:
    """One config played on every order of a node's card states."""

    most_disrupted: int
    fewest_disrupted: int
    outcomes: frozenset[tuple[tuple[int, Any], ...]]  # sorted multisets of states after
    orders: int
    reset_possible: bool

    @property
    def same_outcome(self) -> bool:
        return len(self.outcomes) == 1


def multiset(states: Sequence[State]) -> tuple[tuple[int, Any], ...]:
    return tuple(sorted(_key(s) for s in states))


def worst_over_orders(states: Sequence[State], entries: Sequence[Mapping[str, Any]]) -> WorstCase:
    """Play ``entries`` on every distinct order of ``states``: the most and fewest cards disrupted."""
    most, fewest, orders, reset = 0, len(states), 0, False
    outcomes: set[tuple[tuple[int, Any], ...]] = set()
    for order in distinct_orders(states):
        result = apply_entries(order, entries)
        n = len(result.disrupted)
        most, fewest = max(most, n), min(fewest, n)
        outcomes.add(multiset(result.after))
        reset = reset or result.reset_possible
        orders += 1
    return WorstCase(most, fewest, frozenset(outcomes), orders, reset)


# -- mig-parted's parser rules (api/spec/v1) --------------------------------------------------------

_PROFILE = re.compile(r"^[1-9][0-9]*(c\.[1-9][0-9]*)?g\.[1-9][0-9]*gb(\+[a-z]+(\.[a-z]+)?|-me)*$")


def config_problems(config: Any) -> tuple[str, ...]:
    """What mig-parted's parser would reject in ``config`` (empty: it parses).

    ``version: v1``; at least one config under ``mig-configs``; at least one
    entry in each; each entry has ``devices`` (``all`` or a list of indices)
    and ``mig-enabled``; ``mig-devices`` required when enabled, empty when
    disabled; no other fields.
    """
    if not isinstance(config, Mapping):
        return ("the config is not a mapping",)
    problems = [f"unexpected field: {k}" for k in config if k not in ("version", "mig-configs")]
    if config.get("version") != "v1":
        problems.append(f"unknown version: {config.get('version')!r}")
    configs = config.get("mig-configs")
    if not isinstance(configs, Mapping) or not configs:
        problems.append("at least one entry in 'mig-configs' is required")
        return tuple(problems)
    for name, entries in configs.items():
        if not isinstance(entries, Sequence) or isinstance(entries, str) or not entries:
            problems.append(f"at least one entry in {name!r} is required")
            continue
        for entry in entries:
            problems += [f"{name}: {p}" for p in _entry_problems(entry)]
    return tuple(problems)


def _entry_problems(entry: Any) -> list[str]:
    if not isinstance(entry, Mapping):
        return ["an entry is not a mapping"]
    out = [f"missing required field: {r}" for r in ("devices", "mig-enabled") if r not in entry]
    out += [
        f"unexpected field: {k}"
        for k in entry
        if k not in ("devices", "mig-enabled", "mig-devices")
    ]
    devices = entry.get("devices")
    indices = isinstance(devices, list) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices
    )
    if "devices" in entry and devices != "all" and not indices:
        out.append(f"devices must be 'all' or a list of indices, not {devices!r}")
    enabled = entry.get("mig-enabled")
    if "mig-enabled" in entry and not isinstance(enabled, bool):
        out.append(f"mig-enabled must be true or false, not {enabled!r}")
    mig_devices = entry.get("mig-devices")
    if enabled is True and mig_devices is None:
        out.append("missing required field 'mig-devices' when 'mig-enabled' is true")
    if enabled is False and mig_devices:
        out.append("MIG devices included when 'mig-enabled' is false")
    if mig_devices is not None:
        if not isinstance(mig_devices, Mapping):
            out.append("mig-devices must map profiles to counts")
        else:
            for profile, count in mig_devices.items():
                if not isinstance(profile, str) or not _PROFILE.match(profile):
                    out.append(f"invalid MIG profile name {profile!r}")
                if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                    out.append(f"invalid count {count!r} for {profile!r}")
    return out
