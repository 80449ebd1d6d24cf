"""Kubernetes JSON → the facts of a :class:`~vfcore.cluster.ClusterSnapshot`, honestly.

What a user can dump with kubectl becomes a snapshot::

    kubectl get nodes -o json            > nodes.json
    kubectl get pods -A -o json          > pods.json
    kubectl get runtimeclasses -o json   > runtimeclasses.json   # optional

or one file: ``kubectl get nodes,pods,runtimeclasses -A -o json > cluster.json``
(a ``List``). Each document may be given parsed (a dict), as text (``str`` or
``bytes``), or as ``None`` when the file is missing. Nothing here reads a file.
:func:`parse_kubernetes` and :func:`parse_list` return :class:`ClusterFacts`;
:meth:`vfcore.cluster.ClusterSnapshot.from_kubernetes`,
:func:`vfcore.cluster.snapshot_from_kubernetes` and
:func:`vfcore.cluster.snapshot_from_list` turn them into a snapshot. This
module knows the node types only (:mod:`vfcore.cluster.nodes`), never the
snapshot, so the two do not import each other.

**Unknown, never empty.** A document that is missing, empty, not JSON, not an
object, a Kubernetes ``Status`` (what a refused request returns), a kubectl
error message, a list of the wrong kind, or a partial list (``metadata.continue``
set) is *unknown*, with a reason naming the file and the cause:

- nodes → ``nodes_unknown=<reason>``, no nodes, and ``Unknown("nodes", reason)``;
- pods → every node gets ``requested=None`` and ``unknown_reason=<reason>``,
  and ``Unknown("pods", reason)`` is listed;
- runtime classes → ``runtime_classes=None``; a missing file adds no unknown
  (the file is optional), a bad one adds ``Unknown("runtimeclasses", reason)``.

An *empty but valid* ``PodList`` (``"items": []``) is a real, known "nothing
is bound".

**Malformed objects** never raise. A node whose name, labels, taints,
conditions, ``spec.unschedulable`` or ``status.allocatable`` cannot be read is
left out of ``nodes`` (it cannot be planned on) and listed as
``Unknown("node/<name>", "<field> = <value> ...")``. A pod that cannot be read
and is bound to node X makes X's occupancy unknown, and is listed as
``Unknown("pod/<ns>/<name>", ...)``. A GPU Feature Discovery label with a bad
value leaves that GPU fact ``None`` and is listed; the node stays.

**Pod requests** follow ``resource.PodRequests`` (k8s.io/component-helpers,
1.29+ with native sidecars), per resource:

- a container's request is ``resources.requests``; a resource given only in
  ``resources.limits`` defaults its request to the limit (API defaulting);
- regular containers are summed; a sidecar (an init container with
  ``restartPolicy: Always``) is added to that sum too;
- each ordinary init container needs its own request plus every sidecar
  declared *before* it; the pod needs the max of that and the sum;
- pod-level ``spec.resources`` (cpu, memory, hugepages) replaces the
  aggregate for those resources; ``spec.overhead`` is added last.

Worked example: containers ``cpu 1`` + ``cpu 2``, init container ``cpu 4``,
sidecar ``cpu 500m`` declared first, overhead ``cpu 250m`` → sum
``1 + 2 + 0.5 = 3.5``, init ``4 + 0.5 = 4.5``, max ``4.5``, plus overhead
→ ``4750`` millicores. Only pods bound to a node (``spec.nodeName``) and not in
phase ``Succeeded`` or ``Failed`` count; each adds 1 to ``pods``. Pods bound to
a node that is not in the node list are ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from vfcore.cluster.nodes import (
    GpuInfo,
    NodeState,
    RuntimeClassInfo,
    Taint,
    Unknown,
    UnreadableNode,
)
from vfcore.errors import InvalidInputError
from vfcore.quantity import CPU, MAX_UNITS, MEMORY, PODS, canonical_units

__all__ = [
    "ClusterFacts",
    "gpu_info_from_labels",
    "parse_kubernetes",
    "parse_list",
    "pod_requests",
]

_TERMINAL_PHASES = ("Succeeded", "Failed")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_SHARING_STRATEGIES = ("none", "mps", "time-slicing")
_MIG_STRATEGIES = ("none", "single", "mixed")
_GPU_RESOURCE = "nvidia.com/gpu"
_MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
_KUBECTL_REFUSAL = re.compile(r"^Error from server \((?P<reason>[^)]*)\):\s*(?P<message>.*)$")
_WHOLE_NUMBER = re.compile(r"^[0-9]+$")


# -- small pieces -------------------------------------------------------------


class _Malformed(Exception):
    """One field of one object cannot be read; caught inside this module, never escapes."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.reason = f"{field} {problem}"


