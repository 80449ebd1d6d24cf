"""Quantities are bounded: nothing absurd reaches the solver, and user input gets a named error.

The errors' exact texts (issue 18): what failed, the value and a hint, the
out-of-range message's magnitude and unit, and how a long value is cut.
"""

from __future__ import annotations

import pytest

from vfcore import FlowSpec, InvalidInputError, validate
from vfcore.placement.claims import pod_requests
from vfcore.quantity import (
    MAX_QUANTITY_CHARS,
    MAX_UNITS,
    canonical_units,
    format_human,
    parse_quantity,
)


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


# -- parse_quantity: the exact texts of its refusals ----------------------------------------------


@pytest.mark.parametrize("bad", ["1e65", "1e-65", "1Ki2", "Gi", "", "-", "1 Gi", "1.2.3", "1ki"])
def test_parse_quantity_refuses_what_is_not_a_quantity(bad: str):
    with pytest.raises(InvalidInputError) as info:
        parse_quantity(bad, what="memory of det")
    assert info.value.rule == "invalid-quantity"
    assert info.value.message == f"memory of det {bad!r} is not a Kubernetes quantity"
    assert info.value.hint == (
        "write it like 500m, 2, 2.5, 8Gi, 1e3 (see kubectl explain pod.spec.containers.resources)"
    )


@pytest.mark.parametrize("bad", [True, None, [1], float("nan"), float("-inf")])
def test_parse_quantity_refuses_other_types_naming_the_value(bad: object):
    with pytest.raises(InvalidInputError) as info:
        parse_quantity(bad, what="cpu of det")
    assert info.value.message == f"cpu of det {bad!r} is not a Kubernetes quantity"
    assert "write it like 500m" in (info.value.hint or "")


def test_parse_quantity_names_the_default_what():
    with pytest.raises(InvalidInputError) as info:
        parse_quantity("x")
    assert info.value.message == "quantity 'x' is not a Kubernetes quantity"


def test_a_too_long_quantity_is_cut_to_20_characters_in_the_message():
    text = "12345678901234567890" + "9" * 60
    with pytest.raises(InvalidInputError) as info:
        parse_quantity(text, what="memory")
    assert info.value.message == (
        "memory '12345678901234567890'… (80 characters) is longer than 64 characters, "
        "too long for a Kubernetes quantity"
    )
    assert info.value.hint == "write it like 500m, 2, 2.5, 8Gi, 1e3"


# -- canonical_units: the out-of-range message ----------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "value", "start"),
    [
        ("memory", "2Pi", "memory '2Pi' is about 10**15 bytes, over"),
        ("storage", "2Pi", "storage '2Pi' is about 10**15 bytes, over"),
        ("ephemeral-storage", "2Pi", "ephemeral-storage '2Pi' is about 10**15 bytes, over"),
        ("cpu", "2T", "cpu '2T' is about 10**15 millicores, over"),
        ("nvidia.com/gpu", "2P", "nvidia.com/gpu '2P' is about 10**15 units, over"),
        ("pods", 2**200, "pods <an integer of about 10**60> is about 10**60 units, over"),
        ("pods", 2**127, f"pods {2**127} is about 10**38 units, over"),
        ("pods", 2**128, "pods <an integer of about 10**38> is about 10**38 units, over"),
        ("pods", 2**129, "pods <an integer of about 10**39> is about 10**39 units, over"),
    ],
)
def test_an_out_of_range_quantity_says_its_magnitude_and_unit(
    resource: str, value: object, start: str
):
    with pytest.raises(InvalidInputError) as info:
        canonical_units(resource, value)
    assert info.value.rule == "quantity-out-of-range"
    assert info.value.message.startswith(start)
    assert info.value.message.endswith(
        f"over vfcore's limit of {MAX_UNITS} (2**50: 1 PiB of memory, ~10**12 cpu cores)"
    )
    assert info.value.hint == (
        "a quantity that large is a mistake (a typo, a corrupted file): give the real value"
    )


def test_a_long_value_is_cut_to_43_characters_in_the_out_of_range_message():
    exactly = "1" * 41 + "e3"  # 43 characters, repr 45 > 44: cut
    with pytest.raises(InvalidInputError) as info:
        canonical_units("pods", exactly)
    assert info.value.message.startswith("pods " + repr(exactly)[:43] + "… is about")
    fits = "1" * 40 + "e3"  # repr 44 characters: shown whole
    with pytest.raises(InvalidInputError) as info:
        canonical_units("pods", fits)
    assert info.value.message.startswith(f"pods {fits!r} is about 10**42 units")


def test_canonical_units_names_the_resource_or_the_given_what():
    with pytest.raises(InvalidInputError) as info:
        canonical_units("memory", "x")
    assert info.value.message == "memory 'x' is not a Kubernetes quantity"
    with pytest.raises(InvalidInputError) as info:
        canonical_units("memory", "x", what="det.memory")
    assert info.value.message == "det.memory 'x' is not a Kubernetes quantity"
    with pytest.raises(InvalidInputError) as info:
        canonical_units("memory", "3Pi", what="det.memory")
    assert info.value.message.startswith("det.memory '3Pi' is about")
