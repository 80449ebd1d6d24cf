"""The scheduler model's plugin arithmetic, inputs and preemption rules, number by number.

PodTopologySpread, InterPodAffinity and ImageLocality as kube-scheduler 1.36
computes them (``vfcore.placement.scheduler.plugins``), the workloads read
from rendered objects, the cluster facts read from kubectl dumps, the victims
and the nominated node of DefaultPreemption, and the scan window's node list.
Every expected number is worked out by hand in the comment beside it.
"""

from __future__ import annotations

import math

import pytest

from vfcore.errors import InvalidInputError
from vfcore.flow.spec import FlowSpec, NodeSpec
from vfcore.placement.scheduler import (
    SYSTEM_DEFAULT_SPREAD,
    BoundPod,
    DisruptionBudget,
    LabelSelector,
    SpreadConstraint,
    Workload,
    scheduling_facts,
    workloads_from_objects,
    workloads_from_spec,
)
from vfcore.placement.scheduler.cluster_facts import normalized_image_name, start_key
from vfcore.placement.scheduler.engine import num_feasible_nodes_to_find
from vfcore.placement.scheduler.plugins import (
    IMAGE_MIN_THRESHOLD,
    MIB,
    SPREAD_MISMATCH,
    SPREAD_MISSING_LABEL,
    go_round,
    image_locality_score,
    normalize_interpod,
    normalize_spread,
    spread_filter_fails,
    spread_raw_score,
    spread_scores,
    topology_weight,
)
from vfcore.placement.scheduler.preemption import (
    Candidate,
    num_candidates,
    pick_node,
    select_victims,
    split_by_budget,
)
from vfcore.placement.scheduler.window import chunk_size, scheduler_node_order
from vfcore.runtime.manifests import RenderOptions, render

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"


# -- PodTopologySpread -------------------------------------------------------------------


def test_go_round_is_half_away_from_zero_not_half_even() -> None:
    assert [go_round(x) for x in (0.5, 1.5, 2.5, 2.4999, 7.0986)] == [1, 2, 3, 2, 7]


def test_topology_weight_is_the_log_of_size_plus_two() -> None:
    assert topology_weight(3) == math.log(5.0)
    assert topology_weight(0) == math.log(2.0)  # no domain still weighs ln 2


def test_raw_spread_score_sums_count_times_weight_plus_skew_minus_one() -> None:
    # node with 1 replica, in a zone holding 1: 1·ln5 + 2 + 1·ln3 + 4 = 8.708 → 9
    labels = {HOST: "a", ZONE: "z1"}
    weights = [topology_weight(3), topology_weight(1)]
    assert spread_raw_score(SYSTEM_DEFAULT_SPREAD, weights, labels, [1, 1]) == 9
    # no zone label: only the hostname constraint adds, 0·ln5 + 2 = 2
    assert spread_raw_score(SYSTEM_DEFAULT_SPREAD, weights, {HOST: "a"}, [0, 5]) == 2


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([9, 7, 7], [77, 100, 100]),  # 100·(9+7−9)//9 = 77, 100·(9+7−7)//9 = 100
        ([2, 2], [100, 100]),  # equal: 100·(2+2−2)//2
        ([0, 0], [100, 100]),  # max 0: 100 everywhere
        ([None, 4, 8], [0, 100, 50]),  # an ignored node scores 0; 100·(8+4−8)//8 = 50
        ([None], [0]),
    ],
    ids=["one-replica-node-loses", "equal", "all-zero", "ignored-node", "only-ignored"],
)
def test_normalize_spread(raw: list[int | None], expected: list[int]) -> None:
    assert normalize_spread(raw) == expected


def test_the_documented_spread_example_three_nodes_one_zone() -> None:
    z = {ZONE: "z1"}
    scores = spread_scores(
        SYSTEM_DEFAULT_SPREAD,
        require_all=False,
        labels=[z, z, z],
        own_counts=[[1, 0], [0, 0], [0, 0]],
        domain_counts=[{}, {"z1": 1}],
    )
    assert scores == [77, 100, 100]


