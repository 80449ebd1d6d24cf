"""Replicas, workloads, GPU demand and autoscaling eligibility: example tables."""

from __future__ import annotations

import pytest

from vfcore import (
    AutoscalingOptions,
    FlowSpec,
    InvalidInputError,
    JoinPolicy,
    NodeSpec,
    autoscaling_rejections,
    gpu_demand,
    node_shapes,
)


def flow(*middle: NodeSpec, flow_type="realtime", producer=None):
    src = producer or NodeSpec("src", "producer", sets_keys=("camera",))
    last = middle[-1].name if middle else "src"
    return FlowSpec("f", flow_type, (src, *middle, NodeSpec("sink", "consumer", (last,))))


def shape(spec, name):
    return next(s for s in node_shapes(spec) if s.name == name)


@pytest.mark.parametrize(
    ("node", "flow_type", "replicas", "workload"),
    [
        (NodeSpec("p", "processor", ("src",), nb_tasks=3), "batch", 3, "job"),
        (NodeSpec("p", "processor", ("src",), nb_tasks=3), "realtime", 3, "deployment"),
        (
            NodeSpec("p", "processor", ("src",), nb_tasks=3, partition_by="camera"),
            "realtime",
            3,
            "statefulset",
        ),
        (NodeSpec("p", "one-task-processor", ("src",), nb_tasks=3), "realtime", 1, "deployment"),
        (
            NodeSpec("p", "one-task-processor", ("src",), nb_tasks=3, partition_by="trace_id"),
            "realtime",
            3,
            "statefulset",
        ),
    ],
    ids=[
        "batch-job",
        "realtime-deployment",
        "partitioned-statefulset",
        "one-task-single",
        "one-task-partitioned",
    ],
)
def test_replicas_and_workload(node, flow_type, replicas, workload):
    s = shape(flow(node, flow_type=flow_type), "p")
    assert (s.replicas, s.workload) == (replicas, workload)


def test_finite_producer_is_a_job_in_realtime():
    finite = NodeSpec("src", "producer", finite=True)
    assert shape(flow(producer=finite), "src").workload == "job"
    assert shape(flow(), "src").workload == "deployment"
    assert shape(flow(), "sink").workload == "deployment"


GPU = {"device_type": "gpu"}


def test_exclusive_demand_totals_and_largest_pod():
    spec = flow(
        NodeSpec("det", "processor", ("src",), nb_tasks=3, gpu_count=2, **GPU),
        NodeSpec("cls", "processor", ("det",), nb_tasks=2, gpu_resource_name="amd.com/gpu", **GPU),
    )
    d = gpu_demand(spec, gpu_mode="exclusive")
    assert dict(d.total) == {"nvidia.com/gpu": 6, "amd.com/gpu": 2}
    assert [p.pod for p in d.pods] == ["det/0", "det/1", "det/2", "cls/0", "cls/1"]
    assert d.largest_pod is not None
    assert (d.largest_pod.pod, dict(d.largest_pod.claims)) == ("det/0", {"nvidia.com/gpu": 2})
    assert d.to_dict()["largest_pod"] == {"nvidia.com/gpu": 2}


def test_deploy_wide_resource_name_and_node_override():
    spec = flow(
        NodeSpec("a", "processor", ("src",), **GPU),
        NodeSpec("b", "processor", ("a",), gpu_resource_name="nvidia.com/mig-1g.10gb", **GPU),
    )
    d = gpu_demand(spec, gpu_resource_name="example.com/gpu")
    assert dict(d.total) == {"example.com/gpu": 1, "nvidia.com/mig-1g.10gb": 1}


def test_shared_demand_has_no_units_only_vram():
    spec = flow(
        NodeSpec("det", "processor", ("src",), nb_tasks=2, gpu_memory_gib=10, **GPU),
        NodeSpec("pose", "processor", ("det",), **GPU),
    )
    d = gpu_demand(spec, gpu_mode="shared")
    assert dict(d.total) == {}
    assert d.declared_gpu_memory_gib == 20
    assert d.total_gpu_memory_gib is None  # pose declares none: unknown, never zero
    assert all(p.slice == "shared" and p.claims == () for p in d.pods)
    assert d.undeclared_memory == ("pose/0",)
    assert d.largest_pod is not None and d.largest_pod.pod == "det/0"


def test_mix_demand_splits_slices_from_whole_cards():
    spec = flow(
        NodeSpec("det", "processor", ("src",), nb_tasks=2, gpu_memory_gib=10, **GPU),
        NodeSpec("big", "processor", ("det",), gpu_count=2, **GPU),
    )
    d = gpu_demand(spec, gpu_mode="mix")
    assert [(p.pod, p.slice) for p in d.pods] == [
        ("det/0", "mig"),
        ("det/1", "mig"),
        ("big/0", "whole"),
    ]
    assert dict(d.total) == {"nvidia.com/gpu": 2}
    assert d.largest_pod is not None and d.largest_pod.pod == "big/0"
    assert d.undeclared_memory == ()  # whole cards need no memory declaration


def test_equal_pods_pick_the_first_name_as_largest():
    spec = flow(
        NodeSpec("b", "processor", ("src",), **GPU), NodeSpec("a", "processor", ("b",), **GPU)
    )
    d = gpu_demand(spec)
    assert d.largest_pod is not None and d.largest_pod.pod == "a/0"


def test_no_gpu_pods():
    d = gpu_demand(flow())
    assert (d.pods, d.total, d.largest_pod) == ((), (), None)


def reasons(spec, name, **opts):
    return [r.code for r in autoscaling_rejections(spec, AutoscalingOptions(**opts))[name]]


@pytest.mark.parametrize(
    ("node", "codes"),
    [
        (NodeSpec("p", "processor", ("src",), nb_tasks=2), []),
        (NodeSpec("p", "processor", ("src",), nb_tasks=2, partition_by="camera"), ["partitioned"]),
        (NodeSpec("p", "processor", ("src",), partition_by="camera"), ["partition-at-one-replica"]),
        (NodeSpec("p", "one-task-processor", ("src",)), ["one-task"]),
        (NodeSpec("p", "processor", ("src",), **GPU), ["gpu-node"]),
    ],
    ids=["eligible", "partitioned", "partition-at-one-replica", "one-task", "gpu"],
)
def test_autoscaling_rejections(node, codes):
    assert reasons(flow(node), "p") == codes


def test_gpu_autoscaling_opt_in():
    spec = flow(NodeSpec("p", "processor", ("src",), **GPU))
    assert reasons(spec, "p", gpu_autoscaling=True) == []


def test_producers_consumers_and_batch_jobs_stay_fixed():
    spec = flow(NodeSpec("p", "processor", ("src",)))
    assert reasons(spec, "src") == ["not-a-processor"]
    assert reasons(spec, "sink") == ["not-a-processor"]
    assert reasons(flow(NodeSpec("p", "processor", ("src",)), flow_type="batch"), "p") == [
        "batch-job"
    ]


def test_single_replica_join_stays_fixed():
    spec = FlowSpec(
        "f",
        "realtime",
        (
            NodeSpec("a", "producer"),
            NodeSpec("b", "producer"),
            NodeSpec("j", "processor", ("a", "b"), join_policy=JoinPolicy(timeout_ms=5)),
            NodeSpec("sink", "consumer", ("j",)),
        ),
    )
    assert reasons(spec, "j") == ["single-replica-join"]


@pytest.mark.parametrize("bad", [0, -1, True, "3"])
def test_max_replicas_must_be_positive(bad):
    with pytest.raises(InvalidInputError, match="invalid-max-replicas"):
        AutoscalingOptions(max_replicas=bad)
