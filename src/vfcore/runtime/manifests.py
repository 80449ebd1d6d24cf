"""Kubernetes manifests of one run of a flow, as pure data: :func:`render`.

``render(spec, RenderOptions(image=..., run_id=...))`` returns a tuple of plain
dicts (Kubernetes objects), in apply order, the same objects byte for byte for
the same inputs. ``docs/kubernetes.md`` ("What `vf deploy` renders") walks
through a rendered flow; in short:

* **workloads** follow :func:`vfcore.workload_of`: in a BATCH flow every node is
  a Job (``completionMode: Indexed`` when it has several replicas, so each pod
  gets ``JOB_COMPLETION_INDEX``); in a REALTIME flow a finite producer is a Job,
  a partitioned processor a StatefulSet with a headless Service (stable
  ordinals own partitions), everything else a Deployment with
  ``replicas = nb_tasks``;
* **every worker** runs ``vf worker <flow> --node NAME --broker $(VF_BROKER_URL)
  --run RUN --no-create`` with ``VF_BROKER_URL``, ``VF_RUN`` and ``POD_NAME``;
  a **setup Job** (``vf broker-setup``) creates the run's streams and consumers
  first; with no ``broker_url`` a **NATS JetStream server** is rendered too
  (StatefulSet with a volume, headless and client Services, the official
  ``nats`` image) — with ``broker_replicas`` 3 or 5 a JetStream cluster (routes
  to each pod by its stable DNS name, authenticated with the run's route
  password; one pod per host; a PodDisruptionBudget of one; every stream and
  bucket on 3 servers: ``--stream-replicas 3`` for setup and workers);
* ``rollout`` (REALTIME only: ``rollout-on-batch``): ``surge`` renders each
  Deployment's RollingUpdate as maxSurge 1 / maxUnavailable 0, ``drain`` as
  maxSurge 0 / maxUnavailable 1; a worker's SIGTERM finishes what it holds within
  :data:`WORKER_GRACE_S`;
* **GPU pods** (:func:`vfcore.pod_requests` decides what each pod takes, as the
  planner does): exclusive → ``limits {resource: gpu_count}``; shared → no GPU
  limit, a ``runtimeClassName`` (refused without one); mix → ``limits
  {<MIG resource>: 1}`` as the plan chose, with a ``nvidia.com/gpu.product``
  selector when given; dra → no GPU limit but a **ResourceClaimTemplate** per
  GPU node (named like its workload, so scoped by flow and run, carrying the
  run's labels and giving them to the claims made from it, so that teardown
  finds both) with one request (``gpu``: the DeviceClass, ``count =
  gpu_count``, CEL selectors for the declared ``gpu_memory_gib`` and any
  ``dra_selectors``), referenced by the pod (``spec.resourceClaims``) and its
  worker (``resources.claims``); all get the GPU-pool node selector (not in dra
  mode, where the claim's node-local devices select the node) and the
  ``nvidia.com/gpu`` toleration, and ``runtimeClassName`` when one is set;
* cpu/memory **requests** from the node's ``requests=`` or ``resources``;
* a **PodDisruptionBudget** for every node with more than one replica;
* with ``keda=True`` a **ScaledObject** per autoscalable REALTIME processor
  (:func:`vfcore.autoscaling_rejections`): one ``nats-jetstream`` trigger per
  parent on the child's durable consumer of that parent's stream (names from
  :func:`vfcore.broker_topology`), ``minReplicaCount = nb_tasks``,
  ``maxReplicaCount = max(nb_tasks, min(max_replicas, capacity cap))`` and
  :func:`vfcore.fallback_for_unknown` (an unobservable parent holds replicas);
  asking it of a BATCH flow is ``keda-on-batch``;
* **labels** on every object: ``app.kubernetes.io/{managed-by: vf, part-of,
  instance, component}``, ``vfcore.io/flow`` and ``vfcore.io/run`` (plus
  ``app.kubernetes.io/name`` and ``vfcore.io/node`` on per-node objects); the
  run's selector is :func:`run_selector`;
* **pods** meet the *restricted* Pod Security Standard (non-root numeric uid,
  ``seccompProfile: RuntimeDefault``, no privilege escalation, every capability
  dropped) and get no service-account token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vfcore.cluster import GPU_PRESENT_LABEL, Toleration
from vfcore.flow.gpu_mode import GpuMode
from vfcore.flow.names import physical_name
from vfcore.flow.spec import REALTIME, FlowSpec, NodeSpec
from vfcore.flow.validate import require_valid
from vfcore.placement.claims import PodRequest, pod_requests
from vfcore.placement.demand import AutoscalingOptions, autoscaling_rejections, node_shapes
from vfcore.quantity import format_quantity
from vfcore.runtime.pod_options import SCRATCH_PATH, WorkerVolume, volumes_of
from vfcore.runtime.render_options import (
    BROKER_CLIENT_PORT,
    BROKER_MONITOR_PORT,
    BROKER_URL_PATTERN,
    DEFAULT_BROKER_IMAGE,
    DEFAULT_FLOW_PATH,
    DEFAULT_UID,
    MANAGED_BY,
    PRODUCT_LABEL,
    WORKLOAD_NAME_MAX,
    RenderOptions,
    flow_label,
    mig_choices,
    object_name,
    render_error,
    run_selector,
    short_object_name,
)
from vfcore.runtime.run_security import (
    BROKER_ROUTE_PORT,
    CONFIG_KEY,
    CREDENTIALS_DIR,
    NATS_CONFIG_DIR,
    RUN_KEY,
    SETUP_DIR,
    BrokerCluster,
    node_items,
    secret_data,
    secret_volume,
    setup_items,
)
from vfcore.runtime.topology import BrokerTopology, broker_topology
from vfcore.scaling.keda import KedaScaler

__all__ = [
    "BROKER_CLIENT_PORT",
    "BROKER_MONITOR_PORT",
    "CLAIM_NAME",
    "DEFAULT_BROKER_IMAGE",
    "DEFAULT_FLOW_PATH",
    "DEFAULT_UID",
    "MANAGED_BY",
    "WORKER_GRACE_S",
    "RenderOptions",
    "credentials_secret_name",
    "flow_label",
    "mig_choices",
    "object_name",
    "render",
    "run_selector",
    "stream_replicas",
]


# -- rendering -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Ctx:
    spec: FlowSpec
    opts: RenderOptions
    flow: str
    broker_url: str
    monitoring: str
    scaled: tuple[str, ...]
    secret: str  # the run's credentials Secret
    in_cluster: bool  # the broker is rendered here (and accepts only the run's keys)


def _labels(
    ctx: _Ctx, component: str, node: str | None = None, k8s: str | None = None
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


def _selector(labels: Mapping[str, str]) -> dict[str, str]:
    keys = (
        "app.kubernetes.io/instance",
        "app.kubernetes.io/name",
        "vfcore.io/flow",
        "app.kubernetes.io/component",
    )
    return {k: labels[k] for k in keys if k in labels}


def _meta(ctx: _Ctx, name: str, labels: dict[str, str], node: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ctx.opts.namespace, "labels": labels}
    annotations = {"vfcore.io/flow-name": ctx.spec.name}
    if node is not None:
        annotations["vfcore.io/node-name"] = node
    meta["annotations"] = annotations
    return meta


def _component(node: NodeSpec) -> str:
    if node.is_producer:
        return "producer"
    if node.is_consumer:
        return "consumer"
    return "processor"


def _pod_security(uid: int) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _toleration(t: Toleration) -> dict[str, Any]:
    out: dict[str, Any] = {"operator": t.operator}
    if t.key is not None:
        out["key"] = t.key
    if t.operator == "Equal":
        out["value"] = t.value
    if t.effect is not None:
        out["effect"] = t.effect
    return out


def _base_env(ctx: _Ctx) -> list[dict[str, Any]]:
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


def _worker_credentials(ctx: _Ctx, node: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The worker container's env and mount: its node's seed (an in-cluster broker) and the
    run key, from the run's Secret; and the volume holding only those two keys."""
    env = []
    if ctx.in_cluster:
        env.append({"name": "VF_BROKER_NKEY_FILE", "value": f"{CREDENTIALS_DIR}/node.nk"})
    env.append({"name": "VF_RUN_KEY_FILE", "value": f"{CREDENTIALS_DIR}/{RUN_KEY}"})
    items = node_items(node, flow=ctx.spec.name, run_id=ctx.opts.run_id, with_seed=ctx.in_cluster)
    return env, secret_volume("vf-credentials", ctx.secret, items)


