"""What :func:`vfcore.runtime.manifests.render` takes besides the flow, and the run's names.

:class:`RenderOptions` (image, run, namespace, broker, GPU mode, KEDA: the
``vf deploy`` flags), each option checked with its own error id; the names and
labels every rendered object carries (:func:`flow_label`, :func:`run_selector`,
:func:`object_name`); :func:`mig_choices`, the MIG resource a mix-mode plan chose
per node. ``docs/kubernetes.md`` describes what they render to.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from vfcore.cluster import GPU_PRESENT_LABEL, Toleration
from vfcore.errors import InvalidInputError, brief
from vfcore.flow.gpu_mode import GpuMode, parse_gpu_mode
from vfcore.flow.names import physical_name
from vfcore.flow.params import MAX_REPLICAS_PER_NODE
from vfcore.placement.claims import (
    DEFAULT_DRA_DEVICE_CLASS,
    DEFAULT_DRA_DRIVER,
    DEFAULT_DRA_MIG_DEVICE_CLASS,
    GPU_TOLERATION,
    check_device_class,
)
from vfcore.placement.dra.cel import compile_selector
from vfcore.quantity import canonical_units
from vfcore.runtime.pod_options import check_pod_options
from vfcore.runtime.run_security import RunSecrets
from vfcore.runtime.topology import check_run_id
from vfcore.scaling.rule import DEFAULT_LAG_THRESHOLD, DEFAULT_MAX_REPLICAS

if TYPE_CHECKING:
    from vfcore.cluster import NodeState
    from vfcore.placement.mig import MigPlan

__all__ = [
    "BROKER_CLIENT_PORT",
    "BROKER_MONITOR_PORT",
    "BROKER_REPLICAS",
    "BROKER_URL_PATTERN",
    "DEFAULT_BROKER_IMAGE",
    "DEFAULT_FLOW_PATH",
    "DEFAULT_UID",
    "MANAGED_BY",
    "PRODUCT_LABEL",
    "ROLLOUTS",
    "WORKLOAD_NAME_MAX",
    "RenderOptions",
    "check_image_reference",
    "check_namespace",
    "flow_label",
    "mig_choices",
    "object_name",
    "render_error",
    "render_run_id",
    "run_selector",
    "short_object_name",
]

MANAGED_BY: Final = "vf"
DEFAULT_FLOW_PATH: Final = "/app/flow.py"
DEFAULT_BROKER_IMAGE: Final = "nats:2.11"
DEFAULT_UID: Final = 10001
BROKER_CLIENT_PORT: Final = 4222
BROKER_MONITOR_PORT: Final = 8222
#: Room a controller needs after a workload's name (``-<revision hash>`` on
#: StatefulSet pods is 11 characters and must fit a 63-character label value).
WORKLOAD_NAME_MAX = 52
PRODUCT_LABEL = "nvidia.com/gpu.product"
#: How many servers the in-cluster broker may run (a JetStream cluster needs a majority).
BROKER_REPLICAS: Final = (1, 3, 5)
#: The ways a running REALTIME run's workloads roll to a new version.
ROLLOUTS: Final = ("drain", "surge")

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
BROKER_URL_PATTERN = re.compile(
    r"(?:nats|tls)://(?:[^@/\s]*@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)"
    r"(?::(?P<port>\d{1,5}))?/?"
)
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>\d{1,5})")


def _port_ok(port: str | None) -> bool:
    """A URL's port (absent: the default) is a TCP port, 1 .. 65535."""
    return port is None or 0 < int(port) <= 65535


#: A container image reference as the distribution library's grammar has it
#: (``reference.ReferenceRegexp``): ``[domain[:port]/]path[:tag][@digest]``, the path
#: in lowercase letters, digits and separators; only the domain may hold capitals.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    r"(?::[\w][\w.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def render_error(rule: str, message: str, hint: str) -> InvalidInputError:
    return InvalidInputError(rule, message, hint)