def _describe(value: object) -> str:
    """A short, type-revealing description of a JSON value for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(value: object, limit: int = 60) -> str:
    if isinstance(value, int) and value.bit_length() > 128:  # repr of a 5,000-digit int fails
        return f"<an integer of about 10**{int(value.bit_length() * 0.30103)}>"
    return _clip(repr(value), limit)


def _mapping(value: object, field: str, *, required: bool = False) -> Mapping[str, Any]:
    if value is None:
        if required:
            raise _Malformed(field, "is missing")
        return {}
    if not isinstance(value, Mapping):
        raise _Malformed(field, f"is {_describe(value)}, not an object")
    return value


def _sequence(value: object, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Malformed(field, f"is {_describe(value)}, not a list")
    return value


def _string(value: object, field: str, *, required: bool = False) -> str | None:
    if value is None or value == "":
        if required:
            raise _Malformed(field, "is missing")
        return None
    if not isinstance(value, str):
        raise _Malformed(field, f"= {_short(value)} is {_describe(value)}, not a string")
    return value


def _quantity(resource: str, value: object, field: str) -> int:
    """One quantity in canonical units; floats go through their shortest decimal form."""
    given: object = repr(value) if isinstance(value, float) else value
    try:
        units = canonical_units(resource, given)
    except InvalidInputError as exc:
        if exc.rule == "quantity-out-of-range":
            raise _Malformed(
                field, f"= {_short(value)} is over vfcore's limit of 2**50 units"
            ) from None
        raise _Malformed(field, f"= {_short(value)} is not a Kubernetes quantity") from None
    if units < 0:
        raise _Malformed(field, f"= {_short(value)} is negative")
    return units


def _resource_list(value: object, field: str) -> dict[str, int]:
    """A ``ResourceList`` (``{"cpu": "500m", ...}``) in canonical units."""
    out: dict[str, int] = {}
    for name, raw in sorted(_mapping(value, field).items()):
        if not isinstance(name, str) or not name:
            raise _Malformed(field, f"has a resource name {_short(name)} that is not a string")
        out[name] = _quantity(name, raw, f'{field}["{name}"]')
    return out


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, units in more.items():
        total[name] = total.get(name, 0) + units


def _max_into(total: dict[str, int], other: Mapping[str, int]) -> None:
    for name, units in other.items():
        total[name] = max(total.get(name, 0), units)


# -- pods -----------------------------------------------------------------------


def _container_requests(container: object, field: str) -> tuple[dict[str, int], bool]:
    """A container's requests (limits-only resources default to the limit) and whether it is a sidecar."""
    body = _mapping(container, field, required=True)
    resources = _mapping(body.get("resources"), f"{field}.resources")
    requests = _resource_list(resources.get("requests"), f"{field}.resources.requests")
    limits = _resource_list(resources.get("limits"), f"{field}.resources.limits")
    merged = {**limits, **requests}
    policy = body.get("restartPolicy")
    if policy is not None and not isinstance(policy, str):
        raise _Malformed(f"{field}.restartPolicy", f"= {_short(policy)} is not a string")
    return merged, policy == "Always"


def _supports_pod_level(resource: str) -> bool:
    return resource in (CPU, MEMORY) or resource.startswith("hugepages-")


def _requests_of(pod: Mapping[str, Any]) -> dict[str, int]:
    spec = _mapping(pod.get("spec"), "spec", required=True)
    total: dict[str, int] = {}
    for i, container in enumerate(_sequence(spec.get("containers"), "spec.containers")):
        requests, _ = _container_requests(container, f"spec.containers[{i}]")
        _add(total, requests)
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, container in enumerate(_sequence(spec.get("initContainers"), "spec.initContainers")):
        requests, is_sidecar = _container_requests(container, f"spec.initContainers[{i}]")
        if is_sidecar:
            _add(total, requests)
            _add(sidecars, requests)
            _max_into(init_peak, sidecars)
        else:
            during = dict(requests)
            _add(during, sidecars)
            _max_into(init_peak, during)
    _max_into(total, init_peak)
    pod_level = _mapping(spec.get("resources"), "spec.resources")
    if pod_level:
        level_requests = _resource_list(pod_level.get("requests"), "spec.resources.requests")
        level_limits = _resource_list(pod_level.get("limits"), "spec.resources.limits")
        for name, units in sorted({**level_limits, **level_requests}.items()):
            if _supports_pod_level(name):
                total[name] = units
    _add(total, _resource_list(spec.get("overhead"), "spec.overhead"))
    return {name: units for name, units in sorted(total.items()) if units}


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """What the scheduler counts for one pod, in canonical units (``pods`` not included).

    Containers summed, sidecars (init containers with ``restartPolicy: Always``)
    added, each ordinary init container maxed with the sidecars declared before
    it, pod-level resources for cpu/memory, plus overhead; a resource given only
    as a limit requests the limit. Zero-valued resources are left out.

    >>> pod = {"spec": {"containers": [
    ...     {"resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}},
    ...     {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
    ...   "initContainers": [{"resources": {"requests": {"cpu": "4"}}}],
    ...   "overhead": {"cpu": "250m"}}}
    >>> pod_requests(pod)
    {'cpu': 4250, 'memory': 1073741824, 'nvidia.com/gpu': 2}

    Raises :class:`~vfcore.InvalidInputError` (``invalid-pod``) naming the
    field and value when the pod cannot be read.
    """
    try:
        return _requests_of(_mapping(pod, "pod", required=True))
    except _Malformed as bad:
        raise InvalidInputError(
            "invalid-pod",
            f"the pod cannot be read: {bad.reason}",
            "give the pod as `kubectl get pod NAME -o json` prints it",
        ) from None


