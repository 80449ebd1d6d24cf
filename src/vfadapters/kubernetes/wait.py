"""The wait loop after an apply: until the run is done, or why it never will be.

:func:`wait_for_run` polls the run's Jobs, workloads and pods (by the run's
label selector) every ``poll_s`` seconds and ends with a :class:`WaitResult`:

- ``completed`` (BATCH): every Job the run created has condition
  ``Complete=True``. A Job listing that fails, cannot be read, or lacks one of
  the run's Jobs is **never** "completed" (videoflow reported a failed listing as
  completed and tore the flow down); listings that keep failing for
  ``unreadable_after_s`` end the wait with ``unreadable`` and leave the run in
  place;
- ``ready`` (REALTIME): every Deployment and StatefulSet has ``readyReplicas >=
  spec.replicas``, and every pod not yet Succeeded is Ready;
- ``failed``: a Job has ``Failed=True`` (its reason and message, and the logs
  tail of a failed pod);
- ``unschedulable``: a pod stayed ``PodScheduled=False`` with reason
  ``Unschedulable`` longer than ``unschedulable_grace_s`` and the cluster
  autoscaler has not reported ``TriggeredScaleUp`` for it (its Events; while it
  has, the wait goes on until ``timeout_s``); the message is the scheduler's own (``0/3 nodes are available: 3 Insufficient nvidia.com/gpu…``),
  next to vfcore's explanation when the caller gives one (``explain``);
- ``fatal-container``: a container waits in CrashLoopBackOff,
  ImagePullBackOff, InvalidImageName, CreateContainerConfigError or
  CreateContainerError (ErrImagePull counts after the grace period); the message
  carries the container's logs tail (the previous instance's for a crash loop);
- ``timeout``: ``timeout_s`` passed;
- ``interrupted``: Ctrl-C. Nothing is deleted: the caller prints the teardown
  command.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from vfadapters.kubernetes.client import KubeApiError, KubeClient
from vfadapters.kubernetes.snapshot import list_all

__all__ = [
    "FATAL_WAITING",
    "Outcome",
    "WaitOptions",
    "WaitResult",
    "logs_tail",
    "wait_for_run",
]

Outcome = Literal[
    "completed",
    "ready",
    "failed",
    "unschedulable",
    "fatal-container",
    "timeout",
    "interrupted",
    "unreadable",
]

#: Container waiting reasons that will not fix themselves.
FATAL_WAITING = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)
#: Waiting reasons that are fatal once they last past the grace period.
SLOW_FATAL_WAITING = frozenset({"ErrImagePull", "RunContainerError"})

LOG_TAIL_LINES = 20


@dataclass(frozen=True)
class WaitOptions:
    """What to wait for, and how patiently."""

    namespace: str
    selector: str
    flow_type: str  # "batch" or "realtime" (vfcore.BATCH, vfcore.REALTIME)
    #: Jobs the run created (names): BATCH completes only when each is Complete.
    jobs: tuple[str, ...] = ()
    #: Deployments / StatefulSets the run created (kind, name).
    workloads: tuple[tuple[str, str], ...] = ()
    unschedulable_grace_s: float = 60.0
    timeout_s: float | None = None
    poll_s: float = 2.0
    unreadable_after_s: float = 60.0
    #: vfcore's explanation of why a pod does not fit (pod name → text, or None).
    explain: Callable[[Mapping[str, Any]], str | None] | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass
class WaitResult:
    """How the wait ended; ``message`` is what a person reads, ``pod``/``job`` what it is about."""

    outcome: Outcome
    message: str
    pod: str | None = None
    job: str | None = None
    scheduler_message: str | None = None
    explanation: str | None = None
    logs: str | None = None
    waited_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.outcome in ("completed", "ready")

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "message": self.message,
            "pod": self.pod,
            "job": self.job,
            "scheduler_message": self.scheduler_message,
            "explanation": self.explanation,
            "logs": self.logs,
            "waited_s": round(self.waited_s, 3),
        }


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    status = obj.get("status") or {}
    out: dict[str, Mapping[str, Any]] = {}
    for c in status.get("conditions") or []:
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            out[c["type"]] = c
    return out


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "?")


def logs_tail(
    client: KubeClient, namespace: str, pod: str, container: str | None, *, previous: bool
) -> str:
    """The last lines of a container's log, or why they cannot be read."""
    from urllib.parse import quote

    query: dict[str, str | int | bool] = {"tailLines": LOG_TAIL_LINES}
    if container:
        query["container"] = container
    if previous:
        query["previous"] = True
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}/log"
    try:
        answer = client.request("GET", path, query=query)
    except KubeApiError as exc:
        return f"(logs unavailable: {exc.message})"
    if not answer.ok:
        if previous:  # no previous instance yet: the current one's
            return logs_tail(client, namespace, pod, container, previous=False)
        return f"(logs unavailable: {answer.status_line()})"
    return answer.text.rstrip() or "(the log is empty)"


class _Unreadable(Exception):
    pass


