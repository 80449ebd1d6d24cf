"""Flow authoring, compatible with videoflow.

Nodes are declared by subclassing :class:`ProducerNode`, :class:`ProcessorNode`,
:class:`OneTaskProcessorNode` or :class:`ConsumerNode`, and wired by calling a
node on its parents::

    frames = Frames(name="frames")
    det = Detect(name="detector", nb_tasks=4, device_type="gpu")(frames)
    sink = Sink(name="sink")(det)
    flow = Flow([sink], flow_type=BATCH)
    spec = flow.spec()

Every parameter is checked when the node is constructed: a bad value raises
:class:`~vfcore.errors.InvalidFlowError` carrying an ``invalid-parameter``
issue. Rules about the graph (cycles, joins, partition keys…) are checked by
:func:`vfcore.validate`, which reports all of them at once.
"""

from __future__ import annotations

import dataclasses
import heapq
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from vfcore.errors import ERROR, InvalidFlowError, Issue
from vfcore.flow.join_policy import JoinPolicy
from vfcore.flow.params import parameter_issues
from vfcore.flow.spec import (
    BATCH,
    CONSUMER,
    FLOW_TYPES,
    ONE_TASK_PROCESSOR,
    PROCESSOR,
    PRODUCER,
    FlowSpec,
    FlowType,
    NodeKind,
    NodeSpec,
)

__all__ = [
    "ConsumerNode",
    "Flow",
    "Node",
    "OneTaskProcessorNode",
    "ProcessorNode",
    "ProducerNode",
    "takes_ctx",
]

WIRING = "invalid-wiring"


def takes_ctx(method: Callable[..., Any]) -> bool:
    """Whether a node method declares a ``ctx`` parameter (it is passed only then)."""
    try:
        return "ctx" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


class Node:
    """The base of every node. Subclass one of the four kinds below, not this."""

    kind: ClassVar[NodeKind]

    def __init__(
        self,
        name: str | None = None,
        *,
        nb_tasks: int = 1,
        partition_by: str | None = None,
        sets_keys: Iterable[str] = (),
        device_type: str = "cpu",
        gpu_count: int = 1,
        gpu_resource_name: str | None = None,
        gpu_memory_gib: float | None = None,
        join_policy: JoinPolicy | None = None,
        finite: bool = False,
        requests: Mapping[str, str | int | float] | None = None,
    ) -> None:
        if name is None:
            name = type(self).__name__
        keys = (sets_keys,) if isinstance(sets_keys, str) else sets_keys
        try:
            keys_tuple = tuple(keys)
        except TypeError:
            keys_tuple = keys  # type: ignore[assignment]  # reported below
        self._spec = NodeSpec(
            name=name,
            kind=self.kind,
            nb_tasks=nb_tasks,
            partition_by=partition_by,
            sets_keys=keys_tuple,
            device_type=device_type,
            gpu_count=gpu_count,
            gpu_resource_name=gpu_resource_name,
            gpu_memory_gib=gpu_memory_gib,
            join_policy=join_policy,
            finite=finite,
            requests=_requests_tuple(requests),
            impl=f"{type(self).__module__}:{type(self).__qualname__}",
        )
        problems = parameter_issues(self._spec)
        if problems:
            raise InvalidFlowError(problems)
        self._parents: tuple[Node, ...] = ()
        self._children: list[Node] = []
        self._wired = False

    # -- parameters (read-only views of the declaration) ----------------------
    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def nb_tasks(self) -> int:
        return self._spec.nb_tasks

    @property
    def partition_by(self) -> str | None:
        return self._spec.partition_by

    @property
    def device_type(self) -> str:
        return self._spec.device_type

    @property
    def gpu_count(self) -> int:
        return self._spec.gpu_count

    @property
    def gpu_memory_gib(self) -> float | None:
        return self._spec.gpu_memory_gib

    @property
    def join_policy(self) -> JoinPolicy | None:
        return self._spec.join_policy

    @property
    def parents(self) -> tuple[Node, ...]:
        return self._parents

    @property
    def children(self) -> tuple[Node, ...]:
        return tuple(self._children)

    # -- lifecycle -----------------------------------------------------------
    def open(self) -> None:
        """Called once per replica before the first message (load models here)."""

    def close(self) -> None:
        """Called once per replica after the last message."""

    # -- wiring --------------------------------------------------------------
    def __call__(self, *parents: Node) -> Any:
        def refuse(message: str, hint: str) -> InvalidFlowError:
            return InvalidFlowError([Issue(WIRING, ERROR, self.name, message, hint)])

        if self._wired:
            raise refuse(
                f"node {self.name!r} was already called on its parents "
                f"{[p.name for p in self._parents]}",
                "call each node once, with all of its parents: Join(...)(a, b)",
            )
        if self.kind == PRODUCER:
            raise refuse(
                f"producer {self.name!r} cannot have parents (called on {len(parents)})",
                "make it a ProcessorNode if it consumes other nodes' output",
            )
        if not parents:
            raise refuse(
                f"node {self.name!r} was called with no parents",
                "call it on the nodes it reads from: Node(...)(parent)",
            )
        for parent in parents:
            if not isinstance(parent, Node):
                raise refuse(
                    f"node {self.name!r} was called on {parent!r}, which is not a node",
                    "pass node instances as parents",
                )
        if len({id(p) for p in parents}) != len(parents):
            raise refuse(
                f"node {self.name!r} lists the same parent twice {[p.name for p in parents]}",
                "list each parent once",
            )
        self._parents = tuple(parents)
        self._wired = True
        for parent in parents:
            parent._children.append(self)
        self._spec = _with_parents(self._spec, tuple(p.name for p in parents))
        return self

    def spec(self) -> NodeSpec:
        return self._spec

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _requests_tuple(requests: object) -> tuple[tuple[str, str | int | float], ...]:
    if requests is None:
        return ()
    if isinstance(requests, Mapping):
        return tuple(sorted((k, v) for k, v in requests.items()))
    return requests  # type: ignore[return-value]  # reported by parameter_issues


