"""FlowSpec and NodeSpec: a flow as plain, frozen, JSON round-trippable data.

A :class:`FlowSpec` is what every other part of vfcore reads: validation,
demand, placement, scaling. It is built from a live :class:`vfcore.Flow` with
``flow.spec()``, or loaded from JSON with :meth:`FlowSpec.from_json`.

``from_dict`` checks the *shape* of the document (an object with a list of
nodes, each with a name and a kind) and the JSON *type* of every field (a
``gpu_memory_gib`` of ``"10Gi"`` is an ``invalid-spec`` naming the node and the
field, with every other mistyped field of every node); the *values* of node
parameters (``nb_tasks=0``) are checked by :func:`vfcore.validate`, which
reports every problem at once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from vfcore.errors import ERROR, InvalidFlowError, Issue, brief
from vfcore.flow.join_policy import JoinPolicy

if TYPE_CHECKING:
    from vfcore.flow.authoring import Flow

__all__ = [
    "BATCH",
    "CONSUMER",
    "KINDS",
    "ONE_TASK_PROCESSOR",
    "PROCESSOR",
    "PRODUCER",
    "REALTIME",
    "FlowSpec",
    "FlowType",
    "NodeKind",
    "NodeSpec",
    "to_spec",
]

FlowType = Literal["batch", "realtime"]
BATCH: FlowType = "batch"
REALTIME: FlowType = "realtime"
FLOW_TYPES: tuple[str, ...] = (BATCH, REALTIME)

NodeKind = Literal["producer", "processor", "one-task-processor", "consumer"]
PRODUCER: NodeKind = "producer"
PROCESSOR: NodeKind = "processor"
ONE_TASK_PROCESSOR: NodeKind = "one-task-processor"
CONSUMER: NodeKind = "consumer"
KINDS: tuple[str, ...] = (PRODUCER, PROCESSOR, ONE_TASK_PROCESSOR, CONSUMER)

TRACE_ID = "trace_id"

_NODE_FIELDS = (
    "name",
    "kind",
    "parents",
    "nb_tasks",
    "partition_by",
    "sets_keys",
    "device_type",
    "gpu_count",
    "gpu_resource_name",
    "gpu_memory_gib",
    "join_policy",
    "finite",
    "requests",
    "impl",
)


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node: its kind, its parents (in ``process`` argument order), its parameters.

    ``impl`` is ``"module:QualName"`` of the class that implements the node,
    when the spec came from a live flow; it is informational.
    """

    name: str
    kind: NodeKind
    parents: tuple[str, ...] = ()
    nb_tasks: int = 1
    partition_by: str | None = None
    sets_keys: tuple[str, ...] = ()
    device_type: str = "cpu"
    gpu_count: int = 1
    gpu_resource_name: str | None = None
    gpu_memory_gib: float | None = None
    join_policy: JoinPolicy | None = None
    finite: bool = False
    requests: tuple[tuple[str, str | int | float], ...] = ()
    impl: str | None = None

    @property
    def is_producer(self) -> bool:
        return self.kind == PRODUCER

    @property
    def is_consumer(self) -> bool:
        return self.kind == CONSUMER

    @property
    def is_processor(self) -> bool:
        return self.kind in (PROCESSOR, ONE_TASK_PROCESSOR)

    @property
    def is_join(self) -> bool:
        return len(self.parents) >= 2

    @property
    def is_gpu(self) -> bool:
        return self.device_type == "gpu"

    @property
    def is_partitioned(self) -> bool:
        return self.partition_by is not None

    @property
    def replicas(self) -> int:
        """How many workers the node runs — the one meaning of a node's replica count.

        Producers and consumers: 1. Processors: ``nb_tasks``. A
        ``OneTaskProcessorNode`` runs one worker unless ``partition_by`` lets
        replicas own keys. An invalid ``nb_tasks`` (reported by validation as
        ``invalid-parameter``) counts as 1.

        >>> NodeSpec("det", "processor", ("src",), nb_tasks=4).replicas
        4
        >>> NodeSpec("trk", "one-task-processor", ("src",), nb_tasks=4).replicas
        1
        >>> NodeSpec("trk", "one-task-processor", ("src",), nb_tasks=4, partition_by="cam").replicas
        4
        """
        n = self.nb_tasks if isinstance(self.nb_tasks, int) and self.nb_tasks >= 1 else 1
        if self.kind in (PRODUCER, CONSUMER):
            return 1
        if self.kind == ONE_TASK_PROCESSOR and self.partition_by is None:
            return 1
        return n

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "parents": list(self.parents),
            "nb_tasks": self.nb_tasks,
            "partition_by": self.partition_by,
            "sets_keys": list(self.sets_keys),
            "device_type": self.device_type,
            "gpu_count": self.gpu_count,
            "gpu_resource_name": self.gpu_resource_name,
            "gpu_memory_gib": self.gpu_memory_gib,
            "join_policy": None if self.join_policy is None else self.join_policy.to_dict(),
            "finite": self.finite,
            "requests": dict(self.requests),
            "impl": self.impl,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeSpec:
        """A node from its JSON object; every field of the wrong type is an ``invalid-spec``.

        Types are checked here, values (``nb_tasks >= 1``, a known ``device_type``)
        by :func:`vfcore.validate`. One error lists every mistyped field:

        >>> NodeSpec.from_dict({"name": "det", "kind": "processor", "gpu_memory_gib": "10Gi"})
        Traceback (most recent call last):
        ...
        vfcore.errors.InvalidFlowError: invalid-spec [det]: node 'det': field 'gpu_memory_gib' must be a number of GiB or null, got the string '10Gi' (hint: write the spec as FlowSpec.to_json() does (see docs/concepts.md))
        """
        if not isinstance(data, Mapping):
            raise _shape_error(None, f"a node must be a JSON object, got {_kind_of(data)}")
        name = data.get("name")
        if not isinstance(name, str):
            raise _shape_error(None, f"a node needs a string 'name', got {brief(name)}")
        unknown = sorted(str(k) for k in set(data) - set(_NODE_FIELDS))
        if unknown:
            raise _shape_error(name, f"node {name!r} has unknown field(s) {unknown}")
        kind = data.get("kind")
        if kind not in KINDS:
            raise _shape_error(
                name, f"node {name!r} has kind {brief(kind)}; expected one of {KINDS}"
            )
        problems = [
            f"node {name!r}: {problem}"
            for problem in (_field_problem(key, data[key]) for key in _NODE_FIELDS if key in data)
            if problem is not None
        ]
        if problems:
            raise InvalidFlowError(_shape_issue(name, p) for p in problems)
        parents = data.get("parents", [])
        sets_keys = data.get("sets_keys", [])
        policy = data.get("join_policy")
        join_policy: JoinPolicy | None = None
        if policy is not None:
            try:
                join_policy = JoinPolicy.from_dict(policy)
            except InvalidFlowError as exc:
                raise InvalidFlowError(
                    Issue(i.rule, i.severity, name, i.message, i.hint) for i in exc.issues
                ) from None
            except (TypeError, ValueError) as exc:
                raise _shape_error(
                    name, f"node {name!r}: 'join_policy' cannot be read: {exc}"
                ) from None
        requests = data.get("requests", {})
        defaults = cls(name=name, kind=kind)
        return cls(
            name=name,
            kind=kind,
            parents=tuple(parents),
            nb_tasks=data.get("nb_tasks", defaults.nb_tasks),
            partition_by=data.get("partition_by"),
            sets_keys=tuple(sets_keys),
            device_type=data.get("device_type", defaults.device_type),
            gpu_count=data.get("gpu_count", defaults.gpu_count),
            gpu_resource_name=data.get("gpu_resource_name"),
            gpu_memory_gib=data.get("gpu_memory_gib"),
            join_policy=join_policy,
            finite=data.get("finite", False),
            requests=tuple(sorted(requests.items())),
            impl=data.get("impl"),
        )


