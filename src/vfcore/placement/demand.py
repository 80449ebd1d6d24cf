"""What a flow needs, with no cluster: replicas, workload kinds, GPU claims, autoscaling.

Worked example (exclusive mode): a detector with ``nb_tasks=4, gpu_count=2``
becomes four pods ``detector/0`` … ``detector/3``, each claiming 2
``nvidia.com/gpu`` that must sit on one host; the flow's total is 8 and the
largest pod is 2. In shared mode the same pods claim no resource units, only
their declared VRAM; in mix mode a pod with ``gpu_memory_gib`` takes one MIG
slice (chosen at plan time) while a pod with whole GPUs claims them as usual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from vfcore.errors import INFO, InvalidFlowError, InvalidInputError, Reason, brief
from vfcore.flow.gpu_mode import GpuMode, SliceKind, dra_takes_mig, parse_gpu_mode, slice_of
from vfcore.flow.params import MAX_REPLICAS_PER_NODE, parameter_issues
from vfcore.flow.spec import BATCH, PRODUCER, REALTIME, FlowSpec, NodeSpec
from vfcore.flow.validate import (
    flow_size_issue,
    gpu_resource_of,
    to_spec,
)

if TYPE_CHECKING:
    from vfcore.flow.authoring import Flow

__all__ = [
    "DRA_CLASSES",
    "AutoscalingOptions",
    "Demand",
    "NodeShape",
    "PodClaim",
    "Reason",
    "SliceKind",
    "Workload",
    "autoscaling_rejections",
    "gpu_demand",
    "node_shapes",
    "pod_name",
    "workload_of",
]

Workload = Literal["deployment", "statefulset", "job"]


def pod_name(node: str, replica: int) -> str:
    """Pods are named ``<node>/<replica>`` everywhere: ``pod_name('detector', 0) == 'detector/0'``."""
    return f"{node}/{replica}"


def workload_of(node: NodeSpec, flow_type: str) -> Workload:
    """The Kubernetes workload a node runs as.

    BATCH: every node is a Job (its stream ends). REALTIME: a finite producer is
    a Job; a partitioned processor is a StatefulSet (stable ordinals own keys);
    everything else is a Deployment.
    """
    if flow_type == BATCH:
        return "job"
    if node.kind == PRODUCER and node.finite:
        return "job"
    if node.is_processor and node.partition_by is not None:
        return "statefulset"
    return "deployment"


@dataclass(frozen=True, slots=True)
class NodeShape:
    """A node's run shape: how many workers, as what workload."""

    name: str
    kind: str
    replicas: int
    workload: Workload

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "replicas": self.replicas,
            "workload": self.workload,
        }


def node_shapes(flow_or_spec: Flow | FlowSpec) -> tuple[NodeShape, ...]:
    """Replicas and workload kind of every node, in spec order."""
    spec = to_spec(flow_or_spec)
    return tuple(
        NodeShape(n.name, n.kind, n.replicas, workload_of(n, spec.flow_type)) for n in spec.nodes
    )


@dataclass(frozen=True, slots=True)
class PodClaim:
    """What one pod claims: whole units of extended resources, and/or a VRAM demand.

    ``slice`` says how the GPU is taken: ``whole`` (exclusive units), ``shared``
    (no units; VRAM only), ``mig`` (one MIG slice of at least ``gpu_memory_gib``,
    chosen at plan time) or ``none`` (a CPU pod).
    """

    pod: str
    node: str
    replica: int
    claims: tuple[tuple[str, int], ...]
    gpu_memory_gib: float | None
    slice: SliceKind

    @property
    def units(self) -> int:
        return sum(u for _, u in self.claims)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "node": self.node,
            "claims": dict(self.claims),
            "gpu_memory_gib": self.gpu_memory_gib,
            "slice": self.slice,
        }


