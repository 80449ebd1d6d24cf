"""What a production deploy sets on the run's pods: volumes, images, priority.

The ``vf deploy`` flags behind :class:`vfcore.runtime.render_options.RenderOptions`'
``volumes``, ``scratch``, ``image_pull_policy``, ``image_pull_secrets``,
``image_overrides`` and ``priority_class``, parsed and checked here (each with its
own error id); :mod:`vfcore.runtime.manifests` renders them:

- ``--mount-pvc [NODE=]CLAIM:PATH[:ro]``, ``--mount-configmap [NODE=]NAME:PATH``,
  ``--mount-secret [NODE=]NAME:PATH`` (:func:`parse_volume`): a volume mounted at
  ``PATH`` in the worker container of every node's pods, or of ``NODE``'s only.
  ConfigMaps and Secrets are always mounted read-only; a claim read-write unless
  ``:ro``. All three volume types are allowed by the *restricted* Pod Security
  Standard. Two volumes on one path of one pod, a relative path, or a path on or
  under vf's own (``/etc/vf``, ``/scratch`` with ``--scratch``) is ``invalid-mount``;
- ``--scratch SIZE``: an ``emptyDir`` with ``sizeLimit: SIZE`` at :data:`SCRATCH_PATH`
  in every worker (the kubelet evicts a pod whose scratch outgrows it; to have the
  scheduler count the space, request it: ``--resources NODE=ephemeral-storage:SIZE``);
- ``--image-pull-policy Always|IfNotPresent|Never`` on every container that runs the
  flow's image; ``--image-pull-secret NAME`` (repeatable) on every pod;
  ``--image-override NODE=IMAGE``: ``NODE``'s pods run ``IMAGE`` (an image reference,
  :func:`~vfcore.runtime.render_options.check_image_reference`; it must hold the
  flow and vfcore, as ``--image`` does);
- ``--priority-class NAME``: ``priorityClassName`` on every pod of the run.

>>> parse_volume("pvc", "detector=videos:/data:ro")
WorkerVolume(kind='pvc', source='videos', path='/data', read_only=True, node='detector')
>>> parse_volume("configmap", "models:/etc/models").read_only
True
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from vfcore.errors import InvalidInputError, brief
from vfcore.quantity import canonical_units

__all__ = [
    "PULL_POLICIES",
    "SCRATCH_PATH",
    "VOLUME_FLAGS",
    "WorkerVolume",
    "check_pod_options",
    "parse_volume",
]

#: Where ``--scratch`` mounts its ``emptyDir``.
SCRATCH_PATH: Final = "/scratch"
PULL_POLICIES: Final = ("Always", "IfNotPresent", "Never")
VolumeKind = Literal["pvc", "configmap", "secret"]
#: The flag of each volume kind (messages name it).
VOLUME_FLAGS: Final = {
    "pvc": "--mount-pvc",
    "configmap": "--mount-configmap",
    "secret": "--mount-secret",
}
_SYNTAX = {
    "pvc": "[NODE=]CLAIM:PATH[:ro]",
    "configmap": "[NODE=]NAME:PATH",
    "secret": "[NODE=]NAME:PATH",
}
#: Paths vf mounts itself (the run's credentials and the setup role's key).
_RESERVED_PATHS = ("/etc/vf",)
_DNS_SUBDOMAIN = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
#: A path a container may be given: absolute, printable, no ``:`` (the ``:ro`` separator),
#: no ``..`` component, at most 1,024 characters.
_PATH = re.compile(r"/[^\x00-\x1f:]{0,1023}")


def _error(rule: str, message: str, hint: str) -> InvalidInputError:
    return InvalidInputError(rule, message, hint)


@dataclass(frozen=True, slots=True)
class WorkerVolume:
    """A volume in the worker container: a claim, a ConfigMap or a Secret (``source``),
    at ``path``; ``node=None`` mounts it in every node's pods."""

    kind: VolumeKind
    source: str
    path: str
    read_only: bool = False
    node: str | None = None

    @property
    def volume_name(self) -> str:
        """The pod's volume name: ``vf-<kind>-<10 hex digits of kind, source and path>``
        (a DNS label; the same mount has the same name in every render)."""
        digest = hashlib.sha256(f"{self.kind}\0{self.source}\0{self.path}".encode()).hexdigest()
        return f"vf-{self.kind}-{digest[:10]}"

    def flag(self) -> str:
        """The flag that asks for it: ``--mount-pvc detector=videos:/data:ro``."""
        where = f"{self.node}=" if self.node is not None else ""
        ro = ":ro" if self.read_only and self.kind == "pvc" else ""
        return f"{VOLUME_FLAGS[self.kind]} {where}{self.source}:{self.path}{ro}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.source,
            "path": self.path,
            "read_only": self.read_only,
            "node": self.node,
        }


