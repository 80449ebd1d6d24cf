"""Physical names: valid for Kubernetes and the broker, and never colliding."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from vfcore import physical_name
from vfcore.flow.names import K8S_NAME_MAX

DNS_1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
SUBJECT_TOKEN = re.compile(r"[A-Za-z0-9_-]+")

node_names = st.text(min_size=1, max_size=80)
flow_names = st.text(min_size=1, max_size=40)


@settings(max_examples=500)
@given(st.lists(node_names, min_size=2, max_size=30, unique=True), flow_names)
@example(["a.b", "a_b", "a-b", "A-B", "a b"], "f")
@example(["x" * 40 + "1", "x" * 40 + "2"], "traffic")
@example(["y" * 200 + "a", "y" * 200 + "b"], "z" * 100)
@example(["é", "e", "E", "ｅ"], "flow")
def test_distinct_node_names_never_share_a_physical_name(nodes, flow):
    names = [physical_name(n, flow=flow, run="run-1") for n in nodes]
    assert len({p.k8s for p in names}) == len(nodes)
    assert len({p.subject for p in names}) == len(nodes)


@settings(max_examples=500)
@given(node_names, flow_names, st.one_of(st.none(), st.text(max_size=30)))
def test_physical_names_are_valid_dns_labels_and_subject_tokens(node, flow, run):
    name = physical_name(node, flow=flow, run=run)
    assert len(name.k8s) <= K8S_NAME_MAX
    assert DNS_1123.fullmatch(name.k8s), name.k8s
    tokens = name.subject.split(".")
    assert all(SUBJECT_TOKEN.fullmatch(t) for t in tokens), name.subject


@given(node_names, flow_names)
def test_physical_names_are_a_function_of_their_input(node, flow):
    assert physical_name(node, flow=flow) == physical_name(node, flow=flow)


@given(node_names, flow_names, st.text(min_size=1, max_size=10), st.text(min_size=1, max_size=10))
def test_runs_are_scoped(node, flow, run_a, run_b):
    a = physical_name(node, flow=flow, run=run_a)
    b = physical_name(node, flow=flow, run=run_b)
    assert (a.k8s == b.k8s) == (run_a == run_b)


def test_readable_part_is_kept():
    assert physical_name("Detector.V2", flow="traffic").k8s.startswith("traffic-detector-v2-")
