"""Will the run's volumes bind? The storage half of ``vf deploy``'s preflight.

A run uses PersistentVolumeClaims two ways (:func:`claim_uses` finds them in
the rendered objects):

- **made by the run**: a StatefulSet's ``volumeClaimTemplates`` (the in-cluster
  broker's ``/data``): one claim per replica, ``<template>-<statefulset>-<i>``;
- **mounted**: a claim that must already exist (``--mount-pvc CLAIM:PATH``).

:func:`check_claims` answers each with :class:`~vfcore.errors.Problem`\\ s, the
way a plan's problems are (an error is refused before anything is applied):

| what | finding |
|---|---|
| a claim to make names no class, the cluster has no default StorageClass and no Available PersistentVolume without a class that is large enough | ``storage-no-default-class`` (error): it would stay Pending, the broker never starts |
| it names a class the cluster does not have | ``storage-class-missing`` (error) |
| its class provisions nothing (``kubernetes.io/no-provisioner``) and no Available volume of that class fits | ``storage-class-no-volume`` (error) |
| a claim to mount does not exist in the namespace | ``claim-not-found`` (error) |
| a ``ReadWriteOnce`` claim mounted by pods the plan puts on several nodes; a ``ReadWriteOncePod`` claim mounted by several pods, or by a node KEDA scales | ``claim-access-mode`` (error) |
| a ``ReadWriteOnce`` claim mounted by a node KEDA scales (replicas beyond the plan's may land on other hosts) | ``claim-access-mode`` (warning) |
| a ``ReadOnlyMany`` claim mounted read-write | ``claim-read-only`` (error) |
| a claim (made or mounted) that exists and is not Bound | ``claim-pending`` (warning) |
| a listing that could not be read | ``storage-unknown`` (warning): unknown, never "binds" |

A claim the run made earlier and that is Bound (a redeploy) needs nothing.

>>> from vfcore.cluster.storage import storage_facts
>>> use = ClaimUse("data-broker-0", owner="statefulset/broker", created=True,
...                storage_class=None, request=Fraction(10 * 2**30), access_modes=("ReadWriteOnce",))
>>> empty = storage_facts({"kind": "StorageClassList", "items": []},
...                       {"kind": "PersistentVolumeList", "items": []},
...                       {"kind": "PersistentVolumeClaimList", "items": []})
>>> [p.id for p in check_claims((use,), empty, {})]
['storage-no-default-class']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from vfcore.cluster.storage import StorageFacts
from vfcore.errors import Problem
from vfcore.quantity import format_human, parse_quantity

__all__ = [
    "NODE_NAME_ANNOTATION",
    "ClaimUse",
    "check_claims",
    "claim_uses",
]

#: The annotation holding a per-node object's exact flow node name.
NODE_NAME_ANNOTATION = "vfcore.io/node-name"
_ONE_NODE = "ReadWriteOnce"
_ONE_POD = "ReadWriteOncePod"
_READ_ONLY = "ReadOnlyMany"
_MANY = ("ReadWriteMany", "ReadOnlyMany")


@dataclass(frozen=True, slots=True)
class ClaimUse:
    """One claim the run needs: made (``created``) or mounted by ``node``'s pods."""

    claim: str
    owner: str  # "statefulset/NAME" (made) or "node detector" (mounted)
    created: bool
    storage_class: str | None = None
    request: Fraction | None = None
    access_modes: tuple[str, ...] = ()
    node: str | None = None  # the flow node whose pods mount it
    read_only: bool = False
    fix: str = ""  # how the user picks another class or claim (a flag)
    #: KEDA may add replicas of ``node`` beyond the plan's (a ScaledObject targets it)
    scaled: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "owner": self.owner,
            "created": self.created,
            "storage_class": self.storage_class,
            "node": self.node,
            "read_only": self.read_only,
        }


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _size(value: object) -> Fraction | None:
    try:
        return None if value is None else parse_quantity(value)
    except ValueError:
        return None


