"""Pods: what the scheduler counts for one pod (``resource.PodRequests``), and one pod item.

The rules are in :mod:`vfcore.cluster.kubeparse`'s docstring (containers
summed, sidecars added, init containers maxed, pod-level resources, overhead).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vfcore.cluster.kubeparse.fields import (
    Malformed,
    add_into,
    describe,
    max_into,
    read_mapping,
    read_resource_list,
    read_sequence,
    read_string,
    short,
)
from vfcore.errors import InvalidInputError
from vfcore.quantity import CPU, MEMORY

__all__ = ["NONZERO_DEFAULTS", "PodOutcome", "pod_nonzero_requests", "pod_requests", "read_pod"]

_TERMINAL_PHASES = ("Succeeded", "Failed")

#: What kube-scheduler's scoring counts for a container that requests no cpu / memory
#: (``schedutil.DefaultMilliCPURequest`` = 100m, ``DefaultMemoryRequest`` = 200Mi), per
#: container and only where the request is absent: an explicit ``0`` stays 0.
NONZERO_DEFAULTS: Mapping[str, int] = {CPU: 100, MEMORY: 200 * 1024 * 1024}


def _container_requests(
    container: object, field: str, defaults: Mapping[str, int] | None = None
) -> tuple[dict[str, int], bool]:
    """A container's requests (limits-only resources default to the limit) and whether it is a sidecar.

    With ``defaults``, a resource the container does not request at all (no
    request, no limit: the API server defaults a request to its limit) gets
    its default — ``applyNonMissing`` in ``k8s.io/component-helpers``'
    ``PodRequests``; a request given as ``0`` keeps 0.
    """
    body = read_mapping(container, field, required=True)
    resources = read_mapping(body.get("resources"), f"{field}.resources")
    requests_raw = resources.get("requests")
    limits_raw = resources.get("limits")
    requests = read_resource_list(requests_raw, f"{field}.resources.requests")
    limits = read_resource_list(limits_raw, f"{field}.resources.limits")
    merged = {**limits, **requests}
    if defaults:
        given = {*_names(requests_raw), *_names(limits_raw)}
        for name, units in defaults.items():
            if name not in given:
                merged[name] = merged.get(name, 0) + units
    policy = body.get("restartPolicy")
    if policy is not None and not isinstance(policy, str):
        raise Malformed(f"{field}.restartPolicy", f"= {short(policy)} is not a string")
    return merged, policy == "Always"


def _names(resource_list: object) -> set[str]:
    """The resource names a (readable) ``ResourceList`` gives, zero-valued ones included."""
    return (
        {k for k in resource_list if isinstance(k, str)}
        if isinstance(resource_list, Mapping)
        else set()
    )


def _supports_pod_level(resource: str) -> bool:
    return resource in (CPU, MEMORY) or resource.startswith("hugepages-")


def _requests_of(
    pod: Mapping[str, Any], defaults: Mapping[str, int] | None = None
) -> dict[str, int]:
    spec = read_mapping(pod.get("spec"), "spec", required=True)
    total: dict[str, int] = {}
    for i, container in enumerate(read_sequence(spec.get("containers"), "spec.containers")):
        requests, _ = _container_requests(container, f"spec.containers[{i}]", defaults)
        add_into(total, requests)
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, container in enumerate(read_sequence(spec.get("initContainers"), "spec.initContainers")):
        requests, is_sidecar = _container_requests(container, f"spec.initContainers[{i}]", defaults)
        if is_sidecar:
            add_into(total, requests)
            add_into(sidecars, requests)
            max_into(init_peak, sidecars)
        else:
            during = dict(requests)
            add_into(during, sidecars)
            max_into(init_peak, during)
    max_into(total, init_peak)
    pod_level = read_mapping(spec.get("resources"), "spec.resources")
    if pod_level:
        level_requests = read_resource_list(pod_level.get("requests"), "spec.resources.requests")
        level_limits = read_resource_list(pod_level.get("limits"), "spec.resources.limits")
        for name, units in sorted({**level_limits, **level_requests}.items()):
            if _supports_pod_level(name):
                total[name] = units
    add_into(total, read_resource_list(spec.get("overhead"), "spec.overhead"))
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
        return _requests_of(read_mapping(pod, "pod", required=True))
    except Malformed as bad:
        raise _invalid_pod(bad) from None


def pod_nonzero_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """The cpu (millicores) and memory (bytes) kube-scheduler's *scoring* counts for one pod.

    As :func:`pod_requests`, but every container (init containers and sidecars
    included) that does not request cpu / memory at all counts
    :data:`NONZERO_DEFAULTS` (100m, 200Mi) for it — per container, and only
    where the request is absent: ``"0"`` stays 0 (``PodRequests`` with
    ``NonMissingContainerRequests``, as ``NodeInfo.NonZeroRequested`` and
    NodeResourcesFit's score use it). The filter never uses these.

    >>> pod = {"spec": {"containers": [
    ...     {"resources": {"requests": {"cpu": "1"}}},
    ...     {"resources": {}},
    ...     {"resources": {"requests": {"cpu": "0", "memory": "0"}}}]}}
    >>> pod_nonzero_requests(pod)  # 1 + 0.1 + 0 cpu; 200Mi + 200Mi + 0 memory
    (1100, 419430400)
    >>> pod_requests(pod)
    {'cpu': 1000}
    """
    try:
        totals = _requests_of(read_mapping(pod, "pod", required=True), NONZERO_DEFAULTS)
    except Malformed as bad:
        raise _invalid_pod(bad) from None
    return totals.get(CPU, 0), totals.get(MEMORY, 0)


def _invalid_pod(bad: Malformed) -> InvalidInputError:
    return InvalidInputError(
        "invalid-pod",
        f"the pod cannot be read: {bad.reason}",
        "give the pod as `kubectl get pod NAME -o json` prints it",
    )


@dataclass(frozen=True, slots=True)
class PodOutcome:
    """One pod item: where it is bound and what it requests, or why it cannot be read.

    ``nonzero`` is what scoring counts for it: cpu millicores and memory bytes
    with the per-container defaults (:func:`pod_nonzero_requests`).
    ``anywhere`` is true when the pod cannot be read far enough to tell whether
    and where it is bound (the item is not an object, its ``spec`` or
    ``spec.nodeName`` is of the wrong type): it may occupy any node.
    """

    what: str
    node: str | None
    requests: dict[str, int] | None
    problem: str | None
    nonzero: tuple[int, int] | None = None
    anywhere: bool = False


def _pod_name(item: Mapping[str, Any], where: str) -> str:
    """``pod/<namespace>/<name>``, or ``where`` when the name cannot be read."""
    try:
        meta = read_mapping(item.get("metadata"), "metadata", required=True)
        namespace = read_string(meta.get("namespace"), "metadata.namespace") or "default"
        name = read_string(meta.get("name"), "metadata.name", required=True)
    except Malformed:
        return where
    return f"pod/{namespace}/{name}"


def read_pod(item: object, where: str) -> PodOutcome | None:
    """``None`` for a pod that does not count (finished, or not bound to a node).

    A pod counts unless it is known not to: a readable terminal phase
    (``Succeeded``, ``Failed``) or a readable, absent ``spec.nodeName``. One
    whose ``nodeName`` cannot be read may hold any node (``anywhere``); one
    bound to a node whose phase or requests cannot be read makes that node's
    occupancy unknown.

    >>> read_pod({"spec": {"nodeName": 5}, "status": {"phase": "Running"}}, "items[0]").anywhere
    True
    >>> read_pod({"spec": {"nodeName": 5}, "status": {"phase": "Succeeded"}}, "items[0]") is None
    True
    """
    if not isinstance(item, Mapping):
        return PodOutcome(
            where, None, None, f"is {describe(item)}, not a Kubernetes object", anywhere=True
        )
    what = _pod_name(item, where)
    node: str | None = None
    node_problem: str | None = None
    try:
        spec = read_mapping(item.get("spec"), "spec")
        node = read_string(spec.get("nodeName"), "spec.nodeName")
    except Malformed as bad:
        node_problem = bad.reason
    phase_problem: str | None = None
    phase: str | None = None
    try:
        status = read_mapping(item.get("status"), "status")
        phase = read_string(status.get("phase"), "status.phase")
    except Malformed as bad:
        phase_problem = bad.reason
    if phase in _TERMINAL_PHASES:
        return None  # a finished pod holds nothing, whatever else it says
    if node_problem is not None:
        return PodOutcome(what, None, None, node_problem, anywhere=True)
    if node is None:
        return None  # not bound: it holds no node yet
    if phase_problem is not None:
        return PodOutcome(what, node, None, phase_problem)
    try:
        meta = read_mapping(item.get("metadata"), "metadata", required=True)
        read_string(meta.get("namespace"), "metadata.namespace")
        read_string(meta.get("name"), "metadata.name", required=True)
        nonzero = _requests_of(item, NONZERO_DEFAULTS)
        return PodOutcome(
            what, node, _requests_of(item), None, (nonzero.get(CPU, 0), nonzero.get(MEMORY, 0))
        )
    except Malformed as bad:
        return PodOutcome(what, node, None, bad.reason)
