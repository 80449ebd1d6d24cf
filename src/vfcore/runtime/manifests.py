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
  ``nats`` image);
* **GPU pods** (:func:`vfcore.pod_requests` decides what each pod takes, as the
  planner does): exclusive → ``limits {resource: gpu_count}``; shared → no GPU
  limit, a ``runtimeClassName`` (refused without one); mix → ``limits
  {<MIG resource>: 1}`` as the plan chose, with a ``nvidia.com/gpu.product``
  selector when given; all get the GPU-pool node selector and the
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

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from vfcore.cluster import GPU_PRESENT_LABEL, Toleration
from vfcore.errors import InvalidInputError, brief
from vfcore.flow.gpu_mode import GpuMode, parse_gpu_mode
from vfcore.flow.names import physical_name
from vfcore.flow.spec import REALTIME, FlowSpec, NodeSpec
from vfcore.flow.validate import require_valid
from vfcore.placement.claims import GPU_TOLERATION, PodRequest, pod_requests
from vfcore.placement.demand import AutoscalingOptions, autoscaling_rejections, node_shapes
from vfcore.quantity import canonical_units, format_quantity
from vfcore.runtime.topology import broker_topology, check_run_id
from vfcore.scaling.keda import KedaScaler
from vfcore.scaling.rule import DEFAULT_LAG_THRESHOLD, DEFAULT_MAX_REPLICAS

if TYPE_CHECKING:
    from vfcore.cluster import NodeState
    from vfcore.placement.mig import MigPlan

__all__ = [
    "BROKER_CLIENT_PORT",
    "BROKER_MONITOR_PORT",
    "DEFAULT_BROKER_IMAGE",
    "DEFAULT_FLOW_PATH",
    "DEFAULT_UID",
    "MANAGED_BY",
    "RenderOptions",
    "flow_label",
    "mig_choices",
    "object_name",
    "render",
    "run_selector",
]

MANAGED_BY: Final = "vf"
DEFAULT_FLOW_PATH: Final = "/app/flow.py"
DEFAULT_BROKER_IMAGE: Final = "nats:2.11"
DEFAULT_UID: Final = 10001
BROKER_CLIENT_PORT: Final = 4222
BROKER_MONITOR_PORT: Final = 8222
#: Room a controller needs after a workload's name (``-<revision hash>`` on
#: StatefulSet pods is 11 characters and must fit a 63-character label value).
_WORKLOAD_NAME_MAX = 52
_PRODUCT_LABEL = "nvidia.com/gpu.product"

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_BROKER_URL = re.compile(
    r"(?:nats|tls)://(?:[^@/\s]*@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::\d{1,5})?/?"
)
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def _bad(rule: str, message: str, hint: str) -> InvalidInputError:
    return InvalidInputError(rule, message, hint)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _label_key_ok(key: object) -> bool:
    if not isinstance(key, str) or not key:
        return False
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or _DNS_SUBDOMAIN.fullmatch(prefix) is None):
        return False
    return _LABEL_NAME.fullmatch(name) is not None


def _label_value_ok(value: object) -> bool:
    return isinstance(value, str) and _LABEL_VALUE.fullmatch(value) is not None


def flow_label(flow: str) -> str:
    """The label value naming a flow (``vfcore.io/flow``, ``app.kubernetes.io/part-of``).

    A DNS label ending in a hash of the exact flow name, so flows whose names
    squeeze to the same letters keep apart: ``flow_label("traffic")`` is
    ``traffic-<12 chars>``.
    """
    return physical_name("", flow=flow).k8s


def run_selector(flow: str, run_id: str) -> str:
    """The label selector of every object of one run of a flow (teardown and status use it)."""
    return f"app.kubernetes.io/managed-by={MANAGED_BY},vfcore.io/flow={flow_label(flow)},vfcore.io/run={run_id}"


def object_name(flow: str, run_id: str, node: str) -> str:
    """The name of a node's objects in a run: a DNS-1035 label of at most 52 characters.

    It is :func:`vfcore.physical_name`'s Kubernetes name (readable part, then a
    hash of the exact flow, run and node names), its readable part cut so that
    controllers can append their suffixes, and ``vf-`` put first when it would
    start with a digit (Service names must start with a letter).
    """
    return _short(physical_name(node, flow=flow, run=run_id).k8s)


