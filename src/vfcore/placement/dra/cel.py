"""The CEL that DRA selectors are written in — the subset vfcore evaluates, and nothing else.

A DeviceClass or a claim's request selects devices with CEL expressions over
one variable, ``device`` (``driver``, ``attributes[domain][name]``,
``capacity[domain][name]``), as ``k8s.io/dynamic-resource-allocation/cel``
defines it. vfcore evaluates the subset NVIDIA's driver and users write:

- ``device.driver == "gpu.nvidia.com"`` (and ``!=``);
- attributes by domain and name, ``device.attributes["gpu.nvidia.com"].type``
  or ``…["productName"]``, compared with ``==``, ``!=``, ``<``, ``<=``, ``>``,
  ``>=`` (ints and strings), or tested with ``"name" in device.attributes[d]``,
  ``x in ["a", "b"]``, ``.startsWith()``, ``.endsWith()``, ``.contains()``;
- versions: ``….driverVersion.compareTo(semver("550.0.0")) >= 0``,
  ``.isGreaterThan(semver(…))``, ``.isLessThan(…)``, ``.major()``, ``.minor()``,
  ``.patch()``, ``==``;
- quantities: ``device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0``,
  ``.isGreaterThan(quantity(…))``, ``.isLessThan(…)``, ``==``;
- ``&&``, ``||``, ``!``, parentheses, ``true``, ``false``, integers, strings.

Anything else — ``cel.bind``, macros (``all``, ``exists``), ``matches``
(RE2 is not Python's ``re``), ``size``, arithmetic, ordering operators on
quantities (which CEL itself rejects: use ``compareTo``) — raises
``dra-cel-unsupported`` naming the construct, never a guess. A syntax error is
``dra-cel-invalid``.

Evaluation follows CEL's rules where they decide outcomes: an unknown domain
is an empty map (the DRA environment's default), an unknown name in it is a
runtime error (``no such key``), ``&&`` and ``||`` are commutative with errors
(``false && error`` is false, ``true && error`` an error), and values of
different types do not compare (``no such overload``). An error is a value,
:class:`CelError`; the allocator turns it into a failed scheduling attempt,
as kube-scheduler does.

>>> sel = compile_selector('device.attributes["gpu.nvidia.com"].type == "gpu" && '
...                        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0')
>>> from fractions import Fraction
>>> gpu = DeviceView("gpu.nvidia.com", {"gpu.nvidia.com": {"type": "gpu"}},
...                  {"gpu.nvidia.com": {"memory": Fraction(80 * 2**30)}})
>>> sel.evaluate(gpu)
True
>>> compile_selector("device.attributes.all(a, a.x)")
Traceback (most recent call last):
...
vfcore.errors.InvalidInputError: dra-cel-unsupported: CEL selector 'device.attributes.all(a, a.x)': the method all() is not in the subset vfcore evaluates (hint: write the selector with ==, !=, <, <=, >, >=, in, &&, ||, !, startsWith/endsWith/contains, compareTo/isGreaterThan/isLessThan on quantity() and semver(); docs/dra.md lists the subset)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from vfcore.errors import InvalidInputError, brief
from vfcore.quantity import parse_quantity

__all__ = [
    "MAX_SELECTOR_LENGTH",
    "CelError",
    "DeviceView",
    "Selector",
    "compile_selector",
    "quantity_literal",
]

_MISSING = ("<missing>",)
_HINT = (
    "write the selector with ==, !=, <, <=, >, >=, in, &&, ||, !, startsWith/endsWith/contains, "
    "compareTo/isGreaterThan/isLessThan on quantity() and semver(); docs/dra.md lists the subset"
)
#: the API's limit on the length of a selector expression (CELSelectorExpressionMaxLength)
MAX_SELECTOR_LENGTH = 10 * 1024
_MAX_DEPTH = 64


@dataclass(frozen=True, slots=True)
class CelError:
    """A CEL runtime error (a value, as in CEL): ``no such key: productName``."""

    message: str


@dataclass(frozen=True, slots=True)
class DeviceView:
    """What a selector sees of a device: its driver, and attributes and capacity by domain.

    Names published without a domain belong to the driver's domain
    (``productName`` of driver ``gpu.nvidia.com`` is ``attributes["gpu.nvidia.com"]
    ["productName"]``). Attribute values are ``int``, ``bool``, ``str`` or, for
    versions, :class:`Semver`; capacities are exact quantities.
    """

    driver: str
    attributes: Mapping[str, Mapping[str, object]]
    capacity: Mapping[str, Mapping[str, Fraction]]


@dataclass(frozen=True, slots=True, order=True)
class Semver:
    """A semantic version ``major.minor.patch[-pre]``, ordered as semver 2.0 orders them:
    a pre-release sorts before its release, numeric identifiers before alphanumeric ones."""

    major: int
    minor: int
    patch: int
    pre: tuple[int, tuple[tuple[int, int, str], ...]] = (1, ())

    @classmethod
    def parse(cls, text: str) -> Semver | None:
        match = _SEMVER.fullmatch(text)
        if match is None:
            return None
        pre: tuple[int, tuple[tuple[int, int, str], ...]] = (1, ())
        if match["pre"]:
            parts = tuple(
                (0, int(p), "") if p.isdigit() else (1, 0, p) for p in match["pre"].split(".")
            )
            pre = (0, parts)
        return cls(int(match["major"]), int(match["minor"]), int(match["patch"]), pre)


_SEMVER = re.compile(
    r"(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)


@dataclass(frozen=True, slots=True)
class _Quantity:
    value: Fraction


def quantity_literal(amount: Fraction) -> str:
    """A CEL ``quantity("…")`` argument for an exact amount: ``40Gi``, ``1536Mi``, ``3``.

    >>> quantity_literal(Fraction(40 * 2**30)), quantity_literal(Fraction(3 * 2**29))
    ('40Gi', '1536Mi')
    """
    if amount.denominator == 1:
        units = amount.numerator
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if units and units % size == 0:
                return f"{units // size}{suffix}"
        return str(units)
    millis = amount * 1000
    if millis.denominator == 1:
        return f"{millis.numerator}m"
    raise ValueError(f"{amount} is not a quantity with a finite literal")


# -- lexing and parsing --------------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+)(?![\w.])|(?P<str>\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*')"
    r"|(?P<op>&&|\|\||==|!=|<=|>=|[<>!()\[\].,\-])|(?P<id>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<bad>\S))"
)


def _unescape(raw: str) -> str:
    body = raw[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m[1], m[1]), body)


class _Unsupported(Exception):
    def __init__(self, construct: str) -> None:
        super().__init__(construct)
        self.construct = construct


class _Invalid(Exception):
    pass


Node = tuple[Any, ...]


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        for match in _TOKEN.finditer(text):
            kind = match.lastgroup
            if kind is None:
                continue
            value = match[kind]
            if kind == "bad":
                if value in "+*/%?:{}":
                    raise _Unsupported(f"the operator {value!r}")
                raise _Invalid(f"unexpected character {value!r}")
            self.tokens.append((kind, value))
        self.i = 0
        self.depth = 0

    def peek(self, offset: int = 0) -> tuple[str, str]:
        at = self.i + offset
        return self.tokens[at] if at < len(self.tokens) else ("end", "")

    def take(self) -> tuple[str, str]:
        token = self.peek()
        self.i += 1
        return token

    def expect(self, op: str) -> None:
        kind, value = self.take()
        if (kind, value) != ("op", op):
            raise _Invalid(f"expected {op!r}, found {value or 'the end'!r}")

    def parse(self) -> Node:
        node = self.expr()
        if self.peek()[0] != "end":
            raise _Invalid(f"unexpected {self.peek()[1]!r}")
        return node

    def expr(self) -> Node:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Invalid("the expression nests too deeply")
        left = self.conj()
        while self.peek() == ("op", "||"):
            self.take()
            left = ("or", left, self.conj())
        self.depth -= 1
        return left

    def conj(self) -> Node:
        left = self.rel()
        while self.peek() == ("op", "&&"):
            self.take()
            left = ("and", left, self.rel())
        return left

    def rel(self) -> Node:
        left = self.unary()
        kind, value = self.peek()
        if kind == "op" and value in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            return ("cmp", value, left, self.unary())
        if kind == "id" and value == "in":
            self.take()
            return ("in", left, self.unary())
        return left

    def unary(self) -> Node:
        kind, value = self.peek()
        if (kind, value) == ("op", "!"):
            self.take()
            return ("not", self.unary())
        if (kind, value) == ("op", "-"):
            self.take()
            inner = self.unary()
            if inner[0] != "lit" or isinstance(inner[1], bool) or not isinstance(inner[1], int):
                raise _Unsupported("arithmetic negation")
            return ("lit", -inner[1])
        return self.postfix()

    def postfix(self) -> Node:
        node = self.primary()
        while True:
            kind, value = self.peek()
            if (kind, value) == ("op", "."):
                self.take()
                kind, name = self.take()
                if kind != "id":
                    raise _Invalid(f"expected a name after '.', found {name!r}")
                if self.peek() == ("op", "("):
                    if name not in _METHODS:  # macros (all, exists, map…) before their arguments
                        raise _Unsupported(f"the method {name}()")
                    node = ("call", name, node, self.args())
                else:
                    node = ("field", node, name)
            elif (kind, value) == ("op", "["):
                self.take()
                index = self.expr()
                self.expect("]")
                node = ("index", node, index)
            else:
                return node

    def args(self) -> list[Node]:
        self.expect("(")
        out: list[Node] = []
        if self.peek() != ("op", ")"):
            out.append(self.expr())
            while self.peek() == ("op", ","):
                self.take()
                out.append(self.expr())
        self.expect(")")
        return out

    def primary(self) -> Node:
        kind, value = self.take()
        if kind == "num":
            return ("lit", int(value))
        if kind == "str":
            return ("lit", _unescape(value))
        if kind == "id":
            if value in ("true", "false"):
                return ("lit", value == "true")
            if value == "null":
                raise _Unsupported("null")
            if self.peek() == ("op", "("):
                if value not in ("quantity", "semver"):
                    raise _Unsupported(f"the function {value}()")
                return ("fn", value, self.args())
            if value == "cel":
                raise _Unsupported("cel.bind (and the cel extensions)")
            if value != "device":
                raise _Unsupported(f"the name {value!r} (only device is defined)")
            return ("device",)
        if (kind, value) == ("op", "("):
            inner = self.expr()
            self.expect(")")
            return inner
        if (kind, value) == ("op", "["):
            items: list[Node] = []
            if self.peek() != ("op", "]"):
                items.append(self.expr())
                while self.peek() == ("op", ","):
                    self.take()
                    items.append(self.expr())
            self.expect("]")
            return ("list", items)
        raise _Invalid(f"unexpected {value or 'end of expression'!r}")


# -- static checks ---------------------------------------------------------------------------------

_METHODS = {
    "compareTo": 1,
    "isGreaterThan": 1,
    "isLessThan": 1,
    "major": 0,
    "minor": 0,
    "patch": 0,
    "startsWith": 1,
    "endsWith": 1,
    "contains": 1,
}


def _static_type(node: Node) -> str:
    """``quantity``, ``semver``, ``map``, ``string``, ``int``, ``bool``, ``list`` or ``dyn``."""
    tag = node[0]
    if tag == "lit":
        value = node[1]
        return "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
    if tag == "fn":
        return {"quantity": "quantity", "semver": "semver"}.get(node[1], "dyn")
    if tag in ("and", "or", "not", "cmp", "in"):
        return "bool"
    if tag == "list":
        return "list"
    if tag == "field" and node[1] == ("device",):
        return {"driver": "string", "attributes": "map", "capacity": "map"}.get(node[2], "dyn")
    if tag in ("field", "index"):
        base = node[1]
        if base[0] in ("field", "index") and _root_field(base) == "capacity" and _depth(base) == 2:
            return "quantity"
        if _root_field(node) in ("attributes", "capacity") and _depth(node) == 2:
            return "map"
        return "dyn"
    if tag == "call":
        name = node[1]
        if name in ("major", "minor", "patch", "compareTo"):
            return "int"
        return "bool"
    return "dyn"


def _root_field(node: Node) -> str | None:
    while node[0] in ("field", "index"):
        if node[1] == ("device",) and node[0] == "field":
            return str(node[2])
        node = node[1]
    return None


def _depth(node: Node) -> int:
    """How many selections below ``device``: ``device.capacity[d]`` is 2, ``…[d].memory`` 3."""
    depth = 0
    while node[0] in ("field", "index"):
        depth += 1
        node = node[1]
    return depth if node == ("device",) else -1


def _check(node: Node) -> None:
    tag = node[0]
    if tag == "fn":
        name, args = node[1], node[2]
        if name not in ("quantity", "semver"):
            raise _Unsupported(f"the function {name}()")
        if len(args) != 1 or args[0][0] != "lit" or not isinstance(args[0][1], str):
            raise _Unsupported(f"{name}() of anything but one string literal")
        if name == "quantity":
            try:
                parse_quantity(args[0][1])
            except InvalidInputError:
                raise _Invalid(f"quantity({args[0][1]!r}) is not a quantity") from None
        elif Semver.parse(args[0][1]) is None:
            raise _Invalid(f"semver({args[0][1]!r}) is not a semantic version")
        return
    if tag == "call":
        name, base, args = node[1], node[2], node[3]
        if name not in _METHODS:
            raise _Unsupported(f"the method {name}()")
        if len(args) != _METHODS[name]:
            raise _Invalid(f"{name}() takes {_METHODS[name]} argument(s)")
        _check(base)
        for arg in args:
            _check(arg)
        return
    if tag == "cmp":
        op, left, right = node[1], node[2], node[3]
        _check(left)
        _check(right)
        types = {_static_type(left), _static_type(right)}
        if op not in ("==", "!=") and types & {"quantity", "semver"}:
            kind = "quantities" if "quantity" in types else "versions"
            raise _Unsupported(
                f"the operator {op} between {kind} (CEL has none: use .compareTo(...) {op} 0)"
            )
        static = types - {"dyn"}
        if len(static) > 1:
            raise _Invalid(f"{op} compares a {' and a '.join(sorted(static))}")
        return
    if (
        tag == "field"
        and node[1] == ("device",)
        and node[2] not in ("driver", "attributes", "capacity")
    ):
        raise _Unsupported(f"device.{node[2]} (a device has driver, attributes and capacity)")
    if tag == "list":
        for item in node[1]:
            _check(item)
        return
    for child in node[1:]:
        if isinstance(child, tuple):
            _check(child)


# -- evaluation -----------------------------------------------------------------------------------


def _truth(value: object) -> bool | CelError:
    if isinstance(value, (CelError, bool)):
        return value
    return CelError(f"no such overload: a boolean was expected, got {type(value).__name__}")


def _compare(op: str, left: object, right: object) -> bool | CelError:
    if isinstance(left, CelError):
        return left
    if isinstance(right, CelError):
        return right
    if isinstance(left, _Quantity) and isinstance(right, _Quantity):
        left, right = left.value, right.value
    same = (type(left) is type(right)) or (
        isinstance(left, int)
        and isinstance(right, int)
        and not isinstance(left, bool)
        and not isinstance(right, bool)
    )
    if not same:
        if op in ("==", "!="):
            return CelError(
                f"no such overload: {op} between {type(left).__name__} and {type(right).__name__}"
            )
        return CelError(f"no such overload: {op} on {type(left).__name__}")
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    if isinstance(left, (bool, Semver, dict, list)):
        return CelError(f"no such overload: {op} on {type(left).__name__}")
    order = _order(left, right)  # ints and strings
    return {"<": order < 0, "<=": order <= 0, ">": order > 0, ">=": order >= 0}[op]


def _order(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def _references(node: Node, out: set[tuple[str, str, str]]) -> bool:
    """Collect what ``node`` reads of a device: ``("driver", "", "")``, ``("attributes",
    domain, name)``, ``("domain", kind, domain)``; False when it cannot tell (a computed key)."""
    tag = node[0]
    if tag == "field" and node[1] == ("device",):
        if node[2] == "driver":
            out.add(("driver", "", ""))
            return True
        return False  # the whole attributes/capacity map
    if tag in ("field", "index"):
        path: list[object] = []
        walk = node
        while walk[0] in ("field", "index"):
            key = walk[2]
            if walk[0] == "index":
                if key[0] != "lit" or not isinstance(key[1], str):
                    return False
                key = key[1]
            path.append(key)
            walk = walk[1]
        if walk != ("device",) or len(path) < 2:
            return False
        path.reverse()
        kind, domain = path[0], path[1]
        if kind not in ("attributes", "capacity") or not isinstance(domain, str):
            return False
        if len(path) == 2:
            return False  # the whole domain map
        out.add((str(kind), domain, str(path[2])))
        return len(path) == 3
    if tag == "in" and node[2][0] in ("field", "index") and node[1][0] == "lit":
        haystack, needle = node[2], node[1][1]
        if haystack[0] == "field" and haystack[1] == ("device",) and isinstance(needle, str):
            out.add(("domain", str(haystack[2]), needle))
            return True
        if isinstance(needle, str) and _depth(haystack) == 2:
            kind, domain = _root_field(haystack), haystack[2]
            if domain[0] == "lit" and isinstance(domain[1], str) and kind is not None:
                out.add((kind, domain[1], needle))
                return True
        return _references(haystack, out)
    ok = True
    for child in node[1:]:
        if isinstance(child, tuple) and child and isinstance(child[0], str):
            ok = _references(child, out) and ok
        elif isinstance(child, list):
            for item in child:
                ok = _references(item, out) and ok
    return ok


def _literal_kind(value: object) -> type | None:
    if isinstance(value, bool):
        return None
    return type(value) if isinstance(value, (str, int)) else None


def _fold(node: Node) -> Node:
    """``x in [literals of one type]`` as a set (pins list hundreds of uuids), ``quantity()``
    and ``semver()`` of a literal as their value; the rest as is."""
    tag = node[0]
    if tag == "fn" and node[1] in ("quantity", "semver"):
        text = node[2][0][1]
        value = _Quantity(parse_quantity(text)) if node[1] == "quantity" else Semver.parse(text)
        return node if value is None else ("lit", value)
    if tag == "in" and node[2][0] == "list" and node[2][1]:
        items = node[2][1]
        kinds = {_literal_kind(i[1]) if i[0] == "lit" else None for i in items}
        kind = kinds.pop() if len(kinds) == 1 else None
        if kind is not None:
            values = frozenset(i[1] for i in items)
            return ("inset", _fold(node[1]), values, kind, node[2])
    out: list[object] = [tag]
    for child in node[1:]:
        if isinstance(child, tuple) and child and isinstance(child[0], str):
            out.append(_fold(child))
        elif isinstance(child, list):
            out.append([_fold(i) for i in child])
        else:
            out.append(child)
    return tuple(out)


class Selector:
    """A compiled selector: :meth:`evaluate` gives ``True``, ``False`` or a :class:`CelError`.

    ``references`` lists what it reads of a device (``("attributes", domain,
    name)``, ``("capacity", …)``, ``("driver", "", "")``, ``("domain", kind,
    domain)``), or is ``None`` when it cannot tell: two devices equal on every
    reference get the same answer, so answers can be shared (:meth:`key_of`).
    """

    __slots__ = ("_tree", "expression", "references")

    def __init__(self, expression: str, tree: Node) -> None:
        self.expression = expression
        self._tree = _fold(tree)
        found: set[tuple[str, str, str]] = set()
        self.references: tuple[tuple[str, str, str], ...] | None = (
            tuple(sorted(found)) if _references(tree, found) else None
        )

    def key_of(self, device: DeviceView) -> tuple[object, ...] | None:
        """What decides this selector's answer for ``device`` (None: the whole device)."""
        if self.references is None:
            return None
        out: list[object] = []
        for kind, domain, name in self.references:
            if kind == "driver":
                out.append(device.driver)
            elif kind == "domain":
                out.append(
                    name in (device.attributes if domain == "attributes" else device.capacity)
                )
            else:
                source = device.attributes if kind == "attributes" else device.capacity
                out.append(source.get(domain, {}).get(name, _MISSING))
        return tuple(out)

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"

    def evaluate(self, device: DeviceView) -> bool | CelError:
        return _truth(self._eval(self._tree, device))

    def _eval(self, node: Node, device: DeviceView) -> Any:
        tag = node[0]
        if tag == "lit":
            return node[1]
        if tag == "device":
            return device
        if tag == "and":
            left = _truth(self._eval(node[1], device))
            if left is False:
                return False
            right = _truth(self._eval(node[2], device))
            if right is False:
                return False
            return left if isinstance(left, CelError) else right
        if tag == "or":
            left = _truth(self._eval(node[1], device))
            if left is True:
                return True
            right = _truth(self._eval(node[2], device))
            if right is True:
                return True
            return left if isinstance(left, CelError) else right
        if tag == "not":
            value = _truth(self._eval(node[1], device))
            return value if isinstance(value, CelError) else not value
        if tag == "cmp":
            return _compare(node[1], self._eval(node[2], device), self._eval(node[3], device))
        if tag == "in":
            needle = self._eval(node[1], device)
            haystack = self._eval(node[2], device)
            for value in (needle, haystack):
                if isinstance(value, CelError):
                    return value
            if isinstance(haystack, _DomainMap):
                return haystack.has(needle) if isinstance(needle, str) else False
            if isinstance(haystack, Mapping):
                return needle in haystack if isinstance(needle, str) else False
            if isinstance(haystack, list):
                found = [_compare("==", needle, item) for item in haystack]
                if any(f is True for f in found):
                    return True
                return next((f for f in found if isinstance(f, CelError)), False)
            return CelError(f"no such overload: in on {type(haystack).__name__}")
        if tag == "inset":  # a literal list of one type: a set lookup when the types agree
            needle = self._eval(node[1], device)
            if isinstance(needle, CelError):
                return needle
            if _literal_kind(needle) is node[3]:
                return needle in node[2]
            return self._eval(("in", ("lit", needle), node[4]), device)
        if tag == "list":
            return [self._eval(item, device) for item in node[1]]
        if tag == "fn":
            text = node[2][0][1]
            if node[1] == "quantity":
                return _Quantity(parse_quantity(text))
            return Semver.parse(text)
        if tag in ("field", "index"):
            base = self._eval(node[1], device)
            key = node[2] if tag == "field" else self._eval(node[2], device)
            return self._select(base, key, node)
        if tag == "call":
            return self._call(
                node[1], self._eval(node[2], device), [self._eval(a, device) for a in node[3]]
            )
        raise AssertionError(f"unknown node {tag}")  # pragma: no cover - the parser makes these

    def _select(self, base: Any, key: Any, node: Node) -> Any:
        if isinstance(base, CelError):
            return base
        if isinstance(key, CelError):
            return key
        if isinstance(base, DeviceView):
            return {
                "driver": base.driver,
                "attributes": _DomainMap(base.attributes),
                "capacity": _DomainMap(base.capacity),
            }[key]
        if isinstance(base, _DomainMap):
            if not isinstance(key, str):
                return CelError(f"no such overload: a map key must be a string, not {key!r}")
            return base.get(key)
        if isinstance(base, Mapping):
            if key not in base:
                return CelError(f"no such key: {key}")
            value = base[key]
            return _Quantity(value) if isinstance(value, Fraction) else value
        return CelError(f"no such overload: selecting {key!r} from {type(base).__name__}")

    def _call(self, name: str, base: Any, args: list[Any]) -> Any:
        for value in (base, *args):
            if isinstance(value, CelError):
                return value
        if name in ("startsWith", "endsWith", "contains"):
            if not isinstance(base, str) or not isinstance(args[0], str):
                return CelError(f"no such overload: {name} on {type(base).__name__}")
            return {
                "startsWith": base.startswith,
                "endsWith": base.endswith,
                "contains": base.__contains__,
            }[name](args[0])
        if name in ("major", "minor", "patch"):
            if not isinstance(base, Semver):
                return CelError(f"no such overload: {name} on {type(base).__name__}")
            return getattr(base, name)
        other = args[0]
        if isinstance(base, _Quantity) and isinstance(other, _Quantity):
            order = _order(base.value, other.value)
        elif isinstance(base, Semver) and isinstance(other, Semver):
            order = _order(base, other)
        else:
            return CelError(
                f"no such overload: {name} between {type(base).__name__} and {type(other).__name__}"
            )
        return {"compareTo": order, "isGreaterThan": order > 0, "isLessThan": order < 0}[name]


