"""The scheduler model by Kubernetes version: 1.36's BalancedAllocation, TaintToleration and
NodeAffinity scoring, tie-breaking wording, and ``kube_version`` parsing.

Every number here is computed by hand in the docstring or comment beside it, from the
formulas in docs/scheduler-model.md (Go integer arithmetic: ``//`` truncates, ``int()``
of a float truncates).
"""

from __future__ import annotations

import pytest

from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, NodeState, Taint, Toleration, node
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.scheduler import ScoringConfig, node_score, predict, simulate
from vfcore.placement.scheduler.scoring import (
    KUBE_VERSIONS,
    PreferredTerm,
    balance,
    intolerable_prefer_no_schedule,
    normalised_totals,
    normalize_scores,
    parse_kube_version,
    preferred_affinity_score,
)

GPU = "nvidia.com/gpu"
GIB = 2**30
MIB = 2**20
OLD = ScoringConfig(kube_version="1.35")
NEW = ScoringConfig()  # the default: 1.36


def mem_pod(name: str, gib: int) -> PodRequest:
    """A pod asking memory only (no cpu request: the scorer's NonZeroRequested counts 100m)."""
    return PodRequest(f"{name}/0", name, 0, (("memory", gib * GIB),))


def small_node(name: str, **requested: int) -> NodeState:
    return node(
        name,
        allocatable={"cpu": 4_000, "memory": 16 * GIB, "pods": 110},
        requested=requested,
    )


# -- BalancedAllocation, 1.36 (kubernetes PR #135573) ----------------------------------

#: (used cpu, used memory, pod cpu, pod memory) on a 4-cpu / 16 GiB node →
#: (balance without, balance with, 1.35 score, 1.36 score).
BALANCED_136 = {
    # without: fractions (0, 0) → 100; with: (0, 0.25) → 1 - 0.125 → 87.
    # 1.36: 50 + (50 + 87 - 100) // 2 = 50 + 37 // 2 = 68.
    "empty node, 4 GiB memory-only pod": ((0, 0, 0, 4 * GIB), (100, 87, 87, 68)),
    # without: (0, 0.25) → 87; with: (0, 0.5) → 75. 1.36: 50 + (50 + 75 - 87) // 2 = 69.
    "node holding 4 GiB, another 4 GiB pod": ((0, 4 * GIB, 0, 4 * GIB), (87, 75, 75, 69)),
    # without: (0.5, 0.03125) → 1 - 0.234375 → 76; with: (0.5, 0.28125) → 1 - 0.109375 → 89.
    # 1.36: 50 + (50 + 89 - 76) // 2 = 50 + 63 // 2 = 81 (the pod improves the balance).
    "cpu-heavy node, memory pod evens it": ((2_000, 512 * MIB, 0, 4 * GIB), (76, 89, 89, 81)),
    # without (0.5, 0) → 1 - 0.25 → 75; with (0.5, 0.5) → 100.
    # 1.36: 50 + (50 + 100 - 75) // 2 = 50 + 75 // 2 = 87.
    "memory pod balances a half-cpu node": ((2_000, 0, 0, 8 * GIB), (75, 100, 100, 87)),
    # perfectly balanced → perfectly unbalanced: without (0, 0) → 100, with (1, 0) → 50;
    # 1.36: 50 + (50 + 50 - 100) // 2 = 50, the lowest score.
    "balanced to unbalanced is the lowest, 50": ((0, 0, 4_000, 0), (100, 50, 50, 50)),
    # no change in balance: (0.25, 0.25) → (0.5, 0.5): 100 both; 1.36: 50 + 50 // 2 = 75.
    "no change in balance scores 75": ((1_000, 4 * GIB, 1_000, 4 * GIB), (100, 100, 100, 75)),
}


@pytest.mark.parametrize(("inputs", "expected"), BALANCED_136.values(), ids=BALANCED_136.keys())
def test_balanced_allocation_before_and_from_1_36(inputs, expected):
    used_cpu, used_memory, pod_cpu, pod_memory = inputs
    without, with_pod, old_score, new_score = expected
    alloc = 4_000, 16 * GIB
    assert balance([used_cpu / alloc[0], used_memory / alloc[1]]) == without
    assert balance([(used_cpu + pod_cpu) / alloc[0], (used_memory + pod_memory) / alloc[1]]) == (
        with_pod
    )
    requests = {k: v for k, v in (("cpu", pod_cpu), ("memory", pod_memory)) if v}
    pod = PodRequest("p/0", "p", 0, tuple(sorted(requests.items())))
    used = {k: v for k, v in (("cpu", used_cpu), ("memory", used_memory)) if v}
    on = small_node("a", **used)
    assert node_score(pod, on, config=OLD).balanced == old_score
    assert node_score(pod, on, config=NEW).balanced == new_score


