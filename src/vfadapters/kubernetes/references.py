"""The references half of ``vf deploy``'s preflight: do the objects the pods name exist?

:func:`reference_problems` finds what the rendered pod templates name and vf does
not make (:func:`vfcore.runtime.references.pod_references`: mounted ConfigMaps
and Secrets, image pull Secrets, the PriorityClass), reads each one by name —
one ``GET``, whose answer is looked at only for its status: 200 there, 404 not
there, anything else (403, a failure) unknown with the status line — and asks
:func:`vfcore.runtime.references.check_references` what that means.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vfadapters.kubernetes.client import KubeApiError, KubeClient, object_path

__all__ = ["reference_problems"]

_PATHS = {
    "ConfigMap": ("v1", "configmaps"),
    "Secret": ("v1", "secrets"),
    "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses"),
}


def reference_problems(
    client: KubeClient,
    objects: Sequence[Mapping[str, Any]],
    namespace: str,
    *,
    own_secrets: Sequence[str] = (),
) -> tuple[Any, ...]:
    """The problems of the references of ``objects`` (nothing is read when there are none;
    ``own_secrets``: the run's credentials Secret, which the deploy makes itself)."""
    from vfcore.runtime import check_references, pod_references

    refs = pod_references(objects, own_secrets=own_secrets)
    found: dict[tuple[str, str], bool | str] = {}
    for ref in refs:
        api, plural = _PATHS[ref.kind]
        path = object_path(api, plural, namespace if ref.namespaced else None, ref.name)
        try:
            answer = client.get_json(path)
        except KubeApiError as exc:
            found[(ref.kind, ref.name)] = exc.message
            continue
        if answer.ok:
            found[(ref.kind, ref.name)] = True
        elif answer.status == 404:
            found[(ref.kind, ref.name)] = False
        else:
            found[(ref.kind, ref.name)] = f"GET {path}: {answer.status_line()}"
    return check_references(refs, found, namespace)
