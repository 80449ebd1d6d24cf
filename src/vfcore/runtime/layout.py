"""The local layout: every decision a local run needs before its first process starts.

:func:`local_layout` turns a valid :class:`~vfcore.FlowSpec`, the run's options
and the host's GPU inventory into a frozen :class:`LocalLayout`. The local
executor (``vfadapters.local``) carries it out and decides nothing of its own:

* **replica bounds** per node: it starts ``replicas`` (:func:`vfcore.effective_replicas`)
  and stays within ``[min_replicas, max_replicas]``. Only nodes the autoscaling
  rule admits (``scalable``) get ``max_replicas > replicas``;
* **pods and slots**: pod ``r`` of a node is named ``pod_name(node, r)``
  (``detector/0``) and owns control slot ``slots[r]``; slots are numbered
  across the flow in node order, one per replica the node may ever run, so
  every buffer a replica may write to exists before any replica starts;
* **routing** per edge: every message goes to every child (fan-out across
  edges); within one edge it goes to one replica of the child: ``single`` (one
  replica), ``competing`` (replicas share one input buffer; whoever is free
  takes the next batch) or ``partitioned`` (one input buffer per replica; the
  owner is :func:`vfcore.owner_of` with the edge's ``strategy``);
* **REALTIME freshness** per edge (``realtime_keep``): how many messages a
  child's input buffer on that edge keeps waiting (written, not yet taken) in
  a REALTIME flow; a writer that would exceed it evicts the oldest waiting
  messages, and writers batch at most that many messages per record, so the
  bound holds per message. The rule (:func:`realtime_keep_of`):
  ``LayoutOptions.realtime_keep`` when given (every edge keeps exactly that
  many), else :data:`DEFAULT_REALTIME_KEEP` (1, as videoflow keeps) times the
  child's number of parents (a join takes one parent's batch at a time, round
  robin, so each of its buffers waits up to that many turns). None in BATCH
  flows, which never evict;
* **devices** per GPU pod: :func:`vfcore.runtime.devices.assign_devices` over the
  inventory passed in.

The autoscaling rule (:data:`LOCAL_WAIVED_REASONS`): a node may autoscale
locally when :func:`vfcore.autoscaling_rejections` gives it no reason other than
``batch-job``. That reason exists because a BATCH node runs as a Kubernetes Job,
whose parallelism is fixed; locally its competing replicas share one input
buffer, so one more or one fewer changes nothing about who may take what, in
BATCH as in REALTIME. Every other reason binds locally too (partitioned nodes,
one-task nodes, unpartitioned joins, GPU nodes without ``gpu_autoscaling``).

Worked example (``autoscale=True, max_replicas=6``): ``camera → detector
(nb_tasks=2) → tracker (nb_tasks=3, partition_by="trace_id") → sink``.
``camera`` has slot 0; ``detector`` starts 2 replicas and may grow to 6 (slots
1-6, edge ``camera → detector`` competing); ``tracker`` is partitioned, so it
stays at 3 (slots 7-9, three input buffers, edge ``detector → tracker``
partitioned, ``modulo``); ``sink`` has slot 10::

    >>> from vfcore import FlowSpec, NodeSpec
    >>> spec = FlowSpec("demo", "realtime", (
    ...     NodeSpec("camera", "producer"),
    ...     NodeSpec("detector", "processor", ("camera",), nb_tasks=2),
    ...     NodeSpec("tracker", "processor", ("detector",), nb_tasks=3, partition_by="trace_id"),
    ...     NodeSpec("sink", "consumer", ("tracker",)),
    ... ))
    >>> layout = local_layout(spec, LayoutOptions(autoscale=True, max_replicas=6))
    >>> [(n.name, n.replicas, n.max_replicas, n.slots[0]) for n in layout.nodes]
    [('camera', 1, 1, 0), ('detector', 2, 6, 1), ('tracker', 3, 3, 7), ('sink', 1, 1, 10)]
    >>> [(e.parent, e.child, e.routing) for e in layout.edges]
    [('camera', 'detector', 'competing'), ('detector', 'tracker', 'partitioned'), ('tracker', 'sink', 'single')]
    >>> layout.node("tracker").scaling_reasons[0].code
    'partitioned'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from vfcore.errors import InvalidInputError
from vfcore.flow.join_policy import JoinPolicy
from vfcore.flow.spec import REALTIME, FlowSpec, NodeSpec
from vfcore.flow.validate import effective_join_policy
from vfcore.placement.demand import AutoscalingOptions, Reason, autoscaling_rejections, pod_name
from vfcore.routing.partition import STRATEGIES, Strategy
from vfcore.runtime.devices import (
    GPU_POLICIES,
    DeviceAssignment,
    DeviceRequest,
    GpuDevice,
    GpuPolicy,
    assign_devices,
)

__all__ = [
    "DEFAULT_REALTIME_KEEP",
    "LOCAL_WAIVED_REASONS",
    "MAX_REALTIME_KEEP",
    "ROUTINGS",
    "EdgeLayout",
    "LayoutOptions",
    "LocalLayout",
    "NodeLayout",
    "PodLayout",
    "Routing",
    "local_layout",
    "realtime_keep_of",
    "runtime_join_policy",
]

Routing = Literal["single", "competing", "partitioned"]
"""How one edge delivers a message to its child's replicas (see the module docstring)."""
ROUTINGS: Final[tuple[Routing, ...]] = ("single", "competing", "partitioned")