def test_one_scored_resource_or_none_allocatable_scores_75_from_1_36():
    """One fraction (or none: allocatable 0 is skipped) means std 0 on both sides: 100 and 100
    → ``50 + (50 + 100 - 100) // 2 = 75``; up to 1.35 the score is the balance itself, 100."""
    pod = PodRequest("p/0", "p", 0, (("cpu", 500),))
    cpu_only = ScoringConfig(balanced_resources=("cpu",))
    on = node("a", allocatable={"cpu": 1_000})
    assert node_score(pod, on, config=cpu_only).balanced == 75
    assert (
        node_score(
            pod, on, config=ScoringConfig(balanced_resources=("cpu",), kube_version="1.35")
        ).balanced
        == 100
    )
    no_memory = node("b", allocatable={"cpu": 1_000, "memory": 0})
    assert (
        node_score(PodRequest("q/0", "q", 0, (("cpu", 500), ("memory", GIB))), no_memory).balanced
        == 75
    )


def test_the_4_4_14_gib_case_lands_under_1_36_and_strands_under_1_35():
    """Two 4-cpu / 16 GiB nodes, memory-only pods asking 4, 4 and 14 GiB, in that order.

    The issue measured this on a real cluster, whose nodes carry system pods. On bare
    nodes the model sends the second pod to the empty node under both versions
    (LeastAllocated: 86 there against 72 on the half-full one outweighs BalancedAllocation's
    68 against 69), so here node ``b`` already holds a cpu-heavy pod (2 cpu, 512 MiB), as a
    node with system pods does. Hand-computed totals (fit + balanced):

    - pod 1 (4 GiB): ``a`` fit (97 + 75) // 2 = 86, ``b`` fit (47 + 71) // 2 = 59;
      balanced 1.35: a 87, b 89 → 173 vs 148; 1.36: a 68, b 81 → 154 vs 140. Both: ``a``.
    - pod 2 (4 GiB): ``a`` fit (95 + 50) // 2 = 72, ``b`` 59; balanced 1.35: a 75, b 89 →
      147 vs **148** → ``b``; 1.36: a 69, b 81 → **141** vs 140 → ``a``.
    - pod 3 (14 GiB): 1.35 leaves 12 and 11.5 GiB free: stranded. 1.36 leaves ``b`` with
      15.5 GiB: it lands.
    """
    cluster = ClusterSnapshot.of([small_node("a"), small_node("b", cpu=2_000, memory=512 * MIB)])
    pods = [mem_pod("p1", 4), mem_pod("p2", 4), mem_pod("p3", 14)]
    old = predict(pods, cluster, config=OLD)
    new = predict(pods, cluster, config=NEW)
    assert (old.verdict, old.stranded_always) == ("strands", ("p3/0",))
    assert (new.verdict, new.stranded) == ("lands", ())
    run = simulate(pods, cluster, config=NEW)
    assert run.placement == {"p1/0": "a", "p2/0": "a", "p3/0": "b"}
    assert [s.score for s in run.steps][:2] == [154, 141]
    assert [s.score for s in simulate(pods, cluster, config=OLD).steps][:2] == [173, 148]


def test_the_4_4_14_gib_case_on_bare_nodes_strands_under_both_versions():
    """The bare-node variant (see above): the model's arithmetic strands the 14 GiB pod under
    both formulas; what lands it on a real cluster is the nodes' existing load."""
    cluster = ClusterSnapshot.of([small_node("a"), small_node("b")])
    pods = [mem_pod("p1", 4), mem_pod("p2", 4), mem_pod("p3", 14)]
    assert predict(pods, cluster, config=OLD).verdict == "strands"
    assert predict(pods, cluster, config=NEW).verdict == "strands"


# -- TaintToleration (PreferNoSchedule) and NodeAffinity (preferred) --------------------


