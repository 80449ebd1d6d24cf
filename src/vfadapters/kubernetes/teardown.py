"""Deleting exactly what one run created: by the run's label selector, then waiting until gone.

:func:`teardown` lists every kind a run may hold in its namespace with the
run's selector (``app.kubernetes.io/managed-by=vf,vfcore.io/flow=<flow
label>,vfcore.io/run=<run id>``), deletes each object found with
``propagationPolicy=Background`` (the garbage collector removes a Job's or a
Deployment's pods; pods a controller owns are not deleted one by one, so a
ReplicaSet does not replace them), scalers and PDBs first, the broker last, and
polls until none is left — pods included, since they carry the run's labels —
or ``timeout_s`` passes. A ResourceClaim made from a run's template (``--gpu-mode dra``)
carries the run's labels too; its pod owns it, so the garbage collector deletes it with
the pod. (Background rather than Foreground: a Foreground
deletion waits on the garbage collector's finalizer, which a control plane
without kube-controller-manager never removes.) The broker's PersistentVolumeClaims carry the run's
labels (the StatefulSet's claim template sets them), so they go too.

Nothing else is touched: an object without every label of the selector is
never listed, so never deleted. A listing that fails, or returns an item
without a readable name, is an error (the run's state is unknown), never
"nothing to delete" or "all gone".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vfadapters.kubernetes.client import KubeApiError, KubeClient, object_path
from vfadapters.kubernetes.snapshot import list_all

__all__ = ["TEARDOWN_KINDS", "TeardownReport", "find_run_objects", "teardown"]

#: (kind, apiVersion, plural) in deletion order: scalers first, broker storage last.
TEARDOWN_KINDS: tuple[tuple[str, str, str], ...] = (
    ("ScaledObject", "keda.sh/v1alpha1", "scaledobjects"),
    ("HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscalers"),
    ("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets"),
    ("Deployment", "apps/v1", "deployments"),
    ("Job", "batch/v1", "jobs"),
    ("StatefulSet", "apps/v1", "statefulsets"),
    ("Service", "v1", "services"),
    ("ConfigMap", "v1", "configmaps"),
    ("Secret", "v1", "secrets"),
    # after the broker and the workers: the run's pods are never reachable without it
    ("NetworkPolicy", "networking.k8s.io/v1", "networkpolicies"),
    ("ResourceClaimTemplate", "resource.k8s.io/v1", "resourceclaimtemplates"),
    ("Pod", "v1", "pods"),
    # claims made from a run's templates carry its labels (the template's spec.metadata);
    # their pods own them, and any left once the pods are gone go here
    ("ResourceClaim", "resource.k8s.io/v1", "resourceclaims"),
    ("PersistentVolumeClaim", "v1", "persistentvolumeclaims"),
)

#: Kinds whose endpoint may be absent (a CRD not installed, or resource.k8s.io/v1 before
#: Kubernetes 1.34): not served means none to delete.
OPTIONAL_KINDS = frozenset({"ScaledObject", "ResourceClaimTemplate", "ResourceClaim"})


@dataclass(frozen=True)
class TeardownReport:
    """What was deleted, and whether everything was gone before the deadline; for what
    remains, why (:class:`vfcore.runtime.lingering.Lingering`)."""

    deleted: tuple[tuple[str, str], ...]
    remaining: tuple[tuple[str, str], ...]
    waited_s: float
    lingering: tuple[Any, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.remaining

    def to_dict(self) -> dict[str, Any]:
        return {
            "deleted": [{"kind": k, "name": n} for k, n in self.deleted],
            "remaining": [{"kind": k, "name": n} for k, n in self.remaining],
            "complete": self.complete,
            "waited_s": round(self.waited_s, 3),
            "lingering": [item.to_dict() for item in self.lingering],
        }


def _ns_list_path(api_version: str, namespace: str, plural: str) -> str:
    return object_path(api_version, plural, namespace, None)


def find_run_objects(
    client: KubeClient, namespace: str, selector: str, *, skip_pods_of_controllers: bool = False
) -> list[tuple[str, str, str, dict[str, Any]]]:
    """Every object of the run: ``(kind, apiVersion, plural, object)`` in deletion order.

    Raises :class:`KubeApiError` (``kube-list-failed``) when a listing fails.
    """
    found: list[tuple[str, str, str, dict[str, Any]]] = []
    for kind, api_version, plural in TEARDOWN_KINDS:
        doc, failed = list_all(
            client,
            _ns_list_path(api_version, namespace, plural),
            f"{kind}List",
            label_selector=selector,
        )
        if doc is None:
            assert failed is not None
            if kind in OPTIONAL_KINDS and failed.status == 404:
                continue
            raise KubeApiError(
                "kube-list-failed",
                f"listing {plural} in {namespace} ({selector}) failed: {failed.status_line()}",
                "the run's state is unknown; check `list` on that resource (docs/kubernetes.md, "
                "RBAC) and retry",
            )
        for item in doc["items"]:
            meta = item.get("metadata") if isinstance(item, dict) else None
            if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
                raise KubeApiError(
                    "kube-list-unreadable",
                    f"listing {plural} in {namespace} ({selector}) returned an item without a "
                    f"readable metadata.name ({str(item)[:120]}): vf cannot delete it, or tell "
                    "whether it is gone",
                    "the run's state is unknown; check the API server (kubectl get "
                    f"{plural} -n {namespace} -l {selector}) and retry",
                )
            owned = kind in ("Pod", "ResourceClaim") and meta.get("ownerReferences")
            if skip_pods_of_controllers and owned:
                continue
            found.append((kind, api_version, plural, item))
    return found


def teardown(
    client: KubeClient,
    namespace: str,
    selector: str,
    *,
    timeout_s: float = 300.0,
    poll_s: float = 2.0,
    progress: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> TeardownReport:
    """Delete every object of the run and wait until none is left; see the module docstring."""
    started = clock()
    objects = find_run_objects(client, namespace, selector, skip_pods_of_controllers=True)
    deleted: list[tuple[str, str]] = []
    for kind, api_version, plural, item in objects:
        name = str((item.get("metadata") or {}).get("name"))
        path = object_path(api_version, plural, namespace, name)
        answer = client.request(
            "DELETE",
            path,
            body={"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"},
        )
        if answer.status == 404:  # already gone (a controller's pod, a second teardown)
            continue
        if not answer.ok:
            raise KubeApiError(
                "kube-delete-failed",
                f"deleting {kind}/{name} in {namespace} failed: {answer.status_line()} "
                f"({len(deleted)} object(s) deleted before it)",
                "check `delete` on that resource (docs/kubernetes.md, RBAC), then run the "
                "teardown again: it deletes only what is left",
            )
        deleted.append((kind, name))
        if progress is not None:
            progress(f"deleted {kind.lower()}/{name}")
    remaining: list[tuple[str, str]] = []
    said: tuple[int, float] | None = None  # (count, when) of the last progress line
    while True:
        left = find_run_objects(client, namespace, selector)
        remaining = [(k, str((o.get("metadata") or {}).get("name"))) for k, _, _, o in left]
        now = clock()
        if not remaining or now - started >= timeout_s:
            break
        # a line when the count changes, else every PROGRESS_EVERY_S (not one per poll)
        if progress is not None and (
            said is None or said[0] != len(remaining) or now - said[1] >= PROGRESS_EVERY_S
        ):
            progress(f"waiting for {len(remaining)} object(s) to go ({now - started:.0f} s)")
            said = (len(remaining), now)
        sleep(poll_s)
    why: tuple[Any, ...] = ()
    if remaining:
        why = _why_left(client, [{**o, "kind": k} for k, _, _, o in left])
    return TeardownReport(tuple(deleted), tuple(remaining), clock() - started, why)


#: Seconds between two teardown progress lines that say the same count.
PROGRESS_EVERY_S = 30.0


def _why_left(client: KubeClient, objects: list[dict[str, Any]]) -> tuple[Any, ...]:
    """Why each object is still there (:func:`vfcore.runtime.lingering.lingering`), reading
    the Nodes its pods are bound to (one that cannot be read is left unknown)."""
    from vfcore.runtime import NODE_GONE, lingering

    nodes: dict[str, Any] = {}
    for obj in objects:
        host = (obj.get("spec") or {}).get("nodeName") if obj.get("kind") == "Pod" else None
        if not isinstance(host, str) or not host or host in nodes:
            continue
        try:
            answer = client.get_json(object_path("v1", "nodes", None, host))
        except KubeApiError:
            nodes[host] = None
            continue
        if answer.status == 404:
            nodes[host] = NODE_GONE
        elif answer.ok and isinstance(answer.body, dict):
            nodes[host] = answer.body
        else:
            nodes[host] = None
    return lingering(objects, nodes)
