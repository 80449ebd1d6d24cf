"""The wait loop through the official client against a fake API server (kmock).

BATCH completes only when every Job of the run is Complete — a failed or
unreadable Job listing, or a missing Job, is never "completed" (videoflow's
false success); REALTIME when every workload and pod is Ready; an
Unschedulable pod past the grace period aborts with the scheduler's message;
CrashLoopBackOff / ImagePullBackOff abort with the logs tail; Ctrl-C leaves the
run in place.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.kube_fake import FakeKube
from vfadapters.kubernetes.client import KubeClient, connect
from vfadapters.kubernetes.wait import WaitOptions, wait_for_run

pytest.importorskip("kubernetes")

NS = "default"
RUN = {"app.kubernetes.io/managed-by": "vf", "vfcore.io/flow": "demo-abc", "vfcore.io/run": "r1"}
SELECTOR = "app.kubernetes.io/managed-by=vf,vfcore.io/flow=demo-abc,vfcore.io/run=r1"
SCHEDULER_SAYS = (
    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are "
    "available: 3 No preemption victims found for incoming pod."
)


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    server = FakeKube().start()
    try:
        server.declare("v1/pods", "batch/v1/jobs", "apps/v1/deployments", "apps/v1/statefulsets")
        yield server
    finally:
        server.stop()


def client_for(fake: FakeKube, tmp_path: Path) -> KubeClient:
    return connect(kubeconfig=str(fake.kubeconfig(tmp_path / "kubeconfig")))


def job(
    name: str, condition: str | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if condition is not None:
        status["conditions"] = [
            {"type": condition, "status": "True", "reason": "BackoffLimitExceeded"
             if condition == "Failed" else "Completed",
             "message": "Job has reached the specified backoff limit"
             if condition == "Failed" else ""}
        ]  # fmt: skip
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": dict(labels or RUN)},
        "spec": {"completions": 1},
        "status": status,
    }


def pod(name: str, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {**RUN, "vfcore.io/node": "infer-x"}},
        "spec": {"containers": [{"name": "worker", "image": "img"}]},
        "status": {"phase": "Pending", **status},
    }


def options(**kw: Any) -> WaitOptions:
    base: dict[str, Any] = {
        "namespace": NS,
        "selector": SELECTOR,
        "flow_type": "batch",
        "jobs": ("demo-src", "demo-infer"),
        "poll_s": 0.05,
        "unschedulable_grace_s": 0.3,
        "unreadable_after_s": 0.4,
        "timeout_s": 10.0,
    }
    base.update(kw)
    return WaitOptions(**base)


def later(seconds: float, fn: Any) -> threading.Timer:
    timer = threading.Timer(seconds, fn)
    timer.start()
    return timer


def test_batch_completes_only_when_every_job_is_complete(fake: FakeKube, tmp_path: Path) -> None:
    fake.put("batch/v1/jobs", NS, job("demo-src", "Complete"))
    fake.put("batch/v1/jobs", NS, job("demo-infer"))
    # another run's completed Job with the same name prefix must not count
    fake.put("batch/v1/jobs", NS, job("demo-infer-r2", "Complete", {**RUN, "vfcore.io/run": "r2"}))
    said: list[str] = []
    timer = later(0.4, lambda: fake.put("batch/v1/jobs", NS, job("demo-infer", "Complete")))
    started = time.monotonic()
    result = wait_for_run(client_for(fake, tmp_path), options(), progress=said.append)
    timer.join()
    assert result.outcome == "completed", result.message
    assert time.monotonic() - started >= 0.35  # it waited for the second Job
    assert "1/2 job(s) complete" in said[0]


def test_missing_job_is_never_completed(fake: FakeKube, tmp_path: Path) -> None:
    fake.put("batch/v1/jobs", NS, job("demo-src", "Complete"))
    result = wait_for_run(client_for(fake, tmp_path), options(timeout_s=0.4))
    assert result.outcome == "timeout"
    assert "not found: demo-infer" in result.message


def test_failed_job_listing_is_never_completed(fake: FakeKube, tmp_path: Path) -> None:
    """The upstream bug: a Job listing that fails was reported as "completed"."""
    fake.put("batch/v1/jobs", NS, job("demo-src", "Complete"))
    fake.put("batch/v1/jobs", NS, job("demo-infer", "Complete"))
    fake.refuse("jobs", 500, "InternalError")
    result = wait_for_run(client_for(fake, tmp_path), options())
    assert result.outcome == "unreadable"
    assert not result.ok
    assert "InternalError" in result.message and "left in place" in result.message
    fake.refuse("jobs", 403, "Forbidden")
    result = wait_for_run(client_for(fake, tmp_path), options())
    assert result.outcome == "unreadable" and "Forbidden" in result.message


def test_job_listing_recovers_after_a_transient_failure(fake: FakeKube, tmp_path: Path) -> None:
    fake.put("batch/v1/jobs", NS, job("demo-src", "Complete"))
    fake.put("batch/v1/jobs", NS, job("demo-infer", "Complete"))
    fake.refuse("jobs", 503, "ServiceUnavailable")
    timer = later(0.2, lambda: fake.call(lambda h: h.refusals.clear()))
    said: list[str] = []
    result = wait_for_run(
        client_for(fake, tmp_path), options(unreadable_after_s=5.0), progress=said.append
    )
    timer.join()
    assert result.outcome == "completed"
    assert any("cannot read the run" in s for s in said)


def test_failed_job_aborts_with_its_reason(fake: FakeKube, tmp_path: Path) -> None:
    fake.put("batch/v1/jobs", NS, job("demo-src", "Complete"))
    fake.put("batch/v1/jobs", NS, job("demo-infer", "Failed"))
    failed_pod = pod("demo-infer-0-abcde", phase="Failed")
    failed_pod["metadata"]["labels"]["job-name"] = "demo-infer"
    fake.put("v1/pods", NS, failed_pod)
    fake.call(
        lambda h: h.logs.__setitem__((NS, "demo-infer-0-abcde"), "Traceback\nValueError: bad\n")
    )
    result = wait_for_run(client_for(fake, tmp_path), options())
    assert result.outcome == "failed" and result.job == "demo-infer"
    assert "BackoffLimitExceeded" in result.message
    assert result.logs is not None and "ValueError: bad" in result.logs


def test_unschedulable_pod_aborts_after_the_grace_period(fake: FakeKube, tmp_path: Path) -> None:
    unschedulable = pod(
        "demo-infer-0-xyz",
        conditions=[
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": SCHEDULER_SAYS}
        ],
    )  # fmt: skip
    fake.put("v1/pods", NS, unschedulable)
    fake.put("batch/v1/jobs", NS, job("demo-infer"))
    started = time.monotonic()
    result = wait_for_run(
        client_for(fake, tmp_path),
        options(explain=lambda p: "infer needs 4 GPUs on one node; the largest free is 1"),
    )
    assert result.outcome == "unschedulable"
    assert time.monotonic() - started >= 0.3  # not before the grace period
    assert result.pod == "demo-infer-0-xyz"
    assert result.scheduler_message == SCHEDULER_SAYS
    assert SCHEDULER_SAYS in result.message
    assert "vfcore: infer needs 4 GPUs" in result.message


def test_autoscaler_scale_up_keeps_the_wait_going(fake: FakeKube, tmp_path: Path) -> None:
    fake.declare("v1/events")
    unschedulable = pod(
        "demo-infer-0-xyz",
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": SCHEDULER_SAYS}],
    )  # fmt: skip
    fake.put("v1/pods", NS, unschedulable)
    fake.put("batch/v1/jobs", NS, job("demo-infer"))
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "demo-infer-0-xyz.1"},
        "involvedObject": {"kind": "Pod", "name": "demo-infer-0-xyz", "namespace": NS},
        "reason": "TriggeredScaleUp",
        "message": "pod triggered scale-up: [{gpu-pool 2->3 (max: 10)}]",
    }
    other = {**event, "metadata": {"name": "other.1"},
             "involvedObject": {"kind": "Pod", "name": "someone-else", "namespace": NS}}  # fmt: skip
    fake.put("v1/events", NS, other)  # another pod's scale-up does not count
    said: list[str] = []
    result = wait_for_run(client_for(fake, tmp_path), options(), progress=said.append)
    assert result.outcome == "unschedulable"
    fake.put("v1/events", NS, event)
    result = wait_for_run(client_for(fake, tmp_path), options(timeout_s=1.0), progress=said.append)
    assert result.outcome == "timeout"  # kept waiting: a node is on its way
    assert any("cluster autoscaler is adding a node for demo-infer-0-xyz" in s for s in said)


def test_pod_scheduled_within_the_grace_period_does_not_abort(
    fake: FakeKube, tmp_path: Path
) -> None:
    pending = pod(
        "demo-infer-0-xyz",
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": SCHEDULER_SAYS}],
    )  # fmt: skip
    fake.put("v1/pods", NS, pending)
    fake.put("batch/v1/jobs", NS, job("demo-src", "Complete"))
    fake.put("batch/v1/jobs", NS, job("demo-infer"))

    def scheduled() -> None:
        fake.put("v1/pods", NS, pod("demo-infer-0-xyz", phase="Running",
                                    conditions=[{"type": "PodScheduled", "status": "True"}]))  # fmt: skip
        time.sleep(0.5)
        fake.put("batch/v1/jobs", NS, job("demo-infer", "Complete"))

    timer = later(0.1, scheduled)
    result = wait_for_run(client_for(fake, tmp_path), options(unschedulable_grace_s=0.4))
    timer.join()
    assert result.outcome == "completed", result.message


@pytest.mark.parametrize(
    ("reason", "previous"), [("CrashLoopBackOff", True), ("ImagePullBackOff", False)]
)
def test_fatal_container_states_abort_with_the_logs_tail(
    fake: FakeKube, tmp_path: Path, reason: str, previous: bool
) -> None:
    crashing = pod(
        "demo-infer-0-xyz",
        phase="Running" if previous else "Pending",
        containerStatuses=[
            {"name": "worker", "ready": False, "restartCount": 4,
             "state": {"waiting": {"reason": reason, "message": "back-off 40s restarting"}}}
        ],
    )  # fmt: skip
    fake.put("v1/pods", NS, crashing)
    fake.put("batch/v1/jobs", NS, job("demo-infer"))
    lines = "".join(f"line {i}\n" for i in range(100))
    fake.call(lambda h: h.logs.__setitem__((NS, "demo-infer-0-xyz"), lines))
    result = wait_for_run(client_for(fake, tmp_path), options())
    assert result.outcome == "fatal-container"
    assert f"container worker: {reason}" in result.message
    assert result.logs is not None and "line 99" in result.logs
    log_requests = fake.call(
        lambda h: [dict(r.params) for r in h._requests if r.subresource == "log"]
    )
    assert log_requests[-1]["tailLines"] == "20"
    assert log_requests[-1].get("container") == "worker"
    assert ("previous" in log_requests[0]) is previous


def test_realtime_ready_when_every_workload_and_pod_is_ready(
    fake: FakeKube, tmp_path: Path
) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "demo-infer", "labels": RUN},
        "spec": {"replicas": 2},
        "status": {"readyReplicas": 1},
    }
    fake.put("apps/v1/deployments", NS, deployment)
    ready = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]
    fake.put("v1/pods", NS, pod("demo-infer-a", phase="Running", conditions=ready))

    def progress() -> None:
        fake.put("apps/v1/deployments", NS, {**deployment, "status": {"readyReplicas": 2}})
        fake.put("v1/pods", NS, pod("demo-infer-b", phase="Running", conditions=ready))

    timer = later(0.3, progress)
    said: list[str] = []
    result = wait_for_run(
        client_for(fake, tmp_path),
        options(flow_type="realtime", jobs=(), workloads=(("Deployment", "demo-infer"),)),
        progress=said.append,
    )
    timer.join()
    assert result.outcome == "ready", result.message
    assert "demo-infer 1/2" in said[0]


def test_ctrl_c_leaves_the_run(fake: FakeKube, tmp_path: Path) -> None:
    fake.put("batch/v1/jobs", NS, job("demo-infer"))
    calls = {"n": 0}

    def sleep(s: float) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        time.sleep(s)

    result = wait_for_run(client_for(fake, tmp_path), options(sleep=sleep))
    assert result.outcome == "interrupted"
    assert fake.get("batch/v1/jobs", NS, "demo-infer") is not None  # nothing deleted
    deletes = fake.call(lambda h: [r for r in h._requests if r.method.value.upper() == "DELETE"])
    assert deletes == []


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda j: j.__setitem__("status", [1]), "an item cannot be read"),
        (lambda j: j.__setitem__("spec", "x"), "an item cannot be read"),
        (lambda j: j["status"].__setitem__("conditions", "Complete"), "is not a list"),
        (
            lambda j: j["status"].__setitem__("succeeded", "1"),
            "status.succeeded = '1' is not a count",
        ),
    ],
    ids=["status a list", "spec a string", "conditions a string", "succeeded a string"],
)
def test_a_job_the_wait_cannot_read_is_never_completed(
    fake: FakeKube, tmp_path: Path, change: Any, said: str
) -> None:
    """Issue 23: an object of the wrong shape is the run's state unknown, never a crash or done."""
    fake.put("batch/v1/jobs", NS, job("demo-src", "Complete"))
    broken = job("demo-infer", "Complete")
    change(broken)
    fake.put("batch/v1/jobs", NS, broken)
    result = wait_for_run(client_for(fake, tmp_path), options())
    assert result.outcome == "unreadable" and not result.ok, result.message
    assert said in result.message