def _setup_credentials(ctx: _Ctx) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The setup container's env and volume: the setup role's seed and the run key."""
    env = []
    if ctx.in_cluster:
        env.append({"name": "VF_BROKER_NKEY_FILE", "value": f"{SETUP_DIR}/setup.nk"})
    env.append({"name": "VF_RUN_KEY_FILE", "value": f"{SETUP_DIR}/{RUN_KEY}"})
    return env, secret_volume(
        "vf-setup-credentials", ctx.secret, setup_items(with_seed=ctx.in_cluster)
    )


def _mount(volume: str, path: str) -> dict[str, Any]:
    return {"name": volume, "mountPath": path, "readOnly": True}


#: The pod volume of ``--scratch`` (an emptyDir with its sizeLimit).
SCRATCH_VOLUME = "vf-scratch"


def _user_volume(v: WorkerVolume) -> dict[str, Any]:
    """A pod volume of ``--mount-pvc``, ``--mount-configmap`` or ``--mount-secret``."""
    if v.kind == "pvc":
        source: dict[str, Any] = {"claimName": v.source}
        if v.read_only:
            source["readOnly"] = True
        return {"name": v.volume_name, "persistentVolumeClaim": source}
    if v.kind == "configmap":
        return {"name": v.volume_name, "configMap": {"name": v.source}}
    return {"name": v.volume_name, "secret": {"secretName": v.source}}


def _user_mount(v: WorkerVolume) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": v.volume_name, "mountPath": v.path}
    if v.read_only:
        mount["readOnly"] = True
    return mount


def _with_pod_settings(obj: dict[str, Any], opts: RenderOptions) -> dict[str, Any]:
    """``--priority-class`` and ``--image-pull-secret`` on the pod template of every
    workload of the run (the broker's too: its image may come from the same registry,
    and it should not be preempted before the workers it serves)."""
    template = obj.get("spec", {}).get("template") if obj.get("kind") in _WORKLOADS else None
    if template is None:
        return obj
    pod = template["spec"]
    if opts.priority_class is not None:
        pod["priorityClassName"] = opts.priority_class
    if opts.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": n} for n in opts.image_pull_secrets]
    return obj


_WORKLOADS = ("Job", "Deployment", "StatefulSet")


def _pod_spec(
    ctx: _Ctx,
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
        "securityContext": _pod_security(opts.uid),
        "containers": [container],
    }
    pod_volumes = list(volumes)
    if container["name"] == "worker":
        # Workers run --no-create: this makes sure the topology exists first, whatever
        # order the objects were applied in. It requests nothing, so the pod requests
        # exactly what the planner packed (a pod's request is the max of init and sum).
        # It alone mounts the setup role's key: the worker's container never sees it.
        init = _setup_container(ctx, "topology", wait_s=300)
        init["image"] = container["image"]  # --image-override: the node's own image
        env, volume = _setup_credentials(ctx)
        init["env"] = [*init["env"], *env]
        init["volumeMounts"] = [_mount(volume["name"], SETUP_DIR)]
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
            spec["tolerations"] = [_toleration(opts.gpu_toleration)]
        if opts.gpu_runtime_class is not None:
            spec["runtimeClassName"] = opts.gpu_runtime_class
    return spec


def _worker_container(
    ctx: _Ctx, node: NodeSpec, pod: PodRequest
) -> tuple[dict[str, Any], str | None]:
    opts = ctx.opts
    args = [
        "worker",
        opts.flow_path,
        "--node",
        node.name,
        "--broker",
        "$(VF_BROKER_URL)",
        "--run",
        opts.run_id,
        "--no-create",
        *_stream_replicas_args(ctx),  # the large-payload bucket a worker creates
    ]
    if ctx.scaled:
        args += ["--scalable", ",".join(ctx.scaled)]
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    gpu_resources = {r for r, _ in pod.requests} - {"cpu", "memory", "ephemeral-storage"}
    for resource, units in pod.requests:
        if resource in gpu_resources:
            limits[resource] = str(units)
        else:
            requests[resource] = format_quantity(resource, units)
    product = None
    if pod.slice == "mig":
        resource, product = dict(opts.mig)[node.name]
        limits[resource] = "1"
    env, _ = _worker_credentials(ctx, node.name)
    container: dict[str, Any] = {
        "name": "worker",
        "image": dict(opts.image_overrides).get(node.name, opts.image),
        "command": ["vf"],
        "args": args,
        "env": [*_base_env(ctx), *env],
        "volumeMounts": [
            _mount("vf-credentials", CREDENTIALS_DIR),
            *(_user_mount(v) for v in volumes_of(opts.volumes, node.name)),
            *([{"name": SCRATCH_VOLUME, "mountPath": SCRATCH_PATH}] if opts.scratch else []),
        ],
        "securityContext": _container_security(),
    }
    if opts.image_pull_policy is not None:
        container["imagePullPolicy"] = opts.image_pull_policy
    res: dict[str, Any] = {}
    if pod.dra is not None:
        res["claims"] = [{"name": CLAIM_NAME}]
    if limits:
        res["limits"] = dict(sorted(limits.items()))
    if requests:
        res["requests"] = dict(sorted(requests.items()))
    if res:
        container["resources"] = res
    return container, product


def _node_objects(
    ctx: _Ctx, node: NodeSpec, replicas: int, workload: str, pod: PodRequest
) -> list[dict[str, Any]]:
    opts = ctx.opts
    name = object_name(ctx.spec.name, opts.run_id, node.name)
    labels = _labels(ctx, _component(node), node.name, name)
    selector = _selector(labels)
    container, product = _worker_container(ctx, node, pod)
    volumes = (
        _worker_credentials(ctx, node.name)[1],
        *(_user_volume(v) for v in volumes_of(opts.volumes, node.name)),
        *(
            [{"name": SCRATCH_VOLUME, "emptyDir": {"sizeLimit": opts.scratch}}]
            if opts.scratch
            else []
        ),
    )
    gpu = node.is_gpu
    out: list[dict[str, Any]] = []
    claim_template = None
    if pod.dra is not None:
        claim_template = name
        out.append(_claim_template(ctx, name, labels, node, pod))
    template_meta = {"labels": labels, "annotations": {"vfcore.io/node-name": node.name}}
    if workload == "deployment" or (workload == "job" and replicas == 1):
        # no index of its own (a Deployment's pods share a template, a one-pod Job has
        # no completion index) and a random name suffix that may be all digits: a
        # worker must not read that as a replica index; competing replicas share one
        # consumer, and any of them writing "done" ends the node (docs/broker.md)
        container["env"] = [*container["env"], {"name": "VF_REPLICA", "value": "0"}]
    if workload == "job":
        job_spec: dict[str, Any] = {
            "completions": replicas,
            "parallelism": replicas,
            "backoffLimit": 3 * replicas,
            "template": {
                "metadata": template_meta,
                "spec": _pod_spec(
                    ctx,
                    container,
                    restart="Never",
                    gpu=gpu,
                    product=product,
                    claim_template=claim_template,
                    volumes=volumes,
                ),
            },
        }
        if replicas > 1:
            job_spec["completionMode"] = "Indexed"
        out.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": _meta(ctx, name, labels, node.name),
                "spec": job_spec,
            }
        )
    elif workload == "statefulset":
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": _meta(ctx, name, labels, node.name),
                "spec": {
                    "clusterIP": "None",
                    "selector": selector,
                    "publishNotReadyAddresses": True,
                },
            }
        )
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": _meta(ctx, name, labels, node.name),
                "spec": {
                    "serviceName": name,
                    "replicas": replicas,
                    "podManagementPolicy": "Parallel",
                    "selector": {"matchLabels": selector},
                    "template": {
                        "metadata": template_meta,
                        "spec": _pod_spec(
                            ctx,
                            container,
                            restart="Always",
                            gpu=gpu,
                            product=product,
                            claim_template=claim_template,
                            volumes=volumes,
                        ),
                    },
                },
            }
        )
    else:
        # A Deployment KEDA scales leaves `replicas` to the HPA: applying it again would
        # reset what the HPA chose (KEDA starts it at minReplicaCount = nb_tasks).
        count = {} if node.name in ctx.scaled else {"replicas": replicas}
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": _meta(ctx, name, labels, node.name),
                "spec": {
                    **count,
                    "selector": {"matchLabels": selector},
                    "template": {
                        "metadata": template_meta,
                        "spec": _pod_spec(
                            ctx,
                            container,
                            restart="Always",
                            gpu=gpu,
                            product=product,
                            claim_template=claim_template,
                            volumes=volumes,
                        ),
                    },
                },
            }
        )
    for obj in out:
        if obj["kind"] in ("Job", "StatefulSet", "Deployment"):
            # SIGTERM: the worker stops taking messages, finishes and acknowledges what it
            # holds, hands back what it fetched, exits (docs/broker.md): give it the time
            obj["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = WORKER_GRACE_S
        if obj["kind"] == "Deployment" and opts.rollout is not None:
            obj["spec"]["strategy"] = _rollout_strategy(opts.rollout)
    if replicas > 1:
        # Jobs have no scale subresource: only an integer minAvailable works for them.
        budget: dict[str, Any] = (
            {"minAvailable": replicas - 1} if workload == "job" else {"maxUnavailable": 1}
        )
        out.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _meta(ctx, name, labels, node.name),
                "spec": {**budget, "selector": {"matchLabels": selector}},
            }
        )
    return out


#: Seconds a worker pod has between SIGTERM and SIGKILL: enough to finish the message in
#: hand (REALTIME fetches one at a time), store its outputs and acknowledge it, hand back
#: what it fetched and flush (close() waits at most ~25 s for the broker).
WORKER_GRACE_S = 60


def _rollout_strategy(rollout: str) -> dict[str, Any]:
    """A Deployment's update strategy for ``--rollout``.

    ``surge``: one new pod starts (and reads the same durable consumer) before an
    old one gets SIGTERM — no moment with fewer readers, one more pod's worth of
    capacity needed. ``drain``: an old pod gets SIGTERM (it finishes what it holds)
    before its replacement starts — no extra capacity, one reader fewer meanwhile
    (none for a one-replica node: REALTIME frames wait in the stream, the freshest
    ``realtime_keep`` kept). Not ``Recreate``: it stops every replica at once.
    """
    surge = rollout == "surge"
    return {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1 if surge else 0, "maxUnavailable": 0 if surge else 1},
    }


#: The name of a DRA pod's one claim (``spec.resourceClaims[].name``) and of its one request.
CLAIM_NAME = "gpu"


def _claim_template(
    ctx: _Ctx, name: str, labels: dict[str, str], node: NodeSpec, pod: PodRequest
) -> dict[str, Any]:
    """A node's ResourceClaimTemplate: one request, as :func:`vfcore.dra_request_of` says."""
    assert pod.dra is not None
    exactly: dict[str, Any] = {
        "deviceClassName": pod.dra.device_class,
        "allocationMode": "ExactCount",
        "count": pod.dra.count,
    }
    if pod.dra.selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in pod.dra.selectors]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": _meta(ctx, name, labels, node.name),
        "spec": {
            # the claims made from it get these labels: the run's selector finds them too
            "metadata": {"labels": labels},
            "spec": {"devices": {"requests": [{"name": CLAIM_NAME, "exactly": exactly}]}},
        },
    }


