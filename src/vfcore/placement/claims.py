"""Pod claims: every pod a flow will create, with everything it asks of a node.

Each replica of each node becomes a pod ``<node>/<replica>`` with its cpu and
memory requests (the node's ``requests=`` or a per-node override such as the
CLI's ``--resources detector=cpu:2,memory:8Gi``), its GPU claim under the GPU
mode, and — for GPU pods — the GPU-pool node selector and the ``nvidia.com/gpu``
toleration. Requests are integers in vfcore's canonical units (cpu millicores,
memory bytes; see :mod:`vfcore.quantity`). In DRA mode a GPU pod asks for no GPU
resource: it carries a :class:`DraRequest` (the one request of its
ResourceClaim: a DeviceClass, a device count and CEL selectors), which the
scheduler's allocator satisfies from ResourceSlices (``docs/dra.md``).

Worked example: ``Detect(nb_tasks=2, device_type="gpu", gpu_count=2,
requests={"cpu": "2", "memory": "8Gi"})`` gives pods ``detect/0`` and
``detect/1``, each requesting ``cpu=2000, memory=8589934592, nvidia.com/gpu=2``,
selecting ``nvidia.com/gpu.present=true`` and tolerating ``nvidia.com/gpu``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from vfcore.cluster import GPU_PRESENT_LABEL, Toleration
from vfcore.errors import InvalidInputError
from vfcore.flow.gpu_mode import GpuMode, SliceKind, dra_takes_mig, parse_gpu_mode, slice_of
from vfcore.flow.params import parameter_issues
from vfcore.flow.spec import to_spec
from vfcore.flow.validate import gpu_resource_of
from vfcore.placement.demand import pod_name
from vfcore.placement.dra.cel import quantity_literal
from vfcore.quantity import canonical_units

if TYPE_CHECKING:
    from vfcore.flow.authoring import Flow
    from vfcore.flow.spec import FlowSpec, NodeSpec

__all__ = [
    "DEFAULT_DRA_DEVICE_CLASS",
    "DEFAULT_DRA_DRIVER",
    "DEFAULT_DRA_MIG_DEVICE_CLASS",
    "GPU_TOLERATION",
    "DraRequest",
    "PodRequest",
    "check_device_class",
    "dra_request_of",
    "parse_resources_option",
    "pod_requests",
]

GPU_TOLERATION = Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")
GIB_IN_MIB = 1024
#: NVIDIA's DRA driver and the DeviceClasses it installs (whole GPUs, MIG devices).
DEFAULT_DRA_DRIVER = "gpu.nvidia.com"
DEFAULT_DRA_DEVICE_CLASS = "gpu.nvidia.com"
DEFAULT_DRA_MIG_DEVICE_CLASS = "mig.nvidia.com"
_DNS_SUBDOMAIN = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)


@dataclass(frozen=True, slots=True, order=True)
class DraRequest:
    """The one request of a DRA pod's ResourceClaim: ``count`` devices of ``device_class``
    that every CEL ``selectors`` expression accepts (besides the class's own selectors).

    >>> DraRequest("gpu.nvidia.com", 2).describe()
    '2 gpu.nvidia.com device(s)'
    """

    device_class: str
    count: int = 1
    selectors: tuple[str, ...] = ()

    def describe(self) -> str:
        extra = f" matching {len(self.selectors)} selector(s)" if self.selectors else ""
        return f"{self.count} {self.device_class} device(s){extra}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "device_class": self.device_class,
            "count": self.count,
            "selectors": list(self.selectors),
        }


def check_device_class(name: object, flag: str = "--dra-device-class") -> str:
    """``name`` when it is a DeviceClass name (a DNS subdomain); else ``invalid-device-class``."""
    if not isinstance(name, str) or _DNS_SUBDOMAIN.fullmatch(name) is None:
        raise InvalidInputError(
            "invalid-device-class",
            f"{flag} {name!r} is not a DeviceClass name (a DNS subdomain: lowercase letters, "
            "digits, '-' and '.')",
            f"name an installed DeviceClass, e.g. {flag} {DEFAULT_DRA_DEVICE_CLASS}",
        )
    return name


def _memory_selector(driver: str, gib: float) -> str:
    amount = Fraction(round(gib * GIB_IN_MIB)) * 2**20
    return (
        f'device.capacity["{driver}"].memory.compareTo(quantity("{quantity_literal(amount)}")) >= 0'
    )


def dra_request_of(
    node: NodeSpec,
    *,
    device_class: str = DEFAULT_DRA_DEVICE_CLASS,
    mig_device_class: str = DEFAULT_DRA_MIG_DEVICE_CLASS,
    driver: str = DEFAULT_DRA_DRIVER,
    extra_selectors: tuple[str, ...] = (),
) -> DraRequest:
    """The claim request of a GPU node's pods in DRA mode.

    A one-GPU node that declares ``gpu_memory_gib`` takes one device of
    ``mig_device_class`` (a MIG slice, as in mix mode); any other GPU node
    ``gpu_count`` devices of ``device_class``. A declared ``gpu_memory_gib``
    becomes a selector on the device's memory capacity (in the driver's
    domain). ``extra_selectors`` (a product pin, a remedy's device pin) are added.

    >>> from vfcore.flow.spec import NodeSpec
    >>> det = NodeSpec("det", "processor", ("src",), device_type="gpu", gpu_memory_gib=10)
    >>> r = dra_request_of(det)
    >>> r.device_class, r.count, r.selectors
    ('mig.nvidia.com', 1, ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("10Gi")) >= 0',))
    """
    selectors: tuple[str, ...] = ()
    if node.gpu_memory_gib is not None:
        selectors = (_memory_selector(driver, node.gpu_memory_gib),)
    return DraRequest(
        mig_device_class if dra_takes_mig(node) else device_class,
        node.gpu_count,
        selectors + tuple(extra_selectors),
    )


@dataclass(frozen=True, slots=True)
class PodRequest:
    """One pod as the scheduler sees it.

    ``requests`` holds canonical units of every resource the pod asks for (zero
    entries omitted; the pod itself counts against the node's ``pods`` limit
    separately). ``gpu_memory_mib`` is the VRAM a shared-mode or mix-mode pod
    declares (``None`` when it declares none). ``slice`` is how it takes a GPU:
    ``whole``, ``shared``, ``mig`` or ``none``.
    """

    pod: str
    node: str
    replica: int
    requests: tuple[tuple[str, int], ...]
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    gpu_memory_mib: int | None = None
    slice: SliceKind = "none"
    dra: DraRequest | None = None

    def request(self, resource: str) -> int:
        for name, units in self.requests:
            if name == resource:
                return units
        return 0

    @property
    def shape(self) -> tuple[object, ...]:
        """Everything placement depends on: pods with equal shapes are interchangeable."""
        return (
            self.requests,
            self.node_selector,
            self.tolerations,
            self.gpu_memory_mib,
            self.slice,
            self.dra,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "node": self.node,
            "requests": dict(self.requests),
            "node_selector": dict(self.node_selector),
            "tolerations": [t.to_dict() for t in self.tolerations],
            "gpu_memory_mib": self.gpu_memory_mib,
            "slice": self.slice,
            **({} if self.dra is None else {"dra": self.dra.to_dict()}),
        }


def parse_resources_option(text: str) -> dict[str, dict[str, str]]:
    """``'detector=cpu:2,memory:8Gi;tracker=cpu:500m'`` → per-node requests.

    Several ``NODE=...`` groups may also be given as separate options and merged
    by the caller. Quantities are checked when the pods are built.
    """
    out: dict[str, dict[str, str]] = {}
    for group in filter(None, (g.strip() for g in text.split(";"))):
        name, sep, body = group.partition("=")
        if not sep or not name.strip() or not body.strip():
            raise InvalidInputError(
                "invalid-resources-option",
                f"--resources {group!r} is not NODE=resource:quantity[,resource:quantity]",
                "write it like --resources detector=cpu:2,memory:8Gi",
            )
        entries = out.setdefault(name.strip(), {})
        for item in body.split(","):
            resource, colon, quantity = item.partition(":")
            if not colon or not resource.strip() or not quantity.strip():
                raise InvalidInputError(
                    "invalid-resources-option",
                    f"--resources {name}: {item!r} is not resource:quantity",
                    "write it like cpu:2 or memory:8Gi",
                )
            entries[resource.strip()] = quantity.strip()
    return out


def pod_requests(
    flow_or_spec: Flow | FlowSpec,
    *,
    gpu_mode: GpuMode | str | None = "exclusive",
    gpu_resource_name: str | None = None,
    gpu_node_selector: tuple[str, str] | None = None,
    resources: Mapping[str, Mapping[str, str | int | float]] | None = None,
    dra_device_class: str = DEFAULT_DRA_DEVICE_CLASS,
    dra_mig_device_class: str = DEFAULT_DRA_MIG_DEVICE_CLASS,
    dra_driver: str = DEFAULT_DRA_DRIVER,
    dra_selectors: Mapping[str, tuple[str, ...]] | None = None,
) -> tuple[PodRequest, ...]:
    """Every pod the flow creates, in spec order, replicas in order.

    In DRA mode each GPU pod carries :func:`dra_request_of` its node
    (``dra_device_class`` for whole GPUs, ``dra_mig_device_class`` for a
    memory-declaring one-GPU node, selectors in ``dra_driver``'s domain, and
    ``dra_selectors[node]`` added).

    ``resources`` overrides (or adds) per-node requests: ``{"detector": {"cpu": "2"}}``;
    naming a node the flow lacks is an error (``unknown-node``), and so is an
    override that is not a quantity (``invalid-quantity``), zero or negative
    (``quantity-not-positive``) or over 2**50 units (``quantity-out-of-range``).
    """
    spec = to_spec(flow_or_spec)
    mode = parse_gpu_mode(gpu_mode)
    overrides = dict(resources or {})
    unknown = sorted(set(overrides) - set(spec.names))
    if unknown:
        raise InvalidInputError(
            "unknown-node",
            f"--resources names {unknown}, which the flow does not have "
            f"(nodes: {sorted(spec.names)})",
            "name nodes as the flow declares them",
        )
    selector = gpu_node_selector or GPU_PRESENT_LABEL
    if mode is GpuMode.DRA:
        check_device_class(dra_device_class)
        check_device_class(dra_mig_device_class, "--dra-mig-device-class")
    pods: list[PodRequest] = []
    for node in spec.nodes:
        if parameter_issues(node):
            continue  # validate() reports it; an invalid node has no pods
        declared: dict[str, str | int | float] = dict(node.requests)
        given = dict(overrides.get(node.name, {}))
        declared.update(given)
        units: dict[str, int] = {}
        for resource, quantity in sorted(declared.items()):
            value = canonical_units(resource, quantity, what=f"{node.name} requests {resource}")
            if resource in given and value <= 0:
                raise InvalidInputError(
                    "quantity-not-positive",
                    f"--resources {node.name}={resource}:{given[resource]} is "
                    f"{'zero' if value == 0 else 'negative'}: an override must request "
                    "more than nothing",
                    f"give a positive quantity like {resource}:2, or drop the override "
                    "to keep the flow's own request",
                )
            if value > 0:
                units[resource] = value
        kind = slice_of(node, mode)
        memory_mib = (
            None if node.gpu_memory_gib is None else round(node.gpu_memory_gib * GIB_IN_MIB)
        )
        node_selector: tuple[tuple[str, str], ...] = ()
        tolerations: tuple[Toleration, ...] = ()
        if node.is_gpu:
            # a claim's devices are node-local: in DRA mode they select the node, not a label
            dra_mode = mode is GpuMode.DRA and gpu_node_selector is None
            node_selector = () if dra_mode else (selector,)
            tolerations = (GPU_TOLERATION,)
        else:
            memory_mib = None
        if kind == "whole":
            resource = gpu_resource_of(node, gpu_resource_name)
            units[resource] = units.get(resource, 0) + node.gpu_count
        dra = None
        if kind == "dra":
            dra = dra_request_of(
                node,
                device_class=dra_device_class,
                mig_device_class=dra_mig_device_class,
                driver=dra_driver,
                extra_selectors=tuple((dra_selectors or {}).get(node.name, ())),
            )
        requests = tuple(sorted(units.items()))
        for replica in range(node.replicas):
            pods.append(
                PodRequest(
                    pod=pod_name(node.name, replica),
                    node=node.name,
                    replica=replica,
                    requests=requests,
                    node_selector=node_selector,
                    tolerations=tolerations,
                    gpu_memory_mib=memory_mib,
                    slice=kind,
                    dra=dra,
                )
            )
    return tuple(pods)