@dataclass(frozen=True, slots=True)
class _PodOutcome:
    """One pod item: where it is bound and what it requests, or why it cannot be read."""

    what: str
    node: str | None
    requests: dict[str, int] | None
    problem: str | None


def _read_pod(item: Mapping[str, Any], where: str) -> _PodOutcome | None:
    """``None`` for a pod that does not count (finished, or not bound to a node)."""
    what = where
    node: str | None = None
    try:
        spec = _mapping(item.get("spec"), "spec")
        node = _string(spec.get("nodeName"), "spec.nodeName")
        status = _mapping(item.get("status"), "status")
        phase = _string(status.get("phase"), "status.phase")
        if phase in _TERMINAL_PHASES or node is None:
            return None
        meta = _mapping(item.get("metadata"), "metadata", required=True)
        namespace = _string(meta.get("namespace"), "metadata.namespace") or "default"
        name = _string(meta.get("name"), "metadata.name", required=True)
        what = f"pod/{namespace}/{name}"
        return _PodOutcome(what, node, _requests_of(item), None)
    except _Malformed as bad:
        return _PodOutcome(what, node, None, bad.reason)


# -- GPU Feature Discovery labels -------------------------------------------


def _whole(labels: Mapping[str, str], key: str, unit: str, problems: list[str]) -> int | None:
    raw = labels.get(key)
    if raw is None:
        return None
    if not _WHOLE_NUMBER.match(raw.strip()):
        problems.append(f"label {key} = {_short(raw)} is not a whole number{unit}")
        return None
    return int(raw.strip())


def _mb_to_mib(megabytes: int) -> int:
    """MIG memory labels are in MB (10^6 bytes); vfcore keeps MiB, rounded down (never overstated)."""
    return megabytes * 10**6 // 2**20


def _is_gpu_key(key: str) -> bool:
    return key.startswith(("nvidia.com/gpu.", "nvidia.com/mig.", _MIG_RESOURCE_PREFIX))


def _gpu_info(
    labels: Mapping[str, str], allocatable: Mapping[str, int]
) -> tuple[GpuInfo | None, list[str]]:
    """GPU facts from GFD labels, cross-checked with allocatable MIG resources; and problems."""
    has_gpu = any(_is_gpu_key(k) for k in labels) or any(
        units > 0 and (k == _GPU_RESOURCE or _is_gpu_key(k)) for k, units in allocatable.items()
    )
    if not has_gpu:
        return None, []
    problems: list[str] = []

    mig_strategy = labels.get("nvidia.com/mig.strategy")
    if mig_strategy is not None and mig_strategy not in _MIG_STRATEGIES:
        problems.append(
            f"label nvidia.com/mig.strategy = {_short(mig_strategy)} is not one of "
            f"{', '.join(_MIG_STRATEGIES)}"
        )

    product = labels.get("nvidia.com/gpu.product")
    if product is not None and product.endswith("-MIG-INVALID"):
        problems.append(
            f"label nvidia.com/gpu.product = {product!r}: GPU Feature Discovery reports an "
            "invalid MIG configuration for the single strategy (mixed MIG modes or profiles)"
        )

    memory_unit = " (MB, a MIG device)" if mig_strategy == "single" else " (MiB)"
    memory = _whole(labels, "nvidia.com/gpu.memory", memory_unit, problems)
    if memory is not None and mig_strategy == "single":
        memory = _mb_to_mib(memory)
    count = _whole(labels, "nvidia.com/gpu.count", "", problems)

    replicas = _whole(labels, "nvidia.com/gpu.replicas", "", problems)
    if replicas == 0:
        problems.append("label nvidia.com/gpu.replicas = '0' is not a positive number")
        replicas = None
    sharing = labels.get("nvidia.com/gpu.sharing-strategy")
    if sharing is None:
        # Older GFD releases label only the replicas; more than one means time-slicing.
        sharing = "time-slicing" if (replicas or 1) > 1 else "none"
    elif sharing not in _SHARING_STRATEGIES:
        problems.append(
            f"label nvidia.com/gpu.sharing-strategy = {_short(sharing)} is not one of "
            f"{', '.join(_SHARING_STRATEGIES)}"
        )

    capable_raw = labels.get("nvidia.com/mig.capable")
    mig_capable = {"true": True, "false": False}.get(capable_raw or "")
    if capable_raw is not None and mig_capable is None:
        problems.append(f"label nvidia.com/mig.capable = {_short(capable_raw)} is not true/false")

    profiles = _mig_profiles(labels, allocatable, problems)
    info = GpuInfo(
        product=product,
        memory_mib=memory,
        count=count,
        sharing=sharing,
        replicas=replicas or 1,
        mig_capable=mig_capable,
        mig_strategy=mig_strategy,
        mig_profiles=profiles,
    )
    return info, problems