def _scaled_object(ctx: _Ctx, node: NodeSpec, topo: Any) -> dict[str, Any]:
    opts = ctx.opts
    name = object_name(ctx.spec.name, opts.run_id, node.name)
    caps = dict(opts.capacity_caps)
    ceiling = min(opts.max_replicas, caps[node.name]) if node.name in caps else opts.max_replicas
    maximum = max(node.replicas, ceiling)
    scaler = KedaScaler.for_parents(
        node.parents, target=opts.lag_threshold, min_replicas=node.replicas, max_replicas=maximum
    )
    triggers = []
    for trigger in scaler.triggers:
        edge = topo.edge(trigger.parent, node.name)
        (consumer,) = edge.consumers  # an autoscaled child is unpartitioned: one consumer
        triggers.append(
            {
                "type": "nats-jetstream",
                "name": physical_name(trigger.parent, flow=ctx.spec.name, run=opts.run_id).k8s,
                "metadata": {
                    "natsServerMonitoringEndpoint": ctx.monitoring,
                    "account": "$G",
                    "stream": edge.stream,
                    "consumer": consumer.name,
                    "lagThreshold": str(trigger.lag_threshold),
                    "activationLagThreshold": str(trigger.activation_lag_threshold),
                    "useHttps": "false",
                },
            }
        )
    assert scaler.fallback is not None  # for_parents holds on unknown by default
    labels = _labels(ctx, _component(node), node.name, name)
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _meta(ctx, name, labels, node.name),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicaCount": scaler.min_replica_count,
            "maxReplicaCount": scaler.max_replica_count,
            "cooldownPeriod": scaler.cooldown_period_s,
            "fallback": scaler.fallback.to_dict(),
            "triggers": triggers,
        },
    }