class _DomainMap:
    """``device.attributes`` / ``device.capacity``: an unknown domain is an empty map."""

    __slots__ = ("_by_domain",)

    def __init__(self, by_domain: Mapping[str, Mapping[str, Any]]) -> None:
        self._by_domain = by_domain

    def get(self, domain: str) -> Mapping[str, Any]:
        return self._by_domain.get(domain, {})

    def has(self, domain: str) -> bool:
        """``"d" in device.attributes``: a real membership test (the default is for lookups)."""
        return domain in self._by_domain


def compile_selector(expression: str) -> Selector:
    """The compiled selector of ``expression``, or ``dra-cel-unsupported`` / ``dra-cel-invalid``."""
    if not isinstance(expression, str) or len(expression) > MAX_SELECTOR_LENGTH:
        raise InvalidInputError(
            "dra-cel-invalid",
            f"CEL selector {brief(expression)} is not a string of at most {MAX_SELECTOR_LENGTH} characters",
            "give the selector as text",
        )
    try:
        tree = _Parser(expression).parse()
        _check(tree)
        if _static_type(tree) not in ("bool", "dyn"):
            raise _Invalid(f"it evaluates to a {_static_type(tree)}, not a boolean")
    except _Unsupported as exc:
        raise InvalidInputError(
            "dra-cel-unsupported",
            f"CEL selector {brief(expression, 120)}: {exc.construct} is not in the subset vfcore "
            "evaluates",
            _HINT,
        ) from None
    except _Invalid as exc:
        raise InvalidInputError(
            "dra-cel-invalid",
            f"CEL selector {brief(expression, 120)} does not parse: {exc}",
            "check it against the CEL syntax (kubectl would refuse it too)",
        ) from None
    return Selector(expression, tree)
