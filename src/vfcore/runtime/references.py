"""Objects the run's pods name and vf does not make: do they exist? (``vf deploy``'s preflight).

:func:`pod_references` reads the rendered objects for what their pod templates
name: a ConfigMap or Secret mounted as a volume (``--mount-configmap``,
``--mount-secret``), a Secret in ``imagePullSecrets`` (``--image-pull-secret``),
a ``priorityClassName`` (``--priority-class``). Objects the render holds itself
(the run's credentials Secret when it is rendered) are not references; nor is
that Secret when it is not rendered (``own_secrets``): the deploy makes or reuses
it (``docs/security.md``).

:func:`check_references` answers each with what the adapter found (``True``
there, ``False`` not there, a string: why it could not tell):

| reference | not there | why |
|---|---|---|
| a mounted ConfigMap or Secret | ``configmap-not-found`` / ``secret-not-found`` (error) | the kubelet cannot mount it: the pods stay ``ContainerCreating`` (``FailedMount``) until it is made, and the deploy would wait out its ``--timeout`` |
| a PriorityClass | ``priority-class-not-found`` (error) | the API server's ``Priority`` admission refuses every pod naming it: the workloads would be applied and never get a pod |
| an image pull Secret | ``image-pull-secret-not-found`` (warning) | the kubelet pulls without it: a public image (or one the nodes can pull anyway) still runs; a private one ends in ``ImagePullBackOff``, which the wait reports |

A reference that could not be read is ``reference-unknown`` (warning): unknown,
never "exists".

>>> pod = {"kind": "Job", "metadata": {"name": "w"}, "spec": {"template": {"spec": {
...     "priorityClassName": "video-high",
...     "volumes": [{"name": "m", "configMap": {"name": "models"}}]}}}}
>>> refs = pod_references([pod], own_secrets=["cams-r1-credentials-x"])
>>> [(r.kind, r.name) for r in refs]
[('ConfigMap', 'models'), ('PriorityClass', 'video-high')]
>>> [p.id for p in check_references(refs, {("ConfigMap", "models"): False,
...                                        ("PriorityClass", "video-high"): True}, "video")]
['configmap-not-found']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.errors import Problem

__all__ = ["Reference", "check_references", "pod_references"]

Kind = Literal["ConfigMap", "Secret", "PriorityClass"]
_WORKLOADS = ("Job", "Deployment", "StatefulSet")


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class Reference:
    """An object of ``kind`` named ``name`` that pods of the run need; ``how``: as what
    (``mounted``, ``image-pull-secret``, ``priority-class``); ``users``: by which
    workloads (``job/NAME``), sorted."""

    kind: Kind
    name: str
    how: str
    users: tuple[str, ...]

    @property
    def namespaced(self) -> bool:
        return self.kind != "PriorityClass"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "how": self.how, "users": list(self.users)}


def pod_references(
    objects: Iterable[Mapping[str, Any]], *, own_secrets: Iterable[str] = ()
) -> tuple[Reference, ...]:
    """Every ConfigMap, Secret and PriorityClass the pod templates of ``objects`` name and
    ``objects`` do not hold, sorted by kind and name; ``own_secrets`` are Secrets vf makes
    apart (the run's credentials: :func:`vfcore.runtime.manifests.credentials_secret_name`)."""
    objects = tuple(objects)
    rendered = {
        (str(o.get("kind")), str(_mapping(o.get("metadata")).get("name"))) for o in objects
    } | {("Secret", name) for name in own_secrets}
    found: dict[tuple[str, str, str], set[str]] = {}

    def add(kind: str, name: object, how: str, user: str) -> None:
        if isinstance(name, str) and name and (kind, name) not in rendered:
            found.setdefault((kind, name, how), set()).add(user)

    for obj in objects:
        if obj.get("kind") not in _WORKLOADS:
            continue
        user = f"{str(obj.get('kind')).lower()}/{_mapping(obj.get('metadata')).get('name')}"
        pod = _mapping(_mapping(_mapping(obj.get("spec")).get("template")).get("spec"))
        for volume in _list(pod.get("volumes")):
            volume = _mapping(volume)
            config_map = _mapping(volume.get("configMap"))
            if config_map and not config_map.get("optional"):
                add("ConfigMap", config_map.get("name"), "mounted", user)
            secret = _mapping(volume.get("secret"))
            if secret and not secret.get("optional"):
                add("Secret", secret.get("secretName"), "mounted", user)
        for pull in _list(pod.get("imagePullSecrets")):
            add("Secret", _mapping(pull).get("name"), "image-pull-secret", user)
        add("PriorityClass", pod.get("priorityClassName"), "priority-class", user)
    return tuple(
        Reference(kind, name, how, tuple(sorted(users)))  # type: ignore[arg-type]
        for (kind, name, how), users in sorted(found.items())
    )


def _users(ref: Reference) -> str:
    shown = ", ".join(ref.users[:3])
    return shown + (f" and {len(ref.users) - 3} more" if len(ref.users) > 3 else "")


def check_references(
    references: Iterable[Reference],
    found: Mapping[tuple[str, str], bool | str],
    namespace: str,
) -> tuple[Problem, ...]:
    """The problems of ``references`` given what was ``found`` (``(kind, name)`` → ``True``,
    ``False``, or why it is unknown; a reference missing from ``found`` is unknown too).
    See the module docstring for each finding."""
    out: list[Problem] = []
    for ref in references:
        state = found.get((ref.kind, ref.name), "it was not looked up")
        where = f" in namespace {namespace}" if ref.namespaced else ""
        if isinstance(state, str):
            out.append(
                Problem(
                    "reference-unknown",
                    "warning",
                    ref.name,
                    f"whether {ref.kind} {ref.name}{where} (needed by {_users(ref)}) exists is "
                    f"unknown: {state}",
                    f"grant `get {ref.kind.lower()}s` (docs/kubernetes.md, RBAC) so the "
                    "preflight can tell",
                )
            )
            continue
        if state:
            continue
        if ref.kind == "PriorityClass":
            out.append(
                Problem(
                    "priority-class-not-found",
                    "error",
                    ref.name,
                    f"PriorityClass {ref.name} (--priority-class) does not exist: the API "
                    f"server would refuse every pod of {_users(ref)} (Priority admission), and "
                    "the run would never start",
                    "create it first (kubectl create priorityclass "
                    f"{ref.name} --value=N), or pass one `kubectl get priorityclasses` lists",
                )
            )
        elif ref.how == "image-pull-secret":
            out.append(
                Problem(
                    "image-pull-secret-not-found",
                    "warning",
                    ref.name,
                    f"image pull Secret {ref.name}{where} (--image-pull-secret) does not exist: "
                    "the kubelet pulls without it (a private image then fails to pull: "
                    "ImagePullBackOff, which the wait reports)",
                    f"create it: kubectl create secret docker-registry {ref.name} -n "
                    f"{namespace} --docker-server=… --docker-username=… --docker-password=…",
                )
            )
        else:
            flag = "--mount-configmap" if ref.kind == "ConfigMap" else "--mount-secret"
            make = "configmap" if ref.kind == "ConfigMap" else "secret generic"
            out.append(
                Problem(
                    f"{ref.kind.lower()}-not-found",
                    "error",
                    ref.name,
                    f"{ref.kind} {ref.name}{where} ({flag}) does not exist: the pods of "
                    f"{_users(ref)} could not mount it and would stay ContainerCreating",
                    f"create it first (kubectl create {make} {ref.name} -n {namespace} "
                    f"--from-file=…), or fix {flag}",
                )
            )
    return tuple(out)
