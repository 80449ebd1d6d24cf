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
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from vfcore import InvalidInputError
from vfcore.cluster import snapshot_from_kubernetes
from vfcore.quantity import MAX_INT64, MAX_UNITS, canonical_units, parse_quantity


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
