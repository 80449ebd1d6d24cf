"""Deploying a run that is already there: its own pods are not in its way, and what changes.

A second ``vf deploy`` of the same run must plan as if the run's own pods were
not bound: they *are* the pods the plan places (the same Jobs, Deployments and
StatefulSets are applied again, and keep their pods). Counting them as occupied
capacity would refuse an idempotent redeploy of a flow that fills its nodes
(``preflight-does-not-fit``: "add one more node").

:func:`without_run_pods` takes the listings the preflight read (pods of every
namespace, and the DRA ResourceClaims) and leaves out the run's own: pods in
the run's namespace carrying all of its labels (:func:`run_labels`), and the
claims those pods own (a claim made from a ResourceClaimTemplate is owned by
its pod) or that carry the run's labels. A listing that could not be read
(a ``Status``, ``None``) is passed on unchanged: unknown stays unknown.

>>> pods = {"kind": "PodList", "items": [
...     {"metadata": {"name": "mine-0", "namespace": "default",
...                   "labels": run_labels("cams", "r1")}, "spec": {"nodeName": "gpu-a"}},
...     {"metadata": {"name": "other", "namespace": "default"}, "spec": {"nodeName": "gpu-a"}}]}
>>> kept, _, own = without_run_pods(pods, None, flow="cams", run_id="r1", namespace="default")
>>> [p["metadata"]["name"] for p in kept["items"]], own.describe()
(['other'], '1 pod of run r1 (1 on gpu-a)')

:func:`redeploy_changes` compares the objects about to be applied with the
run's objects already on the cluster: which are new, which are there (and,
for workloads, what of their pods changes: images, arguments, environment,
requests, replicas), and which the cluster holds that this render no longer
has (left in place; ``vf teardown`` or ``kubectl delete`` removes them). A
Job's pod template is immutable in Kubernetes: a Job whose pods would change
is in :attr:`RedeployChanges.immutable` (a BATCH run is finished or restarted
under a new run id, never rolled) — except the run's setup Job, which has run
once and is ``kept`` as it is (every worker's init container makes sure of the
topology too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.quantity import parse_quantity
from vfcore.runtime.render_options import MANAGED_BY, flow_label

__all__ = [
    "ObjectChange",
    "RedeployChanges",
    "RunPods",
    "redeploy_changes",
    "run_labels",
    "without_run_pods",
]

#: The kinds whose pods :func:`redeploy_changes` compares.
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job")


def run_labels(flow: str, run_id: str) -> dict[str, str]:
    """The labels every object (and pod) of one run of ``flow`` carries; see
    :func:`vfcore.runtime.render_options.run_selector`."""
    return {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "vfcore.io/flow": flow_label(flow),
        "vfcore.io/run": run_id,
    }


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _carries(obj: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    have = _mapping(_mapping(obj.get("metadata")).get("labels"))
    return all(have.get(k) == v for k, v in labels.items())


@dataclass(frozen=True, slots=True)
class RunPods:
    """The run's own pods (and DRA claims) left out of the plan: ``(name, node or None)``."""

    run_id: str
    pods: tuple[tuple[str, str | None], ...] = ()
    claims: tuple[str, ...] = ()

    @property
    def nodes(self) -> tuple[str, ...]:
        """The nodes the run's pods are bound to, sorted."""
        return tuple(sorted({n for _, n in self.pods if n}))

    def describe(self) -> str:
        """``3 pods of run r1 (2 on gpu-a, 1 not bound)``."""
        count: dict[str, int] = {}
        for _, node in self.pods:
            key = node or ""
            count[key] = count.get(key, 0) + 1
        where = [f"{n} on {node}" for node, n in sorted(count.items()) if node]
        if "" in count:
            where.append(f"{count['']} not bound")
        plural = "" if len(self.pods) == 1 else "s"
        text = f"{len(self.pods)} pod{plural} of run {self.run_id} ({', '.join(where)})"
        if self.claims:
            text += f" and {len(self.claims)} ResourceClaim(s) they hold"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "pods": [{"pod": p, "node": n} for p, n in self.pods],
            "claims": list(self.claims),
        }


def without_run_pods(
    pods_json: object,
    claims_json: object,
    *,
    flow: str,
    run_id: str,
    namespace: str,
) -> tuple[object, object, RunPods]:
    """``(pods, claims, RunPods)``: the listings without the run's own pods and claims.

    Inputs are never changed; a document that is not a readable listing (a
    ``Status``, text, ``None``) is returned as it is.
    """
    labels = run_labels(flow, run_id)
    own: list[tuple[str, str | None]] = []
    kept_pods = pods_json
    if isinstance(pods_json, Mapping) and isinstance(pods_json.get("items"), list):
        items = []
        for item in pods_json["items"]:
            meta = _mapping(_mapping(item).get("metadata"))
            if meta.get("namespace") == namespace and _carries(_mapping(item), labels):
                node = _mapping(_mapping(item).get("spec")).get("nodeName")
                own.append((str(meta.get("name")), node if isinstance(node, str) else None))
            else:
                items.append(item)
        kept_pods = {**pods_json, "items": items}
    names = {name for name, _ in own}
    claims: list[str] = []
    kept_claims = claims_json
    if isinstance(claims_json, Mapping) and isinstance(claims_json.get("items"), list):
        items = []
        for item in claims_json["items"]:
            meta = _mapping(_mapping(item).get("metadata"))
            owners = meta.get("ownerReferences")
            owned = meta.get("namespace") == namespace and any(
                _mapping(o).get("kind") == "Pod" and _mapping(o).get("name") in names
                for o in (owners if isinstance(owners, list) else [])
            )
            labelled = meta.get("namespace") == namespace and _carries(_mapping(item), labels)
            if owned or labelled:
                claims.append(str(meta.get("name")))
            else:
                items.append(item)
        kept_claims = {**claims_json, "items": items}
    return kept_pods, kept_claims, RunPods(run_id, tuple(sorted(own)), tuple(sorted(claims)))


