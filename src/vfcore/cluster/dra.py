"""Dynamic Resource Allocation facts: ResourceSlices, DeviceClasses, allocated ResourceClaims.

Kubernetes' DRA (``resource.k8s.io/v1``, GA since 1.34) describes devices as
data: a driver publishes **ResourceSlices** (per pool: its devices with
attributes and capacity, and — for partitionable devices — the shared
counters a device consumes), an admin installs **DeviceClasses** (CEL
selectors naming which devices a class covers), and the scheduler writes each
claim's allocation into **ResourceClaim** ``status.allocation``. These types
hold what vfcore reads from them (:mod:`vfcore.cluster.kubeparse.dra_objects`
parses the dumps); :mod:`vfcore.placement.dra` plans on them.

Unknown is its own value here too: a listing that is missing or refused is
an ``*_unknown`` reason, never "no devices" or "nothing allocated"; a slice
that cannot be read makes its pool unknown (``bad_pools``); a claim whose
allocation cannot be read makes the pools it may hold unknown.

Quantities (capacity, counters) are exact fractions, as apimachinery compares
them: ``80Gi`` is 85899345920, ``500m`` is 1/2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from vfcore.cluster.nodes import Unknown

__all__ = [
    "AllocatedDevice",
    "CounterSet",
    "CounterUse",
    "DeviceClassInfo",
    "DeviceTaint",
    "DeviceValue",
    "DraDevice",
    "DraFacts",
    "DraSlice",
    "SliceScope",
    "ValueKind",
]

#: The four kinds of a device attribute value (``DeviceAttribute``: int, bool, string, version).
ValueKind = Literal["int", "bool", "string", "version"]
#: Where a slice's devices are: one node (``spec.nodeName``), every node, a node selector, or
#: per device (``perDeviceNodeSelection``).
SliceScope = Literal["node", "all-nodes", "node-selector", "per-device"]


def _quantity_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(value)


@dataclass(frozen=True, slots=True, order=True)
class DeviceValue:
    """One attribute value: ``DeviceValue("string", "gpu")``, ``DeviceValue("version", "550.1.0")``."""

    kind: ValueKind
    value: int | bool | str

    def to_dict(self) -> dict[str, Any]:
        return {self.kind: self.value}


@dataclass(frozen=True, slots=True, order=True)
class CounterUse:
    """What a device consumes from one counter set of its pool when it is allocated."""

    counter_set: str
    counters: tuple[tuple[str, Fraction], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "counterSet": self.counter_set,
            "counters": {n: _quantity_text(v) for n, v in self.counters},
        }


@dataclass(frozen=True, slots=True, order=True)
class CounterSet:
    """A pool's shared counters (``spec.sharedCounters[]``): name → available amount."""

    name: str
    counters: tuple[tuple[str, Fraction], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "counters": {n: _quantity_text(v) for n, v in self.counters}}


@dataclass(frozen=True, slots=True, order=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def to_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


@dataclass(frozen=True, slots=True)
class DraDevice:
    """One published device: attributes and capacity by their names as published
    (``productName`` or ``resource.kubernetes.io/pcieRoot``), what it consumes from
    shared counters, taints, and the two features vfcore does not model
    (``allowMultipleAllocations``: consumable capacity; binding conditions)."""

    name: str
    attributes: tuple[tuple[str, DeviceValue], ...] = ()
    capacity: tuple[tuple[str, Fraction], ...] = ()
    consumes: tuple[CounterUse, ...] = ()
    taints: tuple[DeviceTaint, ...] = ()
    multi_allocatable: bool = False
    binding_conditions: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "attributes": {n: v.to_dict() for n, v in self.attributes},
            "capacity": {n: _quantity_text(v) for n, v in self.capacity},
            "consumesCounters": [c.to_dict() for c in self.consumes],
            "taints": [t.to_dict() for t in self.taints],
            "allowMultipleAllocations": self.multi_allocatable,
            "bindingConditions": self.binding_conditions,
        }


@dataclass(frozen=True, slots=True)
class DraSlice:
    """One ResourceSlice: its driver, pool (name, generation, how many slices the pool
    has), where its devices are, its devices in published order, and its shared counters."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    scope: SliceScope
    node: str | None = None
    devices: tuple[DraDevice, ...] = ()
    counter_sets: tuple[CounterSet, ...] = ()

    @property
    def pool_id(self) -> tuple[str, str]:
        return (self.driver, self.pool)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "driver": self.driver,
            "pool": self.pool,
            "generation": self.generation,
            "resourceSliceCount": self.slice_count,
            "scope": self.scope,
            "node": self.node,
            "devices": [d.to_dict() for d in self.devices],
            "sharedCounters": [c.to_dict() for c in self.counter_sets],
        }


@dataclass(frozen=True, slots=True)
class DeviceClassInfo:
    """A DeviceClass: its CEL selectors (every one must accept a device) and, with
    ``DRAExtendedResource``, the extended resource name it serves."""

    name: str
    selectors: tuple[str, ...] = ()
    extended_resource: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "selectors": list(self.selectors),
            "extendedResourceName": self.extended_resource,
        }


@dataclass(frozen=True, slots=True, order=True)
class AllocatedDevice:
    """A device an allocated ResourceClaim holds (``status.allocation.devices.results[]``).

    ``shared`` marks a result with a ``shareID`` (consumable capacity, which
    vfcore does not model: the device is neither free nor taken for certain).
    Results with ``adminAccess`` take nothing and are not listed.
    """

    driver: str
    pool: str
    device: str
    claim: str
    shared: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "driver": self.driver,
            "pool": self.pool,
            "device": self.device,
            "claim": self.claim,
            "shared": self.shared,
        }


@dataclass(frozen=True, slots=True)
class DraFacts:
    """What the dumps say about DRA, and what they do not.

    ``slices_unknown`` (a reason): the slice listing is missing or refused, or a
    slice could not be read far enough to tell its pool — no device is known.
    ``bad_pools``: ``(driver, pool)`` of pools one of whose slices cannot be read.
    ``classes`` is ``None`` with ``classes_unknown`` when the class listing
    is; ``bad_classes`` names classes that cannot be read. ``claims_unknown``:
    the claim listing is missing or refused (which device is in use is unknown);
    ``uncertain_pools``: pools a claim whose allocation cannot be read may hold.
    ``unknowns`` lists each unreadable object with its field.
    """

    slices: tuple[DraSlice, ...] = ()
    classes: tuple[DeviceClassInfo, ...] | None = ()
    allocated: tuple[AllocatedDevice, ...] = ()
    slices_unknown: str | None = None
    classes_unknown: str | None = None
    claims_unknown: str | None = None
    bad_pools: tuple[tuple[str, str], ...] = ()
    bad_classes: tuple[str, ...] = ()
    uncertain_pools: tuple[tuple[str, str], ...] = ()
    unknowns: tuple[Unknown, ...] = field(default=())

    def device_class(self, name: str) -> DeviceClassInfo | None:
        for c in self.classes or ():
            if c.name == name:
                return c
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "slices": [s.to_dict() for s in self.slices],
            "classes": None if self.classes is None else [c.to_dict() for c in self.classes],
            "allocated": [a.to_dict() for a in self.allocated],
            "slices_unknown": self.slices_unknown,
            "classes_unknown": self.classes_unknown,
            "claims_unknown": self.claims_unknown,
            "bad_pools": [list(p) for p in self.bad_pools],
            "bad_classes": list(self.bad_classes),
            "uncertain_pools": [list(p) for p in self.uncertain_pools],
            "unknowns": [u.to_dict() for u in self.unknowns],
        }