def _broker_objects(ctx: _Ctx) -> list[dict[str, Any]]:
    opts = ctx.opts
    name = _broker_name(ctx.spec.name, opts.run_id)
    headless = _broker_headless(name)
    clustered = opts.broker_replicas > 1
    labels = _labels(ctx, "broker")
    labels["app.kubernetes.io/name"] = name
    labels = dict(sorted(labels.items()))
    selector = _selector(labels)
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
            _mount("config", NATS_CONFIG_DIR),
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
        "securityContext": _container_security(),
    }
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": _pod_security(opts.uid),
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
            "metadata": _meta(ctx, headless, labels),
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
            "metadata": _meta(ctx, name, labels),
            "spec": {"type": "ClusterIP", "selector": selector, "ports": ports},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": _meta(ctx, name, labels),
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
                "metadata": _meta(ctx, name, labels),
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector}},
            }
        )
    return out


def stream_replicas(broker_replicas: int) -> int:
    """How many servers hold each stream of a run whose broker has ``broker_replicas``:
    3 on a cluster (any one server may go), 1 on a single server."""
    return 3 if broker_replicas >= 3 else 1


def _stream_replicas_args(ctx: _Ctx) -> list[str]:
    replicas = stream_replicas(ctx.opts.broker_replicas) if ctx.in_cluster else 1
    return ["--stream-replicas", str(replicas)] if replicas > 1 else []


