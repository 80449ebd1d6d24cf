"""Cases that kill mutants of vfcore.quantity (issue 18, docs/testing.md).

``format_quantity`` had no test at all (``2500m`` printed as ``"2"`` passed):
here is its table for every resource kind and a round-trip law. Next to it,
``parse_quantity``'s float branch, every suffix and exponent form with a number
other than 1, the exponent limit at exactly 64, and the exact texts of the
errors (what failed, the value, a hint), including how a long value is cut.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vfcore import InvalidInputError
from vfcore.quantity import (
    MAX_UNITS,
    canonical_units,
    format_human,
    format_quantity,
    parse_quantity,
)

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
