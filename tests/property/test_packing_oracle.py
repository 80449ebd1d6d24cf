"""CP-SAT against brute force on small instances: same verdict, valid placements.

Random instances mostly do not fit; planted ones (``fitting_instances``) always
do and overfull ones (``overfull_instances``) never do, so each law sees its
side of the verdict on most examples (the outcome is labelled with ``event``).
"""

from __future__ import annotations

from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from tests.property.cluster_strategies import (
    fitting_instances,
    node_lists,
    overfull_instances,
    pod_lists,
    tight_gpu_instances,
)
from vfcore.placement.fit import fits
from vfcore.placement.packing import SolverConfig, check_placement, pack

CONFIG = SolverConfig.deterministic(max_deterministic_time=20.0)


def brute_force(pods, nodes, *, allow_skip=False):
    """The most pods that can be placed (exhaustive search with capacity pruning)."""
    extra = [dict() for _ in nodes]
    best = 0

    def dfs(k, placed):
        nonlocal best
        if placed + (len(pods) - k) <= best:
            return
        if k == len(pods):
            best = max(best, placed)
            return
        pod = pods[k]
        for i, node in enumerate(nodes):
            if fits(pod, node, extra[i]):
                for r, u in pod.requests:
                    extra[i][r] = extra[i].get(r, 0) + u
                extra[i]["pods"] = extra[i].get("pods", 0) + 1
                dfs(k + 1, placed + 1)
                for r, u in pod.requests:
                    extra[i][r] -= u
                extra[i]["pods"] -= 1
                if best == len(pods):
                    return
        if allow_skip:
            dfs(k + 1, placed)

    dfs(0, 0)
    return best


@settings(max_examples=250)
@given(
    st.one_of(
        st.tuples(pod_lists(max_pods=7), node_lists(max_nodes=4)),
        fitting_instances(max_pods=7, max_nodes=4),
    )
)
def test_cp_sat_verdict_equals_brute_force(instance):
    pods, nodes = instance
    result = pack(pods, nodes, config=CONFIG)
    feasible = brute_force(pods, nodes) == len(pods)
    event(f"asserted: {'fits' if feasible else 'does not fit'}")
    assert result.feasible is feasible, (result.report, result.proofs)
    assert check_placement(pods, nodes, result.assignments) == ()
    if feasible:
        assert result.unplaced == ()
        assert len(result.assignments) == len(pods)
    else:
        assert result.unplaced
        assert len(result.assignments) + len(result.unplaced) == len(pods)


@settings(max_examples=120)
@given(
    st.one_of(
        overfull_instances(max_pods=7, max_nodes=3).map(lambda i: ("overfull", i)),
        st.tuples(st.just("random"), st.tuples(pod_lists(max_pods=6), node_lists(max_nodes=3))),
    )
)
def test_partial_placement_of_an_infeasible_instance_is_maximal(labelled):
    origin, (pods, nodes) = labelled
    result = pack(pods, nodes, config=CONFIG)
    if origin == "overfull":
        assert result.feasible is False  # more demand than all nodes have free
    assume(result.feasible is False)
    event(f"asserted: {origin}, infeasible")
    assert len(result.assignments) == brute_force(pods, nodes, allow_skip=True)
    assert check_placement(pods, nodes, result.assignments) == ()


@settings(max_examples=250)
@given(tight_gpu_instances())
def test_cp_sat_decides_tight_gpu_packings_like_brute_force(instance):
    pods, nodes = instance
    result = pack(pods, nodes, config=CONFIG)
    assert result.feasible is (brute_force(pods, nodes) == len(pods))
    assert check_placement(pods, nodes, result.assignments) == ()