#: Reason codes of :func:`vfcore.autoscaling_rejections` that do not bind a local
#: run: ``batch-job`` (a Kubernetes Job's fixed parallelism; locally competing
#: replicas share one input buffer in BATCH flows too).
LOCAL_WAIVED_REASONS: Final[frozenset[str]] = frozenset({"batch-job"})

#: Messages a REALTIME input buffer keeps waiting per parent of its child when
#: ``LayoutOptions.realtime_keep`` is not given: 1, the freshest, as videoflow
#: keeps (``max_msgs`` 1 per subject). A node slower than its input then works
#: on a message at most one arrival interval old when it takes it.
DEFAULT_REALTIME_KEEP: Final[int] = 1
#: The largest ``realtime_keep`` (the most messages one input buffer may hold).
MAX_REALTIME_KEEP: Final[int] = 1 << 24


@dataclass(frozen=True, slots=True)
class LayoutOptions:
    """The run options that bear on the layout (``vf run`` flags of the same names).

    ``autoscale``: let admitted nodes grow to ``max_replicas``;
    ``gpu_autoscaling``: admit GPU nodes too; ``gpu_policy``: ``share`` runs GPU
    replicas anyway when the cards fall short, ``strict`` refuses (see
    :func:`~vfcore.runtime.devices.assign_devices`); ``strategy``: how a
    partitioned edge maps keys to owners (:func:`vfcore.partition_of`);
    ``realtime_keep``: in REALTIME flows, how many messages every input buffer
    keeps waiting (None: the rule of :func:`realtime_keep_of`).
    """

    autoscale: bool = False
    gpu_autoscaling: bool = False
    max_replicas: int = 10
    gpu_policy: GpuPolicy = "share"
    strategy: Strategy = "modulo"
    realtime_keep: int | None = None

    def __post_init__(self) -> None:
        m = self.max_replicas
        if not isinstance(m, int) or isinstance(m, bool) or m < 1:
            raise InvalidInputError(
                "invalid-layout-option",
                f"max_replicas={m!r} must be an int >= 1",
                "give the most replicas an autoscaled node may run, e.g. 10",
            )
        if self.gpu_policy not in GPU_POLICIES:
            raise InvalidInputError(
                "invalid-layout-option",
                f"gpu_policy={self.gpu_policy!r} is not one of {', '.join(GPU_POLICIES)}",
                "use 'share' (the default) or 'strict'",
            )
        if self.strategy not in STRATEGIES:
            raise InvalidInputError(
                "invalid-layout-option",
                f"strategy={self.strategy!r} is not one of {', '.join(STRATEGIES)}",
                "use 'modulo' (the default) or 'jump'",
            )
        k = self.realtime_keep
        if k is not None and (
            not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_REALTIME_KEEP
        ):
            raise InvalidInputError(
                "invalid-layout-option",
                f"realtime_keep={k!r} must be a whole number in [1, {MAX_REALTIME_KEEP:,}]",
                f"give how many of the freshest messages a REALTIME buffer keeps waiting, "
                f"e.g. {DEFAULT_REALTIME_KEEP} (videoflow keeps 1)",
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "autoscale": self.autoscale,
            "gpu_autoscaling": self.gpu_autoscaling,
            "max_replicas": self.max_replicas,
            "gpu_policy": self.gpu_policy,
            "strategy": self.strategy,
            "realtime_keep": self.realtime_keep,
        }