def _broker_cluster(ctx: _Ctx) -> BrokerCluster | None:
    """The in-cluster broker's cluster block: a route to every pod by its stable DNS name
    (``<pod>.<headless Service>.<namespace>.svc``: the resolver's search list completes
    it whatever the cluster's domain), or ``None`` for a single server."""
    opts = ctx.opts
    if not ctx.in_cluster or opts.broker_replicas == 1:
        return None
    name = _broker_name(ctx.spec.name, opts.run_id)
    headless = _broker_headless(name)
    routes = tuple(
        f"{name}-{i}.{headless}.{opts.namespace}.svc:{BROKER_ROUTE_PORT}"
        for i in range(opts.broker_replicas)
    )
    return BrokerCluster(name, routes)


def _broker_headless(name: str) -> str:
    return f"{name[: WORKLOAD_NAME_MAX - 3]}-hl"


def _broker_name(flow: str, run_id: str) -> str:
    # "\0" cannot start a node name a person types, and the hash covers the exact text
    return short_object_name(physical_name("\0broker", flow=flow, run=run_id).k8s)


def _setup_container(ctx: _Ctx, name: str, *, wait_s: int) -> dict[str, Any]:
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
            *_stream_replicas_args(ctx),
        ],
        "env": _base_env(ctx),
        "securityContext": _container_security(),
        **({"imagePullPolicy": opts.image_pull_policy} if opts.image_pull_policy else {}),
    }


