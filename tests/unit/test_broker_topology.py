"""The broker topology (vfcore.runtime.topology): streams, subjects, consumers, names, settings."""

from __future__ import annotations

import json
import re

import pytest

import vfcore
from vfcore import FlowSpec, JoinPolicy, NodeSpec, owner_of, physical_name
from vfcore.errors import InvalidInputError
from vfcore.runtime import (
    BrokerTopology,
    TopologyOptions,
    broker_topology,
    check_run_id,
    nats_name_problem,
    nats_subject_problem,
    subject_matches,
)

NS = 1_000_000_000


def chain(flow_type: str, *, name: str = "demo", tasks: int = 1, **child: object) -> FlowSpec:
    return FlowSpec(
        name,
        flow_type,  # type: ignore[arg-type]
        (
            NodeSpec("camera", "producer", sets_keys=("camera",)),
            NodeSpec("detector", "processor", ("camera",), nb_tasks=tasks, **child),  # type: ignore[arg-type]
            NodeSpec("sink", "consumer", ("detector",)),
        ),
    )


def test_batch_chain_streams_subjects_and_consumers():
    topo = broker_topology(chain("batch"), "run1")
    assert [node for node, _ in topo.streams] == ["camera", "detector"]  # the sink has no output
    cam = topo.stream_of("camera")
    assert cam.to_dict() == {
        "name": "VF_" + physical_name("camera", flow="demo", run="run1").k8s,
        "subjects": [physical_name("camera", flow="demo", run="run1").subject + ".>"],
        "retention": "workqueue",
        "storage": "file",
        "discard": "new",
        "max_msgs": 1_000_000,
        "max_msgs_per_subject": -1,
        "max_bytes": -1,
        "max_age": 0,
        "duplicate_window": 120 * NS,
        "num_replicas": 1,
    }
    edge = topo.edge("camera", "detector")
    assert edge.routing == "single"
    assert edge.stream == cam.name
    det_token = physical_name("detector", flow="demo", run="run1").subject.rsplit(".", 1)[1]
    assert edge.subjects == (
        f"{physical_name('camera', flow='demo', run='run1').subject}.{det_token}",
    )
    (consumer,) = edge.consumers
    assert consumer.owner is None and consumer.partitions == ()
    assert consumer.config.to_dict() == {
        "durable_name": physical_name("detector", flow="demo", run="run1").k8s,
        "deliver_policy": "all",
        "ack_policy": "explicit",
        "ack_wait": 30 * NS,
        "max_deliver": -1,
        "max_ack_pending": 1024,
        "replay_policy": "instant",
        "filter_subject": edge.subjects[0],
    }
    assert topo.reads("detector", 0) == (consumer,)
    assert topo.outputs("camera") == (edge,)
    assert topo.outputs("sink") == ()
    with pytest.raises(KeyError):
        topo.stream_of("sink")


def test_realtime_chain_keeps_the_freshest_in_memory_and_never_redelivers():
    topo = broker_topology(chain("realtime"), "run1", TopologyOptions(realtime_keep=3))
    for _, stream in topo.streams:
        d = stream.to_dict()
        assert (d["storage"], d["retention"], d["discard"]) == ("memory", "limits", "old")
        assert d["max_msgs_per_subject"] == 3
        assert d["max_msgs"] == -1
    assert all(c.config.max_deliver == 1 for c in topo.consumers)
    default = broker_topology(chain("realtime"), "run1")
    assert {s.max_msgs_per_subject for _, s in default.streams} == {1}  # videoflow keeps 1


