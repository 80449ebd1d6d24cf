"""The scheduler model against what a real kube-scheduler v1.36 did, offline (the recorded table).

tests/data/scheduler_fidelity.json holds flows deployed with ``vf deploy`` on a
real control plane and, per workload, how many pods the real scheduler put on
each node (or zone). For every recorded case, some tie-break outcome of the
model must put the same number of pods on each node; for the cases measured
in issue 27, the bare-pod model (no owners, so no default spreading) must not,
which is what the workload model fixed. tests/cluster/test_scheduler_fidelity.py
deploys the same cases and can re-record the table.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler_cases import (
    case_cluster,
    case_facts,
    case_pods,
    case_workloads,
    counts_by_workload,
    every_outcome,
    load_cases,
)
from vfcore.placement.scheduler import predict

CASES = load_cases()
RECORDED = [c for c in CASES if "observed" in c or "observed_zones" in c]


def _observed(case: dict[str, Any]) -> tuple[dict[str, dict[str, int]], dict[str, str] | None]:
    if "observed" in case:
        return case["observed"], None
    zones = {n["name"]: n["zone"] for n in case["nodes"]}
    return case["observed_zones"], zones


def _matches(case: dict[str, Any], runs: list[Any]) -> bool:
    observed, zone_of = _observed(case)
    for run in runs:
        counts = counts_by_workload(run, zone_of)
        if all(counts.get(w) == per_node for w, per_node in observed.items()):
            return True
    return False


def test_the_table_has_recorded_cases() -> None:
    assert len(RECORDED) >= 3


@pytest.mark.parametrize("case", RECORDED, ids=[c["name"] for c in RECORDED])
def test_some_model_outcome_puts_each_workload_where_the_real_scheduler_did(case) -> None:  # type: ignore[no-untyped-def]
    pods, cluster = case_pods(case), case_cluster(case)
    runs = every_outcome(pods, cluster, workloads=case_workloads(case), facts=case_facts(case))
    assert runs and all(r.lands for r in runs)
    assert _matches(case, runs), [counts_by_workload(r) for r in runs[:5]]


@pytest.mark.parametrize(
    "case",
    [c for c in RECORDED if c["source"].startswith("issue 27")],
    ids=[c["name"] for c in RECORDED if c["source"].startswith("issue 27")],
)
def test_the_bare_pod_model_missed_the_issue_27_measurements(case) -> None:  # type: ignore[no-untyped-def]
    runs = every_outcome(case_pods(case), case_cluster(case))
    assert not _matches(case, runs)


def test_the_job_case_does_not_spread_and_the_bare_model_agrees() -> None:
    case = next(c for c in CASES if c["name"] == "job-4-on-one-big-three-small")
    pods, cluster = case_pods(case), case_cluster(case)
    with_workloads = every_outcome(pods, cluster, workloads=case_workloads(case))
    bare = every_outcome(pods, cluster)
    assert sorted(map(str, (counts_by_workload(r) for r in with_workloads))) == sorted(
        map(str, (counts_by_workload(r) for r in bare))
    )


def test_the_preemption_case_evicts_the_lowest_priority_pods() -> None:
    case = next(c for c in CASES if c["name"] == "preemption-of-a-low-priority-pod")
    prediction = predict(
        case_pods(case),
        case_cluster(case),
        workloads=case_workloads(case),
        facts=case_facts(case),
    )
    assert prediction.verdict == "lands"
    assert list(prediction.evicted) == case["expected_evicted"]
    [preemption] = prediction.preemptions
    assert (preemption.pod, preemption.node) == ("big/0", "a")
