"""The storage half of ``vf deploy``'s preflight: read StorageClasses, volumes and claims.

:func:`storage_problems` lists what it needs — StorageClasses and
PersistentVolumes (cluster-scoped) and the namespace's PersistentVolumeClaims —
only when the rendered objects make or mount a claim, and asks
:func:`vfcore.placement.storage.check_claims` whether each binds. A refused or
failed listing is passed on as its ``Status``: the answer is then *unknown*
(a warning), never "binds".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vfadapters.kubernetes.client import KubeApiError, KubeClient, object_path
from vfadapters.kubernetes.snapshot import list_all

__all__ = [
    "PERSISTENT_VOLUMES_PATH",
    "STORAGE_CLASSES_PATH",
    "read_storage_facts",
    "storage_problems",
]

STORAGE_CLASSES_PATH = "/apis/storage.k8s.io/v1/storageclasses"
PERSISTENT_VOLUMES_PATH = "/api/v1/persistentvolumes"


def _listing(client: KubeClient, path: str, kind: str) -> Any:
    try:
        doc, failed = list_all(client, path, kind)
    except KubeApiError as exc:
        return {"kind": "Status", "status": "Failure", "reason": exc.rule, "message": exc.message}
    if doc is None:
        assert failed is not None
        return failed.as_status()
    return doc


def read_storage_facts(client: KubeClient, namespace: str, *, cluster_wide: bool = True) -> Any:
    """:class:`vfcore.cluster.storage.StorageFacts` of the cluster and ``namespace``
    (``cluster_wide=False``: the namespace's claims only; classes and volumes are then
    not read)."""
    from vfcore.cluster import storage_facts

    classes = volumes = None
    if cluster_wide:
        classes = _listing(client, STORAGE_CLASSES_PATH, "StorageClassList")
        volumes = _listing(client, PERSISTENT_VOLUMES_PATH, "PersistentVolumeList")
    claims = _listing(
        client,
        object_path("v1", "persistentvolumeclaims", namespace, None),
        "PersistentVolumeClaimList",
    )
    return storage_facts(classes, volumes, claims)


def storage_problems(
    client: KubeClient,
    objects: Sequence[Mapping[str, Any]],
    namespace: str,
    hosts: Mapping[str, str],
) -> tuple[Any, ...]:
    """The storage problems of deploying ``objects`` (``hosts``: the plan's pod → node);
    nothing is read when they make and mount no claim."""
    from vfcore.placement import check_claims, claim_uses

    uses = claim_uses(objects)
    if not uses:
        return ()
    facts = read_storage_facts(client, namespace, cluster_wide=any(u.created for u in uses))
    return check_claims(uses, facts, hosts)