def _short(k8s: str) -> str:
    readable, _, digest = k8s.rpartition("-")
    if not readable[:1].isalpha():
        readable = f"vf-{readable}" if readable else "vf"
    room = _WORKLOAD_NAME_MAX - len(digest) - 1
    return f"{readable[:room].rstrip('-')}-{digest}"


def mig_choices(mig: MigPlan, nodes: Iterable[NodeState]) -> dict[str, tuple[str, str | None]]:
    """``RenderOptions.mig`` from a mix-mode plan: flow node → (MIG resource, product).

    The resource is the one the plan gives the node's pods (``MigPlan.resources``).
    The product is the ``nvidia.com/gpu.product`` label shared by every cluster node
    the plan puts those pods on (a profile's memory differs by card model), and
    ``None`` when they land on several models or a node has no such label: then
    the resource name alone selects the nodes.
    """
    labels = {n.name: dict(n.labels) for n in nodes}
    hosts: dict[str, set[str]] = {}
    for node_plan in mig.nodes:
        pods = [i.pod for c in node_plan.cards for i in c.instances if i.pod is not None]
        pods += [pod for pod, _ in node_plan.pool_pods]
        for pod in pods:
            hosts.setdefault(pod.rsplit("/", 1)[0], set()).add(node_plan.node)
    out: dict[str, tuple[str, str | None]] = {}
    for flow_node, resource in mig.resources:
        products = {labels.get(h, {}).get(_PRODUCT_LABEL) for h in hosts.get(flow_node, ())}
        (product,) = products if len(products) == 1 else (None,)
        out[flow_node] = (resource, product)
    return out


