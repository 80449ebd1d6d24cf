"""The broker's Kubernetes objects of a run (:func:`vfcore.runtime.manifests.render`).

With no ``broker_url`` a run renders its own NATS JetStream server: a
StatefulSet with a volume, headless and client Services (with
``broker_replicas`` 3 or 5 a JetStream cluster: routes between pods by their
stable DNS names, authenticated with the run's route password, one pod per host,
a PodDisruptionBudget of one); and whatever the broker: the setup Job that
creates the run's streams and consumers, the run's credentials Secret and, when
asked, its NetworkPolicies. Pure data, as the rest of vfcore.
"""

from __future__ import annotations

from typing import Any

from vfcore.flow.names import physical_name
from vfcore.runtime.manifest_parts import (
    ManifestContext,
    container_security,
    mount_of,
    object_meta,
    pod_security,
    pod_spec_of,
    run_labels,
    selector_of,
    setup_container,
    setup_credentials,
)
from vfcore.runtime.render_options import (
    BROKER_CLIENT_PORT,
    BROKER_MONITOR_PORT,
    BROKER_URL_PATTERN,
    MANAGED_BY,
    WORKLOAD_NAME_MAX,
    short_object_name,
)
from vfcore.runtime.run_security import (
    BROKER_ROUTE_PORT,
    CONFIG_KEY,
    NATS_CONFIG_DIR,
    SETUP_DIR,
    BrokerCluster,
    secret_data,
    secret_volume,
)
from vfcore.runtime.topology import BrokerTopology


def broker_objects(ctx: ManifestContext) -> list[dict[str, Any]]:
    opts = ctx.opts
    name = broker_name(ctx.spec.name, opts.run_id)
    headless = _broker_headless(name)
    clustered = opts.broker_replicas > 1
    labels = run_labels(ctx, "broker")
    labels["app.kubernetes.io/name"] = name
    labels = dict(sorted(labels.items()))
    selector = selector_of(labels)
    ports = [
        {"name": "client", "port": BROKER_CLIENT_PORT, "targetPort": "client", "protocol": "TCP"},
        {
            "name": "monitor",
            "port": BROKER_MONITOR_PORT,
            "targetPort": "monitor",
            "protocol": "TCP",
        },
    ]
    container: dict[str, Any] = {
        "name": "nats",
        "image": opts.broker_image,
        # ports, JetStream and the users are in the configuration file, from the Secret:
        # no secret and no setting on the command line
        "args": ["-c", f"{NATS_CONFIG_DIR}/{CONFIG_KEY}"],
        "ports": [
            {"name": "client", "containerPort": BROKER_CLIENT_PORT, "protocol": "TCP"},
            {"name": "monitor", "containerPort": BROKER_MONITOR_PORT, "protocol": "TCP"},
        ],
        "volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            mount_of("config", NATS_CONFIG_DIR),
        ],
        # the configuration names each server $POD_NAME (unique in the cluster)
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "readinessProbe": {
            "httpGet": {"path": "/healthz?js-enabled-only=true", "port": "monitor"},
            "periodSeconds": 5,
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz?js-enabled-only=true", "port": "monitor"},
            "periodSeconds": 10,
            "failureThreshold": 6,
        },
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}},
        "securityContext": container_security(),
    }
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security(opts.uid),
        "containers": [container],
        "volumes": [secret_volume("config", ctx.secret, {CONFIG_KEY: CONFIG_KEY})],
    }
    headless_ports = ports
    sts_extra: dict[str, Any] = {}
    if clustered:
        # the servers route to each other (their cluster block); each on a host of its
        # own: two on one host would lose a stream's majority with that host
        route = {"name": "cluster", "containerPort": BROKER_ROUTE_PORT, "protocol": "TCP"}
        container["ports"].append(route)
        headless_ports = [
            *ports,
            {
                "name": "cluster",
                "port": BROKER_ROUTE_PORT,
                "targetPort": "cluster",
                "protocol": "TCP",
            },
        ]
        pod_spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": selector},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
        sts_extra["podManagementPolicy"] = "Parallel"  # the servers find each other
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": opts.broker_storage}},
    }
    if opts.broker_storage_class is not None:
        claim_spec["storageClassName"] = opts.broker_storage_class
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": object_meta(ctx, headless, labels),
            "spec": {
                "clusterIP": "None",
                "selector": selector,
                "ports": headless_ports,
                "publishNotReadyAddresses": True,
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": object_meta(ctx, name, labels),
            "spec": {"type": "ClusterIP", "selector": selector, "ports": ports},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": object_meta(ctx, name, labels),
            "spec": {
                "serviceName": headless,
                "replicas": opts.broker_replicas,
                **sts_extra,
                "selector": {"matchLabels": selector},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
                "volumeClaimTemplates": [
                    {"metadata": {"name": "data", "labels": labels}, "spec": claim_spec}
                ],
            },
        },
    ]
    if clustered:
        # a voluntary disruption (a node drained) takes one server at a time: a majority
        # stays, and so does every stream
        out.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": object_meta(ctx, name, labels),
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector}},
            }
        )
    return out


def _broker_cluster(ctx: ManifestContext) -> BrokerCluster | None:
    """The in-cluster broker's cluster block: a route to every pod by its stable DNS name
    (``<pod>.<headless Service>.<namespace>.svc``: the resolver's search list completes
    it whatever the cluster's domain), or ``None`` for a single server."""
    opts = ctx.opts
    if not ctx.in_cluster or opts.broker_replicas == 1:
        return None
    name = broker_name(ctx.spec.name, opts.run_id)
    headless = _broker_headless(name)
    routes = tuple(
        f"{name}-{i}.{headless}.{opts.namespace}.svc:{BROKER_ROUTE_PORT}"
        for i in range(opts.broker_replicas)
    )
    return BrokerCluster(name, routes)


