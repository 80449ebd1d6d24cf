"""Join policies: how a node with several parents groups their messages.

A *join* is a processor (or consumer) with two or more parents. Its
:class:`JoinPolicy` says how messages from the parents are grouped:

- ``mode="trace"``: one group per trace id; complete when every parent has
  delivered its half.
- ``mode="time"``: messages from independent sources whose event timestamps lie
  within ``tolerance_ms`` of each other; ``quorum`` lets a group with k of the N
  synchronised parents go out after the timeout; ``collect`` names parents whose
  every sample inside a window is attached as a list.

What happens when halves are missing after ``timeout_ms`` is ``missing``:
``drop`` (count and discard), ``error`` (dead-letter) or ``wait`` (no timeout at
all). Without a policy a join uses :meth:`JoinPolicy.default_for` its flow type:
BATCH waits forever, REALTIME drops after 10 s.

Every inconsistency is reported at construction, with rule
``invalid-join-policy`` and a fix; the checks that need the node's parents
(quorum above the synchronised parents, collect windows naming non-parents)
run in :func:`vfcore.validate`.

The assembler that carries a policy out is
:class:`vfcore.routing.joins.JoinAssembler`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.errors import ERROR, InvalidFlowError, Issue, brief

__all__ = [
    "REALTIME_DEFAULT_TIMEOUT_MS",
    "RULE",
    "JoinMode",
    "JoinPolicy",
    "MissingPolicy",
    "format_ms",
    "join_policy_parent_problems",
]

JoinMode = Literal["trace", "time"]
MissingPolicy = Literal["drop", "wait", "error"]

_MODES = ("trace", "time")
_MISSING = ("drop", "wait", "error")
REALTIME_DEFAULT_TIMEOUT_MS = 10_000
RULE = "invalid-join-policy"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: The longest timeout, tolerance or collect window a join policy may set: 10**12 ms
#: (about 31 years). Longer is a typo, and would overflow the float arithmetic of
#: event times.
MAX_MS = 10**12


def _positive(value: object) -> bool:
    """A number of milliseconds in ``(0, MAX_MS]`` (a huge int is not, and never overflows)."""
    if not _is_number(value):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return 0 < value <= MAX_MS  # type: ignore[operator]


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _normalise_collect(collect: object) -> tuple[tuple[str, Any], ...] | str | None:
    """Mapping or pairs → sorted pairs; a string describing the problem if malformed."""
    if collect is None:
        return None
    items: Iterable[Any]
    if isinstance(collect, Mapping):
        items = collect.items()
    elif isinstance(collect, list | tuple):
        items = collect
    else:
        return f"collect must map parent names to windows in ms, got {type(collect).__name__}"
    pairs: list[tuple[str, Any]] = []
    for item in items:
        if not (isinstance(item, list | tuple) and len(item) == 2):
            return f"collect entries must be (parent, window_ms) pairs, got {brief(item)}"
        parent, window = item
        if not isinstance(parent, str) or not parent:
            return f"collect names parents by their non-empty name, got {brief(parent)}"
        pairs.append((parent, window))
    names = [p for p, _ in pairs]
    if len(set(names)) != len(names):
        return f"collect names a parent twice: {sorted(names)}"
    return tuple(sorted(pairs))


@dataclass(frozen=True, slots=True)
class JoinPolicy:
    """How a join groups its parents' messages (validated at construction).

    >>> JoinPolicy(mode="time", tolerance_ms=40, timeout_ms=500, quorum=2).quorum
    2
    >>> JoinPolicy(mode="trace", quorum=2)
    Traceback (most recent call last):
    ...
    vfcore.errors.InvalidFlowError: invalid-join-policy: quorum=2 applies only to mode='time' ...
    """

    mode: JoinMode = "trace"
    timeout_ms: float | None = None
    missing: MissingPolicy = "drop"
    max_pending: int = 256
    tolerance_ms: float | None = None
    quorum: int | None = None
    collect: tuple[tuple[str, float], ...] | None = None

    def __post_init__(self) -> None:
        normalised = _normalise_collect(self.collect)
        problems: list[tuple[str, str]] = []
        if isinstance(normalised, str):
            problems.append((normalised, "pass collect={'parent_name': window_ms, ...}"))
        else:
            object.__setattr__(self, "collect", normalised)
        problems.extend(_policy_problems(self))
        if problems:
            raise InvalidFlowError(Issue(RULE, ERROR, None, msg, hint) for msg, hint in problems)

    @property
    def collect_windows(self) -> dict[str, float]:
        return dict(self.collect or ())

    @property
    def collected_parents(self) -> tuple[str, ...]:
        return tuple(p for p, _ in self.collect or ())

    @classmethod
    def default_for(cls, flow_type: str) -> JoinPolicy:
        """BATCH waits forever for every half; REALTIME drops after 10 s."""
        if flow_type == "realtime":
            return cls(timeout_ms=REALTIME_DEFAULT_TIMEOUT_MS, missing="drop")
        return cls(timeout_ms=None, missing="wait")

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "timeout_ms": self.timeout_ms,
            "missing": self.missing,
            "max_pending": self.max_pending,
            "tolerance_ms": self.tolerance_ms,
            "quorum": self.quorum,
            "collect": None if self.collect is None else dict(self.collect),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JoinPolicy:
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise InvalidFlowError(
                [
                    Issue(
                        RULE,
                        ERROR,
                        None,
                        f"unknown join policy field(s) {unknown}",
                        f"use only {sorted(cls.__dataclass_fields__)}",
                    )
                ]
            )
        return cls(**dict(data))

    def describe(self) -> str:
        """A short human form, e.g. ``time ±40ms, timeout 500ms → drop, quorum 2``."""
        parts: list[str] = [self.mode]
        if self.mode == "time":
            parts[0] = f"time ±{format_ms(self.tolerance_ms)}ms"
        if self.timeout_ms is None:
            parts.append("waits forever")
        else:
            parts.append(f"timeout {format_ms(self.timeout_ms)}ms → {self.missing}")
        if self.quorum is not None:
            parts.append(f"quorum {self.quorum}")
        if self.collect:
            parts.append(
                "collect " + ", ".join(f"{p} {format_ms(w)}ms" for p, w in self.collect),
            )
        return ", ".join(parts)


def format_ms(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() else str(value)


def _policy_problems(policy: JoinPolicy) -> list[tuple[str, str]]:
    """Every inconsistency of a policy on its own, as (message, hint) pairs."""
    out: list[tuple[str, str]] = []
    mode, timeout, tolerance = policy.mode, policy.timeout_ms, policy.tolerance_ms
    if mode not in _MODES:
        out.append((f"mode={brief(mode)} is not a join mode", "use mode='trace' or mode='time'"))
    if policy.missing not in _MISSING:
        out.append(
            (
                f"missing={brief(policy.missing)} is not a missing-half policy",
                "use missing='drop', 'wait' or 'error'",
            )
        )
    if timeout is not None and not _positive(timeout):
        out.append(
            (
                f"timeout_ms={brief(timeout)} must be a number > 0 and <= 10^12 "
                "(or None to wait forever)",
                "give the timeout in milliseconds, e.g. timeout_ms=500",
            )
        )
    if policy.missing == "wait" and timeout is not None:
        out.append(
            (
                f"missing='wait' waits forever, yet timeout_ms={brief(timeout)} is set",
                "drop timeout_ms, or choose missing='drop' or 'error' for what the timeout does",
            )
        )
    if not _positive_int(policy.max_pending):
        out.append(
            (
                f"max_pending={brief(policy.max_pending)} must be an int >= 1",
                "bound the pending groups, e.g. max_pending=256",
            )
        )
    time_only = [
        (name, value)
        for name, value in (
            ("tolerance_ms", tolerance),
            ("quorum", policy.quorum),
            ("collect", policy.collect),
        )
        if value is not None
    ]
    if mode == "trace":
        for name, value in time_only:
            shown = dict(value) if name == "collect" and isinstance(value, tuple) else value
            out.append(
                (
                    f"{name}={brief(shown)} applies only to mode='time' (this policy is mode='trace')",
                    f"set mode='time' or remove {name}",
                )
            )
    if mode == "time":
        if tolerance is None or not _positive(tolerance):
            out.append(
                (
                    f"mode='time' needs tolerance_ms > 0 (and <= 10^12), got {brief(tolerance)}",
                    "say how far apart event timestamps of one group may lie, e.g. tolerance_ms=40",
                )
            )
        if policy.quorum is not None:
            if not _positive_int(policy.quorum):
                out.append(
                    (
                        f"quorum={brief(policy.quorum)} must be an int >= 1",
                        "give the number of synchronised parents a partial group needs",
                    )
                )
            elif timeout is None:
                out.append(
                    (
                        f"quorum={policy.quorum} emits partial groups after the timeout, "
                        "but timeout_ms is None",
                        "set timeout_ms (e.g. 500) with missing='drop' or 'error'",
                    )
                )
        if isinstance(policy.collect, tuple):
            for parent, window in policy.collect:
                if not _positive(window):
                    out.append(
                        (
                            f"collect window for {brief(parent)} is {brief(window)}; it must be a number > 0 "
                            "and <= 10^12",
                            "give each collected parent a window in ms, e.g. {'imu': 100}",
                        )
                    )
    return out


def join_policy_parent_problems(
    policy: JoinPolicy, parents: tuple[str, ...]
) -> list[tuple[str, str]]:
    """The checks that need the node's parents: collect names, quorum bounds."""
    out: list[tuple[str, str]] = []
    if policy.mode != "time":
        return out
    collected = policy.collected_parents
    strangers = sorted(set(collected) - set(parents))
    if strangers:
        out.append(
            (
                f"collect names {strangers}, which are not parents (parents: {list(parents)})",
                "name only the node's own parents in collect",
            )
        )
    synchronised = [p for p in parents if p not in collected]
    if len(parents) >= 2 and not synchronised:
        out.append(
            (
                f"every parent {list(parents)} is collected, so no parent anchors a group",
                "leave at least one parent out of collect; its messages define the groups",
            )
        )
    if (
        _positive_int(policy.quorum)
        and synchronised
        and policy.quorum is not None
        and policy.quorum > len(synchronised)
    ):
        out.append(
            (
                f"quorum={policy.quorum} exceeds the {len(synchronised)} synchronised "
                f"parent(s) {synchronised}",
                f"use a quorum between 1 and {len(synchronised)}",
            )
        )
    return out
