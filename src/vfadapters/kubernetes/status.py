"""What one run has on the cluster: objects, replicas desired/ready, scalers, broker lag.

:func:`run_status` lists the run's objects by its label selector and returns
one document:

- ``objects``: every object (kind, name) with, for workloads, ``desired`` and
  ``ready`` (Deployments/StatefulSets: ``spec.replicas`` / ``status.readyReplicas``;
  Jobs: ``spec.completions`` / ``status.succeeded``, plus ``active`` and
  ``failed``) and a one-word ``state``;
- ``scalers``: each KEDA ScaledObject's min/max and its ``Ready``/``Active``/
  ``Fallback`` conditions — or ``unknown`` with the reason when the cluster does
  not serve ScaledObjects or refuses the listing;
- ``lag``: each edge's backlog (pending + ack-pending, what KEDA reads) through
  :func:`vfadapters.broker.monitor.observe` when a broker or monitoring URL is
  given; otherwise every edge is *unknown* with the reason (the in-cluster broker
  is not reachable from outside; ``kubectl port-forward`` it and pass the URL).
  Unknown is never 0.

:func:`find_runs` lists the run ids of a flow present in a namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vfadapters.kubernetes.client import KubeApiError, KubeClient, object_path
from vfadapters.kubernetes.snapshot import list_all

__all__ = ["STATUS_KINDS", "find_runs", "run_status"]

#: (kind, apiVersion, plural) listed for a run's status.
STATUS_KINDS: tuple[tuple[str, str, str], ...] = (
    ("StatefulSet", "apps/v1", "statefulsets"),
    ("Deployment", "apps/v1", "deployments"),
    ("Job", "batch/v1", "jobs"),
    ("Service", "v1", "services"),
    ("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets"),
    ("Pod", "v1", "pods"),
)


def _list(
    client: KubeClient, namespace: str, api: str, plural: str, kind: str, selector: str
) -> list[Mapping[str, Any]]:
    doc, failed = list_all(
        client, object_path(api, plural, namespace, None), f"{kind}List", label_selector=selector
    )
    if doc is None:
        assert failed is not None
        raise KubeApiError(
            "kube-list-failed",
            f"listing {plural} in {namespace} ({selector}) failed: {failed.status_line()}",
            f"check `list` on {plural} in namespace {namespace} for your user "
            "(docs/kubernetes.md, RBAC), or pass the run's --namespace NS, or --kubeconfig "
            "PATH / --context C for another cluster, and retry",
        )
    return [i for i in doc["items"] if isinstance(i, Mapping)]


def find_runs(client: KubeClient, namespace: str, flow_label: str) -> list[str]:
    """The run ids (``vfcore.io/run``) of the flow labelled ``flow_label`` in ``namespace``."""
    selector = f"app.kubernetes.io/managed-by=vf,vfcore.io/flow={flow_label}"
    runs: set[str] = set()
    for kind, api, plural in STATUS_KINDS:
        for item in _list(client, namespace, api, plural, kind, selector):
            run = _mapping(_mapping(item.get("metadata")).get("labels")).get("vfcore.io/run")
            if isinstance(run, str) and run:
                runs.add(run)
    return sorted(runs)


def _mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is an object; ``{}`` otherwise (what cannot be read is not there)."""
    return value if isinstance(value, Mapping) else {}


def _count(value: object, default: int | None = None) -> int | None:
    """A replica count as the API gives it: an int >= 0, ``default`` when absent, else unknown."""
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None  # a count that cannot be read is unknown, never 0