def check_image_reference(image: object, what: str = "image") -> str:
    """``image`` if it is a container image reference a registry accepts.

    The grammar of the distribution library (what ``docker`` and the kubelet
    parse): ``[domain[:port]/]path[:tag][@digest]``, at most 255 characters
    in the name; the path is lowercase (``Reg/Img:1`` is refused: only a
    domain, the first component when it holds a ``.`` or ``:`` or capitals, may).

    >>> check_image_reference("registry.example:5000/video/traffic:1.2")
    'registry.example:5000/video/traffic:1.2'
    >>> check_image_reference("traffic/Detector:1")
    Traceback (most recent call last):
    ...
    vfcore.errors.InvalidInputError: invalid-image: image 'traffic/Detector:1' is not a container image reference ([registry/]path[:tag][@digest], the path in lowercase) (hint: pass --image registry/name:tag (the image `vf dockerfile FLOW` builds), e.g. registry.example/traffic:1)
    """
    match = _IMAGE_REFERENCE.fullmatch(image) if isinstance(image, str) else None
    if match is None or len(match["name"]) > 255:
        raise render_error(
            "invalid-image",
            f"{what} {brief(image)} is not a container image reference ([registry/]path[:tag]"
            "[@digest], the path in lowercase)",
            "pass --image registry/name:tag (the image `vf dockerfile FLOW` builds), e.g. "
            "registry.example/traffic:1",
        )
    return image  # type: ignore[return-value]


def check_namespace(namespace: object) -> str:
    """``namespace`` if Kubernetes accepts it as a namespace name (a DNS label).

    >>> check_namespace("video-prod")
    'video-prod'
    >>> check_namespace("Bad_NS")
    Traceback (most recent call last):
    ...
    vfcore.errors.InvalidInputError: invalid-namespace: namespace 'Bad_NS' is not a DNS label (lowercase letters, digits and '-', at most 63) (hint: pass --namespace like 'video-prod')
    """
    if not isinstance(namespace, str) or _DNS_LABEL.fullmatch(namespace) is None:
        raise render_error(
            "invalid-namespace",
            f"namespace {brief(namespace)} is not a DNS label (lowercase letters, "
            "digits and '-', at most 63)",
            "pass --namespace like 'video-prod'",
        )
    return namespace


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


def render_run_id(spec: Any) -> str:
    """The run id ``vf deploy --render-only`` uses when not given ``--run``: ``r`` and 10
    hex digits of a SHA-256 of the flow spec's canonical JSON (sorted keys, no spaces).

    The same flow renders the same bytes (GitOps diffs show only real changes); a
    changed flow (a node, a parameter, the flow type) gets another id, so its objects
    never overwrite another version's by accident. It is a valid run id
    (:func:`vfcore.runtime.topology.check_run_id`).

    >>> from vfcore import FlowSpec
    >>> spec = FlowSpec.from_dict({"name": "cams", "flow_type": "batch", "nodes": [
    ...     {"name": "src", "kind": "producer"}, {"name": "sink", "kind": "consumer",
    ...     "parents": ["src"]}]})
    >>> render_run_id(spec) == render_run_id(FlowSpec.from_json(spec.to_json()))
    True
    >>> len(render_run_id(spec)), render_run_id(spec)[0]
    (11, 'r')
    """
    canonical = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))
    return check_run_id("r" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:10])


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
    return short_object_name(physical_name(node, flow=flow, run=run_id).k8s)


def short_object_name(k8s: str) -> str:
    readable, _, digest = k8s.rpartition("-")
    if not readable[:1].isalpha():
        readable = f"vf-{readable}" if readable else "vf"
    room = WORKLOAD_NAME_MAX - len(digest) - 1
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
        products = {labels.get(h, {}).get(PRODUCT_LABEL) for h in hosts.get(flow_node, ())}
        (product,) = products if len(products) == 1 else (None,)
        out[flow_node] = (resource, product)
    return out