def test_partitioned_child_x3_has_one_subject_and_one_consumer_per_partition():
    spec = chain("batch", tasks=3, partition_by="camera")
    topo = broker_topology(spec, "run1")
    edge = topo.edge("camera", "detector")
    assert edge.routing == "partitioned" and edge.partition_by == "camera"
    base = topo.stream_of("camera").subjects[0][: -len(".>")]
    det_token = physical_name("detector", flow="demo", run="run1").subject.rsplit(".", 1)[1]
    assert edge.subjects == tuple(f"{base}.{det_token}.p{p}" for p in range(3))
    durable = physical_name("detector", flow="demo", run="run1").k8s
    assert [
        (c.owner, c.partitions, c.config.durable_name, c.config.filter_subjects)
        for c in edge.consumers
    ] == [(p, (p,), f"{durable}_r{p}", (edge.subjects[p],)) for p in range(3)]
    # each replica reads exactly its own partition on this edge
    for r in range(3):
        assert [c.partitions for c in topo.reads("detector", r)] == [(r,)]
    # the sender's subject is the owner's partition
    node = spec.node("detector")
    for cam in ("north", "south", "east", "west", 7):
        owner = owner_of(node, metadata={"camera": cam})
        (reader,) = [
            c
            for c in edge.consumers
            if subject_matches(c.config.filter_subjects[0], edge.subjects[owner])
        ]
        assert reader.owner == owner
    # the detector's output goes to the sink through one shared consumer
    assert topo.edge("detector", "sink").routing == "single"


def test_partition_by_with_one_replica_is_a_single_route():
    topo = broker_topology(chain("batch", tasks=1, partition_by="trace_id"), "run1")
    edge = topo.edge("camera", "detector")
    assert edge.routing == "single" and len(edge.subjects) == 1 and edge.partition_by is None


def test_competing_x2_node_shares_one_durable():
    topo = broker_topology(chain("batch", tasks=2), "run1")
    edge = topo.edge("camera", "detector")
    assert edge.routing == "competing"
    (consumer,) = edge.consumers
    assert topo.reads("detector", 0) == topo.reads("detector", 1) == (consumer,)
    assert consumer.config.durable_name == physical_name("detector", flow="demo", run="run1").k8s


def test_join_with_two_parents_has_one_consumer_in_each_parent_stream():
    spec = FlowSpec(
        "demo",
        "batch",
        (
            NodeSpec("left", "producer"),
            NodeSpec("right", "producer"),
            NodeSpec(
                "fuse",
                "processor",
                ("left", "right"),
                nb_tasks=2,
                partition_by="trace_id",
                join_policy=JoinPolicy(max_pending=100),
            ),
            NodeSpec("sink", "consumer", ("fuse",)),
        ),
    )
    topo = broker_topology(spec, "run1", TopologyOptions(max_ack_pending=50))
    left, right = topo.edge("left", "fuse"), topo.edge("right", "fuse")
    assert (
        left.stream == topo.stream_of("left").name != right.stream == topo.stream_of("right").name
    )
    for r in range(2):
        reads = topo.reads("fuse", r)
        assert [(c.parent, c.partitions) for c in reads] == [("left", (r,)), ("right", (r,))]
    # a join holds up to max_pending groups unacknowledged on top of the in-flight bound
    assert {c.config.max_ack_pending for c in left.consumers + right.consumers} == {150}
    assert {c.config.max_ack_pending for c in topo.edge("fuse", "sink").consumers} == {50}
    # the consumers of one stream filter disjoint subjects (a work-queue stream requires it)
    filters = [f for c in left.consumers for f in c.config.filter_subjects]
    assert len(set(filters)) == len(filters) == 2


def test_dead_letter_stream_per_run_with_one_subject_per_node():
    topo = broker_topology(chain("realtime"), "run1")
    dlq = topo.dead_letters
    d = dlq.config.to_dict()
    assert d["name"].startswith("VF_DLQ_demo-run1-")
    assert (d["storage"], d["retention"], d["discard"], d["max_msgs"], d["max_age"]) == (
        "file",
        "limits",
        "new",
        -1,
        0,
    )
    assert [n for n, _ in dlq.subjects] == ["camera", "detector", "sink"]
    (pattern,) = dlq.config.subjects
    assert all(subject_matches(pattern, s) for _, s in dlq.subjects)
    assert len({s for _, s in dlq.subjects}) == 3
    assert dlq.subject_of("sink").endswith(
        physical_name("sink", flow="demo", run="run1").subject.rsplit(".", 1)[1]
    )
    # no output stream captures a dead letter
    for _, stream in topo.streams:
        assert not any(subject_matches(stream.subjects[0], s) for _, s in dlq.subjects)
    assert topo.all_streams()[-1] == dlq.config


