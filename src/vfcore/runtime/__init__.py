"""Runtime: the pure decisions an executor carries out — today, which GPUs each replica gets.

Loaded on first use, never by ``import vfcore`` (``vf explain`` does not need it).
:mod:`vfcore.runtime.devices` assigns GPU devices to the GPU replicas of a local run.
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

__all__ = [
    "GPU_POLICIES",
    "DeviceAssignment",
    "DeviceRequest",
    "GpuDevice",
    "GpuPolicy",
    "assign_devices",
    "visible_devices",
]