def test_multiplicity_counts_the_nodes_a_state_stands_for_in_the_hostname_weight() -> None:
    # one entry standing for 3 nodes: hostname size 4 (ln 6), not 2 (ln 4)
    z = {ZONE: "z1"}
    by_state = spread_scores(
        SYSTEM_DEFAULT_SPREAD,
        require_all=False,
        labels=[z, z],
        own_counts=[[2, 0], [0, 0]],
        domain_counts=[{}, {"z1": 2}],
        multiplicity=[1, 3],
    )
    by_node = spread_scores(
        SYSTEM_DEFAULT_SPREAD,
        require_all=False,
        labels=[z, z, z, z],
        own_counts=[[2, 0], [0, 0], [0, 0], [0, 0]],
        domain_counts=[{}, {"z1": 2}],
    )
    assert by_state == by_node[:2]
    # raw: 2·ln6 + 2 + 2·ln3 + 4 = 11.78 → 12; 0 + 2 + 2.197 + 4 = 8.197 → 8
    assert by_state == [100 * (12 + 8 - 12) // 12, 100]


def test_own_constraints_ignore_nodes_missing_a_key_system_defaults_do_not() -> None:
    own = (SpreadConstraint(1, ZONE),)
    labels = [{ZONE: "z1"}, {}]
    assert spread_scores(
        own, require_all=True, labels=labels, own_counts=[[0], [0]], domain_counts=[{"z1": 1}]
    ) == [100, 0]
    # system defaults: the zone-less node is scored on hostname alone and wins
    both = spread_scores(
        SYSTEM_DEFAULT_SPREAD,
        require_all=False,
        labels=labels,
        own_counts=[[0, 0], [0, 0]],
        domain_counts=[{}, {"z1": 1, "": 0}],
    )
    assert both[1] == 100 and both[0] < 100


def test_spread_filter_counts_skew_against_the_smallest_domain() -> None:
    hard = (SpreadConstraint(1, ZONE, "DoNotSchedule"),)
    # zone a holds 2, b holds 1 (min 1): a gives skew 2+1−1 = 2 > 1, b gives 1+1−1 = 1
    assert spread_filter_fails(hard, {ZONE: "a"}, [2], [1], [True]) == SPREAD_MISMATCH
    assert spread_filter_fails(hard, {ZONE: "b"}, [1], [1], [True]) is None
    # the pod not matching its own selector does not count itself
    assert spread_filter_fails(hard, {ZONE: "a"}, [2], [1], [False]) is None
    assert spread_filter_fails(hard, {}, [0], [0], [True]) == SPREAD_MISSING_LABEL
    # soft constraints never filter
    assert spread_filter_fails(SYSTEM_DEFAULT_SPREAD, {}, [9, 9], [0, 0], [True, True]) is None


@pytest.mark.parametrize(
    ("make", "rule"),
    [
        (lambda: SpreadConstraint(0, ZONE), "invalid-spread-constraint"),
        (lambda: SpreadConstraint(1, ""), "invalid-spread-constraint"),
        (lambda: SpreadConstraint(1, ZONE, "Sometimes"), "invalid-spread-constraint"),  # type: ignore[arg-type]
        (lambda: LabelSelector((), (("a", "Gt", ("1",)),)), "invalid-label-selector"),
        (lambda: Workload("w", "daemonset"), "invalid-workload"),  # type: ignore[arg-type]
        (lambda: Workload("w", preemption_policy="Always"), "invalid-workload"),
    ],
    ids=["skew-0", "no-key", "bad-action", "gt-in-pod-selector", "bad-kind", "bad-policy"],
)
def test_bad_inputs_are_named_errors(make: object, rule: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        make()  # type: ignore[operator]
    assert caught.value.rule == rule


def test_label_selector_operators_and_merging() -> None:
    s = LabelSelector((("app", "w"),), (("tier", "NotIn", ("db",)), ("gpu", "Exists", ())))
    assert s.matches({"app": "w", "gpu": "1"})
    assert not s.matches({"app": "w", "gpu": "1", "tier": "db"})
    assert not s.matches({"app": "w"})
    assert LabelSelector().matches({}) and LabelSelector().is_empty
    merged = LabelSelector((("a", "1"),)).merged(LabelSelector((("b", "2"),)))
    assert merged.matches({"a": "1", "b": "2"}) and not merged.matches({"a": "1"})
    assert LabelSelector.parse(None, "x") is None
    parsed = LabelSelector.parse(
        {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "DoesNotExist"}]},
        "x",
    )
    assert (
        parsed is not None
        and parsed.matches({"a": "1"})
        and not parsed.matches({"a": "1", "b": ""})
    )