def realtime_keep_of(child: NodeSpec, flow_type: str, options: LayoutOptions) -> int | None:
    """How many messages a REALTIME input buffer of ``child`` keeps waiting (None in BATCH).

    ``options.realtime_keep`` when given, else :data:`DEFAULT_REALTIME_KEEP` times
    the child's number of parents:

    >>> from vfcore import NodeSpec
    >>> join = NodeSpec("pair", "processor", ("left", "right"))
    >>> realtime_keep_of(join, "realtime", LayoutOptions())
    2
    >>> realtime_keep_of(join, "realtime", LayoutOptions(realtime_keep=5))
    5
    >>> realtime_keep_of(join, "batch", LayoutOptions()) is None
    True
    """
    if flow_type != REALTIME:
        return None
    if options.realtime_keep is not None:
        return options.realtime_keep
    return DEFAULT_REALTIME_KEEP * max(1, len(child.parents))


def runtime_join_policy(node: NodeSpec, flow_type: str) -> JoinPolicy | None:
    """The join policy a replica runs with (None for a node with one parent).

    The node's own policy, else its flow type's default — except that a BATCH
    join on the default policy holds as many open groups as its inputs let it
    (``max_pending`` 2**30): its halves stay unacknowledged in its input
    buffers (or consumers), which bound them, so the assembler never evicts a
    half that would later meet its counterpart. Both transports take it from
    here.

    >>> from vfcore import NodeSpec
    >>> runtime_join_policy(NodeSpec("j", "processor", ("a", "b")), "batch").max_pending
    1073741824
    >>> runtime_join_policy(NodeSpec("j", "processor", ("a", "b")), "realtime").max_pending
    256
    """
    policy = effective_join_policy(node, flow_type)
    if policy is not None and flow_type != REALTIME and node.join_policy is None:
        policy = replace(policy, max_pending=max(policy.max_pending, 1 << 30))
    return policy


@dataclass(frozen=True, slots=True)
class PodLayout:
    """One replica a node may run: its pod name, control slot, input buffer and devices.

    ``owner``: which of the node's input buffers it reads (its own replica
    index when the node is partitioned, else 0, the shared one). ``device``:
    ``"cuda"`` or ``"cpu"`` for a GPU node's pod (``"cpu"`` when it got no
    device), None for a CPU node's.
    """

    name: str
    replica: int
    slot: int
    owner: int
    device: str | None = None
    devices: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "replica": self.replica,
            "slot": self.slot,
            "owner": self.owner,
            "device": self.device,
            "devices": list(self.devices),
        }