def _setup_job(ctx: _Ctx) -> dict[str, Any]:
    opts = ctx.opts
    name = short_object_name(physical_name("\0setup", flow=ctx.spec.name, run=opts.run_id).k8s)
    labels = _labels(ctx, "broker")
    labels["app.kubernetes.io/name"] = name
    labels = dict(sorted(labels.items()))
    container = _setup_container(ctx, "setup", wait_s=120)
    container["resources"] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    env, volume = _setup_credentials(ctx)
    container["env"] = [*container["env"], *env]
    container["volumeMounts"] = [_mount(volume["name"], SETUP_DIR)]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(ctx, name, labels),
        "spec": {
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 6,
            "template": {
                "metadata": {"labels": labels},
                "spec": _pod_spec(ctx, container, restart="Never", gpu=False, volumes=(volume,)),
            },
        },
    }


def _credentials_secret(ctx: _Ctx, topo: BrokerTopology) -> dict[str, Any]:
    """The run's Secret, with the values given (RenderOptions.secret_values)."""
    opts = ctx.opts
    assert opts.secret_values is not None
    labels = _labels(ctx, "credentials")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(ctx, ctx.secret, labels),
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


def _run_pods(ctx: _Ctx) -> dict[str, str]:
    """The labels every pod of the run carries (and no pod of another run or flow)."""
    return {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "vfcore.io/flow": ctx.flow,
        "vfcore.io/run": ctx.opts.run_id,
    }


