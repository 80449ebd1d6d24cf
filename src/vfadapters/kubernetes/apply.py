"""Server-side apply of a run's objects, in dependency order, idempotently.

:func:`apply_objects` sends each object as a ``PATCH`` with content type
``application/apply-patch+yaml`` (the JSON body is valid YAML), query
``fieldManager=vf``, ``force=false`` unless ``force_conflicts`` (a field another
manager owns is then a 409 the user sees, never silently taken), and
``dryRun=All`` for ``--dry-run=server`` (the API server validates and admits
the objects, stores nothing).

**Order** (:func:`apply_order`): Namespaces; configuration (ServiceAccounts,
ConfigMaps, Secrets, PersistentVolumeClaims, ResourceClaimTemplates); Services; the broker's workloads
(``app.kubernetes.io/component: broker``); the broker setup Job (a Job of the
broker component, or one labelled ``vfcore.io/role: setup``); the flow's
workloads (Jobs, Deployments, StatefulSets); PodDisruptionBudgets; scalers
(KEDA ScaledObjects, HorizontalPodAutoscalers). Objects of the same rank keep
the order they were given in (render order is deterministic).

**Idempotent**: every object is read first; the outcome is ``created`` (it did
not exist), ``configured`` (its ``resourceVersion`` changed) or ``unchanged``
(same ``resourceVersion``: the apply changed nothing). In a dry run, where
nothing is stored, the outcome compares the object the server would store with
the current one (labels, annotations, spec and top-level data; server-managed
metadata and status ignored).

Errors stop the apply at the failing object (objects before it stay applied)
and raise :class:`~vfadapters.kubernetes.client.KubeApiError`:
``kube-apply-conflict`` (409), ``kube-apply-forbidden`` (401/403),
``kube-apply-invalid`` (400/422), ``kube-kind-not-served`` (404 on the kind's
endpoint: a CRD such as KEDA's ScaledObject not installed),
``kube-apply-failed`` (anything else) and ``kube-unknown-kind`` (an object of a
kind this module has no endpoint for).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vfadapters.kubernetes.client import KubeApiError, KubeClient, Response, object_path

__all__ = [
    "FIELD_MANAGER",
    "KINDS",
    "Applied",
    "ApplyReport",
    "KindInfo",
    "apply_objects",
    "apply_order",
    "kind_info",
]

#: The field manager every vf apply uses.
FIELD_MANAGER = "vf"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"


@dataclass(frozen=True, slots=True)
class KindInfo:
    """Where a kind lives in the API: ``apps/v1`` ``deployments``, namespaced or not."""

    api_version: str
    plural: str
    namespaced: bool


#: The kinds a rendered run may hold (kind → endpoint). Others raise ``kube-unknown-kind``.
KINDS: Mapping[str, KindInfo] = {
    "Namespace": KindInfo("v1", "namespaces", False),
    "ServiceAccount": KindInfo("v1", "serviceaccounts", True),
    "ConfigMap": KindInfo("v1", "configmaps", True),
    "Secret": KindInfo("v1", "secrets", True),
    "PersistentVolumeClaim": KindInfo("v1", "persistentvolumeclaims", True),
    "Service": KindInfo("v1", "services", True),
    "Pod": KindInfo("v1", "pods", True),
    "Deployment": KindInfo("apps/v1", "deployments", True),
    "StatefulSet": KindInfo("apps/v1", "statefulsets", True),
    "Job": KindInfo("batch/v1", "jobs", True),
    "PodDisruptionBudget": KindInfo("policy/v1", "poddisruptionbudgets", True),
    "HorizontalPodAutoscaler": KindInfo("autoscaling/v2", "horizontalpodautoscalers", True),
    "ScaledObject": KindInfo("keda.sh/v1alpha1", "scaledobjects", True),
    "TriggerAuthentication": KindInfo("keda.sh/v1alpha1", "triggerauthentications", True),
    "NetworkPolicy": KindInfo("networking.k8s.io/v1", "networkpolicies", True),
    "RuntimeClass": KindInfo("node.k8s.io/v1", "runtimeclasses", False),
    "ResourceClaimTemplate": KindInfo("resource.k8s.io/v1", "resourceclaimtemplates", True),
}

_CONFIG = {
    "ServiceAccount",
    "ConfigMap",
    "Secret",
    "PersistentVolumeClaim",
    "NetworkPolicy",
    "ResourceClaimTemplate",  # --gpu-mode dra: the pods' claims are made from it
}
_WORKLOADS = {"Deployment", "StatefulSet", "Job", "Pod"}
_SCALERS = {"ScaledObject", "TriggerAuthentication", "HorizontalPodAutoscaler"}

Outcome = Literal["created", "configured", "unchanged"]


def kind_info(obj: Mapping[str, Any]) -> KindInfo:
    """The endpoint of ``obj``'s kind (its ``apiVersion`` wins over the table's)."""
    kind = obj.get("kind")
    info = KINDS.get(str(kind))
    if info is None:
        raise KubeApiError(
            "kube-unknown-kind",
            f"{kind!r} ({_name(obj)}) is not a kind vf applies ({', '.join(sorted(KINDS))})",
            "this is a bug in the renderer; report it",
        )
    api_version = obj.get("apiVersion") or info.api_version
    return KindInfo(str(api_version), info.plural, info.namespaced)


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return labels if isinstance(labels, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')}/{meta.get('name')}" + (f" in {ns}" if ns else "")


def _rank(obj: Mapping[str, Any]) -> int:
    kind = obj.get("kind")
    labels = _labels(obj)
    broker = labels.get("app.kubernetes.io/component") == "broker"
    if kind == "Namespace":
        return 0
    if kind in _CONFIG:
        return 1
    if kind == "Service":
        return 2
    if kind == "Job" and (broker or labels.get("vfcore.io/role") == "setup"):
        return 4
    if kind in _WORKLOADS:
        return 3 if broker else 5
    if kind == "PodDisruptionBudget":
        return 6
    if kind in _SCALERS:
        return 7
    return 5


def apply_order(objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``objects`` in dependency order (see the module docstring); stable within a rank."""
    return sorted(objects, key=_rank)