def _list(client: KubeClient, path: str, kind: str, selector: str) -> list[Mapping[str, Any]]:
    try:
        doc, failed = list_all(client, path, kind, label_selector=selector)
    except KubeApiError as exc:
        raise _Unreadable(f"{kind}: {exc.message}") from None
    if doc is None:
        assert failed is not None
        raise _Unreadable(f"{kind}: {failed.status_line()}")
    items: list[Mapping[str, Any]] = []
    for item in doc["items"]:
        fields = ("metadata", "spec", "status")
        if not isinstance(item, Mapping) or not all(
            isinstance(item.get(f) or {}, Mapping) for f in fields
        ):
            # what the wait cannot read is never "complete" or "ready": the run's state is unknown
            raise _Unreadable(f"{kind}: an item cannot be read ({str(item)[:120]})")
        status = item.get("status") or {}
        conditions = status.get("conditions")
        if conditions is not None and not isinstance(conditions, list):
            raise _Unreadable(f"{kind}: {_name(item)}'s status.conditions is not a list")
        counts = [("spec.replicas", (item.get("spec") or {}).get("replicas"))]
        counts += [(f"status.{k}", status.get(k)) for k in ("readyReplicas", "succeeded")]
        for where, value in counts:
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 0
            ):
                raise _Unreadable(f"{kind}: {_name(item)}'s {where} = {value!r} is not a count")
        items.append(item)
    return items


def _ns_path(api: str, namespace: str, plural: str) -> str:
    from urllib.parse import quote

    base = "/api/v1" if api == "v1" else f"/apis/{api}"
    return f"{base}/namespaces/{quote(namespace, safe='')}/{plural}"


def _pod_is_ready(pod: Mapping[str, Any]) -> bool:
    ready = _conditions(pod).get("Ready")
    return bool(ready and ready.get("status") == "True")


def _scale_up(client: KubeClient, namespace: str, pod: str) -> bool:
    """Whether the cluster autoscaler reported ``TriggeredScaleUp`` for ``pod`` (its Events).

    An Event listing that fails says nothing: the pod is then treated as stuck.
    """
    from urllib.parse import quote

    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/events"
    selector = f"involvedObject.kind=Pod,involvedObject.name={pod}"
    try:
        answer = client.get_json(path, query={"fieldSelector": selector})
    except KubeApiError:
        return False
    items = answer.body.get("items") if answer.ok and isinstance(answer.body, Mapping) else None
    return any(
        isinstance(e, Mapping) and e.get("reason") == "TriggeredScaleUp" for e in items or []
    )