# -- what a redeploy changes ---------------------------------------------------------

Change = Literal["new", "unchanged-pods", "changed-pods", "kept", "not-rendered"]


@dataclass(frozen=True, slots=True)
class ObjectChange:
    """One object of the run: ``new`` (not on the cluster), ``unchanged-pods`` (there; its
    pods as before — other fields may still change), ``changed-pods`` (``details`` say
    what), ``kept`` (the run's setup Job, whose pods would change: it has run, and every
    worker's init container sets the topology up too, so it is not applied again), or
    ``not-rendered`` (on the cluster, no longer in this render)."""

    kind: str
    name: str
    change: Change
    details: tuple[str, ...] = ()

    def line(self) -> str:
        said = f"{self.kind.lower()}/{self.name}: {self.change}"
        return said + (f" ({'; '.join(self.details)})" if self.details else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "change": self.change,
            "details": list(self.details),
        }


@dataclass(frozen=True, slots=True)
class RedeployChanges:
    """What applying a render over the run's existing objects changes."""

    objects: tuple[ObjectChange, ...]

    def of(self, change: Change) -> tuple[ObjectChange, ...]:
        return tuple(o for o in self.objects if o.change == change)

    @property
    def exists(self) -> bool:
        """Whether the run has any object on the cluster already."""
        return any(o.change != "new" for o in self.objects)

    @property
    def immutable(self) -> tuple[ObjectChange, ...]:
        """Jobs whose pods would change: Kubernetes refuses to change a Job's pod template."""
        return tuple(o for o in self.of("changed-pods") if o.kind == "Job")

    def to_apply(self, objects: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
        """``objects`` without those ``kept`` as they are."""
        kept = {(o.kind, o.name) for o in self.of("kept")}
        return tuple(o for o in objects if _key(o) not in kept)

    def summary(self) -> str:
        """``4 new, 6 there (1 with changed pods), 1 no longer rendered``."""
        there = sum(len(self.of(c)) for c in ("unchanged-pods", "changed-pods", "kept"))
        said = f"{len(self.of('new'))} new, {there} there"
        if self.of("changed-pods"):
            said += f" ({len(self.of('changed-pods'))} with changed pods)"
        if self.of("kept"):
            said += f", {len(self.of('kept'))} kept as it is"
        if self.of("not-rendered"):
            said += f", {len(self.of('not-rendered'))} no longer rendered"
        return said

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "objects": [o.to_dict() for o in self.objects]}


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return str(obj.get("kind")), str(_mapping(obj.get("metadata")).get("name"))


def _pod_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(_mapping(_mapping(obj.get("spec")).get("template")).get("spec"))


