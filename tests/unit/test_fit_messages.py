"""kube-scheduler v1.36's ``FailedScheduling`` messages, word for word, from vfcore's fit rule.

Where the words and the counting come from (Kubernetes sources, kube-scheduler v1.36):

- the filter order is the default profile's, ``getDefaultPlugins`` in
  ``pkg/scheduler/apis/config/v1/default_plugins.go``: NodeUnschedulable,
  NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, …;
- a node is rejected by its *first* failing filter plugin: the framework's
  ``RunFilterPlugins`` (``pkg/scheduler/framework/runtime/framework.go``)
  returns the first non-success status and runs no later filter;
- ``node(s) were unschedulable``: ``ErrReasonUnschedulable`` in
  ``pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go``
  (``Filter``; a pod tolerating ``node.kubernetes.io/unschedulable:NoSchedule``
  passes);
- ``node(s) had untolerated taint(s)``: ``TaintToleration.Filter`` in
  ``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go``. v1.36
  no longer names the taint (earlier releases wrote
  ``node(s) had untolerated taint {key: value}``); this wording was read off a
  real kube-scheduler v1.36.2. A NotReady node fails here, by the
  ``node.kubernetes.io/not-ready:NoSchedule`` taint the node lifecycle
  controller puts on it;
- ``node(s) didn't match Pod's node affinity/selector``: ``ErrReasonPod`` in
  ``pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go``;
- ``Too many pods`` and ``Insufficient <resource>``: ``fitsRequest`` in
  ``pkg/scheduler/framework/plugins/noderesources/fit.go``, which returns
  *every* insufficient resource of the node, and ``Fit.Filter`` keeps them all
  as the status's reasons;
- the line: ``FitError.Error()`` (``pkg/scheduler/framework``) counts each
  reason string over the nodes' statuses, formats ``"<count> <reason>"``, sorts
  those strings with ``sort.Strings`` and joins them with ``", "`` after
  ``0/N nodes are available:``. The ``preemption: …`` suffix DefaultPreemption
  appends is not modelled (out of scope).
"""

from __future__ import annotations

import pytest

from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, NodeState, Taint, node
from vfcore.cluster.nodes import Toleration
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.fit import (
    UNTOLERATED_TAINT,
    Ineligible,
    Insufficient,
    never_reasons,
    reasons_on,
    scheduler_message,
    static_reasons,
)
from vfcore.placement.scheduler import simulate

GPU = "nvidia.com/gpu"
LABELS = dict([GPU_PRESENT_LABEL])


def gpu_pod(
    gpus: int = 1, *, tolerations: tuple[Toleration, ...] = (GPU_TOLERATION,), **extra: int
):
    return PodRequest(
        pod="w/0",
        node="w",
        replica=0,
        requests=tuple(sorted({GPU: gpus, **extra}.items())),
        node_selector=(GPU_PRESENT_LABEL,),
        tolerations=tolerations,
        slice="whole",
    )


def gpu_node(name: str, gpus: int = 4, **kw: object) -> NodeState:
    alloc = {GPU: gpus, "cpu": 8000, "memory": 32 * 2**30, **kw.pop("alloc", {})}  # type: ignore[dict-item]
    labels = kw.pop("labels", LABELS)
    return node(name, allocatable=alloc, labels=labels, **kw)  # type: ignore[arg-type]


CORDONED = {"unschedulable": True}
NOT_READY = {"ready": False}
TAINTED = {"taints": [Taint("dedicated", "infra", "NoSchedule")]}
UNLABELLED = {"labels": {}}
FULL = {"requested": {GPU: 4}}

# (case, nodes, pod, kube-scheduler's message)
CASES = [
    (
        "one node per filter; the not-ready node counts as a taint",
        [
            gpu_node("a", **CORDONED),
            gpu_node("b", **NOT_READY),
            gpu_node("c", **TAINTED),
            gpu_node("d", **UNLABELLED),
            gpu_node("e", **FULL),
        ],
        gpu_pod(),
        "0/5 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were unschedulable, "
        "2 node(s) had untolerated taint(s).",
    ),
    (
        "cordoned, tainted, not ready, unlabelled and full: counted once, as unschedulable",
        [gpu_node("a", **CORDONED, **NOT_READY, **TAINTED, **UNLABELLED, **FULL)],
        gpu_pod(),
        "0/1 nodes are available: 1 node(s) were unschedulable.",
    ),
    (
        "tainted, unlabelled and full: the taint only",
        [gpu_node("a", **TAINTED, **UNLABELLED, **FULL)],
        gpu_pod(),
        "0/1 nodes are available: 1 node(s) had untolerated taint(s).",
    ),
    (
        "unlabelled and full: the selector only",
        [gpu_node("a", **UNLABELLED, **FULL)],
        gpu_pod(),
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
    ),
    (
        "a NoExecute taint filters too; PreferNoSchedule does not",
        [
            gpu_node("a", taints=[Taint("maintenance", "", "NoExecute")]),
            gpu_node("b", taints=[Taint("spot", "yes", "PreferNoSchedule")], **FULL),
        ],
        gpu_pod(),
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "1 node(s) had untolerated taint(s).",
    ),
    (
        "a node short of cpu and memory counts under both (fitsRequest reports every resource)",
        [gpu_node("a", alloc={"cpu": 1000, "memory": 2**30}), gpu_node("b", **FULL)],
        gpu_pod(cpu=2000, memory=2 * 2**30),
        "0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, "
        "1 Insufficient nvidia.com/gpu.",
    ),
    (
        "at its pod limit and out of GPUs: both",
        [gpu_node("a", alloc={"pods": 3}, requested={GPU: 4, "pods": 3})],
        gpu_pod(),
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu, 1 Too many pods.",
    ),
    (
        "counts sort as strings: 12 before 2",
        [gpu_node(f"g{i:02}", **FULL) for i in range(12)]
        + [gpu_node("t1", **TAINTED), gpu_node("t2", **TAINTED)],
        gpu_pod(),
        "0/14 nodes are available: 12 Insufficient nvidia.com/gpu, "
        "2 node(s) had untolerated taint(s).",
    ),
    (
        "the GPU taint untolerated (a pod without the toleration)",
        [gpu_node(n, taints=[Taint(GPU, "present", "NoSchedule")]) for n in "abc"]
        + [gpu_node("d", **FULL)],
        gpu_pod(tolerations=()),
        "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "3 node(s) had untolerated taint(s).",
    ),
]