def _route_ingress(ctx: _Ctx, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The route port of a clustered broker: its own servers only."""
    if ctx.opts.broker_replicas == 1:
        return []
    return [
        {
            "from": [{"podSelector": {"matchLabels": _selector(labels)}}],
            "ports": [{"protocol": "TCP", "port": BROKER_ROUTE_PORT}],
        }
    ]


def _network_policies(ctx: _Ctx) -> list[dict[str, Any]]:
    """The broker's ingress (an in-cluster broker) and the workers' default deny."""
    opts = ctx.opts
    out: list[dict[str, Any]] = []
    broker = _broker_name(ctx.spec.name, opts.run_id)
    if ctx.in_cluster:
        labels = dict(sorted({**_labels(ctx, "broker"), "app.kubernetes.io/name": broker}.items()))
        out.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": _meta(ctx, broker, labels),
                "spec": {
                    "podSelector": {"matchLabels": _selector(labels)},
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
                            "matchLabels": _selector(
                                {**_labels(ctx, "broker"), "app.kubernetes.io/name": broker}
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
            "metadata": _meta(ctx, name, _labels(ctx, "network")),
            "spec": spec,
        }
    )
    return out


def _check_against_spec(spec: FlowSpec, opts: RenderOptions, pods: tuple[PodRequest, ...]) -> None:
    names = set(spec.names)
    for what, items in (
        ("mig", opts.mig),
        ("capacity_caps", opts.capacity_caps),
        ("dra_selectors", opts.dra_selectors),
        ("--image-override", opts.image_overrides),
        ("a volume (--mount-…)", tuple((v.node, v) for v in opts.volumes if v.node is not None)),
    ):
        unknown = sorted(str(n) for n, _ in items if n not in names)
        if unknown:
            raise render_error(
                "unknown-node",
                f"{what} names {unknown}, which flow {spec.name!r} does not have",
                f"name nodes as the flow declares them: {', '.join(sorted(names))}",
            )
    mig_nodes = sorted({p.node for p in pods if p.slice == "mig"})
    chosen = {n for n, _ in opts.mig}
    missing = [n for n in mig_nodes if n not in chosen]
    if missing:
        raise render_error(
            "missing-mig-choice",
            f"--gpu-mode mix: nodes {missing} take a MIG slice, but no MIG resource was chosen for them",
            "plan the flow against the cluster (vf deploy does) or pass --mig NODE=RESOURCE[@PRODUCT]",
        )
    extra = sorted(chosen - set(mig_nodes))
    if extra:
        raise render_error(
            "invalid-mig-choice",
            f"mig names {extra}, which take no MIG slice under --gpu-mode {opts.gpu_mode}",
            "a MIG slice is for a one-GPU node with gpu_memory_gib under --gpu-mode mix",
        )
    gpu_nodes = [n.name for n in spec.nodes if n.is_gpu]
    if opts.gpu_mode is GpuMode.SHARED and gpu_nodes and opts.gpu_runtime_class is None:
        raise render_error(
            "shared-needs-runtime-class",
            f"--gpu-mode shared renders GPU pods {gpu_nodes} with no GPU limit: without a runtime "
            "class nothing would give them a device",
            "pass --gpu-runtime-class (e.g. nvidia), or use --gpu-mode exclusive",
        )
    if opts.rollout is not None and spec.flow_type != REALTIME:
        raise render_error(
            "rollout-on-batch",
            f"--rollout {opts.rollout}: flow {spec.name!r} is BATCH, whose nodes are Jobs; "
            "Kubernetes never changes a running Job's pods, and a BATCH run is never rolled",
            "let the run finish, or tear it down (vf teardown FLOW --run ID) and deploy "
            "the new version as a new run; docs/kubernetes.md, Rollouts",
        )
    if opts.keda:
        commas = [n for n in spec.names if "," in n]
        if commas:
            raise render_error(
                "invalid-node-name",
                f"nodes {commas} contain ',', which `vf worker --scalable` uses as a separator",
                "rename the nodes, or render without autoscaling",
            )


def _unshared(value: Any) -> Any:
    """A copy in which every dict and list is new (``deepcopy`` keeps shared ones shared)."""
    if isinstance(value, dict):
        return {k: _unshared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshared(v) for v in value]
    return value


def render(spec: FlowSpec, options: RenderOptions) -> tuple[dict[str, Any], ...]:
    """Every Kubernetes object of one run of ``spec``, in apply order.

    Order: the run's credentials Secret (only when ``secret_values`` are given:
    otherwise the objects name it and it is made apart, docs/security.md), the
    NetworkPolicies (the broker's, the workers'), the broker's Services and
    StatefulSet (when no ``broker_url``), the setup Job, then per node in spec
    order its headless Service, workload, PodDisruptionBudget and ScaledObject. The flow must be valid
    (``InvalidFlowError`` otherwise).
    """
    opts = options
    spec = require_valid(
        spec,
        gpu_mode=opts.gpu_mode,
        gpu_resource_name=opts.gpu_resource_name,
        autoscaling=opts.keda,
    )
    pods = pod_requests(
        spec,
        gpu_mode=opts.gpu_mode,
        gpu_resource_name=opts.gpu_resource_name,
        gpu_node_selector=None
        if opts.gpu_mode is GpuMode.DRA and opts.gpu_node_selector == GPU_PRESENT_LABEL
        else opts.gpu_node_selector,
        resources={n: dict(r) for n, r in opts.resources},
        dra_device_class=opts.dra_device_class,
        dra_mig_device_class=opts.dra_mig_device_class,
        dra_driver=opts.dra_driver,
        dra_selectors=dict(opts.dra_selectors),
    )
    _check_against_spec(spec, opts, pods)
    scaled: tuple[str, ...] = ()
    if opts.keda and spec.flow_type == REALTIME:
        rejections = autoscaling_rejections(
            spec,
            AutoscalingOptions(
                enabled=True, gpu_autoscaling=opts.gpu_autoscaling, max_replicas=opts.max_replicas
            ),
        )
        scaled = tuple(n.name for n in spec.nodes if not rejections[n.name])
    if opts.broker_url is None:
        host = f"{_broker_name(spec.name, opts.run_id)}.{opts.namespace}.svc"
        broker_url = f"nats://{host}:{BROKER_CLIENT_PORT}"
        monitoring = opts.broker_monitoring or f"{host}:{BROKER_MONITOR_PORT}"
    else:
        broker_url = opts.broker_url
        match = BROKER_URL_PATTERN.fullmatch(broker_url)
        assert match is not None  # RenderOptions checked it
        monitoring = opts.broker_monitoring or f"{match['host']}:{BROKER_MONITOR_PORT}"
    ctx = _Ctx(
        spec,
        opts,
        flow_label(spec.name),
        broker_url,
        monitoring,
        scaled,
        credentials_secret_name(spec.name, opts.run_id),
        opts.broker_url is None,
    )
    topo = broker_topology(spec, opts.run_id)
    out: list[dict[str, Any]] = []
    if opts.secret_values is not None:
        out.append(_credentials_secret(ctx, topo))
    if opts.network_policies:
        out.extend(_network_policies(ctx))
    if opts.broker_url is None:
        out.extend(_broker_objects(ctx))
    out.append(_setup_job(ctx))
    first_pod: dict[str, PodRequest] = {}
    for pod in pods:
        first_pod.setdefault(pod.node, pod)
    for node, shape in zip(spec.nodes, node_shapes(spec), strict=True):
        out.extend(_node_objects(ctx, node, shape.replicas, shape.workload, first_pod[node.name]))
        if node.name in scaled:
            out.append(_scaled_object(ctx, node, topo))
    # no two objects share a sub-object: a caller may edit one, and YAML needs no aliases
    return tuple(_with_pod_settings(_unshared(o), opts) for o in out)