def claim_uses(objects: Iterable[Mapping[str, Any]]) -> tuple[ClaimUse, ...]:
    """Every claim the rendered ``objects`` make or mount, in render order."""
    objects = tuple(objects)
    targets = {
        str(_mapping(_mapping(o.get("spec")).get("scaleTargetRef")).get("name"))
        for o in objects
        if o.get("kind") == "ScaledObject"
    }
    out: list[ClaimUse] = []
    for obj in objects:
        kind = obj.get("kind")
        if kind not in ("StatefulSet", "Deployment", "Job"):
            continue
        meta = _mapping(obj.get("metadata"))
        name = str(meta.get("name"))
        spec = _mapping(obj.get("spec"))
        node = _mapping(meta.get("annotations")).get(NODE_NAME_ANNOTATION)
        node = node if isinstance(node, str) else None
        is_broker = _mapping(meta.get("labels")).get("app.kubernetes.io/component") == "broker"
        templates = spec.get("volumeClaimTemplates")
        replicas = spec.get("replicas", 1)
        replicas = replicas if isinstance(replicas, int) and replicas >= 0 else 1
        for template in templates if isinstance(templates, list) else []:
            tmeta = _mapping(_mapping(template).get("metadata"))
            tspec = _mapping(_mapping(template).get("spec"))
            cls = tspec.get("storageClassName")
            modes = tspec.get("accessModes")
            for i in range(replicas):
                out.append(
                    ClaimUse(
                        claim=f"{tmeta.get('name')}-{name}-{i}",
                        owner=f"statefulset/{name}",
                        created=True,
                        storage_class=cls if isinstance(cls, str) else None,
                        request=_size(
                            _mapping(_mapping(tspec.get("resources")).get("requests")).get(
                                "storage"
                            )
                        ),
                        access_modes=tuple(modes) if isinstance(modes, list) else (),
                        node=node,
                        fix="--broker-storage-class NAME" if is_broker else "",
                    )
                )
        pod = _mapping(_mapping(spec.get("template")).get("spec"))
        volumes = pod.get("volumes")
        mounts: dict[str, bool] = {}
        for group in ("initContainers", "containers"):
            listed = pod.get(group)
            for c in listed if isinstance(listed, list) else []:
                for m in _mapping(c).get("volumeMounts") or []:
                    m = _mapping(m)
                    vol = str(m.get("name"))
                    mounts[vol] = mounts.get(vol, True) and bool(m.get("readOnly"))
        for v in volumes if isinstance(volumes, list) else []:
            source = _mapping(_mapping(v).get("persistentVolumeClaim"))
            if not source.get("claimName"):
                continue
            read_only = bool(source.get("readOnly")) or mounts.get(
                str(_mapping(v).get("name")), True
            )
            out.append(
                ClaimUse(
                    claim=str(source["claimName"]),
                    owner=f"node {node}" if node else f"{str(kind).lower()}/{name}",
                    created=False,
                    node=node,
                    read_only=read_only,
                    fix="--mount-pvc CLAIM:PATH",
                    scaled=name in targets,
                )
            )
    return tuple(out)


def _gib(value: Fraction | None) -> str:
    if value is None:
        return "?"
    return format_human("ephemeral-storage", int(value))


def _fits(volume: Any, use: ClaimUse, storage_class: str) -> bool:
    return (
        volume.phase == "Available"
        and volume.storage_class == storage_class
        and (
            use.request is None or (volume.capacity is not None and volume.capacity >= use.request)
        )
        and all(m in volume.access_modes for m in use.access_modes)
    )


