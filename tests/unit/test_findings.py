"""One finding type: Finding and its three JSON views, and Plan.passes_preflight."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import vfcore
from vfcore import (
    BATCH,
    ClusterSnapshot,
    ConsumerNode,
    Finding,
    Flow,
    FlowSpec,
    Issue,
    NodeSpec,
    ProcessorNode,
    ProducerNode,
    Reason,
    autoscaling_rejections,
    plan,
    validate,
)
from vfcore.cluster import node
from vfcore.errors import ERROR, INFO, WARNING, Problem, sort_findings
from vfcore.placement.fit import Unplaced
from vfcore.placement.mig import MigIssue, MigUnplaced
from vfcore.placement.packing import SolverConfig
from vfcore.placement.plan import Plan
from vfcore.placement.plan import Problem as PlanProblem
from vfcore.placement.plan import Unplaced as PlanUnplaced
from vfcore.placement.scheduler import remedy

CONFIG = SolverConfig.deterministic()
CLUSTERS = Path(__file__).resolve().parents[2] / "examples" / "clusters"
GPU = "nvidia.com/gpu"
SMALL = ClusterSnapshot.of([node("a", allocatable={"cpu": 8000, "memory": 2**35})])


# -- the type and its views -----------------------------------------------------------------


def test_every_old_name_is_the_one_finding_type():
    assert Issue is Finding
    assert MigIssue is Problem is PlanProblem
    assert MigUnplaced is Unplaced is PlanUnplaced
    assert issubclass(Problem, Finding) and issubclass(Reason, Finding)
    assert "Finding" in vfcore.__all__ and vfcore.Finding is Finding


@pytest.mark.parametrize(
    ("finding", "expected"),
    [
        (
            Issue("cycle", ERROR, "a", "a -> b -> a is a cycle", "remove one edge"),
            {
                "rule": "cycle",
                "severity": "error",
                "node": "a",
                "message": "a -> b -> a is a cycle",
                "hint": "remove one edge",
            },
        ),
        (
            Issue("flow-too-large", ERROR, None, "too many pods", "split it"),
            {
                "rule": "flow-too-large",
                "severity": "error",
                "node": None,
                "message": "too many pods",
                "hint": "split it",
            },
        ),
        (
            Problem("mig-multi-gpu", WARNING, "det", "needs 2 GPUs per pod", "leave cards"),
            {
                "code": "mig-multi-gpu",
                "severity": "warning",
                "message": "needs 2 GPUs per pod",
                "hint": "leave cards",
            },
        ),
        (
            Reason("gpu-node", INFO, "det", "GPU nodes are not autoscaled", "--gpu-autoscaling"),
            {"code": "gpu-node", "message": "GPU nodes are not autoscaled"},
        ),
    ],
    ids=[
        "issue-with-node",
        "issue-without-node",
        "problem-drops-subject",
        "reason-code-and-message",
    ],
)
def test_each_view_keeps_its_json_shape(finding, expected):
    assert finding.to_dict() == expected
    assert list(finding.to_dict()) == list(expected)  # key order is part of the bytes


def test_old_attribute_names_read_id_and_subject():
    f = Finding("cycle", ERROR, "a", "m", "h")
    assert (f.rule, f.code, f.node) == ("cycle", "cycle", "a")
    assert (f.id, f.subject) == ("cycle", "a")
    with pytest.raises((AttributeError, TypeError)):  # frozen: neither name can be set
        f.rule = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        f.id = "other"  # type: ignore[misc]


def test_issue_round_trips_through_its_dict():
    for f in (Issue("cycle", ERROR, "a", "m", "h"), Issue("x", WARNING, None, "m", "h")):
        assert Finding.from_dict(json.loads(json.dumps(f.to_dict()))) == f
    with pytest.raises(ValueError, match="unknown severity"):
        Finding.from_dict({"rule": "x", "severity": "fatal", "message": "m", "hint": "h"})


def test_severity_orders_errors_then_warnings_then_info():
    findings = [
        Finding("b", INFO, None, "m", "h"),
        Finding("a", WARNING, "z", "m", "h"),
        Finding("c", ERROR, "y", "m", "h"),
        Finding("a", WARNING, "a", "m", "h"),
        Finding("d", ERROR, None, "m", "h"),
    ]
    ordered = sort_findings(findings)
    assert [(f.severity, f.subject, f.id) for f in ordered] == [
        ("error", None, "d"),
        ("error", "y", "c"),
        ("warning", "a", "a"),
        ("warning", "z", "a"),
        ("info", None, "b"),
    ]
    assert sort_findings(reversed(findings)) == ordered
    assert [f.is_error for f in ordered] == [True, True, False, False, False]


def test_validate_returns_findings_with_the_documented_shape():
    spec = FlowSpec("f", "realtime", (NodeSpec("a", "processor", ("b",)),))
    issues = validate(spec)
    assert issues and all(isinstance(i, Finding) for i in issues)
    assert all(set(i.to_dict()) == {"rule", "severity", "node", "message", "hint"} for i in issues)


def test_autoscaling_reasons_are_info_findings_about_their_node():
    spec = FlowSpec(
        "f",
        "realtime",
        (
            NodeSpec("src", "producer"),
            NodeSpec("det", "processor", ("src",), device_type="gpu", gpu_count=1),
            NodeSpec("sink", "consumer", ("det",)),
        ),
    )
    reasons = autoscaling_rejections(spec)["det"]
    assert [r.code for r in reasons] == ["gpu-node"]
    assert all(isinstance(r, Finding) for r in reasons)
    assert all(r.severity == INFO and r.subject == "det" and r.hint for r in reasons)


# -- Plan.passes_preflight ------------------------------------------------------------------


class _Clips(ProducerNode):
    def next(self):
        raise StopIteration


class _Work(ProcessorNode):
    def process(self, item):
        return item


class _Store(ConsumerNode):
    def consume(self, item):
        pass


def _stranding_flow() -> Flow:
    """examples/stranding.py: two 2-GPU encoders and a 4-GPU model on two 4-GPU nodes."""
    clips = _Clips(name="clips")
    encode = _Work(
        name="encode",
        nb_tasks=2,
        device_type="gpu",
        gpu_count=2,
        requests={"cpu": "8", "memory": "32Gi"},
    )(clips)
    segment = _Work(
        name="segment", device_type="gpu", gpu_count=4, requests={"cpu": "16", "memory": "64Gi"}
    )(encode)
    return Flow([_Store(name="store")(segment)], flow_type=BATCH, name="stranding")


def _two_4gpu() -> ClusterSnapshot:
    folder = CLUSTERS / "two-4gpu"
    return ClusterSnapshot.from_kubernetes(
        json.loads((folder / "nodes.json").read_text()),
        json.loads((folder / "pods.json").read_text()),
    )


def _lands() -> Plan:
    """A plan that fits, and the scheduler model lands it without a remedy."""
    flow = Flow(
        [_Store(name="store")(_Work(name="work", requests={"cpu": "1"})(_Clips(name="clips")))],
        name="small",
    )
    out = plan(flow, SMALL, solver=CONFIG)
    assert out.verdict == "fits" and out.scheduler is not None
    assert out.scheduler.verdict == "lands" and out.scheduler.remedy is None
    return out


def _with_verdict(p: Plan, verdict: str, remedy_after: str | None = None) -> Plan:
    """``p`` with the scheduler model saying ``verdict`` (and a remedy ending in ``remedy_after``)."""
    report = p.scheduler
    assert report is not None
    fix = None
    if remedy_after is not None:
        real = remedy(p.pods, SMALL, p.placement)
        fix = replace(real, verdict_before=verdict, verdict_after=remedy_after)
    prediction = replace(report.prediction, verdict=verdict)
    return replace(p, scheduler=replace(report, prediction=prediction, remedy=fix))


def _error(code: str = "runtime-class-missing") -> Problem:
    return Problem(code, ERROR, None, "RuntimeClass 'x' does not exist", "create it")


def _warning() -> Problem:
    return Problem("runtime-class-not-requested", WARNING, None, "none requested", "pass one")


@pytest.mark.parametrize(
    ("variant", "passes"),
    [
        (lambda p: p, True),
        (lambda p: replace(p, problems=(_warning(),)), True),
        (lambda p: replace(p, verdict="unknown"), False),
        (lambda p: replace(p, verdict="does-not-fit"), False),
        (lambda p: replace(p, problems=(_warning(), _error())), False),
        (lambda p: replace(p, scheduler=None), False),
        (lambda p: _with_verdict(p, "strands"), False),
        (lambda p: _with_verdict(p, "at-risk"), False),
        (lambda p: _with_verdict(p, "unknown"), False),
        (lambda p: _with_verdict(p, "strands", remedy_after="lands"), True),
        (lambda p: _with_verdict(p, "strands", remedy_after="at-risk"), False),
        (lambda p: _with_verdict(p, "strands", remedy_after="strands"), False),
    ],
    ids=[
        "fits-and-lands-passes",
        "a-warning-problem-still-passes",
        "unknown-verdict-fails",
        "does-not-fit-fails",
        "an-error-problem-fails",
        "no-scheduler-model-fails",
        "strands-without-remedy-fails",
        "at-risk-fails",
        "scheduler-unknown-fails",
        "the-remedy-landing-passes",
        "a-remedy-at-risk-fails",
        "a-remedy-that-strands-fails",
    ],
)
def test_passes_preflight(variant, passes):
    assert variant(_lands()).passes_preflight is passes


def test_the_stranding_example_passes_because_its_remedy_lands():
    result = plan(_stranding_flow(), _two_4gpu(), solver=CONFIG)
    assert result.verdict == "fits"
    assert result.scheduler is not None and result.scheduler.verdict == "strands"
    assert result.scheduler.verdict_with_remedy == "lands"
    assert result.passes_preflight
    assert result.to_dict()["scheduler"]["verdict_with_remedy"] == "lands"


def test_shared_mode_without_runtime_class_fails_preflight_on_its_error_problem():
    cluster = ClusterSnapshot.of([node("g", allocatable={GPU: 1, "cpu": 8000, "memory": 2**35})])
    spec = FlowSpec(
        "f",
        "realtime",
        (
            NodeSpec("src", "producer"),
            NodeSpec("det", "processor", ("src",), device_type="gpu", gpu_memory_gib=4),
            NodeSpec("sink", "consumer", ("det",)),
        ),
    )
    result = plan(spec, cluster, gpu_mode="shared", solver=CONFIG)
    assert [p.code for p in result.problems] == ["shared-without-runtime-class"]
    assert all(isinstance(p, Problem) for p in result.problems)
    assert not result.passes_preflight
