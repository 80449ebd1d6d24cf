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

from typing import Any

from vfcore.cluster import GPU_PRESENT_LABEL
from vfcore.flow.gpu_mode import GpuMode
from vfcore.flow.names import physical_name
from vfcore.flow.spec import REALTIME, FlowSpec, NodeSpec
from vfcore.flow.validate import require_valid
from vfcore.placement.claims import PodRequest, pod_requests
from vfcore.placement.demand import AutoscalingOptions, autoscaling_rejections, node_shapes
from vfcore.quantity import format_quantity
from vfcore.runtime.broker_manifests import (
    broker_name,
    broker_objects,
    credentials_secret,
    network_policies,
    setup_job,
)
from vfcore.runtime.manifest_parts import (
    CLAIM_NAME,
    SCRATCH_VOLUME,
    ManifestContext,
    base_env,
    component_of,
    container_security,
    credentials_secret_name,
    mount_of,
    object_meta,
    pod_spec_of,
    run_labels,
    selector_of,
    stream_replicas,
    stream_replicas_args,
    user_mount,
    user_volume,
    with_pod_settings,
    worker_credentials,
)
from vfcore.runtime.pod_options import SCRATCH_PATH, volumes_of
from vfcore.runtime.render_options import (
    BROKER_CLIENT_PORT,
    BROKER_MONITOR_PORT,
    BROKER_URL_PATTERN,
    DEFAULT_BROKER_IMAGE,
    DEFAULT_FLOW_PATH,
    DEFAULT_UID,
    MANAGED_BY,
    RenderOptions,
    flow_label,
    mig_choices,
    object_name,
    render_error,
    run_selector,
)
from vfcore.runtime.run_security import (
    CREDENTIALS_DIR,
)
from vfcore.runtime.topology import broker_topology
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


def _worker_container(
    ctx: ManifestContext, node: NodeSpec, pod: PodRequest
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
        *stream_replicas_args(ctx),  # the large-payload bucket a worker creates
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
    env, _ = worker_credentials(ctx, node.name)
    container: dict[str, Any] = {
        "name": "worker",
        "image": dict(opts.image_overrides).get(node.name, opts.image),
        "command": ["vf"],
        "args": args,
        "env": [*base_env(ctx), *env],
        "volumeMounts": [
            mount_of("vf-credentials", CREDENTIALS_DIR),
            *(user_mount(v) for v in volumes_of(opts.volumes, node.name)),
            *([{"name": SCRATCH_VOLUME, "mountPath": SCRATCH_PATH}] if opts.scratch else []),
        ],
        "securityContext": container_security(),
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
    ctx: ManifestContext, node: NodeSpec, replicas: int, workload: str, pod: PodRequest
) -> list[dict[str, Any]]:
    opts = ctx.opts
    name = object_name(ctx.spec.name, opts.run_id, node.name)
    labels = run_labels(ctx, component_of(node), node.name, name)
    selector = selector_of(labels)
    container, product = _worker_container(ctx, node, pod)
    volumes = (
        worker_credentials(ctx, node.name)[1],
        *(user_volume(v) for v in volumes_of(opts.volumes, node.name)),
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
                "spec": pod_spec_of(
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
                "metadata": object_meta(ctx, name, labels, node.name),
                "spec": job_spec,
            }
        )
    elif workload == "statefulset":
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": object_meta(ctx, name, labels, node.name),
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
                "metadata": object_meta(ctx, name, labels, node.name),
                "spec": {
                    "serviceName": name,
                    "replicas": replicas,
                    "podManagementPolicy": "Parallel",
                    "selector": {"matchLabels": selector},
                    "template": {
                        "metadata": template_meta,
                        "spec": pod_spec_of(
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
                "metadata": object_meta(ctx, name, labels, node.name),
                "spec": {
                    **count,
                    "selector": {"matchLabels": selector},
                    "template": {
                        "metadata": template_meta,
                        "spec": pod_spec_of(
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
                "metadata": object_meta(ctx, name, labels, node.name),
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


def _claim_template(
    ctx: ManifestContext, name: str, labels: dict[str, str], node: NodeSpec, pod: PodRequest
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
        "metadata": object_meta(ctx, name, labels, node.name),
        "spec": {
            # the claims made from it get these labels: the run's selector finds them too
            "metadata": {"labels": labels},
            "spec": {"devices": {"requests": [{"name": CLAIM_NAME, "exactly": exactly}]}},
        },
    }


def _scaled_object(ctx: ManifestContext, node: NodeSpec, topo: Any) -> dict[str, Any]:
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
    labels = run_labels(ctx, component_of(node), node.name, name)
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": object_meta(ctx, name, labels, node.name),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicaCount": scaler.min_replica_count,
            "maxReplicaCount": scaler.max_replica_count,
            "cooldownPeriod": scaler.cooldown_period_s,
            "fallback": scaler.fallback.to_dict(),
            "triggers": triggers,
        },
    }


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
        host = f"{broker_name(spec.name, opts.run_id)}.{opts.namespace}.svc"
        broker_url = f"nats://{host}:{BROKER_CLIENT_PORT}"
        monitoring = opts.broker_monitoring or f"{host}:{BROKER_MONITOR_PORT}"
    else:
        broker_url = opts.broker_url
        match = BROKER_URL_PATTERN.fullmatch(broker_url)
        assert match is not None  # RenderOptions checked it
        monitoring = opts.broker_monitoring or f"{match['host']}:{BROKER_MONITOR_PORT}"
    ctx = ManifestContext(
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
        out.append(credentials_secret(ctx, topo))
    if opts.network_policies:
        out.extend(network_policies(ctx))
    if opts.broker_url is None:
        out.extend(broker_objects(ctx))
    out.append(setup_job(ctx))
    first_pod: dict[str, PodRequest] = {}
    for pod in pods:
        first_pod.setdefault(pod.node, pod)
    for node, shape in zip(spec.nodes, node_shapes(spec), strict=True):
        out.extend(_node_objects(ctx, node, shape.replicas, shape.workload, first_pod[node.name]))
        if node.name in scaled:
            out.append(_scaled_object(ctx, node, topo))
    # no two objects share a sub-object: a caller may edit one, and YAML needs no aliases
    return tuple(with_pod_settings(_unshared(o), opts) for o in out)
