"""The live cluster as a :class:`~vfcore.ClusterSnapshot`: ``vf plan FLOW --kube``.

Three listings through the API — every page of them (``limit`` + ``continue``)
— become the very documents ``kubectl get nodes -o json``, ``kubectl get pods
-A -o json`` and ``kubectl get runtimeclasses -o json`` print, and
:func:`vfcore.cluster.snapshot_from_kubernetes` reads them with the same rules
as the dumps (:mod:`vfcore.cluster.kubeparse`):

- **nodes** must be read: a refused, failed or unreachable node listing raises
  :class:`~vfadapters.kubernetes.client.KubeApiError` (``kube-nodes-forbidden``,
  ``kube-unauthorized``, ``kube-nodes-unreadable``, ``kube-unreachable``,
  ``kube-timeout``) — there is nothing to plan on;
- **pods**: a refused (401/403), failed (5xx) or timed-out listing is passed on as
  the ``Status`` it is, so every node's occupancy is *unknown* with the server's
  reason — never idle;
- **RuntimeClasses**: optional; a 404 (``node.k8s.io/v1`` not served) leaves them
  unknown, a refusal lists ``Unknown("runtimeclasses", reason)``;
- **ResourceSlices, DeviceClasses, ResourceClaims** (``resource.k8s.io/v1``, for
  ``--gpu-mode dra``): a refused, failed or unserved listing (404 before 1.34)
  is passed on as its ``Status``, so those DRA facts are *unknown* — never "no
  devices" or "nothing allocated".

Pages are merged before parsing; a listing whose pages cannot all be read is
the failed listing, never a partial one. A listing is read in at most
:data:`MAX_PAGES` pages, and a server whose ``metadata.continue`` repeats an
earlier page's token or never ends is a failed listing that says so (reason
``EndlessList``), never paged for ever.
"""

from __future__ import annotations

from typing import Any

from vfadapters.kubernetes.client import KubeApiError, KubeClient, Response
from vfcore.cluster import ClusterSnapshot, snapshot_from_kubernetes

__all__ = [
    "MAX_PAGES",
    "PAGE_SIZE",
    "list_all",
    "read_documents",
    "read_dra_documents",
    "read_snapshot",
    "snapshot_of",
]

#: Items per page of a listing.
PAGE_SIZE = 500

NODES_PATH = "/api/v1/nodes"
PODS_PATH = "/api/v1/pods"
RUNTIME_CLASSES_PATH = "/apis/node.k8s.io/v1/runtimeclasses"
RESOURCE_SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"
DEVICE_CLASSES_PATH = "/apis/resource.k8s.io/v1/deviceclasses"
RESOURCE_CLAIMS_PATH = "/apis/resource.k8s.io/v1/resourceclaims"

#: The most pages one listing may take: 400 x 500 = 200,000 items, above the 150,000
#: pods and 5,000 nodes Kubernetes is tested to. A server that keeps sending
#: ``metadata.continue`` past it is answered as a failed listing, never paged for ever.
MAX_PAGES = 400


def _endless(path: str, why: str) -> Response:
    """A failed listing that says why the pages were not all read (a ``Status`` body)."""
    message = f"listing {path}: {why}; vf stopped reading it (docs/cli.md, Limits)"
    body = {"kind": "Status", "status": "Failure", "code": 502, "reason": "EndlessList"}
    return Response(502, {**body, "message": message}, message)


def list_all(
    client: KubeClient,
    path: str,
    list_kind: str,
    *,
    label_selector: str | None = None,
    max_pages: int = MAX_PAGES,
) -> tuple[dict[str, Any] | None, Response | None]:
    """Every item of ``path`` as one ``<list_kind>`` document, or ``(None, the failed answer)``.

    At most ``max_pages`` pages of :data:`PAGE_SIZE` items; a ``continue`` token
    the server already sent (its pages loop) or more pages than that end the
    listing as failed, with a ``Status`` that says so (reason ``EndlessList``).
    Raises :class:`KubeApiError` only when the server cannot be reached.
    """
    items: list[Any] = []
    token: str | None = None
    seen: set[str] = set()
    api_version = "v1"
    for page in range(1, max_pages + 1):
        query: dict[str, str | int | bool] = {"limit": PAGE_SIZE}
        if token:
            query["continue"] = token
        if label_selector:
            query["labelSelector"] = label_selector
        answer = client.get_json(path, query=query)
        body = answer.body
        if not answer.ok or not isinstance(body, dict) or not isinstance(body.get("items"), list):
            if answer.ok:  # 200 but not a list: say what came back
                answer = Response(502, None, f"not a list: {answer.text[:200]}")
            return None, answer
        api_version = str(body.get("apiVersion") or api_version)
        items.extend(body["items"])
        meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        token = meta.get("continue") if meta else None
        if not token:
            return {"apiVersion": api_version, "kind": list_kind, "items": items}, None
        if not isinstance(token, str):
            return None, _endless(path, f"page {page} has a continue token that is not a string")
        if token in seen:
            return None, _endless(
                path,
                f"page {page} repeats the continue token of an earlier page (the server's "
                "pages loop)",
            )
        seen.add(token)
    return None, _endless(
        path,
        f"the server still sends a continue token after {max_pages} pages of {PAGE_SIZE} "
        f"items ({max_pages * PAGE_SIZE:,} items, the most vf reads from one listing)",
    )