def parse_volume(kind: str, text: str) -> WorkerVolume:
    """``[NODE=]SOURCE:PATH[:ro]`` as a :class:`WorkerVolume` (see the module docstring);
    ``invalid-mount`` when it is not that."""
    if kind not in VOLUME_FLAGS:
        raise _error(
            "invalid-mount", f"volume kind {brief(kind)} is not pvc, configmap or secret", ""
        )
    flag, syntax = VOLUME_FLAGS[kind], _SYNTAX[kind]
    node: str | None = None
    rest = text if isinstance(text, str) else ""
    if "=" in rest:
        node, _, rest = rest.partition("=")
    source, sep, path = rest.partition(":")
    read_only = kind != "pvc"
    if path.endswith(":ro"):
        path, read_only = path[: -len(":ro")], True
    if not sep or not source or not path or (node is not None and not node):
        raise _error(
            "invalid-mount",
            f"{flag} {brief(text)} is not {syntax}",
            f"e.g. {flag} {'videos:/data:ro' if kind == 'pvc' else 'models:/etc/models'} "
            "(every node's workers), or NODE=… for one node's",
        )
    return check_volume(WorkerVolume(kind, source, path, read_only, node))  # type: ignore[arg-type]


def check_volume(volume: object) -> WorkerVolume:
    """``volume`` if it is a :class:`WorkerVolume` with a DNS-subdomain source and an
    absolute path off vf's own; ``invalid-mount`` otherwise."""
    if not isinstance(volume, WorkerVolume) or volume.kind not in VOLUME_FLAGS:
        raise _error(
            "invalid-mount",
            f"volume {brief(volume)} is not a WorkerVolume",
            "pass vfcore.runtime.pod_options.parse_volume('pvc', 'CLAIM:PATH')",
        )
    flag = VOLUME_FLAGS[volume.kind]
    what = {"pvc": "claim", "configmap": "ConfigMap", "secret": "Secret"}[volume.kind]
    if not isinstance(volume.source, str) or _DNS_SUBDOMAIN.fullmatch(volume.source) is None:
        raise _error(
            "invalid-mount",
            f"{flag}: {what} name {brief(volume.source)} is not a Kubernetes object name "
            "(lowercase letters, digits, '-' and '.', at most 253)",
            f"name the {what} as `kubectl get {volume.kind} -n NS` lists it",
        )
    path = volume.path
    if (
        not isinstance(path, str)
        or _PATH.fullmatch(path) is None
        or ".." in path.split("/")
        or not path.isprintable()
    ):
        raise _error(
            "invalid-mount",
            f"{flag}: mount path {brief(path)} is not an absolute path (printable, no ':' "
            "or '..', at most 1,024 characters)",
            f"e.g. {flag} {volume.source}:/data",
        )
    for reserved in _RESERVED_PATHS:
        if _overlaps(path, reserved):
            raise _error(
                "invalid-mount",
                f"{flag}: {path} is on or around {reserved}, where vf mounts the run's credentials",
                "mount it elsewhere, e.g. /data",
            )
    if not isinstance(volume.read_only, bool) or (volume.kind != "pvc" and not volume.read_only):
        raise _error(
            "invalid-mount",
            f"{flag}: read_only={brief(volume.read_only)}: a ConfigMap or Secret is mounted "
            "read-only",
            "pass read_only=True",
        )
    if volume.node is not None and (not isinstance(volume.node, str) or not volume.node):
        raise _error("invalid-mount", f"{flag}: node {brief(volume.node)} is not a node name", "")
    return volume


