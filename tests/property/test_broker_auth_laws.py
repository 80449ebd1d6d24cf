"""Laws of the broker permission model (vfcore.runtime.broker_auth) over random valid flows.

For every valid flow and run id:

* **completeness**: every subject the topology lists for a node — its output
  edges (every partition), its dead-letter subject, its ledger entries, its own
  control, split and segment keys, its consumers' ``MSG.NEXT``/``INFO``/acks, the
  reads of the control and ledger streams — is allowed to its role, and every
  stream and consumer the run creates is allowed to the setup role;
* **isolation between nodes**: node A's publish allow-list matches no subject of
  another node's output edges, no other node's dead-letter subject, ledger
  entries or control keys, and no ``MSG.NEXT``/``CONSUMER.INFO``/ack of a
  consumer A does not read; A may subscribe to its own inbox only, never to
  another role's;
* **isolation between runs**: no role of run 1 may publish to any subject of
  run 2 of the same flow (edges, dead letters, ledger, the JetStream API on its
  streams and consumers, its buckets) nor subscribe to its inboxes;
* the permissions are deterministic, valid NATS subjects, and render into an
  ``authorization`` block that lists every role once.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.strategies import valid_specs
from vfcore import FlowSpec
from vfcore.runtime import (
    BrokerTopology,
    BrokerUser,
    broker_permissions,
    broker_topology,
    inbox_prefix,
    node_role,
    render_authorization,
    run_roles,
)
from vfcore.runtime.delivery import InputOrigin
from vfcore.runtime.topology import nats_subject_problem

run_ids = st.from_regex(r"\A[A-Za-z0-9](?:[A-Za-z0-9_-]{0,14}[A-Za-z0-9])?\Z")
API = "$JS.API"


def _node_subjects(topo: BrokerTopology, node: str) -> list[str]:
    """What a replica of ``node`` publishes to, as the broker transport does."""
    control = topo.control
    out = [s for e in topo.outputs(node) for s in e.subjects]
    out.append(topo.dead_letters.subject_of(node))
    out += [
        f"$KV.{control.bucket}.{control.stats_key(node, 0)}",
        f"$KV.{control.bucket}.{control.done_key(node, 3)}",
        f"$KV.{control.bucket}.{control.segment_key(node, 1)}",
        f"$KV.{control.bucket}.server",
        f"{API}.STREAM.INFO.KV_{control.bucket}",
        f"{API}.STREAM.MSG.GET.KV_{control.bucket}",
        f"_vfobj.{control.objects}.kabc.0a1b.0",
        f"{API}.DIRECT.GET.{control.objects}._vfobj.{control.objects}.kabc.0a1b.0",
    ]
    if control.splits:
        out.append(f"$KV.{control.splits}.{control.split_key(node, node, 17)}")
    if topo.ledger is not None:
        out.append(control.ledger_subject(node, InputOrigin("tok-x", 5).text))
        out.append(f"{API}.STREAM.MSG.GET.{topo.ledger.name}")
    for edge in topo.edges:
        if edge.child == node:
            for c in edge.consumers:
                out.append(f"{API}.CONSUMER.MSG.NEXT.{c.stream}.{c.name}")
                out.append(f"{API}.CONSUMER.INFO.{c.stream}.{c.name}")
                out.append(f"$JS.ACK.{c.stream}.{c.name}.1.7.7.1700000000000000000.0")
    return out


def _consumer_subjects(topo: BrokerTopology, node: str | None = None) -> list[str]:
    out = []
    for c in topo.consumers:
        if node is None or c.child != node:
            out.append(f"{API}.CONSUMER.MSG.NEXT.{c.stream}.{c.name}")
            out.append(f"{API}.CONSUMER.INFO.{c.stream}.{c.name}")
            out.append(f"$JS.ACK.{c.stream}.{c.name}.1.7.7.1700000000000000000.0")
    return out


def _run_subjects(topo: BrokerTopology) -> list[str]:
    """Everything of a run a stranger could aim at."""
    out: list[str] = []
    for node, _ in topo.control.node_tokens:
        out += _node_subjects(topo, node)
    for config in topo.all_streams():
        out += [f"{API}.STREAM.INFO.{config.name}", f"{API}.STREAM.DELETE.{config.name}"]
        out += [f"{API}.STREAM.PURGE.{config.name}", f"{API}.CONSUMER.CREATE.{config.name}.spy"]
    out += _consumer_subjects(topo)
    out.append(f"$KV.{topo.control.bucket}.{topo.control.stop_key}")
    return out


@settings(max_examples=80, deadline=None)
@given(valid_specs(), run_ids)
def test_every_subject_a_node_uses_is_allowed_to_it(spec: FlowSpec, run: str) -> None:
    topo = broker_topology(spec, run)
    for node in spec.names:
        perms = broker_permissions(topo, node_role(node))
        for subject in _node_subjects(topo, node):
            assert perms.allows_publish(subject), (node, subject)
        assert perms.allows_subscribe(f"{inbox_prefix(topo, node_role(node))}.abc.def")


@settings(max_examples=80, deadline=None)
@given(valid_specs(), run_ids)
def test_setup_may_create_every_stream_and_consumer_of_the_run(spec: FlowSpec, run: str) -> None:
    topo = broker_topology(spec, run)
    setup = broker_permissions(topo, "setup")
    for config in topo.all_streams():
        for op in ("INFO", "CREATE"):
            assert setup.allows_publish(f"{API}.STREAM.{op}.{config.name}")
        assert not setup.allows_publish(f"{API}.STREAM.DELETE.{config.name}")
    for c in topo.consumers:
        assert setup.allows_publish(f"{API}.CONSUMER.CREATE.{c.stream}.{c.name}")
        assert not setup.allows_publish(f"{API}.CONSUMER.MSG.NEXT.{c.stream}.{c.name}")
    for edge in topo.edges:
        for subject in edge.subjects:
            assert not setup.allows_publish(subject)


@settings(max_examples=80, deadline=None)
@given(valid_specs(), run_ids)
def test_node_a_publish_list_never_matches_node_b_subjects(spec: FlowSpec, run: str) -> None:
    topo = broker_topology(spec, run)
    control = topo.control
    for a in spec.names:
        perms = broker_permissions(topo, node_role(a))
        for b in spec.names:
            if b == a:
                continue
            theirs = [s for e in topo.outputs(b) for s in e.subjects]
            theirs.append(topo.dead_letters.subject_of(b))
            theirs += [
                f"$KV.{control.bucket}.{control.done_key(b, 0)}",
                f"$KV.{control.bucket}.{control.stats_key(b, 0)}",
            ]
            if topo.ledger is not None:
                theirs.append(control.ledger_subject(b, InputOrigin("t", 1).text))
            for subject in theirs:
                assert not perms.allows_publish(subject), (a, b, subject)
        for subject in _consumer_subjects(topo, a):
            assert not perms.allows_publish(subject), (a, subject)
        assert not perms.allows_publish(f"$KV.{control.bucket}.{control.stop_key}")
        for role in run_roles(topo):
            if role != node_role(a) and role != "admin":
                assert not perms.allows_subscribe(f"{inbox_prefix(topo, role)}.x")
        assert not perms.allows_subscribe(">") and not perms.allows_subscribe("_INBOX.x")


@settings(max_examples=60, deadline=None)
@given(valid_specs(), run_ids, run_ids)
def test_no_role_of_one_run_reaches_another_run(spec: FlowSpec, run: str, other: str) -> None:
    if run == other:
        return
    topo, theirs = broker_topology(spec, run), broker_topology(spec, other)
    targets = _run_subjects(theirs)
    inboxes = [f"{inbox_prefix(theirs, r)}.x" for r in run_roles(theirs)]
    for role in run_roles(topo):
        perms = broker_permissions(topo, role)
        for subject in targets:
            assert not perms.allows_publish(subject), (role, subject)
        for inbox in inboxes:
            assert not perms.allows_subscribe(inbox), (role, inbox)


@settings(max_examples=60, deadline=None)
@given(valid_specs(), run_ids)
def test_permissions_are_deterministic_valid_and_render_every_role(
    spec: FlowSpec, run: str
) -> None:
    topo = broker_topology(spec, run)
    roles = run_roles(topo)
    assert len(set(roles)) == len(roles) == len(spec.nodes) + 2
    users = []
    for i, role in enumerate(roles):
        perms = broker_permissions(topo, role)
        assert perms == broker_permissions(broker_topology(spec, run), role)
        assert list(perms.publish) == sorted(set(perms.publish))
        for subject in (*perms.publish, *perms.subscribe):
            assert nats_subject_problem(subject, wildcards=True) is None
        key = "U" + "".join("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"[(i + k) % 32] for k in range(55))
        users.append(BrokerUser(key, perms))
    text = render_authorization(users)
    assert text.count("nkey:") == len(roles)
    assert text.count("{") == text.count("}")
