"""GPU facts from GPU Feature Discovery labels, cross-checked with allocatable MIG resources."""

from __future__ import annotations

import re
from collections.abc import Mapping

from vfcore.cluster.kubeparse.fields import short
from vfcore.cluster.nodes import GpuInfo

__all__ = ["gpu_info", "gpu_info_from_labels"]

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


def _mb_to_mib(megabytes: int) -> int:
    """MIG memory labels are in MB (10^6 bytes); vfcore keeps MiB, rounded down (never overstated)."""
    return megabytes * 10**6 // 2**20


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

    memory_unit = " (MB, a MIG device)" if mig_strategy == "single" else " (MiB)"
    memory = _whole(labels, "nvidia.com/gpu.memory", memory_unit, problems)
    if memory is not None and mig_strategy == "single":
        memory = _mb_to_mib(memory)
    count = _whole(labels, "nvidia.com/gpu.count", "", problems)

    replicas = _whole(labels, "nvidia.com/gpu.replicas", "", problems)
    if replicas == 0:
        problems.append("label nvidia.com/gpu.replicas = '0' is not a positive number")
        replicas = None
    sharing = labels.get("nvidia.com/gpu.sharing-strategy")
    if sharing is None:
        # Older GFD releases label only the replicas; more than one means time-slicing.
        sharing = "time-slicing" if (replicas or 1) > 1 else "none"
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

    ``nvidia.com/gpu.memory`` is MiB, except under the single MIG strategy
    where it is a MIG device's memory in MB (converted to MiB, rounded down).
    Label values that do not parse leave the fact ``None``.

    >>> info = gpu_info_from_labels({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    ...     "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.count": "4",
    ...     "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"})
    >>> info.memory_mib, info.count, info.sharing, info.replicas
    (81559, 4, 'time-slicing', 4)
    """
    info, _ = gpu_info(labels, allocatable or {})
    return info
