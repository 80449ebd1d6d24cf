"""Deterministic synthetic flows for the benchmarks (seeded; no I/O)."""

from __future__ import annotations

import random

from vfcore import FlowSpec, JoinPolicy, NodeSpec


def layered_spec(n_nodes: int, *, seed: int = 7, flow_type: str = "realtime") -> FlowSpec:
    """A realistic wide flow: ~2% producers, processors with 1–3 parents, ~5% consumers.

    Joins are partitioned by trace_id when replicated; some nodes partition by a
    metadata field every producer sets; some run on GPUs.
    """
    rnd = random.Random(seed)
    n_prod = max(1, n_nodes // 50)
    n_cons = max(1, n_nodes // 20)
    n_proc = n_nodes - n_prod - n_cons
    nodes: list[NodeSpec] = []
    readable: list[str] = []
    for i in range(n_prod):
        name = f"source-{i}"
        nodes.append(NodeSpec(name, "producer", sets_keys=("camera",)))
        readable.append(name)
    for i in range(n_proc):
        name = f"stage-{i}"
        window = readable[-200:]
        parents = tuple(rnd.sample(window, k=min(len(window), rnd.choice((1, 1, 1, 2, 3)))))
        nb_tasks = rnd.choice((1, 1, 2, 4))
        partition = rnd.choice((None, None, "camera", "trace_id"))
        if len(parents) > 1 and nb_tasks > 1 and partition is None:
            partition = "trace_id"
        policy = JoinPolicy(timeout_ms=500) if len(parents) > 1 and rnd.random() < 0.3 else None
        gpu = rnd.random() < 0.2
        nodes.append(
            NodeSpec(
                name,
                "processor",
                parents,
                nb_tasks=nb_tasks,
                partition_by=partition,
                device_type="gpu" if gpu else "cpu",
                gpu_memory_gib=10 if gpu and rnd.random() < 0.5 else None,
                join_policy=policy,
            )
        )
        readable.append(name)
    for i in range(n_cons):
        nodes.append(NodeSpec(f"sink-{i}", "consumer", (rnd.choice(readable),)))
    return FlowSpec(f"bench-{n_nodes}", flow_type, tuple(nodes))  # type: ignore[arg-type]


def flow_module_source(n_nodes: int, *, seed: int = 7) -> str:
    """Python source of a flow module with ``n_nodes`` nodes, for whole-process timing."""
    spec = layered_spec(n_nodes, seed=seed)
    lines = [
        "from vfcore import ConsumerNode, Flow, JoinPolicy, ProcessorNode, ProducerNode",
        "",
        "class Src(ProducerNode):",
        "    def next(self, ctx):",
        "        raise StopIteration",
        "",
        "class Step(ProcessorNode):",
        "    def process(self, *inputs):",
        "        return inputs[0]",
        "",
        "class Sink(ConsumerNode):",
        "    def consume(self, *inputs):",
        "        pass",
        "",
        "n = {}",
    ]
    for node in spec.nodes:
        var = f"n[{node.name!r}]"
        if node.kind == "producer":
            lines.append(f"{var} = Src(name={node.name!r}, sets_keys={list(node.sets_keys)!r})")
            continue
        parents = ", ".join(f"n[{p!r}]" for p in node.parents)
        if node.kind == "consumer":
            lines.append(f"{var} = Sink(name={node.name!r})({parents})")
            continue
        policy = "JoinPolicy(timeout_ms=500)" if node.join_policy is not None else "None"
        lines.append(
            f"{var} = Step(name={node.name!r}, nb_tasks={node.nb_tasks}, "
            f"partition_by={node.partition_by!r}, device_type={node.device_type!r}, "
            f"gpu_memory_gib={node.gpu_memory_gib!r}, join_policy={policy})({parents})"
        )
    sinks = ", ".join(f"n[{n.name!r}]" for n in spec.nodes if n.kind == "consumer")
    lines.append(f"flow = Flow([{sinks}], flow_type='realtime', name={spec.name!r})")
    return "\n".join(lines) + "\n"