def test_two_runs_and_two_flows_share_no_name_and_no_subject():
    def names(t: BrokerTopology) -> set[str]:
        out = {s.name for s in t.all_streams()}
        out |= {pattern for s in t.all_streams() for pattern in s.subjects}
        out |= {c.config.durable_name for c in t.consumers}
        out |= {s for e in t.edges for s in e.subjects}
        return out

    a = names(broker_topology(chain("batch"), "run1"))
    b = names(broker_topology(chain("batch"), "run2"))
    c = names(broker_topology(chain("batch", name="demo2"), "run1"))
    # flow names that sanitise alike ("a.b", "a_b") still differ by their hashes
    d = names(broker_topology(chain("batch", name="a.b"), "run1"))
    e = names(broker_topology(chain("batch", name="a_b"), "run1"))
    assert a & b == set() and a & c == set() and d & e == set()


def test_json_fields_are_the_jetstream_api_names_and_the_document_round_trips():
    topo = broker_topology(chain("batch", tasks=2), "run1")
    stream_keys = set(topo.stream_of("camera").to_dict())
    assert stream_keys == {
        "name",
        "subjects",
        "retention",
        "storage",
        "discard",
        "max_msgs",
        "max_msgs_per_subject",
        "max_bytes",
        "max_age",
        "duplicate_window",
        "num_replicas",
    }
    consumer_keys = set(topo.consumers[0].config.to_dict())
    assert consumer_keys == {
        "durable_name",
        "deliver_policy",
        "ack_policy",
        "ack_wait",
        "max_deliver",
        "max_ack_pending",
        "replay_policy",
        "filter_subject",
    }
    doc = json.loads(json.dumps(topo.to_dict()))
    assert doc["run_id"] == "run1" and doc["options"]["max_ack_pending"] == 1024
    opts = TopologyOptions(ack_wait_s=2.5, duplicate_window_s=10)
    again = broker_topology(chain("batch"), "run1", opts)
    assert again.consumers[0].config.to_dict()["ack_wait"] == 2_500_000_000
    assert again.stream_of("camera").to_dict()["duplicate_window"] == 10 * NS


def test_several_filter_subjects_are_sent_as_filter_subjects():
    from vfcore.runtime import ConsumerConfig

    cfg = ConsumerConfig("c", ("a.b", "a.c"), NS, -1, 10)
    assert (
        cfg.to_dict()["filter_subjects"] == ["a.b", "a.c"] and "filter_subject" not in cfg.to_dict()
    )


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a.b",
        "a*",
        "a>b",
        "a b",
        "a\tb",
        "a\nb",
        "a/b",
        "a\\b",
        "a\x00b",
        "a\x7fb",
        "a\u00a0b",
        "x" * 256,
        None,
        7,
    ],
)
def test_invalid_nats_names_are_refused(name: object):
    assert nats_name_problem(name) is not None


@pytest.mark.parametrize("name", ["VF_demo-run1-camera-abc", "a", "A_b-9", "x" * 255, "détecteur"])
def test_valid_nats_names_pass(name: str):
    assert nats_name_problem(name) is None


@pytest.mark.parametrize(
    ("subject", "wildcards"),
    [
        ("", False),
        ("a..b", False),
        (".a", False),
        ("a.", False),
        ("a b", False),
        ("a.\tb", False),
        ("a.*", False),
        ("a.>", False),
        ("a.>.b", True),
        ("a.b*", True),
        ("a.>x", True),
        ("a\x00", False),
        ("a." + "x" * 1024, False),
    ],
)
def test_invalid_subjects_are_refused(subject: str, wildcards: bool):
    assert nats_subject_problem(subject, wildcards=wildcards) is not None


