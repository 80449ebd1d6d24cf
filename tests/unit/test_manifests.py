"""Tables for vfcore.runtime.manifests.render: one rule per test (docs/kubernetes.md)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from tests.manifest_schemas import KUBE_VERSIONS, bundled_versions, check_any, check_keda
from tests.support.manifests import (
    GPU,
    PIPE_BATCH,
    PIPE_RT,
    P,
    by_kind,
    of_node,
    opts,
    pod_spec,
    spec_of,
    worker,
)
from vfcore import (
    FlowSpec,
    InvalidFlowError,
    InvalidInputError,
    NodeSpec,
    Toleration,
    broker_topology,
    fallback_for_unknown,
    node_shapes,
)
from vfcore.runtime.manifests import (
    flow_label,
    object_name,
    render,
    run_selector,
)

FINITE = NodeSpec("files", "producer", finite=True)


# -- workloads ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flow", "node", "kind", "indexed", "replicas"),
    [
        (PIPE_BATCH, "cam", "Job", False, 1),
        (PIPE_BATCH, "det", "Job", True, 3),
        (PIPE_BATCH, "one", "Job", False, 1),
        (PIPE_BATCH, "trk", "Job", True, 2),
        (PIPE_BATCH, "out", "Job", False, 1),
        (PIPE_RT, "cam", "Deployment", None, 1),
        (PIPE_RT, "det", "Deployment", None, 3),
        (PIPE_RT, "trk", "StatefulSet", None, 2),
        (PIPE_RT, "out", "Deployment", None, 1),
        (
            spec_of("realtime", FINITE, NodeSpec("o", "consumer", ("files",))),
            "files",
            "Job",
            False,
            1,
        ),
    ],
)
def test_workload_kind_and_replicas(
    flow: FlowSpec, node: str, kind: str, indexed: bool | None, replicas: int
) -> None:
    objs = render(flow, opts())
    (obj,) = [o for o in of_node(objs, node) if o["kind"] not in ("PodDisruptionBudget", "Service")]
    assert obj["kind"] == kind
    shape = {s.name: s for s in node_shapes(flow)}[node]
    assert obj["kind"].lower() == shape.workload
    if kind == "Job":
        assert obj["spec"]["completions"] == obj["spec"]["parallelism"] == replicas
        assert (obj["spec"].get("completionMode") == "Indexed") is indexed
        assert pod_spec(obj)["restartPolicy"] == "Never"
    else:
        assert obj["spec"]["replicas"] == replicas
        assert (
            obj["spec"]["selector"]["matchLabels"].items()
            <= obj["spec"]["template"]["metadata"]["labels"].items()
        )


def test_a_statefulset_has_its_headless_service_first() -> None:
    objs = render(PIPE_RT, opts())
    (svc, sts, pdb) = of_node(objs, "trk")
    assert (svc["kind"], sts["kind"], pdb["kind"]) == (
        "Service",
        "StatefulSet",
        "PodDisruptionBudget",
    )
    assert svc["spec"]["clusterIP"] == "None"
    assert sts["spec"]["serviceName"] == svc["metadata"]["name"]
    assert svc["spec"]["selector"] == sts["spec"]["selector"]["matchLabels"]
    assert sts["spec"]["podManagementPolicy"] == "Parallel"


# -- the worker container -------------------------------------------------------


def test_the_worker_runs_vf_worker_with_the_contract_env() -> None:
    objs = render(PIPE_BATCH, opts(run_id="run-7", flow_path="/app/pipe.py"))
    c = worker(of_node(objs, "det", "Job")[0])
    assert c["command"] == ["vf"]
    assert c["args"] == [
        "worker", "/app/pipe.py", "--node", "det", "--broker", "$(VF_BROKER_URL)",
        "--run", "run-7", "--no-create",
    ]  # fmt: skip
    env = {e["name"]: e for e in c["env"]}
    assert env["VF_RUN"]["value"] == "run-7"
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["VF_BROKER_URL"]["value"].startswith("nats://")
    assert c["image"] == "registry.example/demo:1"
    (init,) = pod_spec(of_node(objs, "det", "Job")[0])["initContainers"]
    assert init["args"] == [
        "broker-setup", "/app/pipe.py", "--broker", "$(VF_BROKER_URL)", "--run", "run-7",
        "--wait", "300",
    ]  # fmt: skip
    base = [e for e in c["env"] if e["name"] not in ("VF_BROKER_NKEY_FILE", "VF_RUN_KEY_FILE")]
    assert init["env"][: len(base)] == base and init["image"] == c["image"]
    assert "resources" not in init  # the pod requests what the planner packed
    # each container sees its own role's key and the run key, by file, never by value
    assert env["VF_BROKER_NKEY_FILE"]["value"] == "/etc/vf/credentials/node.nk"
    assert env["VF_RUN_KEY_FILE"]["value"] == "/etc/vf/credentials/run-key"
    init_env = {e["name"]: e.get("value") for e in init["env"]}
    assert init_env["VF_BROKER_NKEY_FILE"] == "/etc/vf/setup/setup.nk"
    assert init_env["VF_RUN_KEY_FILE"] == "/etc/vf/setup/run-key"


def test_every_worker_pod_ensures_the_topology_first_and_only_workers_do() -> None:
    objs = render(PIPE_RT, opts())
    for o in objs:
        if "template" not in o["spec"]:
            continue
        init = pod_spec(o).get("initContainers")
        if o["metadata"]["labels"]["app.kubernetes.io/component"] == "broker":
            assert init is None
        else:
            assert [i["args"][0] for i in init] == ["broker-setup"]


def test_extra_env_reaches_every_worker_and_reserved_names_are_refused() -> None:
    objs = render(PIPE_BATCH, opts(env={"LOG_LEVEL": "debug"}))
    for job in of_node(objs, "det", "Job") + of_node(objs, "out", "Job"):
        assert {"name": "LOG_LEVEL", "value": "debug"} in worker(job)["env"]
    with pytest.raises(InvalidInputError) as err:
        opts(env={"VF_RUN": "x"})
    assert err.value.rule == "invalid-env"


# -- GPU modes ------------------------------------------------------------------


def test_exclusive_gpu_pods_get_limits_selector_toleration() -> None:
    objs = render(GPU, opts(gpu_runtime_class="nvidia"))
    det = of_node(objs, "det", "Job")[0]
    assert worker(det)["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert pod_spec(det)["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod_spec(det)["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert pod_spec(det)["runtimeClassName"] == "nvidia"
    pose = of_node(objs, "pose", "Job")[0]
    assert worker(pose)["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    cpu = of_node(objs, "out", "Job")[0]
    assert "resources" not in worker(cpu)
    assert {"nodeSelector", "tolerations", "runtimeClassName"}.isdisjoint(pod_spec(cpu))


def test_gpu_resource_name_selector_and_toleration_options() -> None:
    tol = Toleration(key="gpu-pool", operator="Equal", value="a", effect="NoExecute")
    objs = render(
        GPU,
        opts(
            gpu_resource_name="amd.com/gpu", gpu_node_selector=("pool", "gpu"), gpu_toleration=tol
        ),
    )
    det = of_node(objs, "det", "Job")[0]
    assert worker(det)["resources"]["limits"] == {"amd.com/gpu": "2"}
    assert pod_spec(det)["nodeSelector"] == {"pool": "gpu"}
    assert pod_spec(det)["tolerations"] == [
        {"key": "gpu-pool", "operator": "Equal", "value": "a", "effect": "NoExecute"}
    ]
    assert "runtimeClassName" not in pod_spec(det)


def test_shared_mode_renders_no_gpu_limit_and_needs_a_runtime_class() -> None:
    objs = render(GPU, opts(gpu_mode="shared", gpu_runtime_class="nvidia"))
    for node in ("det", "pose"):
        job = of_node(objs, node, "Job")[0]
        assert "limits" not in worker(job).get("resources", {})
        assert pod_spec(job)["runtimeClassName"] == "nvidia"
        assert pod_spec(job)["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    with pytest.raises(InvalidInputError) as err:
        render(GPU, opts(gpu_mode="shared"))
    assert err.value.rule == "shared-needs-runtime-class"
    assert "det" in err.value.message and "pose" in err.value.message
    cpu_only = spec_of("batch", P, NodeSpec("o", "consumer", ("cam",)))
    assert render(cpu_only, opts(gpu_mode="shared"))  # nothing to inject: no class needed


def test_mix_mode_requests_the_chosen_mig_resource_and_product() -> None:
    mig = {"pose": ("nvidia.com/mig-1g.10gb", "NVIDIA-A100-SXM4-80GB")}
    objs = render(GPU, opts(gpu_mode="mix", mig=mig))
    pose = of_node(objs, "pose", "Job")[0]
    assert worker(pose)["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    assert pod_spec(pose)["nodeSelector"] == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    }
    det = of_node(objs, "det", "Job")[0]  # whole cards stay whole in mix mode
    assert worker(det)["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    no_product = render(GPU, opts(gpu_mode="mix", mig={"pose": "nvidia.com/mig-2g.20gb"}))
    assert pod_spec(of_node(no_product, "pose", "Job")[0])["nodeSelector"] == {
        "nvidia.com/gpu.present": "true"
    }


@pytest.mark.parametrize(
    ("kw", "rule"),
    [
        ({"gpu_mode": "mix"}, "missing-mig-choice"),
        (
            {"gpu_mode": "mix", "mig": {"pose": "nvidia.com/mig-1g.10gb", "det": "x.io/y"}},
            "invalid-mig-choice",
        ),
        ({"mig": {"pose": "nvidia.com/mig-1g.10gb"}}, "invalid-mig-choice"),
        ({"gpu_mode": "mix", "mig": {"ghost": "nvidia.com/mig-1g.10gb"}}, "unknown-node"),
        ({"gpu_mode": "mix", "mig": {"pose": ("not a resource", None)}}, "invalid-mig-choice"),
    ],
)
def test_mix_choices_are_checked(kw: dict[str, Any], rule: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        render(GPU, opts(**kw))
    assert err.value.rule == rule


# -- requests and PDBs ----------------------------------------------------------


def test_requests_come_from_the_node_and_from_overrides() -> None:
    flow = spec_of(
        "batch",
        P,
        NodeSpec("det", "processor", ("cam",), requests=(("cpu", "1500m"), ("memory", "2Gi"))),
        NodeSpec("out", "consumer", ("det",)),
    )
    objs = render(flow, opts())
    assert worker(of_node(objs, "det", "Job")[0])["resources"] == {
        "requests": {"cpu": "1500m", "memory": "2Gi"}
    }
    objs = render(flow, opts(resources={"det": {"cpu": "2"}, "out": {"memory": "512Mi"}}))
    assert worker(of_node(objs, "det", "Job")[0])["resources"]["requests"] == {
        "cpu": "2",
        "memory": "2Gi",
    }
    assert worker(of_node(objs, "out", "Job")[0])["resources"]["requests"] == {"memory": "512Mi"}
    with pytest.raises(InvalidInputError) as err:
        render(flow, opts(resources={"ghost": {"cpu": "1"}}))
    assert err.value.rule == "unknown-node"


@pytest.mark.parametrize(
    ("flow", "node", "budget"),
    [
        (PIPE_BATCH, "det", {"minAvailable": 2}),
        (PIPE_BATCH, "trk", {"minAvailable": 1}),
        (PIPE_RT, "det", {"maxUnavailable": 1}),
        (PIPE_RT, "trk", {"maxUnavailable": 1}),
        (PIPE_RT, "one", None),
        (PIPE_BATCH, "cam", None),
    ],
)
def test_a_pdb_per_multi_replica_node(flow: FlowSpec, node: str, budget: dict | None) -> None:
    objs = render(flow, opts())
    pdbs = of_node(objs, node, "PodDisruptionBudget")
    if budget is None:
        assert pdbs == []
        return
    (pdb,) = pdbs
    (workload,) = [
        o for o in of_node(objs, node) if o["kind"] in ("Job", "Deployment", "StatefulSet")
    ]
    assert {k: v for k, v in pdb["spec"].items() if k != "selector"} == budget
    assert (
        pdb["spec"]["selector"]["matchLabels"].items()
        <= workload["spec"]["template"]["metadata"]["labels"].items()
    )


# -- labels, names, security ----------------------------------------------------


def test_every_object_carries_the_run_labels_and_namespace() -> None:
    flow = replace(PIPE_RT, name="Traffic Cams")
    objs = render(flow, opts(namespace="video", run_id="R_2", keda=True))
    label = flow_label("Traffic Cams")
    selector = dict(p.split("=") for p in run_selector("Traffic Cams", "R_2").split(","))
    for o in objs:
        labels = o["metadata"]["labels"]
        assert o["metadata"]["namespace"] == "video"
        assert selector.items() <= labels.items()
        assert labels["app.kubernetes.io/part-of"] == labels["vfcore.io/flow"] == label
        assert labels["app.kubernetes.io/instance"] == "R_2"
        assert labels["app.kubernetes.io/component"] in (
            "producer",
            "processor",
            "consumer",
            "broker",
            "network",
        )
        node = o["metadata"]["annotations"].get("vfcore.io/node-name")
        if node is not None:
            assert labels["app.kubernetes.io/name"] == object_name("Traffic Cams", "R_2", node)
            assert labels["vfcore.io/node"]
            component = {"cam": "producer", "out": "consumer"}.get(node, "processor")
            assert labels["app.kubernetes.io/component"] == component
        if "template" in o["spec"]:
            assert selector.items() <= o["spec"]["template"]["metadata"]["labels"].items()


def test_names_are_short_dns_labels_and_distinct() -> None:
    long_a, long_b = "x" * 70 + "a", "x" * 70 + "b"
    flow = spec_of(
        "realtime",
        NodeSpec("0cam", "producer"),
        NodeSpec(long_a, "processor", ("0cam",), nb_tasks=2, partition_by="trace_id"),
        NodeSpec(long_b, "processor", ("0cam",)),
        NodeSpec("a.b", "consumer", (long_a,)),
        NodeSpec("a_b", "consumer", (long_b,)),
        name="9lives",
    )
    objs = render(flow, opts())
    names = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert len(names) == len(objs)
    for _, name in names:
        assert len(name) <= 52 and name[0].isalpha() and name == name.lower()


def test_pods_are_restricted_and_get_no_token() -> None:
    objs = render(GPU, opts(gpu_runtime_class="nvidia"))
    templates = [pod_spec(o) for o in objs if "template" in o["spec"]]
    assert len(templates) == 1 + 1 + 4  # broker, setup Job, four nodes
    for spec in templates:
        assert spec["automountServiceAccountToken"] is False
        pod_sc = spec["securityContext"]
        assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] == 10001
        assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"] == {"drop": ["ALL"]}
            assert sc["runAsNonRoot"] is True
            assert "privileged" not in sc


# -- the broker -----------------------------------------------------------------


def test_no_broker_url_renders_a_jetstream_server() -> None:
    objs = render(
        PIPE_BATCH, opts(namespace="video", broker_storage="5Gi", broker_storage_class="fast")
    )
    objs = tuple(o for o in objs if o["kind"] != "NetworkPolicy")
    head, client, sts = objs[:3]
    assert (head["kind"], client["kind"], sts["kind"]) == ("Service", "Service", "StatefulSet")
    assert (
        head["spec"]["clusterIP"] == "None"
        and sts["spec"]["serviceName"] == head["metadata"]["name"]
    )
    (nats,) = pod_spec(sts)["containers"]
    assert nats["image"].startswith("nats:")
    # everything is in its configuration file, from the run's Secret: nothing on the command line
    assert nats["args"] == ["-c", "/etc/nats/nats.conf"]
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert claim["spec"]["storageClassName"] == "fast"
    url = f"nats://{client['metadata']['name']}.video.svc:4222"
    for o in objs[3:]:
        if o["kind"] == "Job":
            assert {"name": "VF_BROKER_URL", "value": url} in worker(o)["env"]
    assert all(o["metadata"]["labels"]["app.kubernetes.io/component"] == "broker" for o in objs[:4])


def test_a_broker_url_renders_no_broker() -> None:
    objs = render(PIPE_BATCH, opts(broker_url="nats://nats.messaging:4222"))
    assert not by_kind(objs, "StatefulSet") and not by_kind(objs, "Service")
    (_workers,) = by_kind(objs, "NetworkPolicy")  # no broker of ours: no policy for it
    setup = objs[1]
    assert setup["kind"] == "Job" and worker(setup)["args"][:2] == ["broker-setup", "/app/flow.py"]
    for job in by_kind(objs, "Job"):
        assert {"name": "VF_BROKER_URL", "value": "nats://nats.messaging:4222"} in worker(job)[
            "env"
        ]


# -- KEDA -----------------------------------------------------------------------

RT = spec_of(
    "realtime",
    NodeSpec("a", "producer"),
    NodeSpec("b", "producer"),
    NodeSpec("det", "processor", ("a",), nb_tasks=2),
    NodeSpec("mix", "processor", ("det", "b"), nb_tasks=3, partition_by="trace_id"),
    NodeSpec("gpu", "processor", ("det",), device_type="gpu"),
    NodeSpec("lone", "one-task-processor", ("det",)),
    NodeSpec("out", "consumer", ("mix", "gpu", "lone"), join_policy=None),
)


def test_a_scaled_object_per_eligible_realtime_processor() -> None:
    objs = render(RT, opts(keda=True))
    scaled = [
        o["metadata"]["annotations"]["vfcore.io/node-name"] for o in by_kind(objs, "ScaledObject")
    ]
    assert scaled == ["det"]  # partitioned, GPU, one-task, producers and consumers stay fixed
    objs = render(RT, opts(keda=True, gpu_autoscaling=True))
    scaled = [
        o["metadata"]["annotations"]["vfcore.io/node-name"] for o in by_kind(objs, "ScaledObject")
    ]
    assert scaled == ["det", "gpu"]
    assert all("--scalable" in worker(o)["args"] for o in objs if o["kind"] == "Deployment")
    assert render(RT, opts()) and not by_kind(render(RT, opts()), "ScaledObject")


def test_scaled_object_triggers_counts_and_fallback() -> None:
    flow = spec_of(
        "realtime",
        NodeSpec("a", "producer"),
        NodeSpec("b", "producer"),
        NodeSpec("j", "processor", ("a", "b")),  # a one-replica join: not scaled
        NodeSpec("det", "processor", ("a",), nb_tasks=2),
        NodeSpec("out", "consumer", ("det", "j")),
    )
    objs = render(flow, opts(keda=True, broker_url="nats://nats.example:4222", lag_threshold=25))
    (so,) = by_kind(objs, "ScaledObject")
    check_keda(so)
    topo = broker_topology(flow, "r1")
    edge = topo.edge("a", "det")
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "nats-jetstream"
    assert trigger["metadata"] == {
        "natsServerMonitoringEndpoint": "nats.example:8222",
        "account": "$G",
        "stream": edge.stream,
        "consumer": edge.consumers[0].name,
        "lagThreshold": "25",
        "activationLagThreshold": "0",
        "useHttps": "false",
    }
    assert so["spec"]["minReplicaCount"] == 2
    assert so["spec"]["maxReplicaCount"] == 10
    assert so["spec"]["fallback"] == fallback_for_unknown(min_replicas=2).to_dict()
    (dep,) = of_node(objs, "det", "Deployment")
    assert so["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": dep["metadata"]["name"],
    }
    assert "replicas" not in dep["spec"]  # the HPA owns it


def test_joins_are_never_scaled_so_a_scaled_object_has_its_one_parents_trigger() -> None:
    flow = spec_of(
        "realtime",
        NodeSpec("a", "producer"),
        NodeSpec("b", "producer"),
        NodeSpec("m", "processor", ("a", "b")),
        NodeSpec("c", "processor", ("m",)),
        NodeSpec("out", "consumer", ("c",)),
    )
    objs = render(flow, opts(keda=True))
    (so,) = by_kind(objs, "ScaledObject")
    assert so["metadata"]["annotations"]["vfcore.io/node-name"] == "c"
    (trigger,) = so["spec"]["triggers"]
    assert trigger["metadata"]["stream"] == broker_topology(flow, "r1").edge("m", "c").stream


@pytest.mark.parametrize(
    ("nb", "max_replicas", "cap", "expected"),
    [
        (2, 10, None, 10),
        (2, 10, 5, 5),
        (2, 3, 5, 3),
        (2, 10, 1, 2),  # never below nb_tasks
        (4, 2, None, 4),
        (1, 1, 0, 1),
    ],
)
def test_max_replicas_is_the_smaller_of_flag_and_capacity_never_below_nb_tasks(
    nb: int, max_replicas: int, cap: int | None, expected: int
) -> None:
    flow = spec_of(
        "realtime",
        P,
        NodeSpec("det", "processor", ("cam",), nb_tasks=nb),
        NodeSpec("out", "consumer", ("det",)),
    )
    caps = {} if cap is None else {"det": cap}
    (so,) = by_kind(
        render(flow, opts(keda=True, max_replicas=max_replicas, capacity_caps=caps)), "ScaledObject"
    )
    assert so["spec"]["maxReplicaCount"] == expected
    assert so["spec"]["minReplicaCount"] == nb
    check_keda(so)


def test_keda_on_a_batch_flow_is_refused_at_render_time() -> None:
    with pytest.raises(InvalidFlowError) as err:
        render(PIPE_BATCH, opts(keda=True))
    assert [i.rule for i in err.value.issues] == ["autoscaling-batch-flow"]


def test_the_monitoring_endpoint_defaults_to_the_in_cluster_broker() -> None:
    objs = render(RT, opts(keda=True, namespace="ns1"))
    (so,) = by_kind(objs, "ScaledObject")
    client = by_kind(objs, "Service")[1]["metadata"]["name"]
    assert (
        so["spec"]["triggers"][0]["metadata"]["natsServerMonitoringEndpoint"]
        == f"{client}.ns1.svc:8222"
    )
    (so,) = by_kind(
        render(RT, opts(keda=True, broker_monitoring="mon.example:9000")), "ScaledObject"
    )
    assert (
        so["spec"]["triggers"][0]["metadata"]["natsServerMonitoringEndpoint"] == "mon.example:9000"
    )


# -- options --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "rule"),
    [
        ({"image": ""}, "invalid-image"),
        ({"image": "a b"}, "invalid-image"),
        ({"run_id": "a.b"}, "invalid-run-id"),
        ({"namespace": "Video"}, "invalid-namespace"),
        ({"flow_path": "flow.py"}, "invalid-flow-path"),
        ({"flow_path": "/app/flow.txt"}, "invalid-flow-path"),
        ({"flow_path": "/app/flow.py:1x"}, "invalid-flow-path"),
        ({"broker_url": "http://x:4222"}, "invalid-broker-url"),
        ({"broker_url": "nats://"}, "invalid-broker-url"),
        ({"broker_monitoring": "http://x:8222"}, "invalid-broker-monitoring"),
        ({"broker_storage": "-1Gi"}, "invalid-broker-storage"),
        ({"broker_storage": "lots"}, "invalid-broker-storage"),
        ({"broker_storage_class": "Fast!"}, "invalid-storage-class"),
        ({"gpu_mode": "whole"}, "invalid-gpu-mode"),
        ({"gpu_resource_name": "nvidia.com/"}, "invalid-gpu-resource-name"),
        ({"gpu_runtime_class": "NVIDIA"}, "invalid-runtime-class"),
        ({"gpu_node_selector": ("a",)}, "invalid-node-selector"),
        ({"gpu_node_selector": ("a", "b c")}, "invalid-node-selector"),
        ({"max_replicas": 0}, "invalid-max-replicas"),
        ({"max_replicas": True}, "invalid-max-replicas"),
        ({"lag_threshold": 0}, "invalid-lag-threshold"),
        ({"uid": 0}, "invalid-uid"),
        ({"capacity_caps": {"det": -1}}, "invalid-capacity-cap"),
        ({"capacity_caps": [1, 2]}, "invalid-render-option"),
        ({"keda": "yes"}, "invalid-render-option"),
        ({"env": {"1X": "a"}}, "invalid-env"),
    ],
)
def test_bad_options_are_refused_with_their_rule(kw: dict[str, Any], rule: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        opts(**kw)
    assert err.value.rule == rule
    assert err.value.hint


def test_options_are_hashable_and_mappings_order_free() -> None:
    a = opts(resources={"b": {"cpu": "1"}, "a": {"memory": "1Gi"}}, capacity_caps={"x": 1, "y": 2})
    b = opts(resources={"a": {"memory": "1Gi"}, "b": {"cpu": "1"}}, capacity_caps={"y": 2, "x": 1})
    assert a == b and hash(a) == hash(b)


def test_an_invalid_flow_is_refused() -> None:
    bad = spec_of(
        "batch", NodeSpec("det", "processor", ("ghost",)), NodeSpec("o", "consumer", ("det",))
    )
    with pytest.raises(InvalidFlowError):
        render(bad, opts())


# -- determinism and schemas ----------------------------------------------------


def test_render_is_deterministic_and_leaves_its_inputs_alone() -> None:
    o = opts(keda=True, capacity_caps={"det": 4})
    first = json.dumps(render(RT, o))
    assert json.dumps(render(RT, o)) == first
    assert json.dumps(render(replace(RT), replace(o))) == first


def test_the_versions_checked_are_bundled() -> None:
    assert set(KUBE_VERSIONS) <= bundled_versions()


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_every_object_validates_strictly(version: str) -> None:
    import kubernetes_validate

    flows = [
        (PIPE_BATCH, opts()),
        (RT, opts(keda=True, gpu_autoscaling=True, gpu_runtime_class="nvidia")),
        (GPU, opts(gpu_mode="mix", mig={"pose": ("nvidia.com/mig-1g.10gb", "A100")})),
        (GPU, opts(gpu_mode="shared", gpu_runtime_class="nvidia", broker_url="tls://n:4222")),
    ]
    for flow, o in flows:
        for obj in render(flow, o):
            if obj["kind"] == "ScaledObject":
                check_keda(obj)
            else:  # the package itself, once per object: the cached checker agrees with it
                kubernetes_validate.validate(obj, version, strict=True)
                check_any(obj, version)


def test_objects_share_no_sub_object() -> None:
    import yaml

    objs = render(PIPE_RT, opts(keda=True))
    seen: dict[int, object] = {}

    def walk(value: object) -> None:
        if isinstance(value, dict | list):
            assert id(value) not in seen, "a dict or list appears twice"
            seen[id(value)] = value
            for item in value.values() if isinstance(value, dict) else value:
                walk(item)

    for obj in objs:
        walk(obj)
    assert "&id" not in "".join(yaml.safe_dump(o) for o in objs)


def test_mig_choices_come_from_a_mix_plan() -> None:
    from vfadapters.clusterload import load_cluster
    from vfcore import plan
    from vfcore.runtime.manifests import mig_choices

    cluster = load_cluster("examples/clusters/mig-idle")
    flow = spec_of(
        "batch",
        P,
        NodeSpec("pose", "processor", ("cam",), nb_tasks=3, device_type="gpu", gpu_memory_gib=8),
        NodeSpec("out", "consumer", ("pose",)),
    )
    solved = plan(flow, cluster, gpu_mode="mix")
    assert solved.verdict == "fits" and solved.mig is not None
    choices = mig_choices(solved.mig, cluster.nodes)
    products = {dict(n.labels).get("nvidia.com/gpu.product") for n in cluster.nodes}
    assert choices == {"pose": ("nvidia.com/mig-1g.10gb", "NVIDIA-H100-80GB-HBM3")}
    assert "NVIDIA-H100-80GB-HBM3" in products
    objs = render(flow, opts(gpu_mode="mix", mig=choices))
    pose = of_node(objs, "pose", "Job")[0]
    assert pod_spec(pose)["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_mig_choices_name_no_product_across_card_models() -> None:
    from vfcore import NodeState
    from vfcore.placement.mig import MigPlan
    from vfcore.placement.mig.results import MigNodePlan
    from vfcore.runtime.manifests import mig_choices

    mig = MigPlan(
        nodes=(
            MigNodePlan("a", None, False, pool_pods=(("pose/0", "1g.10gb"),)),
            MigNodePlan("b", None, False, pool_pods=(("pose/1", "1g.10gb"),)),
        ),
        resources=(("pose", "nvidia.com/mig-1g.10gb"),),
    )
    a = NodeState("a", (), labels=(("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"),))
    b = NodeState("b", (), labels=(("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),))
    assert mig_choices(mig, [a, b]) == {"pose": ("nvidia.com/mig-1g.10gb", None)}
    same = NodeState("b", (), labels=a.labels)
    assert mig_choices(mig, [a, same]) == {
        "pose": ("nvidia.com/mig-1g.10gb", "NVIDIA-A100-SXM4-80GB")
    }