def _containers(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    pod = _pod_of(obj)
    out: dict[str, Mapping[str, Any]] = {}
    for group in ("initContainers", "containers"):
        listed = pod.get(group)
        for c in listed if isinstance(listed, list) else []:
            c = _mapping(c)
            out[f"{group[:-10] or 'container'}:{c.get('name')}"] = c
    return out


def _quantity(value: object) -> object:
    try:
        return parse_quantity(str(value))
    except ValueError:
        return value


def _requests(c: Mapping[str, Any]) -> dict[str, object]:
    req = _mapping(_mapping(c.get("resources")).get("requests"))
    return {str(k): _quantity(v) for k, v in req.items()}


#: What names the source of an ``env[].valueFrom`` (the API server fills in defaults around
#: them, e.g. ``fieldRef.apiVersion: v1``: those are not changes).
_VALUE_FROM_KEYS = {
    "fieldRef": ("fieldPath",),
    "resourceFieldRef": ("containerName", "resource"),
    "secretKeyRef": ("name", "key"),
    "configMapKeyRef": ("name", "key"),
}


def _env_value(e: Mapping[str, Any]) -> object:
    if "valueFrom" not in e:
        return e.get("value", "")  # an empty value may come back without the key
    source = _mapping(e.get("valueFrom"))
    for kind, keys in _VALUE_FROM_KEYS.items():
        if kind in source:
            ref = _mapping(source[kind])
            return (kind, *(str(ref.get(k) or "") for k in keys))
    return repr(sorted(source.items()))


def _env(c: Mapping[str, Any]) -> dict[str, object]:
    listed = c.get("env")
    return {
        str(_mapping(e).get("name")): _env_value(_mapping(e))
        for e in (listed if isinstance(listed, list) else [])
    }


def _mounts(c: Mapping[str, Any]) -> tuple[tuple[str, str, bool], ...]:
    listed = c.get("volumeMounts")
    return tuple(
        sorted(
            (str(_mapping(m).get("mountPath")), str(_mapping(m).get("name")),
             bool(_mapping(m).get("readOnly")))
            for m in (listed if isinstance(listed, list) else [])
        )
    )  # fmt: skip


def _replicas(obj: Mapping[str, Any]) -> tuple[tuple[str, object], ...]:
    spec = _mapping(obj.get("spec"))
    if obj.get("kind") == "Job":
        return (
            ("parallelism", spec.get("parallelism", 1)),
            ("completions", spec.get("completions", 1)),
        )
    if "replicas" not in spec:  # left to the HPA (KEDA): not ours to compare
        return ()
    return (("replicas", spec.get("replicas")),)


def _pod_details(rendered: Mapping[str, Any], live: Mapping[str, Any]) -> tuple[str, ...]:
    details: list[str] = []
    want, have = _containers(rendered), _containers(live)
    for name in sorted(set(want) | set(have)):
        shown = name.split(":", 1)[1] + (" (init)" if name.startswith("init") else "")
        if name not in have:
            details.append(f"container {shown} added")
            continue
        if name not in want:
            details.append(f"container {shown} removed")
            continue
        w, h = want[name], have[name]
        if w.get("image") != h.get("image"):
            details.append(f"{shown}: image {h.get('image')} -> {w.get('image')}")
        for field in ("command", "args"):
            if (w.get(field) or None) != (h.get(field) or None):
                details.append(f"{shown}: {field} changed")
        if _env(w) != _env(h):
            changed = sorted(
                k for k in set(_env(w)) | set(_env(h)) if _env(w).get(k) != _env(h).get(k)
            )
            details.append(f"{shown}: env {', '.join(changed)} changed")
        if _requests(w) != _requests(h):
            details.append(f"{shown}: requests changed")
        if _mounts(w) != _mounts(h):
            details.append(f"{shown}: volume mounts changed")
        if (w.get("imagePullPolicy") or None) not in (None, h.get("imagePullPolicy")):
            details.append(
                f"{shown}: imagePullPolicy {h.get('imagePullPolicy')} -> {w.get('imagePullPolicy')}"
            )
    w_pod, h_pod = _pod_of(rendered), _pod_of(live)
    if (w_pod.get("priorityClassName") or None) != (h_pod.get("priorityClassName") or None):
        details.append(
            f"priorityClassName {h_pod.get('priorityClassName')} -> "
            f"{w_pod.get('priorityClassName')}"
        )
    for (field, w_value), (_, h_value) in zip(_replicas(rendered), _replicas(live), strict=False):
        if w_value != h_value:
            details.append(f"{field} {h_value} -> {w_value}")
    return tuple(details)


def _is_setup(obj: Mapping[str, Any]) -> bool:
    """The run's setup Job (``vf broker-setup``): a Job of the broker component."""
    return (
        _mapping(_mapping(obj.get("metadata")).get("labels")).get("app.kubernetes.io/component")
        == "broker"
    )


def redeploy_changes(
    rendered: Sequence[Mapping[str, Any]], existing: Iterable[Mapping[str, Any]]
) -> RedeployChanges:
    """Each rendered object against the run's ``existing`` ones (as the API returned them).

    Only what the pods run is compared (containers' images, command, arguments,
    environment — a ``valueFrom`` by its source, without the defaults the server adds —,
    requests, volume mounts, a pull policy the render sets; the pod's PriorityClass;
    replicas): the server adds defaults to the rest, and the apply itself says which
    objects it configured.

    >>> job = {"kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {
    ...     "containers": [{"name": "worker", "image": "a:1"}]}}}}
    >>> newer = {**job, "spec": {"template": {"spec": {
    ...     "containers": [{"name": "worker", "image": "a:2"}]}}}}
    >>> redeploy_changes([newer], [job]).immutable[0].line()
    'job/j: changed-pods (worker: image a:1 -> a:2)'
    """
    live = {_key(o): o for o in existing}
    out: list[ObjectChange] = []
    seen: set[tuple[str, str]] = set()
    for obj in rendered:
        key = _key(obj)
        seen.add(key)
        if key not in live:
            out.append(ObjectChange(*key, "new"))
            continue
        details = _pod_details(obj, live[key]) if key[0] in WORKLOAD_KINDS else ()
        change: Change = "changed-pods" if details else "unchanged-pods"
        if details and key[0] == "Job" and _is_setup(obj):
            change = "kept"
        out.append(ObjectChange(*key, change, details))
    for key in sorted(set(live) - seen):
        if key[0] == "Pod":
            continue
        out.append(ObjectChange(*key, "not-rendered"))
    return RedeployChanges(tuple(out))