@dataclass(frozen=True, slots=True)
class NodeLayout:
    """One node of a local run: how many replicas, within which bounds, as which pods.

    ``replicas`` is what starts (:func:`vfcore.effective_replicas`);
    ``min_replicas <= replicas <= max_replicas``. ``scalable``: autoscaling is on
    and the local rule admits the node; ``scaling_reasons``: why it stays at fixed
    scale under autoscaling (the rule's verdict, computed whether or not
    autoscaling is on; :data:`LOCAL_WAIVED_REASONS` left out). ``owners``: its input
    buffers per parent (``replicas`` when partitioned, else 1). ``pods``: one per
    replica up to ``max_replicas``.
    """

    name: str
    index: int
    replicas: int
    min_replicas: int
    max_replicas: int
    scalable: bool
    scaling_reasons: tuple[Reason, ...]
    partitioned: bool
    owners: int
    pods: tuple[PodLayout, ...]
    join_policy: JoinPolicy | None = None

    @property
    def slots(self) -> tuple[int, ...]:
        """The control slot of each pod, by replica index."""
        return tuple(pod.slot for pod in self.pods)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "replicas": self.replicas,
            "min_replicas": self.min_replicas,
            "max_replicas": self.max_replicas,
            "scalable": self.scalable,
            "scaling_reasons": [r.to_dict() for r in self.scaling_reasons],
            "partitioned": self.partitioned,
            "owners": self.owners,
            "pods": [pod.to_dict() for pod in self.pods],
            "join_policy": None if self.join_policy is None else self.join_policy.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class EdgeLayout:
    """One edge ``parent → child`` and how it routes to the child's replicas.

    ``owners``: the child's input buffers on this edge. ``partitioned`` edges
    carry the child's ``partition_by``; ``strategy`` is the run's; a writer finds a
    message's buffer with ``vfcore.owner_of(child_spec, trace_id=...,
    metadata=..., strategy=strategy)``, which is below ``owners`` because the
    child's ``owners`` is its :func:`vfcore.effective_replicas`.
    ``realtime_keep``: REALTIME only (None in BATCH), how many messages each of
    the child's buffers on this edge keeps waiting (:func:`realtime_keep_of`).
    """

    parent: str
    child: str
    routing: Routing
    owners: int
    partition_by: str | None = None
    strategy: Strategy = "modulo"
    realtime_keep: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "parent": self.parent,
            "child": self.child,
            "routing": self.routing,
            "owners": self.owners,
            "partition_by": self.partition_by,
            "strategy": self.strategy,
            "realtime_keep": self.realtime_keep,
        }


@dataclass(frozen=True, slots=True)
class LocalLayout:
    """The layout of one local run (see :func:`local_layout`).

    ``nodes`` in flow order; ``edges`` in child order, then parent order;
    ``slots``: control slots in all; ``devices``: the GPU assignment, None when
    no node is a GPU node (a refused assignment is data: ``devices.refused``).
    """

    flow: str
    flow_type: str
    options: LayoutOptions
    nodes: tuple[NodeLayout, ...]
    edges: tuple[EdgeLayout, ...]
    slots: int
    devices: DeviceAssignment | None = None

    def node(self, name: str) -> NodeLayout:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def outputs(self, parent: str) -> tuple[EdgeLayout, ...]:
        """The edges out of ``parent``, in child order."""
        return tuple(edge for edge in self.edges if edge.parent == parent)

    def edge(self, parent: str, child: str) -> EdgeLayout:
        for edge in self.edges:
            if edge.parent == parent and edge.child == child:
                return edge
        raise KeyError((parent, child))

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "flow_type": self.flow_type,
            "options": self.options.to_dict(),
            "nodes": [node.to_dict() for node in self.nodes],
            "edges": [edge.to_dict() for edge in self.edges],
            "slots": self.slots,
            "devices": None if self.devices is None else self.devices.to_dict(),
        }


