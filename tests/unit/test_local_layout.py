"""The local layout (vfcore.runtime.layout): what a local run starts, may grow to, and routes.

Tables: replica bounds per node kind with and without autoscaling (and GPU
autoscaling), BATCH and REALTIME; pod names and slot numbering; routing per
edge kind; owners agree with vfcore.owner_of; devices agree with assign_devices.
"""

from __future__ import annotations

import copy
import json

import pytest

from vfcore import FlowSpec, InvalidInputError, NodeSpec, owner_of, partition_of, pod_name
from vfcore.runtime.devices import DeviceRequest, GpuDevice, assign_devices
from vfcore.runtime.layout import (
    DEFAULT_REALTIME_KEEP,
    LOCAL_WAIVED_REASONS,
    LayoutOptions,
    LocalLayout,
    local_layout,
)

GIB = 1024


def flow(flow_type: str, *middle: NodeSpec) -> FlowSpec:
    """src → the middle nodes (each reading src) → sink reading every middle node."""
    sink_parents = tuple(n.name for n in middle) or ("src",)
    return FlowSpec(
        "f",
        flow_type,  # type: ignore[arg-type]
        (
            NodeSpec("src", "producer"),
            *middle,
            NodeSpec("sink", "consumer", sink_parents),
        ),
    )


def layout_of(spec: FlowSpec, options: LayoutOptions | None = None, **kw: object) -> LocalLayout:
    """local_layout, checking that it leaves its inputs alone and that to_dict is JSON."""
    before = copy.deepcopy(spec)
    out = local_layout(spec, options, **kw)  # type: ignore[arg-type]
    assert spec == before
    json.dumps(out.to_dict())
    return out


def proc(name: str, **kw: object) -> NodeSpec:
    return NodeSpec(name, kw.pop("kind", "processor"), ("src",), **kw)  # type: ignore[arg-type]


OFF = LayoutOptions()
ON = LayoutOptions(autoscale=True, max_replicas=6)
ON_GPU = LayoutOptions(autoscale=True, gpu_autoscaling=True, max_replicas=6)

