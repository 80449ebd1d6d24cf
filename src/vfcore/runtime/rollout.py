"""What a surge rollout asks of the cluster beyond the run's plan (``vf deploy --rollout surge``).

A surge starts one more pod of a Deployment before an old one stops
(``maxSurge: 1``), and Kubernetes rolls the run's Deployments side by side: at
the worst moment each rolled workload has one pod more than the plan placed.
For pods that take only cpu and memory that is usually room a cluster has; for
GPU pods it is a whole pod's devices. :func:`surge_needs` says, per rolled
Deployment, what one more of its pods takes in extended resources (GPUs, MIG
slices) and device claims; :func:`surge_warning` turns that into the line
``vf deploy`` prints. Nothing is lost when there is no room — the new pod stays
Pending, the old ones keep reading — but the rollout waits.

>>> pod = {"containers": [{"name": "worker", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
>>> dep = {"kind": "Deployment", "metadata": {"name": "t-r1-infer-x",
...        "annotations": {"vfcore.io/node-name": "infer"}},
...        "spec": {"template": {"spec": pod}}}
>>> needs = surge_needs([dep], ["t-r1-infer-x"])
>>> needs[0].extra
(('nvidia.com/gpu', 4),)
>>> print(surge_warning(needs))
--rollout surge starts one more pod of each rolled workload at once; 1 of them take devices: infer +4 nvidia.com/gpu. Where there is no room the new pod stays Pending and its rollout waits (the old pods keep running: nothing is lost); --rollout drain needs no room
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SurgeNeed", "surge_needs", "surge_warning"]

_NOT_DEVICES = frozenset({"cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "hugepages-1Gi"})


@dataclass(frozen=True, slots=True)
class SurgeNeed:
    """One rolled Deployment's extra pod: its flow node, the extended resources it
    limits (resource, units) and how many device claims it makes (DRA)."""

    workload: str
    node: str
    extra: tuple[tuple[str, int], ...] = ()
    claims: int = 0

    @property
    def takes_devices(self) -> bool:
        return bool(self.extra) or self.claims > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "node": self.node,
            "extra": dict(self.extra),
            "claims": self.claims,
        }


def _units(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def surge_needs(
    objects: Sequence[Mapping[str, Any]], rolled: Iterable[str]
) -> tuple[SurgeNeed, ...]:
    """What one more pod of each Deployment named in ``rolled`` takes, in name order."""
    names = set(rolled)
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        if obj.get("kind") != "Deployment" or meta.get("name") not in names:
            continue
        pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        extra: dict[str, int] = {}
        for c in [*(pod.get("initContainers") or ()), *(pod.get("containers") or ())]:
            for resource, value in ((c.get("resources") or {}).get("limits") or {}).items():
                if resource not in _NOT_DEVICES:
                    extra[resource] = max(extra.get(resource, 0), _units(value))
        node = (meta.get("annotations") or {}).get("vfcore.io/node-name") or meta["name"]
        out.append(
            SurgeNeed(
                meta["name"],
                node,
                tuple(sorted(extra.items())),
                len(pod.get("resourceClaims") or ()),
            )
        )
    return tuple(sorted(out, key=lambda n: n.workload))


def surge_warning(needs: Sequence[SurgeNeed]) -> str | None:
    """The line to print when a surge needs devices beyond the plan (``None``: it needs none)."""
    devices = [n for n in needs if n.takes_devices]
    if not devices:
        return None
    parts = []
    for n in devices:
        what = [f"+{units} {resource}" for resource, units in n.extra]
        if n.claims:
            what.append(f"+{n.claims} ResourceClaim{'s' if n.claims > 1 else ''}")
        parts.append(f"{n.node} {', '.join(what)}")
    return (
        "--rollout surge starts one more pod of each rolled workload at once; "
        f"{len(devices)} of them take devices: {'; '.join(parts)}. Where there is no room "
        "the new pod stays Pending and its rollout waits (the old pods keep running: nothing "
        "is lost); --rollout drain needs no room"
    )