# -- InterPodAffinity and ImageLocality ---------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([-5, 0, 5], [0, 50, 100]),  # int(100·(0+5)/10) = 50
        ([3, 3], [0, 0]),  # max == min: 0 everywhere (min starts at +inf, not 0)
        ([1, 2, 4], [0, 33, 100]),  # int(100·1/3) = 33
        ([-2, -1], [0, 100]),
    ],
)
def test_normalize_interpod_is_min_max(raw: list[int], expected: list[int]) -> None:
    assert normalize_interpod(raw, active=True) == expected
    assert normalize_interpod(raw, active=False) == [0] * len(raw)


def test_image_locality_scales_by_spread_and_clamps_per_container() -> None:
    # 500 MiB on 1 of 4 nodes: 125 MiB → 100·(125−23)//(1000−23) = 10
    assert image_locality_score(["vf:1"], {"vf:1": 500 * MIB}, {"vf:1": 1}, 4) == 10
    # two containers of the same image: 250 MiB against 23..2000 MiB → 100·227//1977 = 11
    assert image_locality_score(["vf:1", "vf:1"], {"vf:1": 500 * MIB}, {"vf:1": 1}, 4) == 11
    # on every node: 500 MiB → 100·477//977 = 48
    assert image_locality_score(["vf:1"], {"vf:1": 500 * MIB}, {"vf:1": 4}, 4) == 48
    # a huge image saturates at 100; below the 23 MiB floor, 0
    assert image_locality_score(["big:1"], {"big:1": 5000 * MIB}, {"big:1": 4}, 4) == 100
    assert image_locality_score(["s:1"], {"s:1": IMAGE_MIN_THRESHOLD}, {"s:1": 1}, 1) == 0
    assert image_locality_score([], {}, {}, 4) == 0


def test_image_names_are_normalised_as_the_scheduler_keys_them() -> None:
    assert normalized_image_name("vf") == "vf:latest"
    assert normalized_image_name("registry:5000/team/vf") == "registry:5000/team/vf:latest"
    assert normalized_image_name("vf@sha256:ab") == "vf@sha256:ab"


# -- workloads ----------------------------------------------------------------------------

REALTIME = FlowSpec(
    "cams",
    "realtime",
    (
        NodeSpec("src", "producer"),
        NodeSpec("det", "processor", ("src",), nb_tasks=3, device_type="gpu"),
        NodeSpec("trk", "processor", ("det",), nb_tasks=2, partition_by="trace_id"),
        NodeSpec("sink", "consumer", ("trk",)),
    ),
)


def test_workloads_from_spec_spread_deployments_and_statefulsets_not_jobs() -> None:
    got = {n: (w.kind, w.default_spread) for n, w in workloads_from_spec(REALTIME).items()}
    assert got == {
        "src": ("deployment", True),
        "det": ("deployment", True),
        "trk": ("statefulset", True),
        "sink": ("deployment", True),
    }
    batch = FlowSpec("b", "batch", REALTIME.nodes[:2])
    assert {w.kind for w in workloads_from_spec(batch).values()} == {"job"}
    assert not any(w.default_spread for w in workloads_from_spec(batch).values())


def test_workloads_from_rendered_objects_carry_labels_services_and_images() -> None:
    objects = render(REALTIME, RenderOptions(image="reg.example/cams:1", run_id="r1"))
    found = workloads_from_objects(objects, priorities={"high": 1000})
    assert set(found) == {"src", "det", "trk", "sink"}
    det, trk = found["det"], found["trk"]
    assert (det.kind, det.default_spread, trk.kind, trk.default_spread) == (
        "deployment",
        True,
        "statefulset",
        True,
    )
    assert det.labels is not None and dict(det.labels)["app.kubernetes.io/managed-by"] == "vf"
    assert det.images == ("reg.example/cams:1", "reg.example/cams:1")  # init container + worker
    # the spread selector selects the workload's own pods and no other workload's
    assert det.spread_selector is not None and det.spread_selector.matches(det.label_map)
    assert not det.spread_selector.matches(trk.label_map)
    assert det.counts_as_own(det.label_map, "default")
    assert not det.counts_as_own(det.label_map, "other")
    assert (det.priority, det.priority_class) == (0, None)


