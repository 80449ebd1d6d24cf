"""Quantities read as apimachinery reads them (``k8s.io/apimachinery/pkg/api/resource``).

- ``Quantity.UnmarshalJSON`` trims surrounding whitespace (``strings.TrimSpace``)
  before ``ParseQuantity``;
- ``ParseQuantity`` rounds a non-zero magnitude *up* to a whole nano
  (``amount.Round(amount, Nano.infScale(), inf.RoundUp)``) and caps a
  ``BinarySI`` value at ``maxAllowed`` (2**63-1);
- ``ScaledValue`` (``MilliValue`` for cpu, ``Value`` otherwise) is
  ``ceil(q * 10^scale)``.

vfcore's own ceiling (``MAX_UNITS`` = 2**50) still applies on top: a
saturated value is far above it, so a node with one is unreadable.

Then the tables (issue 18): ``format_quantity`` for every resource kind with a
round-trip law, ``parse_quantity``'s float branch, every suffix and exponent form
with a number other than 1, and ``format_human`` keeping an overcommitted sign.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vfcore import InvalidInputError
from vfcore.cluster import snapshot_from_kubernetes
from vfcore.quantity import (
    MAX_INT64,
    MAX_UNITS,
    canonical_units,
    format_human,
    format_quantity,
    parse_quantity,
)


@pytest.mark.parametrize(
    "text",
    [" 2", "2 ", "  2  ", "\t2\n", "\u00a02\u3000", "\r\n2\v\f"],
    ids=["leading", "trailing", "both", "tab and newline", "nbsp and ideographic", "cr lf vt ff"],
)
def test_surrounding_whitespace_is_trimmed_as_go_trims_it(text: str) -> None:
    assert parse_quantity(text) == 2
    assert canonical_units("cpu", text) == 2000


@pytest.mark.parametrize("text", ["5 Gi", "1 000", "\x1c2", "2\x1f", "\u200b2"])
def test_inner_space_and_what_go_does_not_trim_stay_invalid(text: str) -> None:
    """U+001C..U+001F are whitespace to Python's str.strip() but not to Go's TrimSpace;
    U+200B (zero width space) is whitespace to neither."""
    with pytest.raises(InvalidInputError) as caught:
        parse_quantity(text)
    assert caught.value.rule == "invalid-quantity"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.0000000001", Fraction(1, 10**9)),  # 0.1n → 1n
        ("0.0000000011", Fraction(2, 10**9)),  # 1.1n → 2n
        ("1.5n", Fraction(2, 10**9)),
        ("0.1n", Fraction(1, 10**9)),
        ("1n", Fraction(1, 10**9)),
        ("-0.0000000001", Fraction(-1, 10**9)),  # the magnitude rounds up: away from zero
        ("1e-12", Fraction(1, 10**9)),
        ("0", Fraction(0)),
        ("0.000", Fraction(0)),
        ("1.0000000001", Fraction(10**9 + 1, 10**9)),
    ],
)
def test_sub_nano_values_round_up_to_a_whole_nano(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    ("resource", "text", "units"),
    [
        ("cpu", "0.0000000001", 1),  # 1n → MilliValue ceil → 1m
        ("cpu", "1n", 1),
        ("cpu", "1u", 1),
        ("cpu", "999u", 1),
        ("cpu", "1001u", 2),
        ("cpu", "0.0001", 1),
        ("cpu", "1m", 1),
        ("memory", "0.0000000001", 1),  # Value() is a ceil too
        ("memory", "0.5", 1),
        ("memory", "1.5Ki", 1536),
    ],
)
def test_canonical_units_are_the_ceiling_of_the_scaled_value(
    resource: str, text: str, units: int
) -> None:
    assert canonical_units(resource, text) == units


def test_binary_suffix_values_saturate_at_2_63_minus_1() -> None:
    assert parse_quantity("9999999999999999999Ei") == MAX_INT64
    assert parse_quantity("8Ei") == MAX_INT64  # 2**63 itself is one over the cap
    assert parse_quantity("7Ei") == 7 * 2**60  # under the cap: exact
    assert parse_quantity("-9999999999999999999Ei") == -MAX_INT64
    # decimal suffixes are not capped (inf.Dec holds them); vfcore's ceiling refuses both
    assert parse_quantity("9999999999999999999E") == 9999999999999999999 * 10**18


def test_a_saturated_value_is_still_over_vfcores_ceiling() -> None:
    with pytest.raises(InvalidInputError) as caught:
        canonical_units("memory", "9999999999999999999Ei")
    assert caught.value.rule == "quantity-out-of-range"
    assert "about 10**18 bytes" in caught.value.message  # 2**63-1, not 10**37
    assert MAX_INT64 > MAX_UNITS


def _node(allocatable: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n", "labels": {}},
        "spec": {},
        "status": {
            "allocatable": allocatable,
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _snapshot(node: dict[str, object]):  # type: ignore[no-untyped-def]
    nodes = json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]})
    pods = json.dumps({"apiVersion": "v1", "kind": "List", "items": []})
    return snapshot_from_kubernetes(nodes, pods)


def test_a_cluster_dump_with_whitespace_around_quantities_is_read() -> None:
    snap = _snapshot(_node({"cpu": " 8 ", "memory": "32Gi\n", "pods": "\t110"}))
    assert snap.unreadable_nodes == ()
    n = snap.node("n")
    assert (n.allocatable_of("cpu"), n.allocatable_of("memory"), n.allocatable_of("pods")) == (
        8000,
        32 * 2**30,
        110,
    )


def test_a_node_with_a_saturating_quantity_is_unreadable_not_8_eib() -> None:
    snap = _snapshot(_node({"cpu": "8", "memory": "9999999999999999999Ei", "pods": "110"}))
    (unreadable,) = snap.unreadable_nodes
    assert unreadable.name == "n"
    assert "over vfcore's limit of 2**50 units" in unreadable.reason
    assert unreadable.bound is not None
    assert unreadable.bound.allocatable_of("memory") == 32 * 2**30  # status.capacity bounds it


# -- format_quantity -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "units", "text"),
    [
        ("cpu", 2500, "2500m"),
        ("cpu", 2000, "2"),
        ("cpu", 1000, "1"),
        ("cpu", 999, "999m"),
        ("cpu", 1001, "1001m"),
        ("cpu", 0, "0"),
        ("cpu", 250, "250m"),
        ("memory", 8 * 2**30, "8Gi"),
        ("memory", 3 * 2**40, "3Ti"),
        ("memory", 1536 * 2**20, "1536Mi"),
        ("memory", 2**20, "1Mi"),
        ("memory", 1024, "1Ki"),
        ("memory", 1000, "1000"),
        ("memory", 1, "1"),
        ("memory", 0, "0"),
        ("ephemeral-storage", 2**30, "1Gi"),
        ("storage", 5 * 2**10, "5Ki"),
        ("pods", 110, "110"),
        ("pods", 1024, "1024"),
        ("nvidia.com/gpu", 2**30, str(2**30)),
    ],
)
def test_format_quantity_table(resource: str, units: int, text: str):
    assert format_quantity(resource, units) == text


@settings(max_examples=150)
@given(
    st.sampled_from(["cpu", "memory", "ephemeral-storage", "storage", "pods", "nvidia.com/gpu"]),
    st.one_of(
        st.integers(0, 10**6),
        st.integers(0, 2**12).map(lambda k: k * 2**20),
        st.integers(0, 64).map(lambda k: k * 1000),
    ),
)
def test_format_quantity_reads_back_to_the_same_units(resource: str, units: int):
    assert canonical_units(resource, format_quantity(resource, units)) == units


# -- parse_quantity --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.1, Fraction(1, 10)),
        (2.5, Fraction(5, 2)),
        (3.0, Fraction(3)),
        (-0.25, Fraction(-1, 4)),
        (0, Fraction(0)),
        (7, Fraction(7)),
        ("2e3", Fraction(2000)),
        ("3E-2", Fraction(3, 100)),
        ("1.5e+2", Fraction(150)),
        ("1e64", Fraction(10**64)),
        ("5e-64", Fraction(1, 10**9)),  # below a nano: rounded up to one
        ("2Ki", Fraction(2048)),
        ("3Mi", Fraction(3 * 2**20)),
        ("2Gi", Fraction(2 * 2**30)),
        ("2Ti", Fraction(2 * 2**40)),
        ("2Pi", Fraction(2 * 2**50)),
        ("2Ei", Fraction(2 * 2**60)),
        ("1.5Ki", Fraction(1536)),
        ("3n", Fraction(3, 10**9)),
        ("3u", Fraction(3, 10**6)),
        ("3m", Fraction(3, 1000)),
        ("3k", Fraction(3000)),
        ("3M", Fraction(3 * 10**6)),
        ("3G", Fraction(3 * 10**9)),
        ("3T", Fraction(3 * 10**12)),
        ("3P", Fraction(3 * 10**15)),
        ("3E", Fraction(3 * 10**18)),
        ("-2Gi", Fraction(-2 * 2**30)),
        ("+7", Fraction(7)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("-0.0000000001", Fraction(-1, 10**9)),  # magnitude up, sign kept
        ("1.0000000001", Fraction(1_000_000_001, 10**9)),
        ("0.5n", Fraction(1, 10**9)),
        ("7Ei", Fraction(7 * 2**60)),
        ("8Ei", Fraction(2**63 - 1)),  # 2**63 saturates at 2**63 - 1
        ("8E", Fraction(8 * 10**18)),  # a decimal suffix is not capped
    ],
)
def test_parse_quantity_table(value: object, expected: Fraction):
    assert parse_quantity(value) == expected


# -- format_human: an overcommitted value keeps its sign -----------------------------------------


@pytest.mark.parametrize(
    ("resource", "units", "text"),
    [
        ("cpu", -2500, "-2.5"),
        ("cpu", -250, "-0.25"),
        ("cpu", -3000, "-3"),
        ("cpu", 1010, "1.01"),
        ("memory", -(2**30), "-1.0Gi"),
        ("memory", -1, "-<0.1Gi"),
        ("pods", -3, "-3"),
    ],
)
def test_format_human_keeps_the_sign_of_an_overcommitted_value(
    resource: str, units: int, text: str
):
    assert format_human(resource, units) == text
