"""FlowSpec and NodeSpec: a flow as plain, frozen, JSON round-trippable data.

A :class:`FlowSpec` is what every other part of vfcore reads: validation,
demand, placement, scaling. It is built from a live :class:`vfcore.Flow` with
``flow.spec()``, or loaded from JSON with :meth:`FlowSpec.from_json`.

``from_dict`` checks only the *shape* of the document (an object with a list
of nodes, each with a name and a kind); the *values* of node parameters are
checked by :func:`vfcore.validate`, which reports every problem at once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from vfcore.errors import ERROR, InvalidFlowError, Issue
from vfcore.join_policy import JoinPolicy

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
        if not isinstance(data, Mapping):
            raise _shape_error(None, f"a node must be a JSON object, got {type(data).__name__}")
        name = data.get("name")
        if not isinstance(name, str):
            raise _shape_error(None, f"a node needs a string 'name', got {name!r}")
        unknown = sorted(set(data) - set(_NODE_FIELDS))
        if unknown:
            raise _shape_error(name, f"node {name!r} has unknown field(s) {unknown}")
        kind = data.get("kind")
        if kind not in KINDS:
            raise _shape_error(name, f"node {name!r} has kind {kind!r}; expected one of {KINDS}")
        parents = data.get("parents", [])
        if not isinstance(parents, list | tuple) or not all(isinstance(p, str) for p in parents):
            raise _shape_error(name, f"node {name!r}: 'parents' must be a list of node names")
        sets_keys = data.get("sets_keys", [])
        if isinstance(sets_keys, str) or not isinstance(sets_keys, list | tuple):
            raise _shape_error(name, f"node {name!r}: 'sets_keys' must be a list of field names")
        policy = data.get("join_policy")
        join_policy: JoinPolicy | None = None
        if policy is not None:
            if not isinstance(policy, Mapping):
                raise _shape_error(name, f"node {name!r}: 'join_policy' must be an object")
            try:
                join_policy = JoinPolicy.from_dict(policy)
            except InvalidFlowError as exc:
                raise InvalidFlowError(
                    Issue(i.rule, i.severity, name, i.message, i.hint) for i in exc.issues
                ) from None
        requests = data.get("requests", {})
        if not isinstance(requests, Mapping):
            raise _shape_error(
                name, f"node {name!r}: 'requests' must map resources to quantities, e.g. cpu: '2'"
            )
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
            raise _shape_error(
                None, f"a flow spec must be a JSON object, got {type(data).__name__}"
            )
        unknown = sorted(set(data) - {"name", "flow_type", "nodes"})
        if unknown:
            raise _shape_error(None, f"the flow spec has unknown field(s) {unknown}")
        name = data.get("name", "flow")
        if not isinstance(name, str) or not name:
            raise _shape_error(None, f"the flow 'name' must be a non-empty string, got {name!r}")
        flow_type = data.get("flow_type", BATCH)
        if flow_type not in FLOW_TYPES:
            raise _shape_error(None, f"flow_type {flow_type!r} is not one of {FLOW_TYPES}")
        nodes = data.get("nodes")
        if not isinstance(nodes, list | tuple):
            raise _shape_error(None, "the flow spec needs a 'nodes' list")
        return cls(
            name=name, flow_type=flow_type, nodes=tuple(NodeSpec.from_dict(n) for n in nodes)
        )

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


def _shape_error(node: str | None, message: str) -> InvalidFlowError:
    return InvalidFlowError(
        [
            Issue(
                "invalid-spec",
                ERROR,
                node,
                message,
                "write the spec as FlowSpec.to_json() does (see docs/concepts.md)",
            )
        ]
    )