def gpu_pod(name: str, gpus: int) -> PodRequest:
    """A whole-GPU pod with cpu and memory in proportion (4 cpu, 16 GiB a GPU)."""
    requests = {GPU: gpus, "cpu": 4_000 * gpus, "memory": 16 * GIB * gpus}
    return PodRequest(
        f"{name}/0",
        name,
        0,
        tuple(sorted(requests.items())),
        node_selector=(GPU_PRESENT_LABEL,),
        tolerations=(GPU_TOLERATION,),
        slice="whole",
    )


def gpu_node(name: str, *taints: Taint) -> NodeState:
    return node(
        name,
        allocatable={GPU: 4, "cpu": 16_000, "memory": 64 * GIB, "pods": 110},
        labels=dict([GPU_PRESENT_LABEL]),
        taints=taints,
    )


SOFT = Taint("nvidia.com/gpu", "spare", "PreferNoSchedule")


def test_prefer_no_schedule_lands_2_2_4_where_the_old_model_strands():
    """Pods of 2, 2 and 4 GPUs on two 4-GPU nodes; node ``b`` has a ``PreferNoSchedule`` taint
    (``nvidia.com/gpu=spare``) that the pods do not tolerate: vfcore's GPU toleration is for
    ``NoSchedule`` only, and TaintToleration's score counts only tolerations whose effect is
    empty or ``PreferNoSchedule``.

    Without TaintToleration scoring (``taint_weight=0``, the model before this change) the
    default cpu/memory LeastAllocated spreads: pod 1 anywhere, pod 2 to the other node
    (1.36 numbers: a: cpu (16000-16000)*100//16000 = 0, memory 0 → 0, balanced 75; b: 50 and
    50 → 50, balanced 75; 1.35's balanced is 100 on both), and the 4-GPU pod strands in every outcome. With it, the counts are a 0,
    b 1 → normalised (reverse) a 100, b 0, × 3: pod 2 scores 0 + 75 + 300 = 375 on ``a``
    against 50 + 75 = 125 on ``b``, so pods 1 and 2 share ``a`` and the 4-GPU pod takes
    ``b`` (the only feasible node: its count 1 is the max → 0, a constant).
    """
    cluster = ClusterSnapshot.of([gpu_node("a"), gpu_node("b", SOFT)])
    pods = [gpu_pod("p1", 2), gpu_pod("p2", 2), gpu_pod("p3", 4)]
    for version in ("1.35", "1.36"):
        blind = predict(pods, cluster, config=ScoringConfig(kube_version=version, taint_weight=0))
        assert (blind.verdict, blind.stranded_always) == ("strands", ("p3/0",))
        seen = predict(pods, cluster, config=ScoringConfig(kube_version=version))
        assert seen.verdict == "lands", version
        run = simulate(pods, cluster, config=ScoringConfig(kube_version=version))
        assert run.placement == {"p1/0": "a", "p2/0": "a", "p3/0": "b"}
    run = simulate(pods, cluster, config=NEW)
    # 1.36, pod 2 on a: fit (0 + 0) // 2 = 0, balanced 50 + (50 + 100 - 100) // 2 = 75, taint 300.
    assert run.steps[1].score == 375


def test_a_tolerated_prefer_no_schedule_taint_scores_nothing():
    """A toleration with an empty effect (or ``PreferNoSchedule``) covers the taint: every
    feasible node counts 0, the normalised score is 100 everywhere, and the model spreads as
    before (pod 3 strands)."""
    tolerant = Toleration("nvidia.com/gpu", "Exists")
    pods = [
        PodRequest(
            p.pod, p.node, 0, p.requests, p.node_selector, (GPU_TOLERATION, tolerant), None, "whole"
        )
        for p in (gpu_pod("p1", 2), gpu_pod("p2", 2), gpu_pod("p3", 4))
    ]
    cluster = ClusterSnapshot.of([gpu_node("a"), gpu_node("b", SOFT)])
    assert predict(pods, cluster, config=NEW).verdict == "strands"


TAINT_COUNTS = {
    "no taints": ((), (GPU_TOLERATION,), 0),
    "NoSchedule taints are the filter's, not the score's": (
        (Taint("x", "", "NoSchedule"),),
        (),
        0,
    ),
    "two untolerated PreferNoSchedule": (
        (Taint("x", "1", "PreferNoSchedule"), Taint("y", "", "PreferNoSchedule")),
        (),
        2,
    ),
    "a NoSchedule toleration does not cover PreferNoSchedule": (
        (SOFT,),
        (GPU_TOLERATION,),
        1,
    ),
    "an Equal toleration with the wrong value does not": (
        (SOFT,),
        (Toleration("nvidia.com/gpu", "Equal", "busy", "PreferNoSchedule"),),
        1,
    ),
    "an Equal toleration with the value does": (
        (SOFT,),
        (Toleration("nvidia.com/gpu", "Equal", "spare", "PreferNoSchedule"),),
        0,
    ),
    "a key-less Exists tolerates everything": ((SOFT,), (Toleration(None, "Exists"),), 0),
}


