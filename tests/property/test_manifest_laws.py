"""Laws of vfcore.runtime.manifests.render over random valid flows and options.

Every rendered object validates offline against the official schemas of a
Kubernetes version between 1.31 and 1.36 in strict mode (kubernetes-validate's
bundled schemas; unknown fields refused) and every ScaledObject against KEDA's
CRD; rendering is deterministic (the same YAML bytes twice, and for equal
options built in another order); names are unique per kind and short DNS labels;
every object carries the run's labels; every node has exactly the workload and
replica count ``node_shapes`` gives it; every pod template is restricted and
tokenless; a ScaledObject keeps ``nb_tasks <= min <= max``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tests.manifest_schemas import KUBE_VERSIONS, check_any
from tests.property.strategies import names as node_names
from tests.property.strategies import valid_specs
from vfcore import FlowSpec, NodeSpec, node_shapes, pod_requests, validate
from vfcore.runtime.manifests import RenderOptions, render, run_selector

run_ids = st.from_regex(r"\A[A-Za-z0-9](?:[A-Za-z0-9_-]{0,10}[A-Za-z0-9])?\Z")


@st.composite
def cases(draw: st.DrawFn) -> tuple[FlowSpec, dict[str, Any]]:
    spec = draw(valid_specs(max_producers=2, max_processors=5, max_consumers=2))
    mode = draw(st.sampled_from(["exclusive", "shared", "mix"]))
    keda = spec.flow_type == "realtime" and draw(st.booleans())
    issues = validate(spec, gpu_mode=mode, autoscaling=keda)
    assume(not any(i.is_error for i in issues))
    kw: dict[str, Any] = {
        "image": draw(st.sampled_from(["reg.example/flow:1", "flow@sha256:" + "a" * 64])),
        "run_id": draw(run_ids),
        "namespace": draw(st.sampled_from(["default", "video-prod"])),
        "gpu_mode": mode,
        "keda": keda,
        "gpu_autoscaling": draw(st.booleans()),
        "max_replicas": draw(st.integers(1, 20)),
    }
    if mode == "shared" or draw(st.booleans()):
        kw["gpu_runtime_class"] = "nvidia"
    if draw(st.booleans()):
        kw["broker_url"] = "nats://nats.messaging.svc:4222"
    if mode == "mix":
        mig_nodes = sorted({p.node for p in pod_requests(spec, gpu_mode="mix") if p.slice == "mig"})
        kw["mig"] = {
            n: ("nvidia.com/mig-1g.10gb", draw(st.sampled_from([None, "NVIDIA-H100-80GB-HBM3"])))
            for n in mig_nodes
        }
    if keda and draw(st.booleans()):
        kw["capacity_caps"] = {n.name: draw(st.integers(0, 8)) for n in spec.nodes}
    event(f"{spec.flow_type} {mode}{' keda' if keda else ''}")
    return spec, kw


def _yaml(objs: tuple[dict[str, Any], ...]) -> bytes:
    return "".join(
        "---\n" + yaml.safe_dump(o, sort_keys=False, default_flow_style=False) for o in objs
    ).encode()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(case=cases(), version=st.sampled_from(KUBE_VERSIONS))
def test_every_rendered_object_validates_and_the_render_is_deterministic(
    case: tuple[FlowSpec, dict[str, Any]], version: str
) -> None:
    spec, kw = case
    objs = render(spec, RenderOptions(**kw))
    for obj in objs:
        check_any(obj, version)
    # the same bytes again, and from options whose mappings came in the other order
    again = dict(kw)
    for key in ("mig", "capacity_caps"):
        if key in again:
            again[key] = dict(reversed(list(again[key].items())))
    assert _yaml(render(spec, RenderOptions(**again))) == _yaml(objs)

    names = Counter((o["kind"], o["metadata"]["name"]) for o in objs)
    assert max(names.values()) == 1
    selector = dict(p.split("=") for p in run_selector(spec.name, kw["run_id"]).split(","))
    for obj in objs:
        assert selector.items() <= obj["metadata"]["labels"].items()
        assert obj["metadata"]["namespace"] == kw["namespace"]
        name = obj["metadata"]["name"]
        assert len(name) <= 55 and name[0].isalpha()

    workloads = {
        o["metadata"]["annotations"]["vfcore.io/node-name"]: o
        for o in objs
        if o["kind"] in ("Job", "Deployment", "StatefulSet")
        and "vfcore.io/node-name" in o["metadata"]["annotations"]
    }
    scaled = {
        o["metadata"]["annotations"]["vfcore.io/node-name"]: o
        for o in objs
        if o["kind"] == "ScaledObject"
    }
    for shape in node_shapes(spec):
        obj = workloads[shape.name]
        assert obj["kind"].lower() == shape.workload
        if shape.workload == "job":
            assert obj["spec"]["completions"] == shape.replicas
        elif shape.name in scaled:
            assert "replicas" not in obj["spec"]
        else:
            assert obj["spec"]["replicas"] == shape.replicas
    event(f"ScaledObjects: {min(len(scaled), 2)}{'+' if len(scaled) >= 2 else ''}")
    for node, so in scaled.items():
        assert kw["keda"]
        nb = spec.node(node).nb_tasks
        assert so["spec"]["minReplicaCount"] == nb <= so["spec"]["maxReplicaCount"]
        assert so["spec"]["maxReplicaCount"] <= max(nb, kw["max_replicas"])
        assert len(so["spec"]["triggers"]) == len(spec.node(node).parents)

    for obj in objs:
        if "template" not in obj["spec"]:
            continue
        pod = obj["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        for c in pod["containers"] + pod.get("initContainers", []):
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


@st.composite
def scalable_flows(draw: st.DrawFn) -> tuple[FlowSpec, dict[str, Any]]:
    """REALTIME chains and fans of processors KEDA may scale (the random flows rarely have one)."""
    names = draw(st.lists(node_names, min_size=5, max_size=5, unique=True))
    nodes = [NodeSpec(names[0], "producer")]
    for i in range(1, draw(st.integers(2, 4))):
        parent = draw(st.sampled_from([n.name for n in nodes]))
        gpu = draw(st.booleans())
        nodes.append(
            NodeSpec(
                names[i],
                "processor",
                (parent,),
                nb_tasks=draw(st.integers(1, 5)),
                device_type="gpu" if gpu else "cpu",
                requests=draw(st.sampled_from([(), (("cpu", "500m"), ("memory", "1Gi"))])),
            )
        )
    nodes.append(NodeSpec(names[4], "consumer", (nodes[-1].name,)))
    spec = FlowSpec(draw(node_names), "realtime", tuple(nodes))
    kw: dict[str, Any] = {
        "image": "reg.example/flow:2",
        "run_id": draw(run_ids),
        "keda": True,
        "gpu_autoscaling": draw(st.booleans()),
        "max_replicas": draw(st.integers(1, 20)),
        "lag_threshold": draw(st.integers(1, 100)),
        "capacity_caps": draw(
            st.dictionaries(st.sampled_from([n.name for n in nodes]), st.integers(0, 8))
        ),
    }
    if draw(st.booleans()):
        kw["broker_url"] = "nats://nats.example:4222"
    return spec, kw


@settings(max_examples=60, deadline=None)
@given(case=scalable_flows(), version=st.sampled_from(KUBE_VERSIONS))
def test_scaled_objects_validate_and_follow_the_replica_rules(
    case: tuple[FlowSpec, dict[str, Any]], version: str
) -> None:
    spec, kw = case
    objs = render(spec, RenderOptions(**kw))
    for obj in objs:
        check_any(obj, version)
    scaled = [o for o in objs if o["kind"] == "ScaledObject"]
    expected = [
        n.name for n in spec.nodes if n.is_processor and (not n.is_gpu or kw["gpu_autoscaling"])
    ]
    assert [o["metadata"]["annotations"]["vfcore.io/node-name"] for o in scaled] == expected
    event(f"ScaledObjects: {len(scaled)}")
    caps = kw["capacity_caps"]
    for so in scaled:
        node = spec.node(so["metadata"]["annotations"]["vfcore.io/node-name"])
        ceiling = min(kw["max_replicas"], caps.get(node.name, kw["max_replicas"]))
        assert so["spec"]["minReplicaCount"] == node.nb_tasks
        assert so["spec"]["maxReplicaCount"] == max(node.nb_tasks, ceiling)
        (trigger,) = so["spec"]["triggers"]
        assert trigger["metadata"]["lagThreshold"] == str(kw["lag_threshold"])
        assert so["spec"]["fallback"]["behavior"] == "currentReplicas"