def wait_for_run(
    client: KubeClient,
    opts: WaitOptions,
    *,
    progress: Callable[[str], None] | None = None,
) -> WaitResult:
    """Poll until the run is done or cannot be; see the module docstring."""
    started = opts.clock()
    unschedulable_since: dict[str, float] = {}
    slow_fatal_since: dict[tuple[str, str], float] = {}
    unreadable_since: float | None = None
    last_said = ""

    def result(outcome: Outcome, message: str, **kw: Any) -> WaitResult:
        return WaitResult(outcome, message, waited_s=opts.clock() - started, **kw)

    try:
        while True:
            now = opts.clock()
            try:
                pods = _list(
                    client, _ns_path("v1", opts.namespace, "pods"), "PodList", opts.selector
                )
                jobs = _list(
                    client, _ns_path("batch/v1", opts.namespace, "jobs"), "JobList", opts.selector
                )
                workloads: list[Mapping[str, Any]] = []
                if opts.flow_type.lower() != "batch":
                    for plural, kind in (
                        ("deployments", "DeploymentList"),
                        ("statefulsets", "StatefulSetList"),
                    ):
                        workloads += [
                            {**w, "kind": kind[: -len("List")]}
                            for w in _list(
                                client,
                                _ns_path("apps/v1", opts.namespace, plural),
                                kind,
                                opts.selector,
                            )
                        ]
            except _Unreadable as exc:
                if unreadable_since is None:
                    unreadable_since = now
                if now - unreadable_since >= opts.unreadable_after_s:
                    return result(
                        "unreadable",
                        f"the run's objects could not be read for {now - unreadable_since:.0f} s "
                        f"({exc}); its state is unknown and it was left in place",
                    )
                if progress is not None:
                    progress(f"cannot read the run ({exc}); retrying")
                opts.sleep(opts.poll_s)
                continue
            unreadable_since = None

            # pods: unschedulable and fatal container states
            scaling_up: list[str] = []
            for pod in pods:
                name = _name(pod)
                phase = (pod.get("status") or {}).get("phase")
                if phase in ("Succeeded", "Failed"):
                    continue
                scheduled = _conditions(pod).get("PodScheduled")
                if (
                    scheduled is not None
                    and scheduled.get("status") == "False"
                    and scheduled.get("reason") == "Unschedulable"
                ):
                    since = unschedulable_since.setdefault(name, now)
                    if now - since >= opts.unschedulable_grace_s and _scale_up(
                        client, opts.namespace, name
                    ):
                        scaling_up.append(name)
                    elif now - since >= opts.unschedulable_grace_s:
                        said = str(scheduled.get("message") or "(no message)")
                        explanation = opts.explain(pod) if opts.explain is not None else None
                        message = (
                            f"pod {name} has been unschedulable for {now - since:.0f} s; "
                            f"kube-scheduler says: {said}"
                        )
                        if explanation:
                            message += f"\nvfcore: {explanation}"
                        return result(
                            "unschedulable",
                            message,
                            pod=name,
                            scheduler_message=said,
                            explanation=explanation,
                        )
                else:
                    unschedulable_since.pop(name, None)
                for status in (pod.get("status") or {}).get("containerStatuses") or []:
                    waiting = (status.get("state") or {}).get("waiting") or {}
                    reason = waiting.get("reason")
                    container = str(status.get("name") or "")
                    key = (name, container)
                    fatal = reason in FATAL_WAITING
                    if reason in SLOW_FATAL_WAITING:
                        since = slow_fatal_since.setdefault(key, now)
                        fatal = now - since >= opts.unschedulable_grace_s
                    else:
                        slow_fatal_since.pop(key, None)
                    if fatal:
                        logs = logs_tail(
                            client,
                            opts.namespace,
                            name,
                            container or None,
                            previous=reason == "CrashLoopBackOff",
                        )
                        detail = waiting.get("message") or ""
                        return result(
                            "fatal-container",
                            f"pod {name} container {container}: {reason}"
                            + (f": {detail}" if detail else "")
                            + f"\nlogs (last {LOG_TAIL_LINES} lines):\n{logs}",
                            pod=name,
                            logs=logs,
                        )

            # Jobs: failed, complete
            by_name = {_name(j): j for j in jobs}
            for job in jobs:
                failed = _conditions(job).get("Failed")
                if failed is not None and failed.get("status") == "True":
                    name = _name(job)
                    pod_logs = None
                    for pod in pods:
                        owner = ((pod.get("metadata") or {}).get("labels") or {}).get("job-name")
                        if owner == name and (pod.get("status") or {}).get("phase") == "Failed":
                            pod_logs = logs_tail(
                                client, opts.namespace, _name(pod), None, previous=False
                            )
                            break
                    said = f"{failed.get('reason') or 'Failed'}: {failed.get('message') or ''}"
                    message = f"job {name} failed: {said.rstrip(': ')}"
                    if pod_logs is not None:
                        message += f"\nlogs (last {LOG_TAIL_LINES} lines):\n{pod_logs}"
                    return result("failed", message, job=name, logs=pod_logs)
            complete = sorted(
                n
                for n, j in by_name.items()
                if (_conditions(j).get("Complete") or {}).get("status") == "True"
            )
            missing = sorted(set(opts.jobs) - set(by_name))
            if opts.flow_type.lower() == "batch" or not opts.workloads:
                pending = sorted(set(opts.jobs) - set(complete))
                if opts.jobs and not pending:
                    return result("completed", f"all {len(opts.jobs)} job(s) of the run completed")
                said = f"{len(complete)}/{len(opts.jobs)} job(s) complete"
                if missing:
                    said += f"; not found: {', '.join(missing)}"
            else:
                found = {(str(w["kind"]), _name(w)): w for w in workloads}
                not_ready: list[str] = []
                for key in opts.workloads:
                    w = found.get(key)
                    if w is None:
                        not_ready.append(f"{key[1]} (not found)")
                        continue
                    desired = int((w.get("spec") or {}).get("replicas", 1) or 0)
                    ready = int((w.get("status") or {}).get("readyReplicas") or 0)
                    if ready < desired:
                        not_ready.append(f"{key[1]} {ready}/{desired}")
                unready_pods = [
                    _name(p)
                    for p in pods
                    if (p.get("status") or {}).get("phase") != "Succeeded" and not _pod_is_ready(p)
                ]
                if opts.workloads and not not_ready and not unready_pods:
                    return result(
                        "ready",
                        f"all {len(opts.workloads)} workload(s) ready, {len(pods)} pod(s)",
                    )
                said = f"waiting for {', '.join(not_ready) or 'pods'}"
                if unready_pods:
                    said += f"; {len(unready_pods)} pod(s) not ready"
            if scaling_up:
                said += f"; the cluster autoscaler is adding a node for {', '.join(scaling_up)}"
            if progress is not None and said != last_said:
                progress(said)
                last_said = said
            if opts.timeout_s is not None and now - started >= opts.timeout_s:
                return result("timeout", f"gave up after {opts.timeout_s:g} s: {said}")
            opts.sleep(opts.poll_s)
    except KeyboardInterrupt:
        return result("interrupted", "interrupted; the run was left in place")


def expected_from_objects(
    objects: Sequence[Mapping[str, Any]],
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The Jobs and the Deployments/StatefulSets among a run's objects (for :class:`WaitOptions`)."""
    jobs = tuple(_name(o) for o in objects if o.get("kind") == "Job")
    workloads = tuple(
        (str(o["kind"]), _name(o))
        for o in objects
        if o.get("kind") in ("Deployment", "StatefulSet")
    )
    return jobs, workloads