def test_a_rendered_priority_class_is_valued_from_the_cluster_or_unknown() -> None:
    objects = render(REALTIME, RenderOptions(image="i", run_id="r1"))
    for obj in objects:
        if obj["kind"] == "Deployment":
            obj["spec"]["template"]["spec"]["priorityClassName"] = "high"
    assert workloads_from_objects(objects, priorities={"high": 1000})["det"].priority == 1000
    assert workloads_from_objects(objects, priorities={})["det"].priority is None
    assert workloads_from_objects(objects)["det"].priority is None


def test_a_job_spreads_only_when_a_service_selects_its_pods() -> None:
    batch = FlowSpec(
        "b",
        "batch",
        (NodeSpec("src", "producer"), NodeSpec("w", "processor", ("src",), nb_tasks=2)),
    )
    objects = list(render(batch, RenderOptions(image="i", run_id="r1")))
    assert not workloads_from_objects(objects)["w"].default_spread
    job = next(
        o
        for o in objects
        if o["kind"] == "Job"
        and o["spec"]["template"]["metadata"].get("annotations", {}).get("vfcore.io/node-name")
        == "w"
    )
    labels = job["spec"]["template"]["metadata"]["labels"]
    service = {
        "kind": "Service",
        "metadata": {"name": "s", "namespace": "default"},
        "spec": {"selector": {"app.kubernetes.io/name": labels["app.kubernetes.io/name"]}},
    }
    assert workloads_from_objects([*objects, service])["w"].default_spread


def test_constraints_a_pod_sets_replace_the_defaults() -> None:
    own = (SpreadConstraint(1, ZONE, "DoNotSchedule"),)
    assert Workload("w", "deployment", default_spread=True).constraints(SYSTEM_DEFAULT_SPREAD) == (
        SYSTEM_DEFAULT_SPREAD
    )
    assert Workload("w", "deployment", True, own).constraints(SYSTEM_DEFAULT_SPREAD) == own
    assert Workload("w", "job").constraints(SYSTEM_DEFAULT_SPREAD) == ()


# -- cluster facts --------------------------------------------------------------------------


def _pod(name: str, node: str, **spec: object) -> dict[str, object]:
    meta = {"namespace": "ml", "name": name, "labels": {"app": name}}
    return {
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{}], **spec},
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"},
    }


