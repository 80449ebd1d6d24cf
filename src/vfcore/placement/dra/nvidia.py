"""What NVIDIA's DRA driver publishes, built from vfcore's MIG catalogue (pure data).

For what-if clusters, tests, the benchmark and the examples, these functions
write the ResourceSlices and DeviceClasses ``kubernetes-sigs/dra-driver-nvidia-gpu``
publishes (``cmd/gpu-kubelet-plugin``, read from source):

- :func:`whole_gpu_slices`: without DynamicMIG, one slice per node holding
  every GPU (``gpu-0`` … ``gpu-7``, attributes ``type: gpu``, ``productName``,
  ``uuid``; capacity ``memory``);
- :func:`dynamic_mig_slices`: with DynamicMIG on 1.35+ (split slices), one
  slice holding the shared counters (one counter set per GPU,
  ``gpu-<i>-counter-set``) and then one slice per GPU holding the full GPU and
  every MIG *placement* as a device (``gpu-0-mig-3g40gb-9-4``: profile 3g.40gb,
  GI profile id 9, start slot 4), devices sorted by name as the driver sorts
  them. Each placement consumes its memory slices (``memory-slice-<k>``, one
  each) and its compute slices from its GPU's counter set; the full GPU
  consumes everything, so it and any MIG device exclude each other;
- :func:`nvidia_device_classes`: ``gpu.nvidia.com`` (``type == 'gpu'``) and
  ``mig.nvidia.com`` (``type == 'mig'``).

**Inferred** (and said so in ``docs/dra.md``): NVIDIA's counter sets count
``multiprocessors``, copy engines, decoders and memory bytes beside the memory
slices; the catalogue knows compute *slices*, not SM counts, so these slices
carry one ``compute-slices`` counter instead (the same layouts fit: a
placement's memory slices and compute slices are what the MIG User Guide's
tables bound). ``+me`` variants (media extensions, at most one per card) are
left out: counters cannot say "at most one". GI profile ids follow
``nvidia-smi mig -lgip`` on A100/H100 (1g 19, 1g×2 slices 15, 2g 14, 3g 9,
4g 5, 7g 0; A30-like cards 1g 14, 2g 5, 4g 0); they only name devices, but
names order them, and order is what the allocator's first-fit follows.

>>> names = [d["name"] for d in dynamic_mig_slices("n1", "H100-80GB", 1)[1]["spec"]["devices"]]
>>> names[:4], len(names)
(['gpu-0', 'gpu-0-mig-1g10gb-19-0', 'gpu-0-mig-1g10gb-19-1', 'gpu-0-mig-1g10gb-19-2'], 19)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from vfcore.placement.claims import DEFAULT_DRA_DRIVER
from vfcore.placement.mig.catalogue import MigFamily, MigProfile, as_family

__all__ = [
    "MIG_COUNTER_COMPUTE",
    "dynamic_mig_slices",
    "mig_device_name",
    "nvidia_device_classes",
    "whole_gpu_slices",
]

API_VERSION = "resource.k8s.io/v1"
MIG_COUNTER_COMPUTE = "compute-slices"
_GI_IDS_8x7 = {(1, 1): 19, (2, 1): 15, (2, 2): 14, (4, 3): 9, (4, 4): 5, (8, 7): 0}
_GI_IDS_4x4 = {(1, 1): 14, (2, 2): 5, (4, 4): 0}


def _gi_profile_id(family: MigFamily, profile: MigProfile) -> int:
    ids = _GI_IDS_8x7 if family.memory_slices == 8 else _GI_IDS_4x4
    return ids.get((profile.memory_slices, profile.compute_slices), 99)


def mig_device_name(gpu: int, family: MigFamily | str, profile: str, start: int) -> str:
    """The driver's name of a MIG placement: ``gpu-<minor>-mig-<profile, no dots>-<id>-<start>``.

    >>> mig_device_name(0, "H100-80GB", "3g.40gb", 4)
    'gpu-0-mig-3g40gb-9-4'
    """
    fam = as_family(family)
    prof = fam.profile(profile)
    if prof is None:
        raise ValueError(f"{profile!r} is not a profile of {fam.name}")
    pname = re.sub(r"[^a-z0-9-]", "-", prof.name.replace(".", "").lower()).strip("-")
    return f"gpu-{gpu}-mig-{pname}-{_gi_profile_id(fam, prof)}-{start}"


def _slice(
    name: str, node: str, driver: str, pool_size: int, spec: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": pool_size},
            "nodeName": node,
            **spec,
        },
    }


def _mib_bytes(mib: int) -> str:
    return f"{mib}Mi"


def whole_gpu_slices(
    node: str,
    gpus: int,
    *,
    product: str = "NVIDIA H100 80GB HBM3",
    memory_mib: int = 81559,
    driver: str = DEFAULT_DRA_DRIVER,
) -> tuple[dict[str, Any], ...]:
    """One slice with ``gpus`` whole GPUs, as the driver publishes without DynamicMIG."""
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                "productName": {"string": product},
                "uuid": {"string": f"GPU-{node}-{i}"},
                "index": {"int": i},
            },
            "capacity": {"memory": {"value": _mib_bytes(memory_mib)}},
        }
        for i in range(gpus)
    ]
    return (_slice(f"{node}-{driver}", node, driver, 1, {"devices": devices}),)


def dynamic_mig_slices(
    node: str,
    family: MigFamily | str,
    gpus: int,
    *,
    product: str | None = None,
    driver: str = DEFAULT_DRA_DRIVER,
    profiles: Iterable[str] | None = None,
) -> tuple[dict[str, Any], ...]:
    """The split slices of ``gpus`` MIG-capable GPUs of ``family`` with DynamicMIG (1.35+):
    the counters slice first, then one slice per GPU; ``profiles`` limits the MIG devices
    (default: every plain profile of the family)."""
    fam = as_family(family)
    wanted = set(profiles) if profiles is not None else None
    plain = [p for p in fam.profiles if p.plain and (wanted is None or p.name in wanted)]
    full = max(fam.profiles, key=lambda p: (p.memory_slices, p.compute_slices))
    product = product or f"NVIDIA {fam.name}"
    counter_sets = []
    gpu_slices = []
    for i in range(gpus):
        counter_set = f"gpu-{i}-counter-set"
        everything = {
            MIG_COUNTER_COMPUTE: {"value": str(fam.compute_slices)},
            **{f"memory-slice-{k}": {"value": "1"} for k in range(fam.memory_slices)},
        }
        counter_sets.append({"name": counter_set, "counters": everything})
        uuid = f"GPU-{node}-{i}"
        common: dict[str, Any] = {"productName": {"string": product}}
        devices: list[dict[str, Any]] = [
            {
                "name": f"gpu-{i}",
                "attributes": {
                    "type": {"string": "gpu"},
                    "uuid": {"string": uuid},
                    **common,
                },
                "capacity": {"memory": {"value": _mib_bytes(full.usable_mib)}},
                "consumesCounters": [{"counterSet": counter_set, "counters": everything}],
            }
        ]
        for prof in plain:
            for start in prof.starts:
                devices.append(
                    {
                        "name": mig_device_name(i, fam, prof.name, start),
                        "attributes": {
                            "type": {"string": "mig"},
                            "profile": {"string": prof.name},
                            "parentUUID": {"string": uuid},
                            **common,
                        },
                        "capacity": {"memory": {"value": _mib_bytes(prof.usable_mib)}},
                        "consumesCounters": [
                            {
                                "counterSet": counter_set,
                                "counters": {
                                    MIG_COUNTER_COMPUTE: {"value": str(prof.compute_slices)},
                                    **{
                                        f"memory-slice-{k}": {"value": "1"}
                                        for k in range(start, start + prof.memory_slices)
                                    },
                                },
                            }
                        ],
                    }
                )
        devices.sort(key=lambda d: str(d["name"]))  # the driver publishes them sorted by name
        gpu_slices.append(devices)
    size = gpus + 1
    out = [
        _slice(f"{node}-{driver}-counters", node, driver, size, {"sharedCounters": counter_sets})
    ]
    out += [
        _slice(f"{node}-{driver}-gpu-{i}", node, driver, size, {"devices": devices})
        for i, devices in enumerate(gpu_slices)
    ]
    return tuple(out)


def nvidia_device_classes(driver: str = DEFAULT_DRA_DRIVER) -> tuple[dict[str, Any], ...]:
    """The DeviceClasses NVIDIA's driver installs: ``gpu.nvidia.com`` and ``mig.nvidia.com``."""
    return tuple(
        {
            "apiVersion": API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f"device.driver == '{driver}' && "
                            f"device.attributes['{driver}'].type == '{kind}'"
                        }
                    }
                ]
            },
        }
        for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"))
    )