@pytest.mark.parametrize(
    ("subject", "wildcards"), [("a", False), ("vf.a-b.c_d", False), ("a.*.c", True), ("a.>", True)]
)
def test_valid_subjects_pass(subject: str, wildcards: bool):
    assert nats_subject_problem(subject, wildcards=wildcards) is None


def test_every_name_of_a_topology_with_awkward_names_is_valid():
    spec = FlowSpec(
        "my flow.v2 ✓",
        "batch",
        (
            NodeSpec("cam era.1", "producer"),
            NodeSpec("dét*>/x", "processor", ("cam era.1",), nb_tasks=2, partition_by="trace_id"),
            NodeSpec("sink ", "consumer", ("dét*>/x",)),
        ),
    )
    topo = broker_topology(spec, "R_1-x")
    strict = re.compile(r"[A-Za-z0-9_-]+")
    for stream in topo.all_streams():
        assert nats_name_problem(stream.name) is None and strict.fullmatch(stream.name)
        assert all(nats_subject_problem(s, wildcards=True) is None for s in stream.subjects)
    for c in topo.consumers:
        assert nats_name_problem(c.name) is None and strict.fullmatch(c.name)
    for e in topo.edges:
        assert all(nats_subject_problem(s) is None for s in e.subjects)


@pytest.mark.parametrize(
    "run_id", ["", "a.b", "a b", "-a", "a-", "_a", "x" * 64, "r/1", "é", None, 3, "a*"]
)
def test_bad_run_ids_are_a_named_error(run_id: object):
    with pytest.raises(InvalidInputError) as info:
        broker_topology(chain("batch"), run_id)  # type: ignore[arg-type]
    assert info.value.rule == "invalid-run-id"


@pytest.mark.parametrize("run_id", ["r", "run1", "R_1-x", "2026-12-03", "x" * 63])
def test_good_run_ids_pass(run_id: str):
    assert check_run_id(run_id) == run_id


@pytest.mark.parametrize(
    "changes",
    [
        {"realtime_keep": 0},
        {"realtime_keep": True},
        {"max_ack_pending": 0},
        {"ack_wait_s": 0},
        {"ack_wait_s": float("nan")},
        {"duplicate_window_s": 30.0},  # not above the 30 s ack wait
        {"batch_max_msgs": 0},
        {"strategy": "random"},
    ],
)
def test_bad_options_are_a_named_error(changes: dict[str, object]):
    with pytest.raises(InvalidInputError) as info:
        TopologyOptions(**changes)  # type: ignore[arg-type]
    assert info.value.rule == "invalid-topology-option"


def test_a_flow_name_too_long_for_a_subject_is_a_named_error():
    with pytest.raises(InvalidInputError) as info:
        broker_topology(chain("batch", name="f" * 2000), "run1")
    assert info.value.rule == "invalid-broker-name"


def test_exported_lazily_from_vfcore():
    assert vfcore.broker_topology is broker_topology
    assert vfcore.TopologyOptions is TopologyOptions
    assert vfcore.BrokerTopology is BrokerTopology


def test_the_worked_example_in_docs_broker_md_runs():
    import doctest
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "broker.md"
    result = doctest.testfile(str(doc), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5 and result.failed == 0


def test_replicas_needed_for_a_parent_to_have_ended() -> None:
    """Owned shares need every replica's done; competing replicas need any one's.

    A producer runs one worker whatever its nb_tasks (vfcore.effective_replicas).
    """
    from vfcore.runtime import RunControl

    cases = [
        (NodeSpec("p", "producer", nb_tasks=3), 1),
        (NodeSpec("p", "producer"), 1),
        (NodeSpec("w", "processor", ("p",), nb_tasks=3), 1),
        (NodeSpec("w", "processor", ("p",)), 1),
        (NodeSpec("t", "processor", ("p",), nb_tasks=3, partition_by="trace_id"), 3),
        (NodeSpec("t", "processor", ("p",), nb_tasks=1, partition_by="trace_id"), 1),
    ]
    for node, needed in cases:
        assert RunControl.replicas_needed(node) == needed, node