def _mig_profiles(
    labels: Mapping[str, str], allocatable: Mapping[str, int], problems: list[str]
) -> tuple[tuple[str, int], ...]:
    """Mixed-strategy profiles: ``nvidia.com/mig-<p>.count`` labels, else allocatable ``nvidia.com/mig-<p>``.

    Where both exist they must agree (label count × the profile's replicas label
    = allocatable); a disagreement (a reconfiguration in flight, an unhealthy MIG
    device) is reported. The label count is kept: it is the physical layout,
    while the scheduler keeps using allocatable.
    """
    from_labels: dict[str, int] = {}
    for key in sorted(labels):
        if key.startswith(_MIG_RESOURCE_PREFIX) and key.endswith(".count"):
            profile = key[len(_MIG_RESOURCE_PREFIX) : -len(".count")]
            units = _whole(labels, key, "", problems)
            if profile and units is not None:
                from_labels[profile] = units
    from_allocatable = {
        name[len(_MIG_RESOURCE_PREFIX) :]: units
        for name, units in sorted(allocatable.items())
        if name.startswith(_MIG_RESOURCE_PREFIX) and len(name) > len(_MIG_RESOURCE_PREFIX)
    }
    if not from_labels:
        return tuple(sorted((p, n) for p, n in from_allocatable.items() if n > 0))
    for profile in sorted(set(from_labels) | set(from_allocatable)):
        count = from_labels.get(profile)
        advertised = from_allocatable.get(profile)
        per = _whole(labels, f"{_MIG_RESOURCE_PREFIX}{profile}.replicas", "", problems) or 1
        if count is None:
            problems.append(
                f"allocatable {_MIG_RESOURCE_PREFIX}{profile} = {advertised} has no "
                f"{_MIG_RESOURCE_PREFIX}{profile}.count label"
            )
        elif (advertised or 0) != count * per:
            shared = f" × {per} replicas" if per != 1 else ""
            problems.append(
                f"label {_MIG_RESOURCE_PREFIX}{profile}.count = {count}{shared} but allocatable "
                f"{_MIG_RESOURCE_PREFIX}{profile} = {advertised or 0}: GFD and the device plugin "
                "disagree (a MIG reconfiguration in progress, or an unhealthy MIG device); "
                "the scheduler uses allocatable"
            )
    return tuple(sorted(from_labels.items()))


def gpu_info_from_labels(
    labels: Mapping[str, str], allocatable: Mapping[str, int] | None = None
) -> GpuInfo | None:
    """GPU facts from GPU Feature Discovery labels (``None`` for a node without GPUs).

    ``nvidia.com/gpu.memory`` is MiB, except under the single MIG strategy
    where it is a MIG device's memory in MB (converted to MiB, rounded down).
    Label values that do not parse leave the fact ``None``.

    >>> info = gpu_info_from_labels({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    ...     "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.count": "4",
    ...     "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"})
    >>> info.memory_mib, info.count, info.sharing, info.replicas
    (81559, 4, 'time-slicing', 4)
    """
    info, _ = _gpu_info(labels, allocatable or {})
    return info


# -- nodes ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _NodeOutcome:
    """One node item: its state, or — when it cannot be read — what bounds it; and problems."""

    what: str
    name: str | None
    state: NodeState | None
    problems: tuple[str, ...]
    unreadable: UnreadableNode | None = None


def _labels(value: object) -> dict[str, str]:
    labels: dict[str, str] = {}
    for key, text in _mapping(value, "metadata.labels").items():
        if not isinstance(text, str):
            raise _Malformed(
                f'metadata.labels["{key}"]', f"= {_short(text)} is {_describe(text)}, not a string"
            )
        labels[str(key)] = text
    return labels


def _taints(value: object) -> tuple[Taint, ...]:
    taints: list[Taint] = []
    for i, raw in enumerate(_sequence(value, "spec.taints")):
        field = f"spec.taints[{i}]"
        body = _mapping(raw, field, required=True)
        key = _string(body.get("key"), f"{field}.key", required=True)
        taint_value = _string(body.get("value"), f"{field}.value") or ""
        effect = _string(body.get("effect"), f"{field}.effect", required=True)
        if effect not in _TAINT_EFFECTS:
            raise _Malformed(
                f"{field}.effect", f"= {effect!r} is not one of {', '.join(_TAINT_EFFECTS)}"
            )
        assert key is not None and effect is not None
        taints.append(Taint(key, taint_value, effect))
    return tuple(taints)


