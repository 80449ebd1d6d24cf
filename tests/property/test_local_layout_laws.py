"""Laws of the local layout (vfcore.runtime.layout) over random valid flows.

For every valid flow and any options: every partition of every partitioned
node is owned by exactly one replica, and owner_of never names a buffer that
does not exist; ``min <= replicas <= max`` and only scalable nodes may grow;
pod names and slots are unique and dense; the layout is deterministic; every
REALTIME edge keeps at least one message (the option, else one per parent of
the child), no BATCH edge keeps a bound.
"""

from __future__ import annotations

import json
from collections import Counter

from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from tests.property.strategies import valid_specs
from vfcore import FlowSpec, effective_replicas, owner_of, pod_name
from vfcore.runtime.layout import (
    DEFAULT_REALTIME_KEEP,
    LayoutOptions,
    LocalLayout,
    local_layout,
)

options = st.builds(
    LayoutOptions,
    autoscale=st.booleans(),
    gpu_autoscaling=st.booleans(),
    max_replicas=st.integers(1, 8),
    strategy=st.sampled_from(["modulo", "jump"]),
    realtime_keep=st.none() | st.integers(1, 64),
)


def _label(layout: LocalLayout) -> None:
    routings = sorted({edge.routing for edge in layout.edges})
    event(f"routings: {', '.join(routings)}")
    event(f"scalable nodes: {'some' if any(n.scalable for n in layout.nodes) else 'none'}")


@settings(max_examples=150)
@given(valid_specs(), options)
def test_every_partition_is_owned_by_exactly_one_replica(
    spec: FlowSpec, opts: LayoutOptions
) -> None:
    layout = local_layout(spec, opts)
    _label(layout)
    for node in layout.nodes:
        owners = Counter(pod.owner for pod in node.pods)
        if node.partitioned:
            # each of the node's partitions has one input buffer, read by one replica
            assert node.owners == node.replicas == node.max_replicas == len(node.pods)
            assert owners == Counter(range(node.owners))
        else:
            assert node.owners == 1
            assert set(owners) == {0}
    for edge in layout.edges:
        assert edge.owners == layout.node(edge.child).owners
        assert (edge.routing == "partitioned") == layout.node(edge.child).partitioned


@settings(max_examples=60)
@given(
    valid_specs(),
    options,
    st.lists(
        st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=8),
        min_size=1,
        max_size=20,
    ),
)
def test_owner_of_always_names_an_existing_owner(
    spec: FlowSpec, opts: LayoutOptions, trace_ids: list[str]
) -> None:
    layout = local_layout(spec, opts)
    partitioned = [e for e in layout.edges if e.routing == "partitioned"]
    event(f"partitioned edges: {len(partitioned)}")
    assume(partitioned)  # flows without one have no owner to check (about a third)
    for edge in partitioned:
        child = spec.node(edge.child)
        for trace_id in trace_ids:
            metadata = {edge.partition_by or "": trace_id}  # any metadata field the key reads
            owner = owner_of(child, trace_id=trace_id, metadata=metadata, strategy=edge.strategy)
            assert 0 <= owner < edge.owners


@settings(max_examples=150)
@given(valid_specs(), options)
def test_bounds_hold_and_only_scalable_nodes_may_grow(spec: FlowSpec, opts: LayoutOptions) -> None:
    layout = local_layout(spec, opts)
    _label(layout)
    for node, node_spec in zip(layout.nodes, spec.nodes, strict=True):
        assert node.name == node_spec.name
        assert node.replicas == effective_replicas(node_spec)
        assert 1 <= node.min_replicas <= node.replicas <= node.max_replicas
        assert node.scalable == (opts.autoscale and not node.scaling_reasons)
        if node.scalable:
            assert node.max_replicas == max(node.replicas, opts.max_replicas)
        else:
            assert node.max_replicas == node.replicas
        if not node_spec.is_processor:
            assert not node.scalable and node.max_replicas == 1


@settings(max_examples=150)
@given(valid_specs(), options)
def test_pod_names_and_slots_are_unique_and_dense(spec: FlowSpec, opts: LayoutOptions) -> None:
    layout = local_layout(spec, opts)
    pods = [pod for node in layout.nodes for pod in node.pods]
    assert len({pod.name for pod in pods}) == len(pods)
    assert [pod.slot for pod in pods] == list(range(layout.slots))
    for node in layout.nodes:
        assert [pod.name for pod in node.pods] == [
            pod_name(node.name, r) for r in range(node.max_replicas)
        ]
    again = local_layout(spec, opts)
    assert again == layout
    assert json.dumps(again.to_dict()) == json.dumps(layout.to_dict())


@settings(max_examples=60)
@given(valid_specs(), options)
def test_realtime_edges_keep_a_bound_and_batch_edges_none(
    spec: FlowSpec, opts: LayoutOptions
) -> None:
    layout = local_layout(spec, opts)
    event(f"flow type: {spec.flow_type}; keep option: {opts.realtime_keep is not None}")
    for edge in layout.edges:
        if spec.flow_type == "batch":
            assert edge.realtime_keep is None
        elif opts.realtime_keep is not None:
            assert edge.realtime_keep == opts.realtime_keep
        else:
            parents = len(spec.node(edge.child).parents)
            assert edge.realtime_keep == DEFAULT_REALTIME_KEEP * parents >= 1