def _is_json_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_json_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_name_list(value: object) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)


def _is_requests(value: object) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and (isinstance(v, str) or _is_json_number(v)) for k, v in value.items()
    )


#: The JSON type of every node field but ``name`` and ``kind`` (checked first):
#: a predicate, and the words that say what is expected.
_FIELD_TYPES: dict[str, tuple[Any, str]] = {
    "parents": (_is_name_list, "a list of node names"),
    "nb_tasks": (_is_json_int, "an integer"),
    "partition_by": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "sets_keys": (_is_name_list, "a list of field names"),
    "device_type": (lambda v: isinstance(v, str), "a string ('cpu' or 'gpu')"),
    "gpu_count": (_is_json_int, "an integer"),
    "gpu_resource_name": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "gpu_memory_gib": (lambda v: v is None or _is_json_number(v), "a number of GiB or null"),
    "join_policy": (lambda v: v is None or isinstance(v, Mapping), "an object or null"),
    "finite": (lambda v: isinstance(v, bool), "true or false"),
    "requests": (_is_requests, 'an object mapping resources to quantities, e.g. {"cpu": "2"}'),
    "impl": (lambda v: v is None or isinstance(v, str), "a string or null"),
}


def _field_problem(key: str, value: object) -> str | None:
    check = _FIELD_TYPES.get(key)
    if check is None or check[0](value):
        return None
    return f"field {key!r} must be {check[1]}, got {_kind_of(value)}"


