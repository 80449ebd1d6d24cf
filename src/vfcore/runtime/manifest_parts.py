"""The pieces every Kubernetes object of a run is built from (:mod:`vfcore.runtime.manifests`).

A :class:`ManifestContext` holds what one :func:`~vfcore.runtime.manifests.render`
call knows; the functions here build what both the workers' objects
(:mod:`vfcore.runtime.manifests`) and the broker's (:mod:`vfcore.runtime.broker_manifests`)
are made of: the run's labels and selectors, object metadata, the restricted Pod
Security settings, the credentials each role mounts, volumes and a pod spec.
Pure data, as the rest of vfcore.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vfcore.cluster import GPU_PRESENT_LABEL, Toleration
from vfcore.flow.names import physical_name
from vfcore.flow.spec import FlowSpec, NodeSpec
from vfcore.runtime.pod_options import WorkerVolume
from vfcore.runtime.render_options import (
    MANAGED_BY,
    PRODUCT_LABEL,
    RenderOptions,
    short_object_name,
)
from vfcore.runtime.run_security import (
    CREDENTIALS_DIR,
    RUN_KEY,
    SETUP_DIR,
    node_items,
    secret_volume,
    setup_items,
)


@dataclass(frozen=True, slots=True)
class ManifestContext:
    spec: FlowSpec
    opts: RenderOptions
    flow: str
    broker_url: str
    monitoring: str
    scaled: tuple[str, ...]
    secret: str  # the run's credentials Secret
    in_cluster: bool  # the broker is rendered here (and accepts only the run's keys)


def run_labels(
    ctx: ManifestContext, component: str, node: str | None = None, k8s: str | None = None
) -> dict[str, str]:
    out = {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/part-of": ctx.flow,
        "app.kubernetes.io/instance": ctx.opts.run_id,
        "app.kubernetes.io/component": component,
        "vfcore.io/flow": ctx.flow,
        "vfcore.io/run": ctx.opts.run_id,
    }
    if node is not None and k8s is not None:
        out["app.kubernetes.io/name"] = k8s
        out["vfcore.io/node"] = physical_name(node, flow=ctx.spec.name, run=ctx.opts.run_id).k8s
    return dict(sorted(out.items()))


def selector_of(labels: Mapping[str, str]) -> dict[str, str]:
    keys = (
        "app.kubernetes.io/instance",
        "app.kubernetes.io/name",
        "vfcore.io/flow",
        "app.kubernetes.io/component",
    )
    return {k: labels[k] for k in keys if k in labels}


def object_meta(
    ctx: ManifestContext, name: str, labels: dict[str, str], node: str | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ctx.opts.namespace, "labels": labels}
    annotations = {"vfcore.io/flow-name": ctx.spec.name}
    if node is not None:
        annotations["vfcore.io/node-name"] = node
    meta["annotations"] = annotations
    return meta


def component_of(node: NodeSpec) -> str:
    if node.is_producer:
        return "producer"
    if node.is_consumer:
        return "consumer"
    return "processor"


def pod_security(uid: int) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def toleration_of(t: Toleration) -> dict[str, Any]:
    out: dict[str, Any] = {"operator": t.operator}
    if t.key is not None:
        out["key"] = t.key
    if t.operator == "Equal":
        out["value"] = t.value
    if t.effect is not None:
        out["effect"] = t.effect
    return out


def base_env(ctx: ManifestContext) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "VF_BROKER_URL", "value": ctx.broker_url},
        {"name": "VF_RUN", "value": ctx.opts.run_id},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    env.extend({"name": n, "value": v} for n, v in ctx.opts.env)
    return env


def credentials_secret_name(flow: str, run_id: str) -> str:
    """The name of run ``run_id``'s credentials Secret (docs/security.md)."""
    # "\0" cannot start a node name a person types, and the hash covers the exact text
    return short_object_name(physical_name("\0credentials", flow=flow, run=run_id).k8s)


