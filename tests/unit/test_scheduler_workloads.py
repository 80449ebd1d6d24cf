"""The scheduler model with the pods as ``vf deploy`` creates them and the cluster's other pods.

Example tables for each plugin added in issue 27 — PodTopologySpread (system
defaults and a pod's own constraints), InterPodAffinity from existing pods,
ImageLocality, DefaultPreemption — and for the scan window, each with the
numbers that decide it; then the same through ``plan()``, the plan document
and ``vf plan``'s flags.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, NodeState, node
from vfcore.flow.spec import FlowSpec, NodeSpec
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.plan import plan
from vfcore.placement.scheduler import (
    AffinityTerm,
    BoundPod,
    LabelSelector,
    SchedulingFacts,
    ScoringConfig,
    SpreadConstraint,
    Workload,
    predict,
    run_windowed,
    scheduler_node_order,
    simulate,
)
from vfcore.placement.scheduler.engine import Engine

GPU = "nvidia.com/gpu"
GIB = 2**30
ZONE = "topology.kubernetes.io/zone"
GPU_MOST = ScoringConfig(strategy="MostAllocated", resources=((GPU, 1),))
MANAGED = (("app.kubernetes.io/managed-by", "vf"),)


def pods_of(workload: str, count: int, gpus: int = 1, cpu: int = 0, memory_gib: int = 0):
    requests = {GPU: gpus, "cpu": cpu, "memory": memory_gib * GIB}
    return [
        PodRequest(
            f"{workload}/{i}",
            workload,
            i,
            tuple(sorted((k, v) for k, v in requests.items() if v)),
            (GPU_PRESENT_LABEL,),
            (GPU_TOLERATION,),
            slice="whole",
        )
        for i in range(count)
    ]


def gpu_node(
    name: str, gpus: int, cpu: int = 16, zone: str | None = None, **kw: object
) -> NodeState:
    labels = dict([GPU_PRESENT_LABEL])
    if zone is not None:
        labels[ZONE] = zone
    return node(
        name,
        allocatable={GPU: gpus, "cpu": cpu * 1000, "memory": cpu * 4 * GIB},
        labels=labels,
        **kw,  # type: ignore[arg-type]
    )


def deployment(name: str, **kw: object) -> dict[str, Workload]:
    return {name: Workload(name, "deployment", default_spread=True, labels=MANAGED, **kw)}  # type: ignore[arg-type]


BIG_AND_SMALL = ClusterSnapshot.of(
    [gpu_node("big", 8, 64), gpu_node("s1", 4), gpu_node("s2", 4), gpu_node("s3", 4)]
)


# -- PodTopologySpread -------------------------------------------------------------------------


def test_a_deployment_spreads_where_bare_pods_pile_onto_the_big_node() -> None:
    pods = pods_of("det", 4, cpu=1000, memory_gib=4)
    bare = simulate(pods, BIG_AND_SMALL)
    spread = predict(pods, BIG_AND_SMALL, workloads=deployment("det"))
    assert Counter(bare.placement.values()) == {"big": 4}
    assert spread.verdict == "lands" and spread.exhaustive
    run = spread.example_landing
    assert run is not None and Counter(run.placement.values()) == {
        "big": 1,
        "s1": 1,
        "s2": 1,
        "s3": 1,
    }


def test_a_job_is_a_bare_pod_to_the_scheduler() -> None:
    pods = pods_of("det", 4, cpu=1000, memory_gib=4)
    job = {"det": Workload("det", "job", labels=MANAGED)}
    assert simulate(pods, BIG_AND_SMALL, workloads=job) == simulate(pods, BIG_AND_SMALL)


def test_zones_are_balanced_three_and_three() -> None:
    cluster = ClusterSnapshot.of(
        [
            gpu_node("a1", 8, 64, "zone-a"),
            gpu_node("b1", 4, 16, "zone-b"),
            gpu_node("b2", 4, 16, "zone-b"),
        ]
    )
    pods = pods_of("det", 6, cpu=1000, memory_gib=4)
    zone_of = {"a1": "zone-a", "b1": "zone-b", "b2": "zone-b"}
    bare = Counter(zone_of[n] for n in simulate(pods, cluster).placement.values())
    spread = simulate(pods, cluster, workloads=deployment("det"))
    assert bare == {"zone-a": 4, "zone-b": 2}
    assert Counter(zone_of[n] for n in spread.placement.values()) == {"zone-a": 3, "zone-b": 3}


def test_spreading_fights_most_allocated_packing_and_strands_the_big_pod() -> None:
    # 2, 2, 4 GPUs on two 4-GPU nodes, MostAllocated on GPUs. Bare: p/1 scores 100 on the node
    # holding p/0 against 50, packs, and q/0 lands. A Deployment's p/1 gets PodTopologySpread
    # raw 3 (1·ln 4 + 2) there and 2 on the empty node → normalised 66 and 100, × 2:
    # 100 + 132 = 232 against 50 + 200 = 250, so it spreads and q/0 strands.
    cluster = ClusterSnapshot.of([gpu_node("a", 4), gpu_node("b", 4)])
    pods = [*pods_of("p", 2, gpus=2), *pods_of("q", 1, gpus=4)]
    assert predict(pods, cluster, config=GPU_MOST).verdict == "lands"
    spread = predict(pods, cluster, config=GPU_MOST, workloads=deployment("p"))
    assert spread.verdict == "strands"
    assert spread.stranded_always == ("q/0",)
    run = spread.example_stranding
    assert run is not None
    assert [s.score for s in run.steps[:2]] == [50, 250]  # p/0: spread equal, left out


def test_spreading_is_off_with_weight_zero_and_defaults_can_be_replaced() -> None:
    pods = pods_of("det", 4, cpu=1000, memory_gib=4)
    off = simulate(
        pods, BIG_AND_SMALL, config=ScoringConfig(spread_weight=0), workloads=deployment("det")
    )
    assert Counter(off.placement.values()) == {"big": 4}
    none = simulate(
        pods, BIG_AND_SMALL, config=ScoringConfig(default_spread=()), workloads=deployment("det")
    )
    assert Counter(none.placement.values()) == {"big": 4}


def test_a_do_not_schedule_zone_constraint_filters_and_says_so() -> None:
    # maxSkew 1 per zone: zone a holds 2 replicas, zone b 1 → a third in a gives skew 2
    hard = (SpreadConstraint(1, ZONE, "DoNotSchedule"),)
    cluster = ClusterSnapshot.of([gpu_node("a1", 8, zone="a"), gpu_node("b1", 1, zone="b")])
    pods = pods_of("det", 4)
    workloads = {"det": Workload("det", "deployment", spread=hard, labels=MANAGED)}
    run = simulate(pods, cluster, workloads=workloads)
    assert Counter(run.placement.values()) == {"a1": 2, "b1": 1}
    [stranded] = run.stranded
    assert stranded.pod == "det/3"
    assert stranded.reason == (
        "0/2 nodes fit det/3: 1 Insufficient nvidia.com/gpu, "
        "1 node(s) didn't match pod topology spread constraints"
    )


def test_existing_pods_of_the_same_workload_count_for_spreading() -> None:
    # a redeploy: 3 replicas of the workload already run on big
    workloads = {
        "det": Workload(
            "det",
            "statefulset",
            default_spread=True,
            spread_selector=LabelSelector((("app", "det"),)),
            labels=(("app", "det"),),
        )
    }
    running = SchedulingFacts(
        pods=tuple(
            BoundPod("default", f"old-{i}", "big", labels=(("app", "det"),)) for i in range(3)
        )
    )
    pods = pods_of("det", 3, cpu=1000, memory_gib=4)
    fresh = simulate(pods, BIG_AND_SMALL, workloads=workloads)
    again = simulate(pods, BIG_AND_SMALL, workloads=workloads, facts=running)
    assert "big" in fresh.placement.values()
    assert "big" not in again.placement.values()


# -- InterPodAffinity ----------------------------------------------------------------------------


def _holder(node_name: str, *terms: AffinityTerm) -> SchedulingFacts:
    return SchedulingFacts(pods=(BoundPod("default", "holder", node_name, terms=terms),))


def test_an_existing_pods_required_anti_affinity_closes_its_zone() -> None:
    cluster = ClusterSnapshot.of([gpu_node("a", 4, zone="z1"), gpu_node("b", 4, zone="z2")])
    anti = AffinityTerm("required-anti", ZONE, LabelSelector(MANAGED), ("default",))
    workloads = deployment("m")
    run = simulate(pods_of("m", 3, gpus=2), cluster, workloads=workloads, facts=_holder("a", anti))
    assert Counter(run.placement.values()) == {"b": 2}
    assert run.stranded[0].reason == (
        "0/2 nodes fit m/2: 1 Insufficient nvidia.com/gpu, "
        "1 node(s) didn't satisfy existing pods anti-affinity rules"
    )
    # a term for another namespace's pods: no effect, all three land
    other = AffinityTerm("required-anti", ZONE, LabelSelector(MANAGED), ("prod",))
    free = simulate(
        pods_of("m", 3, gpus=2), cluster, workloads=workloads, facts=_holder("a", other)
    )
    assert free.lands


def test_preferred_terms_of_existing_pods_pull_and_push() -> None:
    cluster = ClusterSnapshot.of([gpu_node("a", 4), gpu_node("b", 4)])
    host = "kubernetes.io/hostname"
    near = AffinityTerm("preferred-affinity", host, LabelSelector(MANAGED), ("default",), weight=50)
    away = AffinityTerm("preferred-anti", host, LabelSelector(MANAGED), ("default",), weight=50)
    pods = pods_of("m", 1)
    pulled = predict(pods, cluster, workloads=deployment("m"), facts=_holder("b", near))
    pushed = predict(pods, cluster, workloads=deployment("m"), facts=_holder("a", away))
    assert pulled.example_landing is not None and pulled.example_landing.placement == {"m/0": "b"}
    assert pushed.example_landing is not None and pushed.example_landing.placement == {"m/0": "b"}
    assert pulled.outcomes_explored == pushed.outcomes_explored == 1  # no tie left


def test_unknown_pod_labels_leave_affinity_terms_out_and_say_so() -> None:
    cluster = ClusterSnapshot.of([gpu_node("a", 4), gpu_node("b", 4)])
    anti = AffinityTerm(
        "required-anti", "kubernetes.io/hostname", LabelSelector(MANAGED), ("default",)
    )
    unlabelled = {"m": Workload("m", "deployment", default_spread=True)}
    prediction = predict(pods_of("m", 1), cluster, workloads=unlabelled, facts=_holder("a", anti))
    assert prediction.verdict == "lands"
    assert prediction.notes and "default/holder" in prediction.notes[0]


# -- ImageLocality -------------------------------------------------------------------------------


def test_image_locality_breaks_a_tie_toward_the_node_holding_the_image() -> None:
    cluster = ClusterSnapshot.of([gpu_node("a", 4), gpu_node("b", 4)])
    images = SchedulingFacts(images=(("b", (("reg.example/vf:1", 900 * 2**20),)),))
    workloads = {"m": Workload("m", "job", images=("reg.example/vf:1",))}
    assert predict(pods_of("m", 1), cluster).outcomes_explored == 1  # a and b interchangeable
    pulled = predict(pods_of("m", 1), cluster, workloads=workloads, facts=images)
    assert pulled.example_landing is not None and pulled.example_landing.placement == {"m/0": "b"}
    # 900 MiB on 1 of 2 nodes: 450 MiB → 100·(450−23)//977 = 43 points
    assert (
        pulled.example_landing.steps[0].score
        == (simulate(pods_of("m", 1), cluster).steps[0].score or 0) + 43
    )


# -- DefaultPreemption ---------------------------------------------------------------------------

FULL = ClusterSnapshot.of(
    [
        gpu_node("a", 4, requested={GPU: 4, "pods": 2}),
        gpu_node("b", 4, requested={GPU: 4, "pods": 1}),
    ]
)
LOW_AND_MID = SchedulingFacts(
    pods=(
        BoundPod("ml", "low-1", "a", priority=0, requests=((GPU, 2),), owner=("ReplicaSet", "t-1")),
        BoundPod("ml", "low-2", "a", priority=0, requests=((GPU, 2),), owner=("ReplicaSet", "t-1")),
        BoundPod("ml", "mid", "b", priority=500, requests=((GPU, 4),)),
    ),
    budgets=(),
)


def test_a_higher_priority_pod_preempts_the_lowest_priority_victims() -> None:
    pods = pods_of("big", 1, gpus=4)
    high = {"big": Workload("big", "job", priority=1000)}
    assert predict(pods, FULL).verdict == "strands"
    prediction = predict(pods, FULL, workloads=high, facts=LOW_AND_MID)
    assert prediction.verdict == "lands"
    assert prediction.evicted == ("ml/low-1", "ml/low-2")
    [p] = prediction.preemptions
    assert (p.node, p.victims, p.owners, p.pdb_violations, p.candidates) == (
        "a",
        ("ml/low-1", "ml/low-2"),
        ("ReplicaSet/t-1", "ReplicaSet/t-1"),
        0,
        2,
    )
    # priority 400: only a's pods are lower; priority 0 or PreemptNever: nothing to evict
    assert predict(
        pods, FULL, workloads={"big": Workload("big", priority=400)}, facts=LOW_AND_MID
    ).evicted
    for workload in (
        Workload("big", priority=0),
        Workload("big", priority=1000, preemption_policy="Never"),
    ):
        assert (
            predict(pods, FULL, workloads={"big": workload}, facts=LOW_AND_MID).verdict == "strands"
        )


def test_an_unknown_priority_makes_a_stranding_verdict_unknown() -> None:
    unknown = {"big": Workload("big", "job", priority=None, priority_class="gold")}
    prediction = predict(pods_of("big", 1, gpus=4), FULL, workloads=unknown, facts=LOW_AND_MID)
    assert prediction.verdict == "unknown"
    assert "PriorityClass gold" in prediction.reason


def test_preempted_room_is_used_by_the_preemptor_not_freed_twice() -> None:
    pods = pods_of("big", 2, gpus=4)
    high = {"big": Workload("big", "job", priority=1000)}
    prediction = predict(pods, FULL, workloads=high, facts=LOW_AND_MID)
    # big/0 takes a (victims 0, 0), big/1 then evicts mid on b
    assert prediction.verdict == "lands"
    assert prediction.evicted == ("ml/low-1", "ml/low-2", "ml/mid")


# -- the scan window -----------------------------------------------------------------------------


def _window_instance() -> tuple[list[PodRequest], ClusterSnapshot]:
    # 130 nodes, so 100 are scored per pod; a mix that strands with every node scored
    nodes = [gpu_node(f"n{i:03d}", 1 if i % 3 else 2, 8 if i % 3 else 16) for i in range(130)]
    pods = [*pods_of("one", 120, gpus=1), *pods_of("two", 20, gpus=2)]
    return pods, ClusterSnapshot.of(nodes)


def test_a_window_covering_every_node_is_the_first_tie_run() -> None:
    pods, cluster = _window_instance()
    engine = Engine(pods, cluster, ScoringConfig(), {}, "full")
    order = scheduler_node_order(cluster)
    full = run_windowed(engine, order, start=0, to_find=len(order))
    assert full is not None
    assert full.simulation.placements == simulate(pods, cluster).placements


def test_the_stranded_range_spans_the_full_window_and_the_windowed_runs() -> None:
    pods, cluster = _window_instance()
    prediction = predict(pods, cluster)
    window = prediction.window
    assert window is not None and window.to_find == 100 and window.widest > 100
    assert len(window.runs) == window.planned == 4
    low, high = prediction.stranded_range or (None, None)
    counts = [*(window.full or ()), *(r["stranded"] for r in window.runs)]
    assert (low, high) == (min(counts), max(counts))
    assert prediction.verdict == ("strands" if low else "at-risk")
    assert f"{window.to_find} feasible nodes" in prediction.reason


def test_below_a_hundred_nodes_there_is_no_window() -> None:
    cluster = ClusterSnapshot.of([gpu_node(f"n{i}", 1) for i in range(99)])
    prediction = predict(pods_of("one", 99), cluster)
    assert prediction.window is None and prediction.verdict == "lands"


def test_a_configured_percentage_widens_the_window() -> None:
    pods, cluster = _window_instance()
    assert (
        predict(pods, cluster, config=ScoringConfig(percentage_of_nodes_to_score=100)).window
        is None
    )


# -- through plan() and vf plan ------------------------------------------------------------------

REALTIME = FlowSpec(
    "cams",
    "realtime",
    (
        NodeSpec("src", "producer"),
        NodeSpec(
            "det",
            "processor",
            ("src",),
            nb_tasks=4,
            device_type="gpu",
            requests=(("cpu", "1"), ("memory", "4Gi")),
        ),
        NodeSpec("sink", "consumer", ("det",)),
    ),
)


def test_plan_spreads_a_realtime_flows_deployments_by_default() -> None:
    result = plan(REALTIME, BIG_AND_SMALL)
    assert result.scheduler is not None
    run = result.scheduler.prediction.example_landing
    assert run is not None
    assert sorted(n for p, n in run.placements if p.startswith("det/")) == ["big", "s1", "s2", "s3"]
    doc = result.to_dict()["scheduler"]
    for key in ("stranded_range", "window", "evicted", "preemptions", "notes"):
        assert key in doc
    assert doc["stranded_range"] == [0, 0] and doc["evicted"] == []


def _dump(where: Path, cluster: ClusterSnapshot, pods: list[dict[str, object]]) -> Path:
    items = []
    for n in cluster.nodes:
        alloc = {k: str(v) if k != "memory" else f"{v // GIB}Gi" for k, v in n.allocatable}
        alloc["cpu"] = f"{n.allocatable_of('cpu') // 1000}"
        items.append(
            {
                "kind": "Node",
                "metadata": {"name": n.name, "labels": dict(n.labels)},
                "status": {
                    "allocatable": alloc,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    where.mkdir()
    (where / "nodes.json").write_text(json.dumps({"kind": "NodeList", "items": items}))
    (where / "pods.json").write_text(json.dumps({"kind": "PodList", "items": pods}))
    classes = [{"kind": "PriorityClass", "metadata": {"name": "vf-high"}, "value": 1000}]
    (where / "priorityclasses.json").write_text(
        json.dumps({"kind": "PriorityClassList", "items": classes})
    )
    (where / "pdbs.json").write_text(json.dumps({"kind": "PodDisruptionBudgetList", "items": []}))
    return where


def test_vf_plan_strict_preflight_refuses_evictions_unless_allowed(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from vfadapters.cli import main

    bound = [
        {
            "kind": "Pod",
            "metadata": {"namespace": "ml", "name": f"low-{i}"},
            "spec": {
                "nodeName": name,
                "priority": 0,
                "containers": [{"resources": {"limits": {GPU: "4"}}}],
            },
            "status": {"phase": "Running"},
        }
        for i, name in enumerate(("a", "b"))
    ]
    cluster = _dump(tmp_path / "c", ClusterSnapshot.of([gpu_node("a", 4), gpu_node("b", 4)]), bound)
    flow = tmp_path / "flow.json"
    spec = FlowSpec(
        "big",
        "batch",
        (
            NodeSpec("src", "producer"),
            NodeSpec("train", "processor", ("src",), device_type="gpu", gpu_count=4),
            NodeSpec("sink", "consumer", ("train",)),
        ),
    )
    flow.write_text(spec.to_json())
    args = ["plan", str(flow), "--cluster", str(cluster), "--priority-class", "vf-high"]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "does-not-fit"
    assert doc["scheduler"]["verdict"] == "lands" and len(doc["scheduler"]["evicted"]) == 1
    assert main([*args, "--strict-preflight"]) == 3
    assert "strict-preflight" in capsys.readouterr().err
    assert main([*args, "--strict-preflight", "--allow-preemption"]) == 0
    out = capsys.readouterr().out
    assert "preempts: train/0" in out