def _ready(status: Mapping[str, Any]) -> bool:
    for i, raw in enumerate(_sequence(status.get("conditions"), "status.conditions")):
        condition = _mapping(raw, f"status.conditions[{i}]", required=True)
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _lenient_resources(
    value: object, field: str, *, missing: str = "is missing"
) -> tuple[dict[str, int] | None, list[tuple[str, str]]]:
    """A ``ResourceList`` read entry by entry: the readable entries, and each bad one.

    ``(None, [problem])`` when the list itself is missing or not an object;
    otherwise the readable entries and ``(resource, problem)`` for every entry
    that is not a quantity, is negative or is over :data:`~vfcore.quantity.MAX_UNITS`.
    """
    if value is None:
        return None, [("", f"{field} {missing}")]
    if not isinstance(value, Mapping):
        return None, [("", f"{field} is {_describe(value)}, not an object")]
    readable: dict[str, int] = {}
    bad: list[tuple[str, str]] = []
    for name, raw in sorted(value.items(), key=lambda kv: str(kv[0])):
        if not isinstance(name, str) or not name:
            bad.append(("", f"{field} has a resource name {_short(name)} that is not a string"))
            continue
        try:
            readable[name] = _quantity(name, raw, f'{field}["{name}"]')
        except _Malformed as problem:
            bad.append((name, problem.reason))
    return readable, bad


def _upper_bound(
    allocatable: Mapping[str, int] | None,
    unreadable: Iterable[str],
    status: Mapping[str, Any],
) -> dict[str, int] | None:
    """The most this node's allocatable can be, or ``None`` when nothing bounds it.

    Kubelet computes allocatable as capacity minus reservations, so
    ``status.capacity`` bounds every entry that cannot be read; an entry that
    capacity cannot bound either is :data:`MAX_UNITS` (unbounded, for the
    solver). With no readable allocatable at all, capacity's entries are the
    only resources the node can have; with neither, nothing bounds the node.
    """
    capacity, capacity_bad = _lenient_resources(status.get("capacity"), "status.capacity")
    capacity_unbounded = {name for name, _ in capacity_bad if name}
    if allocatable is None:
        if capacity is None or any(not name for name, _ in capacity_bad):
            return None
        bound = dict(capacity)
        bound.update(dict.fromkeys(capacity_unbounded, MAX_UNITS))
    else:
        bound = dict(allocatable)
        for name in unreadable:
            if not name:
                return None  # an entry with no readable name could be any resource
            bound[name] = (capacity or {}).get(name, MAX_UNITS)
    if PODS not in bound:
        bound[PODS] = MAX_UNITS
    return bound


def _read_node(item: object, where: str) -> _NodeOutcome:
    """One node item; an unreadable one comes back with its upper bound (see UnreadableNode)."""
    what = where
    name: str | None = None
    if not isinstance(item, Mapping):
        reason = f"is {_describe(item)}, not a Kubernetes object"
        return _NodeOutcome(what, None, None, (reason,), UnreadableNode(where, reason))
    try:
        meta = _mapping(item.get("metadata"), "metadata", required=True)
        name = _string(meta.get("name"), "metadata.name", required=True)
        what = f"node/{name}"
        labels = _labels(meta.get("labels"))
        spec = _mapping(item.get("spec"), "spec")
        unschedulable = spec.get("unschedulable", False)
        if not isinstance(unschedulable, bool):
            raise _Malformed("spec.unschedulable", f"= {_short(unschedulable)} is not a boolean")
        taints = _taints(spec.get("taints"))
        status = _mapping(item.get("status"), "status")
        ready = _ready(status)
    except _Malformed as bad:
        return _NodeOutcome(
            what, name, None, (bad.reason,), UnreadableNode(name or where, bad.reason)
        )
    assert name is not None
    allocatable, bad_entries = _lenient_resources(status.get("allocatable"), "status.allocatable")
    if allocatable is not None and not bad_entries and PODS not in allocatable:
        # kube-scheduler reads a missing entry as 0 pods allowed ("Too many pods"), but kubelet
        # always sets it (--max-pods, 110 by default): a dump without it is incomplete, not a
        # node that takes no pods. Unknown, bounded by status.capacity's pods if given.
        bad_entries = [
            (
                PODS,
                "status.allocatable has no pods entry (kubelet always sets one; "
                "how many pods the node takes is unknown)",
            )
        ]
    if bad_entries:
        problems = tuple(problem for _, problem in bad_entries)
        bound_alloc = _upper_bound(allocatable, (n for n, _ in bad_entries), status)
        bound = None
        if bound_alloc is not None:
            gpu, _ = _gpu_info(labels, bound_alloc)  # label problems: the node is unknown anyway
            bound = NodeState(
                name=name,
                allocatable=tuple(bound_alloc.items()),
                requested=(),
                ready=ready,
                unschedulable=unschedulable,
                labels=tuple(labels.items()),
                taints=taints,
                gpu=gpu,
            )
        return _NodeOutcome(
            what, name, None, problems, UnreadableNode(name, "; ".join(problems), bound)
        )
    assert allocatable is not None
    gpu, label_problems = _gpu_info(labels, allocatable)
    state = NodeState(
        name=str(name),
        allocatable=tuple(allocatable.items()),
        requested=(),
        ready=ready,
        unschedulable=unschedulable,
        labels=tuple(labels.items()),
        taints=taints,
        gpu=gpu,
    )
    return _NodeOutcome(what, name, state, tuple(label_problems))