def _mapping_items(value: object, what: str, hint: str) -> tuple[tuple[Any, Any], ...]:
    if isinstance(value, Mapping):
        return tuple(sorted(value.items(), key=lambda kv: str(kv[0])))
    if isinstance(value, tuple) and all(isinstance(i, tuple) and len(i) == 2 for i in value):
        return tuple(sorted(value, key=lambda kv: str(kv[0])))
    raise _bad("invalid-render-option", f"{what}={brief(value)} is not a mapping", hint)


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """What ``vf deploy`` passes to :func:`render` besides the flow.

    ``image`` holds the flow's code and vfcore (``vf dockerfile`` writes one);
    ``flow_path`` is the flow file inside it. ``broker_url=None`` renders an
    in-cluster NATS JetStream server; ``broker_monitoring`` (``host:port``) is
    where KEDA reads consumer lag (default: the broker's host, port 8222).
    ``mig`` maps each mix-mode MIG node to ``(resource, product or None)`` as
    the mix planner chose; ``capacity_caps`` maps a node to the replica count
    the cluster can place (:func:`vfcore.capacity_cap`), which bounds KEDA's
    maximum. ``resources`` overrides nodes' requests like ``--resources``.
    Mappings are stored as sorted tuples, so options are hashable.
    """

    image: str
    run_id: str
    namespace: str = "default"
    flow_path: str = DEFAULT_FLOW_PATH
    broker_url: str | None = None
    broker_monitoring: str | None = None
    broker_image: str = DEFAULT_BROKER_IMAGE
    broker_storage: str = "10Gi"
    broker_storage_class: str | None = None
    gpu_mode: GpuMode | str = GpuMode.EXCLUSIVE
    gpu_resource_name: str | None = None
    gpu_runtime_class: str | None = None
    gpu_node_selector: tuple[str, str] = GPU_PRESENT_LABEL
    gpu_toleration: Toleration | None = GPU_TOLERATION
    resources: Any = ()
    mig: Any = ()
    keda: bool = False
    gpu_autoscaling: bool = False
    max_replicas: int = DEFAULT_MAX_REPLICAS
    lag_threshold: int = DEFAULT_LAG_THRESHOLD
    capacity_caps: Any = ()
    env: Any = ()
    uid: int = DEFAULT_UID

    def __post_init__(self) -> None:
        s = object.__setattr__
        if (
            not isinstance(self.image, str)
            or not self.image
            or any(c.isspace() for c in self.image)
        ):
            raise _bad(
                "invalid-image",
                f"image {brief(self.image)} is not a container image reference",
                "pass --image registry/name:tag (the image `vf dockerfile FLOW` builds)",
            )
        check_run_id(self.run_id)
        if not isinstance(self.namespace, str) or _DNS_LABEL.fullmatch(self.namespace) is None:
            raise _bad(
                "invalid-namespace",
                f"namespace {brief(self.namespace)} is not a DNS label (lowercase letters, "
                "digits and '-', at most 63)",
                "pass --namespace like 'video-prod'",
            )
        path, _, factory = str(self.flow_path).partition(":")
        if (
            not isinstance(self.flow_path, str)
            or not path.startswith("/")
            or not path.endswith(".py")
        ):
            raise _bad(
                "invalid-flow-path",
                f"flow path {brief(self.flow_path)} is not an absolute .py path inside the image",
                f"use the path the Dockerfile copies the flow to, e.g. {DEFAULT_FLOW_PATH}",
            )
        if factory and not factory.isidentifier():
            raise _bad(
                "invalid-flow-path",
                f"flow path {self.flow_path!r}: {factory!r} is not a function name",
                "write /app/flow.py:build",
            )
        if self.broker_url is not None and (
            not isinstance(self.broker_url, str) or _BROKER_URL.fullmatch(self.broker_url) is None
        ):
            raise _bad(
                "invalid-broker-url",
                f"broker URL {brief(self.broker_url)} is not nats://host[:port] or "
                "tls://host[:port]",
                "pass --broker nats://nats.messaging.svc:4222, or leave it out to deploy a broker",
            )
        if self.broker_monitoring is not None and (
            not isinstance(self.broker_monitoring, str)
            or "://" in self.broker_monitoring
            or not self.broker_monitoring.rpartition(":")[2].isdigit()
        ):
            raise _bad(
                "invalid-broker-monitoring",
                f"broker monitoring endpoint {brief(self.broker_monitoring)} is not host:port",
                "pass the NATS monitoring endpoint as host:8222 (KEDA reads /jsz there)",
            )
        for name in ("broker_image",):
            value = getattr(self, name)
            if not isinstance(value, str) or not value or any(c.isspace() for c in value):
                raise _bad(
                    "invalid-image", f"{name} {brief(value)} is not an image", "e.g. nats:2.11"
                )
        try:
            ok = canonical_units("storage", self.broker_storage) > 0
        except InvalidInputError:
            ok = False
        if not ok:
            raise _bad(
                "invalid-broker-storage",
                f"broker storage {brief(self.broker_storage)} is not a positive quantity",
                "e.g. 10Gi",
            )
        if self.broker_storage_class is not None and (
            not isinstance(self.broker_storage_class, str)
            or _DNS_SUBDOMAIN.fullmatch(self.broker_storage_class) is None
        ):
            raise _bad(
                "invalid-storage-class",
                f"storage class {brief(self.broker_storage_class)} is not a DNS subdomain",
                "name an existing StorageClass, or leave it out for the default",
            )
        s(self, "gpu_mode", parse_gpu_mode(self.gpu_mode))
        if self.gpu_resource_name is not None and not _label_key_ok(self.gpu_resource_name):
            raise _bad(
                "invalid-gpu-resource-name",
                f"GPU resource {brief(self.gpu_resource_name)} is not an extended resource name",
                "e.g. nvidia.com/gpu",
            )
        if self.gpu_runtime_class is not None and (
            not isinstance(self.gpu_runtime_class, str)
            or _DNS_SUBDOMAIN.fullmatch(self.gpu_runtime_class) is None
        ):
            raise _bad(
                "invalid-runtime-class",
                f"runtime class {brief(self.gpu_runtime_class)} is not a DNS subdomain",
                "name the RuntimeClass the GPU operator installed, e.g. nvidia",
            )
        sel = self.gpu_node_selector
        if not (
            isinstance(sel, tuple)
            and len(sel) == 2
            and _label_key_ok(sel[0])
            and _label_value_ok(sel[1])
        ):
            raise _bad(
                "invalid-node-selector",
                f"GPU node selector {brief(sel)} is not a (label key, label value) pair",
                "e.g. ('nvidia.com/gpu.present', 'true')",
            )
        if self.gpu_toleration is not None and not isinstance(self.gpu_toleration, Toleration):
            raise _bad(
                "invalid-render-option",
                f"gpu_toleration {brief(self.gpu_toleration)} is not a Toleration",
                "pass vfcore.Toleration(key='nvidia.com/gpu', operator='Exists', effect='NoSchedule')",
            )
        for name in ("keda", "gpu_autoscaling"):
            if not isinstance(getattr(self, name), bool):
                raise _bad(
                    "invalid-render-option",
                    f"{name}={brief(getattr(self, name))} is not a bool",
                    "pass True or False",
                )
        if not _is_int(self.max_replicas) or self.max_replicas < 1:
            raise _bad(
                "invalid-max-replicas",
                f"max_replicas={brief(self.max_replicas)} must be an int >= 1",
                "pass --max-replicas with a positive count, e.g. --max-replicas 10",
            )
        if not _is_int(self.lag_threshold) or self.lag_threshold < 1:
            raise _bad(
                "invalid-lag-threshold",
                f"lag_threshold={brief(self.lag_threshold)} must be an int >= 1 (messages)",
                "use the messages one replica may have waiting, e.g. 10",
            )
        if not _is_int(self.uid) or not 1 <= self.uid <= 2**31 - 1:
            raise _bad(
                "invalid-uid",
                f"uid={brief(self.uid)} must be a non-root user id (1 .. 2147483647)",
                f"use the USER of the image (vf dockerfile uses {DEFAULT_UID})",
            )
        resources = _mapping_items(self.resources, "resources", "{'detector': {'cpu': '2'}}")
        s(
            self,
            "resources",
            tuple(
                (str(n), _mapping_items(r, f"resources[{n!r}]", "{'cpu': '2', 'memory': '8Gi'}"))
                for n, r in resources
            ),
        )
        mig = []
        for node, choice in _mapping_items(
            self.mig, "mig", "{'pose': ('nvidia.com/mig-1g.10gb', 'NVIDIA-H100-80GB-HBM3')}"
        ):
            if isinstance(choice, str):
                resource, product = choice, None
            elif isinstance(choice, tuple | list) and len(choice) == 2:
                resource, product = choice
            else:
                resource, product = None, None
            if not _label_key_ok(resource) or not (product is None or _label_value_ok(product)):
                raise _bad(
                    "invalid-mig-choice",
                    f"mig[{node!r}]={brief(choice)} is not (MIG resource, GPU product or None)",
                    "e.g. ('nvidia.com/mig-1g.10gb', 'NVIDIA-H100-80GB-HBM3')",
                )
            mig.append((str(node), (resource, product)))
        s(self, "mig", tuple(mig))
        caps = _mapping_items(self.capacity_caps, "capacity_caps", "{'detector': 5}")
        for node, cap in caps:
            if not _is_int(cap) or cap < 0:
                raise _bad(
                    "invalid-capacity-cap",
                    f"capacity cap of {node!r} is {brief(cap)}; it must be an int >= 0",
                    "pass CapacityCap.limit (omit nodes whose limit is None: unknown never caps)",
                )
        s(self, "capacity_caps", caps)
        env = _mapping_items(self.env, "env", "{'LOG_LEVEL': 'info'}")
        for name, value in env:
            if (
                not isinstance(name, str)
                or _ENV_NAME.fullmatch(name) is None
                or not isinstance(value, str)
            ):
                raise _bad(
                    "invalid-env",
                    f"env {brief(name)}={brief(value)} is not NAME=text",
                    "names are letters, digits, '_', '-', '.', not starting with a digit",
                )
            if name in _RESERVED_ENV:
                raise _bad(
                    "invalid-env",
                    f"env {name} is set by vf itself",
                    f"leave out {', '.join(sorted(_RESERVED_ENV))}",
                )
        s(self, "env", env)

    def to_dict(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "run_id": self.run_id,
            "namespace": self.namespace,
            "flow_path": self.flow_path,
            "broker_url": self.broker_url,
            "broker_monitoring": self.broker_monitoring,
            "gpu_mode": str(self.gpu_mode),
            "gpu_resource_name": self.gpu_resource_name,
            "gpu_runtime_class": self.gpu_runtime_class,
            "keda": self.keda,
            "max_replicas": self.max_replicas,
        }


