"""Storage facts: StorageClasses, PersistentVolumes and a namespace's PersistentVolumeClaims.

What the API (or ``kubectl get storageclasses,pv -o json`` and ``kubectl get pvc
-n NS -o json``) says, read into frozen values for
:func:`vfcore.placement.storage.check_claims`. A listing that is missing or
refused (a ``Status``) is *unknown* with its reason — never "no classes" or "no
claims": a refused StorageClass listing cannot prove that a claim will not bind.

>>> facts = storage_facts(
...     {"kind": "StorageClassList", "items": [{"metadata": {"name": "fast", "annotations": {
...         "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "ebs.csi.aws.com"}]},
...     None, None)
>>> facts.default_class, facts.volumes_unknown
('fast', 'the PersistentVolume listing is missing')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from vfcore.quantity import parse_quantity

__all__ = [
    "DEFAULT_CLASS_ANNOTATION",
    "NO_PROVISIONER",
    "ClaimInfo",
    "StorageClassInfo",
    "StorageFacts",
    "VolumeInfo",
    "storage_facts",
]

#: The annotation that makes a StorageClass the cluster's default.
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
#: The provisioner of classes that provision nothing (local volumes made by hand).
NO_PROVISIONER = "kubernetes.io/no-provisioner"


@dataclass(frozen=True, slots=True)
class StorageClassInfo:
    """One StorageClass: its provisioner, whether it is the default, its binding mode."""

    name: str
    provisioner: str
    is_default: bool
    binding_mode: str = "Immediate"
    created: str = ""

    @property
    def provisions(self) -> bool:
        """Whether a claim of this class gets a volume made for it (dynamic provisioning)."""
        return self.provisioner != NO_PROVISIONER


@dataclass(frozen=True, slots=True)
class VolumeInfo:
    """One PersistentVolume: class (``""``: none), size in bytes, access modes, phase."""

    name: str
    storage_class: str
    capacity: Fraction | None
    access_modes: tuple[str, ...]
    phase: str
    claimed_by: str | None = None  # "namespace/name" of its claimRef


@dataclass(frozen=True, slots=True)
class ClaimInfo:
    """One PersistentVolumeClaim of the namespace."""

    name: str
    storage_class: str | None
    access_modes: tuple[str, ...]
    phase: str
    request: Fraction | None
    volume: str | None = None


@dataclass(frozen=True, slots=True)
class StorageFacts:
    """The cluster's storage as far as it could be read; ``*_unknown`` says why not."""

    classes: tuple[StorageClassInfo, ...] = ()
    classes_unknown: str | None = None
    volumes: tuple[VolumeInfo, ...] = ()
    volumes_unknown: str | None = None
    claims: tuple[ClaimInfo, ...] = ()
    claims_unknown: str | None = None

    @property
    def default_class(self) -> str | None:
        """The default StorageClass a claim without ``storageClassName`` gets (several
        defaults: the newest, as the DefaultStorageClass admission plugin picks since 1.26)."""
        defaults = sorted((c.created, c.name) for c in self.classes if c.is_default)
        return defaults[-1][1] if defaults else None

    def storage_class(self, name: str) -> StorageClassInfo | None:
        return next((c for c in self.classes if c.name == name), None)

    def claim(self, name: str) -> ClaimInfo | None:
        return next((c for c in self.claims if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "classes": None
            if self.classes_unknown
            else [
                {
                    "name": c.name,
                    "provisioner": c.provisioner,
                    "default": c.is_default,
                    "binding_mode": c.binding_mode,
                }
                for c in self.classes
            ],
            "classes_unknown": self.classes_unknown,
            "default_class": self.default_class,
            "volumes_unknown": self.volumes_unknown,
            "claims_unknown": self.claims_unknown,
        }


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(doc: object, kind: str, noun: str) -> tuple[list[Mapping[str, Any]], str | None]:
    if doc is None:
        return [], f"the {noun} listing is missing"
    body = _mapping(doc)
    if body.get("kind") == "Status" or not isinstance(body.get("items"), list):
        said = body.get("message") or body.get("reason") or "not a list"
        return [], f"the {noun} listing could not be read: {said}"
    return [_mapping(i) for i in body["items"]], None


def _size(value: object) -> Fraction | None:
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def _modes(spec: Mapping[str, Any]) -> tuple[str, ...]:
    modes = spec.get("accessModes")
    return tuple(sorted(str(m) for m in modes)) if isinstance(modes, list) else ()


def storage_facts(classes_json: object, volumes_json: object, claims_json: object) -> StorageFacts:
    """Read the three listings (parsed JSON; ``None`` when not read). See the module docstring."""
    class_items, classes_unknown = _items(classes_json, "StorageClassList", "StorageClass")
    classes = []
    for item in class_items:
        meta = _mapping(item.get("metadata"))
        annotations = _mapping(meta.get("annotations"))
        classes.append(
            StorageClassInfo(
                name=str(meta.get("name")),
                provisioner=str(item.get("provisioner") or ""),
                is_default=str(annotations.get(DEFAULT_CLASS_ANNOTATION, "")).lower() == "true",
                binding_mode=str(item.get("volumeBindingMode") or "Immediate"),
                created=str(meta.get("creationTimestamp") or ""),
            )
        )
    volume_items, volumes_unknown = _items(volumes_json, "PersistentVolumeList", "PersistentVolume")
    volumes = []
    for item in volume_items:
        spec = _mapping(item.get("spec"))
        ref = _mapping(spec.get("claimRef"))
        volumes.append(
            VolumeInfo(
                name=str(_mapping(item.get("metadata")).get("name")),
                storage_class=str(spec.get("storageClassName") or ""),
                capacity=_size(_mapping(spec.get("capacity")).get("storage")),
                access_modes=_modes(spec),
                phase=str(_mapping(item.get("status")).get("phase") or "Unknown"),
                claimed_by=f"{ref.get('namespace')}/{ref.get('name')}" if ref else None,
            )
        )
    claim_items, claims_unknown = _items(
        claims_json, "PersistentVolumeClaimList", "PersistentVolumeClaim"
    )
    claims = []
    for item in claim_items:
        spec = _mapping(item.get("spec"))
        cls = spec.get("storageClassName")
        claims.append(
            ClaimInfo(
                name=str(_mapping(item.get("metadata")).get("name")),
                storage_class=cls if isinstance(cls, str) else None,
                access_modes=_modes(spec),
                phase=str(_mapping(item.get("status")).get("phase") or "Unknown"),
                request=_size(
                    _mapping(_mapping(spec.get("resources")).get("requests")).get("storage")
                ),
                volume=spec.get("volumeName") if isinstance(spec.get("volumeName"), str) else None,
            )
        )
    return StorageFacts(
        classes=tuple(sorted(classes, key=lambda c: c.name)),
        classes_unknown=classes_unknown,
        volumes=tuple(sorted(volumes, key=lambda v: v.name)),
        volumes_unknown=volumes_unknown,
        claims=tuple(sorted(claims, key=lambda c: c.name)),
        claims_unknown=claims_unknown,
    )
