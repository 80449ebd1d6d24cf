"""The default requests kube-scheduler's scoring uses: 100m cpu and 200Mi memory, per container,
only where a request is absent (an explicit ``0`` stays 0).

Kubernetes: ``PodRequests`` with ``NonMissingContainerRequests`` (``applyNonMissing`` in
``k8s.io/component-helpers/resource/helpers.go``), used for ``NodeInfo.NonZeroRequested`` and by
NodeResourcesFit's score (``calculatePodResourceRequest``); the defaults are
``schedutil.DefaultMilliCPURequest`` and ``DefaultMemoryRequest``. The filter uses real requests.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from vfcore.cluster import NodeState, node, snapshot_from_kubernetes
from vfcore.cluster.kubeparse import NONZERO_DEFAULTS, pod_nonzero_requests, pod_requests
from vfcore.placement.claims import PodRequest
from vfcore.placement.scheduler import DEFAULT_MEMORY_REQUEST, ScoringConfig, node_score
from vfcore.placement.scheduler.scoring import DEFAULT_MILLI_CPU_REQUEST

MI = 2**20
CPU_D, MEM_D = 100, 200 * MI


def c(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **kw: Any):
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **kw}


def pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": list(containers), **spec}}


def test_the_defaults_are_the_schedulers() -> None:
    assert NONZERO_DEFAULTS == {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST}
    assert (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST) == (CPU_D, MEM_D)


@pytest.mark.parametrize(
    ("case", "p", "nonzero"),
    [
        ("one container, no requests", pod(c()), (CPU_D, MEM_D)),
        ("explicit zero cpu stays 0", pod(c({"cpu": "0"})), (0, MEM_D)),
        ("explicit zero both", pod(c({"cpu": "0", "memory": "0"})), (0, 0)),
        ("per container: one asks, one does not", pod(c({"cpu": "1"}), c()), (1100, 2 * MEM_D)),
        ("three containers without requests", pod(c(), c(), c()), (3 * CPU_D, 3 * MEM_D)),
        ("a limit is a request (API defaulting)", pod(c(limits={"cpu": "2"})), (2000, MEM_D)),
        (
            "a GPU-only container still counts cpu and memory",
            pod(c(limits={"nvidia.com/gpu": 1})),
            (CPU_D, MEM_D),
        ),
        (
            "an init container gets defaults too, then the max",
            pod(c({"cpu": "50m", "memory": "10Mi"}), initContainers=[c()]),
            (CPU_D, MEM_D),
        ),
        (
            "a sidecar adds its defaults",
            pod(c({"cpu": "1", "memory": "1Gi"}), initContainers=[c(restartPolicy="Always")]),
            (1000 + CPU_D, 1024 * MI + MEM_D),
        ),
        (
            "pod-level requests replace the aggregate",
            pod(c(), c(), resources={"requests": {"cpu": "3"}}),
            (3000, 2 * MEM_D),
        ),
        ("overhead is added", pod(c(), overhead={"cpu": "250m"}), (CPU_D + 250, MEM_D)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_pod_nonzero_requests(case: str, p: dict[str, Any], nonzero: tuple[int, int]) -> None:
    assert pod_nonzero_requests(p) == nonzero


def test_the_filter_still_uses_the_real_requests() -> None:
    p = pod(c({"cpu": "1"}), c(), c({"cpu": "0"}))
    assert pod_requests(p) == {"cpu": 1000}
    assert pod_nonzero_requests(p) == (1100, 3 * MEM_D)  # the third asks cpu 0, no memory


def _dump(*pods: dict[str, Any]) -> tuple[str, str]:
    n = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n", "labels": {}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "1", "memory": "1000Mi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    items = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "ns"},
            "spec": {**p["spec"], "nodeName": "n"},
            "status": {"phase": "Running"},
        }
        for i, p in enumerate(pods)
    ]
    return (
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [n]}),
        json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
    )


def test_a_snapshot_carries_each_nodes_nonzero_total() -> None:
    snap = snapshot_from_kubernetes(*_dump(pod(c()), pod(c({"cpu": "0", "memory": "0"}))))
    n = snap.node("n")
    assert n.requested_of("cpu") == 0 and n.requested_of("pods") == 2
    assert n.nonzero_requested == (CPU_D, MEM_D)
    assert (n.nonzero_of("cpu"), n.nonzero_of("memory")) == (CPU_D, MEM_D)
    assert n.as_empty().nonzero_of("cpu") == 0


def test_scoring_counts_the_bound_pods_defaults() -> None:
    """A bound pod without requests takes 100m and 200Mi in LeastAllocated.

    Node: 1 cpu, 1000Mi; incoming pod 100m, 100Mi. cpu: (1000 - (100 + 100)) × 100 / 1000 = 80;
    memory: (1000 - (200 + 100)) × 100 / 1000 = 70; fit = (80 + 70) / 2 = 75. Counting the bound
    pod as 0 (its real requests) would give (90 + 90) / 2 = 90.
    """
    snap = snapshot_from_kubernetes(*_dump(pod(c())))
    incoming = PodRequest("w/0", "w", 0, (("cpu", 100), ("memory", 100 * MI)))
    assert node_score(incoming, snap.node("n"), config=ScoringConfig()).fit == 75
    explicit_zero = snapshot_from_kubernetes(*_dump(pod(c({"cpu": "0", "memory": "0"}))))
    assert node_score(incoming, explicit_zero.node("n"), config=ScoringConfig()).fit == 90


def test_a_flow_pod_without_a_cpu_request_is_one_container_without_one() -> None:
    """A flow pod asking only for a GPU scores as 100m cpu and 200Mi memory.

    Empty node of 1 cpu, 1000Mi: cpu (1000 - 100) × 100 / 1000 = 90; memory
    (1000 - 200) × 100 / 1000 = 80; fit = 85.
    """
    empty: NodeState = node(
        "n", allocatable={"cpu": 1000, "memory": 1000 * MI, "nvidia.com/gpu": 1}
    )
    gpu_only = PodRequest("w/0", "w", 0, (("nvidia.com/gpu", 1),))
    assert node_score(gpu_only, empty, config=ScoringConfig()).fit == 85