def _made(use: ClaimUse, facts: StorageFacts) -> list[Problem]:
    subject = use.claim
    what = f"claim {use.claim} ({use.owner}, {_gib(use.request)}, {', '.join(use.access_modes) or 'no access mode'})"
    if facts.classes_unknown:
        return [
            Problem(
                "storage-unknown",
                "warning",
                subject,
                f"whether {what} binds is unknown: {facts.classes_unknown}",
                "grant `list storageclasses` (docs/kubernetes.md, RBAC) so the preflight can tell",
            )
        ]
    names = ", ".join(c.name for c in facts.classes) or "none"
    pick = (
        f"pass {use.fix} (this cluster's classes: {names})"
        if use.fix
        else f"this cluster's classes: {names}"
    )
    cls = use.storage_class
    if cls is None:
        default = facts.default_class
        if default is not None:
            return _made(replace(use, storage_class=default), facts)
        if facts.volumes_unknown is None and any(_fits(v, use, "") for v in facts.volumes):
            return []
        volumes = "" if facts.volumes_unknown is None else f" ({facts.volumes_unknown})"
        return [
            Problem(
                "storage-no-default-class",
                "error" if facts.volumes_unknown is None else "warning",
                subject,
                f"{what} names no StorageClass, the cluster has no default one "
                f"(annotation storageclass.kubernetes.io/is-default-class) and no Available "
                f"PersistentVolume without a class that holds it{volumes}: it would stay "
                "Pending, and its pod unschedulable (`unbound immediate PersistentVolumeClaims`)",
                f"{pick}; or mark a class default; or create a PersistentVolume for it"
                + (
                    "; or deploy with an existing broker: --broker nats://HOST:4222"
                    if "broker" in use.fix
                    else ""
                ),
            )
        ]
    info = facts.storage_class(cls)
    if info is None:
        return [
            Problem(
                "storage-class-missing",
                "error",
                subject,
                f"{what} names StorageClass {cls!r}, which this cluster does not have",
                pick,
            )
        ]
    if info.provisions:
        return []
    if facts.volumes_unknown is None and not any(_fits(v, use, cls) for v in facts.volumes):
        return [
            Problem(
                "storage-class-no-volume",
                "error",
                subject,
                f"{what} names StorageClass {cls!r}, which provisions nothing "
                f"({info.provisioner}), and no Available PersistentVolume of that class holds it",
                f"create a PersistentVolume of class {cls} (>= {_gib(use.request)}), or {pick}",
            )
        ]
    return []