@pytest.mark.parametrize(
    ("taints", "tolerations", "count"), TAINT_COUNTS.values(), ids=TAINT_COUNTS.keys()
)
def test_intolerable_prefer_no_schedule_counts(taints, tolerations, count):
    assert intolerable_prefer_no_schedule(taints, tolerations) == count


#: raw scores → DefaultNormalizeScore(100, reverse) (Go: ``100 * s // max``, reverse ``100 - ...``).
NORMALISE = {
    "taints 0, 1, 2 → 100, 50, 0": ([0, 1, 2], True, [100, 50, 0]),
    "taints 0, 0 → 100, 100 (max 0, reverse)": ([0, 0], True, [100, 100]),
    "taints 1, 3 → 100 - 33, 0 = 67, 0": ([1, 3], True, [67, 0]),
    "affinity 0, 30, 80 → 0, 37, 100": ([0, 30, 80], False, [0, 37, 100]),
    "affinity 0, 0 → 0, 0 (max 0)": ([0, 0], False, [0, 0]),
}


@pytest.mark.parametrize(("raw", "reverse", "expected"), NORMALISE.values(), ids=NORMALISE.keys())
def test_default_normalize_score(raw, reverse, expected):
    assert normalize_scores(raw, reverse=reverse) == expected


def test_weights_combine_taints_and_preferred_affinity():
    """Totals 100, 100, 100; taint counts 0, 1, 1 → 100, 0, 0 (× 3); affinity 0, 50, 100 →
    0, 50, 100 (× 2): 400, 200, 300. Constant plugins add nothing; weight 0 turns one off."""
    assert normalised_totals(NEW, [100, 100, 100], [0, 1, 1], [0, 50, 100]) == [400, 200, 300]
    assert normalised_totals(NEW, [7, 9], [1, 1], [5, 5]) == [7, 9]
    off = ScoringConfig(taint_weight=0, node_affinity_weight=0)
    assert normalised_totals(off, [7, 9], [0, 1], [0, 5]) == [7, 9]


def test_preferred_terms_sum_their_weights():
    terms = (
        PreferredTerm(60, (("zone", "In", ("a", "b")),)),
        PreferredTerm(30, (("gpu", "Exists", ()), ("tier", "NotIn", ("spot",)))),
        PreferredTerm(10, (("gen", "Gt", ("3",)),)),
    )
    assert preferred_affinity_score(terms, {"zone": "a", "gpu": "h100", "gen": "4"}) == 100
    assert preferred_affinity_score(terms, {"zone": "c", "gpu": "h100", "tier": "spot"}) == 0
    assert preferred_affinity_score(terms, {"zone": "b", "gen": "x"}) == 60
    with pytest.raises(InvalidInputError) as err:
        PreferredTerm(0, ())
    assert err.value.rule == "invalid-preferred-term"
    with pytest.raises(InvalidInputError):
        PreferredTerm(5, (("zone", "Near", ("a",)),))


# -- versions -----------------------------------------------------------------------------

VERSIONS_OK = {
    "1.36": "1.36",
    "v1.35": "1.35",
    "1.29.7": "1.29",
    " 1.30 ": "1.30",
}


@pytest.mark.parametrize(("text", "canonical"), VERSIONS_OK.items(), ids=VERSIONS_OK.keys())
def test_kube_versions_parse(text, canonical):
    assert parse_kube_version(text) == canonical
    assert ScoringConfig(kube_version=text).kube_version == canonical


VERSIONS_BAD = {
    "too old": ("1.28", "unsupported-kube-version"),
    "too new": ("1.37", "unsupported-kube-version"),
    "major 2": ("2.0", "unsupported-kube-version"),
    "no minor": ("1", "invalid-kube-version"),
    "words": ("latest", "invalid-kube-version"),
    "empty": ("", "invalid-kube-version"),
    "a number, not text": (1.36, "invalid-kube-version"),
}