def _mapping_items(value: object, what: str, hint: str) -> tuple[tuple[Any, Any], ...]:
    if isinstance(value, Mapping):
        return tuple(sorted(value.items(), key=lambda kv: str(kv[0])))
    if isinstance(value, tuple) and all(isinstance(i, tuple) and len(i) == 2 for i in value):
        return tuple(sorted(value, key=lambda kv: str(kv[0])))
    raise render_error("invalid-render-option", f"{what}={brief(value)} is not a mapping", hint)


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
    With ``gpu_mode="dra"`` each GPU node's pods get a ResourceClaimTemplate:
    ``dra_device_class`` (whole GPUs) or ``dra_mig_device_class`` (a
    memory-declaring one-GPU node), selectors in ``dra_driver``'s domain, plus
    ``dra_selectors`` (node → extra CEL selectors: a product, or a remedy's pin).
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
    dra_device_class: str = DEFAULT_DRA_DEVICE_CLASS
    dra_mig_device_class: str = DEFAULT_DRA_MIG_DEVICE_CLASS
    dra_driver: str = DEFAULT_DRA_DRIVER
    dra_selectors: Any = ()
    #: the run's secret values (:class:`vfcore.runtime.run_security.RunSecrets`): with
    #: them the credentials Secret is rendered; without, objects only name it
    secret_values: Any = field(default=None, repr=False)
    keda_namespace: str = "keda"
    network_policies: bool = True
    restrict_egress: bool = False
    #: servers of the in-cluster broker: 1, or a JetStream cluster of 3 or 5 (R3 streams)
    broker_replicas: int = 1
    #: how a running REALTIME run's workloads give way to a new version: "drain", "surge"
    #: or None (Kubernetes' default rolling update); a BATCH flow refuses one
    rollout: str | None = None
    #: volumes of the workers (--mount-pvc/--mount-configmap/--mount-secret: WorkerVolume),
    #: an emptyDir's size at /scratch, the images' pull policy and secrets, an image per
    #: node, the pods' PriorityClass (vfcore.runtime.pod_options)
    volumes: Any = ()
    scratch: str | None = None
    image_pull_policy: str | None = None
    image_pull_secrets: Any = ()
    image_overrides: Any = ()
    priority_class: str | None = None

    def __post_init__(self) -> None:
        s = object.__setattr__
        check_image_reference(self.image)
        check_run_id(self.run_id)
        check_namespace(self.namespace)
        path, _, factory = str(self.flow_path).partition(":")
        if (
            not isinstance(self.flow_path, str)
            or not path.startswith("/")
            or not path.endswith(".py")
            or not self.flow_path.isprintable()
        ):
            raise render_error(
                "invalid-flow-path",
                f"flow path {brief(self.flow_path)} is not an absolute .py path inside the image "
                "(printable characters, no newline)",
                f"use the path the Dockerfile copies the flow to, e.g. {DEFAULT_FLOW_PATH}",
            )
        if factory and not factory.isidentifier():
            raise render_error(
                "invalid-flow-path",
                f"flow path {self.flow_path!r}: {factory!r} is not a function name",
                "write /app/flow.py:build",
            )
        url = (
            BROKER_URL_PATTERN.fullmatch(self.broker_url)
            if isinstance(self.broker_url, str)
            else None
        )
        if self.broker_url is not None and (url is None or not _port_ok(url["port"])):
            raise render_error(
                "invalid-broker-url",
                f"broker URL {brief(self.broker_url)} is not nats://host[:port] or "
                "tls://host[:port] (port 1 .. 65535)",
                "pass --broker nats://nats.messaging.svc:4222, or leave it out to deploy a broker",
            )
        monitoring = (
            _HOST_PORT.fullmatch(self.broker_monitoring)
            if isinstance(self.broker_monitoring, str)
            else None
        )
        if self.broker_monitoring is not None and (
            monitoring is None or not _port_ok(monitoring["port"])
        ):
            raise render_error(
                "invalid-broker-monitoring",
                f"broker monitoring endpoint {brief(self.broker_monitoring)} is not host:port "
                "(port 1 .. 65535)",
                "pass the NATS monitoring endpoint as host:8222 (KEDA reads /jsz there)",
            )
        check_image_reference(self.broker_image, "broker_image")
        try:
            ok = canonical_units("storage", self.broker_storage) > 0
        except InvalidInputError:
            ok = False
        if not ok:
            raise render_error(
                "invalid-broker-storage",
                f"broker storage {brief(self.broker_storage)} is not a positive quantity",
                "e.g. 10Gi",
            )
        if self.broker_storage_class is not None and (
            not isinstance(self.broker_storage_class, str)
            or _DNS_SUBDOMAIN.fullmatch(self.broker_storage_class) is None
        ):
            raise render_error(
                "invalid-storage-class",
                f"storage class {brief(self.broker_storage_class)} is not a DNS subdomain",
                "name an existing StorageClass, or leave it out for the default",
            )
        s(self, "gpu_mode", parse_gpu_mode(self.gpu_mode))
        if self.gpu_resource_name is not None and not _label_key_ok(self.gpu_resource_name):
            raise render_error(
                "invalid-gpu-resource-name",
                f"GPU resource {brief(self.gpu_resource_name)} is not an extended resource name",
                "e.g. nvidia.com/gpu",
            )
        if self.gpu_runtime_class is not None and (
            not isinstance(self.gpu_runtime_class, str)
            or _DNS_SUBDOMAIN.fullmatch(self.gpu_runtime_class) is None
        ):
            raise render_error(
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
            raise render_error(
                "invalid-node-selector",
                f"GPU node selector {brief(sel)} is not a (label key, label value) pair",
                "e.g. ('nvidia.com/gpu.present', 'true')",
            )
        if self.gpu_toleration is not None and not isinstance(self.gpu_toleration, Toleration):
            raise render_error(
                "invalid-render-option",
                f"gpu_toleration {brief(self.gpu_toleration)} is not a Toleration",
                "pass vfcore.Toleration(key='nvidia.com/gpu', operator='Exists', effect='NoSchedule')",
            )
        for name in ("keda", "gpu_autoscaling"):
            if not isinstance(getattr(self, name), bool):
                raise render_error(
                    "invalid-render-option",
                    f"{name}={brief(getattr(self, name))} is not a bool",
                    "pass True or False",
                )
        if not _is_int(self.max_replicas) or not 1 <= self.max_replicas <= MAX_REPLICAS_PER_NODE:
            raise render_error(
                "invalid-max-replicas",
                f"max_replicas={brief(self.max_replicas)} must be an int, 1 .. "
                f"{MAX_REPLICAS_PER_NODE:,} (the most replicas vfcore plans for one node)",
                "pass --max-replicas with a positive count, e.g. --max-replicas 10",
            )
        if not _is_int(self.lag_threshold) or not 1 <= self.lag_threshold <= 2**63 - 1:
            raise render_error(
                "invalid-lag-threshold",
                f"lag_threshold={brief(self.lag_threshold)} must be an int, 1 .. 2**63-1 "
                "(messages; KEDA reads it as a 64-bit integer)",
                "use the messages one replica may have waiting, e.g. 10",
            )
        if not _is_int(self.uid) or not 1 <= self.uid <= 2**31 - 1:
            raise render_error(
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
                raise render_error(
                    "invalid-mig-choice",
                    f"mig[{node!r}]={brief(choice)} is not (MIG resource, GPU product or None)",
                    "e.g. ('nvidia.com/mig-1g.10gb', 'NVIDIA-H100-80GB-HBM3')",
                )
            mig.append((str(node), (resource, product)))
        s(self, "mig", tuple(mig))
        caps = _mapping_items(self.capacity_caps, "capacity_caps", "{'detector': 5}")
        for node, cap in caps:
            if not _is_int(cap) or cap < 0:
                raise render_error(
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
                raise render_error(
                    "invalid-env",
                    f"env {brief(name)}={brief(value)} is not NAME=text",
                    "names are letters, digits, '_', '-', '.', not starting with a digit",
                )
            if name in _RESERVED_ENV:
                raise render_error(
                    "invalid-env",
                    f"env {name} is set by vf itself",
                    f"leave out {', '.join(sorted(_RESERVED_ENV))}",
                )
        s(self, "env", env)
        check_device_class(self.dra_device_class)
        check_device_class(self.dra_mig_device_class, "--dra-mig-device-class")
        if (
            not isinstance(self.dra_driver, str)
            or _DNS_SUBDOMAIN.fullmatch(self.dra_driver) is None
        ):
            raise render_error(
                "invalid-dra-driver",
                f"DRA driver {brief(self.dra_driver)} is not a driver name (a DNS subdomain)",
                "e.g. gpu.nvidia.com",
            )
        pins = []
        for node, exprs in _mapping_items(
            self.dra_selectors, "dra_selectors", "{'detector': ('device.attributes[...]...',)}"
        ):
            if isinstance(exprs, str) or not isinstance(exprs, tuple | list):
                raise render_error(
                    "invalid-render-option",
                    f"dra_selectors[{node!r}]={brief(exprs)} is not a list of CEL expressions",
                    "pass a tuple of selector strings per node",
                )
            for e in exprs:
                compile_selector(e)  # only what vfcore can evaluate is rendered
            pins.append((str(node), tuple(exprs)))
        s(self, "dra_selectors", tuple(pins))
        if self.secret_values is not None and not isinstance(self.secret_values, RunSecrets):
            raise render_error(
                "invalid-render-option",
                "secret_values is not a RunSecrets",
                "pass vfcore.runtime.run_security.RunSecrets(seeds=…, public_keys=…, run_key=…)",
            )
        if (
            not isinstance(self.keda_namespace, str)
            or _DNS_LABEL.fullmatch(self.keda_namespace) is None
        ):
            raise render_error(
                "invalid-namespace",
                f"KEDA namespace {brief(self.keda_namespace)} is not a DNS label",
                "pass --keda-namespace with the namespace KEDA's operator runs in, e.g. keda",
            )
        for name in ("network_policies", "restrict_egress"):
            if not isinstance(getattr(self, name), bool):
                raise render_error(
                    "invalid-render-option",
                    f"{name}={brief(getattr(self, name))} is not a bool",
                    "pass True or False",
                )
        if not _is_int(self.broker_replicas) or self.broker_replicas not in BROKER_REPLICAS:
            raise render_error(
                "invalid-broker-replicas",
                f"broker_replicas={brief(self.broker_replicas)}: the in-cluster broker runs 1 "
                "server, or a JetStream cluster of 3 or 5 (a Raft group needs a majority: "
                "2 servers survive no loss, 4 no more than 3 do)",
                "pass --broker-replicas 3 (survives the loss of one server) or leave it out",
            )
        if self.broker_replicas != 1 and self.broker_url is not None:
            raise render_error(
                "broker-replicas-external",
                f"--broker-replicas {self.broker_replicas} sizes the broker vf deploy renders, "
                f"but --broker {self.broker_url} names one that runs elsewhere",
                "drop --broker to deploy a 3-server broker with the run, or drop "
                "--broker-replicas (an external cluster's streams: vf broker-setup "
                "--stream-replicas 3)",
            )
        if self.rollout is not None and self.rollout not in ROLLOUTS:
            raise render_error(
                "invalid-rollout",
                f"rollout {brief(self.rollout)} is not one of {', '.join(ROLLOUTS)}",
                "--rollout drain (old replicas stop first) or --rollout surge (new ones start "
                "first); docs/kubernetes.md, Rollouts",
            )

        pod = check_pod_options(
            volumes=self.volumes,
            scratch=self.scratch,
            image_pull_policy=self.image_pull_policy,
            image_pull_secrets=self.image_pull_secrets,
            image_overrides=self.image_overrides,
            priority_class=self.priority_class,
        )
        for node, image in pod["image_overrides"]:
            check_image_reference(image, f"--image-override {node}: image")
        for name, value in pod.items():
            s(self, name, value)

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
            "dra_device_class": self.dra_device_class,
            "dra_mig_device_class": self.dra_mig_device_class,
            "keda_namespace": self.keda_namespace,
            "network_policies": self.network_policies,
            "restrict_egress": self.restrict_egress,
            "broker_replicas": self.broker_replicas,
            "rollout": self.rollout,
            "volumes": [v.to_dict() for v in self.volumes],
            "scratch": self.scratch,
            "image_pull_policy": self.image_pull_policy,
            "image_pull_secrets": list(self.image_pull_secrets),
            "image_overrides": dict(self.image_overrides),
            "priority_class": self.priority_class,
            "secret_values": "given" if self.secret_values is not None else None,
        }


_RESERVED_ENV = frozenset(
    {"VF_BROKER_URL", "VF_RUN", "POD_NAME", "VF_REPLICA", "VF_BROKER_NKEY_FILE", "VF_RUN_KEY_FILE"}
)
