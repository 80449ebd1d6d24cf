"""vfcore: decide how stream-processing flows fit onto GPUs and clusters.

A pure core (no I/O): flows are declared with videoflow-compatible node
classes, turned into a frozen :class:`FlowSpec`, validated, sized and explained.
See ``docs/concepts.md``.
"""

from vfcore.demand import (
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
from vfcore.errors import ERROR, WARNING, InvalidFlowError, InvalidInputError, Issue, VfError
from vfcore.explain import Explanation, explain
from vfcore.flow import (
    ConsumerNode,
    Flow,
    Node,
    OneTaskProcessorNode,
    ProcessorNode,
    ProducerNode,
    takes_ctx,
)
from vfcore.joins import JoinPolicy
from vfcore.names import PhysicalName, physical_name, physical_names
from vfcore.partition import (
    InvalidKeyError,
    encode_key,
    expected_moved_fraction,
    key_hash,
    moved_fraction,
    owner_of,
    partition_key,
    partition_of,
)
from vfcore.spec import BATCH, REALTIME, FlowSpec, NodeSpec
from vfcore.validate import (
    DEFAULT_GPU_RESOURCE,
    GPU_MODES,
    RULES,
    effective_replicas,
    require_valid,
    validate,
)

__version__ = "0.1.0"

__all__ = [
    "BATCH",
    "DEFAULT_GPU_RESOURCE",
    "ERROR",
    "GPU_MODES",
    "REALTIME",
    "RULES",
    "WARNING",
    "AutoscalingOptions",
    "ConsumerNode",
    "Demand",
    "Explanation",
    "Flow",
    "FlowSpec",
    "InvalidFlowError",
    "InvalidInputError",
    "InvalidKeyError",
    "Issue",
    "JoinPolicy",
    "Node",
    "NodeShape",
    "NodeSpec",
    "OneTaskProcessorNode",
    "PhysicalName",
    "PodClaim",
    "ProcessorNode",
    "ProducerNode",
    "Reason",
    "VfError",
    "__version__",
    "autoscaling_rejections",
    "effective_replicas",
    "encode_key",
    "expected_moved_fraction",
    "explain",
    "gpu_demand",
    "key_hash",
    "moved_fraction",
    "node_shapes",
    "owner_of",
    "partition_key",
    "partition_of",
    "physical_name",
    "physical_names",
    "pod_name",
    "require_valid",
    "takes_ctx",
    "validate",
    "workload_of",
]