@pytest.mark.parametrize(("case", "nodes", "pod", "want"), CASES, ids=[c[0] for c in CASES])
def test_the_fit_rule_writes_kube_schedulers_message(case, nodes, pod, want) -> None:  # type: ignore[no-untyped-def]
    assert scheduler_message(len(nodes), [reasons_on(pod, n) for n in nodes]) == want


@pytest.mark.parametrize(("case", "nodes", "pod", "want"), CASES, ids=[c[0] for c in CASES])
def test_the_scheduler_model_strands_with_the_same_counts(case, nodes, pod, want) -> None:  # type: ignore[no-untyped-def]
    sim = simulate([pod], ClusterSnapshot.of(nodes))
    (stranded,) = sim.stranded
    counts = want.split(": ", 1)[1].removesuffix(".")
    assert stranded.reason == f"0/{len(nodes)} nodes fit {pod.pod}: {counts}"


def test_a_pod_tolerating_the_condition_taints_passes_those_filters() -> None:
    """NodeUnschedulable lets a pod through that tolerates ``node.kubernetes.io/unschedulable``;
    TaintToleration one that tolerates ``node.kubernetes.io/not-ready`` (as DaemonSet pods do)."""
    tolerate_all = (Toleration(key=None, operator="Exists"),)
    cordoned_not_ready = gpu_node("a", **CORDONED, **NOT_READY)
    assert reasons_on(gpu_pod(tolerations=tolerate_all), cordoned_not_ready) == ()
    unschedulable_only = (
        GPU_TOLERATION,
        Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),
    )
    assert reasons_on(gpu_pod(tolerations=unschedulable_only), cordoned_not_ready) == (
        Ineligible(UNTOLERATED_TAINT),
    )
    not_ready_only = (
        GPU_TOLERATION,
        Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoSchedule"),
    )
    assert reasons_on(gpu_pod(tolerations=not_ready_only), gpu_node("b", **NOT_READY)) == ()
    # The controller's NoExecute not-ready taint, tolerated for 300 s by every pod, is not enough:
    default_toleration = (
        GPU_TOLERATION,
        Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
    )
    assert reasons_on(gpu_pod(tolerations=default_toleration), gpu_node("c", **NOT_READY)) == (
        Ineligible(UNTOLERATED_TAINT),
    )


def test_never_reasons_and_static_reasons_stop_at_the_first_filter_too() -> None:
    both = gpu_node("a", gpus=2, **TAINTED, **UNLABELLED)
    assert static_reasons(gpu_pod(4), both) == (UNTOLERATED_TAINT,)
    assert never_reasons(gpu_pod(4), both) == (Ineligible(UNTOLERATED_TAINT),)
    small = gpu_node("b", gpus=2, alloc={"cpu": 1000})
    assert never_reasons(gpu_pod(4, cpu=2000), small) == (
        Insufficient("cpu", 2000, 0, 1000),
        Insufficient(GPU, 4, 0, 2),
    )


def test_vfcores_own_rules_come_after_every_kube_scheduler_filter() -> None:
    from vfcore.cluster import GpuInfo

    pool = GpuInfo(count=4, memory_mib=81920, sharing="time-slicing", replicas=4)
    full_pool = gpu_node("a", gpus=16, requested={GPU: 15}, gpu=pool)
    # kube-scheduler rejects it for capacity first: its words, not the sharing rule
    assert [r.message for r in reasons_on(gpu_pod(2), full_pool)] == ["Insufficient nvidia.com/gpu"]
    free_pool = gpu_node("b", gpus=16, gpu=pool)
    assert [r.message for r in reasons_on(gpu_pod(2), free_pool)] == [
        "node(s) share GPUs by time-slicing: a pod needing 2 nvidia.com/gpu gets no whole cards"
    ]
