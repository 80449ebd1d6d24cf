"""A flow with its run's secrets, and reading rendered manifests.

``FLOW`` is a REALTIME flow with a replicated and a partitioned node;
``secrets_for`` gives a run of a flow fake but well-formed keys (one nkey seed and
public key per role, a run key), so a render's Secret can be read back without
real key material. ``by_kind`` picks the objects of a kind from a render,
``of_node`` those of a flow node, ``pod_of`` (``pod_spec``) the pod template of a
workload and ``worker`` its one container; ``opts`` are render options with an
image and a run id, and ``PIPE_BATCH``, ``PIPE_RT`` and ``GPU`` the flows the
render tables share.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vfcore import FlowSpec, NodeSpec
from vfcore.runtime import broker_topology, run_roles
from vfcore.runtime.manifests import RenderOptions
from vfcore.runtime.run_security import RUN_KEY_BYTES, RunSecrets

FLOW = FlowSpec(
    "cams",
    "realtime",
    (
        NodeSpec("camera", "producer"),
        NodeSpec("detector", "processor", ("camera",), nb_tasks=2),
        NodeSpec("tracker", "processor", ("detector",), nb_tasks=2, partition_by="trace_id"),
        NodeSpec("sink", "consumer", ("tracker",)),
    ),
)


def fake_seed(i: int) -> str:
    return "SU" + "".join("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"[(i * 7 + k) % 32] for k in range(56))


def fake_key(i: int) -> str:
    return "U" + "".join("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"[(i * 5 + k) % 32] for k in range(55))


def secrets_for(spec: FlowSpec, run: str = "r1") -> RunSecrets:
    roles = run_roles(broker_topology(spec, run))
    return RunSecrets(
        seeds={r: fake_seed(i) for i, r in enumerate(roles)},
        public_keys={r: fake_key(i) for i, r in enumerate(roles)},
        run_key=bytes(range(RUN_KEY_BYTES)),
    )


def by_kind(objs: tuple[dict[str, Any], ...], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def pod_of(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


P = NodeSpec("cam", "producer", sets_keys=("camera",))


def spec_of(flow_type: str, *nodes: NodeSpec, name: str = "demo") -> FlowSpec:
    return FlowSpec(name, flow_type, nodes)  # type: ignore[arg-type]


def opts(**kw: Any) -> RenderOptions:
    kw.setdefault("image", "registry.example/demo:1")
    kw.setdefault("run_id", "r1")
    return RenderOptions(**kw)


def of_node(objs: tuple[dict[str, Any], ...], node: str, kind: str | None = None) -> list[dict]:
    return [
        o
        for o in objs
        if o["metadata"].get("annotations", {}).get("vfcore.io/node-name") == node
        and (kind is None or o["kind"] == kind)
    ]


pod_spec = pod_of


def worker(obj: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod_spec(obj)["containers"]
    return container  # type: ignore[no-any-return]


PIPE_BATCH = spec_of(
    "batch",
    P,
    NodeSpec("det", "processor", ("cam",), nb_tasks=3),
    NodeSpec("one", "processor", ("det",)),
    NodeSpec("trk", "processor", ("one",), nb_tasks=2, partition_by="camera"),
    NodeSpec("out", "consumer", ("trk",)),
)


PIPE_RT = replace(PIPE_BATCH, flow_type="realtime")


GPU = spec_of(
    "batch",
    P,
    NodeSpec("det", "processor", ("cam",), nb_tasks=2, device_type="gpu", gpu_count=2),
    NodeSpec("pose", "processor", ("det",), device_type="gpu", gpu_memory_gib=10),
    NodeSpec("out", "consumer", ("pose",)),
)