def _mounted(
    use: ClaimUse, facts: StorageFacts, hosts: Mapping[str, str], users: tuple[ClaimUse, ...]
) -> list[Problem]:
    """The problems of one claim to mount; ``users`` are every use of it (the flow nodes
    whose pods mount it: a claim's access modes bound all of its pods together)."""
    subject = use.claim
    if facts.claims_unknown:
        return [
            Problem(
                "storage-unknown",
                "warning",
                subject,
                f"whether claim {use.claim} ({use.owner}) exists is unknown: {facts.claims_unknown}",
                "grant `list persistentvolumeclaims` in the namespace (docs/kubernetes.md, RBAC)",
            )
        ]
    claim = facts.claim(use.claim)
    if claim is None:
        present = ", ".join(c.name for c in facts.claims[:10]) or "none"
        return [
            Problem(
                "claim-not-found",
                "error",
                subject,
                f"{use.owner} mounts PersistentVolumeClaim {use.claim}, which is not in the "
                f"namespace (its claims: {present})",
                f"create the claim first, or fix {use.fix}",
            )
        ]
    out: list[Problem] = []
    mounting = {u.node for u in users if u.node is not None}
    pods = sorted(p for p in hosts if p.rsplit("/", 1)[0] in mounting)
    nodes = sorted({hosts[p] for p in pods})
    owners = sorted({u.owner for u in users})
    owner = owners[0] if len(owners) == 1 else f"{', '.join(owners[:-1])} and {owners[-1]}"
    use = replace(use, owner=owner, read_only=all(u.read_only for u in users))
    modes = set(claim.access_modes)
    if _ONE_POD in modes and not modes & {_ONE_NODE, *_MANY} and len(pods) > 1:
        out.append(
            Problem(
                "claim-access-mode",
                "error",
                subject,
                f"claim {use.claim} is ReadWriteOncePod, and {len(pods)} pods of {use.owner} "
                f"mount it ({', '.join(pods[:5])}): only one pod may use it",
                "mount it in one pod only (--mount-pvc NODE=CLAIM:PATH, NODE a node of one "
                "replica), or use a ReadWriteMany claim",
            )
        )
    elif modes and not modes & set(_MANY) and _ONE_NODE in modes and len(nodes) > 1:
        out.append(
            Problem(
                "claim-access-mode",
                "error",
                subject,
                f"claim {use.claim} is ReadWriteOnce (one node at a time), and the plan puts the "
                f"{len(pods)} pods of {use.owner} that mount it on {len(nodes)} nodes "
                f"({', '.join(nodes[:5])}): the pods on the other nodes would wait for the volume",
                "use a ReadWriteMany (or, read-only, ReadOnlyMany) claim; or mount it in one "
                "node's pods only (--mount-pvc NODE=CLAIM:PATH) with pods that share one host; "
                "or fewer replicas (nb_tasks)",
            )
        )
    scaled = sorted(u.node for u in users if u.scaled and u.node is not None)
    if scaled and not modes & set(_MANY) and modes & {_ONE_NODE, _ONE_POD} and not out:
        one_pod = _ONE_POD in modes and _ONE_NODE not in modes
        out.append(
            Problem(
                "claim-access-mode",
                "error" if one_pod else "warning",
                subject,
                f"claim {use.claim} is {'ReadWriteOncePod' if one_pod else 'ReadWriteOnce'}, "
                f"and KEDA may add replicas of {', '.join(scaled)} beyond the plan's"
                + (
                    ": a second pod could never mount it"
                    if one_pod
                    else ": one it starts on another host would wait for the volume"
                ),
                "use a ReadWriteMany claim for an autoscaled node, or mount it only in nodes "
                "KEDA does not scale (--mount-pvc NODE=CLAIM:PATH)",
            )
        )
    if modes == {_READ_ONLY} and not use.read_only:
        out.append(
            Problem(
                "claim-read-only",
                "error",
                subject,
                f"claim {use.claim} is ReadOnlyMany, and {use.owner} mounts it read-write",
                "mount it read-only (--mount-pvc CLAIM:PATH:ro), or use a ReadWriteMany claim",
            )
        )
    if claim.phase != "Bound":
        out.append(
            Problem(
                "claim-pending",
                "warning",
                subject,
                f"claim {use.claim} is {claim.phase}, not Bound: pods mounting it wait until it is",
                f"`kubectl describe pvc {use.claim}` says why",
            )
        )
    return out


def check_claims(
    uses: Iterable[ClaimUse], facts: StorageFacts, hosts: Mapping[str, str]
) -> tuple[Problem, ...]:
    uses = tuple(uses)
    """Every problem of ``uses`` on a cluster with ``facts``; ``hosts`` is the plan's
    ``pod -> node`` (``detector/0 -> gpu-a``), for the access modes. See the module
    docstring for each finding."""
    out: list[Problem] = []
    seen: set[str] = set()
    for use in uses:
        if use.created:
            existing = None if facts.claims_unknown else facts.claim(use.claim)
            if existing is not None and existing.phase == "Bound":
                continue  # made by an earlier deploy of the run, and bound
            if existing is not None:
                out.append(
                    Problem(
                        "claim-pending",
                        "warning",
                        use.claim,
                        f"claim {use.claim} ({use.owner}) exists and is {existing.phase}",
                        f"`kubectl describe pvc {use.claim}` says why",
                    )
                )
            out.extend(_made(use, facts))
        else:
            if use.claim in seen:
                continue
            seen.add(use.claim)
            users = tuple(u for u in uses if not u.created and u.claim == use.claim)
            out.extend(_mounted(use, facts, hosts, users))
    return tuple(out)
