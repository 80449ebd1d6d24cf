"""DRA dumps → :class:`~vfcore.cluster.dra.DraFacts`: ResourceSlices, DeviceClasses, ResourceClaims.

What a user dumps beside ``nodes.json`` and ``pods.json``::

    kubectl get resourceslices -o json      > resourceslices.json
    kubectl get deviceclasses -o json       > deviceclasses.json
    kubectl get resourceclaims -A -o json   > resourceclaims.json

or the same kinds in the one-file ``List``. Each document follows the rules of
:mod:`.documents` (missing, empty, not JSON, a ``Status``, a partial list: unknown,
with the reason), and nothing raises:

- a **slice** that cannot be read makes its pool unknown (``bad_pools``); one
  that cannot be read far enough to name its pool makes every device unknown
  (``slices_unknown``): it could be any node's;
- a **class** that cannot be read is listed in ``bad_classes`` (a claim of that
  class cannot be judged);
- a **claim** whose allocation cannot be read makes the pools its readable
  results name uncertain, or — when no pool can be told — every device's use
  unknown (``claims_unknown``).

Worked example: a slice with ``pool: {name: gpu-a, generation: 1,
resourceSliceCount: 2}`` and one GPU whose ``attributes.productName`` is
``{"string": "NVIDIA H100"}`` and ``capacity.memory`` is ``{"value": "80Gi"}``
becomes ``DraSlice(driver, "gpu-a", 1, 2, "node", "gpu-a", (DraDevice("gpu-0",
(("productName", DeviceValue("string", "NVIDIA H100")),), (("memory",
Fraction(85899345920)),)),))``; the pool is complete only when both of its
slices of generation 1 are listed.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, TypeVar

from vfcore.cluster.dra import (
    AllocatedDevice,
    CounterSet,
    CounterUse,
    DeviceClassInfo,
    DeviceTaint,
    DeviceValue,
    DraDevice,
    DraFacts,
    DraSlice,
    SliceScope,
)
from vfcore.cluster.kubeparse.documents import Kind, items_of
from vfcore.cluster.kubeparse.fields import (
    Malformed,
    describe,
    read_mapping,
    read_sequence,
    read_string,
    short,
)
from vfcore.cluster.nodes import Unknown
from vfcore.errors import InvalidInputError
from vfcore.quantity import MAX_UNITS, parse_quantity

__all__ = [
    "DEVICE_CLASS_LIST",
    "RESOURCE_CLAIM_LIST",
    "RESOURCE_SLICE_LIST",
    "parse_dra",
    "parse_dra_list",
]

RESOURCE_SLICE_LIST = Kind("ResourceSlice", "resource slice", "kubectl get resourceslices -o json")
DEVICE_CLASS_LIST = Kind("DeviceClass", "device class", "kubectl get deviceclasses -o json")
RESOURCE_CLAIM_LIST = Kind(
    "ResourceClaim", "resource claim", "kubectl get resourceclaims -A -o json"
)

_VALUE_KINDS = ("int", "bool", "string", "version")
#: The most devices one slice may hold (``ResourceSliceMaxDevices``), and attributes a device.
_MAX_DEVICES = 128
_MAX_ATTRIBUTES = 32


def _int_field(value: object, field: str, *, required: bool = True) -> int:
    if value is None and not required:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise Malformed(field, f"= {short(value)} is {describe(value)}, not an integer")
    if not 0 <= value <= 2**63 - 1:
        raise Malformed(field, f"= {short(value)} is out of range")
    return value


_T = TypeVar("_T")


class _Shared:
    """One of each equal value the slices repeat (a cluster's devices differ mostly in names
    and uuids): 300,000 devices parse to tens of MiB instead of hundreds."""

    __slots__ = ("quantities", "values")

    def __init__(self) -> None:
        self.values: dict[object, object] = {}
        self.quantities: dict[str, Fraction] = {}

    def one(self, value: _T) -> _T:
        return self.values.setdefault(value, value)  # type: ignore[return-value]


def _quantity(value: object, field: str, shared: _Shared) -> Fraction:
    raw = read_mapping(value, field, required=True).get("value")
    if isinstance(raw, str):
        known = shared.quantities.get(raw)
        if known is not None:
            return known
    try:
        amount = parse_quantity(raw, what=field)
    except InvalidInputError:
        raise Malformed(f"{field}.value", f"= {short(raw)} is not a Kubernetes quantity") from None
    if amount < 0 or amount > MAX_UNITS * 2**14:
        raise Malformed(f"{field}.value", f"= {short(raw)} is out of range")
    if isinstance(raw, str):
        shared.quantities[raw] = amount
    return amount


def _quantities(value: object, field: str, shared: _Shared) -> tuple[tuple[str, Fraction], ...]:
    out: dict[str, Fraction] = {}
    for name, raw in read_mapping(value, field).items():
        if not isinstance(name, str) or not name:
            raise Malformed(field, f"has a name {short(name)} that is not a string")
        out[name] = _quantity(raw, f'{field}["{name}"]', shared)
    return shared.one(tuple(shared.one(item) for item in sorted(out.items())))


def _attribute(value: object, field: str) -> DeviceValue:
    body = read_mapping(value, field, required=True)
    present = [k for k in _VALUE_KINDS if body.get(k) is not None]
    if len(present) != 1:
        raise Malformed(field, "must hold exactly one of int, bool, string, version")
    kind = present[0]
    raw = body[kind]
    if kind == "int" and (isinstance(raw, bool) or not isinstance(raw, int)):
        raise Malformed(f"{field}.int", f"= {short(raw)} is not an integer")
    if kind == "bool" and not isinstance(raw, bool):
        raise Malformed(f"{field}.bool", f"= {short(raw)} is not a boolean")
    if kind in ("string", "version") and not isinstance(raw, str):
        raise Malformed(f"{field}.{kind}", f"= {short(raw)} is not a string")
    return DeviceValue(kind, raw)  # type: ignore[arg-type]


def _device(value: object, field: str, shared: _Shared) -> DraDevice:
    body = read_mapping(value, field, required=True)
    name = read_string(body.get("name"), f"{field}.name", required=True)
    assert name is not None
    attrs = read_mapping(body.get("attributes"), f"{field}.attributes")
    if len(attrs) > _MAX_ATTRIBUTES * 2:
        raise Malformed(f"{field}.attributes", f"has {len(attrs)} entries")
    attributes = {}
    for key, raw in attrs.items():
        if not isinstance(key, str) or not key:
            raise Malformed(f"{field}.attributes", f"has a name {short(key)} that is not a string")
        attributes[key] = _attribute(raw, f'{field}.attributes["{key}"]')
        key_value = (key, attributes[key])
        attributes[key] = shared.one(key_value)[1]
    consumes = []
    for i, use in enumerate(
        read_sequence(body.get("consumesCounters"), f"{field}.consumesCounters")
    ):
        where = f"{field}.consumesCounters[{i}]"
        use_body = read_mapping(use, where, required=True)
        counter_set = read_string(use_body.get("counterSet"), f"{where}.counterSet", required=True)
        assert counter_set is not None
        consumes.append(
            shared.one(
                CounterUse(counter_set, _quantities(use_body.get("counters"), where, shared))
            )
        )
    taints = []
    for i, taint in enumerate(read_sequence(body.get("taints"), f"{field}.taints")):
        where = f"{field}.taints[{i}]"
        t = read_mapping(taint, where, required=True)
        taint_key = read_string(t.get("key"), f"{where}.key", required=True)
        effect = read_string(t.get("effect"), f"{where}.effect", required=True)
        assert taint_key is not None and effect is not None
        value = read_string(t.get("value"), f"{where}.value") or ""
        taints.append(DeviceTaint(taint_key, value, effect))
    multi = body.get("allowMultipleAllocations")
    if multi is not None and not isinstance(multi, bool):
        raise Malformed(f"{field}.allowMultipleAllocations", f"= {short(multi)} is not a boolean")
    return DraDevice(
        name=shared.one(name),
        attributes=tuple(shared.one(item) for item in sorted(attributes.items())),
        capacity=_quantities(body.get("capacity"), f"{field}.capacity", shared),
        consumes=shared.one(tuple(consumes)),
        taints=shared.one(tuple(sorted(taints))),
        multi_allocatable=bool(multi),
        binding_conditions=bool(body.get("bindingConditions")),
    )


def _pool_of(item: object) -> tuple[str, str] | None:
    """``(driver, pool name)`` of a slice, when it can be told, however broken the rest."""
    spec = item.get("spec") if isinstance(item, Mapping) else None
    if not isinstance(spec, Mapping):
        return None
    pool = spec.get("pool")
    driver = spec.get("driver")
    name = pool.get("name") if isinstance(pool, Mapping) else None
    if isinstance(driver, str) and driver and isinstance(name, str) and name:
        return (driver, name)
    return None


def _read_slice(item: object, where: str, shared: _Shared) -> DraSlice:
    body = read_mapping(item, where, required=True)
    meta = read_mapping(body.get("metadata"), "metadata", required=True)
    name = read_string(meta.get("name"), "metadata.name", required=True)
    spec = read_mapping(body.get("spec"), "spec", required=True)
    driver = read_string(spec.get("driver"), "spec.driver", required=True)
    pool = read_mapping(spec.get("pool"), "spec.pool", required=True)
    pool_name = read_string(pool.get("name"), "spec.pool.name", required=True)
    generation = _int_field(pool.get("generation"), "spec.pool.generation")
    count = _int_field(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount")
    if count < 1:
        raise Malformed("spec.pool.resourceSliceCount", f"= {count} is not >= 1")
    node = read_string(spec.get("nodeName"), "spec.nodeName")
    scope: SliceScope
    if node is not None:
        scope = "node"
    elif spec.get("allNodes") is True:
        scope = "all-nodes"
    elif spec.get("nodeSelector") is not None:
        scope = "node-selector"
    elif spec.get("perDeviceNodeSelection") is True:
        scope = "per-device"
    elif spec.get("sharedCounters"):
        scope = "node"  # a counters-only slice (1.35+): it belongs to its pool wherever that is
    else:
        raise Malformed(
            "spec", "names no nodeName, allNodes, nodeSelector or perDeviceNodeSelection"
        )
    raw_devices = read_sequence(spec.get("devices"), "spec.devices")
    if len(raw_devices) > _MAX_DEVICES * 4:
        raise Malformed("spec.devices", f"has {len(raw_devices)} devices")
    devices = tuple(_device(d, f"spec.devices[{i}]", shared) for i, d in enumerate(raw_devices))
    counter_sets = []
    for i, raw in enumerate(read_sequence(spec.get("sharedCounters"), "spec.sharedCounters")):
        where_set = f"spec.sharedCounters[{i}]"
        set_body = read_mapping(raw, where_set, required=True)
        set_name = read_string(set_body.get("name"), f"{where_set}.name", required=True)
        assert set_name is not None
        counter_sets.append(
            CounterSet(set_name, _quantities(set_body.get("counters"), where_set, shared))
        )
    assert name is not None and driver is not None and pool_name is not None
    return DraSlice(
        name=name,
        driver=driver,
        pool=pool_name,
        generation=generation,
        slice_count=count,
        scope=scope,
        node=node,
        devices=devices,
        counter_sets=tuple(counter_sets),
    )


def _read_class(item: object) -> DeviceClassInfo:
    body = read_mapping(item, "item", required=True)
    meta = read_mapping(body.get("metadata"), "metadata", required=True)
    name = read_string(meta.get("name"), "metadata.name", required=True)
    spec = read_mapping(body.get("spec"), "spec")
    selectors = []
    for i, raw in enumerate(read_sequence(spec.get("selectors"), "spec.selectors")):
        sel = read_mapping(raw, f"spec.selectors[{i}]", required=True)
        cel = read_mapping(sel.get("cel"), f"spec.selectors[{i}].cel", required=True)
        expression = read_string(
            cel.get("expression"), f"spec.selectors[{i}].cel.expression", required=True
        )
        assert expression is not None
        selectors.append(expression)
    extended = read_string(spec.get("extendedResourceName"), "spec.extendedResourceName")
    assert name is not None
    return DeviceClassInfo(name, tuple(selectors), extended)


def _claim_results(item: object) -> tuple[str, list[AllocatedDevice]]:
    body = read_mapping(item, "item", required=True)
    meta = read_mapping(body.get("metadata"), "metadata", required=True)
    name = read_string(meta.get("name"), "metadata.name", required=True)
    namespace = read_string(meta.get("namespace"), "metadata.namespace") or "default"
    claim = f"{namespace}/{name}"
    status = read_mapping(body.get("status"), "status")
    allocation = read_mapping(status.get("allocation"), "status.allocation")
    devices = read_mapping(allocation.get("devices"), "status.allocation.devices")
    out = []
    for i, raw in enumerate(
        read_sequence(devices.get("results"), "status.allocation.devices.results")
    ):
        where = f"status.allocation.devices.results[{i}]"
        result = read_mapping(raw, where, required=True)
        fields = {
            k: read_string(result.get(k), f"{where}.{k}", required=True)
            for k in ("driver", "pool", "device")
        }
        if result.get("adminAccess") is True:
            continue  # admin access takes nothing from ordinary claims
        out.append(
            AllocatedDevice(
                str(fields["driver"]),
                str(fields["pool"]),
                str(fields["device"]),
                claim,
                shared=result.get("shareID") is not None,
            )
        )
    return claim, out


def _pools_named(item: object) -> set[tuple[str, str]]:
    """The pools a claim's results name, however broken the rest of it."""
    out: set[tuple[str, str]] = set()
    status = item.get("status") if isinstance(item, Mapping) else None
    allocation = status.get("allocation") if isinstance(status, Mapping) else None
    devices = allocation.get("devices") if isinstance(allocation, Mapping) else None
    results = devices.get("results") if isinstance(devices, Mapping) else None
    for result in results if isinstance(results, list) else []:
        if isinstance(result, Mapping):
            driver, pool = result.get("driver"), result.get("pool")
            if isinstance(driver, str) and isinstance(pool, str):
                out.add((driver, pool))
    return out