def _broker_headless(name: str) -> str:
    return f"{name[: WORKLOAD_NAME_MAX - 3]}-hl"


def broker_name(flow: str, run_id: str) -> str:
    # "\0" cannot start a node name a person types, and the hash covers the exact text
    return short_object_name(physical_name("\0broker", flow=flow, run=run_id).k8s)


def setup_job(ctx: ManifestContext) -> dict[str, Any]:
    opts = ctx.opts
    name = short_object_name(physical_name("\0setup", flow=ctx.spec.name, run=opts.run_id).k8s)
    labels = run_labels(ctx, "broker")
    labels["app.kubernetes.io/name"] = name
    labels = dict(sorted(labels.items()))
    container = setup_container(ctx, "setup", wait_s=120)
    container["resources"] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    env, volume = setup_credentials(ctx)
    container["env"] = [*container["env"], *env]
    container["volumeMounts"] = [mount_of(volume["name"], SETUP_DIR)]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_meta(ctx, name, labels),
        "spec": {
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 6,
            "template": {
                "metadata": {"labels": labels},
                "spec": pod_spec_of(ctx, container, restart="Never", gpu=False, volumes=(volume,)),
            },
        },
    }


def credentials_secret(ctx: ManifestContext, topo: BrokerTopology) -> dict[str, Any]:
    """The run's Secret, with the values given (RenderOptions.secret_values)."""
    opts = ctx.opts
    assert opts.secret_values is not None
    labels = run_labels(ctx, "credentials")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_meta(ctx, ctx.secret, labels),
        "type": "Opaque",
        # a run's keys never change under it: a second render with other values is refused
        "immutable": True,
        "data": secret_data(
            topo,
            opts.secret_values,
            in_cluster_broker=ctx.in_cluster,
            port=BROKER_CLIENT_PORT,
            http_port=BROKER_MONITOR_PORT,
            cluster=_broker_cluster(ctx),
        ),
    }


def _run_pods(ctx: ManifestContext) -> dict[str, str]:
    """The labels every pod of the run carries (and no pod of another run or flow)."""
    return {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "vfcore.io/flow": ctx.flow,
        "vfcore.io/run": ctx.opts.run_id,
    }


def _route_ingress(ctx: ManifestContext, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The route port of a clustered broker: its own servers only."""
    if ctx.opts.broker_replicas == 1:
        return []
    return [
        {
            "from": [{"podSelector": {"matchLabels": selector_of(labels)}}],
            "ports": [{"protocol": "TCP", "port": BROKER_ROUTE_PORT}],
        }
    ]


def network_policies(ctx: ManifestContext) -> list[dict[str, Any]]:
    """The broker's ingress (an in-cluster broker) and the workers' default deny."""
    opts = ctx.opts
    out: list[dict[str, Any]] = []
    broker = broker_name(ctx.spec.name, opts.run_id)
    if ctx.in_cluster:
        labels = dict(
            sorted({**run_labels(ctx, "broker"), "app.kubernetes.io/name": broker}.items())
        )
        out.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": object_meta(ctx, broker, labels),
                "spec": {
                    "podSelector": {"matchLabels": selector_of(labels)},
                    "policyTypes": ["Ingress"],
                    "ingress": [
                        {  # the client port: the run's own pods only
                            "from": [{"podSelector": {"matchLabels": _run_pods(ctx)}}],
                            "ports": [{"protocol": "TCP", "port": BROKER_CLIENT_PORT}],
                        },
                        *_route_ingress(ctx, labels),
                        {  # the monitoring port: KEDA's operator reads /jsz
                            "from": [
                                {
                                    "namespaceSelector": {
                                        "matchLabels": {
                                            "kubernetes.io/metadata.name": opts.keda_namespace
                                        }
                                    }
                                }
                            ],
                            "ports": [{"protocol": "TCP", "port": BROKER_MONITOR_PORT}],
                        },
                    ],
                },
            }
        )
    name = short_object_name(physical_name("\0workers", flow=ctx.spec.name, run=opts.run_id).k8s)
    selector: dict[str, Any] = {"matchLabels": _run_pods(ctx)}
    if ctx.in_cluster:
        selector["matchExpressions"] = [
            {"key": "app.kubernetes.io/name", "operator": "NotIn", "values": [broker]}
        ]
    spec: dict[str, Any] = {"podSelector": selector, "policyTypes": ["Ingress"]}
    if opts.restrict_egress:
        if ctx.in_cluster:
            to_broker: dict[str, Any] = {
                "to": [
                    {
                        "podSelector": {
                            "matchLabels": selector_of(
                                {**run_labels(ctx, "broker"), "app.kubernetes.io/name": broker}
                            )
                        }
                    }
                ],
                "ports": [{"protocol": "TCP", "port": BROKER_CLIENT_PORT}],
            }
        else:
            match = BROKER_URL_PATTERN.fullmatch(ctx.broker_url)
            port = int(match["port"]) if match is not None and match["port"] else 4222
            to_broker = {"ports": [{"protocol": "TCP", "port": port}]}
        dns = {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
        spec["policyTypes"] = ["Ingress", "Egress"]
        spec["egress"] = [to_broker, dns]
    out.append(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": object_meta(ctx, name, run_labels(ctx, "network")),
            "spec": spec,
        }
    )
    return out