def test_scheduling_facts_read_pods_terms_budgets_classes_and_images() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"team": "x"}}, "topologyKey": ZONE}
            ],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 30,
                    "podAffinityTerm": {
                        "labelSelector": {},
                        "topologyKey": HOST,
                        "namespaceSelector": {},
                    },
                }
            ],
        }
    }
    pods = {
        "kind": "PodList",
        "items": [
            _pod("a", "n1", priority=10, affinity=anti),
            _pod("done", "n1"),
            _pod("pending", ""),
        ],
    }
    pods["items"][1]["status"]["phase"] = "Succeeded"  # type: ignore[index]
    nodes = {
        "kind": "NodeList",
        "items": [
            {
                "kind": "Node",
                "metadata": {"name": "n1"},
                "status": {"images": [{"names": ["vf", "vf@sha256:1"], "sizeBytes": 5}]},
            }
        ],
    }
    pdbs = {
        "kind": "PodDisruptionBudgetList",
        "items": [
            {
                "kind": "PodDisruptionBudget",
                "metadata": {"namespace": "ml", "name": "b"},
                "spec": {"selector": {"matchLabels": {"app": "a"}}},
                "status": {"disruptionsAllowed": 1},
            }
        ],
    }
    classes = {
        "kind": "PriorityClassList",
        "items": [
            {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
            {
                "kind": "PriorityClass",
                "metadata": {"name": "std"},
                "value": 5,
                "globalDefault": True,
            },
        ],
    }
    facts = scheduling_facts(nodes, pods, pdbs_json=pdbs, priority_classes_json=classes)
    [pod] = facts.pods
    assert (pod.id, pod.node, pod.priority, pod.start_time) == (
        "ml/a",
        "n1",
        10,
        "2026-01-01T00:00:00Z",
    )
    kinds = [(t.kind, t.topology_key, t.weight, t.all_namespaces, t.namespaces) for t in pod.terms]
    assert kinds == [
        ("required-anti", ZONE, 0, False, ("ml",)),
        ("preferred-anti", HOST, 30, True, ()),
    ]
    assert pod.terms[0].selects({"team": "x"}, "ml") is True
    assert pod.terms[0].selects({"team": "x"}, "other") is False
    assert facts.image_map == {"n1": {"vf:latest": 5, "vf@sha256:1": 5}}
    assert facts.budgets is not None and facts.budgets[0].covers(pod)
    assert facts.priority_of("high") == 1000 and facts.priority_of(None) == 5
    assert facts.priority_of("missing") is None


def test_unread_listings_are_unknown_never_empty() -> None:
    facts = scheduling_facts(None, {"kind": "Status", "reason": "Forbidden", "message": "no"})
    assert facts.pods_unknown is not None and "Forbidden" in facts.pods_unknown
    assert facts.budgets is None and facts.priority_classes is None
    assert facts.priority_of(None) == 0 and facts.priority_of("x") is None


def test_a_namespace_selector_with_labels_is_an_unknown_match() -> None:
    term = {
        "labelSelector": {},
        "topologyKey": HOST,
        "namespaceSelector": {"matchLabels": {"env": "prod"}},
    }
    pods = {
        "kind": "PodList",
        "items": [
            _pod(
                "a",
                "n1",
                affinity={
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
                },
            )
        ],
    }
    [pod] = scheduling_facts(None, pods).pods
    assert pod.terms[0].selects({}, "default") is None


def test_start_times_order_pods_and_a_missing_one_is_the_latest() -> None:
    assert start_key("2026-01-01T00:00:00Z") < start_key("2026-01-01T00:00:01Z") < start_key(None)


# -- preemption ------------------------------------------------------------------------------


def _bound(
    name: str, priority: int, gpus: int, start: str = "2026-01-01T00:00:00Z", **kw: object
) -> BoundPod:
    return BoundPod(
        "ns", name, "a", priority=priority, start_time=start, requests=((GPU, gpus),), **kw
    )  # type: ignore[arg-type]


def _frees(need: int):
    def fits_without(removed):
        return sum(dict(p.requests)[GPU] for p in removed) >= need

    return fits_without


def test_victims_are_the_least_important_pods_not_given_back() -> None:
    pods = [
        _bound("old", 0, 2, "2026-01-01T00:00:00Z"),
        _bound("new", 0, 2, "2026-01-01T00:00:05Z"),
        _bound("mid", 5, 2),
        _bound("same", 100, 2),  # equal priority: never a victim
    ]
    victims, violations = select_victims(100, pods, _frees(2))  # type: ignore[misc]
    # reprieve order: mid (priority 5), old (earlier start), new → only `new` stays a victim
    assert [p.name for p in victims] == ["new"] and violations == 0
    victims, _ = select_victims(100, pods, _frees(6))  # type: ignore[misc]
    assert [p.name for p in victims] == ["mid", "old", "new"]  # most important first
    assert select_victims(100, pods, _frees(8)) is None  # even without all three it does not fit
    assert select_victims(0, pods, _frees(2)) is None  # nothing of lower priority


def test_pdb_violating_pods_are_reprieved_first_and_counted() -> None:
    a = _bound("a", 0, 2, labels=(("app", "x"),))
    b = _bound("b", 0, 2, "2026-01-01T00:00:09Z", labels=(("app", "y"),))
    budget = DisruptionBudget("ns", "pdb", LabelSelector((("app", "x"),)), 0)
    violating, fine = split_by_budget([a, b], [budget])
    assert ([p.name for p in violating], [p.name for p in fine]) == (["a"], ["b"])
    victims, violations = select_victims(10, [a, b], _frees(2), [budget])  # type: ignore[misc]
    assert [p.name for p in victims] == ["b"] and violations == 0
    victims, violations = select_victims(10, [a, b], _frees(4), [budget])  # type: ignore[misc]
    assert [p.name for p in victims] == ["a", "b"] and violations == 1


def test_a_budget_allows_its_disruptions_in_importance_order() -> None:
    pods = [
        _bound(n, 0, 1, f"2026-01-01T00:00:0{i}Z", labels=(("app", "x"),))
        for i, n in enumerate("pqr")
    ]
    budget = DisruptionBudget("ns", "pdb", LabelSelector((("app", "x"),)), 2)
    violating, fine = split_by_budget(pods, [budget])
    assert [p.name for p in violating] == ["r"] and [p.name for p in fine] == ["p", "q"]


@pytest.mark.parametrize(
    ("a", "b", "winner"),
    [
        (((0, 0),), ((0, 0), (0, 0)), "a"),  # each victim adds 2³¹ + priority: one beats two
        (((500, 0),), ((0, 0), (0, 0)), "b"),  # lower highest victim priority
        (((10, 0), (10, 0)), ((10, 0), (0, 0)), "b"),  # lower priority sum
        (((0, 5),), ((0, 1),), "a"),  # latest start of the highest-priority victims
    ],
    ids=["smaller-shifted-sum", "lowest-top-priority", "lowest-sum", "latest-start"],
)
def test_pick_node_criteria(a, b, winner) -> None:  # type: ignore[no-untyped-def]
    def candidate(node: str, spec) -> Candidate:  # type: ignore[no-untyped-def]
        victims = tuple(
            BoundPod("ns", f"{node}{i}", node, priority=p, start_time=f"2026-01-01T00:00:0{s}Z")
            for i, (p, s) in enumerate(spec)
        )
        return Candidate(node, victims, 0)

    chosen, tied = pick_node([candidate("a", a), candidate("b", b)])
    assert chosen.node == winner and tied == (winner,)


def test_pdb_violations_come_before_everything_and_full_ties_name_every_node() -> None:
    pod = BoundPod("ns", "v", "x", priority=0)
    chosen, _ = pick_node([Candidate("a", (pod,), 1), Candidate("b", (pod, pod, pod), 0)])
    assert chosen.node == "b"
    chosen, tied = pick_node([Candidate("b", (pod,), 0), Candidate("a", (pod,), 0)])
    assert chosen.node == "a" and tied == ("a", "b")


def test_num_candidates_is_ten_percent_at_least_a_hundred() -> None:
    assert [num_candidates(n) for n in (7, 100, 999, 1000, 4000)] == [7, 100, 100, 100, 400]


# -- the scan window's inputs ------------------------------------------------------------------


def test_num_feasible_nodes_to_find_honours_a_configured_percentage() -> None:
    assert num_feasible_nodes_to_find(1_000, 30) == 300
    assert num_feasible_nodes_to_find(200, 10) == 100  # never fewer than 100
    assert num_feasible_nodes_to_find(99, 10) == 99  # below 100 nodes: all


def test_the_node_list_interleaves_zones_in_order_of_first_appearance() -> None:
    from vfcore.cluster import ClusterSnapshot, node

    def n(name: str, zone: str | None):
        return node(name, allocatable={"cpu": 1}, labels={ZONE: zone} if zone else {})

    cluster = ClusterSnapshot.of(
        [n("a1", "z1"), n("a2", "z1"), n("a3", "z1"), n("b1", "z2"), n("c1", None)]
    )
    assert scheduler_node_order(cluster) == ("a1", "b1", "c1", "a2", "a3")


def test_chunk_size_is_parallelize_chunk_size_for() -> None:
    # min(√n, n/16 + 1): √200 = 14.1 → 14 vs 13; √2000 = 44.7 → 44 vs 126
    assert (chunk_size(200), chunk_size(2_000), chunk_size(1), chunk_size(0)) == (13, 44, 1, 1)
