"""The CEL subset DRA selectors are evaluated in: what it answers, and what it refuses by name."""

from __future__ import annotations

from fractions import Fraction

import pytest

from vfcore.errors import InvalidInputError
from vfcore.placement.dra.cel import CelError, DeviceView, Semver, compile_selector

D = "gpu.nvidia.com"
H100 = DeviceView(
    D,
    {
        D: {
            "type": "gpu",
            "productName": "NVIDIA H100 80GB HBM3",
            "index": 3,
            "driverVersion": Semver.parse("550.54.15"),
            "cudaComputeCapability": Semver.parse("9.0.0"),
        },
        "resource.kubernetes.io": {"pcieRoot": "pci0000:00"},
    },
    {D: {"memory": Fraction(80 * 2**30)}},
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f"device.driver == '{D}'", True),
        ("device.driver != 'other.example.com'", True),
        (f"device.attributes['{D}'].type == 'gpu'", True),
        (f'device.attributes["{D}"]["productName"] == "NVIDIA H100 80GB HBM3"', True),
        (f"device.attributes['{D}'].index >= 3 && device.attributes['{D}'].index < 4", True),
        (f"device.attributes['{D}'].index > 3", False),
        (f"device.attributes['{D}'].productName.startsWith('NVIDIA H100')", True),
        (f"device.attributes['{D}'].productName.endsWith('HBM3')", True),
        (f"device.attributes['{D}'].productName.contains('A100')", False),
        (f"device.attributes['{D}'].type in ['gpu', 'mig']", True),
        (f"'productName' in device.attributes['{D}']", True),
        (f"'profile' in device.attributes['{D}']", False),
        ("'resource.kubernetes.io' in device.attributes", True),
        ("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'", True),
        (f"device.capacity['{D}'].memory.compareTo(quantity('80Gi')) >= 0", True),
        (f"device.capacity['{D}'].memory.compareTo(quantity('80Gi')) > 0", False),
        (f"device.capacity['{D}'].memory.isGreaterThan(quantity('40Gi'))", True),
        (f"device.capacity['{D}'].memory.isLessThan(quantity('40Gi'))", False),
        (f"device.capacity['{D}'].memory == quantity('81920Mi')", True),
        (f"device.attributes['{D}'].driverVersion.compareTo(semver('550.0.0')) >= 0", True),
        (f"device.attributes['{D}'].driverVersion.isLessThan(semver('550.54.15-rc1'))", False),
        (f"device.attributes['{D}'].cudaComputeCapability.major() == 9", True),
        (f"device.attributes['{D}'].cudaComputeCapability == semver('9.0.0')", True),
        (f"!(device.attributes['{D}'].type == 'mig') && true", True),
        (f"device.attributes['{D}'].type == 'mig' || device.driver == '{D}'", True),
        ("(false)", False),
    ],
    ids=lambda v: v if isinstance(v, bool) else None,
)
def test_the_subset_evaluates_as_cel_does(expression, expected):
    assert compile_selector(expression).evaluate(H100) is expected


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        (
            f"device.capacity['{D}'].memory >= quantity('40Gi')",
            "the operator >= between quantities",
        ),
        (f"device.attributes['{D}'].driverVersion < semver('1.0.0')", "between versions"),
        ("cel.bind(d, device.attributes['x'], d.y)", "cel.bind"),
        (f"device.attributes['{D}'].all(k, k == 'x')", "the method all()"),
        (f"device.attributes['{D}'].productName.matches('H1.*')", "the method matches()"),
        (f"size(device.attributes['{D}']) > 2", "the function size()"),
        (f"device.attributes['{D}'].index + 1 == 4", "the operator '+'"),
        ("device.name == 'gpu-0'", "device.name"),
        ("pool.name == 'a'", "the name 'pool'"),
        (f"device.attributes['{D}'].type == null", "null"),
        (f"-device.attributes['{D}'].index == -3", "arithmetic negation"),
    ],
)
def test_anything_else_is_refused_by_name(expression, named):
    with pytest.raises(InvalidInputError) as err:
        compile_selector(expression)
    assert err.value.rule == "dra-cel-unsupported"
    assert named in err.value.message
    assert "docs/dra.md" in err.value.hint


@pytest.mark.parametrize(
    "expression",
    ["device.driver ==", "device.driver == 'a' &&", "(device.driver == 'a'", "quantity('ten')"],
)
def test_what_does_not_parse_is_dra_cel_invalid(expression):
    with pytest.raises(InvalidInputError) as err:
        compile_selector(expression)
    assert err.value.rule == "dra-cel-invalid"


def test_a_missing_name_is_a_runtime_error_that_and_or_absorb_as_cel_does():
    missing = f"device.attributes['{D}'].profile == '1g.10gb'"
    assert isinstance(compile_selector(missing).evaluate(H100), CelError)
    # false && error is false, true && error an error; true || error is true
    assert compile_selector(f"device.driver == 'x' && {missing}").evaluate(H100) is False
    assert compile_selector(f"{missing} && device.driver == 'x'").evaluate(H100) is False
    assert isinstance(
        compile_selector(f"device.driver == '{D}' && {missing}").evaluate(H100), CelError
    )
    assert compile_selector(f"{missing} || device.driver == '{D}'").evaluate(H100) is True
    # an unknown domain is an empty map (the DRA environment's default), not an error
    assert compile_selector("'x' in device.attributes['other.example.com']").evaluate(H100) is False


def test_values_of_different_types_do_not_compare():
    got = compile_selector(f"device.attributes['{D}'].index == 'three'").evaluate(H100)
    assert isinstance(got, CelError) and "no such overload" in got.message


def test_semver_orders_pre_releases_before_their_release():
    assert Semver.parse("1.2.3-rc.1") < Semver.parse("1.2.3-rc.2") < Semver.parse("1.2.3")
    assert Semver.parse("1.2.3-1") < Semver.parse("1.2.3-alpha")
    assert Semver.parse("01.2.3") is None


def test_references_say_what_a_selector_reads_so_answers_can_be_shared():
    sel = compile_selector(f"device.driver == '{D}' && device.attributes['{D}'].type == 'gpu'")
    assert sel.references == (("attributes", D, "type"), ("driver", "", ""))
    other = DeviceView(D, {D: {"type": "gpu", "uuid": "GPU-2"}}, {})
    assert sel.key_of(H100) == sel.key_of(other)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f"device.attributes['{D}'].productName in ['A100', 'NVIDIA H100 80GB HBM3']", True),
        (f"device.attributes['{D}'].productName in ['A100', 'B200']", False),
        (f"device.attributes['{D}'].index in [1, 2, 3]", True),
        (f"device.attributes['{D}'].index in [3, 'three']", True),
    ],
)
def test_in_a_literal_list_answers_as_element_by_element_equality(expression, expected):
    # a list of literals of one type is looked up as a set (pins list hundreds of uuids)
    assert compile_selector(expression).evaluate(H100) is expected


def test_in_a_literal_list_of_another_type_is_no_such_overload():
    got = compile_selector(f"device.attributes['{D}'].index in ['1', '3']").evaluate(H100)
    assert isinstance(got, CelError) and "no such overload" in got.message