# (id, flow type, node, options, (replicas, min, max), scalable, reason codes)
BOUNDS = [
    ("competing processor, autoscaling off: fixed at nb_tasks",
     "realtime", proc("p", nb_tasks=3), OFF, (3, 3, 3), False, ()),
    ("competing processor, autoscaling on: nb_tasks up to max_replicas",
     "realtime", proc("p", nb_tasks=3), ON, (3, 3, 6), True, ()),
    ("competing processor, BATCH: scales locally (batch-job is waived)",
     "batch", proc("p", nb_tasks=2), ON, (2, 2, 6), True, ()),
    ("nb_tasks above max_replicas: the bound never drops below nb_tasks",
     "realtime", proc("p", nb_tasks=8), ON, (8, 8, 8), True, ()),
    ("nb_tasks equal to max_replicas: scalable, bound equal",
     "realtime", proc("p", nb_tasks=6), ON, (6, 6, 6), True, ()),
    ("partitioned processor: fixed, one owner per replica",
     "realtime", proc("p", nb_tasks=4, partition_by="trace_id"), ON, (4, 4, 4), False,
     ("partitioned",)),
    ("partition_by at one replica: fixed",
     "realtime", proc("p", nb_tasks=1, partition_by="trace_id"), ON, (1, 1, 1), False,
     ("partition-at-one-replica",)),
    ("one-task processor: one worker, fixed",
     "realtime", proc("p", kind="one-task-processor", nb_tasks=4), ON, (1, 1, 1), False,
     ("one-task",)),
    ("partitioned one-task processor: nb_tasks owners, fixed",
     "realtime", proc("p", kind="one-task-processor", nb_tasks=3, partition_by="trace_id"), ON,
     (3, 3, 3), False, ("partitioned",)),
    ("GPU processor without gpu_autoscaling: fixed",
     "realtime", proc("p", nb_tasks=2, gpu_count=1, device_type="gpu"), ON, (2, 2, 2), False, ("gpu-node",)),
    ("GPU processor with gpu_autoscaling: scales",
     "realtime", proc("p", nb_tasks=2, gpu_count=1, device_type="gpu"), ON_GPU, (2, 2, 6), True, ()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("flow_type", "node", "options", "bounds", "scalable", "codes"),
    [pytest.param(*row[1:], id=row[0]) for row in BOUNDS],
)
def test_replica_bounds_per_node_kind(
    flow_type: str,
    node: NodeSpec,
    options: LayoutOptions,
    bounds: tuple[int, int, int],
    scalable: bool,
    codes: tuple[str, ...],
) -> None:
    layout = layout_of(flow(flow_type, node), options)
    p = layout.node("p")
    assert (p.replicas, p.min_replicas, p.max_replicas) == bounds
    assert p.scalable is scalable
    assert tuple(r.code for r in p.scaling_reasons) == codes
    assert len(p.pods) == p.max_replicas


@pytest.mark.parametrize("options", [OFF, ON, ON_GPU], ids=["off", "on", "on with gpu"])
@pytest.mark.parametrize("flow_type", ["batch", "realtime"])
def test_producers_and_consumers_run_one_replica_and_never_scale(
    options: LayoutOptions, flow_type: str
) -> None:
    layout = layout_of(flow(flow_type, proc("p", nb_tasks=2)), options)
    for name, code in (("src", "not-a-processor"), ("sink", "not-a-processor")):
        node = layout.node(name)
        assert (node.replicas, node.min_replicas, node.max_replicas) == (1, 1, 1)
        assert not node.scalable
        assert [r.code for r in node.scaling_reasons] == [code]


def test_autoscaling_off_scales_nothing_but_still_says_why_a_node_could_not() -> None:
    layout = layout_of(flow("realtime", proc("p", nb_tasks=2), proc("q", partition_by="k")))
    assert not any(node.scalable for node in layout.nodes)
    assert layout.node("p").scaling_reasons == ()
    assert [r.code for r in layout.node("q").scaling_reasons] == ["partition-at-one-replica"]


def test_the_waived_reasons_are_exactly_batch_job() -> None:
    assert frozenset({"batch-job"}) == LOCAL_WAIVED_REASONS
    layout = layout_of(flow("batch", proc("p", nb_tasks=2)), ON)
    assert "batch-job" not in {r.code for n in layout.nodes for r in n.scaling_reasons}


def test_an_unpartitioned_join_stays_single() -> None:
    spec = FlowSpec(
        "f",
        "realtime",
        (
            NodeSpec("a", "producer"),
            NodeSpec("b", "producer"),
            NodeSpec("j", "processor", ("a", "b")),
            NodeSpec("sink", "consumer", ("j",)),
        ),
    )
    j = layout_of(spec, ON).node("j")
    assert (j.min_replicas, j.max_replicas, j.scalable) == (1, 1, False)
    assert "single-replica-join" in {r.code for r in j.scaling_reasons}


# -- pods and slots -------------------------------------------------------------------


def test_pods_are_named_by_pod_name_and_slots_number_the_flow_in_node_order() -> None:
    spec = flow(
        "realtime", proc("det", nb_tasks=2), proc("trk", nb_tasks=3, partition_by="trace_id")
    )
    layout = layout_of(spec, LayoutOptions(autoscale=True, max_replicas=4))
    rows = [(pod.name, pod.replica, pod.slot, pod.owner) for n in layout.nodes for pod in n.pods]
    assert rows == [
        ("src/0", 0, 0, 0),
        ("det/0", 0, 1, 0),  # competing: every replica reads the shared buffer 0
        ("det/1", 1, 2, 0),
        ("det/2", 2, 3, 0),  # slots up to max_replicas exist before any replica starts
        ("det/3", 3, 4, 0),
        ("trk/0", 0, 5, 0),  # partitioned: each replica reads its own buffer
        ("trk/1", 1, 6, 1),
        ("trk/2", 2, 7, 2),
        ("sink/0", 0, 8, 0),
    ]
    assert all(pod.name == pod_name(n.name, pod.replica) for n in layout.nodes for pod in n.pods)
    assert layout.slots == 9
    assert layout.node("det").slots == (1, 2, 3, 4)
    assert [n.index for n in layout.nodes] == [0, 1, 2, 3]


# -- routing --------------------------------------------------------------------------


# (id, child node, options, routing, owners, partition_by)
ROUTING = [
    ("one replica: single", proc("p"), OFF, "single", 1, None),
    ("several competing replicas: competing", proc("p", nb_tasks=3), OFF, "competing", 1, None),
    ("one replica that may grow: competing from the start",
     proc("p"), ON, "competing", 1, None),
    ("partitioned by trace_id: one buffer per owner",
     proc("p", nb_tasks=4, partition_by="trace_id"), OFF, "partitioned", 4, "trace_id"),
    ("partitioned by a metadata field", proc("p", nb_tasks=2, partition_by="camera"), OFF,
     "partitioned", 2, "camera"),
    ("partition_by at one replica: single (no owner to choose)",
     proc("p", partition_by="trace_id"), ON, "single", 1, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("child", "options", "routing", "owners", "key"),
    [pytest.param(*row[1:], id=row[0]) for row in ROUTING],
)
def test_routing_per_edge_kind(
    child: NodeSpec, options: LayoutOptions, routing: str, owners: int, key: str | None
) -> None:
    layout = layout_of(flow("realtime", child), options)
    edge = layout.edge("src", "p")
    assert (edge.routing, edge.owners, edge.partition_by) == (routing, owners, key)
    assert edge.strategy == options.strategy
    assert layout.node("p").owners == owners


def test_edges_follow_child_then_parent_order_and_outputs_fan_out() -> None:
    spec = flow("realtime", proc("a"), proc("b", nb_tasks=2))
    layout = layout_of(spec)
    assert [(e.parent, e.child) for e in layout.edges] == [
        ("src", "a"),
        ("src", "b"),
        ("a", "sink"),
        ("b", "sink"),
    ]
    assert [e.child for e in layout.outputs("src")] == ["a", "b"]  # every child gets a copy
    assert [(e.child, e.routing) for e in layout.outputs("src")] == [
        ("a", "single"),
        ("b", "competing"),
    ]


@pytest.mark.parametrize("strategy", ["modulo", "jump"])
@pytest.mark.parametrize(
    ("key", "metadata"),
    [("trace_id", {}), ("camera", {"camera": "cam-17"}), ("camera", {"camera": 7})],
)
def test_owners_agree_with_owner_of_and_stay_below_the_edge_owners(
    strategy: str, key: str, metadata: dict[str, object]
) -> None:
    child = proc("p", nb_tasks=5, partition_by=key)
    layout = layout_of(flow("realtime", child), LayoutOptions(strategy=strategy))  # type: ignore[arg-type]
    edge = layout.edge("src", "p")
    for i in range(200):
        trace_id = f"src:{i}"
        owner = owner_of(child, trace_id=trace_id, metadata=metadata, strategy=edge.strategy)
        assert 0 <= owner < edge.owners
        wanted = trace_id if key == "trace_id" else metadata[key]
        assert owner == partition_of(wanted, edge.owners, strategy)  # type: ignore[arg-type]
        assert layout.node("p").pods[owner].owner == owner


# -- devices --------------------------------------------------------------------------


def cards(*free_gib: float) -> tuple[GpuDevice, ...]:
    return tuple(
        GpuDevice(i, f"GPU-{i}", "H100", 80 * GIB, int(f * GIB)) for i, f in enumerate(free_gib)
    )


def test_devices_agree_with_assign_devices_over_every_pod_a_gpu_node_may_run() -> None:
    spec = flow(
        "realtime",
        proc("det", nb_tasks=2, gpu_count=1, device_type="gpu"),
        proc("pose", gpu_count=1, gpu_memory_gib=10.0, device_type="gpu"),
        proc("cpu", nb_tasks=2),
    )
    inventory = cards(80, 80)
    layout = layout_of(spec, ON_GPU, inventory=inventory)
    requests = [
        DeviceRequest(pod_name(name, r), 1, mem)
        for name, n, mem in (("det", 6, None), ("pose", 6, 10.0))
        for r in range(n)
    ]
    expected = assign_devices(requests, inventory)
    assert layout.devices == expected
    for name in ("det", "pose"):
        for pod in layout.node(name).pods:
            assert pod.devices == expected.devices[pod.name]
            assert pod.device == "cuda"
    assert all(pod.device is None and pod.devices == () for pod in layout.node("cpu").pods)


def test_no_gpu_node_no_assignment_and_no_gpu_on_the_host_runs_on_the_cpu() -> None:
    assert layout_of(flow("realtime", proc("p")), inventory=cards(80)).devices is None
    layout = layout_of(flow("realtime", proc("p", gpu_count=1, device_type="gpu")), inventory=())
    assert layout.devices is not None
    assert layout.devices.status == "cpu-fallback"
    assert [(pod.device, pod.devices) for pod in layout.node("p").pods] == [("cpu", ())]


def test_strict_shortfall_is_data_not_an_exception() -> None:
    spec = flow("realtime", proc("p", nb_tasks=3, gpu_count=1, device_type="gpu"))
    layout = layout_of(spec, LayoutOptions(gpu_policy="strict"), inventory=cards(80))
    assert layout.devices is not None and layout.devices.refused
    assert layout.devices.shortfall


# -- options --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"max_replicas": 0},
        {"max_replicas": True},
        {"gpu_policy": "loose"},
        {"strategy": "ring"},
        {"realtime_keep": 0},
        {"realtime_keep": True},
        {"realtime_keep": 1.5},
        {"realtime_keep": 1 << 25},
    ],
    ids=[
        "max_replicas 0",
        "max_replicas bool",
        "unknown gpu policy",
        "unknown strategy",
        "realtime_keep 0",
        "realtime_keep bool",
        "realtime_keep float",
        "realtime_keep too large",
    ],
)
def test_invalid_options_are_refused_with_a_rule(changes: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError) as info:
        LayoutOptions(**changes)  # type: ignore[arg-type]
    assert info.value.rule == "invalid-layout-option"


