"""Metamorphic laws of placement and of the three-valued plan verdict.

Laws about what may never turn "fits" into "does not fit" start from an
instance with a planted placement (``fitting_instances``), so every example
asserts: first that the packer finds it fits, then the law. Laws with two
outcomes draw random and planted instances alike, and label the outcome.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.property.cluster_strategies import fitting_instances, node_lists, pod_lists
from vfcore.cluster import ClusterSnapshot, node
from vfcore.placement.packing import SolverConfig, pack
from vfcore.placement.plan import plan_pods

CONFIG = SolverConfig.deterministic(max_deterministic_time=20.0)


def verdict(pods, nodes):
    return pack(pods, nodes, config=CONFIG).feasible


#: Random instances (mostly "does not fit") and planted ones ("fits"), for two-outcome laws.
instances = st.one_of(st.tuples(pod_lists(), node_lists()), fitting_instances())


@settings(max_examples=150)
@given(fitting_instances(), node_lists(max_nodes=1))
def test_adding_a_node_never_turns_fits_into_does_not_fit(instance, extra):
    pods, nodes = instance
    new = replace(extra[0], name="zz-added")
    assert verdict(pods, nodes) is True  # the planted placement is found
    event("asserted: fits, and fits with a node added")
    assert verdict(pods, [*nodes, new]) is True


@settings(max_examples=150)
@given(fitting_instances(), st.data())
def test_freeing_capacity_never_turns_fits_into_does_not_fit(instance, data):
    pods, nodes = instance
    i = data.draw(st.integers(0, len(nodes) - 1))
    freed = nodes[i].as_empty()
    assert verdict(pods, nodes) is True
    event(f"asserted: fits, freed a node {'with' if nodes[i].requested else 'without'} pods bound")
    assert verdict(pods, [*nodes[:i], freed, *nodes[i + 1 :]]) is True


@settings(max_examples=150)
@given(fitting_instances(), st.data())
def test_removing_a_pod_never_turns_fits_into_does_not_fit(instance, data):
    pods, nodes = instance
    i = data.draw(st.integers(0, len(pods) - 1))
    assert verdict(pods, nodes) is True
    event("asserted: fits, and fits with a pod removed")
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
@given(instances, st.data())
def test_making_a_node_unknown_only_moves_the_verdict_towards_unknown(instance, data):
    pods, nodes = instance
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
    event(f"asserted: {known.verdict} -> {bracketed.verdict}")
    assert bracketed.verdict in (known.verdict, "unknown")
    if bracketed.verdict == "unknown":  # the bracket: no fit without the node, a fit with it empty
        assert verdict(pods, [*nodes[:i], *nodes[i + 1 :]]) is not True
        assert verdict(pods, [*nodes[:i], nodes[i].as_empty(), *nodes[i + 1 :]]) is not False


@settings(max_examples=100)
@given(instances)
def test_a_fitting_plan_places_every_pod_on_known_nodes(instance):
    pods, nodes = instance
    result = plan_pods(pods, ClusterSnapshot.of(nodes), solver=CONFIG, predict_scheduler=False)
    event(f"asserted: {result.verdict}")
    assert result.verdict in ("fits", "does-not-fit")  # every node known, the solve is small
    if result.verdict == "fits":
        assert {p.pod for p in pods} == set(result.placement)
        assert result.unplaced == ()
    else:
        assert result.unplaced
        assert all(u.summary.startswith(f"0/{len(nodes)} nodes fit ") for u in result.unplaced)