def local_layout(
    spec: FlowSpec,
    options: LayoutOptions | None = None,
    *,
    inventory: Sequence[GpuDevice] = (),
) -> LocalLayout:
    """Lay out a local run of ``spec`` (valid: :func:`vfcore.validate` gave no error).

    ``inventory``: the GPUs the run may use (detected by the adapter, narrowed to
    ``CUDA_VISIBLE_DEVICES``); looked at only when a node is a GPU node. Raises
    :class:`~vfcore.errors.InvalidInputError` only for invalid options or
    device requests; a GPU shortfall under ``strict`` is ``devices.refused``.
    """
    opts = options if options is not None else LayoutOptions()
    rejections = autoscaling_rejections(
        spec,
        AutoscalingOptions(
            enabled=opts.autoscale,
            gpu_autoscaling=opts.gpu_autoscaling,
            max_replicas=opts.max_replicas,
        ),
    )
    nodes: list[NodeLayout] = []
    slot = 0
    for index, node in enumerate(spec.nodes):
        nodes.append(_node_layout(node, index, slot, rejections[node.name], opts, spec.flow_type))
        slot += nodes[-1].max_replicas
    devices = _assign(spec, nodes, inventory, opts.gpu_policy)
    if devices is not None:
        nodes = [_with_devices(n, devices) if spec.node(n.name).is_gpu else n for n in nodes]
    by_name = {n.name: n for n in nodes}
    edges = tuple(
        _edge_layout(
            parent,
            node,
            by_name[node.name],
            opts.strategy,
            realtime_keep_of(node, spec.flow_type, opts),
        )
        for node in spec.nodes
        for parent in node.parents
    )
    return LocalLayout(spec.name, spec.flow_type, opts, tuple(nodes), edges, slot, devices)


def _node_layout(
    node: NodeSpec,
    index: int,
    first_slot: int,
    rejected: tuple[Reason, ...],
    opts: LayoutOptions,
    flow_type: str,
) -> NodeLayout:
    n = node.replicas
    reasons = tuple(r for r in rejected if r.code not in LOCAL_WAIVED_REASONS)
    scalable = opts.autoscale and node.is_processor and not reasons
    top = max(n, opts.max_replicas) if scalable else n
    partitioned = node.partition_by is not None and n > 1
    pods = tuple(
        PodLayout(pod_name(node.name, r), r, first_slot + r, r if partitioned else 0)
        for r in range(top)
    )
    return NodeLayout(
        name=node.name,
        index=index,
        replicas=n,
        min_replicas=n,
        max_replicas=top,
        scalable=scalable,
        scaling_reasons=reasons,
        partitioned=partitioned,
        owners=n if partitioned else 1,
        pods=pods,
        join_policy=runtime_join_policy(node, flow_type),
    )


def _assign(
    spec: FlowSpec, nodes: Sequence[NodeLayout], inventory: Sequence[GpuDevice], policy: GpuPolicy
) -> DeviceAssignment | None:
    requests = [
        DeviceRequest(pod.name, node.gpu_count, node.gpu_memory_gib)
        for layout, node in zip(nodes, spec.nodes, strict=True)
        if node.is_gpu
        for pod in layout.pods
    ]
    if not requests:
        return None
    return assign_devices(requests, tuple(inventory), policy=policy)


def _with_devices(node: NodeLayout, assignment: DeviceAssignment) -> NodeLayout:
    pods = []
    for pod in node.pods:
        devices = tuple(assignment.devices.get(pod.name, ()))
        pods.append(
            PodLayout(
                pod.name,
                pod.replica,
                pod.slot,
                pod.owner,
                "cuda" if devices else "cpu",
                devices,
            )
        )
    return NodeLayout(
        node.name,
        node.index,
        node.replicas,
        node.min_replicas,
        node.max_replicas,
        node.scalable,
        node.scaling_reasons,
        node.partitioned,
        node.owners,
        tuple(pods),
        node.join_policy,
    )


def _edge_layout(
    parent: str, child: NodeSpec, layout: NodeLayout, strategy: Strategy, keep: int | None
) -> EdgeLayout:
    if layout.partitioned:
        return EdgeLayout(
            parent, child.name, "partitioned", layout.owners, child.partition_by, strategy, keep
        )
    routing: Routing = "competing" if layout.max_replicas > 1 else "single"
    return EdgeLayout(parent, child.name, routing, 1, strategy=strategy, realtime_keep=keep)