_RESERVED_ENV = frozenset({"VF_BROKER_URL", "VF_RUN", "POD_NAME", "VF_REPLICA"})


# -- rendering -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Ctx:
    spec: FlowSpec
    opts: RenderOptions
    flow: str
    broker_url: str
    monitoring: str
    scaled: tuple[str, ...]


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


def _pod_spec(
    ctx: _Ctx,
    container: dict[str, Any],
    *,
    restart: str,
    gpu: bool,
    product: str | None = None,
) -> dict[str, Any]:
    opts = ctx.opts
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "restartPolicy": restart,
        "securityContext": _pod_security(opts.uid),
        "containers": [container],
    }
    if container["name"] == "worker":
        # Workers run --no-create: this makes sure the topology exists first, whatever
        # order the objects were applied in. It requests nothing, so the pod requests
        # exactly what the planner packed (a pod's request is the max of init and sum).
        spec["initContainers"] = [_setup_container(ctx, "topology", wait_s=300)]
    if gpu:
        selector = {opts.gpu_node_selector[0]: opts.gpu_node_selector[1]}
        if product is not None:
            selector[_PRODUCT_LABEL] = product
        spec["nodeSelector"] = dict(sorted(selector.items()))
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
    container: dict[str, Any] = {
        "name": "worker",
        "image": opts.image,
        "command": ["vf"],
        "args": args,
        "env": _base_env(ctx),
        "securityContext": _container_security(),
    }
    res: dict[str, Any] = {}
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
    gpu = node.is_gpu
    out: list[dict[str, Any]] = []
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
                "spec": _pod_spec(ctx, container, restart="Never", gpu=gpu, product=product),
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
                            ctx, container, restart="Always", gpu=gpu, product=product
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
                            ctx, container, restart="Always", gpu=gpu, product=product
                        ),
                    },
                },
            }
        )
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


