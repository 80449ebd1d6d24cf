"""Graph validation: every problem of a flow, in one pass.

:func:`validate` returns a tuple of :class:`~vfcore.errors.Issue`, errors first;
:func:`require_valid` raises one :class:`~vfcore.errors.InvalidFlowError`
listing every error. Each rule id is documented with an example and its fix in
``docs/rules.md``.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

from vfcore.errors import ERROR, WARNING, InvalidFlowError, Issue, Severity, sort_issues
from vfcore.flow.gpu_mode import GPU_MODES, GpuMode, parse_gpu_mode, slice_of
from vfcore.flow.join_policy import JoinPolicy, join_policy_parent_problems
from vfcore.flow.params import MAX_PODS_PER_FLOW, parameter_issues
from vfcore.flow.spec import (
    BATCH,
    CONSUMER,
    ONE_TASK_PROCESSOR,
    PRODUCER,
    REALTIME,
    TRACE_ID,
    FlowSpec,
    NodeSpec,
    to_spec,
)

if TYPE_CHECKING:
    import networkx as nx

    from vfcore.flow.authoring import Flow

__all__ = [
    "DEFAULT_GPU_RESOURCE",
    "GPU_MODES",
    "RULES",
    "check_gpu_mode",
    "effective_join_policy",
    "effective_replicas",
    "flow_pod_count",
    "gpu_resource_of",
    "require_valid",
    "to_spec",
    "validate",
]

DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"

#: Every rule id with its severity. Ids are never renamed (see docs/rules.md).
RULES: dict[str, Severity] = {
    "invalid-parameter": ERROR,
    "invalid-wiring": ERROR,
    "invalid-spec": ERROR,
    "unknown-parent": ERROR,
    "root-not-producer": ERROR,
    "cycle": ERROR,
    "duplicate-name": ERROR,
    "consumer-has-children": ERROR,
    "unreachable-consumer": ERROR,
    "gpu-parameter-on-cpu-node": ERROR,
    "gpu-memory-with-multi-gpu": ERROR,
    "mig-cannot-span": ERROR,
    "replicated-join-unpartitioned": ERROR,
    "partition-key-never-set": ERROR,
    "invalid-join-policy": ERROR,
    "replicated-time-join": ERROR,
    "autoscaling-batch-flow": ERROR,
    "flow-too-large": ERROR,
    "output-unread": WARNING,
    "singleton-replicas-ignored": WARNING,
    "partition-without-replicas": WARNING,
    "join-policy-ignored": WARNING,
    "gpu-memory-undeclared": WARNING,
    "join-waits-forever": WARNING,
}


#: The GPU mode named by a string (``None``: exclusive); an unknown one raises
#: ``invalid-gpu-mode``. Kept under this name for callers; see :func:`vfcore.flow.gpu_mode.parse_gpu_mode`.
check_gpu_mode = parse_gpu_mode


def effective_replicas(node: NodeSpec) -> int:
    """How many workers a node runs: :attr:`NodeSpec.replicas` (kept for callers).

    Producers and consumers: 1. Processors: ``nb_tasks``. A
    ``OneTaskProcessorNode`` runs one worker unless ``partition_by`` lets
    replicas own keys, e.g. ``nb_tasks=4, partition_by='trace_id'`` → 4.
    """
    return node.replicas


def flow_pod_count(spec: FlowSpec) -> int:
    """Pods the flow runs: every node's :func:`effective_replicas`, summed.

    A node whose parameters are invalid counts as one pod (it is reported as
    ``invalid-parameter``).
    """
    return sum(n.replicas if not parameter_issues(n) else 1 for n in spec.nodes)


def flow_size_issue(spec: FlowSpec) -> Issue | None:
    """``flow-too-large`` when the flow runs more than ``MAX_PODS_PER_FLOW`` pods."""
    pods = flow_pod_count(spec)
    if pods <= MAX_PODS_PER_FLOW:
        return None
    return Issue(
        "flow-too-large",
        ERROR,
        None,
        f"flow {spec.name!r} runs {pods} pods ({len(spec.nodes)} nodes), over the limit of "
        f"{MAX_PODS_PER_FLOW} pods per flow",
        "lower nb_tasks, or split the flow into several flows",
    )


def effective_join_policy(node: NodeSpec, flow_type: str) -> JoinPolicy | None:
    """The policy a join runs with: its own, else its flow type's default; None if no join."""
    if len(node.parents) < 2:
        return None
    return node.join_policy or JoinPolicy.default_for(flow_type)


def gpu_resource_of(node: NodeSpec, default: str | None = None) -> str:
    """The extended resource a GPU node claims: its own, else the deploy-wide default."""
    return node.gpu_resource_name or default or DEFAULT_GPU_RESOURCE