@dataclass(frozen=True, slots=True)
class Demand:
    """A flow's GPU demand under one mode.

    ``total`` sums units per resource; ``largest_pod`` is the single pod with
    the most units (then the most VRAM; ties by name): its devices must all
    sit on one host, so no cluster whose largest free host is smaller can run
    the flow, whatever the total.
    """

    mode: GpuMode
    pods: tuple[PodClaim, ...]
    total: tuple[tuple[str, int], ...]
    declared_gpu_memory_gib: float
    largest_pod: PodClaim | None
    undeclared_memory: tuple[str, ...]

    @property
    def total_gpu_memory_gib(self) -> float | None:
        """VRAM of every GPU pod; ``None`` (unknown, not zero) if any pod declares none."""
        if any(p.gpu_memory_gib is None for p in self.pods):
            return None
        return self.declared_gpu_memory_gib

    def total_of(self, resource: str) -> int:
        return dict(self.total).get(resource, 0)

    def to_dict(self) -> dict[str, Any]:
        largest = self.largest_pod
        return {
            "mode": self.mode.value,
            "total": dict(self.total),
            "total_gpu_memory_gib": self.total_gpu_memory_gib,
            "declared_gpu_memory_gib": self.declared_gpu_memory_gib,
            "largest_pod": {} if largest is None else dict(largest.claims),
            "largest_pod_name": None if largest is None else largest.pod,
            "largest_pod_gpu_memory_gib": None if largest is None else largest.gpu_memory_gib,
            "undeclared_memory": list(self.undeclared_memory),
            "pods": [p.to_dict() for p in self.pods],
        }


#: DeviceClasses a DRA claim names by default (vfcore.placement.claims has the same defaults).
DRA_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com")


def _claim(
    node: NodeSpec,
    mode: GpuMode,
    default_resource: str | None,
    dra_classes: tuple[str, str] = DRA_CLASSES,
) -> tuple[dict[str, int], SliceKind]:
    kind = slice_of(node, mode)
    if kind == "dra":  # devices of a DeviceClass, claimed through a ResourceClaim
        return {dra_classes[1] if dra_takes_mig(node) else dra_classes[0]: node.gpu_count}, kind
    if kind != "whole":
        return {}, kind
    return {gpu_resource_of(node, default_resource): node.gpu_count}, kind


def gpu_demand(
    flow_or_spec: Flow | FlowSpec,
    *,
    gpu_mode: GpuMode | str | None = "exclusive",
    gpu_resource_name: str | None = None,
    dra_device_class: str = DRA_CLASSES[0],
    dra_mig_device_class: str = DRA_CLASSES[1],
) -> Demand:
    """Per-pod GPU claims, totals per resource, and the largest single pod.

    In DRA mode a pod claims devices of a DeviceClass (``dra_device_class`` for
    whole GPUs, ``dra_mig_device_class`` for a MIG slice), counted under the
    class's name: ``{"gpu.nvidia.com": 2}``.

    >>> from vfcore.flow.spec import FlowSpec, NodeSpec
    >>> spec = FlowSpec("f", "batch", (
    ...     NodeSpec("src", "producer"),
    ...     NodeSpec("det", "processor", ("src",), nb_tasks=3, device_type="gpu", gpu_count=2),
    ...     NodeSpec("out", "consumer", ("det",))))
    >>> d = gpu_demand(spec)
    >>> dict(d.total), d.largest_pod.pod, dict(d.largest_pod.claims)
    ({'nvidia.com/gpu': 6}, 'det/0', {'nvidia.com/gpu': 2})
    """
    spec = to_spec(flow_or_spec)
    mode = parse_gpu_mode(gpu_mode)
    too_large = flow_size_issue(spec)
    if too_large is not None:  # one claim per pod: bound the work before listing them
        raise InvalidFlowError([too_large])
    pods: list[PodClaim] = []
    for node in spec.nodes:
        if not node.is_gpu or parameter_issues(node):
            continue  # invalid parameters are reported by validate(), not counted here
        claims, kind = _claim(
            node, mode, gpu_resource_name, (dra_device_class, dra_mig_device_class)
        )
        for replica in range(node.replicas):
            pods.append(
                PodClaim(
                    pod=pod_name(node.name, replica),
                    node=node.name,
                    replica=replica,
                    claims=tuple(sorted(claims.items())),
                    gpu_memory_gib=node.gpu_memory_gib,
                    slice=kind,
                )
            )
    totals: dict[str, int] = {}
    for pod in pods:
        for resource, units in pod.claims:
            totals[resource] = totals.get(resource, 0) + units
    memory = sum(p.gpu_memory_gib or 0.0 for p in pods)
    largest = min(
        pods,
        key=lambda p: (-p.units, -(p.gpu_memory_gib or 0.0), p.pod),
        default=None,
    )
    # VRAM is the only limit of a shared slice: there an undeclared demand is a blind spot.
    undeclared = tuple(p.pod for p in pods if p.gpu_memory_gib is None and p.slice == "shared")
    return Demand(
        mode=mode,
        pods=tuple(pods),
        total=tuple(sorted(totals.items())),
        declared_gpu_memory_gib=float(memory),
        largest_pod=largest,
        undeclared_memory=undeclared,
    )


