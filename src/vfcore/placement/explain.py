"""One answer to "what is this flow and what does it need?" — what ``vf explain`` prints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vfcore.errors import InvalidFlowError, Issue
from vfcore.flow.gpu_mode import GpuMode, parse_gpu_mode
from vfcore.flow.spec import FlowSpec, to_spec
from vfcore.flow.validate import gpu_resource_of, validate
from vfcore.placement.demand import (
    DRA_CLASSES,
    AutoscalingOptions,
    Demand,
    NodeShape,
    Reason,
    autoscaling_rejections,
    gpu_demand,
    node_shapes,
)

if TYPE_CHECKING:
    from vfcore.flow.authoring import Flow

__all__ = ["Explanation", "explain"]


@dataclass(frozen=True, slots=True)
class Explanation:
    """Validation issues, run shapes, GPU demand and autoscaling eligibility of a flow."""

    spec: FlowSpec
    gpu_mode: GpuMode
    gpu_resource_name: str | None
    issues: tuple[Issue, ...]
    shapes: tuple[NodeShape, ...]
    demand: Demand
    autoscaling: AutoscalingOptions
    rejections: tuple[tuple[str, tuple[Reason, ...]], ...]

    @property
    def valid(self) -> bool:
        return not any(i.is_error for i in self.issues)

    def to_dict(self) -> dict[str, Any]:
        by_name = {n.name: n for n in self.spec.nodes}
        nodes = []
        for shape in self.shapes:
            node = by_name[shape.name]
            entry = shape.to_dict()
            entry.update(
                {
                    "parents": list(node.parents),
                    "device_type": node.device_type,
                    "gpu_count": node.gpu_count if node.is_gpu else 0,
                    "gpu_memory_gib": node.gpu_memory_gib,
                    "gpu_resource": gpu_resource_of(node, self.gpu_resource_name)
                    if node.is_gpu
                    else None,
                    "partition_by": node.partition_by,
                    "sets_keys": list(node.sets_keys),
                    "join_policy": None if node.join_policy is None else node.join_policy.to_dict(),
                }
            )
            nodes.append(entry)
        autoscaling: dict[str, Any] = {}
        for name, reasons in self.rejections:
            node = by_name[name]
            item: dict[str, Any] = {
                "eligible": not reasons,
                "reasons": [r.message for r in reasons],
                "reason_codes": [r.code for r in reasons],
            }
            if not reasons:
                item["min_replicas"] = node.replicas
                item["max_replicas"] = max(self.autoscaling.max_replicas, node.replicas)
            autoscaling[name] = item
        return {
            "flow": {"name": self.spec.name, "flow_type": self.spec.flow_type},
            "valid": self.valid,
            "issues": [i.to_dict() for i in self.issues],
            "nodes": nodes,
            "gpu_demand": self.demand.to_dict(),
            "autoscaling": autoscaling,
            "options": {
                "gpu_mode": self.gpu_mode.value,
                "gpu_resource_name": self.gpu_resource_name,
                **self.autoscaling.to_dict(),
            },
        }


def explain(
    flow_or_spec: Flow | FlowSpec,
    *,
    gpu_mode: GpuMode | str | None = None,
    gpu_resource_name: str | None = None,
    autoscaling: AutoscalingOptions | None = None,
    dra_device_class: str = DRA_CLASSES[0],
    dra_mig_device_class: str = DRA_CLASSES[1],
) -> Explanation:
    """Everything ``vf explain`` reports, as data (in DRA mode, claims per DeviceClass)."""
    spec = to_spec(flow_or_spec)
    mode = parse_gpu_mode(gpu_mode)
    opts = autoscaling or AutoscalingOptions()
    issues = validate(
        spec, gpu_mode=mode, gpu_resource_name=gpu_resource_name, autoscaling=opts.enabled
    )
    if any(i.rule == "flow-too-large" for i in issues):
        raise InvalidFlowError(issues)  # too large to list per pod: the size comes first
    rejections = autoscaling_rejections(spec, opts)
    return Explanation(
        spec=spec,
        gpu_mode=mode,
        gpu_resource_name=gpu_resource_name,
        issues=issues,
        shapes=node_shapes(spec),
        demand=gpu_demand(
            spec,
            gpu_mode=mode,
            gpu_resource_name=gpu_resource_name,
            dra_device_class=dra_device_class,
            dra_mig_device_class=dra_mig_device_class,
        ),
        autoscaling=opts,
        rejections=tuple(rejections.items()),
    )
