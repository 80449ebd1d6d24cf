"""Checks of single node parameters (rule ``invalid-parameter``).

The same checks run when a node is constructed (which raises at once) and when
a :class:`~vfcore.flow.spec.FlowSpec` loaded from JSON is validated (which reports).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from vfcore.errors import ERROR, InvalidInputError, Issue, brief
from vfcore.flow.join_policy import JoinPolicy
from vfcore.flow.spec import CONSUMER, KINDS, PRODUCER, TRACE_ID, NodeSpec
from vfcore.quantity import canonical_units

__all__ = [
    "DEVICE_TYPES",
    "MAX_GPUS_PER_REPLICA",
    "MAX_PODS_PER_FLOW",
    "MAX_REPLICAS_PER_NODE",
    "parameter_issues",
]

RULE = "invalid-parameter"
DEVICE_TYPES = ("cpu", "gpu")

#: The most replicas one node may run (``nb_tasks``). Every replica is a pod, a
#: worker process and a row in each plan, so ``nb_tasks=10**7`` would take
#: minutes and gigabytes to explain or plan; no real deployment of one node
#: comes near 10,000 pods (Kubernetes itself is tested to 150,000 pods in all).
MAX_REPLICAS_PER_NODE = 10_000

#: The most pods (replicas of every node, summed) one flow may run: the bound
#: that keeps ``vf explain`` and the per-pod tables of ``vf plan`` within
#: seconds and megabytes (rule ``flow-too-large``).
MAX_PODS_PER_FLOW = 100_000

#: The most whole GPUs one replica may request (``gpu_count``): far above any node
#: (an HGX board holds 8 GPUs, a DGX-2 16), small enough that every sum over a flow's
#: replicas stays exact in the solvers' 64-bit arithmetic (10,000 x 1,024).
MAX_GPUS_PER_REPLICA = 1024

#: The most VRAM one replica may declare (``gpu_memory_gib``): 1 PiB, far above any
#: card (an H200 has 141 GiB), yet small enough that MiB arithmetic stays exact.
MAX_GPU_MEMORY_GIB = 1_048_576


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_positive_int(value: object) -> bool:
    return _is_int(value) and value >= 1  # type: ignore[operator]


def parameter_issues(node: NodeSpec) -> list[Issue]:
    """Every invalid parameter of one node, each an ``invalid-parameter`` error.

    >>> [i.message for i in parameter_issues(NodeSpec("d", "processor", nb_tasks=0))]
    ["node 'd': nb_tasks=0 must be an int >= 1"]
    """
    out: list[Issue] = []
    label = node.name if isinstance(node.name, str) and node.name else None

    def bad(message: str, hint: str) -> None:
        out.append(Issue(RULE, ERROR, label, f"node {label!r}: {message}", hint))

    if not isinstance(node.name, str) or not node.name.strip():
        bad(f"name={brief(node.name)} must be a non-empty string", "give every node a unique name")
    if node.kind not in KINDS:
        bad(
            f"kind={brief(node.kind)} is not one of {KINDS}",
            "use a producer, processor or consumer",
        )
    single = node.kind in (PRODUCER, CONSUMER)

    if not _is_positive_int(node.nb_tasks):
        bad(
            f"nb_tasks={brief(node.nb_tasks)} must be an int >= 1",
            "pass the number of replicas as an int, e.g. nb_tasks=4",
        )
    elif node.nb_tasks > MAX_REPLICAS_PER_NODE:
        bad(
            f"nb_tasks={brief(node.nb_tasks)} is over the limit of "
            f"{MAX_REPLICAS_PER_NODE} replicas per node",
            f"run at most {MAX_REPLICAS_PER_NODE} replicas of one node (each is a pod); "
            "split the work across nodes if you really need more",
        )
    elif single and node.nb_tasks != 1:
        bad(
            f"a {node.kind} is single, yet nb_tasks={node.nb_tasks}",
            f"remove nb_tasks; scale the processors downstream of this {node.kind} instead",
        )

    if node.partition_by is not None:
        if not isinstance(node.partition_by, str) or not node.partition_by.strip():
            bad(
                f"partition_by={brief(node.partition_by)} must be a non-empty string",
                "use partition_by='trace_id' or the name of a metadata field set upstream",
            )
        elif single:
            bad(
                f"a {node.kind} is single and cannot be partitioned (partition_by="
                f"{node.partition_by!r})",
                "remove partition_by; partition the replicated processors instead",
            )

    keys = node.sets_keys
    if not isinstance(keys, tuple) or not all(isinstance(k, str) and k.strip() for k in keys):
        bad(
            f"sets_keys={brief(keys)} must be a sequence of non-empty field names",
            "list the metadata fields this node sets with ctx.set_partition_key",
        )
    else:
        if len(set(keys)) != len(keys):
            bad(f"sets_keys={list(keys)} names a field twice", "list each field once")
        if TRACE_ID in keys:
            bad(
                "sets_keys names 'trace_id', which the runtime assigns to every event",
                "remove 'trace_id' from sets_keys; partition_by='trace_id' needs no setter",
            )
        if keys and node.kind == CONSUMER:
            bad(
                f"a consumer has no children to read sets_keys={list(keys)}",
                "remove sets_keys from the consumer",
            )

    if node.device_type not in DEVICE_TYPES:
        bad(
            f"device_type={brief(node.device_type)} must be 'cpu' or 'gpu'",
            "use device_type='gpu' for nodes that need a GPU, else leave the default 'cpu'",
        )
    if not _is_positive_int(node.gpu_count):
        bad(
            f"gpu_count={brief(node.gpu_count)} must be an int >= 1",
            "pass the number of whole GPUs one replica needs, e.g. gpu_count=2",
        )
    elif node.gpu_count > MAX_GPUS_PER_REPLICA:
        bad(
            f"gpu_count={brief(node.gpu_count)} is over the limit of {MAX_GPUS_PER_REPLICA:,} "
            "GPUs per replica",
            "no node holds that many GPUs: request what one replica uses, e.g. gpu_count=2",
        )
    name = node.gpu_resource_name
    if name is not None and (
        not isinstance(name, str) or name.count("/") != 1 or not all(name.split("/"))
    ):
        bad(
            f"gpu_resource_name={brief(name)} is not an extended resource name like 'nvidia.com/gpu'",
            "write it as <domain>/<name>, e.g. 'nvidia.com/mig-1g.10gb', or leave it unset",
        )
    memory = node.gpu_memory_gib
    if memory is not None and (
        not isinstance(memory, int | float)
        or isinstance(memory, bool)
        or (isinstance(memory, float) and not math.isfinite(memory))
        or not 0 < memory <= MAX_GPU_MEMORY_GIB
    ):
        bad(
            f"gpu_memory_gib={brief(memory)} must be a number > 0 and <= {MAX_GPU_MEMORY_GIB:,}",
            "give the VRAM one replica needs in GiB, e.g. gpu_memory_gib=10",
        )
    if node.join_policy is not None and not isinstance(node.join_policy, JoinPolicy):
        bad(
            f"join_policy={brief(node.join_policy)} is not a JoinPolicy",
            "pass join_policy=JoinPolicy(...)",
        )
    if not isinstance(node.finite, bool):
        bad(
            f"finite={brief(node.finite)} must be True or False", "pass finite=True or finite=False"
        )
    elif node.finite and node.kind != PRODUCER:
        bad(
            f"finite=True applies only to producers (this is a {node.kind})",
            "remove finite; it says that a producer's stream ends",
        )
    _check_requests(node, bad)
    if not isinstance(node.parents, tuple) or not all(isinstance(p, str) for p in node.parents):
        bad(f"parents={brief(node.parents)} must be node names", "wire nodes by calling them")
    return out


def _check_requests(node: NodeSpec, bad: Callable[[str, str], None]) -> None:
    requests = node.requests
    if not isinstance(requests, tuple) or not all(
        isinstance(item, tuple) and len(item) == 2 for item in requests
    ):
        bad(
            f"requests={brief(requests)} must map resources to quantities",
            "pass requests={'cpu': '2', 'memory': '8Gi'}",
        )
        return
    for resource, quantity in requests:
        if not isinstance(resource, str) or not (
            resource in ("cpu", "memory", "ephemeral-storage") or resource.count("/") == 1
        ):
            bad(
                f"requests names {brief(resource)}, which is not cpu, memory, ephemeral-storage or an "
                "extended resource like example.com/fpga",
                "request cpu and memory here; GPUs come from device_type and gpu_count",
            )
            continue
        try:
            units = canonical_units(resource, quantity, what=f"requests[{resource!r}]")
        except InvalidInputError as exc:
            bad(exc.message, exc.hint)
            continue
        if units < 0:
            bad(f"requests[{resource!r}]={brief(quantity)} is negative", "requests are >= 0")