@dataclass(frozen=True, slots=True)
class Applied:
    """One object's outcome."""

    kind: str
    namespace: str | None
    name: str
    outcome: Outcome
    resource_version: str | None

    def line(self, dry_run: bool) -> str:
        where = f" -n {self.namespace}" if self.namespace else ""
        suffix = " (server dry run)" if dry_run else ""
        return f"{self.kind.lower()}/{self.name}{where} {self.outcome}{suffix}"


@dataclass(frozen=True, slots=True)
class ApplyReport:
    """Every object's outcome, in the order applied."""

    applied: tuple[Applied, ...]
    dry_run: bool

    @property
    def changed(self) -> bool:
        return any(a.outcome != "unchanged" for a in self.applied)

    def counts(self) -> dict[str, int]:
        out = {"created": 0, "configured": 0, "unchanged": 0}
        for a in self.applied:
            out[a.outcome] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "counts": self.counts(),
            "objects": [
                {
                    "kind": a.kind,
                    "namespace": a.namespace,
                    "name": a.name,
                    "outcome": a.outcome,
                    "resource_version": a.resource_version,
                }
                for a in self.applied
            ],
        }


_SERVER_META = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp")


def _comparable(obj: Any) -> Any:
    if not isinstance(obj, Mapping):
        return obj
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = dict(out.get("metadata") or {})
    for key in _SERVER_META:
        meta.pop(key, None)
    out["metadata"] = meta
    return out


def _error(what: str, answer: Response, done: int, total: int, client: KubeClient) -> KubeApiError:
    said = answer.status_line()
    progress = f"({done} of {total} object(s) applied before it)"
    if answer.status == 409:
        return KubeApiError(
            "kube-apply-conflict",
            f"applying {what} conflicts with another field manager: {said} {progress}",
            "another tool owns those fields; change them there, or re-run with "
            "--force-conflicts to take them over",
        )
    if answer.status in (401, 403):
        return KubeApiError(
            "kube-apply-forbidden",
            f"applying {what} on {client.where} was refused: {said} {progress}",
            "the deploying user needs `patch` (and `get`) on that resource; "
            "see docs/kubernetes.md, RBAC",
        )
    if answer.status in (400, 422):
        return KubeApiError(
            "kube-apply-invalid",
            f"the API server rejected {what}: {said} {progress}",
            "check the flags that shaped this object (--image, --resources, GPU options); "
            "`vf deploy --render-only -o DIR` writes what was sent",
        )
    if answer.status == 404:
        return KubeApiError(
            "kube-kind-not-served",
            f"{what}: the cluster does not serve this kind: {said} {progress}",
            "install the CRD it needs (KEDA for ScaledObjects), or deploy without autoscaling",
        )
    return KubeApiError(
        "kube-apply-failed",
        f"applying {what} failed: {said} {progress}",
        "retry; if it persists, check the API server's health",
    )


def apply_objects(
    client: KubeClient,
    objects: Sequence[Mapping[str, Any]],
    *,
    dry_run: bool = False,
    force_conflicts: bool = False,
    field_manager: str = FIELD_MANAGER,
) -> ApplyReport:
    """Server-side apply ``objects`` in :func:`apply_order`; see the module docstring."""
    ordered = apply_order(objects)
    done: list[Applied] = []
    for obj in ordered:
        info = kind_info(obj)
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        namespace = meta.get("namespace") if info.namespaced else None
        if not name or (info.namespaced and not namespace):
            raise KubeApiError(
                "kube-object-incomplete",
                f"{_name(obj)} has no " + ("metadata.name" if not name else "metadata.namespace"),
                "this is a bug in the renderer; report it",
            )
        path = object_path(info.api_version, info.plural, namespace, name)
        what = _name(obj)
        before = client.get_json(path)
        if before.status not in (200, 404):
            raise _error(what, before, len(done), len(ordered), client)
        exists = before.status == 200
        query: dict[str, str | int | bool] = {
            "fieldManager": field_manager,
            "force": force_conflicts,
        }
        if dry_run:
            query["dryRun"] = "All"
        answer = client.request(
            "PATCH", path, query=query, body=dict(obj), content_type=APPLY_CONTENT_TYPE
        )
        if not answer.ok or not isinstance(answer.body, Mapping):
            raise _error(what, answer, len(done), len(ordered), client)
        after_meta = answer.body.get("metadata") or {}
        version = after_meta.get("resourceVersion")
        outcome: Outcome
        if not exists:
            outcome = "created"
        elif dry_run:
            same = _comparable(before.body) == _comparable(answer.body)
            outcome = "unchanged" if same else "configured"
        else:
            old_version = (before.body.get("metadata") or {}).get("resourceVersion")
            outcome = (
                "unchanged" if version is not None and version == old_version else "configured"
            )
        done.append(
            Applied(
                str(obj.get("kind")),
                namespace,
                name,
                outcome,
                None if version is None else str(version),
            )
        )
    return ApplyReport(tuple(done), dry_run)