def _overlaps(a: str, b: str) -> bool:
    """Whether one of two absolute paths is the other or lies under it."""
    a, b = a.rstrip("/") or "/", b.rstrip("/") or "/"
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _node_items(value: object, what: str, example: str) -> tuple[tuple[str, Any], ...]:
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, tuple | list) and all(
        isinstance(i, tuple | list) and len(i) == 2 for i in value
    ):
        items = [tuple(i) for i in value]
    else:
        raise _error("invalid-render-option", f"{what}={brief(value)} is not a mapping", example)
    return tuple(sorted(((str(k), v) for k, v in items), key=lambda kv: kv[0]))


def check_pod_options(
    *,
    volumes: object,
    scratch: object,
    image_pull_policy: object,
    image_pull_secrets: object,
    image_overrides: object,
    priority_class: object,
) -> dict[str, Any]:
    """The six options checked and normalised (tuples, sorted where order means nothing):
    the values ``RenderOptions`` stores. Raises the first problem's error. (The override
    images are checked by ``RenderOptions`` with ``check_image_reference``.)"""
    listed = volumes if isinstance(volumes, tuple | list) else None
    if listed is None:
        raise _error(
            "invalid-render-option",
            f"volumes={brief(volumes)} is not a tuple of WorkerVolume",
            "pass (parse_volume('pvc', 'videos:/data'),)",
        )
    checked = tuple(check_volume(v) for v in listed)
    for i, v in enumerate(checked):
        for other in checked[:i]:
            same_pod = v.node is None or other.node is None or v.node == other.node
            if same_pod and _overlaps(v.path, other.path):
                raise _error(
                    "invalid-mount",
                    f"{v.flag()} and {other.flag()} mount on the same path (or one inside "
                    "the other) in the same pods",
                    "give each volume its own path",
                )
        if scratch is not None and _overlaps(v.path, SCRATCH_PATH):
            raise _error(
                "invalid-mount",
                f"{v.flag()}: {v.path} is where --scratch mounts its emptyDir ({SCRATCH_PATH})",
                "mount it elsewhere, or drop --scratch",
            )
    if scratch is not None:
        try:
            ok = isinstance(scratch, str) and canonical_units("ephemeral-storage", scratch) > 0
        except InvalidInputError:
            ok = False
        if not ok:
            raise _error(
                "invalid-scratch",
                f"--scratch {brief(scratch)} is not a positive quantity",
                "e.g. --scratch 20Gi",
            )
    if image_pull_policy is not None and image_pull_policy not in PULL_POLICIES:
        raise _error(
            "invalid-image-pull-policy",
            f"--image-pull-policy {brief(image_pull_policy)} is not one of "
            f"{', '.join(PULL_POLICIES)}",
            "e.g. --image-pull-policy IfNotPresent (Always for a moving tag like :latest)",
        )
    secrets = image_pull_secrets if isinstance(image_pull_secrets, tuple | list) else None
    if secrets is None or any(
        not isinstance(s, str) or _DNS_SUBDOMAIN.fullmatch(s) is None for s in secrets
    ):
        raise _error(
            "invalid-image-pull-secret",
            f"--image-pull-secret {brief(image_pull_secrets)}: every name must be a Secret "
            "name (lowercase letters, digits, '-' and '.', at most 253)",
            "name a docker-registry Secret of the namespace, e.g. --image-pull-secret regcred",
        )
    # each image is checked by RenderOptions (check_image_reference, the one grammar)
    overrides = _node_items(image_overrides, "image_overrides", "{'detector': 'reg/gpu:1'}")
    if priority_class is not None and (
        not isinstance(priority_class, str) or _DNS_SUBDOMAIN.fullmatch(priority_class) is None
    ):
        raise _error(
            "invalid-priority-class",
            f"--priority-class {brief(priority_class)} is not a PriorityClass name "
            "(lowercase letters, digits, '-' and '.', at most 253)",
            "name one `kubectl get priorityclasses` lists",
        )
    return {
        "volumes": checked,
        "scratch": scratch,
        "image_pull_policy": image_pull_policy,
        "image_pull_secrets": tuple(dict.fromkeys(secrets)),
        "image_overrides": overrides,
        "priority_class": priority_class,
    }


def volumes_of(volumes: Iterable[WorkerVolume], node: str) -> tuple[WorkerVolume, ...]:
    """The volumes mounted in ``node``'s workers, by path."""
    return tuple(sorted((v for v in volumes if v.node in (None, node)), key=lambda v: v.path))
