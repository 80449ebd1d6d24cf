"""Laws of the scheduler model, against a brute-force oracle on small instances.

The oracle (``brute_force``, in tests/property/scheduler_strategies.py with the
instances) enumerates every node-level tie-break (no equivalence classes, no
memo) with :func:`vfcore.fit.fits` and :func:`vfcore.placement.scheduler.node_score`, so
it checks the model's node classes, search and bookkeeping independently.

Laws that need every pod placeable draw instances with a placement planted in
them (``planted_instances``) rather than skipping random ones that have none;
laws with several outcomes label them with ``hypothesis.event``. Then the small
rules no test held before issue 18: the work budget, kube-scheduler's sample
size, the preferred-term operators, and the random tie policy's range.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import replace

from hypothesis import assume, event, example, given, settings
from hypothesis import strategies as st

from tests.property.scheduler_strategies import (
    GIB,
    GPU,
    brute_force,
    clusters,
    configs,
    instances,
    pod_lists,
)
from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, NodeState, node
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.fit import fits
from vfcore.placement.scheduler import (
    ScoringConfig,
    claim_size,
    predict,
    remedy,
    simulate,
)
from vfcore.placement.scheduler.engine import Budget, num_feasible_nodes_to_find
from vfcore.placement.scheduler.scoring import PreferredTerm
from vfcore.placement.scheduler.simulation import RandomTie

#: One step of each resource: what a planted slack or a bound amount is counted in.
STEP = {GPU: 1, "cpu": 500, "memory": GIB, "pods": 1}


@st.composite
def planted_instances(
    draw: st.DrawFn, *, max_pods: int = 5, max_nodes: int = 3
) -> tuple[list[PodRequest], ClusterSnapshot]:
    """Pods with a placement planted in the cluster: every pod placeable by construction.

    Each pod gets a host; each host is built around its pods (Ready, labelled
    for their selectors) with room for what they request, something already
    bound and a slack that is often 0, so the placement is tight and the
    scheduler may well strand a pod that an exact packing places. Bystander
    nodes drawn as ``clusters`` draws them may join; node order is shuffled.
    """
    pods = draw(pod_lists(max_pods=max_pods))
    n_hosts = draw(st.integers(1, min(max_nodes, len(pods))))
    host_of = [draw(st.integers(0, n_hosts - 1)) for _ in pods]
    nodes: list[NodeState] = []
    for h in range(n_hosts):
        mine = [p for p, k in zip(pods, host_of, strict=True) if k == h]
        alloc: dict[str, int] = {}
        used: dict[str, int] = {}
        for r in (GPU, "cpu", "memory", "pods"):
            demand = len(mine) if r == "pods" else sum(p.request(r) for p in mine)
            bound = draw(st.sampled_from([0, 0, 0, 1])) * STEP[r]
            slack = draw(st.sampled_from([0, 0, 1, 2])) * STEP[r]
            alloc[r] = max(demand + bound + slack, STEP[r])
            if bound:
                used[r] = bound
        selected = any(p.node_selector for p in mine)
        labelled = selected or draw(st.integers(0, 7)) != 0
        nodes.append(
            node(
                f"h{h}",
                allocatable=alloc,
                requested=used,
                labels=dict([GPU_PRESENT_LABEL]) if labelled else {},
            )
        )
    if n_hosts < max_nodes and draw(st.booleans()):
        nodes += draw(clusters(max_nodes=max_nodes - n_hosts)).nodes
    order = draw(st.permutations(range(len(nodes))))
    renamed = [replace(nodes[k], name=f"n{i}") for i, k in enumerate(order)]
    return pods, ClusterSnapshot.of(renamed)


def replay_check(pods: Sequence[PodRequest], cluster: ClusterSnapshot, sim) -> None:
    """Every binding passes the filters given the ones before it; a stranded pod fits nowhere."""
    by_name = {p.pod: p for p in pods}
    extra: dict[str, dict[str, int]] = {n.name: {} for n in cluster.nodes}
    for pod_name, where in sim.placements:
        pod = by_name[pod_name]
        assert fits(pod, cluster.node(where), extra[where]), (pod_name, where)
        for r, units in pod.requests:
            extra[where][r] = extra[where].get(r, 0) + units
        extra[where]["pods"] = extra[where].get("pods", 0) + 1
    for stranded in sim.stranded:
        pod = by_name[stranded.pod]
        assert not any(fits(pod, n, extra[n.name]) for n in cluster.nodes), stranded.pod
        assert stranded.reason.startswith(f"0/{len(cluster.nodes)} nodes fit {pod.pod}")
    assert sorted([p for p, _ in sim.placements] + [s.pod for s in sim.stranded]) == sorted(by_name)


ties = st.one_of(st.sampled_from(["first", "last"]), st.integers(0, 2**16).map(random.Random))


@settings(max_examples=150)
@given(pods=pod_lists(max_pods=8), cluster=clusters(max_nodes=6), config=configs, tie=ties)
def test_every_simulated_placement_passes_the_filters(pods, cluster, config, tie):
    sim = simulate(pods, cluster, config=config, tie=tie)
    replay_check(pods, cluster, sim)


@settings(max_examples=150)
@given(instance=instances, config=configs)
@example(
    instance=(
        [
            PodRequest("w0/0", "w0", 0, ((GPU, 2),), (GPU_PRESENT_LABEL,), (GPU_TOLERATION,)),
            PodRequest("w0/1", "w0", 1, ((GPU, 2),), (GPU_PRESENT_LABEL,), (GPU_TOLERATION,)),
            PodRequest("w1/0", "w1", 0, ((GPU, 4),), (GPU_PRESENT_LABEL,), (GPU_TOLERATION,)),
        ],
        ClusterSnapshot.of(
            [
                node("n0", allocatable={GPU: 4}, labels=dict([GPU_PRESENT_LABEL])),
                node("n1", allocatable={GPU: 4}, labels=dict([GPU_PRESENT_LABEL])),
            ]
        ),
    ),
    config=ScoringConfig(resources=((GPU, 1),)),
)
def test_the_exhaustive_search_agrees_with_brute_force_over_node_level_ties(instance, config):
    pods, cluster = instance
    oracle = brute_force(pods, cluster, config)
    prediction = predict(pods, cluster, config=config)
    event(f"asserted: {oracle.verdict}")
    assert prediction.exhaustive
    assert prediction.verdict == oracle.verdict
    assert set(prediction.stranded_sometimes) == oracle.sometimes
    assert set(prediction.stranded_always) == oracle.always
    assert prediction.node_outcomes == oracle.leaves
    assert prediction.strand_probability == oracle.p_strand
    assert prediction.outcomes_explored <= oracle.leaves
    if prediction.example_stranding is not None:
        assert not prediction.example_stranding.lands
        replay_check(pods, cluster, prediction.example_stranding)
    if prediction.example_landing is not None:
        assert prediction.example_landing.lands


@settings(max_examples=60)
@given(
    instance=st.one_of(
        st.tuples(pod_lists(max_pods=10), clusters(max_nodes=6)),
        planted_instances(max_pods=8, max_nodes=6),
    ),
    config=configs,
    seeds=st.lists(st.integers(0, 2**16), min_size=1, max_size=4),
)
def test_every_random_tie_outcome_agrees_with_an_exhaustive_verdict(instance, config, seeds):
    pods, cluster = instance
    prediction = predict(pods, cluster, config=config)
    assume(prediction.exhaustive)
    event(f"asserted: {prediction.verdict}")
    for seed in seeds:
        sim = simulate(pods, cluster, config=config, tie=random.Random(seed))
        stranded = {s.pod for s in sim.stranded}
        assert set(prediction.stranded_always) <= stranded <= set(prediction.stranded_sometimes)
        if prediction.verdict == "lands":
            assert sim.lands
        if prediction.verdict == "strands":
            assert not sim.lands


@settings(max_examples=100)
@given(pods=pod_lists(max_pods=1), cluster=clusters(max_nodes=6), config=configs)
def test_a_single_pod_lands_iff_some_node_fits_it(pods, cluster, config):
    [pod] = pods
    fits_somewhere = any(fits(pod, n) for n in cluster.nodes)
    event(f"asserted: {'fits some node' if fits_somewhere else 'fits no node'}")
    assert (predict(pods, cluster, config=config).verdict == "lands") == fits_somewhere


@settings(max_examples=60)
@given(pods=pod_lists(max_pods=6), cluster=clusters(max_nodes=5), config=configs)
def test_the_model_is_deterministic(pods, cluster, config):
    first = predict(pods, cluster, config=config)
    again = predict(list(pods), ClusterSnapshot.of(reversed(cluster.nodes)), config=config)
    assert first.to_dict() == again.to_dict()
    assert simulate(pods, cluster, config=config) == simulate(pods, cluster, config=config)


@settings(max_examples=80)
@given(
    pods=pod_lists(max_pods=6),
    cluster=clusters(max_nodes=5),
    config=configs,
    data=st.data(),
)
def test_renaming_nodes_never_changes_the_exhaustive_verdict(pods, cluster, config, data):
    names = [n.name for n in cluster.nodes]
    shuffled = data.draw(st.permutations(names))
    renamed = ClusterSnapshot.of(
        replace(n, name=new) for n, new in zip(cluster.nodes, shuffled, strict=True)
    )
    a = predict(pods, cluster, config=config)
    b = predict(pods, renamed, config=config)
    assert (a.verdict, a.stranded_sometimes, a.stranded_always) == (
        b.verdict,
        b.stranded_sometimes,
        b.stranded_always,
    )
    assert (a.node_outcomes, a.strand_probability) == (b.node_outcomes, b.strand_probability)


def exact_placement(pods: Sequence[PodRequest], cluster: ClusterSnapshot) -> dict[str, str] | None:
    """Any placement of every pod, by brute force (the packer's job, here an oracle)."""
    names = [n.name for n in cluster.nodes]
    for choice in itertools.product(names, repeat=len(pods)):
        extra: dict[str, dict[str, int]] = {n: {} for n in names}
        ok = True
        for pod, where in zip(pods, choice, strict=True):
            if not fits(pod, cluster.node(where), extra[where]):
                ok = False
                break
            for r, units in pod.requests:
                extra[where][r] = extra[where].get(r, 0) + units
            extra[where]["pods"] = extra[where].get("pods", 0) + 1
        if ok:
            return dict(zip((p.pod for p in pods), choice, strict=True))
    return None


RANK = {"lands": 0, "at-risk": 1, "unknown": 2, "strands": 3}


@settings(max_examples=60)
@given(instance=planted_instances(max_pods=5, max_nodes=3), config=configs)
def test_a_remedy_is_rechecked_and_never_worse_than_applying_as_is(instance, config):
    pods, cluster = instance
    placement = exact_placement(pods, cluster)
    assert placement is not None  # the planted one, or another
    fix = remedy(pods, cluster, placement, config=config)
    event(f"asserted: {fix.verdict_before} -> {fix.kind} -> {fix.verdict_after}")
    assert RANK[fix.verdict_after] <= RANK[fix.verdict_before]
    again = predict(
        pods,
        cluster,
        config=config,
        order=fix.order,
        affinity=fix.affinity_map or None,
    )
    assert again.verdict == fix.verdict_after
    if "waves" in fix.kind:
        by_name = {p.pod: p for p in pods}
        sizes = [claim_size(by_name[name]) for name in fix.order]
        assert sizes == sorted(sizes, reverse=True)
    for workload, hosts in fix.affinity:
        assert set(hosts) == {placement[p.pod] for p in pods if p.node == workload}
    if fix.verdict_after == "lands" and fix.prediction.example_landing is not None:
        replay_check(pods, cluster, fix.prediction.example_landing)


# -- the small rules: the work budget, the sample size, preferred terms, random ties --------------

FAST = settings(max_examples=150)


@FAST
@given(st.integers(0, 50), st.lists(st.integers(0, 20), max_size=12))
def test_a_budget_allows_a_charge_exactly_while_the_running_total_is_within_its_work(
    work: int, charges: list[int]
) -> None:
    budget = Budget(work)
    total = 0
    for units in charges:
        total += units
        assert budget.charge(units) is (total <= work)
        assert budget.used == total


@FAST
@given(st.integers(0, 60_000), st.integers(0, 150))
def test_the_sample_is_every_node_below_100_and_between_100_and_all_of_them_above(
    nodes: int, percentage: int
) -> None:
    found = num_feasible_nodes_to_find(nodes, percentage)
    if nodes < 100 or percentage >= 100:
        assert found == nodes
    else:
        assert 100 <= found <= nodes
        # the documented share: the caller's percentage, else 50 - N/125 percent, at least 5
        share = percentage if percentage > 0 else max(50 - nodes // 125, 5)
        assert found == max(nodes * share // 100, 100)


labels = st.dictionaries(st.sampled_from(["k", "z"]), st.sampled_from(["1", "3", "5", "x", ""]))
values = st.lists(st.sampled_from(["1", "3", "5", "x"]), max_size=3).map(tuple)


@FAST
@given(labels, values)
def test_not_in_is_the_negation_of_in_and_does_not_exist_of_exists(
    node_labels: dict[str, str], vals: tuple[str, ...]
) -> None:
    def match(op: str) -> bool:
        return PreferredTerm(1, (("k", op, vals),)).matches(node_labels)

    assert match("NotIn") is not match("In")
    assert match("DoesNotExist") is not match("Exists")


@FAST
@given(st.integers(-20, 20), st.integers(-20, 20))
def test_gt_and_lt_are_strict_and_exclusive(have: int, bound: int) -> None:
    def match(op: str) -> bool:
        return PreferredTerm(1, (("k", op, (str(bound),)),)).matches({"k": str(have)})

    assert match("Gt") is (have > bound)
    assert match("Lt") is (have < bound)


@FAST
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=5),
    st.integers(0, 2**32),
)
def test_random_tie_picks_a_member_of_a_tied_state(sizes: list[int], seed: int) -> None:
    classes = {
        sid: [f"n{sid}-{i}" for i in range(size)] for sid, size in enumerate(sizes, start=10)
    }
    tied = sorted(classes, reverse=True)
    sid, index = RandomTie(random.Random(seed)).choose(tied, classes)
    assert sid in tied and 0 <= index < len(classes[sid])