def _conditions(obj: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    conditions = _mapping(obj.get("status")).get("conditions")
    for c in conditions if isinstance(conditions, list) else []:
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            out[c["type"]] = str(c.get("status"))
    return out


def _workload_row(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """One object's row; a field the API returned in a shape vf cannot read is unknown."""
    meta = _mapping(obj.get("metadata"))
    spec = _mapping(obj.get("spec"))
    status = _mapping(obj.get("status"))
    labels = _mapping(meta.get("labels"))
    row: dict[str, Any] = {
        "kind": kind,
        "name": meta.get("name"),
        "node": labels.get("vfcore.io/node"),
        "component": labels.get("app.kubernetes.io/component"),
    }
    if kind in ("Deployment", "StatefulSet"):
        desired = _count(spec.get("replicas"), 1)
        ready = _count(status.get("readyReplicas"), 0)
        known = desired is not None and ready is not None
        state = "unknown" if not known else "ready" if ready >= desired else "progressing"  # type: ignore[operator]
        row.update(desired=desired, ready=ready, state=state)
    elif kind == "Job":
        desired = _count(spec.get("completions"), 1)
        succeeded = _count(status.get("succeeded"), 0)
        conds = _conditions(obj)
        state = (
            "complete"
            if conds.get("Complete") == "True"
            else "failed"
            if conds.get("Failed") == "True"
            else "running"
        )
        row.update(
            desired=desired,
            ready=succeeded,
            active=_count(status.get("active"), 0),
            failed=_count(status.get("failed"), 0),
            state=state,
        )
    elif kind == "Pod":
        conds = _conditions(obj)
        phase = status.get("phase") if isinstance(status.get("phase"), str) else "Unknown"
        row.update(
            state=phase,
            ready=conds.get("Ready") == "True",
            scheduled=conds.get("PodScheduled"),
            host=spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else None,
        )
    return row


def _scalers(client: KubeClient, namespace: str, selector: str) -> dict[str, Any]:
    path = object_path("keda.sh/v1alpha1", "scaledobjects", namespace, None)
    try:
        doc, failed = list_all(client, path, "ScaledObjectList", label_selector=selector)
    except KubeApiError as exc:
        return {"known": False, "reason": exc.message, "items": []}
    if doc is None:
        assert failed is not None
        why = (
            "the cluster does not serve keda.sh/v1alpha1 ScaledObjects (KEDA not installed)"
            if failed.status == 404
            else f"listing ScaledObjects failed: {failed.status_line()}"
        )
        return {"known": False, "reason": why, "items": []}
    items = []
    for so in doc["items"]:
        so = _mapping(so)
        spec = _mapping(so.get("spec"))
        conds = _conditions(so)
        items.append(
            {
                "name": _mapping(so.get("metadata")).get("name"),
                "target": _mapping(spec.get("scaleTargetRef")).get("name"),
                "min": spec.get("minReplicaCount"),
                "max": spec.get("maxReplicaCount"),
                "ready": conds.get("Ready", "Unknown"),
                "active": conds.get("Active", "Unknown"),
                "fallback": conds.get("Fallback", "Unknown"),
            }
        )
    return {"known": True, "reason": None, "items": items}


def _lag(spec: Any, run_id: str, broker_url: str | None, monitor_url: str | None) -> dict[str, Any]:
    edges = [(p, n.name) for n in spec.nodes if n.is_processor for p in n.parents]
    if broker_url is None and monitor_url is None:
        reason = (
            "no --broker or --monitor URL given (an in-cluster broker is not reachable from "
            "here: `kubectl port-forward` its Service and pass the URL)"
        )
        return {
            "source": None,
            "edges": [{"parent": p, "node": c, "lag": None, "reason": reason} for p, c in edges],
        }
    from vfadapters.broker.monitor import observe

    live = observe(broker_url, spec, run_id, monitor_url=monitor_url)
    out = []
    for (parent, child), reading in live.readings.items():
        doc = reading.to_dict()
        if doc.get("lag") is None:  # the same key as without a broker: why it is unknown
            doc["reason"] = f"{doc.get('unknown')}: {doc.get('detail')}".rstrip(": ")
        out.append({"parent": parent, "node": child, **doc})
    return {"source": live.source, "method": live.method, "edges": out}


def run_status(
    client: KubeClient,
    namespace: str,
    selector: str,
    *,
    spec: Any = None,
    run_id: str | None = None,
    broker_url: str | None = None,
    monitor_url: str | None = None,
) -> dict[str, Any]:
    """The run's status document; see the module docstring."""
    workloads: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for kind, api, plural in STATUS_KINDS:
        for item in _list(client, namespace, api, plural, kind, selector):
            row = _workload_row(kind, item)
            if kind == "Pod":
                pods.append(row)
            elif kind in ("Deployment", "StatefulSet", "Job"):
                workloads.append(row)
            else:
                others.append(row)
    doc: dict[str, Any] = {
        "namespace": namespace,
        "selector": selector,
        "found": bool(workloads or pods or others),
        "workloads": workloads,
        "pods": pods,
        "other_objects": others,
        "scalers": _scalers(client, namespace, selector),
    }
    if spec is not None and run_id is not None:
        doc["lag"] = _lag(spec, run_id, broker_url, monitor_url)
    return doc
