"""kubectl JSON → ClusterSnapshot: quantities, the pod request rule, GFD labels, unknowns, examples.

Every table row's id says the behaviour it pins. Unknown is its own value: a
missing, empty, unparsable or refused document is never an empty cluster.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from vfcore import InvalidInputError
from vfcore.cluster import (
    ClusterSnapshot,
    GpuInfo,
    NodeState,
    RuntimeClassInfo,
    Taint,
    Unknown,
    snapshot_from_kubernetes,
    snapshot_from_list,
)
from vfcore.cluster.kubeparse import gpu_info_from_labels, pod_requests
from vfcore.quantity import MAX_UNITS, canonical_units, parse_quantity

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"
GPU = "nvidia.com/gpu"
GI = 2**30
MI = 2**20

# -- builders -------------------------------------------------------------------


def k_node(
    name: str,
    *,
    allocatable: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    ready: str | None = "True",
    unschedulable: bool | None = None,
) -> dict[str, Any]:
    """A Node as ``kubectl get nodes -o json`` prints it (trimmed)."""
    spec: dict[str, Any] = {}
    if taints is not None:
        spec["taints"] = taints
    if unschedulable is not None:
        spec["unschedulable"] = unschedulable
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
        "status": {
            "allocatable": dict(
                allocatable
                if allocatable is not None
                else {"cpu": "8", "memory": "32Gi", "pods": "110"}
            ),
            "conditions": conditions,
        },
    }


def k_container(
    requests: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
    *,
    name: str = "main",
    restart_policy: str | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = dict(requests)
    if limits is not None:
        resources["limits"] = dict(limits)
    c: dict[str, Any] = {"name": name, "image": "busybox", "resources": resources}
    if restart_policy is not None:
        c["restartPolicy"] = restart_policy
    return c


def k_pod(
    name: str,
    node: str | None,
    containers: list[dict[str, Any]],
    *,
    namespace: str = "ml",
    phase: str = "Running",
    init: list[dict[str, Any]] | None = None,
    overhead: Mapping[str, Any] | None = None,
    pod_resources: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if node is not None:
        spec["nodeName"] = node
    if init is not None:
        spec["initContainers"] = init
    if overhead is not None:
        spec["overhead"] = dict(overhead)
    if pod_resources is not None:
        spec["resources"] = dict(pod_resources)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"phase": phase},
    }


def k_list(items: list[dict[str, Any]], kind: str = "List") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": ""}, "items": items}


def snapshot(nodes: object, pods: object, runtime: object = None) -> ClusterSnapshot:
    """Parse, checking that no input is mutated and that the result is deterministic."""
    before = copy.deepcopy((nodes, pods, runtime))
    first = snapshot_from_kubernetes(nodes, pods, runtime)
    assert (nodes, pods, runtime) == before, "inputs must never be mutated"
    assert snapshot_from_kubernetes(nodes, pods, runtime) == first
    return first


def one_node_with(*pods: dict[str, Any], allocatable: Mapping[str, Any] | None = None) -> NodeState:
    alloc = allocatable or {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"}
    snap = snapshot(k_list([k_node("n", allocatable=alloc)]), k_list(list(pods)))
    assert snap.unknowns == ()
    return snap.node("n")


def load_example(name: str) -> ClusterSnapshot:
    folder = EXAMPLES / name
    runtime = folder / "runtimeclasses.json"
    return snapshot(
        (folder / "nodes.json").read_text(encoding="utf-8"),
        (folder / "pods.json").read_bytes(),
        runtime.read_text(encoding="utf-8") if runtime.exists() else None,
    )


# -- quantities -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "text", "units"),
    [
        ("cpu", "500m", 500),
        ("memory", "1Gi", GI),
        ("cpu", "2.5", 2500),
        ("pods", "1e3", 1000),
        ("memory", "100M", 100_000_000),
        ("cpu", "0.1", 100),
        ("memory", "1.5Gi", 1610612736),
        ("cpu", "1", 1000),
        ("memory", "128974848", 128974848),
        ("memory", "129e6", 129_000_000),
        ("memory", "123Mi", 123 * MI),
        ("cpu", "250u", 1),  # rounded up, as Kubernetes does
        (GPU, "8", 8),
        (GPU, 8, 8),
    ],
    ids=lambda v: str(v),
)
def test_quantities_convert_to_canonical_units(resource: str, text: object, units: int) -> None:
    assert canonical_units(resource, text) == units


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5 Gi", True, False, None, "1Gib", "--1", [1]])
def test_bad_quantities_raise_invalid_quantity(bad: object) -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_quantity(bad)
    assert info.value.rule == "invalid-quantity"


def test_a_json_number_quantity_is_read_exactly() -> None:
    # 0.1 as a binary float is a hair above 1/10; read through its decimal form it is 100m.
    pod = k_pod("p", "n", [k_container({"cpu": 0.1, "memory": 1024})])
    assert one_node_with(pod).requested_of("cpu") == 100
    assert one_node_with(pod).requested_of("memory") == 1024


# -- the pod request rule -------------------------------------------------------


def test_containers_are_summed_per_resource() -> None:
    pod = k_pod(
        "p",
        "n",
        [k_container({"cpu": "1", "memory": "1Gi"}), k_container({"cpu": "500m", GPU: "2"})],
    )
    assert pod_requests(pod) == {"cpu": 1500, "memory": GI, GPU: 2}


def test_init_containers_are_maxed_not_summed() -> None:
    pod = k_pod(
        "p",
        "n",
        [k_container({"cpu": "8", "memory": "64Gi"})],
        init=[
            k_container({"cpu": "16", "memory": "16Gi"}, name="fetch"),
            k_container({"cpu": "2", "memory": "80Gi"}, name="warm"),
        ],
    )
    assert pod_requests(pod) == {"cpu": 16000, "memory": 80 * GI}


def test_an_init_container_smaller_than_the_sum_changes_nothing() -> None:
    pod = k_pod(
        "p",
        "n",
        [k_container({"cpu": "2"}), k_container({"cpu": "2"})],
        init=[k_container({"cpu": "3"})],
    )
    assert pod_requests(pod) == {"cpu": 4000}


def test_sidecars_add_to_the_sum_and_to_later_init_containers_only() -> None:
    # order: init A (3 cpu), sidecar S (1 cpu), init B (3 cpu); app 1 cpu.
    # sum = app 1 + S 1 = 2; A alone = 3; B runs beside S = 4 → 4.
    pod = k_pod(
        "p",
        "n",
        [k_container({"cpu": "1"})],
        init=[
            k_container({"cpu": "3"}, name="a"),
            k_container({"cpu": "1"}, name="s", restart_policy="Always"),
            k_container({"cpu": "3"}, name="b"),
        ],
    )
    assert pod_requests(pod) == {"cpu": 4000}


def test_a_sidecar_counts_as_a_regular_container_when_no_init_container_is_bigger() -> None:
    pod = k_pod(
        "p",
        "n",
        [k_container({"cpu": "2", "memory": "1Gi"})],
        init=[
            k_container({"cpu": "500m", "memory": "256Mi"}, name="proxy", restart_policy="Always")
        ],
    )
    assert pod_requests(pod) == {"cpu": 2500, "memory": GI + 256 * MI}


def test_the_docstring_worked_example() -> None:
    pod = k_pod(
        "p",
        "n",
        [k_container({"cpu": "1"}), k_container({"cpu": "2"})],
        init=[
            k_container({"cpu": "500m"}, name="s", restart_policy="Always"),
            k_container({"cpu": "4"}, name="i"),
        ],
        overhead={"cpu": "250m"},
    )
    assert pod_requests(pod) == {"cpu": 4750}


def test_overhead_is_added_after_the_max() -> None:
    pod = k_pod(
        "p",
        "n",
        [k_container({"cpu": "1", "memory": "1Gi"})],
        init=[k_container({"cpu": "2"})],
        overhead={"cpu": "250m", "memory": "120Mi"},
    )
    assert pod_requests(pod) == {"cpu": 2250, "memory": GI + 120 * MI}


def test_a_limit_without_a_request_requests_the_limit() -> None:
    pod = k_pod("p", "n", [k_container(None, {GPU: "4", "cpu": "2", "memory": "8Gi"})])
    assert pod_requests(pod) == {"cpu": 2000, "memory": 8 * GI, GPU: 4}


def test_an_explicit_request_wins_over_the_limit() -> None:
    pod = k_pod("p", "n", [k_container({"cpu": "1"}, {"cpu": "4", "memory": "2Gi"})])
    assert pod_requests(pod) == {"cpu": 1000, "memory": 2 * GI}


def test_pod_level_resources_replace_cpu_and_memory_but_not_gpus() -> None:
    pod = k_pod(
        "p",
        "n",
        [k_container({"cpu": "1", "memory": "1Gi"}, {GPU: "1"}), k_container({"cpu": "1"})],
        pod_resources={"requests": {"cpu": "3"}, "limits": {"memory": "4Gi"}},
    )
    assert pod_requests(pod) == {"cpu": 3000, "memory": 4 * GI, GPU: 1}


def test_zero_requests_are_left_out() -> None:
    assert pod_requests(k_pod("p", "n", [k_container({"cpu": "0", GPU: "0"})])) == {}


def test_a_pod_without_resources_requests_nothing_but_still_counts_as_a_pod() -> None:
    node = one_node_with(k_pod("p", "n", [{"name": "main", "image": "busybox"}]))
    assert node.requested == (("pods", 1),)


def test_pod_requests_raises_invalid_pod_naming_the_field() -> None:
    with pytest.raises(InvalidInputError) as info:
        pod_requests(k_pod("p", "n", [k_container({"cpu": "lots"})]))
    assert info.value.rule == "invalid-pod"
    assert "spec.containers[0].resources.requests[\"cpu\"] = 'lots'" in str(info.value)


def test_bound_pods_are_summed_per_node_with_the_pod_count() -> None:
    node = one_node_with(
        k_pod("a", "n", [k_container({"cpu": "1", GPU: "3"})]),
        k_pod("b", "n", [k_container({"cpu": "2"}, {GPU: "2"})], phase="Pending"),
        k_pod("c", "n", [k_container({"memory": "1Gi"})], phase="Unknown"),
    )
    assert node.requested == (("cpu", 3000), ("memory", GI), (GPU, 5), ("pods", 3))
    assert node.free_of(GPU) == 3


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_finished_pods_hold_nothing(phase: str) -> None:
    node = one_node_with(k_pod("done", "n", [k_container({GPU: "8"})], phase=phase))
    assert node.requested == (("pods", 0),)
    assert node.free_of(GPU) == 8


def test_unbound_pods_hold_nothing() -> None:
    node = one_node_with(k_pod("pending", None, [k_container({GPU: "8"})], phase="Pending"))
    assert node.free_of(GPU) == 8


def test_pods_bound_to_a_node_not_in_the_list_name_it_as_unreadable() -> None:
    pods = k_list(
        [
            k_pod("elsewhere", "gone", [k_container({GPU: "8"})]),
            k_pod("also", "gone", [k_container({"cpu": "lots"})]),
            k_pod("here", "n", [k_container({GPU: "1"})]),
        ]
    )
    snap = snapshot(k_list([k_node("n", allocatable={GPU: "8", "pods": "110"})]), pods)
    assert snap.node("n").free_of(GPU) == 7  # the listed node's occupancy is still known
    assert [u.name for u in snap.unreadable_nodes] == ["gone"]
    assert snap.unreadable_nodes[0].bound is None  # nothing says how big it is
    reason = snap.unreadable_nodes[0].reason
    assert "pod/ml/also, pod/ml/elsewhere" in reason and "2 pod(s)" in reason
    assert Unknown("node/gone", reason) in snap.unknowns
    assert not snap.is_fully_known


def test_a_request_equal_to_allocatable_leaves_exactly_zero_free() -> None:
    node = one_node_with(k_pod("all", "n", [k_container({GPU: "8", "cpu": "64"})]))
    assert node.free_of(GPU) == 0
    assert node.free_of("cpu") == 0


def test_an_empty_pod_list_is_a_known_idle_cluster() -> None:
    snap = snapshot(k_list([k_node("n")], "NodeList"), k_list([], "PodList"))
    assert snap.is_fully_known
    assert snap.unknowns == ()
    assert snap.node("n").requested == (("pods", 0),)


def test_the_class_method_delegates_here() -> None:
    nodes, pods = k_list([k_node("n")]), k_list([k_pod("p", "n", [k_container({"cpu": "1"})])])
    assert ClusterSnapshot.from_kubernetes(nodes, pods) == snapshot_from_kubernetes(nodes, pods)


# -- nodes ----------------------------------------------------------------------


def test_node_facts_are_read() -> None:
    doc = k_list(
        [
            k_node(
                "g",
                allocatable={"cpu": "95500m", "memory": "1Ti", "pods": "110", GPU: "8"},
                labels={"nvidia.com/gpu.present": "true", "pool": "a"},
                taints=[
                    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                    {
                        "key": "dedicated",
                        "effect": "NoExecute",
                        "timeAdded": "2025-01-01T00:00:00Z",
                    },
                ],
                unschedulable=True,
            ),
            k_node("nr", ready="False"),
            k_node("nc", ready=None),
        ],
        "NodeList",
    )
    snap = snapshot(doc, k_list([]))
    g = snap.node("g")
    assert dict(g.allocatable) == {"cpu": 95500, "memory": 2**40, "pods": 110, GPU: 8}
    assert g.ready and g.unschedulable
    assert g.label("pool") == "a"
    assert g.taints == (
        Taint("dedicated", "", "NoExecute"),
        Taint("nvidia.com/gpu", "present", "NoSchedule"),
    )
    assert not snap.node("nr").ready
    assert not snap.node("nc").ready  # no Ready condition → not ready
    assert snap.node("nr").gpu is None


# -- GPU Feature Discovery labels -----------------------------------------------


def test_plain_gpu_labels() -> None:
    info = gpu_info_from_labels(
        {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.memory": "81559",
            "nvidia.com/gpu.count": "4",
            "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.sharing-strategy": "none",
            "nvidia.com/mig.capable": "true",
        }
    )
    assert info == GpuInfo(
        product="NVIDIA-H100-80GB-HBM3",
        memory_mib=81559,
        count=4,
        sharing="none",
        replicas=1,
        mig_capable=True,
    )


def test_time_slicing_replicas() -> None:
    info = gpu_info_from_labels(
        {
            "nvidia.com/gpu.product": "Tesla-T4-SHARED",
            "nvidia.com/gpu.memory": "15360",
            "nvidia.com/gpu.count": "2",
            "nvidia.com/gpu.replicas": "10",
            "nvidia.com/gpu.sharing-strategy": "time-slicing",
        },
        {GPU: 20},
    )
    assert info is not None
    assert (info.sharing, info.replicas, info.count, info.memory_mib) == (
        "time-slicing",
        10,
        2,
        15360,
    )


def test_mps() -> None:
    info = gpu_info_from_labels(
        {"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "4"}
    )
    assert info is not None
    assert (info.sharing, info.replicas) == ("mps", 4)


def test_older_gfd_with_replicas_but_no_strategy_label_means_time_slicing() -> None:
    info = gpu_info_from_labels({"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.count": "1"})
    assert info is not None
    assert (info.sharing, info.replicas) == ("time-slicing", 4)


MIXED_LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/gpu.memory": "81920",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/mig.capable": "true",
    "nvidia.com/mig.strategy": "mixed",
    "nvidia.com/mig-1g.10gb.count": "7",
    "nvidia.com/mig-1g.10gb.memory": "9728",
    "nvidia.com/mig-3g.40gb.count": "2",
    "nvidia.com/mig-3g.40gb.memory": "40192",
}


def test_mig_mixed_profiles_come_from_the_count_labels() -> None:
    info = gpu_info_from_labels(
        MIXED_LABELS, {GPU: 5, "nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-3g.40gb": 2}
    )
    assert info is not None
    assert info.mig_strategy == "mixed"
    assert info.mig_profiles == (("1g.10gb", 7), ("3g.40gb", 2))
    assert info.memory_mib == 81920  # gpu.memory is MiB even under mixed


def test_mig_profiles_fall_back_to_allocatable_without_gfd() -> None:
    info = gpu_info_from_labels({}, {"nvidia.com/mig-2g.20gb": 3, GPU: 0})
    assert info is not None
    assert info.mig_profiles == (("2g.20gb", 3),)
    assert info.mig_strategy is None and info.product is None


def test_mig_labels_disagreeing_with_allocatable_are_reported() -> None:
    labels = {**MIXED_LABELS, "nvidia.com/gpu.present": "true"}
    alloc = {
        "cpu": "96",
        "pods": "110",
        GPU: "5",
        "nvidia.com/mig-1g.10gb": "5",
        "nvidia.com/mig-3g.40gb": "2",
    }
    snap = snapshot(k_list([k_node("m", allocatable=alloc, labels=labels)]), k_list([]))
    node = snap.node("m")
    assert node.gpu is not None and dict(node.gpu.mig_profiles) == {"1g.10gb": 7, "3g.40gb": 2}
    assert node.allocatable_of("nvidia.com/mig-1g.10gb") == 5  # the scheduler's truth is kept
    [problem] = snap.unknowns
    assert problem.what == "node/m"
    assert "nvidia.com/mig-1g.10gb.count = 7" in problem.reason
    assert "allocatable nvidia.com/mig-1g.10gb = 5" in problem.reason


def test_time_sliced_mig_profiles_agree_with_allocatable_times_replicas() -> None:
    labels = {
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig-1g.10gb.count": "7",
        "nvidia.com/mig-1g.10gb.replicas": "2",
    }
    alloc = {"pods": "110", "nvidia.com/mig-1g.10gb": "14"}
    snap = snapshot(k_list([k_node("m", allocatable=alloc, labels=labels)]), k_list([]))
    assert snap.unknowns == ()
    assert snap.node("m").gpu == GpuInfo(mig_strategy="mixed", mig_profiles=(("1g.10gb", 7),))


def test_mig_single_memory_is_nvml_mib_kept_as_is() -> None:
    # NVML's memorySizeMB is MiB: a 1g.5gb is 4864 MiB (4.75 GiB, as nvidia-smi mig -lgip shows)
    info = gpu_info_from_labels(
        {
            "nvidia.com/mig.strategy": "single",
            "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb",
            "nvidia.com/gpu.memory": "4864",
            "nvidia.com/gpu.count": "56",
        }
    )
    assert info is not None
    assert info.memory_mib == 4864
    assert info.count == 56
    assert info.mig_profiles == ()


def test_an_invalid_single_mig_configuration_is_reported() -> None:
    labels = {
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-INVALID",
        "nvidia.com/gpu.count": "0",
    }
    snap = snapshot(k_list([k_node("m", labels=labels)]), k_list([]))
    assert snap.node("m").gpu is not None
    assert [u.what for u in snap.unknowns] == ["node/m"]
    assert "invalid MIG configuration" in snap.unknowns[0].reason


@pytest.mark.parametrize(
    ("label", "value", "fact"),
    [
        ("nvidia.com/gpu.memory", "80GB", "memory_mib"),
        ("nvidia.com/gpu.count", "-1", "count"),
        ("nvidia.com/mig.capable", "yes", "mig_capable"),
    ],
)
def test_a_bad_gfd_label_leaves_the_fact_unknown_and_keeps_the_node(
    label: str, value: str, fact: str
) -> None:
    labels = {"nvidia.com/gpu.product": "X", label: value}
    snap = snapshot(k_list([k_node("g", labels=labels)]), k_list([]))
    gpu = snap.node("g").gpu
    assert gpu is not None and getattr(gpu, fact) is None
    [problem] = snap.unknowns
    assert problem.what == "node/g" and label in problem.reason and value in problem.reason


def test_no_gpu_labels_and_no_gpu_allocatable_means_no_gpu() -> None:
    assert gpu_info_from_labels({"kubernetes.io/os": "linux"}, {"cpu": 4000}) is None
    assert gpu_info_from_labels({}, {GPU: 0}) is None


def test_gpu_allocatable_without_gfd_gives_unknown_gpu_facts() -> None:
    assert gpu_info_from_labels({}, {GPU: 4}) == GpuInfo()


# -- whole documents that cannot be read: unknown, never empty ------------------

FORBIDDEN = {
    "apiVersion": "v1",
    "kind": "Status",
    "metadata": {},
    "status": "Failure",
    "message": 'pods is forbidden: User "jane" cannot list resource "pods" in API group "" at the cluster scope',
    "reason": "Forbidden",
    "details": {"kind": "pods"},
    "code": 403,
}

BAD_POD_DOCS: list[tuple[str, object, str]] = [
    ("missing", None, "pods.json is missing"),
    ("empty string", "", "pods.json is empty"),
    ("whitespace", "  \n\t", "pods.json is empty"),
    ("empty bytes", b"", "pods.json is empty"),
    (
        "not JSON",
        "<html>502 Bad Gateway</html>",
        "pods.json is not JSON: Expecting value at line 1",
    ),
    (
        "truncated JSON",
        '{"kind": "PodList", "items": [',
        "pods.json is not JSON: Expecting value at line 1",
    ),
    ("a JSON array", "[]", "pods.json is not a Kubernetes object: it holds a JSON array"),
    ("a JSON number", 42, "pods.json is not a Kubernetes object: it holds a number"),
    (
        "a Status object",
        FORBIDDEN,
        'the API refused the pod listing: Forbidden: pods is forbidden: User "jane" cannot list',
    ),
    (
        "a Status as text",
        json.dumps(FORBIDDEN),
        "the API refused the pod listing: Forbidden: pods is forbidden",
    ),
    (
        "kubectl's stderr captured",
        'Error from server (Forbidden): pods is forbidden: User "jane" cannot list resource "pods"\n',
        'the API refused the pod listing: Forbidden: pods is forbidden: User "jane"',
    ),
    (
        "a kubectl error",
        "error: You must be logged in to the server (Unauthorized)",
        "pods.json holds a kubectl error, not JSON: error: You must be logged in",
    ),
    ("a NodeList", {"kind": "NodeList", "items": []}, "pods.json holds a NodeList, not a PodList"),
    ("a single Pod", k_pod("p", "n", []), "pods.json holds one Pod, not a PodList"),
    (
        "a List of nodes",
        k_list([k_node("n")]),
        "pods.json holds a List of Node with no Pod items",
    ),
    ("no items", {"kind": "PodList"}, "pods.json has no items list"),
    (
        "one page of many",
        {"kind": "PodList", "metadata": {"continue": "eyJ2Ijo"}, "items": []},
        "pods.json is one page of a longer list",
    ),
    ("invalid UTF-8", b"\xff\xff\xff", "pods.json is not text"),
]


@pytest.mark.parametrize(
    ("doc", "reason"), [(d, r) for _, d, r in BAD_POD_DOCS], ids=[i for i, _, _ in BAD_POD_DOCS]
)
def test_an_unreadable_pod_list_makes_every_node_unknown_never_idle(
    doc: object, reason: str
) -> None:
    nodes = k_list([k_node("a"), k_node("b", allocatable={GPU: "8", "pods": "110"})])
    snap = snapshot(nodes, doc)
    assert [n.name for n in snap.nodes] == ["a", "b"]
    assert snap.nodes_unknown is None
    assert not snap.is_fully_known
    for node in snap.nodes:
        assert node.requested is None
        assert node.free_of(GPU) is None
        assert node.unknown_reason is not None and node.unknown_reason.startswith(reason)
    [pods_unknown] = [u for u in snap.unknowns if u.what == "pods"]
    assert pods_unknown.reason == snap.nodes[0].unknown_reason


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        (None, "nodes.json is missing"),
        ("", "nodes.json is empty"),
        (
            "{",
            "nodes.json is not JSON: Expecting property name enclosed in double quotes at line 1",
        ),
        (
            {
                **FORBIDDEN,
                "message": 'nodes is forbidden: User "jane" cannot list resource "nodes"',
            },
            'the API refused the node listing: Forbidden: nodes is forbidden: User "jane"',
        ),
        ({"kind": "PodList", "items": []}, "nodes.json holds a PodList, not a NodeList"),
    ],
    ids=["missing", "empty", "not JSON", "refused", "wrong kind"],
)
def test_an_unreadable_node_list_makes_the_nodes_unknown(doc: object, reason: str) -> None:
    snap = snapshot(doc, k_list([]))
    assert snap.nodes == ()
    assert snap.nodes_unknown is not None and snap.nodes_unknown.startswith(reason)
    assert Unknown("nodes", snap.nodes_unknown) in snap.unknowns
    assert not snap.is_fully_known


def test_both_lists_unreadable_lists_both_reasons() -> None:
    snap = snapshot(None, "")
    assert snap.unknowns == (
        Unknown("nodes", "nodes.json is missing"),
        Unknown("pods", "pods.json is empty"),
    )


def test_an_empty_node_list_is_a_known_empty_cluster() -> None:
    snap = snapshot(k_list([], "NodeList"), k_list([], "PodList"))
    assert snap.nodes == () and snap.nodes_unknown is None and snap.unknowns == ()


def test_utf16_from_powershell_and_a_bom_are_read() -> None:
    text = json.dumps(k_list([k_node("n")]))
    pods = json.dumps(k_list([]))
    snap = snapshot(text.encode("utf-16"), ("\ufeff" + pods).encode("utf-8"))
    assert snap.is_fully_known and [n.name for n in snap.nodes] == ["n"]


def test_kind_less_items_of_a_raw_api_list_are_read() -> None:
    node = k_node("n")
    del node["kind"]
    pod = k_pod("p", "n", [k_container({"cpu": "1"})])
    del pod["kind"]
    snap = snapshot({"kind": "NodeList", "items": [node]}, {"kind": "PodList", "items": [pod]})
    assert snap.node("n").requested_of("cpu") == 1000


# -- runtime classes ------------------------------------------------------------


def test_runtime_classes_are_read_and_missing_means_unknown() -> None:
    nodes, pods = k_list([k_node("n")]), k_list([])
    rc = k_list(
        [
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": "nvidia"},
                "handler": "nvidia",
            },
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": "kata"},
                "handler": "kata-qemu",
            },
        ]
    )
    assert snapshot(nodes, pods, rc).runtime_classes == (
        RuntimeClassInfo("kata", "kata-qemu"),
        RuntimeClassInfo("nvidia", "nvidia"),
    )
    missing = snapshot(nodes, pods, None)
    assert missing.runtime_classes is None and missing.unknowns == ()
    assert snapshot(nodes, pods, k_list([], "RuntimeClassList")).runtime_classes == ()


def test_a_refused_runtime_class_listing_is_unknown_with_its_reason() -> None:
    refused = {**FORBIDDEN, "message": "runtimeclasses.node.k8s.io is forbidden"}
    snap = snapshot(k_list([k_node("n")]), k_list([]), refused)
    assert snap.runtime_classes is None
    assert snap.unknowns == (
        Unknown(
            "runtimeclasses",
            "the API refused the runtime class listing: Forbidden: runtimeclasses.node.k8s.io is forbidden",
        ),
    )


# -- malformed objects: reported with name and field, never a traceback --------


@pytest.mark.parametrize(
    ("mutate", "what", "reason"),
    [
        (
            lambda n: n["status"]["allocatable"].update(cpu="abc"),
            "node/bad",
            "status.allocatable[\"cpu\"] = 'abc' is not a Kubernetes quantity",
        ),
        (
            lambda n: n["status"]["allocatable"].update({GPU: "-2"}),
            "node/bad",
            "status.allocatable[\"nvidia.com/gpu\"] = '-2' is negative",
        ),
        (lambda n: n["status"].pop("allocatable"), "node/bad", "status.allocatable is missing"),
        (
            lambda n: n["status"].update(allocatable=["cpu", "4"]),
            "node/bad",
            "status.allocatable is a JSON array, not an object",
        ),
        (
            lambda n: n["spec"].update(taints=[{"key": "k", "effect": "Sometimes"}]),
            "node/bad",
            "spec.taints[0].effect = 'Sometimes' is not one of NoSchedule, PreferNoSchedule, NoExecute",
        ),
        (
            lambda n: n["spec"].update(taints=[{"effect": "NoSchedule"}]),
            "node/bad",
            "spec.taints[0].key is missing",
        ),
        (
            lambda n: n["metadata"]["labels"].update(zone=3),
            "node/bad",
            'metadata.labels["zone"] = 3 is a number, not a string',
        ),
        (
            lambda n: n["spec"].update(unschedulable="yes"),
            "node/bad",
            "spec.unschedulable = 'yes' is not a boolean",
        ),
        (
            lambda n: n["status"].update(conditions={"Ready": "True"}),
            "node/bad",
            "status.conditions is an object, not a list",
        ),
        (lambda n: n["metadata"].pop("name"), "nodes.json items[1]", "metadata.name is missing"),
        (lambda n: n.update(metadata=None), "nodes.json items[1]", "metadata is missing"),
    ],
    ids=[
        "allocatable cpu abc",
        "negative gpu",
        "no allocatable",
        "allocatable a list",
        "unknown taint effect",
        "taint without key",
        "numeric label",
        "unschedulable a string",
        "conditions an object",
        "no name",
        "no metadata",
    ],
)
def test_a_malformed_node_is_left_out_and_reported(
    mutate: Callable[[dict[str, Any]], object], what: str, reason: str
) -> None:
    bad = k_node("bad")
    mutate(bad)
    pods = k_list([k_pod("p", "good", [k_container({"cpu": "1"})]), k_pod("q", "bad", [])])
    snap = snapshot(k_list([k_node("good"), bad]), pods)
    assert [n.name for n in snap.nodes] == ["good"]
    assert snap.node("good").requested_of("cpu") == 1000
    nameless = what.startswith("nodes.json")
    # a node without a name cannot be matched with pod q, bound to "bad": "bad" is named too
    orphan = Unknown(
        "node/bad",
        "is not in the node list, yet 1 pod(s) are bound to it (pod/ml/q): the node list "
        "may be partial or stale, so what this node holds is unknown",
    )
    expected = [Unknown(what, reason), *([orphan] if nameless else [])]
    assert snap.unknowns == tuple(sorted(expected, key=lambda u: (u.what, u.reason)))
    # the node exists: it is unreadable, never absent. k_node gives no status.capacity, so an
    # unreadable allocatable entry is unbounded (MAX_UNITS); anything else bounds nothing.
    names = {u.name: u for u in snap.unreadable_nodes}
    unreadable = names[what.removeprefix("node/") if not nameless else what]
    entry = reason.partition('status.allocatable["')[2].partition('"]')[0]
    if entry:
        assert unreadable.bound is not None
        assert unreadable.bound.allocatable_of(entry) == MAX_UNITS
        assert unreadable.bound.allocatable_of("memory") == 32 * GI  # readable entries stand
    else:
        assert unreadable.bound is None
    assert not snap.is_fully_known


@pytest.mark.parametrize(
    ("mutate", "what", "field"),
    [
        (
            lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu="lots"),
            "pod/ml/broken",
            "spec.containers[0].resources.requests[\"cpu\"] = 'lots' is not a Kubernetes quantity",
        ),
        (
            lambda p: p["spec"]["containers"][0]["resources"].update(limits={GPU: [1]}),
            "pod/ml/broken",
            'spec.containers[0].resources.limits["nvidia.com/gpu"] = [1] is not a Kubernetes quantity',
        ),
        (
            lambda p: p["spec"].update(
                initContainers=[{"resources": {"requests": {"memory": "1 Gi"}}}]
            ),
            "pod/ml/broken",
            "spec.initContainers[0].resources.requests[\"memory\"] = '1 Gi' is not a Kubernetes quantity",
        ),
        (
            lambda p: p["spec"].update(overhead={"cpu": "-1"}),
            "pod/ml/broken",
            "spec.overhead[\"cpu\"] = '-1' is negative",
        ),
        (lambda p: p["metadata"].pop("name"), "pods.json items[1]", "metadata.name is missing"),
        (lambda p: p.pop("metadata"), "pods.json items[1]", "metadata is missing"),
        (
            lambda p: p["spec"].update(containers={"main": {}}),
            "pod/ml/broken",
            "spec.containers is an object, not a list",
        ),
        (
            lambda p: p["spec"]["containers"].append("sidecar"),
            "pod/ml/broken",
            "spec.containers[1] is a string, not an object",
        ),
    ],
    ids=[
        "cpu lots",
        "gpu limit a list",
        "init memory with a space",
        "negative overhead",
        "no name",
        "no metadata",
        "containers an object",
        "container a string",
    ],
)
def test_a_malformed_bound_pod_makes_its_node_unknown(
    mutate: Callable[[dict[str, Any]], object], what: str, field: str
) -> None:
    bad = k_pod("broken", "x", [k_container({"cpu": "1"})])
    mutate(bad)
    pods = k_list([k_pod("fine", "y", [k_container({"cpu": "2"})]), bad])
    snap = snapshot(k_list([k_node("x"), k_node("y")]), pods)
    x, y = snap.node("x"), snap.node("y")
    assert x.requested is None and x.unknown_reason == f"{what} cannot be read: {field}"
    assert y.requested_of("cpu") == 2000 and y.unknown_reason is None
    assert snap.unknowns == (Unknown(what, f"{field}; node x's occupancy is unknown"),)


def test_a_malformed_finished_or_unbound_pod_changes_nothing() -> None:
    finished = k_pod("old", "x", [k_container({"cpu": "lots"})], phase="Succeeded")
    unbound = k_pod("new", None, [k_container({"cpu": "lots"})], phase="Pending")
    snap = snapshot(k_list([k_node("x")]), k_list([finished, unbound]))
    assert snap.is_fully_known and snap.unknowns == ()


def test_non_object_items_are_reported_and_a_non_object_pod_may_hold_any_node() -> None:
    snap = snapshot(k_list([k_node("x"), 7, "node"]), k_list([None]))  # type: ignore[list-item]
    assert [n.name for n in snap.nodes] == ["x"]
    anywhere = "whether and where it is bound is unknown, so every node's occupancy is unknown"
    assert snap.unknowns == (
        Unknown("nodes.json items[1]", "is a number, not a Kubernetes object"),
        Unknown("nodes.json items[2]", "is a string, not a Kubernetes object"),
        Unknown("pods.json items[0]", f"is null, not a Kubernetes object; {anywhere}"),
    )
    x = snap.node("x")
    assert x.requested is None
    assert (
        x.unknown_reason == "1 pod(s) that cannot be read may be bound to it (pods.json items[0])"
    )


def _running(name: str, node: str) -> dict[str, Any]:
    return k_pod(name, node, [k_container({"cpu": "1"})])


def _set(path: tuple[str, ...], value: object) -> Callable[[dict[str, Any]], object]:
    def change(pod: dict[str, Any]) -> object:
        here = pod
        for key in path[:-1]:
            here = here[key]
        here[path[-1]] = value
        return pod

    return change


@pytest.mark.parametrize(
    ("mutate", "what", "problem"),
    [
        (_set(("spec", "nodeName"), 5), "pod/ml/lost", "spec.nodeName = 5 is a number, not a string"),
        (_set(("spec", "nodeName"), ["x"]), "pod/ml/lost", "spec.nodeName = ['x'] is a JSON array, not a string"),
        (_set(("spec",), [1]), "pod/ml/lost", "spec is a JSON array, not an object"),
        (_set(("spec",), "x"), "pod/ml/lost", "spec is a string, not an object"),
        (lambda p: 42, "pods.json items[1]", "is a number, not a Kubernetes object"),
        (lambda p: [p], "pods.json items[1]", "is a JSON array, not a Kubernetes object"),
    ],
    ids=[
        "nodeName a number",
        "nodeName a list",
        "spec a list",
        "spec a string",
        "item a number",
        "item a list",
    ],
)  # fmt: skip
def test_a_running_pod_whose_node_cannot_be_read_makes_every_node_unknown(
    mutate: Callable[[dict[str, Any]], object], what: str, problem: str
) -> None:
    lost = mutate(_running("lost", "x"))
    pods = k_list([_running("fine", "y"), lost], kind="PodList")  # type: ignore[list-item]
    snap = snapshot(k_list([k_node("x"), k_node("y")], kind="NodeList"), pods)
    for node in (snap.node("x"), snap.node("y")):
        assert node.requested is None and not node.occupancy_known
        assert node.unknown_reason == f"1 pod(s) that cannot be read may be bound to it ({what})"
    assert (
        Unknown(
            what,
            f"{problem}; whether and where it is bound is unknown, so every node's occupancy is unknown",
        )
        in snap.unknowns
    )


def test_a_finished_pod_or_one_known_unbound_holds_nothing_whatever_else_is_broken() -> None:
    finished = _set(("spec", "nodeName"), 5)(k_pod("old", "x", [], phase="Failed"))
    unbound_broken_phase = _set(("status", "phase"), 7)(k_pod("new", None, []))
    snap = snapshot(k_list([k_node("x")]), k_list([finished, unbound_broken_phase]))  # type: ignore[list-item]
    assert snap.is_fully_known and snap.node("x").requested_of("pods") == 0


def test_a_bound_pod_whose_phase_cannot_be_read_makes_its_node_unknown() -> None:
    pod = _set(("status", "phase"), 7)(_running("odd", "x"))
    snap = snapshot(k_list([k_node("x"), k_node("y")]), k_list([pod]))  # type: ignore[list-item]
    assert snap.node("x").requested is None and snap.node("y").occupancy_known
    assert snap.node("x").unknown_reason == (
        "pod/ml/odd cannot be read: status.phase = 7 is a number, not a string"
    )


def test_an_item_of_a_pod_list_with_a_kind_that_is_not_a_string_is_read_as_a_pod() -> None:
    pod = _running("odd", "x")
    pod["kind"] = 5
    snap = snapshot(k_list([k_node("x")]), k_list([pod], kind="PodList"))
    assert snap.node("x").requested_of("cpu") == 1000


def test_a_node_listed_twice_differently_is_left_out() -> None:
    snap = snapshot(
        k_list([k_node("x"), k_node("x", allocatable={"cpu": "1", "pods": "9"}), k_node("y")]),
        k_list([]),
    )
    assert [n.name for n in snap.nodes] == ["y"]
    assert snap.unknowns == (
        Unknown("node/x", "is listed twice with different contents; left out"),
    )
    # which version holds is unknown: the node is unreadable and nothing bounds it
    assert [(u.name, u.bound) for u in snap.unreadable_nodes] == [("x", None)]
    twice = snapshot(k_list([k_node("x"), k_node("x")]), k_list([]))
    assert [n.name for n in twice.nodes] == ["x"] and twice.unknowns == ()


GARBAGE: list[object] = [
    {"kind": "NodeList", "items": [{"metadata": {"name": 3}}]},
    {"kind": "NodeList", "items": [{"metadata": {"name": "n", "labels": []}, "status": {}}]},
    {
        "kind": "NodeList",
        "items": [{"metadata": {"name": "n"}, "spec": [], "status": {"allocatable": {}}}],
    },
    {
        "kind": "NodeList",
        "items": [{"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": None}}}],
    },
    {
        "kind": "NodeList",
        "items": [{"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": 1e400}}}],
    },
    {
        "kind": "NodeList",
        "items": [{"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "1e99"}}}],
    },
    {
        "kind": "NodeList",
        "items": [{"metadata": {"name": "n"}, "status": {"allocatable": {}, "conditions": [1]}}],
    },
    {"kind": "NodeList", "items": None},
    {"kind": 5, "items": []},
    {"kind": "Status"},
    "[" * 100_000,
    "null",
    b"\x00\x01",
]


@pytest.mark.parametrize("doc", GARBAGE, ids=[f"garbage-{i}" for i in range(len(GARBAGE))])
def test_garbage_never_raises(doc: object) -> None:
    pods = k_list([k_pod("p", "n", [{"resources": {"requests": {"cpu": {"a": 1}}}}])])
    snap = snapshot(doc, pods)
    snap2 = snapshot(k_list([k_node("n")]), doc)
    assert not (snap.is_fully_known and snap.nodes)
    assert json.dumps(snap.to_dict()) and json.dumps(snap2.to_dict())
    assert snapshot_from_list(doc) is not None


# -- determinism ------------------------------------------------------------------


def test_item_order_changes_nothing() -> None:
    nodes = json.loads((EXAMPLES / "gpu-pool" / "nodes.json").read_text(encoding="utf-8"))
    pods = json.loads((EXAMPLES / "gpu-pool" / "pods.json").read_text(encoding="utf-8"))
    base = snapshot(nodes, pods)
    rng = random.Random(7)
    for _ in range(5):
        rng.shuffle(nodes["items"])
        rng.shuffle(pods["items"])
        assert snapshot(nodes, pods) == base
        assert json.dumps(snapshot(nodes, pods).to_dict()) == json.dumps(base.to_dict())


# -- the example dumps ----------------------------------------------------------


def free_gpus(snap: ClusterSnapshot) -> dict[str, int | None]:
    return {n.name: n.free_of(GPU) for n in snap.nodes}


def test_example_gpu_pool() -> None:
    snap = load_example("gpu-pool")
    assert snap.is_fully_known and snap.unknowns == ()
    assert [n.name for n in snap.nodes] == [
        "cpu-1",
        "cpu-2",
        "gpu-a100-1",
        "gpu-a100-2",
        "gpu-h100-1",
        "gpu-h100-2",
    ]
    assert free_gpus(snap) == {
        "cpu-1": 0,
        "cpu-2": 0,
        "gpu-a100-1": 3,  # train-llama-0 holds 5
        "gpu-a100-2": 5,  # train-resnet-0 holds 3
        "gpu-h100-1": 1,  # finetune-7b-0 holds 3
        "gpu-h100-2": 4,  # the Succeeded eval job holds nothing; train-big-0 is unbound
    }
    cpu1, cpu2 = snap.node("cpu-1"), snap.node("cpu-2")
    assert dict(cpu1.allocatable) == {
        "cpu": 16000,
        "ephemeral-storage": 448925346037,
        "hugepages-2Mi": 0,
        "memory": 64 * GI,
        "pods": 110,
    }
    assert cpu1.gpu is None and cpu1.taints == ()
    assert cpu1.requested == (("cpu", 100), ("memory", 70 * MI), ("pods", 1))
    assert cpu2.requested == (("cpu", 2010), ("memory", 8 * GI + 50 * MI), ("pods", 1))
    # the init container (16 cpu, 16Gi) is maxed against the app (8 cpu, 64Gi)
    h1 = snap.node("gpu-h100-1")
    assert h1.requested == (("cpu", 16000), ("memory", 64 * GI), (GPU, 3), ("pods", 1))
    assert h1.allocatable_of("cpu") == 64000 and h1.allocatable_of("memory") == 512 * GI
    assert snap.node("gpu-h100-2").requested == (("pods", 0),)
    a1 = snap.node("gpu-a100-1")
    assert a1.allocatable_of("cpu") == 96000 and a1.allocatable_of("memory") == 1024 * GI
    assert a1.taints == (Taint("nvidia.com/gpu", "present", "NoSchedule"),)
    assert a1.label("nvidia.com/gpu.present") == "true"
    assert a1.gpu == GpuInfo(
        product="NVIDIA-A100-SXM4-80GB", memory_mib=81920, count=8, mig_capable=True
    )
    assert snap.node("gpu-h100-2").gpu == GpuInfo(
        product="NVIDIA-H100-80GB-HBM3", memory_mib=81559, count=4, mig_capable=True
    )
    assert snap.runtime_classes == (RuntimeClassInfo("nvidia", "nvidia"),)


def test_example_fragmented_pool_has_nine_free_gpus_but_no_four() -> None:
    snap = load_example("fragmented")
    assert snap.is_fully_known and snap.unknowns == ()
    free = [n.free_of(GPU) for n in snap.nodes]
    assert free == [3, 3, 2, 1]
    assert sum(f or 0 for f in free) == 9
    assert max(f or 0 for f in free) < 4
    assert [n.requested_of("pods") for n in snap.nodes] == [1, 2, 2, 3]
    assert all(n.allocatable_of(GPU) == 8 for n in snap.nodes)


def test_example_refused_pods_is_unknown_with_the_apis_message() -> None:
    refused = load_example("refused-pods")
    pool = load_example("gpu-pool")
    reason = (
        'the API refused the pod listing: Forbidden: pods is forbidden: User "system:serviceaccount:'
        'ci:capacity-planner" cannot list resource "pods" in API group "" at the cluster scope'
    )
    assert refused.unknowns == (Unknown("pods", reason),)
    assert [n.name for n in refused.nodes] == [n.name for n in pool.nodes]
    for node, same in zip(refused.nodes, pool.nodes, strict=True):
        assert node.requested is None and node.unknown_reason == reason
        assert node.as_empty() == same.as_empty()


def test_example_mig_mixed() -> None:
    snap = load_example("mig-mixed")
    assert snap.is_fully_known and snap.unknowns == ()
    a, b = snap.node("mig-a"), snap.node("mig-b")
    assert a.gpu is not None and b.gpu is not None
    assert (a.gpu.mig_strategy, a.gpu.mig_profiles) == ("mixed", (("1g.10gb", 7),))
    assert (b.gpu.mig_strategy, b.gpu.mig_profiles) == ("mixed", (("3g.40gb", 2),))
    assert a.gpu.memory_mib == 81920 and a.gpu.count == 8
    assert a.free_of("nvidia.com/mig-1g.10gb") == 4
    assert a.free_of(GPU) == 7
    assert b.free_of("nvidia.com/mig-3g.40gb") == 1
    assert b.free_of(GPU) == 3


def test_example_single_file_list() -> None:
    text = (EXAMPLES / "single-file.json").read_text(encoding="utf-8")
    snap = snapshot_from_list(text, source="single-file.json")
    assert snap == snapshot_from_list(json.loads(text), source="single-file.json")
    assert snap.is_fully_known and snap.unknowns == ()
    assert free_gpus(snap) == {"gpu-1": 2, "worker-1": 0}
    assert snap.node("worker-1").requested == (("cpu", 1000), ("memory", GI), ("pods", 2))
    assert snap.runtime_classes == (RuntimeClassInfo("nvidia", "nvidia"),)
    gpu = snap.node("gpu-1").gpu
    assert gpu is not None and (gpu.product, gpu.memory_mib) == ("NVIDIA-A10G", 23028)


def test_a_list_without_pods_means_occupancy_unknown_not_idle() -> None:
    doc = json.loads((EXAMPLES / "single-file.json").read_text(encoding="utf-8"))
    doc["items"] = [i for i in doc["items"] if i["kind"] != "Pod"]
    snap = snapshot_from_list(doc, source="cluster.json")
    assert [n.name for n in snap.nodes] == ["gpu-1", "worker-1"]
    assert all(n.requested is None for n in snap.nodes)
    [why] = snap.unknowns
    assert why.what == "pods" and why.reason.startswith("cluster.json holds no Pod items")


def test_a_list_without_nodes_means_nodes_unknown() -> None:
    doc = json.loads((EXAMPLES / "single-file.json").read_text(encoding="utf-8"))
    doc["items"] = [i for i in doc["items"] if i["kind"] != "Node"]
    snap = snapshot_from_list(doc)
    assert snap.nodes == () and snap.nodes_unknown == "cluster.json holds no Node items"


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        (None, "cluster.json is missing"),
        ("", "cluster.json is empty"),
        (FORBIDDEN, "the API refused the node and pod listing: Forbidden: pods is forbidden"),
        (k_list([], "NodeList"), "cluster.json is not a List of nodes and pods"),
        (k_list([]), "cluster.json holds no Node items"),
    ],
    ids=["missing", "empty", "refused", "a NodeList", "an empty List"],
)
def test_an_unreadable_single_file_makes_everything_unknown(doc: object, reason: str) -> None:
    snap = snapshot_from_list(doc)
    assert snap.nodes == () and snap.nodes_unknown is not None
    assert snap.nodes_unknown.startswith(reason)
    assert {u.what for u in snap.unknowns} == {"nodes", "pods"}


def test_kubeparse_and_the_snapshot_do_not_import_each_other() -> None:
    """nodes <- kubeparse <- snapshot, one way, at every level (function-level imports too)."""
    import ast

    cluster = Path(__file__).resolve().parents[2] / "src" / "vfcore" / "cluster"

    def imported(module: str) -> set[str]:
        """What ``module`` (a module, or a package and its modules) imports from outside itself."""
        package = cluster / module
        files = sorted(package.glob("*.py")) if package.is_dir() else [cluster / f"{module}.py"]
        found: set[str] = set()
        for path in files:
            for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(n, ast.ImportFrom) and n.module:
                    found.add(n.module)
                elif isinstance(n, ast.Import):
                    found.update(a.name for a in n.names)
        inside = f"vfcore.cluster.{module}"
        return {
            m
            for m in found
            if (m.startswith("vfcore.cluster") or m == "vfcore")
            and not (package.is_dir() and (m == inside or m.startswith(inside + ".")))
        }

    assert imported("nodes") == set()
    assert imported("dra") == {"vfcore.cluster.nodes"}  # the DRA types sit beside the node types
    assert imported("kubeparse") == {"vfcore.cluster.nodes", "vfcore.cluster.dra"}
    assert imported("snapshot") == {
        "vfcore.cluster.kubeparse",
        "vfcore.cluster.nodes",
        "vfcore.cluster.dra",
    }
    assert ClusterSnapshot.from_kubernetes(None, None).nodes_unknown == "nodes.json is missing"
