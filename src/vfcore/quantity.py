"""Kubernetes resource quantities, parsed exactly.

A quantity is ``<sign><number><suffix>``: the number may have a decimal point
and the suffix is a binary SI one (``Ki Mi Gi Ti Pi Ei``), a decimal SI one
(``n u m k M G T P E``) or an exponent (``e3``, ``E-2``). Parsing is exact
(fractions, no floats): ``500m`` is 1/2, ``1Gi`` is 1073741824, ``2.5`` is 5/2.

vfcore keeps every resource as an integer in a canonical unit, rounding up as
Kubernetes does: cpu in millicores (``cpu_millis("0.5") == 500``), memory and
storage in bytes, everything else (pods, ``nvidia.com/gpu``…) in whole units.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from vfcore.errors import InvalidInputError

__all__ = [
    "CPU",
    "MEMORY",
    "PODS",
    "canonical_units",
    "format_quantity",
    "parse_quantity",
]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
_BYTE_RESOURCES = ("memory", "ephemeral-storage", "storage")

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_PATTERN = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))$"
)


def parse_quantity(value: object, *, what: str = "quantity") -> Fraction:
    """The exact value of a Kubernetes quantity (a string, or an int/float from JSON).

    >>> parse_quantity("500m"), parse_quantity("1Gi"), parse_quantity("2.5"), parse_quantity("1e3")
    (Fraction(1, 2), Fraction(1073741824, 1), Fraction(5, 2), Fraction(1000, 1))
    """
    if isinstance(value, bool):
        raise _bad(value, what)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _bad(value, what)
        return Fraction(repr(value))  # 0.1 is one tenth, not the binary float nearest to it
    if not isinstance(value, str):
        raise _bad(value, what)
    match = _PATTERN.match(value)  # no surrounding spaces: Kubernetes refuses them too
    if match is None:
        raise _bad(value, what)
    number = Fraction(match["number"])
    if match["binary"]:
        number *= _BINARY[match["binary"]]
    elif match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > 64:
            raise _bad(value, what)
        number *= Fraction(10) ** exponent
    else:
        number *= _DECIMAL[match["decimal"] or ""]
    return -number if match["sign"] == "-" else number


def _bad(value: object, what: str) -> InvalidInputError:
    return InvalidInputError(
        "invalid-quantity",
        f"{what} {value!r} is not a Kubernetes quantity",
        "write it like 500m, 2, 2.5, 8Gi, 1e3 (see kubectl explain pod.spec.containers.resources)",
    )


def canonical_units(resource: str, value: object, *, what: str | None = None) -> int:
    """A quantity in vfcore's integer unit for ``resource``, rounded up.

    >>> canonical_units("cpu", "250m"), canonical_units("memory", "1Ki"), canonical_units("pods", "110")
    (250, 1024, 110)
    """
    q = parse_quantity(value, what=what or resource)
    if resource == CPU:
        q *= 1000
    return math.ceil(q)


def format_quantity(resource: str, units: int) -> str:
    """A readable form of canonical units: ``2500m`` → ``'2.5'`` cpu, bytes → ``'8Gi'``."""
    if resource == CPU:
        return f"{units // 1000}" if units % 1000 == 0 else f"{units}m"
    if resource in _BYTE_RESOURCES:
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if units and units % size == 0:
                return f"{units // size}{suffix}"
        return str(units)
    return str(units)
