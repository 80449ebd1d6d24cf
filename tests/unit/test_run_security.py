"""What :func:`vfcore.render` adds for a run's credentials and network (issue 24), as data.

The Secret (only with values), each pod's view of it (its own items, files
named by ``VF_*_FILE`` variables, never a value), the broker's configuration
from the Secret, the NetworkPolicies; every object valid offline for Kubernetes
1.31 … 1.36 in strict mode; no secret value anywhere but in the Secret's data.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.manifest_schemas import KUBE_VERSIONS, bundled_versions, check_any
from tests.support.manifests import FLOW, by_kind, fake_seed, pod_of, secrets_for
from vfcore.errors import InvalidInputError
from vfcore.flow.names import physical_name
from vfcore.runtime import broker_topology
from vfcore.runtime.manifests import RenderOptions, credentials_secret_name, render
from vfcore.runtime.run_security import RunSecrets, seed_key, server_config


def rendered(**kw: Any) -> tuple[dict[str, Any], ...]:
    base: dict[str, Any] = {"image": "reg.example/cams:1", "run_id": "r1", "namespace": "video"}
    return render(FLOW, RenderOptions(**{**base, **kw}))


def test_without_values_the_secret_is_named_never_rendered() -> None:
    objs = rendered()
    assert not by_kind(objs, "Secret")
    name = credentials_secret_name("cams", "r1")
    volumes = [
        v for o in objs if "template" in o.get("spec", {}) for v in pod_of(o).get("volumes", [])
    ]
    assert volumes and all(v["secret"]["secretName"] == name for v in volumes)


def test_with_values_the_secret_comes_first_and_holds_every_role() -> None:
    values = secrets_for(FLOW)
    objs = rendered(secret_values=values)
    secret = objs[0]
    assert secret["kind"] == "Secret" and secret["immutable"] is True
    assert secret["metadata"]["name"] == credentials_secret_name("cams", "r1")
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert data["run-key"] == bytes(range(32))
    topo = broker_topology(FLOW, "r1")
    for role, seed in values.seeds:
        assert data[seed_key(role, flow="cams", run_id="r1")] == seed.encode()
    config = data["nats.conf"].decode()
    assert config == server_config(topo, dict(values.public_keys), port=4222, http_port=8222)
    for _, seed in values.seeds:
        assert seed not in config  # public keys only
    for _, key in values.public_keys:
        assert f'nkey: "{key}"' in config


def test_an_external_broker_gets_only_the_run_key() -> None:
    objs = rendered(secret_values=secrets_for(FLOW), broker_url="nats://nats.messaging:4222")
    (secret,) = by_kind(objs, "Secret")
    assert list(secret["data"]) == ["run-key"]
    for o in objs:
        for c in pod_of(o)["containers"] if "template" in o.get("spec", {}) else []:
            assert "VF_BROKER_NKEY_FILE" not in {e["name"] for e in c["env"]}


def _containers(o: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_of(o)
    return [*spec.get("initContainers", []), *spec["containers"]]


def test_each_container_mounts_only_its_own_role_key() -> None:
    objs = rendered(secret_values=secrets_for(FLOW))
    for o in objs:
        if "template" not in o.get("spec", {}):
            continue
        spec = pod_of(o)
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in _containers(o):
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            keys = [
                item["key"]
                for m in c.get("volumeMounts", [])
                if m["name"] in volumes
                for item in volumes[m["name"]]["secret"]["items"]
            ]
            if c["name"] == "nats":
                assert keys == ["nats.conf"]
            elif c["name"] in ("setup", "topology"):
                assert keys == ["setup.nk", "run-key"]
                assert env["VF_BROKER_NKEY_FILE"] == "/etc/vf/setup/setup.nk"
            else:
                node = o["metadata"]["annotations"]["vfcore.io/node-name"]
                own = f"{physical_name(node, flow='cams', run='r1').k8s}.nk"
                assert keys == [own, "run-key"]
                assert env["VF_BROKER_NKEY_FILE"] == "/etc/vf/credentials/node.nk"
                assert env["VF_RUN_KEY_FILE"] == "/etc/vf/credentials/run-key"
            assert all(m.get("readOnly") for m in c.get("volumeMounts", []) if m["name"] in volumes)


def test_no_secret_value_is_a_literal_anywhere_but_in_the_secret() -> None:
    values = secrets_for(FLOW)
    objs = rendered(secret_values=values, keda=True)
    rest = json.dumps([o for o in objs if o["kind"] != "Secret"])
    for _, seed in values.seeds:
        assert seed not in rest and base64.b64encode(seed.encode()).decode() not in rest
    assert base64.b64encode(values.run_key).decode() not in rest
    assert "RunSecrets" in repr(values) and fake_seed(0) not in repr(values)
    assert fake_seed(0) not in repr(RenderOptions(image="x:1", run_id="r1", secret_values=values))
    assert (
        RenderOptions(image="x:1", run_id="r1", secret_values=values).to_dict()["secret_values"]
        == "given"
    )


def test_the_broker_policy_admits_the_run_and_keda_only() -> None:
    objs = rendered(keda_namespace="autoscaling")
    broker, workers = by_kind(objs, "NetworkPolicy")
    client, monitor = broker["spec"]["ingress"]
    assert client["ports"] == [{"protocol": "TCP", "port": 4222}]
    assert client["from"] == [
        {
            "podSelector": {
                "matchLabels": {
                    "app.kubernetes.io/managed-by": "vf",
                    "vfcore.io/flow": workers["metadata"]["labels"]["vfcore.io/flow"],
                    "vfcore.io/run": "r1",
                }
            }
        }
    ]
    assert monitor["ports"] == [{"protocol": "TCP", "port": 8222}]
    ns = monitor["from"][0]["namespaceSelector"]["matchLabels"]
    assert ns == {"kubernetes.io/metadata.name": "autoscaling"}
    # the policy selects the broker's pods, exactly
    sts = by_kind(objs, "StatefulSet")[0]  # the broker's (a partitioned node has one too)
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert broker["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    # every pod of the run carries the labels the client port admits
    for o in objs:
        if "template" in o.get("spec", {}):
            pod_labels = o["spec"]["template"]["metadata"]["labels"]
            assert client["from"][0]["podSelector"]["matchLabels"].items() <= pod_labels.items()


def test_workers_admit_no_one_and_egress_stays_open_unless_restricted() -> None:
    _, workers = by_kind(rendered(), "NetworkPolicy")
    assert workers["spec"]["policyTypes"] == ["Ingress"] and "ingress" not in workers["spec"]
    (broker_name,) = workers["spec"]["podSelector"]["matchExpressions"][0]["values"]
    assert "broker" in broker_name
    _, strict = by_kind(rendered(restrict_egress=True), "NetworkPolicy")
    assert strict["spec"]["policyTypes"] == ["Ingress", "Egress"]
    to_broker, dns = strict["spec"]["egress"]
    assert to_broker["ports"] == [{"protocol": "TCP", "port": 4222}]
    assert {p["port"] for p in dns["ports"]} == {53}
    (external,) = by_kind(
        rendered(restrict_egress=True, broker_url="nats://nats.messaging:4333"), "NetworkPolicy"
    )
    assert external["spec"]["egress"][0] == {"ports": [{"protocol": "TCP", "port": 4333}]}


def test_network_policies_can_be_left_out() -> None:
    assert not by_kind(rendered(network_policies=False), "NetworkPolicy")


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_the_secret_and_policies_are_valid_kubernetes(version: str) -> None:
    if version not in bundled_versions():
        pytest.skip(f"kubernetes-validate bundles no {version} schemas")
    for kw in ({}, {"restrict_egress": True}, {"broker_url": "nats://n:4222"}):
        for o in rendered(secret_values=secrets_for(FLOW), keda=True, **kw):
            check_any(o, version)


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        pytest.param({"run_key": b"short"}, "invalid-run-secrets", id="short-run-key"),
        pytest.param({"public_keys": {"admin": "not-a-key"}}, "invalid-run-secrets", id="bad-key"),
        pytest.param({"seeds": {"admin": "x"}}, "invalid-run-secrets", id="bad-seed"),
    ],
)
def test_bad_secret_values_are_refused_without_echoing_them(
    change: dict[str, Any], rule: str
) -> None:
    good = secrets_for(FLOW)
    fields = {
        "seeds": dict(good.seeds),
        "public_keys": dict(good.public_keys),
        "run_key": good.run_key,
    }
    if "seeds" in change or "public_keys" in change:
        for name in ("seeds", "public_keys"):
            fields[name] = {"admin": dict(getattr(good, name))["admin"]}
    fields.update(change)
    with pytest.raises(InvalidInputError) as err:
        RunSecrets(**fields)
    assert err.value.rule == rule
    assert fake_seed(0) not in str(err.value)


def test_a_secret_missing_a_role_is_refused_at_render() -> None:
    good = secrets_for(FLOW)
    partial = RunSecrets(
        seeds={"admin": dict(good.seeds)["admin"]},
        public_keys={"admin": dict(good.public_keys)["admin"]},
        run_key=good.run_key,
    )
    with pytest.raises(InvalidInputError) as err:
        rendered(secret_values=partial)
    assert err.value.rule == "invalid-run-secrets" and "setup" in str(err.value)


def test_keda_namespace_must_be_a_dns_label() -> None:
    with pytest.raises(InvalidInputError) as err:
        rendered(keda_namespace="KEDA system")
    assert err.value.rule == "invalid-namespace"


def test_the_scaled_object_reads_the_monitoring_port_with_no_trigger_authentication() -> None:
    """KEDA's nats-jetstream scaler sends no credentials (docs/security.md): nothing to carry."""
    objs = rendered(keda=True)
    assert not by_kind(objs, "TriggerAuthentication")
    for so in by_kind(objs, "ScaledObject"):
        for trigger in so["spec"]["triggers"]:
            assert "authenticationRef" not in trigger
