"""Laws of the broker topology (vfcore.runtime.topology) over random valid flows.

For every valid flow, run id and options: stream names, consumer names and
subjects are unique and valid NATS names; no two streams' subjects overlap
(JetStream refuses that) and every subject a sender publishes to is captured by
exactly one stream, its parent's; every edge has a subject and a consumer for
each of its partitions, and every partition of every partitioned child is owned
by exactly one replica, the one ``owner_of`` names; the consumers of one stream
filter disjoint subjects (a work-queue stream requires it); the topology is
deterministic, and two runs of one flow share no name and no subject. The run's
control buckets (KV and objects) have valid names, are no stream of the run and
differ between runs and flows; their keys are valid subject token sequences.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.property.strategies import valid_specs
from vfcore import FlowSpec, effective_replicas, owner_of
from vfcore.runtime.topology import (
    BrokerTopology,
    TopologyOptions,
    broker_topology,
    nats_name_problem,
    nats_subject_problem,
    subject_matches,
)

STRICT = re.compile(r"[A-Za-z0-9_-]+")

run_ids = st.from_regex(r"\A[A-Za-z0-9](?:[A-Za-z0-9_-]{0,14}[A-Za-z0-9])?\Z")
options = st.builds(
    TopologyOptions,
    realtime_keep=st.integers(1, 64),
    max_ack_pending=st.integers(1, 10_000),
    ack_wait_s=st.sampled_from([0.5, 5.0, 30.0]),
    duplicate_window_s=st.sampled_from([60.0, 120.0]),
    strategy=st.sampled_from(["modulo", "jump"]),
)


def _label(topo: BrokerTopology) -> None:
    event(f"flow type: {topo.flow_type}")
    event(f"routings: {', '.join(sorted({e.routing for e in topo.edges}))}")
    joins = Counter(e.child for e in topo.edges)
    event(f"joins: {'some' if any(n > 1 for n in joins.values()) else 'none'}")


def _all_subjects(topo: BrokerTopology) -> list[str]:
    return [s for e in topo.edges for s in e.subjects] + [s for _, s in topo.dead_letters.subjects]


@settings(max_examples=120, deadline=None)
@given(valid_specs(), run_ids, options)
def test_names_are_unique_and_valid(spec: FlowSpec, run: str, opts: TopologyOptions) -> None:
    topo = broker_topology(spec, run, opts)
    _label(topo)
    streams = topo.all_streams()
    stream_names = [s.name for s in streams]
    assert len(set(stream_names)) == len(stream_names)
    for name in stream_names + [c.name for c in topo.consumers]:
        assert nats_name_problem(name) is None
        assert STRICT.fullmatch(name), name
    # a consumer name is unique within its stream (and, here, across the run)
    pairs = [(c.stream, c.name) for c in topo.consumers]
    assert len(set(pairs)) == len(pairs)
    subjects = _all_subjects(topo)
    assert len(set(subjects)) == len(subjects)
    for subject in subjects:
        assert nats_subject_problem(subject) is None
        assert all(STRICT.fullmatch(t) for t in subject.split("."))
    for stream in streams:
        for pattern in stream.subjects:
            assert nats_subject_problem(pattern, wildcards=True) is None


@settings(max_examples=120, deadline=None)
@given(valid_specs(), run_ids, options)
def test_every_edge_is_covered_and_captured_by_its_parent_stream_only(
    spec: FlowSpec, run: str, opts: TopologyOptions
) -> None:
    topo = broker_topology(spec, run, opts)
    _label(topo)
    wanted = {(p, n.name) for n in spec.nodes for p in n.parents}
    assert {(e.parent, e.child) for e in topo.edges} == wanted
    assert len(topo.edges) == len(wanted)
    with_children = {p for p, _ in wanted}
    assert {node for node, _ in topo.streams} == with_children
    streams = topo.all_streams()
    for edge in topo.edges:
        assert edge.subjects and edge.consumers
        assert edge.stream == topo.stream_of(edge.parent).name
        for subject in edge.subjects:
            capturing = [
                s.name for s in streams if any(subject_matches(p, subject) for p in s.subjects)
            ]
            assert capturing == [edge.stream]
            readers = [c for c in edge.consumers if subject in c.config.filter_subjects]
            assert len(readers) == 1
        assert all(c.stream == edge.stream for c in edge.consumers)
    for node, subject in topo.dead_letters.subjects:
        capturing = [
            s.name for s in streams if any(subject_matches(p, subject) for p in s.subjects)
        ]
        assert capturing == [topo.dead_letters.config.name], node
    # within one stream, consumers filter disjoint subjects (work-queue streams need it)
    for name, _ in topo.streams:
        stream = topo.stream_of(name).name
        filters = [
            f for c in topo.consumers if c.stream == stream for f in c.config.filter_subjects
        ]
        assert len(set(filters)) == len(filters)


@settings(max_examples=120, deadline=None)
@given(
    valid_specs(),
    run_ids,
    options,
    st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=8),
)
def test_every_partition_is_owned_by_exactly_one_replica(
    spec: FlowSpec, run: str, opts: TopologyOptions, keys: list[str]
) -> None:
    topo = broker_topology(spec, run, opts)
    _label(topo)
    for edge in topo.edges:
        child = spec.node(edge.child)
        n = effective_replicas(child)
        if edge.routing == "partitioned":
            event("partitioned edge")
            assert len(edge.subjects) == n
            owned = Counter(p for c in edge.consumers for p in c.partitions)
            assert owned == Counter(range(n))
            assert [c.owner for c in edge.consumers] == list(range(n))
            for c in edge.consumers:
                assert c.config.filter_subjects == tuple(edge.subjects[p] for p in c.partitions)
            # each replica reads exactly its own partition of this edge
            for r in range(n):
                mine = [c for c in topo.reads(edge.child, r) if c.parent == edge.parent]
                assert [c.partitions for c in mine] == [(r,)]
            if child.partition_by == "trace_id":
                for key in keys:
                    owner = owner_of(child, trace_id=key, strategy=edge.strategy)
                    (reader,) = [
                        c
                        for c in edge.consumers
                        if edge.subjects[owner] in c.config.filter_subjects
                    ]
                    assert reader.owner == owner
        else:
            assert len(edge.subjects) == 1 and len(edge.consumers) == 1
            (shared,) = edge.consumers
            assert shared.owner is None
            assert shared.config.filter_subjects == edge.subjects
            for r in range(n):
                assert shared in topo.reads(edge.child, r)


@settings(max_examples=80, deadline=None)
@given(valid_specs(), run_ids, run_ids, options)
def test_deterministic_and_two_runs_never_collide(
    spec: FlowSpec, run: str, other: str, opts: TopologyOptions
) -> None:
    topo = broker_topology(spec, run, opts)
    _label(topo)
    again = broker_topology(spec, run, opts)
    assert again == topo
    assert json.dumps(again.to_dict()) == json.dumps(topo.to_dict())
    if other == run:
        event("same run id")
        return
    second = broker_topology(spec, other, opts)

    def names(t: BrokerTopology) -> set[str]:
        out = {s.name for s in t.all_streams()} | {c.name for c in t.consumers}
        return out | set(_all_subjects(t))

    assert names(topo) & names(second) == set()
    # no stream of one run captures a subject of the other (JetStream would refuse it)
    for stream in topo.all_streams():
        for subject in _all_subjects(second):
            assert not any(subject_matches(p, subject) for p in stream.subjects)


@settings(max_examples=80, deadline=None)
@given(valid_specs(), run_ids, options)
def test_settings_follow_the_flow_type(spec: FlowSpec, run: str, opts: TopologyOptions) -> None:
    topo = broker_topology(spec, run, opts)
    _label(topo)
    for _, stream in topo.streams:
        if spec.flow_type == "realtime":
            assert (stream.storage, stream.retention, stream.discard) == ("memory", "limits", "old")
            assert stream.max_msgs_per_subject == opts.realtime_keep
        else:
            assert (stream.storage, stream.retention, stream.discard) == (
                "file",
                "workqueue",
                "new",
            )
            assert stream.max_msgs == opts.batch_max_msgs
        assert stream.duplicate_window == round(opts.duplicate_window_s * 1e9)
    for c in topo.consumers:
        assert c.config.max_deliver == (1 if spec.flow_type == "realtime" else -1)
        assert c.config.max_ack_pending >= opts.max_ack_pending
        assert c.config.ack_wait == round(opts.ack_wait_s * 1e9)


@settings(max_examples=80, deadline=None)
@given(valid_specs(), valid_specs(), run_ids, run_ids, options)
def test_control_buckets_are_valid_apart_from_the_streams_and_per_run(
    spec: FlowSpec, other_flow: FlowSpec, run: str, other_run: str, opts: TopologyOptions
) -> None:
    """The run's KV bucket and object bucket: valid names (they are JetStream streams,
    ``KV_<bucket>`` and ``<objects>``), never a stream of the run, never another run's
    or another flow's; their keys are valid subjects no stream of the run captures."""
    topo = broker_topology(spec, run, opts)
    _label(topo)
    control = topo.control
    buckets = (control.bucket, control.objects)
    # the JetStream streams behind them: the KV bucket's and the object bucket itself
    backing = (f"KV_{control.bucket}", control.objects)
    for name in buckets + backing:
        assert nats_name_problem(name) is None, name
        assert STRICT.fullmatch(name), name  # KV and object bucket names: [A-Za-z0-9_-]
    assert control.bucket != control.objects
    stream_names = {s.name for s in topo.all_streams()}
    assert stream_names.isdisjoint(buckets + backing), (stream_names, buckets)
    streams = topo.all_streams()
    for node in spec.nodes:
        for replica in {0, effective_replicas(node) - 1}:
            for key in (
                control.done_key(node.name, replica),
                control.stats_key(node.name, replica),
            ):
                assert nats_subject_problem(key) is None, key
                assert all(STRICT.fullmatch(t) for t in key.split(".")), key
                # the KV stores key k on $KV.<bucket>.k: no stream of the run captures it
                subject = f"$KV.{control.bucket}.{key}"
                assert not any(subject_matches(p, subject) for s in streams for p in s.subjects)
    assert nats_subject_problem(control.stop_key) is None
    keys = [control.done_key(n.name, 0) for n in spec.nodes]
    assert len(set(keys)) == len(keys)  # one done key per node

    def names(t: BrokerTopology) -> set[str]:
        return {t.control.bucket, t.control.objects}

    if other_run == run:
        event("same run id")
    else:
        assert names(topo).isdisjoint(names(broker_topology(spec, other_run, opts)))
    if other_flow.name == spec.name:
        event("same flow name")
    else:
        assert names(topo).isdisjoint(names(broker_topology(other_flow, run, opts)))
