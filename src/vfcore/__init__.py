"""vfcore: decide how stream-processing flows fit onto GPUs and clusters.

A pure core (no I/O): flows are declared with videoflow-compatible node
classes, turned into a frozen :class:`FlowSpec`, validated, sized and explained.
See ``docs/concepts.md``.
"""

from vfcore.cluster import (
    ClusterSnapshot,
    GpuInfo,
    NodeState,
    Taint,
    Toleration,
    Unknown,
    snapshot_from_kubernetes,
)
from vfcore.errors import (
    ERROR,
    WARNING,
    Finding,
    InvalidFlowError,
    InvalidInputError,
    Issue,
    Problem,
    VfError,
)
from vfcore.flow.authoring import (
    ConsumerNode,
    Flow,
    Node,
    OneTaskProcessorNode,
    ProcessorNode,
    ProducerNode,
)
from vfcore.flow.gpu_mode import GpuMode, parse_gpu_mode
from vfcore.flow.join_policy import JoinPolicy
from vfcore.flow.names import PhysicalName, physical_name, physical_names
from vfcore.flow.spec import BATCH, REALTIME, FlowSpec, NodeSpec
from vfcore.flow.validate import (
    DEFAULT_GPU_RESOURCE,
    GPU_MODES,
    RULES,
    effective_replicas,
    require_valid,
    validate,
)
from vfcore.placement.claims import PodRequest, pod_requests
from vfcore.placement.demand import (
    AutoscalingOptions,
    Demand,
    NodeShape,
    PodClaim,
    Reason,
    autoscaling_rejections,
    gpu_demand,
    node_shapes,
    pod_name,
    workload_of,
)
from vfcore.placement.explain import Explanation, explain
from vfcore.placement.fit import Insufficient, Unplaced
from vfcore.placement.packing import (
    SolverConfig,
    SolverReport,
    check_placement,
    pack,
)
from vfcore.placement.plan import NodeUsage, Plan, PlanOptions, plan, plan_pods
from vfcore.quantity import parse_quantity
from vfcore.routing import Dropped, Group, JoinAssembler, JoinOutput, Message
from vfcore.routing.partition import (
    InvalidKeyError,
    expected_moved_fraction,
    owner_of,
    partition_key,
    partition_of,
)

__version__ = "0.1.0"

__all__ = [
    "BATCH",
    "DEFAULT_GPU_RESOURCE",
    "ERROR",
    "GPU_MODES",
    "MIG_FAMILIES",
    "REALTIME",
    "RULES",
    "WARNING",
    "AutoscalingOptions",
    "Backlog",
    "BrokerTopology",
    "CapacityCap",
    "ClusterSnapshot",
    "ConsumerNode",
    "Demand",
    "DeviceAssignment",
    "DeviceRequest",
    "Dropped",
    "Explanation",
    "Fallback",
    "Finding",
    "Flow",
    "FlowScaling",
    "FlowSpec",
    "GpuDevice",
    "GpuInfo",
    "GpuMode",
    "Group",
    "HpaBehavior",
    "HpaPrediction",
    "HpaState",
    "Insufficient",
    "InvalidFlowError",
    "InvalidInputError",
    "InvalidKeyError",
    "Issue",
    "JoinAssembler",
    "JoinOutput",
    "JoinPolicy",
    "KedaScaler",
    "LayoutOptions",
    "LocalLayout",
    "Message",
    "MigPlan",
    "Node",
    "NodeShape",
    "NodeSpec",
    "NodeState",
    "NodeUsage",
    "OneTaskProcessorNode",
    "PhysicalName",
    "Placement",
    "Plan",
    "PlanOptions",
    "PodClaim",
    "PodRequest",
    "Problem",
    "ProcessorNode",
    "ProducerNode",
    "Reason",
    "RenderOptions",
    "ReplicaDecision",
    "ScalingComparison",
    "ScalingPolicy",
    "ScalingRules",
    "ScoringConfig",
    "SolverConfig",
    "SolverReport",
    "Taint",
    "Toleration",
    "TopologyOptions",
    "Trigger",
    "Unknown",
    "Unobserved",
    "Unplaced",
    "VfError",
    "__version__",
    "assign_devices",
    "autoscaling_rejections",
    "broker_topology",
    "capacity_cap",
    "check_layout",
    "check_placement",
    "choose_profile",
    "compare_with_cluster",
    "decide_flow",
    "decide_replicas",
    "effective_replicas",
    "expected_moved_fraction",
    "explain",
    "fallback_for_unknown",
    "fit_layout",
    "gpu_demand",
    "local_layout",
    "mig_family",
    "node_shapes",
    "observations_from_dict",
    "owner_of",
    "pack",
    "pack_mix",
    "parse_gpu_mode",
    "parse_quantity",
    "partition_key",
    "partition_of",
    "physical_name",
    "physical_names",
    "plan",
    "plan_pods",
    "pod_name",
    "pod_requests",
    "predict",
    "predict_hpa",
    "remedy",
    "render",
    "require_valid",
    "simulate",
    "simulate_hpa",
    "snapshot_from_kubernetes",
    "validate",
    "visible_devices",
    "workload_of",
]