def worker_credentials(
    ctx: ManifestContext, node: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The worker container's env and mount: its node's seed (an in-cluster broker) and the
    run key, from the run's Secret; and the volume holding only those two keys."""
    env = []
    if ctx.in_cluster:
        env.append({"name": "VF_BROKER_NKEY_FILE", "value": f"{CREDENTIALS_DIR}/node.nk"})
    env.append({"name": "VF_RUN_KEY_FILE", "value": f"{CREDENTIALS_DIR}/{RUN_KEY}"})
    items = node_items(node, flow=ctx.spec.name, run_id=ctx.opts.run_id, with_seed=ctx.in_cluster)
    return env, secret_volume("vf-credentials", ctx.secret, items)


def setup_credentials(ctx: ManifestContext) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The setup container's env and volume: the setup role's seed and the run key."""
    env = []
    if ctx.in_cluster:
        env.append({"name": "VF_BROKER_NKEY_FILE", "value": f"{SETUP_DIR}/setup.nk"})
    env.append({"name": "VF_RUN_KEY_FILE", "value": f"{SETUP_DIR}/{RUN_KEY}"})
    return env, secret_volume(
        "vf-setup-credentials", ctx.secret, setup_items(with_seed=ctx.in_cluster)
    )


def mount_of(volume: str, path: str) -> dict[str, Any]:
    return {"name": volume, "mountPath": path, "readOnly": True}


#: The pod volume of ``--scratch`` (an emptyDir with its sizeLimit).
SCRATCH_VOLUME = "vf-scratch"


def user_volume(v: WorkerVolume) -> dict[str, Any]:
    """A pod volume of ``--mount-pvc``, ``--mount-configmap`` or ``--mount-secret``."""
    if v.kind == "pvc":
        source: dict[str, Any] = {"claimName": v.source}
        if v.read_only:
            source["readOnly"] = True
        return {"name": v.volume_name, "persistentVolumeClaim": source}
    if v.kind == "configmap":
        return {"name": v.volume_name, "configMap": {"name": v.source}}
    return {"name": v.volume_name, "secret": {"secretName": v.source}}


def user_mount(v: WorkerVolume) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": v.volume_name, "mountPath": v.path}
    if v.read_only:
        mount["readOnly"] = True
    return mount


def with_pod_settings(obj: dict[str, Any], opts: RenderOptions) -> dict[str, Any]:
    """``--priority-class`` and ``--image-pull-secret`` on the pod template of every
    workload of the run (the broker's too: its image may come from the same registry,
    and it should not be preempted before the workers it serves)."""
    template = obj.get("spec", {}).get("template") if obj.get("kind") in WORKLOADS else None
    if template is None:
        return obj
    pod = template["spec"]
    if opts.priority_class is not None:
        pod["priorityClassName"] = opts.priority_class
    if opts.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": n} for n in opts.image_pull_secrets]
    return obj


WORKLOADS = ("Job", "Deployment", "StatefulSet")


def pod_spec_of(
    ctx: ManifestContext,
    container: dict[str, Any],
    *,
    restart: str,
    gpu: bool,
    product: str | None = None,
    claim_template: str | None = None,
    volumes: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    opts = ctx.opts
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "restartPolicy": restart,
        "securityContext": pod_security(opts.uid),
        "containers": [container],
    }
    pod_volumes = list(volumes)
    if container["name"] == "worker":
        # Workers run --no-create: this makes sure the topology exists first, whatever
        # order the objects were applied in. It requests nothing, so the pod requests
        # exactly what the planner packed (a pod's request is the max of init and sum).
        # It alone mounts the setup role's key: the worker's container never sees it.
        init = setup_container(ctx, "topology", wait_s=300)
        init["image"] = container["image"]  # --image-override: the node's own image
        env, volume = setup_credentials(ctx)
        init["env"] = [*init["env"], *env]
        init["volumeMounts"] = [mount_of(volume["name"], SETUP_DIR)]
        pod_volumes.append(volume)
        spec["initContainers"] = [init]
    if pod_volumes:
        spec["volumes"] = pod_volumes
    if gpu:
        selector = {opts.gpu_node_selector[0]: opts.gpu_node_selector[1]}
        if product is not None:
            selector[PRODUCT_LABEL] = product
        if claim_template is None or opts.gpu_node_selector != GPU_PRESENT_LABEL:
            spec["nodeSelector"] = dict(sorted(selector.items()))
        if claim_template is not None:
            spec["resourceClaims"] = [
                {"name": CLAIM_NAME, "resourceClaimTemplateName": claim_template}
            ]
        if opts.gpu_toleration is not None:
            spec["tolerations"] = [toleration_of(opts.gpu_toleration)]
        if opts.gpu_runtime_class is not None:
            spec["runtimeClassName"] = opts.gpu_runtime_class
    return spec


#: The name of a DRA pod's one claim (``spec.resourceClaims[].name``) and of its one request.
CLAIM_NAME = "gpu"


def stream_replicas(broker_replicas: int) -> int:
    """How many servers hold each stream of a run whose broker has ``broker_replicas``:
    3 on a cluster (any one server may go), 1 on a single server."""
    return 3 if broker_replicas >= 3 else 1


def stream_replicas_args(ctx: ManifestContext) -> list[str]:
    replicas = stream_replicas(ctx.opts.broker_replicas) if ctx.in_cluster else 1
    return ["--stream-replicas", str(replicas)] if replicas > 1 else []


def setup_container(ctx: ManifestContext, name: str, *, wait_s: int) -> dict[str, Any]:
    """``vf broker-setup``: create what the run's topology lacks (idempotent, safe to race)."""
    opts = ctx.opts
    return {
        "name": name,
        "image": opts.image,
        "command": ["vf"],
        "args": [
            "broker-setup",
            opts.flow_path,
            "--broker",
            "$(VF_BROKER_URL)",
            "--run",
            opts.run_id,
            "--wait",
            str(wait_s),
            *stream_replicas_args(ctx),
        ],
        "env": base_env(ctx),
        "securityContext": container_security(),
        **({"imagePullPolicy": opts.image_pull_policy} if opts.image_pull_policy else {}),
    }