def _scaled_object(ctx: _Ctx, node: NodeSpec, topo: Any) -> dict[str, Any]:
    opts = ctx.opts
    name = object_name(ctx.spec.name, opts.run_id, node.name)
    caps = dict(opts.capacity_caps)
    ceiling = min(opts.max_replicas, caps[node.name]) if node.name in caps else opts.max_replicas
    maximum = max(node.nb_tasks, ceiling)
    scaler = KedaScaler.for_parents(
        node.parents, target=opts.lag_threshold, min_replicas=node.nb_tasks, max_replicas=maximum
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
    headless = f"{name[: _WORKLOAD_NAME_MAX - 3]}-hl"
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
    container = {
        "name": "nats",
        "image": opts.broker_image,
        "args": [
            "--jetstream",
            "--store_dir=/data",
            f"--port={BROKER_CLIENT_PORT}",
            f"--http_port={BROKER_MONITOR_PORT}",
        ],
        "ports": [
            {"name": "client", "containerPort": BROKER_CLIENT_PORT, "protocol": "TCP"},
            {"name": "monitor", "containerPort": BROKER_MONITOR_PORT, "protocol": "TCP"},
        ],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
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
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": opts.broker_storage}},
    }
    if opts.broker_storage_class is not None:
        claim_spec["storageClassName"] = opts.broker_storage_class
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(ctx, headless, labels),
            "spec": {
                "clusterIP": "None",
                "selector": selector,
                "ports": ports,
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
                "replicas": 1,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "automountServiceAccountToken": False,
                        "enableServiceLinks": False,
                        "securityContext": _pod_security(opts.uid),
                        "containers": [container],
                    },
                },
                "volumeClaimTemplates": [
                    {"metadata": {"name": "data", "labels": labels}, "spec": claim_spec}
                ],
            },
        },
    ]


