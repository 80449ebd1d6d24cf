"""A redeploy's pure half (vfcore.runtime.redeploy): the run's own pods left out, and what
changes — against objects as a real API server returns them, with its defaults filled in."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.manifests import PIPE_BATCH, PIPE_RT, opts
from vfcore.runtime.manifests import render
from vfcore.runtime.pod_options import parse_volume
from vfcore.runtime.redeploy import redeploy_changes, run_labels, without_run_pods

WORKLOADS = ("Job", "Deployment", "StatefulSet")


def as_served(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with what kube-apiserver adds on create: container and pod defaults, a
    ``fieldRef``'s ``apiVersion``, canonical quantities, the Job controller's labels."""
    out = copy.deepcopy(obj)
    out["metadata"].update(uid="u-1", resourceVersion="7", generation=1)
    template = out.get("spec", {}).get("template")
    if template is None:
        return out
    template.setdefault("metadata", {}).setdefault("labels", {})["job-name"] = "x"
    pod = template["spec"]
    pod.update(dnsPolicy="ClusterFirst", schedulerName="default-scheduler",
               terminationGracePeriodSeconds=pod.get("terminationGracePeriodSeconds", 30))  # fmt: skip
    for v in pod.get("volumes", []):
        if "secret" in v:
            v["secret"].setdefault("defaultMode", 420)
    for c in pod["containers"] + pod.get("initContainers", []):
        c.setdefault("imagePullPolicy", "IfNotPresent")
        c.update(terminationMessagePath="/dev/termination-log", terminationMessagePolicy="File")
        for e in c.get("env", []):
            ref = e.get("valueFrom", {}).get("fieldRef")
            if ref is not None:
                ref.setdefault("apiVersion", "v1")
        requests = c.get("resources", {}).get("requests", {})
        for k, v in list(requests.items()):
            if v == "1000m":
                requests[k] = "1"
    return out


def _changes(old: tuple[dict[str, Any], ...], new: tuple[dict[str, Any], ...]) -> Any:
    return redeploy_changes(new, [as_served(o) for o in old])


@pytest.mark.parametrize("spec", [PIPE_BATCH, PIPE_RT], ids=["batch", "realtime"])
def test_the_same_render_over_what_the_server_returned_changes_no_pods(spec: Any) -> None:
    objs = render(spec, opts(volumes=(parse_volume("pvc", "videos:/data:ro"),),
                             priority_class="video-high", image_pull_policy="Always"))  # fmt: skip
    changes = _changes(objs, objs)
    assert changes.of("changed-pods") == () and changes.of("new") == ()
    assert changes.summary().startswith("0 new, ")
    assert len(changes.of("unchanged-pods")) == len(objs)


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"image": "registry.example/demo:2"}, "image registry.example/demo:1 -> registry.example/demo:2"),
        ({"env": {"LOG": "debug"}}, "env LOG changed"),
        ({"volumes": (parse_volume("pvc", "videos:/data"),)}, "volume mounts changed"),
        ({"priority_class": "video-high"}, "priorityClassName None -> video-high"),
        ({"image_pull_policy": "Always"}, "imagePullPolicy IfNotPresent -> Always"),
        ({"resources": {"det": {"cpu": "2"}}}, "requests changed"),
    ],
    ids=["image", "env", "a mount", "priority class", "pull policy", "requests"],
)  # fmt: skip
def test_what_changes_in_the_pods_is_said(change: dict[str, Any], detail: str) -> None:
    old, new = render(PIPE_BATCH, opts()), render(PIPE_BATCH, opts(**change))
    changes = _changes(old, new)
    det = [c for c in changes.objects if c.kind == "Job" and "det" in c.name]
    (job,) = [c for c in det if c.change != "kept"]
    assert job.change == "changed-pods" and any(detail in d for d in job.details), job.details
    assert job in changes.immutable  # a Job's pods cannot change
    (setup,) = [c for c in changes.objects if c.kind == "Job" and "setup" in c.name]
    if "image" in change or "image_pull_policy" in change:  # the setup Job runs it too
        assert setup.change == "kept"  # it has run: kept as it is, not refused


def test_a_new_node_is_new_and_a_dropped_one_is_not_rendered() -> None:
    old = render(PIPE_BATCH, opts())
    fewer = tuple(o for o in old if "out" not in o["metadata"]["name"])
    changes = _changes(fewer, old)
    assert {c.kind for c in changes.of("new")} == {"Job"}
    assert len(_changes(old, fewer).of("not-rendered")) == 1


def test_the_runs_own_pods_and_claims_are_left_out_and_nothing_else() -> None:
    mine = run_labels("demo", "r1")
    pods = {
        "kind": "PodList",
        "items": [
            {"metadata": {"name": "det-0", "namespace": "video", "labels": mine},
             "spec": {"nodeName": "gpu-a"}},
            {"metadata": {"name": "det-1", "namespace": "video", "labels": mine}, "spec": {}},
            {"metadata": {"name": "same-labels-other-ns", "namespace": "default", "labels": mine},
             "spec": {"nodeName": "gpu-a"}},
            {"metadata": {"name": "other-run", "namespace": "video",
                          "labels": run_labels("demo", "r2")}, "spec": {"nodeName": "gpu-b"}},
        ],
    }  # fmt: skip
    claims = {
        "kind": "ResourceClaimList",
        "items": [
            {"metadata": {"name": "det-0-gpu", "namespace": "video",
                          "ownerReferences": [{"kind": "Pod", "name": "det-0"}]}},
            {"metadata": {"name": "theirs", "namespace": "video",
                          "ownerReferences": [{"kind": "Pod", "name": "other-run"}]}},
        ],
    }  # fmt: skip
    before = copy.deepcopy((pods, claims))
    kept_pods, kept_claims, own = without_run_pods(
        pods, claims, flow="demo", run_id="r1", namespace="video"
    )
    assert (pods, claims) == before  # inputs untouched
    assert [p["metadata"]["name"] for p in kept_pods["items"]] == [  # type: ignore[index]
        "same-labels-other-ns", "other-run"]  # fmt: skip
    assert [c["metadata"]["name"] for c in kept_claims["items"]] == ["theirs"]  # type: ignore[index]
    assert (
        own.describe()
        == "2 pods of run r1 (1 on gpu-a, 1 not bound) and 1 ResourceClaim(s) they hold"
    )
    refused = {"kind": "Status", "reason": "Forbidden"}
    assert without_run_pods(refused, None, flow="demo", run_id="r1", namespace="video")[:2] == (
        refused, None)  # unknown stays unknown  # fmt: skip