# -- REALTIME freshness --------------------------------------------------------------------


def test_realtime_edges_keep_the_freshest_one_per_parent_and_batch_edges_none() -> None:
    middle = (
        NodeSpec("a", "processor", ("src",)),
        NodeSpec("b", "processor", ("src",), nb_tasks=3),
    )
    realtime = local_layout(flow("realtime", *middle))
    keeps = {(e.parent, e.child): e.realtime_keep for e in realtime.edges}
    assert DEFAULT_REALTIME_KEEP == 1
    # the sink joins a and b: it takes one parent's batch at a time, so 2 per buffer
    assert keeps == {("src", "a"): 1, ("src", "b"): 1, ("a", "sink"): 2, ("b", "sink"): 2}
    assert all(e.realtime_keep is None for e in local_layout(flow("batch", *middle)).edges)
    assert all(
        e.realtime_keep is None
        for e in local_layout(flow("batch", *middle), LayoutOptions(realtime_keep=3)).edges
    )


def test_the_realtime_keep_option_overrides_the_rule_on_every_edge() -> None:
    spec = flow(
        "realtime", NodeSpec("a", "processor", ("src",)), NodeSpec("b", "processor", ("src",))
    )
    layout = local_layout(spec, LayoutOptions(realtime_keep=7))
    assert {e.realtime_keep for e in layout.edges} == {7}
    assert layout.to_dict()["options"]["realtime_keep"] == 7
    assert {e["realtime_keep"] for e in layout.to_dict()["edges"]} == {7}


def test_the_same_input_gives_the_same_layout() -> None:
    spec = flow(
        "batch",
        proc("p", nb_tasks=2, gpu_count=1, device_type="gpu"),
        proc("q", partition_by="trace_id"),
    )
    a = local_layout(spec, ON_GPU, inventory=cards(40, 80))
    b = local_layout(spec, ON_GPU, inventory=cards(40, 80))
    assert a == b
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())
