"""Why an object of a run is still there after ``vf teardown`` deleted it, and what to do.

:func:`lingering` reads the objects a teardown found left at its deadline (as
the API returned them) and the Nodes their pods are bound to, and says for
each why it has not gone:

- ``node-not-ready``: a pod bound to a node whose ``Ready`` condition is not
  ``True`` or that carries the ``node.kubernetes.io/unreachable`` taint. Only
  the node's kubelet can confirm that a pod's containers stopped; on a dead or
  partitioned node nobody will, and the pod stays ``Terminating`` until it is
  force-deleted (``kubectl delete pod NAME --force --grace-period=0``: only when
  the node is really down, since the containers may still run on it);
- ``node-gone``: a pod bound to a node the API no longer has (the same cure);
- ``finalizers``: an object holding ``metadata.finalizers`` (named): whoever
  put them there has not removed them;
- ``terminating``: none of those: it is still going (a container's grace
  period, the garbage collector); a longer ``--timeout`` may see it go.

A node that could not be read is ``None`` in ``nodes``: then the pod's reason
is ``terminating`` or ``finalizers``, never a guess about the node.

>>> pod = {"kind": "Pod", "metadata": {"name": "infer-0", "deletionTimestamp": "t"},
...        "spec": {"nodeName": "gpu-a"}}
>>> node = {"metadata": {"name": "gpu-a"},
...         "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
>>> (item,) = lingering([pod], {"gpu-a": node})
>>> item.reason, item.advice("video")
('node-not-ready', 'node gpu-a is not Ready (Ready=Unknown): its kubelet cannot confirm the pod stopped; if the node is down, force-delete it: kubectl delete pod infer-0 -n video --force --grace-period=0')
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["NODE_GONE", "UNREACHABLE_TAINT", "Lingering", "lingering"]

UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"

Reason = Literal["node-not-ready", "node-gone", "finalizers", "terminating"]

#: A node looked up and not found (``nodes[name] is NODE_GONE``).
NODE_GONE: Mapping[str, Any] = {"__gone__": True}


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True)
class Lingering:
    """One object still there: its kind and name, why, and the node (pods)."""

    kind: str
    name: str
    reason: Reason
    node: str | None = None
    detail: str = ""
    finalizers: tuple[str, ...] = ()

    def advice(self, namespace: str) -> str:
        """What it is and what to do, one line."""
        name = shlex.quote(self.name)
        ns = shlex.quote(namespace)
        force = f"kubectl delete {self.kind.lower()} {name} -n {ns} --force --grace-period=0"
        if self.reason == "node-not-ready":
            return (
                f"node {self.node} is not Ready ({self.detail}): its kubelet cannot confirm the "
                f"pod stopped; if the node is down, force-delete it: {force}"
            )
        if self.reason == "node-gone":
            return (
                f"node {self.node} no longer exists: nothing will confirm the pod stopped; "
                f"force-delete it: {force}"
            )
        if self.reason == "finalizers":
            return (
                f"it holds finalizers {', '.join(self.finalizers)}: the controller that set "
                f"them has not removed them (kubectl get {self.kind.lower()} {name} -n {ns} "
                "-o yaml shows them)"
            )
        return "still terminating; a longer --timeout may see it go"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "reason": self.reason,
            "node": self.node,
            "detail": self.detail,
            "finalizers": list(self.finalizers),
        }


def _node_trouble(node: Mapping[str, Any]) -> str | None:
    """Why a node cannot confirm its pods stopped, or ``None`` when it is Ready and reachable."""
    spec, status = _mapping(node.get("spec")), _mapping(node.get("status"))
    taints = spec.get("taints")
    for taint in taints if isinstance(taints, list) else []:
        if _mapping(taint).get("key") == UNREACHABLE_TAINT:
            return f"tainted {UNREACHABLE_TAINT}"
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else []:
        condition = _mapping(condition)
        if condition.get("type") == "Ready":
            state = condition.get("status")
            return None if state == "True" else f"Ready={state}"
    return "no Ready condition"


def lingering(
    objects: Iterable[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, Any] | None]
) -> tuple[Lingering, ...]:
    """Why each of ``objects`` (each with its ``kind``) is still there; see the module
    docstring. ``nodes`` maps a node name to its Node, :data:`NODE_GONE`, or ``None``
    (not read). Sorted by kind, then name."""
    out: list[Lingering] = []
    for obj in objects:
        meta = _mapping(obj.get("metadata"))
        kind, name = str(obj.get("kind")), str(meta.get("name"))
        raw = meta.get("finalizers")
        finalizers = tuple(sorted(str(f) for f in raw)) if isinstance(raw, list) else ()
        host = _mapping(obj.get("spec")).get("nodeName") if kind == "Pod" else None
        if isinstance(host, str) and host:
            node = nodes.get(host)
            if node is NODE_GONE:
                out.append(Lingering(kind, name, "node-gone", host, "", finalizers))
                continue
            trouble = None if node is None else _node_trouble(node)
            if trouble is not None:
                out.append(Lingering(kind, name, "node-not-ready", host, trouble, finalizers))
                continue
        host = host if isinstance(host, str) and host else None
        reason: Reason = "finalizers" if finalizers else "terminating"
        out.append(Lingering(kind, name, reason, host, "", finalizers))
    return tuple(sorted(out, key=lambda item: (item.kind, item.name)))
