"""Quantities are bounded: nothing absurd reaches the solver, and user input gets a named error."""

from __future__ import annotations

import pytest

from vfcore import FlowSpec, InvalidInputError, validate
from vfcore.placement.claims import pod_requests
from vfcore.quantity import MAX_QUANTITY_CHARS, MAX_UNITS, canonical_units, format_human


@pytest.mark.parametrize(
    ("resource", "value", "units"),
    [
        ("memory", str(MAX_UNITS), MAX_UNITS),
        ("memory", "1Pi", MAX_UNITS),
        ("cpu", str(MAX_UNITS // 1000), MAX_UNITS // 1000 * 1000),
        ("nvidia.com/gpu", MAX_UNITS, MAX_UNITS),
        ("memory", "8Gi", 8 * 2**30),
    ],
    ids=[
        "memory equal to the ceiling is read",
        "1Pi is exactly the ceiling",
        "cpu just under the ceiling",
        "an int equal to the ceiling",
        "an ordinary quantity",
    ],
)
def test_quantities_up_to_the_ceiling_are_read(resource: str, value: object, units: int) -> None:
    assert canonical_units(resource, value) == units


@pytest.mark.parametrize(
    ("resource", "value", "rule"),
    [
        ("memory", str(MAX_UNITS + 1), "quantity-out-of-range"),
        ("memory", "9999999999999999999Ei", "quantity-out-of-range"),
        ("cpu", "1125899906842625m", "quantity-out-of-range"),
        ("cpu", str(MAX_UNITS // 1000 + 1), "quantity-out-of-range"),
        ("nvidia.com/gpu", 10**5000, "quantity-out-of-range"),
        ("memory", -(MAX_UNITS + 1), "quantity-out-of-range"),
        ("memory", "1" * 5001, "invalid-quantity"),
        ("memory", "1" * (MAX_QUANTITY_CHARS + 1), "invalid-quantity"),
        ("memory", "NaN", "invalid-quantity"),
        ("memory", float("nan"), "invalid-quantity"),
        ("memory", float("inf"), "invalid-quantity"),
        ("cpu", "1e308", "invalid-quantity"),
    ],
    ids=[
        "one over the ceiling",
        "9999999999999999999Ei",
        "millicores over the ceiling",
        "cores whose millicores pass the ceiling",
        "a 5001-digit int",
        "negative beyond the ceiling",
        "a 5001-digit string",
        "one character too long",
        "NaN text",
        "NaN float",
        "infinity",
        "exponent beyond 64",
    ],
)
def test_absurd_quantities_are_named_errors(resource: str, value: object, rule: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        canonical_units(resource, value)
    assert caught.value.rule == rule
    assert len(caught.value.message) < 300  # never the 5,000 digits back


def test_a_quantity_of_exactly_max_chars_is_parsed_to_its_value() -> None:
    text = "0" * (MAX_QUANTITY_CHARS - 1) + "7"
    assert canonical_units("pods", text) == 7


def _spec(requests: dict[str, str] | None = None) -> FlowSpec:
    return FlowSpec.from_dict(
        {
            "name": "f",
            "flow_type": "batch",
            "nodes": [
                {"name": "src", "kind": "producer"},
                {
                    "name": "work",
                    "kind": "processor",
                    "parents": ["src"],
                    "requests": requests or {"cpu": "1"},
                },
                {"name": "sink", "kind": "consumer", "parents": ["work"]},
            ],
        }
    )


@pytest.mark.parametrize(
    ("quantity", "rule"),
    [
        ("-100", "quantity-not-positive"),
        ("0", "quantity-not-positive"),
        ("0m", "quantity-not-positive"),
        ("lots", "invalid-quantity"),
        ("NaN", "invalid-quantity"),
        ("9999999999999999999Ei", "quantity-out-of-range"),
        ("1" * 5001, "invalid-quantity"),
    ],
    ids=["negative", "zero", "zero millicores", "a word", "NaN", "absurd", "5001 digits"],
)
def test_a_resources_override_must_be_a_positive_bounded_quantity(quantity: str, rule: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        pod_requests(_spec(), resources={"work": {"cpu": quantity}})
    assert caught.value.rule == rule


def test_the_smallest_positive_override_is_accepted() -> None:
    pods = pod_requests(_spec(), resources={"work": {"cpu": "1m"}})
    assert dict(pods[1].requests) == {"cpu": 1}


def test_a_zero_request_in_the_spec_itself_stays_allowed() -> None:
    pods = pod_requests(_spec({"cpu": "0"}))
    assert dict(pods[1].requests) == {}


def test_an_absurd_request_in_the_spec_is_a_validation_issue() -> None:
    issues = validate(_spec({"memory": "9999999999999999999Ei"}))
    assert [i.rule for i in issues if i.is_error] == ["invalid-parameter"]
    assert "over vfcore's limit" in issues[0].message


def test_a_flow_without_nodes_is_invalid() -> None:
    spec = FlowSpec.from_dict({"name": "empty", "flow_type": "batch", "nodes": []})
    errors = [i for i in validate(spec) if i.is_error]
    assert [i.rule for i in errors] == ["invalid-spec"]
    assert "has no nodes" in errors[0].message


@pytest.mark.parametrize(
    ("resource", "units", "text"),
    [
        ("cpu", 32000, "32"),
        ("cpu", 2500, "2.5"),
        ("cpu", 250, "0.25"),
        ("cpu", 1, "0.001"),
        ("cpu", 0, "0"),
        ("memory", 191100000 * 1024, "182.2Gi"),
        ("memory", 31674 * 2**20, "30.9Gi"),
        ("memory", 31 * 2**30, "31.0Gi"),
        ("memory", -(-(2**30) // 20), "0.1Gi"),
        ("memory", 2**30 // 20, "<0.1Gi"),
        ("memory", 2**30 // 4, "0.3Gi"),
        ("memory", 0, "0.0Gi"),
        ("memory", -(2**30), "-1.0Gi"),
        ("nvidia.com/gpu", 4, "4"),
    ],
    ids=[
        "whole cores",
        "fractional cores",
        "a quarter core",
        "one millicore",
        "no cpu",
        "Ki becomes Gi",
        "Mi becomes Gi",
        "Gi stays Gi with one decimal",
        "just over 0.05Gi rounds to 0.1Gi",
        "just under 0.05Gi is <0.1Gi, never 0.0Gi",
        "an exact half rounds up",
        "zero memory",
        "negative memory",
        "gpus in units",
    ],
)
def test_format_human_uses_one_unit_per_resource(resource: str, units: int, text: str) -> None:
    assert format_human(resource, units) == text