@pytest.mark.parametrize(("text", "rule"), VERSIONS_BAD.values(), ids=VERSIONS_BAD.keys())
def test_bad_kube_versions_are_named_errors(text, rule):
    with pytest.raises(InvalidInputError) as err:
        ScoringConfig(kube_version=text)
    assert err.value.rule == rule
    assert "1.36" in err.value.hint


def test_versions_and_what_they_change():
    assert KUBE_VERSIONS[0] == "1.29" and KUBE_VERSIONS[-1] == "1.36"
    assert NEW.kube_version == "1.36" and NEW.balanced_scores_change and not NEW.uniform_ties
    assert not OLD.balanced_scores_change and OLD.uniform_ties
    assert NEW.to_dict()["kube_version"] == "1.36"
    assert (NEW.taint_weight, NEW.node_affinity_weight) == (3, 2)


# -- ties: outcomes explored, a probability only where the scheduler has one ---------------


def test_1_36_prints_outcomes_explored_and_no_probability():
    """Two identical empty 4-GPU nodes (big enough that cpu/memory defaults do not move the
    score), pods 2, 2, 4 GPUs: P2 ties between the loaded and the empty node. Up to 1.35 the
    scheduler draws that tie uniformly (reservoir sampling), so P(strand) = 1/2 is its own;
    1.36 usually gives it to the earliest node in its list, so the model reports the two
    outcomes explored and no probability."""
    big = {"cpu": 32_000, "memory": 128 * GIB}
    nodes = [node(n, allocatable={GPU: 4, **big}, labels=dict([GPU_PRESENT_LABEL])) for n in "ab"]
    cluster = ClusterSnapshot.of(nodes)
    pods = [
        PodRequest(
            f"p{i}/0",
            f"p{i}",
            0,
            ((GPU, g),),
            node_selector=(GPU_PRESENT_LABEL,),
            tolerations=(GPU_TOLERATION,),
            slice="whole",
        )
        for i, g in enumerate((2, 2, 4), start=1)
    ]
    new = predict(pods, cluster, config=NEW)
    old = predict(pods, cluster, config=OLD)
    assert new.verdict == old.verdict == "at-risk"
    assert new.outcomes_explored == old.outcomes_explored == 2
    assert "P(strand)" not in new.reason and "2 tie-break outcome(s)" in new.reason
    assert new.to_dict()["strand_probability"] is None
    assert new.to_dict()["tie_break"] == "earliest-node"
    assert "P(strand) = 1/2 with uniform ties (up to 1.35)" in old.reason
    assert old.to_dict()["strand_probability"] == "1/2"


# -- vf plan --kube-version -------------------------------------------------------------------


def test_vf_plan_takes_a_kube_version_and_names_a_bad_one():
    from tests.integration.cli_helpers import REPO, assert_bad_input, one_json_document, run_vf

    flow, clusters = REPO / "examples" / "traffic.py", REPO / "examples" / "clusters" / "gpu-pool"
    result = run_vf("plan", flow, "--cluster", clusters, "--kube-version", "v1.35.2", "--json")
    assert result.returncode == 0, result.stderr
    scheduler = one_json_document(result)["scheduler"]
    assert scheduler["config"]["kube_version"] == "1.35"
    assert scheduler["tie_break"] == "uniform-random"
    text = run_vf("plan", flow, "--cluster", clusters)
    assert "kube-scheduler model (1.36):" in text.stdout
    assert_bad_input(
        run_vf("plan", flow, "--cluster", clusters, "--kube-version", "1.40"),
        "unsupported-kube-version",
    )
    assert_bad_input(
        run_vf("plan", flow, "--cluster", clusters, "--kube-version", "latest"),
        "invalid-kube-version",
    )


def test_plan_threads_kube_version_into_the_scheduler_model():
    from vfcore.placement.plan import plan_pods

    cluster = ClusterSnapshot.of([small_node("a"), small_node("b", cpu=2_000, memory=512 * MIB)])
    pods = [mem_pod("p1", 4), mem_pod("p2", 4), mem_pod("p3", 14)]
    new, old = plan_pods(pods, cluster), plan_pods(pods, cluster, kube_version="1.35")
    assert new.verdict == old.verdict == "fits"
    assert new.scheduler is not None and old.scheduler is not None
    assert (new.scheduler.verdict, old.scheduler.verdict) == ("lands", "strands")
    with pytest.raises(InvalidInputError) as err:
        plan_pods(pods, cluster, kube_version="1.2")
    assert err.value.rule == "unsupported-kube-version"