# -- documents ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Kind:
    """What one document should hold: ``Node`` items in a ``NodeList``, …"""

    item: str  # Node
    noun: str  # node
    command: str  # kubectl get nodes -o json

    @property
    def list_kind(self) -> str:
        return f"{self.item}List"


_NODES = _Kind("Node", "node", "kubectl get nodes -o json")
_PODS = _Kind("Pod", "pod", "kubectl get pods -A -o json")
_RUNTIME_CLASSES = _Kind("RuntimeClass", "runtime class", "kubectl get runtimeclasses -o json")


def _decode(raw: bytes) -> str:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):  # PowerShell's `>` writes UTF-16
        return raw.decode("utf-16")
    return raw.decode("utf-8-sig")


def _parse(doc: object, source: str, noun: str) -> tuple[Mapping[str, Any] | None, str | None]:
    """The document as an object, or the reason it cannot be one."""
    if doc is None:
        return None, f"{source} is missing"
    if isinstance(doc, (bytes, bytearray, memoryview)):
        try:
            doc = _decode(bytes(doc))
        except UnicodeDecodeError as exc:
            return None, f"{source} is not text: {exc.reason} at byte {exc.start}"
    if isinstance(doc, str):
        text = doc.lstrip("\ufeff").strip()
        if not text:
            return None, f"{source} is empty"
        first_line = text.splitlines()[0].strip()
        refusal = _KUBECTL_REFUSAL.match(first_line)
        if refusal:
            return None, (
                f"the API refused the {noun} listing: {refusal['reason']}: {refusal['message']}"
            )
        if first_line.startswith("error:"):
            return None, f"{source} holds a kubectl error, not JSON: {_clip(first_line, 300)}"
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, f"{source} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        except (ValueError, RecursionError) as exc:
            return None, f"{source} is not JSON: {exc}"
    if not isinstance(doc, Mapping):
        return None, f"{source} is not a Kubernetes object: it holds {_describe(doc)}"
    return doc, None


def _status_reason(doc: Mapping[str, Any], noun: str) -> str:
    reason = doc.get("reason") or doc.get("code") or doc.get("status") or "Failure"
    message = doc.get("message")
    detail = f"{reason}: {message}" if message else str(reason)
    return f"the API refused the {noun} listing: {detail}"


def _items(
    doc: object, source: str, kind: _Kind
) -> tuple[list[tuple[str, Any]] | None, str | None, list[Unknown]]:
    """The items of ``kind`` in one document: ``(items, None, unknowns)`` or ``(None, reason, [])``."""
    parsed, reason = _parse(doc, source, kind.noun)
    if parsed is None:
        return None, reason, []
    doc_kind = parsed.get("kind")
    if doc_kind == "Status":
        return None, _status_reason(parsed, kind.noun), []
    if doc_kind not in (kind.list_kind, "List", None):
        hint = f"dump it with `{kind.command}`"
        shown = doc_kind if isinstance(doc_kind, str) else _short(doc_kind)
        what = f"one {shown}" if doc_kind == kind.item else f"a {shown}"
        return None, f"{source} holds {what}, not a {kind.list_kind} ({hint})", []
    raw_items = parsed.get("items")
    if not isinstance(raw_items, list):
        return None, f"{source} has no items list (dump it with `{kind.command}`)", []
    meta = parsed.get("metadata")
    if isinstance(meta, Mapping) and (meta.get("continue") or meta.get("remainingItemCount")):
        return (
            None,
            (
                f"{source} is one page of a longer list (metadata.continue is set); "
                f"dump every page with `{kind.command}`"
            ),
            [],
        )
    found: list[tuple[str, Any]] = []
    unknowns: list[Unknown] = []
    foreign: list[str] = []
    for i, item in enumerate(raw_items):
        where = f"{source} items[{i}]"
        if not isinstance(item, Mapping):
            if kind is _NODES and doc_kind == kind.list_kind:
                found.append((where, item))  # a NodeList item is a node, readable or not
            else:
                unknowns.append(Unknown(where, f"is {_describe(item)}, not a Kubernetes object"))
            continue
        item_kind = item.get("kind") or (kind.item if doc_kind == kind.list_kind else None)
        if item_kind is None:
            item_kind = _guess_kind(item)
        if item_kind == kind.item:
            found.append((where, item))
        elif item_kind is None:
            unknowns.append(Unknown(where, "has no kind and is not recognisable"))
        else:
            foreign.append(str(item_kind))
    if doc_kind == "List" and foreign and not found:
        kinds = ", ".join(sorted(set(foreign)))
        return None, f"{source} holds a List of {kinds} with no {kind.item} items", []
    return found, None, unknowns