def _with_parents(spec: NodeSpec, parents: tuple[str, ...]) -> NodeSpec:
    return dataclasses.replace(spec, parents=parents)


class ProducerNode(Node):
    """A source. Implement ``next(self[, ctx])``; raise ``StopIteration`` when done.

    Or implement ``next_batch(self)``: a list (any iterable) of items a call, an empty
    one (or None) for "nothing now"; each item is still an item of its own (trace id,
    position, delivery), handed over at a lower cost (docs/concepts.md).

    ``finite=True`` (or a class attribute ``finite = True``) says the stream
    ends; in a REALTIME flow a finite producer runs as a Job.
    """

    kind: ClassVar[NodeKind] = PRODUCER
    finite: ClassVar[bool] = False

    def __init__(
        self,
        name: str | None = None,
        *,
        sets_keys: Iterable[str] = (),
        device_type: str = "cpu",
        gpu_count: int = 1,
        gpu_resource_name: str | None = None,
        gpu_memory_gib: float | None = None,
        finite: bool | None = None,
        requests: Mapping[str, str | int | float] | None = None,
        nb_tasks: int = 1,
        partition_by: str | None = None,
    ) -> None:
        # nb_tasks and partition_by are accepted only to be refused with a clear
        # invalid-parameter issue: a producer is single.
        super().__init__(
            name,
            nb_tasks=nb_tasks,
            partition_by=partition_by,
            sets_keys=sets_keys,
            device_type=device_type,
            gpu_count=gpu_count,
            gpu_resource_name=gpu_resource_name,
            gpu_memory_gib=gpu_memory_gib,
            finite=type(self).finite if finite is None else finite,
            requests=requests,
        )

    def next(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement next()")


class ProcessorNode(Node):
    """A transform. Implement ``process(self, *inputs[, ctx])``: one input per parent."""

    kind: ClassVar[NodeKind] = PROCESSOR

    def process(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement process()")


class OneTaskProcessorNode(ProcessorNode):
    """A stateful processor: one worker, unless ``partition_by`` makes replicas own keys."""

    kind: ClassVar[NodeKind] = ONE_TASK_PROCESSOR


class ConsumerNode(Node):
    """A sink. Implement ``consume(self, *inputs[, ctx])``."""

    kind: ClassVar[NodeKind] = CONSUMER

    def __init__(
        self,
        name: str | None = None,
        *,
        device_type: str = "cpu",
        gpu_count: int = 1,
        gpu_resource_name: str | None = None,
        gpu_memory_gib: float | None = None,
        join_policy: JoinPolicy | None = None,
        requests: Mapping[str, str | int | float] | None = None,
        nb_tasks: int = 1,
        partition_by: str | None = None,
    ) -> None:
        # nb_tasks and partition_by are accepted only to be refused with a clear
        # invalid-parameter issue: a consumer is single.
        super().__init__(
            name,
            nb_tasks=nb_tasks,
            partition_by=partition_by,
            device_type=device_type,
            gpu_count=gpu_count,
            gpu_resource_name=gpu_resource_name,
            gpu_memory_gib=gpu_memory_gib,
            join_policy=join_policy,
            requests=requests,
        )

    def consume(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement consume()")


class Flow:
    """A flow: the consumers it ends in, and everything connected to them.

    Producers are found by walking parents from the consumers; nodes that hang
    off the flow but reach no consumer are included too, so that validation
    can report their unread output.
    """

    def __init__(
        self,
        consumers: Sequence[ConsumerNode],
        flow_type: FlowType = BATCH,
        *,
        name: str | None = None,
    ) -> None:
        problems: list[Issue] = []

        def bad(message: str, hint: str) -> None:
            problems.append(Issue("invalid-parameter", ERROR, None, message, hint))

        if isinstance(consumers, Node) or not isinstance(consumers, list | tuple):
            bad(
                f"Flow takes a list of consumers, got {type(consumers).__name__}",
                "write Flow([sink_a, sink_b], flow_type=BATCH)",
            )
            consumers = ()
        elif not consumers:
            bad("Flow needs at least one consumer", "pass the flow's sinks: Flow([sink])")
        for c in consumers:
            if not isinstance(c, ConsumerNode):
                bad(
                    f"Flow takes consumers, but {c!r} is not a ConsumerNode",
                    "pass the sinks; producers and processors are found by walking parents",
                )
        if flow_type not in FLOW_TYPES:
            bad(
                f"flow_type={flow_type!r} must be BATCH or REALTIME",
                "from vfcore import BATCH, REALTIME",
            )
        if name is not None and (not isinstance(name, str) or not name.strip()):
            bad(f"name={name!r} must be a non-empty string", "name the flow, or leave name unset")
        if problems:
            raise InvalidFlowError(problems)
        self.consumers: tuple[ConsumerNode, ...] = tuple(consumers)
        self.flow_type: FlowType = flow_type
        self.name = name
        self.nodes: tuple[Node, ...] = _ordered_nodes(self.consumers)

    def spec(self) -> FlowSpec:
        """The flow as plain frozen data (parents before children, ties by name)."""
        return FlowSpec(
            name=self.name or "flow",
            flow_type=self.flow_type,
            nodes=tuple(n.spec() for n in self.nodes),
        )

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def __repr__(self) -> str:
        return f"Flow(name={self.name!r}, flow_type={self.flow_type!r}, nodes={len(self.nodes)})"


def _ordered_nodes(consumers: Sequence[Node]) -> tuple[Node, ...]:
    """Every node connected to the consumers, parents first, ties broken by name.

    Nodes on a cycle cannot be ordered; they follow in name order.
    """
    seen: dict[int, Node] = {}
    stack = list(consumers)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(node.parents)
        stack.extend(node.children)
    discovered = list(seen.values())
    rank = {id(n): i for i, n in enumerate(sorted(discovered, key=lambda n: n.name))}
    indegree = {id(n): len(n.parents) for n in discovered}
    heap = [(n.name, rank[id(n)], n) for n in discovered if indegree[id(n)] == 0]
    heapq.heapify(heap)
    ordered: list[Node] = []
    while heap:
        _, _, node = heapq.heappop(heap)
        ordered.append(node)
        for child in node.children:
            indegree[id(child)] -= 1
            if indegree[id(child)] == 0:
                heapq.heappush(heap, (child.name, rank[id(child)], child))
    placed = {id(n) for n in ordered}
    ordered.extend(
        sorted((n for n in discovered if id(n) not in placed), key=lambda n: rank[id(n)])
    )
    return tuple(ordered)