def _nodes_error(client: KubeClient, answer: Response) -> KubeApiError:
    said = answer.status_line()
    if answer.status == 401:
        return KubeApiError(
            "kube-unauthorized",
            f"the API server at {client.where} refused the credentials: {said}",
            "refresh the kubeconfig's credentials (log in again), or pick another --context",
        )
    if answer.status == 403:
        return KubeApiError(
            "kube-nodes-forbidden",
            f"listing nodes on {client.where} is forbidden: {said}",
            "the plan needs `list nodes` cluster-wide (a ClusterRole; see docs/kubernetes.md, RBAC)",
        )
    return KubeApiError(
        "kube-nodes-unreadable",
        f"listing nodes on {client.where} failed: {said}",
        "retry; if it persists, check the API server (`kubectl get nodes` should answer)",
    )


def _status_of(answer: Response) -> dict[str, Any]:
    return answer.as_status()


def read_documents(client: KubeClient) -> tuple[Any, Any, Any]:
    """The three documents, as kubectl would print them (a refusal as its ``Status``).

    Raises :class:`KubeApiError` when nodes cannot be listed or the server is unreachable.
    """
    nodes, failed = list_all(client, NODES_PATH, "NodeList")
    if nodes is None:
        assert failed is not None
        raise _nodes_error(client, failed)
    pods: Any
    try:
        pods, failed = list_all(client, PODS_PATH, "PodList")
        if pods is None:
            assert failed is not None
            pods = _status_of(failed)
    except KubeApiError as exc:  # nodes answered, pods did not: unknown, never idle
        pods = {"kind": "Status", "status": "Failure", "reason": exc.rule, "message": exc.message}
    runtime_classes: Any
    try:
        runtime_classes, failed = list_all(client, RUNTIME_CLASSES_PATH, "RuntimeClassList")
        if runtime_classes is None:
            assert failed is not None
            runtime_classes = None if failed.status == 404 else _status_of(failed)
    except KubeApiError as exc:
        runtime_classes = {
            "kind": "Status",
            "status": "Failure",
            "reason": exc.rule,
            "message": exc.message,
        }
    return nodes, pods, runtime_classes


def _listing_or_status(client: KubeClient, path: str, list_kind: str) -> Any:
    """A listing as kubectl prints it, or the ``Status`` of its failure (unknown, never empty)."""
    try:
        doc, failed = list_all(client, path, list_kind)
    except KubeApiError as exc:
        return {"kind": "Status", "status": "Failure", "reason": exc.rule, "message": exc.message}
    if doc is None:
        assert failed is not None
        return _status_of(failed)
    return doc


def read_dra_documents(client: KubeClient) -> tuple[Any, Any, Any]:
    """ResourceSlices, DeviceClasses and ResourceClaims, as ``kubectl get … -o json`` prints them
    (a failure as its ``Status``)."""
    return (
        _listing_or_status(client, RESOURCE_SLICES_PATH, "ResourceSliceList"),
        _listing_or_status(client, DEVICE_CLASSES_PATH, "DeviceClassList"),
        _listing_or_status(client, RESOURCE_CLAIMS_PATH, "ResourceClaimList"),
    )


def read_snapshot(client: KubeClient) -> ClusterSnapshot:
    """The cluster ``client`` points at, as a snapshot (see the module docstring)."""
    return snapshot_of(*read_documents(client), dra=read_dra_documents(client))


def snapshot_of(
    nodes: Any, pods: Any, runtime_classes: Any, *, dra: tuple[Any, Any, Any] | None = None
) -> ClusterSnapshot:
    """The snapshot of the listings :func:`read_documents` (and :func:`read_dra_documents`)
    returned."""
    extra: dict[str, Any] = {}
    if dra is not None:
        extra = {
            "resourceslices_json": dra[0],
            "deviceclasses_json": dra[1],
            "resourceclaims_json": dra[2],
            "dra_sources": (
                "the API's ResourceSlice listing",
                "the API's DeviceClass listing",
                "the API's ResourceClaim listing",
            ),
        }
    return snapshot_from_kubernetes(
        nodes,
        pods,
        runtime_classes,
        nodes_source="the API's node listing",
        pods_source="the API's pod listing",
        runtime_classes_source="the API's RuntimeClass listing",
        **extra,
    )
