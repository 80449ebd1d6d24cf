"""Laws of the scheduler model's small rules that the mutation run of issue 18 showed
no test held (docs/testing.md, "scheduler"): the work budget, kube-scheduler's sample
size, the preferred-term operators, and the random tie policy's range."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from vfcore.placement.scheduler.engine import Budget, num_feasible_nodes_to_find
from vfcore.placement.scheduler.scoring import PreferredTerm
from vfcore.placement.scheduler.simulation import RandomTie

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