def _is_mig_resource(resource: str) -> bool:
    return resource.rsplit("/", 1)[-1].startswith("mig-")


def validate(
    flow_or_spec: Flow | FlowSpec,
    *,
    gpu_mode: GpuMode | str | None = None,
    gpu_resource_name: str | None = None,
    autoscaling: bool = False,
) -> tuple[Issue, ...]:
    """Every problem of a flow at once, errors first.

    ``gpu_mode`` (exclusive, shared, mix) and ``gpu_resource_name`` (the
    deploy-wide default resource) enable the checks that depend on them;
    ``autoscaling=True`` reports ``autoscaling-batch-flow`` for BATCH flows.
    The input is never modified.
    """
    spec = to_spec(flow_or_spec)
    mode = parse_gpu_mode(gpu_mode)
    return sort_issues(_Validator(spec, mode, gpu_resource_name, autoscaling).run())


def require_valid(
    flow_or_spec: Flow | FlowSpec,
    *,
    gpu_mode: GpuMode | str | None = None,
    gpu_resource_name: str | None = None,
    autoscaling: bool = False,
) -> FlowSpec:
    """The flow's spec, or an :class:`InvalidFlowError` listing every error."""
    spec = to_spec(flow_or_spec)
    issues = validate(
        spec, gpu_mode=gpu_mode, gpu_resource_name=gpu_resource_name, autoscaling=autoscaling
    )
    if any(i.is_error for i in issues):
        raise InvalidFlowError(issues)
    return spec


