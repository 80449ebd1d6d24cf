"""The flow: what a user writes, and what it means.

- :mod:`~vfcore.flow.authoring`: the videoflow-compatible node classes and
  :class:`Flow` (parameters checked at construction);
- :mod:`~vfcore.flow.spec`: the frozen :class:`FlowSpec` / :class:`NodeSpec`
  and their JSON form;
- :mod:`~vfcore.flow.params`: the per-node parameter checks and size limits;
- :mod:`~vfcore.flow.join_policy`: :class:`JoinPolicy` and its checks;
- :mod:`~vfcore.flow.gpu_mode`: :class:`GpuMode`, parsed once, and the one
  mode → GPU slice rule;
- :mod:`~vfcore.flow.validate`: the validation rules (every problem at once)
  and the per-node facts they share (replicas, GPU resource);
- :mod:`~vfcore.flow.names`: collision-free physical names.

Inside the package, imports point one way: ``spec`` and ``join_policy`` at the
bottom, then ``params`` and ``gpu_mode``, ``authoring`` and ``validate``, and
``names`` on top. Nothing here imports another vfcore package but
:mod:`vfcore.errors` and :mod:`vfcore.quantity`.

``vfcore.flow.validate`` names the function :func:`validate` once this package
is imported (as ``vfcore.validate`` does); the module is
``sys.modules["vfcore.flow.validate"]``, and ``from vfcore.flow.validate import ...``
reads it.
"""

from vfcore.flow.authoring import (
    ConsumerNode,
    Flow,
    Node,
    OneTaskProcessorNode,
    ProcessorNode,
    ProducerNode,
    takes_ctx,
)
from vfcore.flow.gpu_mode import GPU_MODES, GpuMode, SliceKind, parse_gpu_mode, slice_of
from vfcore.flow.join_policy import (
    REALTIME_DEFAULT_TIMEOUT_MS,
    JoinMode,
    JoinPolicy,
    MissingPolicy,
    join_policy_parent_problems,
)
from vfcore.flow.names import K8S_NAME_MAX, PhysicalName, physical_name, physical_names
from vfcore.flow.params import (
    DEVICE_TYPES,
    MAX_PODS_PER_FLOW,
    MAX_REPLICAS_PER_NODE,
    parameter_issues,
)
from vfcore.flow.spec import (
    BATCH,
    CONSUMER,
    KINDS,
    ONE_TASK_PROCESSOR,
    PROCESSOR,
    PRODUCER,
    REALTIME,
    FlowSpec,
    FlowType,
    NodeKind,
    NodeSpec,
)
from vfcore.flow.validate import (
    DEFAULT_GPU_RESOURCE,
    RULES,
    effective_join_policy,
    effective_replicas,
    flow_pod_count,
    gpu_resource_of,
    require_valid,
    to_spec,
    validate,
)

__all__ = [
    "BATCH",
    "CONSUMER",
    "DEFAULT_GPU_RESOURCE",
    "DEVICE_TYPES",
    "GPU_MODES",
    "K8S_NAME_MAX",
    "KINDS",
    "MAX_PODS_PER_FLOW",
    "MAX_REPLICAS_PER_NODE",
    "ONE_TASK_PROCESSOR",
    "PROCESSOR",
    "PRODUCER",
    "REALTIME",
    "REALTIME_DEFAULT_TIMEOUT_MS",
    "RULES",
    "ConsumerNode",
    "Flow",
    "FlowSpec",
    "FlowType",
    "GpuMode",
    "JoinMode",
    "JoinPolicy",
    "MissingPolicy",
    "Node",
    "NodeKind",
    "NodeSpec",
    "OneTaskProcessorNode",
    "PhysicalName",
    "ProcessorNode",
    "ProducerNode",
    "SliceKind",
    "effective_join_policy",
    "effective_replicas",
    "flow_pod_count",
    "gpu_resource_of",
    "join_policy_parent_problems",
    "parameter_issues",
    "parse_gpu_mode",
    "physical_name",
    "physical_names",
    "require_valid",
    "slice_of",
    "takes_ctx",
    "to_spec",
    "validate",
]