def _broker_name(flow: str, run_id: str) -> str:
    # "\0" cannot start a node name a person types, and the hash covers the exact text
    return _short(physical_name("\0broker", flow=flow, run=run_id).k8s)


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
        ],
        "env": _base_env(ctx),
        "securityContext": _container_security(),
    }


def _setup_job(ctx: _Ctx) -> dict[str, Any]:
    opts = ctx.opts
    name = _short(physical_name("\0setup", flow=ctx.spec.name, run=opts.run_id).k8s)
    labels = _labels(ctx, "broker")
    labels["app.kubernetes.io/name"] = name
    labels = dict(sorted(labels.items()))
    container = _setup_container(ctx, "setup", wait_s=120)
    container["resources"] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
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
                "spec": _pod_spec(ctx, container, restart="Never", gpu=False),
            },
        },
    }


def _check_against_spec(spec: FlowSpec, opts: RenderOptions, pods: tuple[PodRequest, ...]) -> None:
    names = set(spec.names)
    for what, items in (("mig", opts.mig), ("capacity_caps", opts.capacity_caps)):
        unknown = sorted(str(n) for n, _ in items if n not in names)
        if unknown:
            raise _bad(
                "unknown-node",
                f"{what} names {unknown}, which flow {spec.name!r} does not have",
                f"name nodes as the flow declares them: {', '.join(sorted(names))}",
            )
    mig_nodes = sorted({p.node for p in pods if p.slice == "mig"})
    chosen = {n for n, _ in opts.mig}
    missing = [n for n in mig_nodes if n not in chosen]
    if missing:
        raise _bad(
            "missing-mig-choice",
            f"--gpu-mode mix: nodes {missing} take a MIG slice, but no MIG resource was chosen for them",
            "plan the flow against the cluster (vf deploy does) or pass --mig NODE=RESOURCE[@PRODUCT]",
        )
    extra = sorted(chosen - set(mig_nodes))
    if extra:
        raise _bad(
            "invalid-mig-choice",
            f"mig names {extra}, which take no MIG slice under --gpu-mode {opts.gpu_mode}",
            "a MIG slice is for a one-GPU node with gpu_memory_gib under --gpu-mode mix",
        )
    gpu_nodes = [n.name for n in spec.nodes if n.is_gpu]
    if opts.gpu_mode is GpuMode.SHARED and gpu_nodes and opts.gpu_runtime_class is None:
        raise _bad(
            "shared-needs-runtime-class",
            f"--gpu-mode shared renders GPU pods {gpu_nodes} with no GPU limit: without a runtime "
            "class nothing would give them a device",
            "pass --gpu-runtime-class (e.g. nvidia), or use --gpu-mode exclusive",
        )
    if opts.keda:
        commas = [n for n in spec.names if "," in n]
        if commas:
            raise _bad(
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

    Order: the broker's Services and StatefulSet (when no ``broker_url``), the
    setup Job, then per node in spec order its headless Service, workload,
    PodDisruptionBudget and ScaledObject. The flow must be valid
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
        gpu_node_selector=opts.gpu_node_selector,
        resources={n: dict(r) for n, r in opts.resources},
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
        match = _BROKER_URL.fullmatch(broker_url)
        assert match is not None  # RenderOptions checked it
        monitoring = opts.broker_monitoring or f"{match['host']}:{BROKER_MONITOR_PORT}"
    ctx = _Ctx(spec, opts, flow_label(spec.name), broker_url, monitoring, scaled)
    out: list[dict[str, Any]] = []
    if opts.broker_url is None:
        out.extend(_broker_objects(ctx))
    out.append(_setup_job(ctx))
    first_pod: dict[str, PodRequest] = {}
    for pod in pods:
        first_pod.setdefault(pod.node, pod)
    topo = broker_topology(spec, opts.run_id) if scaled else None
    for node, shape in zip(spec.nodes, node_shapes(spec), strict=True):
        out.extend(_node_objects(ctx, node, shape.replicas, shape.workload, first_pod[node.name]))
        if node.name in scaled:
            out.append(_scaled_object(ctx, node, topo))
    # no two objects share a sub-object: a caller may edit one, and YAML needs no aliases
    return tuple(_unshared(o) for o in out)
