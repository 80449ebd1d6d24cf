"""Kubernetes resource quantities, parsed exactly.

A quantity is ``<sign><number><suffix>``: the number may have a decimal point
and the suffix is a binary SI one (``Ki Mi Gi Ti Pi Ei``), a decimal SI one
(``n u m k M G T P E``) or an exponent (``e3``, ``E-2``). Parsing is exact
(fractions, no floats): ``500m`` is 1/2, ``1Gi`` is 1073741824, ``2.5`` is 5/2.

vfcore keeps every resource as an integer in a canonical unit, rounding up as
Kubernetes does: cpu in millicores (``cpu_millis("0.5") == 500``), memory and
storage in bytes, everything else (pods, ``nvidia.com/gpu``…) in whole units.

**As apimachinery reads them** (``k8s.io/apimachinery/pkg/api/resource``):

- surrounding whitespace is trimmed (``Quantity.UnmarshalJSON`` calls
  ``strings.TrimSpace`` before ``ParseQuantity``), so ``" 2 "`` in a JSON or
  YAML document is 2;
- a non-zero value is rounded *up* (away from zero) to a whole nano
  (``ParseQuantity``: "if you want some resources, you should get some
  resources"): ``0.0000000001`` is ``1n``;
- a binary-suffix value (``Ki`` … ``Ei``) above 2**63-1 saturates at 2**63-1
  (``ParseQuantity``'s "simple cap"); decimal values are not capped;
- a canonical unit is ``ceil`` of the value in that unit (``ScaledValue``:
  ``MilliValue`` for cpu, ``Value`` for the rest), so any positive cpu below
  ``1m`` is ``1m``, and ``0.5`` bytes of memory is 1 byte.

**Bounds.** A quantity is at most :data:`MAX_QUANTITY_CHARS` (64) characters
and its canonical value at most :data:`MAX_UNITS` (2**50) in magnitude: 1 PiB
of memory, about 10**12 cpu cores, 10**15 GPUs — far beyond any node, and far
below the solver's 64-bit integers, with room for 4096 such terms in one sum.
``9999999999999999999Ei`` (which apimachinery saturates at 2**63-1 bytes, about
8 EiB — still far over the ceiling) or a 5,001-digit number is
``quantity-out-of-range`` / ``invalid-quantity`` here; a cluster dump with one
makes that node *unreadable* (:mod:`vfcore.cluster.kubeparse`), never a crash
in the solver and never a node that silently has 8 EiB of memory.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from vfcore.errors import InvalidInputError

__all__ = [
    "CPU",
    "MAX_INT64",
    "MAX_QUANTITY_CHARS",
    "MAX_UNITS",
    "MEMORY",
    "PODS",
    "canonical_units",
    "format_human",
    "format_quantity",
    "parse_quantity",
]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
_BYTE_RESOURCES = ("memory", "ephemeral-storage", "storage")

#: The largest magnitude of a quantity in canonical units (see the module docstring).
MAX_UNITS = 2**50
#: The longest quantity text read; Kubernetes' own are a few characters.
MAX_QUANTITY_CHARS = 64
#: Where apimachinery caps a binary-suffix quantity (``maxAllowed``: the largest int64).
MAX_INT64 = 2**63 - 1
_NANO = 10**9
# Go's strings.TrimSpace: unicode.IsSpace (ASCII \t \n \v \f \r and space, U+0085, U+00A0,
# and Unicode White_Space). Python's str.strip() would also take U+001C..U+001F, which Go keeps.
_GO_SPACE = (
    "\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

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
    """The value of a Kubernetes quantity as apimachinery holds it (a string, or an int/float from JSON).

    Exact (fractions, no floats), after apimachinery's own adjustments (see the
    module docstring): whitespace around the text is trimmed, a non-zero value
    is rounded up to a whole nano, a binary-suffix value saturates at 2**63-1.

    >>> parse_quantity("500m"), parse_quantity("1Gi"), parse_quantity("2.5"), parse_quantity("1e3")
    (Fraction(1, 2), Fraction(1073741824, 1), Fraction(5, 2), Fraction(1000, 1))
    >>> parse_quantity(" 2 "), parse_quantity("0.0000000001"), parse_quantity("9999999999999999999Ei")
    (Fraction(2, 1), Fraction(1, 1000000000), Fraction(9223372036854775807, 1))
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
    value = value.strip(_GO_SPACE)
    if len(value) > MAX_QUANTITY_CHARS:
        raise InvalidInputError(
            "invalid-quantity",
            f"{what} {value[:20]!r}… ({len(value)} characters) is longer than "
            f"{MAX_QUANTITY_CHARS} characters, too long for a Kubernetes quantity",
            "write it like 500m, 2, 2.5, 8Gi, 1e3",
        )
    match = _PATTERN.fullmatch(value)
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
    if number.denominator != 1 and (number * _NANO).denominator != 1:
        number = Fraction(math.ceil(number * _NANO), _NANO)  # magnitude up to a whole nano
    if match["binary"] and number > MAX_INT64:
        number = Fraction(MAX_INT64)
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

    A magnitude over :data:`MAX_UNITS` raises ``quantity-out-of-range``.
    """
    q = parse_quantity(value, what=what or resource)
    if resource == CPU:
        q *= 1000
    units = math.ceil(q)
    if abs(units) > MAX_UNITS:
        raise InvalidInputError(
            "quantity-out-of-range",
            f"{what or resource} {_brief(value)} is {_magnitude(units)} {_unit_of(resource)}, over "
            f"vfcore's limit of {MAX_UNITS} (2**50: 1 PiB of memory, ~10**12 cpu cores)",
            "a quantity that large is a mistake (a typo, a corrupted file): give the real value",
        )
    return units


def _brief(value: object) -> str:
    """A short repr: never a 5,000-character string or the digits of a 5,000-digit int."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"<an integer of about 10**{int(value.bit_length() * 0.30103)}>"
    text = repr(value)
    return text if len(text) <= 44 else text[:43] + "…"


