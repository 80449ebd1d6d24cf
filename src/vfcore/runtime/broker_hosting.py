"""Whether a clustered broker's servers can each have a host (``vf deploy --broker-replicas 3``).

The in-cluster broker's StatefulSet of N servers carries a *required* pod
anti-affinity on ``kubernetes.io/hostname``: no two on one node (two on one host
would lose a majority with it). So N nodes must be able to take one: Ready, not
cordoned, every ``NoSchedule``/``NoExecute`` taint tolerated by the broker's pod
(it tolerates none: GPU nodes tainted ``nvidia.com/gpu`` are out), its
``nodeSelector`` matched. :func:`broker_hosts` counts them, three-valued as the
planner is: a node whose facts could not be read (``unreadable``) may or may not
take one. The broker's few hundred millicores are not packed here: only who may
host it.

>>> from vfcore.cluster import NodeState, Taint
>>> sts = {"kind": "StatefulSet", "metadata": {"name": "b", "labels":
...        {"app.kubernetes.io/component": "broker"}}, "spec": {"replicas": 3,
...        "template": {"spec": {"affinity": {"podAntiAffinity": {
...        "requiredDuringSchedulingIgnoredDuringExecution": [{}]}}}}}}
>>> nodes = [NodeState("cpu-1", ()), NodeState("cpu-2", (), unschedulable=True),
...          NodeState("gpu-a", (), taints=(Taint("nvidia.com/gpu", "present"),))]
>>> hosts = broker_hosts([sts], nodes)
>>> hosts.verdict, hosts.eligible
('does-not-fit', ('cpu-1',))
>>> print(hosts.message)
the broker's 3 servers need 3 nodes, one each (required pod anti-affinity on kubernetes.io/hostname); 1 of 3 nodes can take one: cpu-1; not cpu-2 (cordoned), gpu-a (untolerated taint nvidia.com/gpu=present:NoSchedule)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vfcore.cluster import NodeState, Toleration

__all__ = ["BrokerHosts", "broker_hosts", "broker_size_change"]

Verdict = Literal["fits", "does-not-fit", "unknown"]


@dataclass(frozen=True, slots=True)
class BrokerHosts:
    """``needed`` hosts for the broker's servers; the nodes that can take one
    (``eligible``), may (``unknown``: their facts were not readable) or cannot
    (``excluded``: node, why)."""

    needed: int
    eligible: tuple[str, ...]
    unknown: tuple[str, ...]
    excluded: tuple[tuple[str, str], ...]

    @property
    def verdict(self) -> Verdict:
        if len(self.eligible) >= self.needed:
            return "fits"
        if len(self.eligible) + len(self.unknown) >= self.needed:
            return "unknown"
        return "does-not-fit"

    @property
    def message(self) -> str:
        total = len(self.eligible) + len(self.unknown) + len(self.excluded)
        text = (
            f"the broker's {self.needed} servers need {self.needed} nodes, one each (required "
            f"pod anti-affinity on kubernetes.io/hostname); {len(self.eligible)} of {total} "
            f"nodes can take one" + (f": {', '.join(self.eligible)}" if self.eligible else "")
        )
        if self.unknown:
            text += f"; {len(self.unknown)} unknown ({', '.join(self.unknown)})"
        if self.excluded:
            text += "; not " + ", ".join(f"{n} ({why})" for n, why in self.excluded)
        return text

    @property
    def hint(self) -> str:
        return (
            "add or uncordon a node the broker can use, deploy with --broker-replicas 1, or "
            "run the broker elsewhere (--broker URL)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "needed": self.needed,
            "eligible": list(self.eligible),
            "unknown": list(self.unknown),
            "excluded": [{"node": n, "reason": r} for n, r in self.excluded],
        }


def _tolerations(pod: Mapping[str, Any]) -> tuple[Toleration, ...]:
    out = []
    for t in pod.get("tolerations") or ():
        out.append(
            Toleration(
                key=t.get("key"),
                operator=t.get("operator", "Equal"),
                value=t.get("value", ""),
                effect=t.get("effect"),
            )
        )
    return tuple(out)


def _why_not(
    node: NodeState, tolerations: Sequence[Toleration], selector: Mapping[str, str]
) -> str | None:
    if not node.ready:
        return "not Ready"
    if node.unschedulable:
        return "cordoned"
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(
            t.tolerates(taint) for t in tolerations
        ):
            return f"untolerated taint {taint.key}={taint.value}:{taint.effect}"
    labels = dict(node.labels)
    for key, value in sorted(selector.items()):
        if labels.get(key) != value:
            return f"no label {key}={value}"
    return None


def broker_hosts(
    objects: Iterable[Mapping[str, Any]],
    nodes: Iterable[NodeState],
    unreadable: Iterable[str] = (),
) -> BrokerHosts | None:
    """The hosts a rendered clustered broker needs, and the nodes that can be one
    (``None`` when ``objects`` hold no broker StatefulSet with a required anti-affinity)."""
    for obj in objects:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if (
            obj.get("kind") != "StatefulSet"
            or labels.get("app.kubernetes.io/component") != "broker"
        ):
            continue
        spec = obj.get("spec") or {}
        pod = (spec.get("template") or {}).get("spec") or {}
        anti = ((pod.get("affinity") or {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        if not anti:
            return None
        tolerations = _tolerations(pod)
        selector = dict(pod.get("nodeSelector") or {})
        eligible, excluded = [], []
        for node in sorted(nodes, key=lambda n: n.name):
            why = _why_not(node, tolerations, selector)
            if why is not None:
                excluded.append((node.name, why))
            else:
                eligible.append(node.name)
        return BrokerHosts(
            int(spec.get("replicas") or 1),
            tuple(eligible),
            tuple(sorted(unreadable)),
            tuple(excluded),
        )
    return None


def _broker_replicas(objects: Iterable[Mapping[str, Any]]) -> int | None:
    for obj in objects:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if obj.get("kind") == "StatefulSet" and labels.get("app.kubernetes.io/component") == (
            "broker"
        ):
            return int((obj.get("spec") or {}).get("replicas") or 1)
    return None


def broker_size_change(
    objects: Iterable[Mapping[str, Any]], existing: Iterable[Mapping[str, Any]]
) -> tuple[int, int] | None:
    """``(servers now, servers asked)`` when a redeploy would change the size of the run's
    in-cluster broker, else ``None``.

    A run's broker keeps its size: its streams were created with as many replicas as
    it had servers for, and its configuration (the routes, in the run's immutable
    Secret) names every server.

    >>> sts = lambda n: {"kind": "StatefulSet", "metadata": {"labels":
    ...     {"app.kubernetes.io/component": "broker"}}, "spec": {"replicas": n}}
    >>> broker_size_change([sts(3)], [sts(1)]), broker_size_change([sts(3)], [sts(3)])
    ((1, 3), None)
    """
    asked, now = _broker_replicas(objects), _broker_replicas(existing)
    if asked is None or now is None or asked == now:
        return None
    return now, asked
