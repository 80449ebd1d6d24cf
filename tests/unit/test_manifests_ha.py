"""What `vf deploy --broker-replicas N` and `--rollout` render (issue 26, items 7 and 8), as data.

An HA broker: a JetStream cluster of 3 (or 5) pods, routes to each pod by its stable
DNS name with the run's route password, one pod per host, a PodDisruptionBudget of
one, route traffic admitted between broker pods only, every stream and bucket on 3
servers (setup, init and worker containers pass ``--stream-replicas 3``). Rollouts:
a REALTIME run's Deployments roll as asked, every worker pod has the grace its
SIGTERM needs, a BATCH run refuses. Every object valid for Kubernetes in strict mode.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.manifest_schemas import KUBE_VERSIONS, bundled_versions, check_any
from tests.support.manifests import FLOW, by_kind, pod_of, secrets_for
from vfcore import FlowSpec, NodeSpec
from vfcore.errors import InvalidInputError
from vfcore.runtime.manifests import WORKER_GRACE_S, RenderOptions, render
from vfcore.runtime.run_security import ROUTE_USER, RunSecrets

PASSWORD = "0123456789abcdef" * 4


def ha_secrets(spec: FlowSpec = FLOW) -> RunSecrets:
    base = secrets_for(spec)
    return RunSecrets(
        seeds=base.seeds,
        public_keys=base.public_keys,
        run_key=base.run_key,
        route_password=PASSWORD,
    )


def rendered(spec: FlowSpec = FLOW, **kw: Any) -> tuple[dict[str, Any], ...]:
    base: dict[str, Any] = {"image": "reg.example/cams:1", "run_id": "r1", "namespace": "video"}
    return render(spec, RenderOptions(**{**base, **kw}))


def broker_of(objs: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    (sts,) = [
        o
        for o in by_kind(objs, "StatefulSet")
        if o["metadata"]["labels"]["app.kubernetes.io/component"] == "broker"
    ]
    return sts


def config_of(objs: tuple[dict[str, Any], ...]) -> str:
    (secret,) = by_kind(objs, "Secret")
    return base64.b64decode(secret["data"]["nats.conf"]).decode()


def test_three_broker_replicas_render_a_jetstream_cluster_routed_by_stable_names() -> None:
    objs = rendered(broker_replicas=3, secret_values=ha_secrets())
    sts = broker_of(objs)
    name = sts["metadata"]["name"]
    headless = sts["spec"]["serviceName"]
    assert sts["spec"]["replicas"] == 3 and sts["spec"]["podManagementPolicy"] == "Parallel"
    (container,) = pod_of(sts)["containers"]
    assert {"name": "cluster", "containerPort": 6222, "protocol": "TCP"} in container["ports"]
    # the configuration's server_name: $POD_NAME comes from the pod's own name
    assert {
        "name": "POD_NAME",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
    } in container["env"]
    config = config_of(objs)
    assert "server_name: $POD_NAME\n" in config
    assert f'  name: "{name}"\n  port: 6222\n' in config
    for i in range(3):
        route = f"nats://{ROUTE_USER}:{PASSWORD}@{name}-{i}.{headless}.video.svc:6222"
        assert f'"{route}"' in config
    assert f'user: "{ROUTE_USER}"\n    password: "{PASSWORD}"' in config
    (secret,) = by_kind(objs, "Secret")
    assert base64.b64decode(secret["data"]["route-password"]).decode() == PASSWORD
    # the route port on the headless Service (stable names), not on the client Service
    services = {s["metadata"]["name"]: s for s in by_kind(objs, "Service")}
    assert any(p["port"] == 6222 for p in services[headless]["spec"]["ports"])
    assert not any(p["port"] == 6222 for p in services[name]["spec"]["ports"])


def test_broker_pods_go_to_distinct_hosts_and_are_disrupted_one_at_a_time() -> None:
    objs = rendered(broker_replicas=3)
    sts = broker_of(objs)
    labels = sts["spec"]["template"]["metadata"]["labels"]
    (term,) = pod_of(sts)["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= labels.items()
    assert term["labelSelector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]
    budgets = [
        b
        for b in by_kind(objs, "PodDisruptionBudget")
        if b["metadata"]["name"] == sts["metadata"]["name"]
    ]
    (budget,) = budgets
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": sts["spec"]["selector"]["matchLabels"]},
    }


def test_only_broker_pods_may_reach_the_route_port() -> None:
    objs = rendered(broker_replicas=3)
    sts = broker_of(objs)
    policy = next(
        p
        for p in by_kind(objs, "NetworkPolicy")
        if p["metadata"]["name"] == sts["metadata"]["name"]
    )
    routes = [r for r in policy["spec"]["ingress"] if r["ports"][0]["port"] == 6222]
    assert routes == [
        {
            "from": [{"podSelector": {"matchLabels": sts["spec"]["selector"]["matchLabels"]}}],
            "ports": [{"protocol": "TCP", "port": 6222}],
        }
    ]
    # a single server opens no route port
    single = rendered()
    assert not any(
        port["port"] == 6222
        for p in by_kind(single, "NetworkPolicy")
        for rule in p["spec"].get("ingress", [])
        for port in rule.get("ports", [])
    )


def test_every_container_that_may_create_streams_asks_for_three_copies() -> None:
    objs = rendered(broker_replicas=3)
    creators = []
    for obj in objs:
        if "template" not in obj.get("spec", {}) or obj is broker_of(objs):
            continue
        pod = pod_of(obj)
        creators += [*pod.get("initContainers", []), *pod["containers"]]
    assert creators
    for container in creators:
        args = container["args"]
        assert args[args.index("--stream-replicas") + 1] == "3", container["name"]
    single = rendered()
    assert not any(
        "--stream-replicas" in c["args"]
        for o in single
        if "template" in o.get("spec", {})
        for c in [*pod_of(o).get("initContainers", []), *pod_of(o)["containers"]]
        if "args" in c and c["name"] != "nats"
    )


def test_a_single_server_renders_as_before() -> None:
    objs = rendered(secret_values=ha_secrets())
    sts = broker_of(objs)
    assert sts["spec"]["replicas"] == 1 and "podManagementPolicy" not in sts["spec"]
    assert "affinity" not in pod_of(sts)
    assert (
        "cluster" not in config_of(objs)
        and "route-password" not in by_kind(objs, "Secret")[0]["data"]
    )
    assert not [
        b
        for b in by_kind(objs, "PodDisruptionBudget")
        if b["metadata"]["name"] == sts["metadata"]["name"]
    ]


@pytest.mark.parametrize(
    ("kw", "rule"),
    [
        ({"broker_replicas": 2}, "invalid-broker-replicas"),
        ({"broker_replicas": 4}, "invalid-broker-replicas"),
        ({"broker_replicas": 0}, "invalid-broker-replicas"),
        ({"broker_replicas": True}, "invalid-broker-replicas"),
        (
            {"broker_replicas": 3, "broker_url": "nats://nats.messaging:4222"},
            "broker-replicas-external",
        ),
        ({"rollout": "recreate"}, "invalid-rollout"),
    ],
)
def test_bad_broker_replicas_and_rollouts_are_named(kw: dict[str, Any], rule: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        rendered(**kw)
    assert info.value.rule == rule


def test_five_broker_replicas_still_keep_three_copies_of_each_stream() -> None:
    objs = rendered(broker_replicas=5, secret_values=ha_secrets())
    assert broker_of(objs)["spec"]["replicas"] == 5
    assert config_of(objs).count(f"nats://{ROUTE_USER}:") == 5
    setup = next(o for o in by_kind(objs, "Job") if "setup" in o["metadata"]["name"])
    args = pod_of(setup)["containers"][0]["args"]
    assert args[args.index("--stream-replicas") + 1] == "3"


def test_a_cluster_needs_the_route_password() -> None:
    with pytest.raises(InvalidInputError) as info:
        rendered(broker_replicas=3, secret_values=secrets_for(FLOW))
    assert info.value.rule == "invalid-run-secrets"
    assert "--run" in info.value.hint


@pytest.mark.parametrize(
    ("rollout", "strategy"),
    [
        ("surge", {"maxSurge": 1, "maxUnavailable": 0}),
        ("drain", {"maxSurge": 0, "maxUnavailable": 1}),
    ],
)
def test_a_realtime_rollout_sets_each_deployments_strategy(
    rollout: str, strategy: dict[str, int]
) -> None:
    objs = rendered(rollout=rollout)
    deployments = by_kind(objs, "Deployment")
    assert deployments
    for d in deployments:
        assert d["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": strategy}
    # a partitioned node's StatefulSet: one owner per partition, never two at once
    for s in by_kind(objs, "StatefulSet"):
        assert "strategy" not in s["spec"] and "updateStrategy" not in s["spec"]
    assert all("strategy" not in d["spec"] for d in by_kind(rendered(), "Deployment"))


def test_every_worker_pod_has_the_grace_its_sigterm_needs() -> None:
    batch = FlowSpec(
        "b",
        "batch",
        (NodeSpec("src", "producer"), NodeSpec("sink", "consumer", ("src",))),
    )
    for objs in (rendered(), rendered(batch)):
        workloads = [o for o in objs if o["kind"] in ("Deployment", "StatefulSet", "Job")]
        workers = [w for w in workloads if pod_of(w)["containers"][0]["name"] == "worker"]
        assert workers
        for w in workers:
            assert pod_of(w)["terminationGracePeriodSeconds"] == WORKER_GRACE_S


def test_a_batch_flow_refuses_a_rollout() -> None:
    batch = FlowSpec(
        "b",
        "batch",
        (NodeSpec("src", "producer"), NodeSpec("sink", "consumer", ("src",))),
    )
    with pytest.raises(InvalidInputError) as info:
        rendered(batch, rollout="drain")
    assert info.value.rule == "rollout-on-batch"
    assert "docs/kubernetes.md, Rollouts" in info.value.hint


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_the_ha_broker_and_rollouts_are_valid_kubernetes(version: str) -> None:
    if version not in bundled_versions():
        pytest.skip(f"kubernetes-validate bundles no {version} schemas")
    for obj in rendered(broker_replicas=3, rollout="surge", secret_values=ha_secrets()):
        check_any(obj, version)


def _gpu_flow(gpu_count: int = 2) -> FlowSpec:
    return FlowSpec(
        "cams",
        "realtime",
        (
            NodeSpec("camera", "producer"),
            NodeSpec(
                "infer",
                "processor",
                ("camera",),
                nb_tasks=2,
                device_type="gpu",
                gpu_count=gpu_count,
            ),
            NodeSpec("sink", "consumer", ("infer",)),
        ),
    )


def test_a_surge_names_the_devices_one_more_pod_of_each_rolled_workload_takes() -> None:
    from vfcore.runtime import surge_needs, surge_warning

    objs = rendered(_gpu_flow(), rollout="surge")
    deployments = {
        d["metadata"]["annotations"]["vfcore.io/node-name"]: d for d in by_kind(objs, "Deployment")
    }
    names = [d["metadata"]["name"] for d in deployments.values()]
    needs = {n.node: n for n in surge_needs(objs, names)}
    assert set(needs) == {"camera", "infer", "sink"}
    assert needs["infer"].extra == (("nvidia.com/gpu", 2),) and needs["infer"].takes_devices
    assert not needs["camera"].takes_devices and not needs["sink"].takes_devices
    warning = surge_warning(tuple(needs.values()))
    assert warning is not None and "1 of them take devices: infer +2 nvidia.com/gpu." in warning
    # only what rolls counts; cpu-only workloads need no warning
    assert surge_warning(surge_needs(objs, [deployments["sink"]["metadata"]["name"]])) is None
    # a DRA pod takes its devices through a claim
    dra = rendered(_gpu_flow(1), rollout="surge", gpu_mode="dra")
    infer = next(
        d
        for d in by_kind(dra, "Deployment")
        if d["metadata"]["annotations"]["vfcore.io/node-name"] == "infer"
    )
    (need,) = surge_needs(dra, [infer["metadata"]["name"]])
    assert need.claims == 1 and "infer +1 ResourceClaim" in (surge_warning((need,)) or "")


def test_a_clustered_broker_counts_the_nodes_that_can_host_one_server_each() -> None:
    from vfcore.cluster import NodeState, Taint
    from vfcore.runtime import broker_hosts

    objs = rendered(broker_replicas=3)
    gpu_taint = (Taint("nvidia.com/gpu", "present"),)
    nodes = [
        NodeState("a", ()),
        NodeState("b", (), ready=False),
        NodeState("c", (), taints=gpu_taint),
        NodeState("d", (), taints=(Taint("maintenance", "", "PreferNoSchedule"),)),
    ]
    hosts = broker_hosts(objs, nodes)
    assert hosts is not None and hosts.needed == 3
    assert hosts.eligible == ("a", "d") and hosts.verdict == "does-not-fit"
    assert dict(hosts.excluded) == {
        "b": "not Ready",
        "c": "untolerated taint nvidia.com/gpu=present:NoSchedule",
    }
    # a node whose facts could not be read may be the third: unknown, never "fits"
    maybe = broker_hosts(objs, nodes, ["e"])
    assert maybe is not None and maybe.verdict == "unknown"
    # the equality edge: exactly three nodes fit
    three = broker_hosts(objs, [*nodes, NodeState("e", ())])
    assert three is not None and three.verdict == "fits"
    # a single server has no anti-affinity: nothing to count
    assert broker_hosts(rendered(), nodes) is None
