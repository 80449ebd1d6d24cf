"""Reading one field of a Kubernetes object: the small pieces every reader shares.

A field that cannot be read raises :class:`Malformed` naming the field and the
value; the readers (:mod:`.pods`, :mod:`.node_objects`, :mod:`.documents`)
catch it and turn it into an :class:`~vfcore.cluster.Unknown`. It never leaves
:mod:`vfcore.cluster.kubeparse`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vfcore.errors import InvalidInputError
from vfcore.quantity import canonical_units

__all__ = [
    "Malformed",
    "add_into",
    "clip",
    "describe",
    "max_into",
    "read_mapping",
    "read_quantity",
    "read_resource_list",
    "read_sequence",
    "read_string",
    "short",
]


class Malformed(Exception):
    """One field of one object cannot be read; caught inside kubeparse, never escapes it."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.reason = f"{field} {problem}"


def describe(value: object) -> str:
    """A short, type-revealing description of a JSON value for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short(value: object, limit: int = 60) -> str:
    if isinstance(value, int) and value.bit_length() > 128:  # repr of a 5,000-digit int fails
        return f"<an integer of about 10**{int(value.bit_length() * 0.30103)}>"
    return clip(repr(value), limit)


def read_mapping(value: object, field: str, *, required: bool = False) -> Mapping[str, Any]:
    if value is None:
        if required:
            raise Malformed(field, "is missing")
        return {}
    if not isinstance(value, Mapping):
        raise Malformed(field, f"is {describe(value)}, not an object")
    return value


def read_sequence(value: object, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(field, f"is {describe(value)}, not a list")
    return value


def read_string(value: object, field: str, *, required: bool = False) -> str | None:
    if value is None or value == "":
        if required:
            raise Malformed(field, "is missing")
        return None
    if not isinstance(value, str):
        raise Malformed(field, f"= {short(value)} is {describe(value)}, not a string")
    return value


def read_quantity(resource: str, value: object, field: str) -> int:
    """One quantity in canonical units; floats go through their shortest decimal form."""
    given: object = repr(value) if isinstance(value, float) else value
    try:
        units = canonical_units(resource, given)
    except InvalidInputError as exc:
        if exc.rule == "quantity-out-of-range":
            raise Malformed(
                field, f"= {short(value)} is over vfcore's limit of 2**50 units"
            ) from None
        raise Malformed(field, f"= {short(value)} is not a Kubernetes quantity") from None
    if units < 0:
        raise Malformed(field, f"= {short(value)} is negative")
    return units


def read_resource_list(value: object, field: str) -> dict[str, int]:
    """A ``ResourceList`` (``{"cpu": "500m", ...}``) in canonical units."""
    out: dict[str, int] = {}
    for name, raw in sorted(read_mapping(value, field).items()):
        if not isinstance(name, str) or not name:
            raise Malformed(field, f"has a resource name {short(name)} that is not a string")
        out[name] = read_quantity(name, raw, f'{field}["{name}"]')
    return out


def add_into(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, units in more.items():
        total[name] = total.get(name, 0) + units


def max_into(total: dict[str, int], other: Mapping[str, int]) -> None:
    for name, units in other.items():
        total[name] = max(total.get(name, 0), units)
