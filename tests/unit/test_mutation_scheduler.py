"""The scheduler model's decision modules at the edges the mutation run of issue 18 found
untested (docs/testing.md, "scheduler"): every refusal of the scoring configuration with
its exact words, the configuration's document and description, preferred-term operators
at their bounds, the engine's work budget and deadline, kube-scheduler's sample size with
a percentage, and what the engine says about a pod nothing fits."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from vfcore.cluster import ClusterSnapshot, Taint, Toleration, node
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import PodRequest
from vfcore.placement.scheduler import ScoringConfig, node_score, simulate
from vfcore.placement.scheduler.engine import Budget, Engine, num_feasible_nodes_to_find
from vfcore.placement.scheduler.scoring import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    PreferredTerm,
    intolerable_prefer_no_schedule,
    nonzero_request,
    normalised_totals,
    parse_kube_version,
)
from vfcore.placement.scheduler.simulation import ByPodCount, LastTie, RandomTie
from vfcore.placement.scheduler.workloads import SpreadConstraint

GPU = "nvidia.com/gpu"
GIB = 2**30
SHAPE_HINT = "write points as (utilization 0..100, score 0..10)"


def refusal(make: Callable[[], object]) -> tuple[str, str, str]:
    with pytest.raises(InvalidInputError) as caught:
        make()
    err = caught.value
    return err.rule, err.message, err.hint


# -- ScoringConfig: every refusal, in its own words ---------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"strategy": "Spread"},
            (
                "invalid-scoring-strategy",
                "scoring strategy 'Spread' is not one of LeastAllocated, MostAllocated, "
                "RequestedToCapacityRatio",
                "use LeastAllocated (the default), MostAllocated or RequestedToCapacityRatio",
            ),
        ),
        (
            {"resources": ()},
            (
                "invalid-scoring-resources",
                "the scoring strategy lists no resources",
                "list at least one, e.g. resources=(('cpu', 1), ('memory', 1))",
            ),
        ),
        (
            {"resources": (("", 1),)},
            (
                "invalid-scoring-resources",
                "a scored resource has an empty name",
                "name it, e.g. 'nvidia.com/gpu'",
            ),
        ),
        (
            {"resources": ((GPU, 0),)},
            (
                "invalid-scoring-resources",
                f"resource {GPU} has weight 0, outside 1..100",
                "give every scored resource an integer weight from 1 to 100",
            ),
        ),
        (
            {"resources": ((GPU, 101),)},
            (
                "invalid-scoring-resources",
                f"resource {GPU} has weight 101, outside 1..100",
                "give every scored resource an integer weight from 1 to 100",
            ),
        ),
        (
            {"resources": ((GPU, True),)},
            (
                "invalid-scoring-resources",
                f"resource {GPU} has weight True, outside 1..100",
                "give every scored resource an integer weight from 1 to 100",
            ),
        ),
        (
            {"resources": ((GPU, 1.5),)},
            (
                "invalid-scoring-resources",
                f"resource {GPU} has weight 1.5, outside 1..100",
                "give every scored resource an integer weight from 1 to 100",
            ),
        ),
        (
            {"resources": (("cpu", 1), (GPU, 1), ("cpu", 2))},
            (
                "invalid-scoring-resources",
                "resources ['cpu'] are listed more than once",
                "list each resource once",
            ),
        ),
        (
            {"shape": ()},
            (
                "invalid-scoring-shape",
                "the RequestedToCapacityRatio shape has no points",
                "give at least one (utilization, score) point, e.g. ((0, 0), (100, 10))",
            ),
        ),
        (
            {"shape": ((0, 0), (100, 2.5))},
            (
                "invalid-scoring-shape",
                "shape point (100, 2.5) is not a pair of integers",
                SHAPE_HINT,
            ),
        ),
        (
            {"shape": ((0.5, 0),)},
            ("invalid-scoring-shape", "shape point (0.5, 0) is not a pair of integers", SHAPE_HINT),
        ),
        (
            {"shape": ((0, 0), (101, 10))},
            (
                "invalid-scoring-shape",
                "shape point (101, 10) is outside utilization 0..100, score 0..10",
                SHAPE_HINT,
            ),
        ),
        (
            {"shape": ((0, 0), (50, 11))},
            (
                "invalid-scoring-shape",
                "shape point (50, 11) is outside utilization 0..100, score 0..10",
                SHAPE_HINT,
            ),
        ),
        (
            {"shape": ((0, 0), (50, 5), (50, 10))},
            (
                "invalid-scoring-shape",
                "shape utilizations [0, 50, 50] are not strictly increasing",
                "sort the points by utilization, each once",
            ),
        ),
        (
            {"balanced_resources": ("cpu", "cpu")},
            (
                "invalid-balanced-resources",
                "balanced_resources ['cpu', 'cpu'] has an empty or repeated name",
                "list each resource once, e.g. ('cpu', 'memory')",
            ),
        ),
        (
            {"balanced_resources": ("cpu", "")},
            (
                "invalid-balanced-resources",
                "balanced_resources ['cpu', ''] has an empty or repeated name",
                "list each resource once, e.g. ('cpu', 'memory')",
            ),
        ),
        (
            {"kube_version": "1.28"},
            (
                "unsupported-kube-version",
                "Kubernetes 1.28 is not modelled: the model predicts 1.29 to 1.36",
                "give one of 1.29, 1.30, 1.31, 1.32, 1.33, 1.34, 1.35, 1.36; a newer cluster "
                "is closest to 1.36, an older one to 1.29",
            ),
        ),
        (
            {"kube_version": "one.36"},
            (
                "invalid-kube-version",
                "kube version 'one.36' is not a Kubernetes minor version such as 1.36",
                "give MAJOR.MINOR, e.g. --kube-version 1.36 (a v prefix and a patch number "
                "are accepted)",
            ),
        ),
    ],
)
def test_scoring_config_refusals_say_what_and_why(
    kwargs: dict[str, Any], expected: tuple[str, str, str]
) -> None:
    assert refusal(lambda: ScoringConfig(**kwargs)) == expected


@pytest.mark.parametrize(
    "label", ["fit_weight", "balanced_weight", "taint_weight", "node_affinity_weight"]
)
@pytest.mark.parametrize("bad", [-1, 1.0, True])
def test_each_plugin_weight_is_refused_by_its_own_name(label: str, bad: object) -> None:
    assert refusal(lambda: ScoringConfig(**{label: bad})) == (  # type: ignore[arg-type]
        "invalid-plugin-weight",
        f"{label} is {bad!r}; a plugin weight is an integer >= 0",
        "use 1 (the default), a larger integer, or 0 to turn the plugin off",
    )


def test_scoring_config_accepts_its_bounds() -> None:
    cfg = ScoringConfig(
        resources=((GPU, 100), ("cpu", 1)),
        shape=((0, 10), (100, 0)),
        fit_weight=0,
        balanced_weight=0,
        taint_weight=0,
        node_affinity_weight=0,
        kube_version="v1.29.3",
    )
    assert cfg.kube_version == "1.29"
    assert ScoringConfig(shape=((0, 0),)).shape == ((0, 0),)
    assert parse_kube_version("1.36") == "1.36"


def test_scoring_config_document_and_description() -> None:
    cfg = ScoringConfig(
        strategy="RequestedToCapacityRatio",
        resources=((GPU, 3), ("cpu", 1)),
        shape=((0, 0), (50, 4), (100, 10)),
        fit_weight=2,
        balanced_weight=0,
        balanced_resources=("cpu", "memory", GPU),
        kube_version="1.35",
        taint_weight=5,
        node_affinity_weight=7,
        spread_weight=4,
        interpod_weight=6,
        image_weight=8,
        default_spread=(SpreadConstraint(2, "zone", "DoNotSchedule"),),
        percentage_of_nodes_to_score=30,
    )
    assert cfg.to_dict() == {
        "strategy": "RequestedToCapacityRatio",
        "resources": [{"name": GPU, "weight": 3}, {"name": "cpu", "weight": 1}],
        "shape": [
            {"utilization": 0, "score": 0},
            {"utilization": 50, "score": 4},
            {"utilization": 100, "score": 10},
        ],
        "fit_weight": 2,
        "balanced_weight": 0,
        "balanced_resources": ["cpu", "memory", GPU],
        "kube_version": "1.35",
        "taint_weight": 5,
        "node_affinity_weight": 7,
        "spread_weight": 4,
        "interpod_weight": 6,
        "image_weight": 8,
        "default_spread": [
            {
                "max_skew": 2,
                "topology_key": "zone",
                "when_unsatisfiable": "DoNotSchedule",
                "selector": None,
            }
        ],
        "percentage_of_nodes_to_score": 30,
    }
    assert cfg.describe() == (
        f"RequestedToCapacityRatio on {GPU}×3, cpu×1 (weight 2) shape [[0, 0], [50, 4], [100, 10]]"
        f" + BalancedAllocation on cpu, memory, {GPU} (weight 0)"
    )
    assert ScoringConfig(strategy="MostAllocated").describe() == (
        "MostAllocated on cpu×1, memory×1 (weight 1) + BalancedAllocation on cpu, memory (weight 1)"
    )


# -- PreferredTerm: weights and operators at their bounds ---------------------------------------


@pytest.mark.parametrize("weight", [1, 100])
def test_a_preferred_term_weight_of_1_or_100_is_accepted(weight: int) -> None:
    assert PreferredTerm(weight, ()).weight == weight


@pytest.mark.parametrize("weight", [0, 101, True, 2.0])
def test_a_preferred_term_weight_outside_1_to_100_is_refused(weight: object) -> None:
    assert refusal(lambda: PreferredTerm(weight, ())) == (  # type: ignore[arg-type]
        "invalid-preferred-term",
        f"a preferred node-affinity term has weight {weight!r}, outside 1..100",
        "give each preferred term an integer weight from 1 to 100",
    )


def test_a_preferred_term_operator_is_refused_by_name() -> None:
    assert refusal(lambda: PreferredTerm(1, (("zone", "Near", ("a",)),))) == (
        "invalid-preferred-term",
        "requirement on 'zone' has operator 'Near'",
        "use one of In, NotIn, Exists, DoesNotExist, Gt, Lt",
    )


@pytest.mark.parametrize(
    ("expression", "labels", "matches"),
    [
        (("zone", "NotIn", ("a",)), {}, True),
        (("zone", "NotIn", ("a",)), {"zone": "b"}, True),
        (("zone", "NotIn", ("a",)), {"zone": "a"}, False),
        (("zone", "DoesNotExist", ()), {}, True),
        (("zone", "DoesNotExist", ()), {"zone": "a"}, False),
        (("gpus", "Gt", ("4",)), {"gpus": "5"}, True),
        (("gpus", "Gt", ("4",)), {"gpus": "4"}, False),
        (("gpus", "Lt", ("4",)), {"gpus": "3"}, True),
        (("gpus", "Lt", ("4",)), {"gpus": "4"}, False),
        (("gpus", "Lt", ("4",)), {"gpus": "5"}, False),
        (("gpus", "Lt", ("4",)), {}, False),  # no label: never a number
        (("gpus", "Gt", ("4",)), {"gpus": "many"}, False),
        (("gpus", "Gt", ()), {"gpus": "5"}, False),  # no bound given
    ],
)
def test_preferred_term_operators_at_their_bounds(
    expression: tuple[str, str, tuple[str, ...]], labels: dict[str, str], matches: bool
) -> None:
    assert PreferredTerm(1, (expression,)).matches(labels) is matches


# -- small scoring rules ------------------------------------------------------------------------


def test_nonzero_request_defaults_per_resource() -> None:
    assert nonzero_request({}, "cpu") == DEFAULT_MILLI_CPU_REQUEST
    assert nonzero_request({}, "memory") == DEFAULT_MEMORY_REQUEST
    assert nonzero_request({"memory": 5}, "memory") == 5
    assert nonzero_request({"cpu": 0}, "cpu") == DEFAULT_MILLI_CPU_REQUEST


def test_only_a_toleration_for_every_effect_or_prefer_no_schedule_counts_for_the_score() -> None:
    soft = Taint(GPU, "present", "PreferNoSchedule")
    assert intolerable_prefer_no_schedule([soft], [Toleration(GPU, "Exists", effect=None)]) == 0
    assert (
        intolerable_prefer_no_schedule(
            [soft], [Toleration(GPU, "Exists", effect="PreferNoSchedule")]
        )
        == 0
    )
    assert (
        intolerable_prefer_no_schedule([soft], [Toleration(GPU, "Exists", effect="NoSchedule")])
        == 1
    )
    hard = Taint(GPU, "present", "NoSchedule")
    assert intolerable_prefer_no_schedule([hard, soft, soft], []) == 2


def test_normalised_totals_weight_1_counts_and_each_plugin_is_judged_on_its_own() -> None:
    cfg = ScoringConfig(taint_weight=1, node_affinity_weight=1)
    assert normalised_totals(cfg, [10, 10], [0, 1], [0, 0]) == [110, 10]
    # taints the same everywhere (left out), affinity differs (still added)
    assert normalised_totals(ScoringConfig(), [10, 10], [1, 1], [0, 50]) == [10, 210]


# -- Budget ---------------------------------------------------------------------------------------


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_budget_spends_exactly_its_work() -> None:
    budget = Budget(5)
    assert budget.charge(2) and budget.used == 2
    assert budget.charge(3) and budget.used == 5  # exactly the bound: still within
    assert not budget.charge(1)
    assert budget.used == 6


def test_a_budget_of_zero_allows_a_free_charge_only() -> None:
    assert Budget(0).charge(0)
    assert not Budget(0).charge(1)


def test_a_budget_deadline_is_seconds_after_now_and_inclusive() -> None:
    clock = Clock(100.0)
    budget = Budget(10, seconds=5.0, clock=clock)
    assert budget.deadline == 105.0
    assert not budget.out_of_time()
    clock.now = 105.0
    assert not budget.out_of_time() and budget.charge(1)
    clock.now = 105.5
    assert budget.out_of_time() and not budget.charge(1)


def test_a_budget_without_both_seconds_and_clock_has_no_deadline() -> None:
    assert Budget(10, seconds=5.0).deadline is None
    clocked = Budget(10, clock=Clock())
    assert clocked.deadline is None and not clocked.out_of_time() and clocked.charge(10)


def test_a_shared_budget_keeps_the_deadline_and_has_its_own_work() -> None:
    clock = Clock(0.0)
    parent = Budget(100, seconds=1.0, clock=clock)
    child = parent.share(3)
    assert (child.work, child.used, child.deadline) == (3, 0, 1.0)
    assert child.charge(3) and not child.charge(1)
    clock.now = 2.0
    assert child.out_of_time()


# -- num_feasible_nodes_to_find with a percentage --------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "percentage", "found"),
    [
        (20_000, 1, 200),  # 1 % is taken as given (kube-scheduler's floor of 5 % is for adaptive)
        (20_000, 2, 400),
        (5_000, 1, 100),  # never fewer than 100
        (1_000, 10, 100),
        (1_000, 100, 1_000),
        (99, 10, 99),
        (100, 0, 100),
        (20_000, 0, 1_000),  # adaptive: 50 - 160 → 5 %
    ],
)
def test_num_feasible_nodes_to_find_with_a_percentage(
    nodes: int, percentage: int, found: int
) -> None:
    assert num_feasible_nodes_to_find(nodes, percentage) == found


# -- the engine ---------------------------------------------------------------------------------


def pod(name: str, workload: str = "w", **requests: int) -> PodRequest:
    return PodRequest(name, workload, 0, tuple(sorted(requests.items())))


def test_best_of_nothing_that_fits_is_none_and_no_states() -> None:
    cluster = ClusterSnapshot.of([node("a", allocatable={"cpu": 1000})])
    engine = Engine([pod("w/0", cpu=2000)], cluster, ScoringConfig(), {}, "empty")
    classes = engine.initial_classes()
    assert engine.best(0, classes) == (None, [])


def test_a_resource_the_pod_does_not_request_may_be_overcommitted() -> None:
    # bound pods take more memory than the node has left allocatable (allocatable shrank);
    # a pod asking for none is not refused for it (only requested resources are checked)
    n = node("a", allocatable={"cpu": 4000, "memory": 8 * GIB}, requested={"memory": 9 * GIB})
    sim = simulate([pod("w/0", cpu=1000)], ClusterSnapshot.of([n]))
    assert sim.placements == (("w/0", "a"),)
    assert sim.stranded == ()


def test_the_reasons_line_counts_what_the_run_placed_on_top_of_what_is_bound() -> None:
    # 4 cpu / 16 GiB, 1 cpu + 8 GiB bound; the run places 2 cpu + 4 GiB; the next pod
    # (2 cpu + 2 GiB) is short of cpu only: 12 GiB of 16 are taken, not 8 + 12 + 4
    n = node(
        "a",
        allocatable={"cpu": 4000, "memory": 16 * GIB, "pods": 3},
        requested={"cpu": 1000, "memory": 8 * GIB, "pods": 1},
    )
    first = pod("w/0", cpu=2000, memory=4 * GIB)
    second = pod("w/1", cpu=2000, memory=2 * GIB)
    sim = simulate([first, second], ClusterSnapshot.of([n]))
    assert sim.placements == (("w/0", "a"),)
    assert [(s.pod, s.reason) for s in sim.stranded] == [
        ("w/1", "0/1 nodes fit w/1: 1 Insufficient cpu")
    ]


def test_pods_of_one_shape_keep_their_own_remedy_affinity() -> None:
    # equal shapes, workloads pinned by a remedy's affinity: their kinds must not merge
    cluster = ClusterSnapshot.of(
        [node("a", allocatable={"cpu": 4000}), node("b", allocatable={"cpu": 4000})]
    )

    def w(workload: str, cpu: int = 1000) -> PodRequest:
        return pod(f"{workload}/0", workload=workload, cpu=cpu)

    # free/0 takes a (first of a tie); pinned/0 must follow it although b scores higher
    sim = simulate([w("free"), w("pinned")], cluster, affinity={"pinned": ["a"]})
    assert sim.placements == (("free/0", "a"), ("pinned/0", "a"))
    # pinned/0 to b; free/0 is not pinned with it and takes the emptier a
    sim = simulate([w("pinned"), w("free")], cluster, affinity={"pinned": ["b"]})
    assert sim.placements == (("pinned/0", "b"), ("free/0", "a"))
    # two workloads pinned to different nodes
    sim = simulate([w("p1"), w("p2")], cluster, affinity={"p1": ["a"], "p2": ["b"]})
    assert sim.placements == (("p1/0", "a"), ("p2/0", "b"))
    sim = simulate([w("p1"), w("p2")], cluster, affinity={"p1": ["b"], "p2": ["b"]})
    assert sim.placements == (("p1/0", "b"), ("p2/0", "b"))
    stranded = simulate([w("pinned", 5000)], cluster, affinity={"pinned": ["b"]})
    assert stranded.stranded[0].reason == (
        "0/2 nodes fit pinned/0: 1 Insufficient cpu, "
        "1 node(s) didn't match Pod's node affinity/selector"
    )


@pytest.mark.parametrize("bracket", ["empty", "full"])
def test_the_simulation_says_how_unknown_nodes_were_bracketed(bracket: str) -> None:
    n = node("a", allocatable={"cpu": 4000}, unknown_reason="no pods listed")
    sim = simulate([pod("w/0", cpu=1000)], ClusterSnapshot.of([n]), unknown_as=bracket)  # type: ignore[arg-type]
    assert sim.unknown_as == bracket
    assert sim.unknown_nodes == ("a",)
    assert bool(sim.placements) is (bracket == "empty")


# -- the simulation: tie policies, refusals, stranded steps ------------------------------------


def test_last_tie_takes_the_node_whose_name_sorts_last_not_the_highest_state() -> None:
    # state 0 holds "z", state 1 holds "a" and "b": the last name is z, in state 0
    assert LastTie().choose([0, 1], {0: ["z"], 1: ["a", "b"]}) == (0, 0)
    assert LastTie().choose([0, 1], {0: ["a"], 1: ["b", "c"]}) == (1, 1)


def test_random_tie_draws_over_the_tied_nodes_in_name_order() -> None:
    classes = {0: ["c", "d"], 1: ["a"]}
    names = ["a", "c", "d"]  # the states ordered by their first member's name
    where = {"a": (1, 0), "c": (0, 0), "d": (0, 1)}
    for seed in range(6):
        pick = random.Random(seed).randrange(3)
        assert RandomTie(random.Random(seed)).choose([0, 1], classes) == where[names[pick]]


def test_random_tie_draws_between_two_single_nodes_and_not_for_one() -> None:
    rng = random.Random(7)
    before = rng.getstate()
    assert RandomTie(rng).choose([3], {3: ["a"]}) == (3, 0)
    assert rng.getstate() == before  # one tied node: nothing drawn
    seen = {RandomTie(rng).choose([0, 1], {0: ["a"], 1: ["b"]}) for _ in range(40)}
    assert seen == {(0, 0), (1, 0)}
    seen = {RandomTie(rng).choose([0], {0: ["a", "b"]}) for _ in range(40)}
    assert seen == {(0, 0), (0, 1)}


def test_spread_and_pack_take_the_fewest_and_the_most_pods() -> None:
    cluster = ClusterSnapshot.of([node(n, allocatable={"cpu": 8000}) for n in ("a", "b", "c")])
    engine = Engine([pod("w/0", cpu=1000)], cluster, ScoringConfig(), {}, "empty")
    (empty,) = engine.initial_classes()
    one = engine.successor(0, empty)
    two = engine.successor(0, one)
    classes = {empty: ["c"], one: ["b"], two: ["a"]}
    spread = ByPodCount(engine, fewest=True)
    pack = ByPodCount(engine, fewest=False)
    assert (spread.name, pack.name) == ("spread", "pack")
    assert spread.choose([two, one, empty], classes) == (empty, 0)
    assert pack.choose([empty, one, two], classes) == (two, 0)
    assert pack.choose([empty, one], classes) == (one, 0)


def test_a_stranded_pod_step_has_no_node_score_or_tie() -> None:
    sim = simulate(
        [pod("w/0", cpu=9000)], ClusterSnapshot.of([node("a", allocatable={"cpu": 1000})])
    )
    assert [(s.pod, s.node, s.score, s.tied_nodes, s.tied_states) for s in sim.steps] == [
        ("w/0", None, None, 0, 0)
    ]


def test_simulation_refusals_say_what_and_why() -> None:
    cluster = ClusterSnapshot.of([node("a", allocatable={"cpu": 1000})])
    p0, p1 = pod("w/0", cpu=1), pod("w/1", cpu=1)
    assert refusal(lambda: simulate([p0], cluster, tie="middle")) == (  # type: ignore[arg-type]
        "invalid-tie-policy",
        "tie policy 'middle' is not 'first', 'last' or a random.Random",
        "pass tie='first', tie='last' or tie=random.Random(<seed>)",
    )
    assert refusal(lambda: simulate([p0], cluster, unknown_as="half")) == (  # type: ignore[arg-type]
        "invalid-unknown-bracket",
        "unknown_as is 'half'",
        "use 'empty' or 'full'",
    )
    assert refusal(lambda: simulate([p0, p0], cluster)) == (
        "duplicate-pod",
        "pod w/0 is listed twice",
        "pass each pod once (pods are named <node>/<replica>)",
    )
    assert refusal(lambda: simulate([p0, p1], cluster, order=["w/0", "w/2"])) == (
        "invalid-order",
        "the apply order is not a permutation of the pods (missing ['w/1'], "
        "unknown or repeated ['w/2'])",
        "list every pod exactly once",
    )
    assert refusal(lambda: simulate([p0, p1], cluster, order=["w/0", "w/0", "w/1"]))[1] == (
        "the apply order is not a permutation of the pods (missing [], unknown or repeated ['w/0'])"
    )
    assert refusal(lambda: simulate([p0, p1], cluster, order=["w/0", "w/0"]))[1] == (
        "the apply order is not a permutation of the pods (missing ['w/1'], "
        "unknown or repeated ['w/0'])"
    )


def test_a_node_score_document_names_each_plugin() -> None:
    n = node("a", allocatable={GPU: 4})
    p = PodRequest("p/0", "p", 0, ((GPU, 2),))
    score = node_score(p, n, config=ScoringConfig(resources=((GPU, 1),), fit_weight=2))
    assert score.to_dict() == {"fit": 50, "balanced": 0, "total": 100}


def test_taint_toleration_counts_when_every_node_has_a_soft_taint() -> None:
    # no node is free of PreferNoSchedule taints; the one with fewer still wins
    soft = [Taint(f"soft-{i}", "", "PreferNoSchedule") for i in range(2)]
    cluster = ClusterSnapshot.of(
        [
            node("a", allocatable={"cpu": 4000}, taints=soft),
            node("b", allocatable={"cpu": 4000}, taints=soft[:1]),
        ]
    )
    assert simulate([pod("w/0", cpu=1000)], cluster).placements == (("w/0", "b"),)