def _assemble(
    slice_items: list[tuple[str, Any]] | None,
    slices_reason: str | None,
    class_items: list[tuple[str, Any]] | None,
    classes_reason: str | None,
    claim_items: list[tuple[str, Any]] | None,
    claims_reason: str | None,
    unknowns: list[Unknown],
) -> DraFacts:
    slices: list[DraSlice] = []
    bad_pools: set[tuple[str, str]] = set()
    shared = _Shared()
    for where, item in slice_items or []:
        try:
            slices.append(_read_slice(item, where, shared))
        except Malformed as bad:
            pool = _pool_of(item)
            if pool is None:
                slices_reason = slices_reason or (
                    f"{where} cannot be read ({bad.reason}) and names no pool: any node's "
                    "devices may be in it"
                )
                unknowns.append(Unknown(where, bad.reason))
            else:
                bad_pools.add(pool)
                unknowns.append(
                    Unknown(f"resourcepool/{pool[0]}/{pool[1]}", f"{where}: {bad.reason}")
                )
    classes: dict[str, DeviceClassInfo] = {}
    bad_classes: set[str] = set()
    for where, item in class_items or []:
        try:
            info = _read_class(item)
        except Malformed as bad:
            meta = item.get("metadata") if isinstance(item, Mapping) else None
            named = meta.get("name") if isinstance(meta, Mapping) else None
            label = named if isinstance(named, str) and named else where
            bad_classes.add(label)
            unknowns.append(Unknown(f"deviceclass/{label}", bad.reason))
            continue
        classes[info.name] = info
    allocated: list[AllocatedDevice] = []
    uncertain: set[tuple[str, str]] = set()
    for where, item in claim_items or []:
        try:
            _, results = _claim_results(item)
        except Malformed as bad:
            pools = _pools_named(item)
            if not pools:
                claims_reason = claims_reason or (
                    f"{where} cannot be read ({bad.reason}): which devices it holds is unknown"
                )
            uncertain.update(pools)
            unknowns.append(Unknown(where, bad.reason))
            continue
        allocated.extend(results)
    if slices_reason is not None:
        unknowns.append(Unknown("resourceslices", slices_reason))
    if classes_reason is not None:
        unknowns.append(Unknown("deviceclasses", classes_reason))
    if claims_reason is not None:
        unknowns.append(Unknown("resourceclaims", claims_reason))
    return DraFacts(
        slices=tuple(sorted(slices, key=lambda s: (s.driver, s.pool, s.name))),
        classes=None if classes_reason is not None else tuple(classes[n] for n in sorted(classes)),
        allocated=tuple(sorted(set(allocated))),
        slices_unknown=slices_reason,
        classes_unknown=classes_reason,
        claims_unknown=claims_reason,
        bad_pools=tuple(sorted(bad_pools)),
        bad_classes=tuple(sorted(bad_classes)),
        uncertain_pools=tuple(sorted(uncertain)),
        unknowns=tuple(sorted(set(unknowns), key=lambda u: (u.what, u.reason))),
    )