# -- autoscaling eligibility --------------------------------------------------


@dataclass(frozen=True, slots=True)
class AutoscalingOptions:
    """Deploy-time options that bear on autoscaling (``--autoscaling`` and friends)."""

    enabled: bool = False
    gpu_autoscaling: bool = False
    max_replicas: int = 10

    def __post_init__(self) -> None:
        m = self.max_replicas
        if not isinstance(m, int) or isinstance(m, bool) or not 1 <= m <= MAX_REPLICAS_PER_NODE:
            raise InvalidInputError(
                "invalid-max-replicas",
                f"max_replicas={brief(m)} must be an int, 1 .. {MAX_REPLICAS_PER_NODE:,} (the "
                "most replicas vfcore plans for one node)",
                "pass --max-replicas with a positive count, e.g. --max-replicas 10",
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "gpu_autoscaling": self.gpu_autoscaling,
            "max_replicas": self.max_replicas,
        }


def autoscaling_rejections(
    flow_or_spec: Flow | FlowSpec, options: AutoscalingOptions | None = None
) -> dict[str, tuple[Reason, ...]]:
    """For every node, every reason it stays at fixed scale (empty = eligible).

    Only processors that run as Deployments with competing replicas can be
    scaled: e.g. an unpartitioned CPU detector in a REALTIME flow is eligible,
    while a partitioned tracker is not (a new replica count would rehash which
    replica owns which key mid-stream).
    """
    spec = to_spec(flow_or_spec)
    opts = options or AutoscalingOptions()
    out: dict[str, tuple[Reason, ...]] = {}
    for node in spec.nodes:
        reasons: list[Reason] = []
        if not node.is_processor:
            reasons.append(
                Reason(
                    "not-a-processor",
                    INFO,
                    node.name,
                    f"a {node.kind} is single; only processors scale",
                    "put the work that should scale in a ProcessorNode",
                )
            )
        else:
            if spec.flow_type != REALTIME:
                reasons.append(
                    Reason(
                        "batch-job",
                        INFO,
                        node.name,
                        "in a BATCH flow the node is a Job, whose parallelism is fixed; "
                        "set nb_tasks instead",
                        "set nb_tasks to the parallelism the Job should have",
                    )
                )
            if node.partition_by is not None:
                if node.replicas > 1:
                    reasons.append(
                        Reason(
                            "partitioned",
                            INFO,
                            node.name,
                            f"partitioned by {node.partition_by!r}: a new replica count would "
                            "rehash which replica owns which key mid-stream",
                            "keep nb_tasks fixed at the count the keys need",
                        )
                    )
                else:
                    reasons.append(
                        Reason(
                            "partition-at-one-replica",
                            INFO,
                            node.name,
                            f"declares partition_by={node.partition_by!r}: adding replicas would "
                            "move keys away from the replica that holds their state",
                            "drop partition_by if the node keeps no per-key state",
                        )
                    )
            elif node.kind == "one-task-processor":
                reasons.append(
                    Reason(
                        "one-task",
                        INFO,
                        node.name,
                        "a stateful one-task node runs exactly one worker",
                        "use a ProcessorNode if the node keeps no state between events",
                    )
                )
            if node.is_join and node.partition_by is None:
                reasons.append(
                    Reason(
                        "single-replica-join",
                        INFO,
                        node.name,
                        "an unpartitioned join must keep one replica, or the halves of one "
                        "event could reach different replicas",
                        "partition the join by a key both halves carry to run several replicas (at a fixed count)",
                    )
                )
            if node.is_gpu and not opts.gpu_autoscaling:
                reasons.append(
                    Reason(
                        "gpu-node",
                        INFO,
                        node.name,
                        "GPU nodes are not autoscaled unless --gpu-autoscaling: each extra "
                        "replica claims more GPU capacity",
                        "pass --gpu-autoscaling (AutoscalingOptions(gpu_autoscaling=True))",
                    )
                )
        out[node.name] = tuple(reasons)
    return out
