"""Metamorphic laws of placement and of the three-valued plan verdict."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.cluster_strategies import node_lists, pod_lists
from vfcore.cluster import ClusterSnapshot, node
from vfcore.packing import SolverConfig, pack
from vfcore.plan import plan_pods

CONFIG = SolverConfig.deterministic(max_deterministic_time=20.0)


def verdict(pods, nodes):
    return pack(pods, nodes, config=CONFIG).feasible


@settings(max_examples=150)
@given(pod_lists(), node_lists(), node_lists(max_nodes=1))
def test_adding_a_node_never_turns_fits_into_does_not_fit(pods, nodes, extra):
    new = replace(extra[0], name="zz-added")
    if verdict(pods, nodes) is True:
        assert verdict(pods, [*nodes, new]) is True


@settings(max_examples=150)
@given(pod_lists(), node_lists(), st.data())
def test_freeing_capacity_never_turns_fits_into_does_not_fit(pods, nodes, data):
    i = data.draw(st.integers(0, len(nodes) - 1))
    freed = nodes[i].as_empty()
    if verdict(pods, nodes) is True:
        assert verdict(pods, [*nodes[:i], freed, *nodes[i + 1 :]]) is True


@settings(max_examples=150)
@given(pod_lists(), node_lists(), st.data())
def test_removing_a_pod_never_turns_fits_into_does_not_fit(pods, nodes, data):
    i = data.draw(st.integers(0, len(pods) - 1))
    if verdict(pods, nodes) is True:
        assert verdict([*pods[:i], *pods[i + 1 :]], nodes) is True


@settings(max_examples=150)
@given(pod_lists(), node_lists(), st.randoms(use_true_random=False))
def test_shuffling_pods_or_nodes_changes_nothing(pods, nodes, rnd):
    before = pack(pods, nodes, config=CONFIG)
    shuffled_pods, shuffled_nodes = list(pods), list(nodes)
    rnd.shuffle(shuffled_pods)
    rnd.shuffle(shuffled_nodes)
    after = pack(shuffled_pods, shuffled_nodes, config=CONFIG)
    assert after.feasible == before.feasible
    assert after.assignments == before.assignments  # deterministic, whatever the input order


@settings(max_examples=150)
@given(pod_lists(), node_lists(), st.data())
def test_making_a_node_unknown_only_moves_the_verdict_towards_unknown(pods, nodes, data):
    i = data.draw(st.integers(0, len(nodes) - 1))
    known = plan_pods(pods, ClusterSnapshot.of(nodes), solver=CONFIG, predict_scheduler=False)
    hidden = node(
        nodes[i].name,
        allocatable=dict(nodes[i].allocatable),
        labels=dict(nodes[i].labels),
        taints=nodes[i].taints,
        ready=nodes[i].ready,
        unschedulable=nodes[i].unschedulable,
        unknown_reason="pods refused",
    )
    cluster = ClusterSnapshot.of([*nodes[:i], hidden, *nodes[i + 1 :]])
    bracketed = plan_pods(pods, cluster, solver=CONFIG, predict_scheduler=False)
    assert bracketed.verdict in (known.verdict, "unknown")


@settings(max_examples=100)
@given(pod_lists(), node_lists())
def test_a_fitting_plan_places_every_pod_on_known_nodes(pods, nodes):
    result = plan_pods(pods, ClusterSnapshot.of(nodes), solver=CONFIG, predict_scheduler=False)
    if result.verdict == "fits":
        assert {p.pod for p in pods} == set(result.placement)
        assert result.unplaced == ()
    elif result.verdict == "does-not-fit":
        assert result.unplaced
        assert all(u.summary.startswith(f"0/{len(nodes)} nodes fit ") for u in result.unplaced)
