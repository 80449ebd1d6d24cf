"""Laws of validation over random flows (see strategies.py)."""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.strategies import Mutation, flows_with_issues, mutations, valid_specs
from vfcore import FlowSpec, InvalidFlowError, NodeSpec, validate


def _errors(issues):
    return [i for i in issues if i.severity == "error"]


def validate_unmutated(spec: FlowSpec, **kwargs):
    """validate(), checking that it leaves its input exactly as it was."""
    before = copy.deepcopy(spec.to_dict())
    issues = validate(spec, **kwargs)
    assert spec.to_dict() == before
    return issues


@settings(max_examples=300)
@given(valid_specs())
def test_a_generated_valid_flow_has_no_errors(spec):
    assert _errors(validate_unmutated(spec)) == []


@settings(max_examples=600)
@given(st.data())
def test_one_mutation_yields_exactly_that_rules_error_on_that_node(data):
    spec = data.draw(valid_specs())
    mutation: Mutation = data.draw(mutations(spec))
    issues = validate_unmutated(mutation.spec, autoscaling=mutation.autoscaling)
    found = [(i.rule, i.node) for i in _errors(issues)]
    assert found == [(mutation.rule, mutation.node)], [i.render() for i in _errors(issues)]


@settings(max_examples=200)
@given(flows_with_issues(), st.randoms(use_true_random=False))
def test_issues_do_not_depend_on_declaration_order(spec, rnd):
    nodes = list(spec.nodes)
    rnd.shuffle(nodes)
    shuffled = replace(spec, nodes=tuple(nodes))
    assert validate(shuffled) == validate(spec)


def _rename(spec: FlowSpec, mapping: dict[str, str]) -> FlowSpec:
    def policy(node: NodeSpec):
        p = node.join_policy
        if p is None or p.collect is None:
            return p
        return replace(p, collect={mapping.get(k, k): v for k, v in p.collect})

    nodes = tuple(
        replace(
            n,
            name=mapping[n.name],
            parents=tuple(mapping.get(p, p) for p in n.parents),
            join_policy=policy(n),
        )
        for n in spec.nodes
    )
    return replace(spec, nodes=nodes)


@settings(max_examples=200)
@given(flows_with_issues(), st.randoms(use_true_random=False))
def test_issues_are_invariant_under_renaming_nodes(spec, rnd):
    originals = sorted(set(spec.names))
    fresh = [f"renamed-{i}" for i in range(len(originals))]
    rnd.shuffle(fresh)
    mapping = dict(zip(originals, fresh, strict=True))
    renamed = _rename(spec, mapping)

    def shape(issues, rename):
        # A cycle is reported once, on its alphabetically first node, which renaming may
        # change: compare cycles by count only.
        return Counter(
            (i.rule, i.severity, None if i.rule == "cycle" else rename(i.node)) for i in issues
        )

    assert shape(validate(renamed), lambda n: n) == shape(
        validate(spec), lambda n: mapping.get(n, n) if n is not None else None
    )


def _mistyped_nodes(spec: FlowSpec) -> set[str]:
    """Nodes with a field whose JSON type is wrong (``nb_tasks="2"``, ``gpu_count=True``)."""

    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    return {
        n.name
        for n in spec.nodes
        if not is_int(n.nb_tasks)
        or not is_int(n.gpu_count)
        or isinstance(n.gpu_memory_gib, bool | str)
        or not isinstance(n.device_type, str)
    }


@settings(max_examples=300)
@given(flows_with_issues())
def test_flowspec_json_round_trips_exactly_or_refuses_the_mistyped_nodes(spec):
    text = spec.to_json()
    assert json.loads(text) == spec.to_dict()
    mistyped = _mistyped_nodes(spec)
    if mistyped:  # the type of a field is checked on load: invalid-spec names each node
        with pytest.raises(InvalidFlowError) as info:
            FlowSpec.from_json(text)
        assert {(i.rule, i.node) for i in info.value.issues} == {
            ("invalid-spec", n) for n in mistyped
        }
        return
    again = FlowSpec.from_json(text)
    assert again == spec
    assert again.to_json() == text


@settings(max_examples=100)
@given(valid_specs())
def test_validation_is_deterministic(spec):
    assert validate(spec) == validate(FlowSpec.from_json(spec.to_json()))