# The scheduler model, the scaling rules and device assignment load on first use,
# so that building and explaining a flow (and `vf explain`) do not pay for them;
# each name loads only the module that defines it.
_LAZY_MODULES = {
    **dict.fromkeys(
        ("ScoringConfig", "predict", "remedy", "simulate"), "vfcore.placement.scheduler"
    ),
    **dict.fromkeys(
        (
            "MigPlan",
            "MIG_FAMILIES",
            "Placement",
            "choose_profile",
            "fit_layout",
            "check_layout",
            "mig_family",
            "pack_mix",
        ),
        "vfcore.placement.mig",
    ),
    **dict.fromkeys(
        (
            "Backlog",
            "CapacityCap",
            "Fallback",
            "FlowScaling",
            "HpaBehavior",
            "HpaPrediction",
            "HpaState",
            "KedaScaler",
            "ReplicaDecision",
            "ScalingComparison",
            "ScalingPolicy",
            "ScalingRules",
            "Trigger",
            "Unobserved",
            "capacity_cap",
            "compare_with_cluster",
            "decide_flow",
            "decide_replicas",
            "fallback_for_unknown",
            "observations_from_dict",
            "predict_hpa",
            "simulate_hpa",
        ),
        "vfcore.scaling",
    ),
    **dict.fromkeys(
        ("DeviceAssignment", "DeviceRequest", "GpuDevice", "assign_devices", "visible_devices"),
        "vfcore.runtime.devices",
    ),
    **dict.fromkeys(("LayoutOptions", "LocalLayout", "local_layout"), "vfcore.runtime.layout"),
    **dict.fromkeys(("RenderOptions", "render"), "vfcore.runtime.manifests"),
    **dict.fromkeys(
        ("BrokerTopology", "TopologyOptions", "broker_topology"), "vfcore.runtime.topology"
    ),
}


def __getattr__(name: str) -> object:
    module_name = _LAZY_MODULES.get(name)
    if module_name is None:
        raise AttributeError(f"module 'vfcore' has no attribute {name!r}")
    value = getattr(_load(module_name), name)
    globals()[name] = value
    return value


def _load(module_name: str) -> object:
    """Import only the module that owns a lazy name (``vfcore.assign_devices`` loads no
    scheduler model)."""
    if module_name == "vfcore.placement.scheduler":
        from vfcore.placement import scheduler

        return scheduler
    if module_name == "vfcore.placement.mig":
        from vfcore.placement import mig

        return mig
    if module_name == "vfcore.scaling":
        from vfcore import scaling

        return scaling
    if module_name == "vfcore.runtime.devices":
        from vfcore.runtime import devices

        return devices
    if module_name == "vfcore.runtime.layout":
        from vfcore.runtime import layout

        return layout
    if module_name == "vfcore.runtime.manifests":
        from vfcore.runtime import manifests

        return manifests
    from vfcore.runtime import topology

    return topology


def __dir__() -> list[str]:
    return sorted(__all__)
