"""Shared hypothesis strategies: random valid flows, and rule-breaking mutations.

``valid_specs()`` draws a random DAG over producers, processors, one-task
processors and consumers with random *legal* parameters (replicated joins are
partitioned, metadata partition keys are set by every producer, time joins run
one replica with a consistent quorum and collect set, GPU parameters only on
GPU nodes). ``mutations(spec)`` draws one change that breaks exactly one rule
on one node, and says which.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, replace

import networkx as nx
from hypothesis import strategies as st

from vfcore import FlowSpec, JoinPolicy, NodeSpec
from vfcore.flow.validate import effective_replicas

#: Metadata fields every generated producer sets (so partitioning by them is legal).
GLOBAL_KEYS = ("camera", "tenant")
EXTRA_KEYS = ("lane", "zone")

# Hand-picked edge-case names: punctuation, case, length, unicode.
EDGE_NAMES = (
    "a.b",
    "a_b",
    "a-b",
    "A-B",
    "x" * 40 + "1",
    "x" * 40 + "2",
    "détecteur",
    "sink ",
    "0",
    "trace_id",
)

names = st.one_of(
    st.sampled_from(EDGE_NAMES),
    st.text(alphabet=string.ascii_letters + string.digits + "._- ", min_size=1, max_size=12).filter(
        lambda s: s.strip() != ""
    ),
)


@st.composite
def _gpu_params(draw: st.DrawFn) -> dict[str, object]:
    if not draw(st.booleans()):
        return {}
    count = draw(st.integers(1, 4))
    params: dict[str, object] = {"device_type": "gpu", "gpu_count": count}
    if count == 1:
        if draw(st.booleans()):
            params["gpu_memory_gib"] = draw(st.sampled_from([1, 5, 10, 20.5, 40]))
        params["gpu_resource_name"] = draw(
            st.sampled_from([None, "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu"])
        )
    else:
        params["gpu_resource_name"] = draw(st.sampled_from([None, "nvidia.com/gpu"]))
    return params


@st.composite
def _join_policy(draw: st.DrawFn, parents: tuple[str, ...], replicas: int) -> JoinPolicy | None:
    choice = draw(
        st.sampled_from(["none", "trace", "time"] if replicas == 1 else ["none", "trace"])
    )
    if choice == "none":
        return None
    if choice == "trace":
        if draw(st.booleans()):
            return JoinPolicy(mode="trace", timeout_ms=None, missing="wait")
        return JoinPolicy(
            mode="trace",
            timeout_ms=draw(st.sampled_from([100, 500, 10_000])),
            missing=draw(st.sampled_from(["drop", "error"])),
            max_pending=draw(st.integers(1, 1000)),
        )
    collected = draw(st.lists(st.sampled_from(parents), unique=True, max_size=len(parents) - 1))
    synchronised = [p for p in parents if p not in collected]
    timeout = draw(st.sampled_from([None, 200, 1000]))
    quorum = None
    if timeout is not None and draw(st.booleans()):
        quorum = draw(st.integers(1, len(synchronised)))
    return JoinPolicy(
        mode="time",
        tolerance_ms=draw(st.sampled_from([10, 40, 33.3])),
        timeout_ms=timeout,
        missing="drop" if timeout is not None else "wait",
        quorum=quorum,
        collect={p: draw(st.sampled_from([50, 100])) for p in collected} or None,
    )


@st.composite
def valid_specs(
    draw: st.DrawFn,
    *,
    max_producers: int = 3,
    max_processors: int = 8,
    max_consumers: int = 3,
    flow_type: str | None = None,
) -> FlowSpec:
    """A random flow that validates with no errors (warnings are allowed)."""
    n_prod = draw(st.integers(1, max_producers))
    n_proc = draw(st.integers(0, max_processors))
    n_cons = draw(st.integers(1, max_consumers))
    all_names = draw(st.lists(names, min_size=n_prod + n_proc + n_cons, unique=True, max_size=64))
    all_names = all_names[: n_prod + n_proc + n_cons]
    nodes: list[NodeSpec] = []
    for i in range(n_prod):
        extra = draw(st.lists(st.sampled_from(EXTRA_KEYS), unique=True, max_size=2))
        nodes.append(
            NodeSpec(
                name=all_names[i],
                kind="producer",
                sets_keys=GLOBAL_KEYS + tuple(extra),
                finite=draw(st.booleans()),
                **draw(_gpu_params()),  # type: ignore[arg-type]
            )
        )
    for j in range(n_proc):
        name = all_names[n_prod + j]
        upstream = [n.name for n in nodes]
        parents = tuple(
            draw(st.lists(st.sampled_from(upstream), unique=True, min_size=1, max_size=3))
        )
        kind = draw(st.sampled_from(["processor", "one-task-processor"]))
        nb_tasks = draw(st.integers(1, 4))
        partition = draw(st.sampled_from([None, "trace_id", *GLOBAL_KEYS]))
        probe = NodeSpec(name, kind, parents, nb_tasks=nb_tasks, partition_by=partition)
        if len(parents) >= 2 and effective_replicas(probe) > 1 and partition is None:
            partition = "trace_id"
            probe = replace(probe, partition_by=partition)
        replicas = effective_replicas(probe)
        policy = draw(_join_policy(parents, replicas)) if len(parents) >= 2 else None
        sets = tuple(draw(st.lists(st.sampled_from(EXTRA_KEYS), unique=True, max_size=1)))
        nodes.append(
            replace(
                probe,
                join_policy=policy,
                sets_keys=sets,
                **draw(_gpu_params()),  # type: ignore[arg-type]
            )
        )
    readable = [n.name for n in nodes]
    for k in range(n_cons):
        parents = tuple(
            draw(st.lists(st.sampled_from(readable), unique=True, min_size=1, max_size=2))
        )
        policy = draw(_join_policy(parents, 1)) if len(parents) >= 2 else None
        nodes.append(
            NodeSpec(
                name=all_names[n_prod + n_proc + k],
                kind="consumer",
                parents=parents,
                join_policy=policy,
                **draw(_gpu_params()),  # type: ignore[arg-type]
            )
        )
    ftype = flow_type or draw(st.sampled_from(["batch", "realtime"]))
    order = draw(st.permutations(nodes)) if draw(st.booleans()) else nodes
    return FlowSpec(name=draw(names), flow_type=ftype, nodes=tuple(order))  # type: ignore[arg-type]


# -- mutations ----------------------------------------------------------------------


@dataclass(frozen=True)
class Mutation:
    """A spec that breaks exactly one rule on one node (``node`` None: flow-level)."""

    spec: FlowSpec
    rule: str
    node: str | None
    autoscaling: bool = False


def _replace_node(spec: FlowSpec, name: str, **changes: object) -> FlowSpec:
    nodes = tuple(replace(n, **changes) if n.name == name else n for n in spec.nodes)  # type: ignore[arg-type]
    return replace(spec, nodes=nodes)


def _add_nodes(spec: FlowSpec, *new: NodeSpec) -> FlowSpec:
    return replace(spec, nodes=spec.nodes + tuple(new))


def _fresh(spec: FlowSpec, base: str) -> str:
    name, i = base, 0
    while name in spec:
        i += 1
        name = f"{base}{i}"
    return name


def _graph(spec: FlowSpec) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(spec.names)
    g.add_edges_from((p, n.name) for n in spec.nodes for p in n.parents)
    return g


def _can_gain_parent(node: NodeSpec) -> bool:
    """Adding a parent to this processor breaks no rule by itself."""
    return (
        node.is_processor
        and node.join_policy is None
        and (effective_replicas(node) == 1 or node.partition_by is not None)
    )


@st.composite
def mutations(draw: st.DrawFn, spec: FlowSpec) -> Mutation:
    """One rule-breaking change to a valid spec, and the rule and node it breaks."""
    processors = sorted(n.name for n in spec.nodes if n.is_processor)
    builders = ["invalid-parameter", "duplicate-name", "consumer-has-children", "autoscaling"]
    builders += [
        "partition-key-never-set",
        "gpu-parameter-on-cpu-node",
        "gpu-memory-with-multi-gpu",
    ]
    builders += ["mig-cannot-span", "join-needed", "join-needed", "join-needed"]
    growable = [p for p in processors if _can_gain_parent(spec.node(p))]
    if growable:
        builders += ["root-not-producer", "cycle"]
    which = draw(st.sampled_from(builders))
    all_names = sorted(spec.names)

    if which == "invalid-parameter":
        name = draw(st.sampled_from(all_names))
        node = spec.node(name)
        field, value = draw(
            st.sampled_from(
                [
                    ("nb_tasks", "2"),
                    ("nb_tasks", 0),
                    ("nb_tasks", -3),
                    ("nb_tasks", True),
                    ("gpu_count", 0),
                    ("gpu_count", True),
                    ("gpu_memory_gib", -1),
                    ("device_type", "tpu"),
                    ("partition_by", ""),
                    ("gpu_resource_name", "gpu"),
                ]
            )
        )
        if field == "partition_by" and not node.is_processor:
            field, value = "nb_tasks", 0
        return Mutation(_replace_node(spec, name, **{field: value}), "invalid-parameter", name)

    if which == "duplicate-name":
        consumer = draw(st.sampled_from(sorted(n.name for n in spec.nodes if n.is_consumer)))
        return Mutation(_add_nodes(spec, spec.node(consumer)), "duplicate-name", consumer)

    if which == "consumer-has-children":
        consumer = draw(st.sampled_from(sorted(n.name for n in spec.nodes if n.is_consumer)))
        extra = NodeSpec(_fresh(spec, "extra_sink"), "consumer", (consumer,))
        return Mutation(_add_nodes(spec, extra), "consumer-has-children", consumer)

    if which == "autoscaling":
        return Mutation(replace(spec, flow_type="batch"), "autoscaling-batch-flow", None, True)

    if which == "partition-key-never-set":
        candidates = [
            n.name
            for n in spec.nodes
            if n.kind == "processor" or (n.kind == "one-task-processor" and n.nb_tasks == 1)
        ]
        if candidates:
            name = draw(st.sampled_from(sorted(candidates)))
            return Mutation(
                _replace_node(spec, name, partition_by="never_set_field"),
                "partition-key-never-set",
                name,
            )
        which = "gpu-parameter-on-cpu-node"

    if which == "gpu-parameter-on-cpu-node":
        cpu = sorted(n.name for n in spec.nodes if not n.is_gpu)
        if cpu:
            name = draw(st.sampled_from(cpu))
            change = draw(st.sampled_from([{"gpu_count": 2}, {"gpu_memory_gib": 8}]))
            return Mutation(_replace_node(spec, name, **change), "gpu-parameter-on-cpu-node", name)
        which = "gpu-memory-with-multi-gpu"

    if which in ("gpu-memory-with-multi-gpu", "mig-cannot-span"):
        name = draw(st.sampled_from(all_names))
        if which == "gpu-memory-with-multi-gpu":
            change = {
                "device_type": "gpu",
                "gpu_count": 2,
                "gpu_memory_gib": 8,
                "gpu_resource_name": None,
            }
        else:
            change = {
                "device_type": "gpu",
                "gpu_count": 2,
                "gpu_memory_gib": None,
                "gpu_resource_name": "nvidia.com/mig-3g.40gb",
            }
        return Mutation(_replace_node(spec, name, **change), which, name)

    if which == "root-not-producer":
        target = draw(st.sampled_from(growable))
        root = NodeSpec(_fresh(spec, "orphan"), "processor")
        node = spec.node(target)
        mutated = _replace_node(spec, target, parents=(*node.parents, root.name))
        return Mutation(_add_nodes(mutated, root), "root-not-producer", root.name)

    if which == "cycle":
        target = draw(st.sampled_from(growable))
        graph = _graph(spec)
        below = sorted(
            d
            for d in nx.descendants(graph, target) | {target}
            if spec.node(d).is_processor and d not in spec.node(target).parents
        )
        back = draw(st.sampled_from(below))
        node = spec.node(target)
        mutated = _replace_node(spec, target, parents=(*node.parents, back))
        g2 = _graph(mutated)
        component = next(c for c in nx.strongly_connected_components(g2) if target in c)
        return Mutation(mutated, "cycle", min(component))

    # A rule about joins: use an existing join, or make one.
    return draw(_join_mutation(spec))


@st.composite
def _join_mutation(draw: st.DrawFn, spec: FlowSpec) -> Mutation:
    graph = _graph(spec)
    order = list(nx.topological_sort(graph))
    position = {name: i for i, name in enumerate(order)}
    rule = draw(
        st.sampled_from(
            ["replicated-join-unpartitioned", "replicated-time-join", "invalid-join-policy"]
        )
    )
    options = []
    for node in spec.nodes:
        if node.kind != "processor":
            continue
        extra = sorted(
            n.name
            for n in spec.nodes
            if not n.is_consumer
            and position[n.name] < position[node.name]
            and n.name not in node.parents
        )
        if len(node.parents) >= 2 or extra:
            options.append((node.name, extra))
    if not options:  # no plain processor to turn into a join: break a GPU rule instead
        name = min(spec.names)
        change = {
            "device_type": "gpu",
            "gpu_count": 2,
            "gpu_memory_gib": 8,
            "gpu_resource_name": None,
        }
        return Mutation(_replace_node(spec, name, **change), "gpu-memory-with-multi-gpu", name)
    name, extra = draw(st.sampled_from(options))
    node = spec.node(name)
    parents = (
        node.parents if len(node.parents) >= 2 else (*node.parents, draw(st.sampled_from(extra)))
    )
    if rule == "replicated-join-unpartitioned":
        change = {"parents": parents, "nb_tasks": 2, "partition_by": None, "join_policy": None}
    elif rule == "replicated-time-join":
        change = {
            "parents": parents,
            "nb_tasks": 3,
            "partition_by": "trace_id",
            "join_policy": JoinPolicy(mode="time", tolerance_ms=40),
        }
    else:
        broken = draw(
            st.sampled_from(
                [
                    JoinPolicy(mode="time", tolerance_ms=40, collect={"ghost_parent": 100}),
                    JoinPolicy(
                        mode="time",
                        tolerance_ms=40,
                        timeout_ms=500,
                        quorum=len(parents) + 1,
                    ),
                    JoinPolicy(mode="time", tolerance_ms=40, collect=dict.fromkeys(parents, 50)),
                ]
            )
        )
        change = {"parents": parents, "nb_tasks": 1, "join_policy": broken}
    return Mutation(_replace_node(spec, name, **change), rule, name)


@st.composite
def flows_with_issues(draw: st.DrawFn) -> FlowSpec:
    """A valid spec or one with a rule broken: input for order and renaming laws."""
    spec = draw(valid_specs())
    if draw(st.booleans()):
        return draw(mutations(spec)).spec
    return spec
