"""Which GPUs each GPU replica of a local run gets: a pure function of the inventory.

Locally every worker process shares the machine's GPUs, bounded only by their
memory. The local executor detects the host's GPUs (an adapter's job), narrows
them to the parent's ``CUDA_VISIBLE_DEVICES`` with :func:`visible_devices`, and
asks :func:`assign_devices` which devices each replica sees; each worker then
runs with ``CUDA_VISIBLE_DEVICES`` set to that list.

The rules, in order (replicas in the order given, which is flow order):

1. **No GPU on the host**: every GPU replica runs on the CPU (no devices), with
   one warning; ``policy="strict"`` refuses instead.
2. **Replicas that declare ``gpu_memory_gib``** (one device each) share cards by
   memory: each goes to the card with the most memory left that still holds its
   declaration (free memory at detection minus what earlier sharers declared),
   ties to the lowest index. A replica no card can hold goes to the card with the
   most memory left anyway (one warning); strict refuses, naming the shortfall.
3. **Other replicas take ``gpu_count`` whole cards**, the least-used cards first
   (fewest replicas already on them, ties to the lowest index), sharers
   counting as users. When whole-card demand exceeds the cards, replicas wrap
   around and share (one warning); strict refuses, naming demand and supply.
   A replica asking for more cards than the host has gets all of them (warning;
   strict refuses).

Worked example: two cards with 80 GiB free each; ``detector`` (2 replicas, one
whole card each) and ``pose`` (1 replica, ``gpu_memory_gib=10``). Sharers go
first: ``pose/0`` → card 0 (80 ≥ 10, lowest index). Then ``detector/0`` → card 1
(0 users; card 0 has one) and ``detector/1`` → card 0 (both have one user now,
lowest index): demand (2 whole cards) fits supply (2), but ``pose`` shares card 0
with ``detector/1`` because locally that costs nothing but memory.

>>> inv = (GpuDevice(0, "GPU-a", "H100", 81920, 81920), GpuDevice(1, "GPU-b", "H100", 81920, 81920))
>>> reqs = (DeviceRequest("detector/0", 1), DeviceRequest("detector/1", 1),
...         DeviceRequest("pose/0", 1, 10.0))
>>> a = assign_devices(reqs, inv)
>>> {pod: list(d) for pod, d in a.devices.items()}
{'detector/0': [1], 'detector/1': [0], 'pose/0': [0]}
>>> a.status, a.warnings
('gpu', ())
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from vfcore.errors import InvalidInputError

__all__ = [
    "GPU_POLICIES",
    "DeviceAssignment",
    "DeviceRequest",
    "GpuDevice",
    "GpuPolicy",
    "assign_devices",
    "visible_devices",
]

GpuPolicy = Literal["share", "strict"]
GPU_POLICIES: tuple[GpuPolicy, ...] = ("share", "strict")
AssignmentStatus = Literal["gpu", "cpu-fallback", "refused", "no-gpu-nodes"]

_MIB_PER_GIB = 1024


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One GPU of the host as detected: its index, UUID, product and memory in MiB.

    ``memory_free_mib`` is None when it could not be read; the card then counts
    as having its total free (or unknown: it holds any declaration, with a warning).
    """

    index: int
    uuid: str | None = None
    name: str = "GPU"
    memory_total_mib: int | None = None
    memory_free_mib: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "memory_total_mib": self.memory_total_mib,
            "memory_free_mib": self.memory_free_mib,
        }


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A GPU replica: its pod name (``detector/0``), cards wanted, declared memory."""

    pod: str
    gpu_count: int = 1
    gpu_memory_gib: float | None = None


@dataclass(frozen=True, slots=True)
class DeviceAssignment:
    """The devices of every GPU replica, and what the assignment had to give up.

    ``status``: ``gpu`` (every replica has its devices), ``cpu-fallback`` (no
    GPU on the host: every replica runs on the CPU), ``refused`` (strict policy
    and a shortfall: ``shortfall`` says what), ``no-gpu-nodes``. ``shared``
    lists the devices more than one replica sees.
    """

    status: AssignmentStatus
    devices: dict[str, tuple[int, ...]]
    warnings: tuple[str, ...] = ()
    shortfall: str | None = None
    shared: dict[int, tuple[str, ...]] = field(default_factory=dict)
    inventory: tuple[GpuDevice, ...] = ()

    @property
    def refused(self) -> bool:
        return self.status == "refused"

    def cuda_visible_devices(self, pod: str) -> str:
        """The ``CUDA_VISIBLE_DEVICES`` value for a pod ("" = no GPU)."""
        return ",".join(str(i) for i in self.devices.get(pod, ()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "devices": {pod: list(d) for pod, d in self.devices.items()},
            "warnings": list(self.warnings),
            "shortfall": self.shortfall,
            "shared": {str(i): list(p) for i, p in sorted(self.shared.items())},
            "inventory": [d.to_dict() for d in self.inventory],
        }

    def rows(self) -> tuple[tuple[str, str], ...]:
        """``(pod, devices)`` rows for a table, e.g. ``("pose/0", "0")`` or ``("x/0", "cpu")``."""
        return tuple(
            (pod, ",".join(str(i) for i in d) if d else "cpu") for pod, d in self.devices.items()
        )


def visible_devices(
    inventory: Sequence[GpuDevice], cuda_visible_devices: str | None
) -> tuple[GpuDevice, ...]:
    """The devices a process may use given its ``CUDA_VISIBLE_DEVICES``.

    ``None`` (unset): all of them. ``""``: none. Otherwise a comma-separated list
    of indices or UUIDs (``GPU-…``, prefixes allowed, as CUDA accepts), kept in
    the listed order; CUDA stops at the first entry it cannot resolve, and so
    does this.

    >>> inv = (GpuDevice(0, "GPU-aa"), GpuDevice(1, "GPU-bb"), GpuDevice(2, "GPU-cc"))
    >>> [d.index for d in visible_devices(inv, "2,0")]
    [2, 0]
    >>> [d.index for d in visible_devices(inv, "GPU-bb,7,0")]
    [1]
    >>> visible_devices(inv, "")
    ()
    """
    devices = tuple(inventory)
    if cuda_visible_devices is None:
        return devices
    chosen: list[GpuDevice] = []
    for raw in cuda_visible_devices.split(","):
        entry = raw.strip()
        if not entry:
            break
        match: GpuDevice | None = None
        if entry.lstrip("-").isdigit():
            n = int(entry)
            match = next((d for d in devices if d.index == n), None)
        else:
            hits = [d for d in devices if d.uuid is not None and d.uuid.startswith(entry)]
            match = hits[0] if len(hits) == 1 else None
        if match is None or match in chosen:
            break
        chosen.append(match)
    return tuple(chosen)


def _check(requests: Sequence[DeviceRequest], policy: str) -> None:
    if policy not in GPU_POLICIES:
        raise InvalidInputError(
            "invalid-gpu-policy",
            f"gpu policy {policy!r} is not one of {list(GPU_POLICIES)}",
            "use --gpu-policy share (the default) or --gpu-policy strict",
        )
    seen: set[str] = set()
    for r in requests:
        if not isinstance(r.gpu_count, int) or isinstance(r.gpu_count, bool) or r.gpu_count < 1:
            raise InvalidInputError(
                "invalid-parameter",
                f"{r.pod}: gpu_count={r.gpu_count!r} must be an int >= 1",
                "declare gpu_count as a positive whole number",
            )
        mem = r.gpu_memory_gib
        if mem is not None and not (
            isinstance(mem, int | float) and not isinstance(mem, bool) and mem > 0
        ):
            raise InvalidInputError(
                "invalid-parameter",
                f"{r.pod}: gpu_memory_gib={mem!r} must be a number > 0",
                "declare the memory the model needs in GiB, e.g. gpu_memory_gib=10",
            )
        if r.pod in seen:
            raise InvalidInputError(
                "invalid-parameter",
                f"pod {r.pod!r} is listed twice",
                "list each replica once",
            )
        seen.add(r.pod)


def _gib(mib: float) -> str:
    return f"{mib / _MIB_PER_GIB:g} GiB"


def assign_devices(
    requests: Sequence[DeviceRequest],
    inventory: Sequence[GpuDevice],
    *,
    policy: GpuPolicy = "share",
) -> DeviceAssignment:
    """Assign devices to GPU replicas (see the module docstring for the rules).

    Pure: the same requests and inventory give the same answer. Inputs are not
    modified. Raises :class:`~vfcore.errors.InvalidInputError` for a malformed
    request or an unknown policy; a shortfall is data (``status="refused"``).
    """
    _check(requests, policy)
    inv = tuple(sorted(inventory, key=lambda d: d.index))
    if not requests:
        return DeviceAssignment("no-gpu-nodes", {}, inventory=inv)
    pods = [r.pod for r in requests]
    if not inv:
        message = (
            f"no GPU on this host: {len(requests)} GPU replica(s) "
            f"({', '.join(pods)}) run on the CPU"
        )
        if policy == "strict":
            return DeviceAssignment(
                "refused",
                {},
                shortfall=f"{len(requests)} GPU replica(s) need a GPU; the host has 0",
                inventory=inv,
            )
        return DeviceAssignment(
            "cpu-fallback", {p: () for p in pods}, warnings=(message,), inventory=inv
        )

    users: dict[int, list[str]] = {d.index: [] for d in inv}
    left: dict[int, float] = {
        d.index: math.inf
        if d.memory_free_mib is None and d.memory_total_mib is None
        else float(d.memory_free_mib if d.memory_free_mib is not None else d.memory_total_mib)  # type: ignore[arg-type]
        for d in inv
    }
    assigned: dict[str, tuple[int, ...]] = {}
    warnings: list[str] = []
    shortfalls: list[str] = []

    # sharers first: memory is the binding constraint for them
    over_memory: list[str] = []
    for r in requests:
        if r.gpu_memory_gib is None:
            continue
        need = r.gpu_memory_gib * _MIB_PER_GIB
        best = max(inv, key=lambda d: (left[d.index], -d.index))
        fits = [d for d in inv if left[d.index] >= need]
        if fits:
            card = max(fits, key=lambda d: (left[d.index], -d.index))
        else:
            card = best
            over_memory.append(
                f"{r.pod} declares {r.gpu_memory_gib:g} GiB; the card with the most left "
                f"(GPU {card.index}) has {_gib(max(left[card.index], 0))}"
            )
        left[card.index] -= need
        users[card.index].append(r.pod)
        assigned[r.pod] = (card.index,)
    if over_memory:
        text = "declared GPU memory exceeds what the cards have free: " + "; ".join(over_memory)
        if policy == "strict":
            shortfalls.append(text)
        else:
            warnings.append(text + " (sharing anyway; expect out-of-memory errors)")

    whole = [r for r in requests if r.gpu_memory_gib is None]
    demand = sum(min(r.gpu_count, len(inv)) for r in whole)
    too_big = [r for r in whole if r.gpu_count > len(inv)]
    if too_big:
        text = "; ".join(
            f"{r.pod} asks for {r.gpu_count} GPUs, the host has {len(inv)}" for r in too_big
        )
        if policy == "strict":
            shortfalls.append(text)
        else:
            warnings.append(text + " (it gets all of them)")
    exclusive: dict[int, str] = {}
    wrapped = False
    for r in whole:
        count = min(r.gpu_count, len(inv))
        order = sorted(inv, key=lambda d: (len(users[d.index]), d.index))
        chosen = sorted(d.index for d in order[:count])
        for i in chosen:
            if i in exclusive:
                wrapped = True
            exclusive.setdefault(i, r.pod)
            users[i].append(r.pod)
        assigned[r.pod] = tuple(chosen)
    if wrapped or demand > len(inv):
        text = f"{len(whole)} GPU replica(s) want {demand} whole GPU(s); the host has {len(inv)}"
        if policy == "strict":
            shortfalls.append(text)
        else:
            warnings.append(text + ": replicas share GPUs round robin, bounded only by memory")

    ordered = {p: assigned[p] for p in pods}
    shared = {i: tuple(u) for i, u in users.items() if len(u) > 1}
    if shortfalls:
        return DeviceAssignment(
            "refused",
            ordered,
            shortfall="; ".join(shortfalls),
            shared=shared,
            inventory=inv,
        )
    return DeviceAssignment("gpu", ordered, tuple(warnings), None, shared, inv)
