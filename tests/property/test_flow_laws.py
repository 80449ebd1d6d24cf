"""Laws of flow authoring: the live API and FlowSpec agree."""

from __future__ import annotations

import copy
from dataclasses import replace

import networkx as nx
from hypothesis import given, settings

from tests.property.strategies import valid_specs
from vfcore import (
    ConsumerNode,
    Flow,
    FlowSpec,
    OneTaskProcessorNode,
    ProcessorNode,
    ProducerNode,
    validate,
)
from vfcore.flow.spec import NodeSpec

CLASSES = {
    "producer": ProducerNode,
    "processor": ProcessorNode,
    "one-task-processor": OneTaskProcessorNode,
    "consumer": ConsumerNode,
}


def build(spec: FlowSpec) -> Flow:
    """Build the live flow a spec describes, through the public constructors."""
    live = {}
    for node in _parents_first(spec):
        kwargs = {
            "device_type": node.device_type,
            "gpu_count": node.gpu_count,
            "gpu_resource_name": node.gpu_resource_name,
            "gpu_memory_gib": node.gpu_memory_gib,
        }
        if node.kind == "producer":
            kwargs.update(sets_keys=node.sets_keys, finite=node.finite)
        elif node.kind == "consumer":
            kwargs.update(join_policy=node.join_policy)
        else:
            kwargs.update(
                nb_tasks=node.nb_tasks,
                partition_by=node.partition_by,
                sets_keys=node.sets_keys,
                join_policy=node.join_policy,
            )
        obj = CLASSES[node.kind](name=node.name, **kwargs)
        if node.parents:
            obj(*(live[p] for p in node.parents))
        live[node.name] = obj
    consumers = [live[n.name] for n in spec.nodes if n.kind == "consumer"]
    return Flow(consumers, flow_type=spec.flow_type, name=spec.name)


def _parents_first(spec: FlowSpec) -> list[NodeSpec]:
    done: set[str] = set()
    out: list[NodeSpec] = []
    pending = list(spec.nodes)
    while pending:
        ready = [n for n in pending if all(p in done for p in n.parents)]
        for n in ready:
            done.add(n.name)
            out.append(n)
        pending = [n for n in pending if n.name not in done]
    return out


def _without_impl(spec: FlowSpec) -> dict:
    doc = spec.to_dict()
    for node in doc["nodes"]:
        node["impl"] = None
    doc["nodes"].sort(key=lambda n: n["name"])
    return doc


def _connected_to_consumers(spec: FlowSpec) -> FlowSpec:
    """The part of a spec a live Flow can see: what is connected to its consumers."""
    graph = nx.Graph()
    graph.add_nodes_from(spec.names)
    graph.add_edges_from((p, n.name) for n in spec.nodes for p in n.parents)
    keep = set().union(
        *(nx.node_connected_component(graph, n.name) for n in spec.nodes if n.is_consumer)
    )
    return replace(spec, nodes=tuple(n for n in spec.nodes if n.name in keep))


@settings(max_examples=150)
@given(valid_specs())
def test_building_a_spec_through_the_api_gives_the_same_spec(spec):
    flow = build(spec)
    seen = _connected_to_consumers(spec)
    assert _without_impl(flow.spec()) == _without_impl(seen)
    assert validate(flow) == validate(seen)


@settings(max_examples=100)
@given(valid_specs())
def test_validating_a_live_flow_does_not_change_it(spec):
    flow = build(spec)
    before = copy.deepcopy(flow.spec().to_dict())
    validate(flow)
    assert flow.spec().to_dict() == before


@settings(max_examples=100)
@given(valid_specs())
def test_spec_order_puts_parents_first(spec):
    order = [n.name for n in build(spec).spec().nodes]
    position = {name: i for i, name in enumerate(order)}
    for node in _connected_to_consumers(spec).nodes:
        assert all(position[p] < position[node.name] for p in node.parents)