def parse_dra(
    slices_json: object,
    classes_json: object,
    claims_json: object,
    *,
    slices_source: str = "resourceslices.json",
    classes_source: str = "deviceclasses.json",
    claims_source: str = "resourceclaims.json",
) -> DraFacts:
    """The DRA facts of the three dumps (each parsed, as text, or ``None`` when missing)."""
    unknowns: list[Unknown] = []
    slice_items, slices_reason, more = items_of(slices_json, slices_source, RESOURCE_SLICE_LIST)
    unknowns.extend(more)
    class_items, classes_reason, more = items_of(classes_json, classes_source, DEVICE_CLASS_LIST)
    unknowns.extend(more)
    claim_items, claims_reason, more = items_of(claims_json, claims_source, RESOURCE_CLAIM_LIST)
    unknowns.extend(more)
    return _assemble(
        slice_items,
        slices_reason,
        class_items,
        classes_reason,
        claim_items,
        claims_reason,
        unknowns,
    )


def parse_dra_list(doc: object, *, source: str = "cluster.json") -> DraFacts:
    """The DRA facts of one ``List`` (``kubectl get nodes,pods,resourceslices,deviceclasses,
    resourceclaims -A -o json``). A kind with no items is unknown: kubectl prints the kinds
    it could list, so "no ResourceClaim items" may be a refusal, never "none allocated"."""
    unknowns: list[Unknown] = []
    found: dict[str, list[tuple[str, Any]] | None] = {}
    reasons: dict[str, str | None] = {}
    for kind in (RESOURCE_SLICE_LIST, DEVICE_CLASS_LIST, RESOURCE_CLAIM_LIST):
        items, reason, _ = items_of(doc, source, kind)
        if items is not None:  # in a List, only items that say they are of this kind
            items = [
                (w, i) for w, i in items if isinstance(i, Mapping) and i.get("kind") == kind.item
            ]
        if items is not None and not items:
            items, reason = (
                None,
                f"{source} holds no {kind.item} items (dump them with `{kind.command}`)",
            )
        found[kind.item], reasons[kind.item] = items, reason
    return _assemble(
        found["ResourceSlice"],
        reasons["ResourceSlice"],
        found["DeviceClass"],
        reasons["DeviceClass"],
        found["ResourceClaim"],
        reasons["ResourceClaim"],
        unknowns,
    )