class _Validator:
    def __init__(
        self, spec: FlowSpec, gpu_mode: GpuMode, default_resource: str | None, autoscaling: bool
    ) -> None:
        self.spec = spec
        self.gpu_mode = gpu_mode
        self.default_resource = default_resource
        self.autoscaling = autoscaling
        self.issues: list[Issue] = []
        self.bad_params: set[str] = set()

    def add(self, rule: str, node: str | None, message: str, hint: str) -> None:
        self.issues.append(Issue(rule, RULES[rule], node, message, hint))

    def run(self) -> list[Issue]:
        spec = self.spec
        if not spec.nodes:  # nothing to run, plan or deploy: "valid" and "fits" would mislead
            self.add(
                "invalid-spec",
                None,
                f"flow {spec.name!r} has no nodes",
                "a flow needs at least a producer and a consumer; write the spec as "
                "FlowSpec.to_json() does",
            )
        for node in spec.nodes:
            problems = parameter_issues(node)
            if problems:
                self.bad_params.add(node.name)
                self.issues.extend(problems)
        if self._too_large():
            return self.issues  # the graph rules would take minutes; fix the size first
        self._names()
        graph = self._graph()
        self._cycles(graph)
        self._roots_and_leaves()
        self._reachability()
        for node in spec.nodes:
            if node.name in self.bad_params:
                continue
            self._gpu(node)
            self._replicas_and_joins(node)
        self._partition_keys()
        if self.autoscaling and spec.flow_type == BATCH:
            self.add(
                "autoscaling-batch-flow",
                None,
                f"flow {spec.name!r} is BATCH: its nodes run as Jobs, whose parallelism is "
                "fixed when they start, so a scaler would have nothing to drive",
                "drop --autoscaling and set nb_tasks to the parallelism you want, "
                "or make the flow REALTIME",
            )
        return self.issues

    def _too_large(self) -> bool:
        issue = flow_size_issue(self.spec)
        if issue is not None:
            self.issues.append(issue)
        return issue is not None

    # -- names and edges -----------------------------------------------------
    def _names(self) -> None:
        counts = Counter(n.name for n in self.spec.nodes if isinstance(n.name, str))
        for name, count in sorted(counts.items()):
            if count > 1:
                self.add(
                    "duplicate-name",
                    name,
                    f"{count} nodes are named {name!r}; names identify queues, pods and "
                    "partitions, so they must be unique",
                    f"rename all but one of the nodes called {name!r}",
                )
        for node in self.spec.nodes:
            if not isinstance(node.parents, tuple):
                continue
            # a parent name shared by two nodes is duplicate-name's finding, not a repeat
            repeated = sorted(
                p for p, c in Counter(node.parents).items() if c > 1 and counts[p] <= 1
            )
            if repeated:
                self.add(
                    "invalid-wiring",
                    node.name,
                    f"node {node.name!r} lists parent(s) {repeated} more than once",
                    "list each parent once",
                )
            if node.kind == PRODUCER and node.parents:
                self.add(
                    "invalid-wiring",
                    node.name,
                    f"producer {node.name!r} has parents {list(node.parents)}; producers are sources",
                    "make it a processor, or remove its parents",
                )
            for parent in node.parents:
                if parent not in self.spec:
                    self.add(
                        "unknown-parent",
                        node.name,
                        f"node {node.name!r} names parent {parent!r}, which is not in the flow",
                        f"add a node called {parent!r} or fix the name",
                    )

    def _graph(self) -> nx.DiGraph:
        # imported here: a process that imports vfcore and validates nothing (a worker,
        # the fork server) does not pay networkx's 0.25 s at its start
        import networkx as nx

        graph = nx.DiGraph()
        graph.add_nodes_from(sorted(self.spec.names))
        edges = sorted(
            (parent, node.name)
            for node in self.spec.nodes
            if isinstance(node.parents, tuple)
            for parent in node.parents
            if parent in self.spec
        )
        graph.add_edges_from(edges)
        self.graph = graph
        return graph

    def _cycles(self, graph: nx.DiGraph) -> None:
        import networkx as nx

        counts = Counter(self.spec.names)
        for component in nx.strongly_connected_components(graph):
            if any(counts[name] > 1 for name in component):
                continue  # edges by an ambiguous name prove nothing; duplicate-name says so
            if len(component) == 1:
                (only,) = component
                if not graph.has_edge(only, only):
                    continue
            start = min(component)
            cycle = nx.find_cycle(graph.subgraph(component), source=start)
            path = [u for u, _ in cycle] + [cycle[0][0]]
            self.add(
                "cycle",
                start,
                f"nodes {sorted(component)} form a cycle: {' -> '.join(path)}; "
                "a flow must be acyclic",
                f"remove the edge {cycle[-1][0]} -> {cycle[-1][1]} (or another edge of the cycle)",
            )

    def _roots_and_leaves(self) -> None:
        children = self.spec.children()
        for node in self.spec.nodes:
            if node.kind not in (PRODUCER,) and not node.parents:
                self.add(
                    "root-not-producer",
                    node.name,
                    f"{node.kind} {node.name!r} has no parents, so nothing ever feeds it",
                    "make it a ProducerNode, or call it on its parents: Node(...)(parent)",
                )
            kids = children.get(node.name, ())
            if node.kind == CONSUMER and kids:
                self.add(
                    "consumer-has-children",
                    node.name,
                    f"consumer {node.name!r} is read by {sorted(set(kids))}; consumers are sinks",
                    f"make {node.name!r} a ProcessorNode if others read its output",
                )
            if node.kind != CONSUMER and not kids:
                self.add(
                    "output-unread",
                    node.name,
                    f"{node.kind} {node.name!r} produces output that no node reads",
                    "wire a consumer to it, or remove it from the flow",
                )

    def _reachability(self) -> None:
        producers = [n.name for n in self.spec.nodes if n.kind == PRODUCER]
        reached = _reach(self.graph, producers, blocked=frozenset())
        for node in self.spec.nodes:
            if node.kind == CONSUMER and node.name not in reached:
                self.add(
                    "unreachable-consumer",
                    node.name,
                    f"consumer {node.name!r} is not downstream of any producer, so it never "
                    "receives a message",
                    "wire it (through processors) to a producer",
                )

    # -- per node ------------------------------------------------------------
    def _gpu(self, node: NodeSpec) -> None:
        if not node.is_gpu:
            stray = []
            if node.gpu_count > 1:
                stray.append(f"gpu_count={node.gpu_count}")
            if node.gpu_memory_gib is not None:
                stray.append(f"gpu_memory_gib={node.gpu_memory_gib}")
            if node.gpu_resource_name is not None:
                stray.append(f"gpu_resource_name={node.gpu_resource_name!r}")
            if stray:
                self.add(
                    "gpu-parameter-on-cpu-node",
                    node.name,
                    f"node {node.name!r} runs on CPU but sets {', '.join(stray)}",
                    "add device_type='gpu', or remove the GPU parameters",
                )
            return
        if node.gpu_memory_gib is not None and node.gpu_count > 1:
            self.add(
                "gpu-memory-with-multi-gpu",
                node.name,
                f"node {node.name!r} sets gpu_memory_gib={node.gpu_memory_gib} and "
                f"gpu_count={node.gpu_count}; a memory demand describes one slice of one card",
                "use gpu_memory_gib for a model that fits one card (or slice), or gpu_count "
                "for whole cards, not both",
            )
        resource = gpu_resource_of(node, self.default_resource)
        if node.gpu_count > 1 and _is_mig_resource(resource):
            source = "the node" if node.gpu_resource_name else "--gpu-resource-name"
            self.add(
                "mig-cannot-span",
                node.name,
                f"node {node.name!r} asks for gpu_count={node.gpu_count} of {resource!r} "
                f"(from {source}); a process can use only one MIG slice",
                "use gpu_count=1 with a larger MIG profile, or whole GPUs (nvidia.com/gpu)",
            )
        if slice_of(node, self.gpu_mode) == "shared" and node.gpu_memory_gib is None:
            self.add(
                "gpu-memory-undeclared",
                node.name,
                f"GPU node {node.name!r} declares no gpu_memory_gib; in shared mode VRAM is the "
                "only limit, so its fit cannot be checked",
                "declare the VRAM one replica needs, e.g. gpu_memory_gib=6",
            )

    def _replicas_and_joins(self, node: NodeSpec) -> None:
        replicas = node.replicas
        parents = node.parents
        if node.kind == ONE_TASK_PROCESSOR and node.nb_tasks > 1 and node.partition_by is None:
            self.add(
                "singleton-replicas-ignored",
                node.name,
                f"one-task node {node.name!r} has nb_tasks={node.nb_tasks} but no partition_by, "
                "so it runs one worker",
                "add partition_by (e.g. 'trace_id') to scale it, or set nb_tasks=1",
            )
        if node.partition_by is not None and node.is_processor and node.nb_tasks == 1:
            self.add(
                "partition-without-replicas",
                node.name,
                f"node {node.name!r} partitions by {node.partition_by!r} at nb_tasks=1; "
                "one replica owns every key",
                "raise nb_tasks to spread the keys, or remove partition_by",
            )
        policy = node.join_policy
        if policy is not None and len(parents) < 2:
            self.add(
                "join-policy-ignored",
                node.name,
                f"node {node.name!r} has a join policy but {len(parents)} parent(s); "
                "only a node with two or more parents joins",
                "remove join_policy, or give the node its other parents",
            )
        if len(parents) < 2:
            return
        if node.is_processor and replicas > 1 and node.partition_by is None:
            self.add(
                "replicated-join-unpartitioned",
                node.name,
                f"join {node.name!r} has {replicas} replicas and parents {list(parents)} but no "
                "partition_by: the halves of one event could reach different replicas",
                "add partition_by='trace_id' (or a key every parent carries), or set nb_tasks=1",
            )
        if policy is None:
            return
        if (
            self.spec.flow_type == REALTIME
            and policy.timeout_ms is None
            and policy.missing != "wait"
        ):
            self.add(
                "join-waits-forever",
                node.name,
                f"REALTIME join {node.name!r} has a policy without timeout_ms, so an incomplete "
                f"group waits forever (missing={policy.missing!r} never applies; without a "
                "policy a REALTIME join drops after 10 s)",
                "set timeout_ms (e.g. 10000), or missing='wait' to wait on purpose",
            )
        if policy.mode == "time" and replicas > 1:
            self.add(
                "replicated-time-join",
                node.name,
                f"time join {node.name!r} has {replicas} replicas; it groups independent "
                "sources by timestamp, so no key sends a group's members to one replica",
                "set nb_tasks=1 for the time join (scale the nodes around it instead)",
            )
        for message, hint in join_policy_parent_problems(policy, parents):
            self.add("invalid-join-policy", node.name, f"join {node.name!r}: {message}", hint)

    # -- partition keys ------------------------------------------------------
    def _partition_keys(self) -> None:
        fields = sorted(
            {
                n.partition_by
                for n in self.spec.nodes
                if isinstance(n.partition_by, str)
                and n.partition_by != TRACE_ID
                and n.name not in self.bad_params
            }
        )
        if not fields:
            return
        producers = [n.name for n in self.spec.nodes if n.kind == PRODUCER]
        for key in fields:
            setters = frozenset(
                n.name
                for n in self.spec.nodes
                if isinstance(n.sets_keys, tuple) and key in n.sets_keys
            )
            unset = _reach(self.graph, producers, blocked=setters)
            for node in self.spec.nodes:
                if node.partition_by != key or node.name in self.bad_params:
                    continue
                open_parents = [p for p in node.parents if p in unset]
                if not open_parents:
                    continue
                where = (
                    f"no node sets it (declare it with sets_keys=[{key!r}] upstream)"
                    if not setters
                    else f"it is set by {sorted(setters)}, but not on the path through "
                    f"{open_parents}"
                )
                self.add(
                    "partition-key-never-set",
                    node.name,
                    f"node {node.name!r} partitions by metadata field {key!r}, yet some messages "
                    f"reach it without that field: {where}",
                    f"set {key!r} with ctx.set_partition_key on every path from a producer "
                    "(and list it in that node's sets_keys), or use partition_by='trace_id'",
                )


def _reach(graph: nx.DiGraph, sources: Iterable[str], blocked: frozenset[str]) -> set[str]:
    """Nodes reachable from ``sources`` along paths that avoid ``blocked`` nodes."""
    seen: set[str] = set()
    queue = deque(s for s in sources if s not in blocked and s in graph)
    seen.update(queue)
    succ = graph.succ
    while queue:
        for child in succ[queue.popleft()]:
            if child not in seen and child not in blocked:
                seen.add(child)
                queue.append(child)
    return seen