def _unit_of(resource: str) -> str:
    if resource == CPU:
        return "millicores"
    return "bytes" if resource in _BYTE_RESOURCES else "units"


def _magnitude(units: int) -> str:
    """``about 10**37`` (from the bit length: a 5,001-digit int is never turned into text)."""
    return f"about 10**{int(abs(units).bit_length() * 0.30103)}"


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


def format_human(resource: str, units: int) -> str:
    """One unit per resource, for tables: cpu in cores, bytes in Gi with one decimal.

    Every cpu value is in cores (``2500`` millicores → ``'2.5'``, ``250`` → ``'0.25'``),
    every memory/storage value in GiB with one decimal (``'31.0Gi'``; a non-zero
    value under 0.05 GiB is ``'<0.1Gi'``, never ``'0.0Gi'``); other resources in
    whole units. A column of a table then reads in one unit, whatever unit the
    cluster dump used (``191100000Ki``, ``31674Mi`` and ``31Gi`` all become Gi).

    >>> format_human("cpu", 32000), format_human("cpu", 250), format_human("memory", 191100000 * 1024)
    ('32', '0.25', '182.2Gi')
    >>> format_human("memory", 31674 * 2**20), format_human("memory", 2**20), format_human("memory", 0)
    ('30.9Gi', '<0.1Gi', '0.0Gi')
    """
    if resource == CPU:
        whole, millis = divmod(abs(units), 1000)
        text = str(whole) if not millis else f"{whole}.{millis:03d}".rstrip("0")
        return f"-{text}" if units < 0 else text
    if resource in _BYTE_RESOURCES:
        tenths = math.floor(Fraction(abs(units) * 10, 2**30) + Fraction(1, 2))  # half up
        text = "<0.1Gi" if units and not tenths else f"{tenths // 10}.{tenths % 10}Gi"
        return f"-{text}" if units < 0 else text
    return str(units)
