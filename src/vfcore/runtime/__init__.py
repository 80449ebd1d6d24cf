"""Runtime: the pure decisions an executor carries out.

Loaded on first use, never by ``import vfcore`` (``vf explain`` does not need it).
:mod:`vfcore.runtime.devices` assigns GPU devices to the GPU replicas of a local run;
:mod:`vfcore.runtime.layout` lays out a whole local run (replica bounds, pods and
slots, routing per edge, devices) for the local executor to carry out;
:mod:`vfcore.runtime.topology` lists the NATS JetStream streams, subjects and
consumers of a broker run (``broker_topology``); :mod:`vfcore.runtime.broker_auth`
says what each role of a run may publish and subscribe to on the broker
(``broker_permissions``) and renders the server's ``authorization`` block; :mod:`vfcore.runtime.manifests`
renders a run's Kubernetes objects (``vfcore.render``, ``vfcore.RenderOptions``).

This package is the face the adapters import the runtime from: every name its
``__all__`` lists is public, whatever module defines it (docs/api.md, "Faces").
The rendering modules (``manifests``, ``render_options``, ``redeploy``) need the
scaling rules and the placement claims, so their names load on first use
(``__getattr__`` below): ``vf run`` and ``vf worker`` never import them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vfcore.runtime.broker_auth import (
    ADMIN_ROLE,
    SETUP_ROLE,
    BrokerPermissions,
    BrokerUser,
    broker_permissions,
    check_role,
    inbox_prefix,
    is_user_nkey,
    node_role,
    render_authorization,
    run_roles,
)
from vfcore.runtime.broker_hosting import (
    BrokerHosts,
    broker_hosts,
    broker_size_change,
)
from vfcore.runtime.delivery import (
    ONE_CONSUMER_TARGET_S,
    SHARED_START_BATCH,
    Books,
    EdgeTally,
    GroupOrigin,
    InputOrigin,
    NodeTally,
    Origin,
    SegmentOrigin,
    batch_limit,
    check_books,
    ledger_id,
    letter_id,
    output_id,
    trace_digest,
)
from vfcore.runtime.devices import (
    GPU_POLICIES,
    DeviceAssignment,
    DeviceRequest,
    GpuDevice,
    GpuPolicy,
    assign_devices,
    visible_devices,
)
from vfcore.runtime.layout import (
    DEFAULT_REALTIME_KEEP,
    LOCAL_WAIVED_REASONS,
    MAX_REALTIME_KEEP,
    ROUTINGS,
    EdgeLayout,
    LayoutOptions,
    LocalLayout,
    NodeLayout,
    PodLayout,
    Routing,
    local_layout,
    realtime_keep_of,
    runtime_join_policy,
)
from vfcore.runtime.lingering import (
    NODE_GONE,
    UNREACHABLE_TAINT,
    Lingering,
    lingering,
)
from vfcore.runtime.pod_options import (
    PULL_POLICIES,
    SCRATCH_PATH,
    VOLUME_FLAGS,
    WorkerVolume,
    check_pod_options,
    parse_volume,
)
from vfcore.runtime.references import (
    Reference,
    check_references,
    pod_references,
)
from vfcore.runtime.rollout import (
    SurgeNeed,
    surge_needs,
    surge_warning,
)
from vfcore.runtime.run_security import (
    BROKER_ROUTE_PORT,
    CONFIG_KEY,
    CREDENTIALS_DIR,
    NATS_CONFIG_DIR,
    ROUTE_PASSWORD_KEY,
    ROUTE_USER,
    RUN_KEY,
    RUN_KEY_BYTES,
    SETUP_DIR,
    BrokerCluster,
    RunSecrets,
    cluster_block,
    seed_key,
    server_config,
)
from vfcore.runtime.topology import (
    MAX_NATS_NAME,
    MAX_STREAM_REPLICAS,
    MAX_SUBJECT,
    RUN_ID_PATTERN,
    BrokerTopology,
    ConsumerConfig,
    DeadLetters,
    EdgeRoute,
    RunControl,
    StreamConfig,
    TopologyConsumer,
    TopologyOptions,
    broker_topology,
    check_run_id,
    nats_name_problem,
    nats_subject_problem,
    subject_matches,
)

if TYPE_CHECKING:  # what the type checker sees; at run time, __getattr__ below
    from vfcore.runtime.manifests import (
        CLAIM_NAME,
        WORKER_GRACE_S,
        credentials_secret_name,
        render,
        stream_replicas,
    )
    from vfcore.runtime.redeploy import (
        ObjectChange,
        RedeployChanges,
        RunPods,
        redeploy_changes,
        run_labels,
        without_run_pods,
    )
    from vfcore.runtime.render_options import (
        BROKER_CLIENT_PORT,
        BROKER_MONITOR_PORT,
        BROKER_REPLICAS,
        BROKER_URL_PATTERN,
        DEFAULT_BROKER_IMAGE,
        DEFAULT_FLOW_PATH,
        DEFAULT_UID,
        MANAGED_BY,
        PRODUCT_LABEL,
        ROLLOUTS,
        WORKLOAD_NAME_MAX,
        RenderOptions,
        check_image_reference,
        check_namespace,
        flow_label,
        mig_choices,
        object_name,
        render_error,
        render_run_id,
        run_selector,
        short_object_name,
    )

#: each lazily loaded name → the module that defines it
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        (
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
            "RenderOptions",
            "WORKLOAD_NAME_MAX",
            "check_image_reference",
            "check_namespace",
            "flow_label",
            "mig_choices",
            "object_name",
            "render_error",
            "render_run_id",
            "run_selector",
            "short_object_name",
        ),
        "vfcore.runtime.render_options",
    ),
    **dict.fromkeys(
        (
            "ObjectChange",
            "RedeployChanges",
            "RunPods",
            "redeploy_changes",
            "run_labels",
            "without_run_pods",
        ),
        "vfcore.runtime.redeploy",
    ),
    **dict.fromkeys(
        (
            "CLAIM_NAME",
            "WORKER_GRACE_S",
            "credentials_secret_name",
            "render",
            "stream_replicas",
        ),
        "vfcore.runtime.manifests",
    ),
}

__all__ = [
    "ADMIN_ROLE",
    "BROKER_CLIENT_PORT",
    "BROKER_MONITOR_PORT",
    "BROKER_REPLICAS",
    "BROKER_ROUTE_PORT",
    "BROKER_URL_PATTERN",
    "CLAIM_NAME",
    "CONFIG_KEY",
    "CREDENTIALS_DIR",
    "DEFAULT_BROKER_IMAGE",
    "DEFAULT_FLOW_PATH",
    "DEFAULT_REALTIME_KEEP",
    "DEFAULT_UID",
    "GPU_POLICIES",
    "LOCAL_WAIVED_REASONS",
    "MANAGED_BY",
    "MAX_NATS_NAME",
    "MAX_REALTIME_KEEP",
    "MAX_STREAM_REPLICAS",
    "MAX_SUBJECT",
    "NATS_CONFIG_DIR",
    "NODE_GONE",
    "ONE_CONSUMER_TARGET_S",
    "PRODUCT_LABEL",
    "PULL_POLICIES",
    "ROLLOUTS",
    "ROUTE_PASSWORD_KEY",
    "ROUTE_USER",
    "ROUTINGS",
    "RUN_ID_PATTERN",
    "RUN_KEY",
    "RUN_KEY_BYTES",
    "SCRATCH_PATH",
    "SETUP_DIR",
    "SETUP_ROLE",
    "SHARED_START_BATCH",
    "UNREACHABLE_TAINT",
    "VOLUME_FLAGS",
    "WORKER_GRACE_S",
    "WORKLOAD_NAME_MAX",
    "Books",
    "BrokerCluster",
    "BrokerHosts",
    "BrokerPermissions",
    "BrokerTopology",
    "BrokerUser",
    "ConsumerConfig",
    "DeadLetters",
    "DeviceAssignment",
    "DeviceRequest",
    "EdgeLayout",
    "EdgeRoute",
    "EdgeTally",
    "GpuDevice",
    "GpuPolicy",
    "GroupOrigin",
    "InputOrigin",
    "LayoutOptions",
    "Lingering",
    "LocalLayout",
    "NodeLayout",
    "NodeTally",
    "ObjectChange",
    "Origin",
    "PodLayout",
    "RedeployChanges",
    "Reference",
    "RenderOptions",
    "Routing",
    "RunControl",
    "RunPods",
    "RunSecrets",
    "SegmentOrigin",
    "StreamConfig",
    "SurgeNeed",
    "TopologyConsumer",
    "TopologyOptions",
    "WorkerVolume",
    "assign_devices",
    "batch_limit",
    "broker_hosts",
    "broker_permissions",
    "broker_size_change",
    "broker_topology",
    "check_books",
    "check_image_reference",
    "check_namespace",
    "check_pod_options",
    "check_references",
    "check_role",
    "check_run_id",
    "cluster_block",
    "credentials_secret_name",
    "flow_label",
    "inbox_prefix",
    "is_user_nkey",
    "ledger_id",
    "letter_id",
    "lingering",
    "local_layout",
    "mig_choices",
    "nats_name_problem",
    "nats_subject_problem",
    "node_role",
    "object_name",
    "output_id",
    "parse_volume",
    "pod_references",
    "realtime_keep_of",
    "redeploy_changes",
    "render",
    "render_authorization",
    "render_error",
    "render_run_id",
    "run_labels",
    "run_roles",
    "run_selector",
    "runtime_join_policy",
    "seed_key",
    "server_config",
    "short_object_name",
    "stream_replicas",
    "subject_matches",
    "surge_needs",
    "surge_warning",
    "trace_digest",
    "visible_devices",
    "without_run_pods",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'vfcore.runtime' has no attribute {name!r}")
    value = getattr(_load(home), name)
    globals()[name] = value
    return value


def _load(home: str) -> object:
    """Import only the module that defines a lazy name."""
    if home == "vfcore.runtime.render_options":
        from vfcore.runtime import render_options

        return render_options
    if home == "vfcore.runtime.redeploy":
        from vfcore.runtime import redeploy

        return redeploy
    from vfcore.runtime import manifests

    return manifests


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
