"""The GPU mode: how a flow's GPU nodes claim GPUs, parsed once at the API edge.

- ``exclusive`` (the default): a GPU pod claims ``gpu_count`` whole units of
  its GPU resource (``nvidia.com/gpu`` unless overridden);
- ``shared``: GPU pods claim no GPU resource; their declared VRAM shares cards
  (a runtime class injects the devices);
- ``mix``: a one-GPU pod that declares ``gpu_memory_gib`` takes a MIG slice
  (planned with the layouts); every other GPU pod takes whole cards;
- ``dra``: every GPU pod claims its devices through a ResourceClaim
  (Kubernetes Dynamic Resource Allocation, ``resource.k8s.io/v1``): the
  scheduler's allocator picks the devices (``docs/dra.md``).

The public functions (:func:`vfcore.plan`, :func:`vfcore.gpu_demand`,
:func:`vfcore.validate`, :func:`vfcore.explain`, :func:`vfcore.capacity_cap`…)
accept the mode's name and call :func:`parse_gpu_mode` once; everything
behind them takes a :class:`GpuMode`. :func:`slice_of` is the one place the
mode decides what a node's pods take.

>>> parse_gpu_mode("mix") is GpuMode.MIX, GpuMode.MIX == "mix"
(True, True)
>>> from vfcore.flow.spec import NodeSpec
>>> det = NodeSpec("det", "processor", ("src",), device_type="gpu", gpu_memory_gib=10)
>>> [slice_of(det, mode) for mode in GpuMode]
['whole', 'shared', 'mig', 'dra']
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from vfcore.errors import InvalidInputError

if TYPE_CHECKING:
    from vfcore.flow.spec import NodeSpec

__all__ = ["GPU_MODES", "GpuMode", "SliceKind", "dra_takes_mig", "parse_gpu_mode", "slice_of"]

#: What one pod of a node takes: whole units, a share of a card's VRAM, a MIG slice, DRA devices
#: (a ResourceClaim), or no GPU.
SliceKind = Literal["whole", "shared", "mig", "dra", "none"]


class GpuMode(StrEnum):
    """The GPU mode; a ``str``, so ``GpuMode.MIX == "mix"`` and it prints as ``mix``."""

    EXCLUSIVE = "exclusive"
    SHARED = "shared"
    MIX = "mix"
    DRA = "dra"

    @property
    def needs_runtime_class(self) -> bool:
        """Its GPU pods request no GPU resource, so only a runtime class can inject devices."""
        return self is GpuMode.SHARED


#: The modes' names, in documentation order.
GPU_MODES: tuple[str, ...] = tuple(m.value for m in GpuMode)


def parse_gpu_mode(gpu_mode: GpuMode | str | None) -> GpuMode:
    """The mode named by ``gpu_mode`` (``None``: exclusive), exactly as ``--gpu-mode`` spells it.

    Any other value, ``"Mix"`` included, raises ``invalid-gpu-mode``:

    >>> parse_gpu_mode("whole")
    Traceback (most recent call last):
    ...
    vfcore.errors.InvalidInputError: invalid-gpu-mode: gpu mode 'whole' is not one of ['exclusive', 'shared', 'mix', 'dra'] (hint: use --gpu-mode exclusive (the default), shared, mix or dra)
    """
    if isinstance(gpu_mode, GpuMode):
        return gpu_mode
    if gpu_mode is None:
        return GpuMode.EXCLUSIVE
    if isinstance(gpu_mode, str) and gpu_mode in GPU_MODES:
        return GpuMode(gpu_mode)
    raise InvalidInputError(
        "invalid-gpu-mode",
        f"gpu mode {gpu_mode!r} is not one of {list(GPU_MODES)}",
        "use --gpu-mode exclusive (the default), shared, mix or dra",
    )


def slice_of(node: NodeSpec, mode: GpuMode) -> SliceKind:
    """What each pod of ``node`` takes under ``mode``: the one mode → slice rule.

    A CPU node takes ``none``. In shared mode a GPU node takes ``shared`` (its
    VRAM on one card); in DRA mode ``dra`` (a claim the scheduler allocates);
    in mix mode a one-GPU node that declares ``gpu_memory_gib`` takes a
    ``mig`` slice; otherwise ``whole`` units (``gpu_count`` of them).
    """
    if not node.is_gpu:
        return "none"
    if mode is GpuMode.SHARED:
        return "shared"
    if mode is GpuMode.DRA:
        return "dra"
    if mode is GpuMode.MIX and node.gpu_memory_gib is not None and node.gpu_count == 1:
        return "mig"
    return "whole"


def dra_takes_mig(node: NodeSpec) -> bool:
    """In DRA mode, whether a GPU node's claim asks for a MIG device (``mig.nvidia.com``)
    rather than whole GPUs: a one-GPU node that declares ``gpu_memory_gib``, as in mix mode.

    >>> from vfcore.flow.spec import NodeSpec
    >>> dra_takes_mig(NodeSpec("d", "processor", ("s",), device_type="gpu", gpu_memory_gib=9))
    True
    """
    return node.is_gpu and node.gpu_memory_gib is not None and node.gpu_count == 1
