"""A flow with its run's secrets, and reading rendered manifests.

``FLOW`` is a REALTIME flow with a replicated and a partitioned node;
``secrets_for`` gives a run of a flow fake but well-formed keys (one nkey seed and
public key per role, a run key), so a render's Secret can be read back without
real key material. ``by_kind`` picks the objects of a kind from a render and
``pod_of`` the pod template of a workload.
"""

from __future__ import annotations

from typing import Any

from vfcore import FlowSpec, NodeSpec
from vfcore.runtime import broker_topology, run_roles
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
