"""Kubernetes JSON → the facts of a :class:`~vfcore.cluster.ClusterSnapshot`, honestly.

What a user can dump with kubectl becomes a snapshot::

    kubectl get nodes -o json            > nodes.json
    kubectl get pods -A -o json          > pods.json
    kubectl get runtimeclasses -o json   > runtimeclasses.json   # optional

or one file: ``kubectl get nodes,pods,runtimeclasses -A -o json > cluster.json``
(a ``List``). Each document may be given parsed (a dict), as text (``str`` or
``bytes``), or as ``None`` when the file is missing. Nothing here reads a file.
:func:`parse_kubernetes` and :func:`parse_list` return :class:`ClusterFacts`;
:meth:`vfcore.cluster.ClusterSnapshot.from_kubernetes`,
:func:`vfcore.cluster.snapshot_from_kubernetes` and
:func:`vfcore.cluster.snapshot_from_list` turn them into a snapshot. This
module knows the node types only (:mod:`vfcore.cluster.nodes`), never the
snapshot, so the two do not import each other.

**Unknown, never empty.** A document that is missing, empty, not JSON, not an
object, a Kubernetes ``Status`` (what a refused request returns), a kubectl
error message, a list of the wrong kind, or a partial list (``metadata.continue``
set) is *unknown*, with a reason naming the file and the cause:

- nodes → ``nodes_unknown=<reason>``, no nodes, and ``Unknown("nodes", reason)``;
- pods → every node gets ``requested=None`` and ``unknown_reason=<reason>``,
  and ``Unknown("pods", reason)`` is listed;
- runtime classes → ``runtime_classes=None``; a missing file adds no unknown
  (the file is optional), a bad one adds ``Unknown("runtimeclasses", reason)``.

An *empty but valid* ``PodList`` (``"items": []``) is a real, known "nothing
is bound".

**Malformed objects** never raise. A node whose name, labels, taints,
conditions, ``spec.unschedulable`` or ``status.allocatable`` cannot be read is
left out of ``nodes`` (it cannot be planned on) and listed as
``Unknown("node/<name>", "<field> = <value> ...")``. A pod that cannot be read
and is bound to node X makes X's occupancy unknown, and is listed as
``Unknown("pod/<ns>/<name>", ...)``; one that cannot be read far enough to tell
whether and where it is bound (not an object, ``spec`` or ``spec.nodeName`` of
the wrong type) may hold any node, so it makes every node's occupancy unknown. A GPU Feature Discovery label with a bad
value leaves that GPU fact ``None`` and is listed; the node stays.

**Pod requests** follow ``resource.PodRequests`` (k8s.io/component-helpers,
1.29+ with native sidecars), per resource:

- a container's request is ``resources.requests``; a resource given only in
  ``resources.limits`` defaults its request to the limit (API defaulting);
- regular containers are summed; a sidecar (an init container with
  ``restartPolicy: Always``) is added to that sum too;
- each ordinary init container needs its own request plus every sidecar
  declared *before* it; the pod needs the max of that and the sum;
- pod-level ``spec.resources`` (cpu, memory, hugepages) replaces the
  aggregate for those resources; ``spec.overhead`` is added last.

Scoring counts cpu and memory differently (``NodeInfo.NonZeroRequested``):
the same aggregate, but every container that requests no cpu / memory *at
all* counts 100m / 200Mi for it — per container, and an explicit ``0`` stays
0. Each node carries that total as ``NodeState.nonzero_requested``
(:func:`.pods.pod_nonzero_requests`); the fit filter never uses it.

Worked example: containers ``cpu 1`` + ``cpu 2``, init container ``cpu 4``,
sidecar ``cpu 500m`` declared first, overhead ``cpu 250m`` → sum
``1 + 2 + 0.5 = 3.5``, init ``4 + 0.5 = 4.5``, max ``4.5``, plus overhead
→ ``4750`` millicores. Only pods bound to a node (``spec.nodeName``) and not in
phase ``Succeeded`` or ``Failed`` count; each adds 1 to ``pods``. Pods bound to
a node that is not in the node list are ignored.

The DRA dumps (``resourceslices.json``, ``deviceclasses.json``,
``resourceclaims.json``, or those kinds in the ``List``) follow the same rules
(:mod:`.dra_objects`: :func:`parse_dra`, :func:`parse_dra_list`).

The package, one concept a module: :mod:`.fields` (reading one field),
:mod:`.pods` (pod requests), :mod:`.gpu_labels` (GPU Feature Discovery
labels), :mod:`.node_objects` (one Node item), :mod:`.documents` (a dump →
its items, or why not) and :mod:`.facts` (assembling :class:`ClusterFacts`).
"""

from vfcore.cluster.kubeparse.dra_objects import parse_dra, parse_dra_list
from vfcore.cluster.kubeparse.facts import ClusterFacts, parse_kubernetes, parse_list
from vfcore.cluster.kubeparse.gpu_labels import gpu_info_from_labels
from vfcore.cluster.kubeparse.pods import NONZERO_DEFAULTS, pod_nonzero_requests, pod_requests

__all__ = [
    "NONZERO_DEFAULTS",
    "ClusterFacts",
    "gpu_info_from_labels",
    "parse_dra",
    "parse_dra_list",
    "parse_kubernetes",
    "parse_list",
    "pod_nonzero_requests",
    "pod_requests",
]
