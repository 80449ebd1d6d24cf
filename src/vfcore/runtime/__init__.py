"""Runtime: the pure decisions an executor carries out.

Loaded on first use, never by ``import vfcore`` (``vf explain`` does not need it).
:mod:`vfcore.runtime.devices` assigns GPU devices to the GPU replicas of a local run;
:mod:`vfcore.runtime.layout` lays out a whole local run (replica bounds, pods and
slots, routing per edge, devices) for the local executor to carry out;
:mod:`vfcore.runtime.topology` lists the NATS JetStream streams, subjects and
consumers of a broker run (``broker_topology``); :mod:`vfcore.runtime.broker_auth`
says what each role of a run may publish and subscribe to on the broker
(``broker_permissions``) and renders the server's ``authorization`` block; :mod:`vfcore.runtime.manifests`
renders a run's Kubernetes objects (``vfcore.render``, ``vfcore.RenderOptions``,
loaded on first use: it needs the scaling rules, so this package does not
import it).
"""

from vfcore.runtime.broker_auth import (
    ADMIN_ROLE,
    SETUP_ROLE,
    BrokerPermissions,
    BrokerUser,
    broker_permissions,
    inbox_prefix,
    node_role,
    render_authorization,
    run_roles,
)
from vfcore.runtime.broker_hosting import BrokerHosts, broker_hosts, broker_size_change
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
    LOCAL_WAIVED_REASONS,
    ROUTINGS,
    EdgeLayout,
    LayoutOptions,
    LocalLayout,
    NodeLayout,
    PodLayout,
    Routing,
    local_layout,
)
from vfcore.runtime.rollout import SurgeNeed, surge_needs, surge_warning
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

__all__ = [
    "ADMIN_ROLE",
    "GPU_POLICIES",
    "LOCAL_WAIVED_REASONS",
    "MAX_NATS_NAME",
    "MAX_STREAM_REPLICAS",
    "MAX_SUBJECT",
    "ROUTINGS",
    "RUN_ID_PATTERN",
    "SETUP_ROLE",
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
    "GpuDevice",
    "GpuPolicy",
    "LayoutOptions",
    "LocalLayout",
    "NodeLayout",
    "PodLayout",
    "Routing",
    "RunControl",
    "StreamConfig",
    "SurgeNeed",
    "TopologyConsumer",
    "TopologyOptions",
    "assign_devices",
    "broker_hosts",
    "broker_permissions",
    "broker_size_change",
    "broker_topology",
    "check_run_id",
    "inbox_prefix",
    "local_layout",
    "nats_name_problem",
    "nats_subject_problem",
    "node_role",
    "render_authorization",
    "run_roles",
    "subject_matches",
    "surge_needs",
    "surge_warning",
    "visible_devices",
]
