"""Laws of a run's Secret and NetworkPolicies in :func:`vfcore.render`, over random flows (issue 24).

For random valid flows, run ids, keys and options (an in-cluster broker or
one of yours, policies on or off, egress restricted or not, KEDA):

* no secret value — a seed, its base64, the run key in base64 or hex — is in
  any object but the Secret, and the Secret holds each role's seed under
  :func:`seed_key` and the run key;
* every Secret item a pod mounts exists in the Secret (a key the Secret lacks
  would leave the pod waiting for a volume forever), and each container mounts
  exactly its role's items: the broker its configuration, a setup container the
  setup key and the run key, a worker its own node's key and the run key;
* every object is valid for Kubernetes 1.31–1.36 in strict mode (ScaledObjects
  against KEDA's CRD), and no TriggerAuthentication is rendered.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.manifest_schemas import KUBE_VERSIONS, check_any
from tests.property.strategies import valid_specs
from vfcore import FlowSpec, validate
from vfcore.flow.names import physical_name
from vfcore.runtime import broker_topology, run_roles
from vfcore.runtime.manifests import RenderOptions, render
from vfcore.runtime.run_security import RUN_KEY_BYTES, RunSecrets, seed_key

BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
run_ids = st.from_regex(r"\A[a-z0-9](?:[a-z0-9-]{0,8}[a-z0-9])?\Z")


def _key(prefix: str, length: int) -> st.SearchStrategy[str]:
    return st.text(BASE32, min_size=length, max_size=length).map(lambda s: prefix + s)


@st.composite
def cases(draw: st.DrawFn) -> tuple[FlowSpec, dict[str, Any]]:
    spec = draw(valid_specs(max_producers=2, max_processors=4, max_consumers=2))
    keda = spec.flow_type == "realtime" and draw(st.booleans())
    assume(not any(i.is_error for i in validate(spec, autoscaling=keda)))
    run = draw(run_ids)
    roles = run_roles(broker_topology(spec, run))
    seeds = draw(st.lists(_key("SU", 56), min_size=len(roles), max_size=len(roles), unique=True))
    keys = draw(st.lists(_key("U", 55), min_size=len(roles), max_size=len(roles), unique=True))
    values = RunSecrets(
        seeds=dict(zip(roles, seeds, strict=True)),
        public_keys=dict(zip(roles, keys, strict=True)),
        run_key=draw(st.binary(min_size=RUN_KEY_BYTES, max_size=RUN_KEY_BYTES)),
    )
    kw: dict[str, Any] = {
        "image": "reg.example/flow:1",
        "run_id": run,
        "namespace": draw(st.sampled_from(["default", "video-prod"])),
        "keda": keda,
        "secret_values": values,
        "network_policies": draw(st.booleans()),
        "restrict_egress": draw(st.booleans()),
        "keda_namespace": draw(st.sampled_from(["keda", "autoscaling"])),
    }
    if draw(st.booleans()):
        kw["broker_url"] = draw(
            st.sampled_from(["nats://nats.messaging.svc:4222", "tls://nats.example:7422"])
        )
    return spec, kw


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(case=cases(), version=st.sampled_from(KUBE_VERSIONS))
def test_secret_values_stay_in_the_secret_and_each_pod_mounts_its_own_items(
    case: tuple[FlowSpec, dict[str, Any]], version: str
) -> None:
    spec, kw = case
    values: RunSecrets = kw["secret_values"]
    in_cluster = "broker_url" not in kw
    objs = render(spec, RenderOptions(**kw))
    for obj in objs:
        check_any(obj, version)
    assert not [o for o in objs if o["kind"] == "TriggerAuthentication"]

    (secret,) = [o for o in objs if o["kind"] == "Secret"]
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert data["run-key"] == values.run_key
    for role, seed in values.seeds:
        key = seed_key(role, flow=spec.name, run_id=kw["run_id"])
        assert data.get(key) == (seed.encode() if in_cluster else None)

    forbidden = [base64.b64encode(values.run_key).decode(), values.run_key.hex()]
    for _, seed in values.seeds:
        forbidden += [seed, base64.b64encode(seed.encode()).decode()]
    rest = json.dumps([o for o in objs if o is not secret])
    assert not [v for v in forbidden if v in rest]

    for obj in objs:
        if "template" not in obj.get("spec", {}):
            continue
        volumes = {
            v["name"]: v["secret"]
            for v in obj["spec"]["template"]["spec"].get("volumes", [])
            if "secret" in v
        }
        for volume in volumes.values():
            assert volume["secretName"] == secret["metadata"]["name"]
            assert {i["key"] for i in volume["items"]} <= set(secret["data"])
        for container in _containers(obj):
            mounted = sorted(
                item["key"]
                for m in container.get("volumeMounts", [])
                if m["name"] in volumes
                for item in volumes[m["name"]]["items"]
            )
            if container["name"] == "nats":
                expected = ["nats.conf"]
            elif container["name"] in ("setup", "topology"):
                expected = ["run-key", "setup.nk"] if in_cluster else ["run-key"]
            else:
                node = obj["metadata"]["annotations"]["vfcore.io/node-name"]
                own = f"{physical_name(node, flow=spec.name, run=kw['run_id']).k8s}.nk"
                expected = sorted(["run-key", own]) if in_cluster else ["run-key"]
            assert mounted == expected, (container["name"], mounted)
