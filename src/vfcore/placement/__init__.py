"""Placement: where a flow's pods go on a cluster, and whether kube-scheduler puts them there.

This package is the face the adapters and users import placement from
(``from vfcore.placement import plan, PlanOptions, SchedulingFacts``): every name below is
public, whatever module defines it, so the modules can be reorganised without
breaking a caller. Each name loads, on first use, only the module that defines
it: :mod:`vfcore.placement.scheduler` (the kube-scheduler model and its remedy)
and the solver stay unloaded until asked for, and importing this package stays
cheap for ``vf explain``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# eager, and first: these functions share their module's name, and a package
# attribute named after a submodule is rebound to the module when it loads
# (``import vfcore`` loads both anyway)
from vfcore.placement.explain import Explanation, explain
from vfcore.placement.plan import NodeUsage, Plan, PlanOptions, plan, plan_pods

if TYPE_CHECKING:  # what the type checker sees; at run time, __getattr__ below
    from vfcore.placement.claims import (
        PodRequest,
        check_device_class,
        parse_resources_option,
        pod_requests,
    )
    from vfcore.placement.demand import AutoscalingOptions, Demand, NodeShape, pod_name
    from vfcore.placement.fit import Insufficient, Unplaced
    from vfcore.placement.mig import mig_parted_yaml
    from vfcore.placement.packing import SolverConfig, SolverReport, first_fit_decreasing, pack
    from vfcore.placement.scheduler import (
        SchedulingFacts,
        scheduling_facts,
        workloads_from_objects,
        workloads_from_spec,
    )
    from vfcore.placement.scheduler.scoring import parse_kube_version
    from vfcore.placement.storage import (
        NODE_NAME_ANNOTATION,
        ClaimUse,
        check_claims,
        claim_uses,
    )

#: each public name → the module that defines it
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        ("PodRequest", "check_device_class", "parse_resources_option", "pod_requests"),
        "vfcore.placement.claims",
    ),
    **dict.fromkeys(
        ("AutoscalingOptions", "Demand", "NodeShape", "pod_name"), "vfcore.placement.demand"
    ),
    **dict.fromkeys(("Insufficient", "Unplaced"), "vfcore.placement.fit"),
    "mig_parted_yaml": "vfcore.placement.mig",
    **dict.fromkeys(
        ("SolverConfig", "SolverReport", "first_fit_decreasing", "pack"),
        "vfcore.placement.packing",
    ),
    **dict.fromkeys(
        ("SchedulingFacts", "scheduling_facts", "workloads_from_objects", "workloads_from_spec"),
        "vfcore.placement.scheduler",
    ),
    "parse_kube_version": "vfcore.placement.scheduler.scoring",
    **dict.fromkeys(
        ("NODE_NAME_ANNOTATION", "ClaimUse", "check_claims", "claim_uses"),
        "vfcore.placement.storage",
    ),
}

__all__ = [
    "NODE_NAME_ANNOTATION",
    "AutoscalingOptions",
    "ClaimUse",
    "Demand",
    "Explanation",
    "Insufficient",
    "NodeShape",
    "NodeUsage",
    "Plan",
    "PlanOptions",
    "PodRequest",
    "SchedulingFacts",
    "SolverConfig",
    "SolverReport",
    "Unplaced",
    "check_claims",
    "check_device_class",
    "claim_uses",
    "explain",
    "first_fit_decreasing",
    "mig_parted_yaml",
    "pack",
    "parse_kube_version",
    "parse_resources_option",
    "plan",
    "plan_pods",
    "pod_name",
    "pod_requests",
    "scheduling_facts",
    "workloads_from_objects",
    "workloads_from_spec",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'vfcore.placement' has no attribute {name!r}")
    value = getattr(_load(home), name)
    globals()[name] = value
    return value


def _load(home: str) -> object:
    """Import only the module that defines a lazy name."""
    if home == "vfcore.placement.claims":
        from vfcore.placement import claims

        return claims
    if home == "vfcore.placement.demand":
        from vfcore.placement import demand

        return demand
    if home == "vfcore.placement.fit":
        from vfcore.placement import fit

        return fit
    if home == "vfcore.placement.mig":
        from vfcore.placement import mig

        return mig
    if home == "vfcore.placement.packing":
        from vfcore.placement import packing

        return packing
    if home == "vfcore.placement.scheduler":
        from vfcore.placement import scheduler

        return scheduler
    if home == "vfcore.placement.storage":
        from vfcore.placement import storage

        return storage
    from vfcore.placement.scheduler import scoring

    return scoring


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