def _guess_kind(item: Mapping[str, Any]) -> str | None:
    """The kind of a kind-less item in a ``List``, from its shape."""
    spec = item.get("spec")
    status = item.get("status")
    if isinstance(spec, Mapping) and "containers" in spec:
        return "Pod"
    if isinstance(status, Mapping) and ("allocatable" in status or "nodeInfo" in status):
        return "Node"
    if "handler" in item:
        return "RuntimeClass"
    return None


def _runtime_classes(
    items: Iterable[tuple[str, Mapping[str, Any]]],
) -> tuple[tuple[RuntimeClassInfo, ...], list[Unknown]]:
    found: dict[str, RuntimeClassInfo] = {}
    unknowns: list[Unknown] = []
    for where, item in items:
        what = where
        try:
            meta = _mapping(item.get("metadata"), "metadata", required=True)
            name = _string(meta.get("name"), "metadata.name", required=True)
            what = f"runtimeclass/{name}"
            handler = _string(item.get("handler"), "handler", required=True)
        except _Malformed as bad:
            unknowns.append(Unknown(what, bad.reason))
            continue
        assert name is not None and handler is not None
        found[name] = RuntimeClassInfo(name, handler)
    return tuple(found[n] for n in sorted(found)), unknowns


# -- assembling a snapshot ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What a dump says about a cluster: the fields of a ``ClusterSnapshot``, in order.

    :class:`vfcore.cluster.ClusterSnapshot` is built from these; see it for
    what each field means.
    """

    nodes: tuple[NodeState, ...]
    unknowns: tuple[Unknown, ...]
    nodes_unknown: str | None
    runtime_classes: tuple[RuntimeClassInfo, ...] | None
    unreadable_nodes: tuple[UnreadableNode, ...]


def _assemble(
    node_items: list[tuple[str, Any]] | None,
    nodes_reason: str | None,
    pod_items: list[tuple[str, Any]] | None,
    pods_reason: str | None,
    runtime_items: list[tuple[str, Any]] | None,
    runtime_reason: str | None,
    unknowns: list[Unknown],
) -> ClusterFacts:
    if nodes_reason is not None:
        unknowns.append(Unknown("nodes", nodes_reason))
    if pods_reason is not None:
        unknowns.append(Unknown("pods", pods_reason))
    if runtime_reason is not None:
        unknowns.append(Unknown("runtimeclasses", runtime_reason))

    versions: dict[str, list[_NodeOutcome]] = {}
    unreadable: dict[str, UnreadableNode] = {}
    for where, item in node_items or []:
        outcome = _read_node(item, where)
        unknowns.extend(Unknown(outcome.what, p) for p in outcome.problems)
        if outcome.name is not None:
            versions.setdefault(outcome.name, []).append(outcome)
        elif outcome.unreadable is not None:  # not even a name: still a node that exists
            unreadable[outcome.unreadable.name] = outcome.unreadable
    states: dict[str, NodeState] = {}
    for name, outcomes in sorted(versions.items()):
        first = outcomes[0]
        if any((o.state, o.unreadable) != (first.state, first.unreadable) for o in outcomes):
            unknowns.append(
                Unknown(f"node/{name}", "is listed twice with different contents; left out")
            )
            unreadable[name] = UnreadableNode(
                name, "is listed twice with different contents: which one holds is unknown"
            )
        elif first.state is not None:
            states[name] = first.state
        elif first.unreadable is not None:
            unreadable[name] = first.unreadable

    requested: dict[str, dict[str, int]] = {name: {PODS: 0} for name in states}
    broken: dict[str, list[str]] = {}
    orphans: dict[str, list[str]] = {}
    for where, item in pod_items or []:
        pod = _read_pod(item, where)
        if pod is None:
            continue
        if pod.node is not None and pod.node not in states and pod.node not in unreadable:
            orphans.setdefault(pod.node, []).append(pod.what)
        if pod.problem is not None:
            bound = pod.node if pod.node in states else None
            consequence = f"; node {bound}'s occupancy is unknown" if bound else ""
            unknowns.append(Unknown(pod.what, pod.problem + consequence))
            if bound is not None:
                broken.setdefault(bound, []).append(f"{pod.what} cannot be read: {pod.problem}")
            continue
        if pod.node not in states or pod.requests is None:
            continue  # an unreadable node, or one missing from the node list (below)
        totals = requested[pod.node]
        _add(totals, pod.requests)
        totals[PODS] += 1
    if nodes_reason is None:
        for name, pod_names in sorted(orphans.items()):
            shown = ", ".join(sorted(pod_names)[:3]) + ("…" if len(pod_names) > 3 else "")
            reason = (
                f"is not in the node list, yet {len(pod_names)} pod(s) are bound to it "
                f"({shown}): the node list may be partial or stale, so what this node "
                "holds is unknown"
            )
            unknowns.append(Unknown(f"node/{name}", reason))
            unreadable[name] = UnreadableNode(name, reason)

    nodes: list[NodeState] = []
    for name, state in sorted(states.items()):
        if pods_reason is not None:
            nodes.append(_unknown_occupancy(state, pods_reason))
        elif name in broken:
            nodes.append(_unknown_occupancy(state, "; ".join(sorted(broken[name]))))
        else:
            nodes.append(_with_requested(state, requested[name]))

    runtime_classes: tuple[RuntimeClassInfo, ...] | None = None
    if runtime_items is not None:
        runtime_classes, bad_classes = _runtime_classes(runtime_items)
        unknowns.extend(bad_classes)

    return ClusterFacts(
        nodes=() if nodes_reason is not None else tuple(nodes),
        unknowns=tuple(sorted(set(unknowns), key=lambda u: (u.what, u.reason))),
        nodes_unknown=nodes_reason,
        runtime_classes=runtime_classes,
        unreadable_nodes=() if nodes_reason is not None else tuple(unreadable.values()),
    )


def _unknown_occupancy(state: NodeState, reason: str) -> NodeState:
    return replace(state, requested=None, unknown_reason=reason)


def _with_requested(state: NodeState, totals: Mapping[str, int]) -> NodeState:
    kept = tuple((k, v) for k, v in sorted(totals.items()) if v or k == PODS)
    return replace(state, requested=kept, unknown_reason=None)


def parse_kubernetes(
    nodes_json: object,
    pods_json: object,
    runtime_classes_json: object = None,
    *,
    nodes_source: str = "nodes.json",
    pods_source: str = "pods.json",
    runtime_classes_source: str = "runtimeclasses.json",
) -> ClusterFacts:
    """The facts in ``kubectl get nodes -o json`` and ``kubectl get pods -A -o json``.

    Each document is a parsed object, its JSON text (``str``/``bytes``) or
    ``None`` (the file is missing); ``*_source`` names it in reasons. See the
    module docstring for every rule.
    """
    unknowns: list[Unknown] = []
    node_items, nodes_reason, more = _items(nodes_json, nodes_source, _NODES)
    unknowns.extend(more)
    pod_items, pods_reason, more = _items(pods_json, pods_source, _PODS)
    unknowns.extend(more)
    runtime_items: list[tuple[str, Any]] | None = None
    runtime_reason: str | None = None
    if runtime_classes_json is not None:
        runtime_items, runtime_reason, more = _items(
            runtime_classes_json, runtime_classes_source, _RUNTIME_CLASSES
        )
        unknowns.extend(more)
    return _assemble(
        node_items, nodes_reason, pod_items, pods_reason, runtime_items, runtime_reason, unknowns
    )


def parse_list(doc: object, *, source: str = "cluster.json") -> ClusterFacts:
    """The facts in one ``List`` holding Node and Pod (and RuntimeClass) items.

    ``kubectl get nodes,pods,runtimeclasses -A -o json`` prints one. When a
    kind is refused, kubectl still prints the others (and the error on
    stderr), so a List with no Pod items means *pod occupancy unknown*, never
    "nothing bound"; no Node items means the nodes are unknown; no
    RuntimeClass items leaves ``runtime_classes`` unknown (``None``).
    """
    parsed, reason = _parse(doc, source, "node and pod")
    if parsed is not None and parsed.get("kind") == "Status":
        reason = _status_reason(parsed, "node and pod")
        parsed = None
    elif parsed is not None and (
        parsed.get("kind") not in ("List", None) or not isinstance(parsed.get("items"), list)
    ):
        reason = (
            f"{source} is not a List of nodes and pods "
            "(dump one with `kubectl get nodes,pods,runtimeclasses -A -o json`)"
        )
        parsed = None
    if parsed is None:
        assert reason is not None
        return _assemble(None, reason, None, reason, None, None, [])
    node_items, _, unknowns = _items(parsed, source, _NODES)
    pod_items, _, _ = _items(parsed, source, _PODS)
    runtime_items, _, _ = _items(parsed, source, _RUNTIME_CLASSES)
    nodes_reason = None if node_items else f"{source} holds no Node items"
    pods_reason = None
    if not pod_items:
        pods_reason = (
            f"{source} holds no Pod items (was the pod listing refused? "
            "dump both with `kubectl get nodes,pods -A -o json`)"
        )
    return _assemble(
        node_items or None,
        nodes_reason,
        pod_items or None,
        pods_reason,
        runtime_items or None,
        None,
        unknowns,
    )
