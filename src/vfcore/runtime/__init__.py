"""Runtime: the pure decisions an executor carries out.

Loaded on first use, never by ``import vfcore`` (``vf explain`` does not need it).
:mod:`vfcore.runtime.devices` assigns GPU devices to the GPU replicas of a local run;
:mod:`vfcore.runtime.layout` lays out a whole local run (replica bounds, pods and
slots, routing per edge, devices) for the local executor to carry out.
"""

from vfcore.runtime.devices import (
    GPU_POLICIES,
    DeviceAssignment,
    DeviceRequest,
    GpuDevice,
    GpuPolicy,
    assign_devices,
    visible_devices,
)
from vfcore.runtime.layout import (
    LOCAL_WAIVED_REASONS,
    ROUTINGS,
    EdgeLayout,
    LayoutOptions,
    LocalLayout,
    NodeLayout,
    PodLayout,
    Routing,
    local_layout,
)

__all__ = [
    "GPU_POLICIES",
    "LOCAL_WAIVED_REASONS",
    "ROUTINGS",
    "DeviceAssignment",
    "DeviceRequest",
    "EdgeLayout",
    "GpuDevice",
    "GpuPolicy",
    "LayoutOptions",
    "LocalLayout",
    "NodeLayout",
    "PodLayout",
    "Routing",
    "assign_devices",
    "local_layout",
    "visible_devices",
]
