"""Whether a pod fits a node, and why not — NodeResourcesFit and friends, as data.

The filters follow kube-scheduler: a node that is not Ready or is cordoned is
skipped; the pod's node selector must match the node's labels; every taint
with effect ``NoSchedule`` or ``NoExecute`` must be tolerated; and for every
resource the pod requests, ``request <= allocatable - requested``, plus one
more pod within the node's ``pods`` limit. Reasons use the scheduler's words
so they read like ``kubectl describe`` output, and many reasons become one
sorted line::

    0/12 nodes fit detector/3: 3 node(s) had untolerated taint {gpu: dedicated}, 9 Insufficient nvidia.com/gpu
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from vfcore.cluster import NodeState
from vfcore.placement.claims import PodRequest
from vfcore.quantity import PODS

__all__ = [
    "NOT_READY",
    "SELECTOR_MISMATCH",
    "TOO_MANY_PODS",
    "UNSCHEDULABLE",
    "eligibility_reasons",
    "fits",
    "resource_reasons",
    "summarise",
]

NOT_READY = "node(s) were not ready"
UNSCHEDULABLE = "node(s) were unschedulable"
SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
_HARD_EFFECTS = ("NoSchedule", "NoExecute")


def eligibility_reasons(pod: PodRequest, node: NodeState) -> tuple[str, ...]:
    """Reasons, other than capacity, that keep ``pod`` off ``node`` (empty: eligible)."""
    out: list[str] = []
    if not node.ready:
        out.append(NOT_READY)
    if node.unschedulable:
        out.append(UNSCHEDULABLE)
    if pod.node_selector:
        labels = dict(node.labels)
        if any(labels.get(k) != v for k, v in pod.node_selector):
            out.append(SELECTOR_MISMATCH)
    for taint in node.taints:
        if taint.effect in _HARD_EFFECTS and not any(t.tolerates(taint) for t in pod.tolerations):
            out.append(f"node(s) had untolerated taint {taint.describe()}")
            break
    return tuple(out)


def resource_reasons(
    pod: PodRequest, node: NodeState, extra: Mapping[str, int] | None = None
) -> tuple[str, ...]:
    """``Insufficient <resource>`` / ``Too many pods`` for ``pod`` on ``node``.

    ``extra`` is what pods already placed by the caller (a plan, a simulation)
    take on top of the node's own ``requested``. A node whose occupancy is
    unknown is judged as if nothing were bound; callers bracket unknowns.
    """
    add = extra or {}
    out: list[str] = []
    used_pods = (node.requested_of(PODS) or 0) + add.get(PODS, 0)
    if used_pods + 1 > node.allocatable_of(PODS):
        out.append(TOO_MANY_PODS)
    for resource, units in pod.requests:
        free = (
            node.allocatable_of(resource)
            - (node.requested_of(resource) or 0)
            - add.get(resource, 0)
        )
        if units > free:
            out.append(f"Insufficient {resource}")
    return tuple(out)


def fits(pod: PodRequest, node: NodeState, extra: Mapping[str, int] | None = None) -> bool:
    return not eligibility_reasons(pod, node) and not resource_reasons(pod, node, extra)


def summarise(pod: str, total_nodes: int, reasons_per_node: Iterable[Iterable[str]]) -> str:
    """The scheduler's one-line form: ``0/3 nodes fit p/0: 1 Too many pods, 2 Insufficient cpu``."""
    counts: Counter[str] = Counter()
    fitting = 0
    for reasons in reasons_per_node:
        distinct = sorted(set(reasons))
        if not distinct:
            fitting += 1
        counts.update(distinct)
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    text = f"{fitting}/{total_nodes} nodes fit {pod}"
    return f"{text}: {', '.join(parts)}" if parts else text