def _kind_of(value: object) -> str:
    """How a JSON value reads in a message: ``the string '10Gi'``, ``a list``, ``true``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the string {brief(value)}"
    if isinstance(value, int | float):
        return f"the number {brief(value)}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


@dataclass(frozen=True, slots=True)
class FlowSpec:
    """A whole flow: its name, its type and its nodes (parents before children)."""

    name: str
    flow_type: FlowType
    nodes: tuple[NodeSpec, ...]
    _index: dict[str, NodeSpec] = field(
        init=False, repr=False, compare=False, hash=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        index: dict[str, NodeSpec] = {}
        for node in self.nodes:
            index.setdefault(node.name, node)
        object.__setattr__(self, "_index", index)

    def node(self, name: str) -> NodeSpec:
        """The node called ``name`` (the first one, if names repeat)."""
        return self._index[name]

    def __contains__(self, name: object) -> bool:
        return name in self._index

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    def children(self) -> dict[str, tuple[str, ...]]:
        """Each node's children, in node order (a child listed once per edge)."""
        out: dict[str, list[str]] = {n.name: [] for n in self.nodes}
        for node in self.nodes:
            for parent in node.parents:
                if parent in out:
                    out[parent].append(node.name)
        return {k: tuple(v) for k, v in out.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "flow_type": self.flow_type,
            "nodes": [n.to_dict() for n in self.nodes],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlowSpec:
        if not isinstance(data, Mapping):
            raise _shape_error(None, f"a flow spec must be a JSON object, got {_kind_of(data)}")
        unknown = sorted(set(data) - {"name", "flow_type", "nodes"})
        if unknown:
            raise _shape_error(None, f"the flow spec has unknown field(s) {unknown}")
        name = data.get("name", "flow")
        if not isinstance(name, str) or not name:
            raise _shape_error(
                None, f"the flow 'name' must be a non-empty string, got {brief(name)}"
            )
        flow_type = data.get("flow_type", BATCH)
        if flow_type not in FLOW_TYPES:
            raise _shape_error(None, f"flow_type {brief(flow_type)} is not one of {FLOW_TYPES}")
        nodes = data.get("nodes")
        if not isinstance(nodes, list | tuple):
            raise _shape_error(None, "the flow spec needs a 'nodes' list")
        parsed: list[NodeSpec] = []
        issues: list[Issue] = []
        for node in nodes:  # every node's problems at once, not only the first node's
            try:
                parsed.append(NodeSpec.from_dict(node))
            except InvalidFlowError as exc:
                issues.extend(exc.issues)
        if issues:
            raise InvalidFlowError(issues)
        return cls(name=name, flow_type=flow_type, nodes=tuple(parsed))

    @classmethod
    def from_json(cls, text: str) -> FlowSpec:
        try:
            data = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
        except json.JSONDecodeError as exc:
            raise _shape_error(
                None, f"the flow spec is not JSON: {exc.msg} at line {exc.lineno}"
            ) from None
        except _NonFiniteNumber as exc:
            raise _shape_error(
                None, f"the flow spec holds the non-finite number {exc.args[0]}, which JSON lacks"
            ) from None
        except RecursionError:
            raise _shape_error(
                None,
                "the flow spec is nested too deeply to read (arrays or objects inside "
                "one another, thousands of levels deep); a FlowSpec is 4 levels deep",
            ) from None
        except ValueError as exc:  # e.g. an integer of more than 4,300 digits
            raise _shape_error(
                None, f"the flow spec holds a value that cannot be read: {exc}"
            ) from None
        return cls.from_dict(data)


class _NonFiniteNumber(ValueError):
    pass


def _refuse_constant(name: str) -> float:
    raise _NonFiniteNumber(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NonFiniteNumber(text)
    return value


def _shape_issue(node: str | None, message: str) -> Issue:
    return Issue(
        "invalid-spec",
        ERROR,
        node,
        message,
        "write the spec as FlowSpec.to_json() does (see docs/concepts.md)",
    )


def _shape_error(node: str | None, message: str) -> InvalidFlowError:
    return InvalidFlowError([_shape_issue(node, message)])


def to_spec(flow_or_spec: Flow | FlowSpec) -> FlowSpec:
    """A FlowSpec from either a live :class:`~vfcore.Flow` or a FlowSpec.

    A ``Flow`` is recognised by its ``spec()`` method, so this module needs no
    import of the authoring classes.
    """
    if isinstance(flow_or_spec, FlowSpec):
        return flow_or_spec
    spec = getattr(flow_or_spec, "spec", None)
    if callable(spec):
        result = spec()
        if isinstance(result, FlowSpec):
            return result
    raise TypeError(f"expected a Flow or FlowSpec, got {type(flow_or_spec).__name__}")
