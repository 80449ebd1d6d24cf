"""GPU facts from GPU Feature Discovery labels, cross-checked with allocatable MIG resources.

``nvidia.com/gpu.memory`` is MiB, always: GFD writes NVML's ``memory.total``
for a card and, under the single MIG strategy, the MIG device's
``memorySizeMB`` — which NVML documents in MiB despite its name (a 1g.10gb on
an A100-80GB is labelled ``9728``: 9.50 GiB, as ``nvidia-smi mig -lgip``
prints it). ``nvidia.com/mig.strategy`` is set cluster-wide by the GPU
operator, on cards that are not MIG-capable too, so it never changes the unit.
A value outside :data:`GPU_MEMORY_MIB_BOUNDS` (no catalogued GPU has it, e.g.
``16106127360`` — bytes — on a T4) leaves the memory ``None`` with a finding;
vfcore never guesses another unit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from vfcore.cluster.kubeparse.fields import short
from vfcore.cluster.nodes import GpuInfo

__all__ = [
    "GPU_MEMORY_CATALOGUE",
    "GPU_MEMORY_MIB_BOUNDS",
    "SHARED_GPU_RESOURCE",
    "gpu_info",
    "gpu_info_from_labels",
]

#: What GFD labels as ``nvidia.com/gpu.memory`` (MiB) on well-known cards and MIG devices:
#: NVML's figures as published in ``nvidia-smi`` output and GFD node dumps. The bounds below
#: come from it; docs/cluster-snapshots.md lists it.
GPU_MEMORY_CATALOGUE: tuple[tuple[str, int], ...] = (
    ("MIG 1g.5gb (A100-40GB)", 4864),
    ("MIG 1g.10gb (A100-80GB)", 9728),
    ("Tesla-T4", 15360),
    ("NVIDIA-A10G", 23028),
    ("NVIDIA-L4", 23034),
    ("NVIDIA-A100-SXM4-40GB", 40960),
    ("NVIDIA-L40S", 46068),
    ("NVIDIA-A100-SXM4-80GB", 81920),
    ("NVIDIA-H100-80GB-HBM3", 81559),
    ("NVIDIA-H200", 143771),
    ("NVIDIA-B200", 183359),
    ("NVIDIA-B300 (288 GB nominal)", 288 * 1024),
)
#: The plausible range of one card's (or MIG device's) memory, in MiB: 1 GiB (below every card
#: GFD labels) to the largest catalogued card (288 GiB). Outside it the fact is unknown.
GPU_MEMORY_MIB_BOUNDS = (1024, max(mib for _, mib in GPU_MEMORY_CATALOGUE))
#: The time-sliced resource when the device plugin's ``renameByDefault: true`` renames it.
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"

_SHARING_STRATEGIES = ("none", "mps", "time-slicing")
_MIG_STRATEGIES = ("none", "single", "mixed")
_GPU_RESOURCE = "nvidia.com/gpu"
_MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
_WHOLE_NUMBER = re.compile(r"^[0-9]+$")


def _whole(labels: Mapping[str, str], key: str, unit: str, problems: list[str]) -> int | None:
    raw = labels.get(key)
    if raw is None:
        return None
    if not _WHOLE_NUMBER.match(raw.strip()):
        problems.append(f"label {key} = {short(raw)} is not a whole number{unit}")
        return None
    return int(raw.strip())


def _is_gpu_key(key: str) -> bool:
    return key.startswith(("nvidia.com/gpu.", "nvidia.com/mig.", _MIG_RESOURCE_PREFIX))


def gpu_info(
    labels: Mapping[str, str], allocatable: Mapping[str, int]
) -> tuple[GpuInfo | None, list[str]]:
    """GPU facts from GFD labels, cross-checked with allocatable MIG resources; and problems."""
    has_gpu = any(_is_gpu_key(k) for k in labels) or any(
        units > 0 and (k == _GPU_RESOURCE or _is_gpu_key(k)) for k, units in allocatable.items()
    )
    if not has_gpu:
        return None, []
    problems: list[str] = []

    mig_strategy = labels.get("nvidia.com/mig.strategy")
    if mig_strategy is not None and mig_strategy not in _MIG_STRATEGIES:
        problems.append(
            f"label nvidia.com/mig.strategy = {short(mig_strategy)} is not one of "
            f"{', '.join(_MIG_STRATEGIES)}"
        )

    product = labels.get("nvidia.com/gpu.product")
    if product is not None and product.endswith("-MIG-INVALID"):
        problems.append(
            f"label nvidia.com/gpu.product = {product!r}: GPU Feature Discovery reports an "
            "invalid MIG configuration for the single strategy (mixed MIG modes or profiles)"
        )

    memory = _plausible_memory(
        _whole(labels, "nvidia.com/gpu.memory", " (MiB)", problems), labels, problems
    )
    count = _whole(labels, "nvidia.com/gpu.count", "", problems)

    # 0 is GFD's own output where no card is shared (the mixed MIG strategy labels
    # gpu.replicas=0): one unit per card, nothing to report.
    replicas = _whole(labels, "nvidia.com/gpu.replicas", "", problems) or None
    renamed = allocatable.get(SHARED_GPU_RESOURCE, 0) > 0
    sharing = labels.get("nvidia.com/gpu.sharing-strategy")
    if sharing is None:
        # Older GFD releases label only the replicas; more than one means time-slicing,
        # and so does the renamed resource (only time-slicing renames it).
        sharing = "time-slicing" if (replicas or 1) > 1 or renamed else "none"
    elif sharing not in _SHARING_STRATEGIES:
        problems.append(
            f"label nvidia.com/gpu.sharing-strategy = {short(sharing)} is not one of "
            f"{', '.join(_SHARING_STRATEGIES)}"
        )

    capable_raw = labels.get("nvidia.com/mig.capable")
    mig_capable = {"true": True, "false": False}.get(capable_raw or "")
    if capable_raw is not None and mig_capable is None:
        problems.append(f"label nvidia.com/mig.capable = {short(capable_raw)} is not true/false")

    profiles = _mig_profiles(labels, allocatable, problems)
    if mig_capable is False and mig_strategy in ("single", "mixed") and not profiles:
        # The operator labels its cluster-wide strategy on every GPU node, a T4 too: on a
        # card that cannot run MIG, no MIG strategy is in effect.
        mig_strategy = "none"
    info = GpuInfo(
        product=product,
        memory_mib=memory,
        count=count,
        sharing=sharing,
        replicas=replicas or 1,
        mig_capable=mig_capable,
        mig_strategy=mig_strategy,
        mig_profiles=profiles,
    )
    return info, problems


def _plausible_memory(
    memory: int | None, labels: Mapping[str, str], problems: list[str]
) -> int | None:
    """``nvidia.com/gpu.memory`` if some catalogued GPU could have it, else ``None`` and a finding."""
    low, high = GPU_MEMORY_MIB_BOUNDS
    if memory is None or low <= memory <= high:
        return memory
    product = labels.get("nvidia.com/gpu.product")
    on = f" on {product}" if product else ""
    side = f"under {low:,} MiB (1 GiB)" if memory < low else f"over {high:,} MiB (288 GiB)"
    problems.append(
        f"gpu-memory-implausible: label nvidia.com/gpu.memory = {memory}{on} is read as MiB, "
        f"as GPU Feature Discovery writes it: {memory / 1024:,.2f} GiB per card, {side}, "
        "outside what any catalogued GPU has; the node's GPU memory is unknown "
        "(vfcore does not guess another unit); hint: relabel it in MiB as GFD does "
        "(a 16 GB T4 is 15360), or let GFD set it"
    )
    return None


def _mig_profiles(
    labels: Mapping[str, str], allocatable: Mapping[str, int], problems: list[str]
) -> tuple[tuple[str, int], ...]:
    """Mixed-strategy profiles: ``nvidia.com/mig-<p>.count`` labels, else allocatable ``nvidia.com/mig-<p>``.

    Where both exist they must agree (label count × the profile's replicas label
    = allocatable); a disagreement (a reconfiguration in flight, an unhealthy MIG
    device) is reported. The label count is kept: it is the physical layout,
    while the scheduler keeps using allocatable.
    """
    from_labels: dict[str, int] = {}
    for key in sorted(labels):
        if key.startswith(_MIG_RESOURCE_PREFIX) and key.endswith(".count"):
            profile = key[len(_MIG_RESOURCE_PREFIX) : -len(".count")]
            units = _whole(labels, key, "", problems)
            if profile and units is not None:
                from_labels[profile] = units
    from_allocatable = {
        name[len(_MIG_RESOURCE_PREFIX) :]: units
        for name, units in sorted(allocatable.items())
        if name.startswith(_MIG_RESOURCE_PREFIX) and len(name) > len(_MIG_RESOURCE_PREFIX)
    }
    if not from_labels:
        return tuple(sorted((p, n) for p, n in from_allocatable.items() if n > 0))
    for profile in sorted(set(from_labels) | set(from_allocatable)):
        count = from_labels.get(profile)
        advertised = from_allocatable.get(profile)
        per = _whole(labels, f"{_MIG_RESOURCE_PREFIX}{profile}.replicas", "", problems) or 1
        if count is None:
            problems.append(
                f"allocatable {_MIG_RESOURCE_PREFIX}{profile} = {advertised} has no "
                f"{_MIG_RESOURCE_PREFIX}{profile}.count label"
            )
        elif (advertised or 0) != count * per:
            shared = f" × {per} replicas" if per != 1 else ""
            problems.append(
                f"label {_MIG_RESOURCE_PREFIX}{profile}.count = {count}{shared} but allocatable "
                f"{_MIG_RESOURCE_PREFIX}{profile} = {advertised or 0}: GFD and the device plugin "
                "disagree (a MIG reconfiguration in progress, or an unhealthy MIG device); "
                "the scheduler uses allocatable"
            )
    return tuple(sorted(from_labels.items()))


def gpu_info_from_labels(
    labels: Mapping[str, str], allocatable: Mapping[str, int] | None = None
) -> GpuInfo | None:
    """GPU facts from GPU Feature Discovery labels (``None`` for a node without GPUs).

    ``nvidia.com/gpu.memory`` is MiB (under the single MIG strategy: one MIG
    device's, NVML's ``memorySizeMB``, which is MiB too). Label values that do
    not parse, or memory no catalogued GPU has, leave the fact ``None``.

    >>> info = gpu_info_from_labels({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    ...     "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.count": "4",
    ...     "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"})
    >>> info.memory_mib, info.count, info.sharing, info.replicas
    (81559, 4, 'time-slicing', 4)
    """
    info, _ = gpu_info(labels, allocatable or {})
    return info
