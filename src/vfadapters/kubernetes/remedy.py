"""Applying the scheduler model's remedy: node-affinity pins and apply waves.

When vfcore's kube-scheduler model says a flow strands (or may strand) pods as
applied, and its remedy (:class:`vfcore.placement.scheduler.remedy.Remedy`)
makes it land, ``vf deploy`` applies that remedy and says so:

- **affinity** (:func:`with_affinity`): each named workload's pod template gets
  a required node affinity ``kubernetes.io/hostname In [hosts]`` — the hosts the
  exact placement chose, by the value of their ``kubernetes.io/hostname`` label
  (the node name when a node has none). Existing affinity terms are kept: the
  pin is added to every ``nodeSelectorTerm`` (terms are ORed, expressions
  within a term ANDed);
- **pins** (:func:`with_claim_selectors`, ``--gpu-mode dra``): each named
  workload's ResourceClaimTemplate gets the remedy's selectors added to its
  request (the devices the exact plan chose, by their ``uuid``/``parentUUID``);
- **waves** (:func:`apply_in_waves`): everything but the flow's workloads is
  applied first (configuration, Services, the broker, its setup Job); then the
  workloads wave by wave — the largest claims first — each wave's pods bound to
  a node (``spec.nodeName``) before the next wave is applied; then the rest
  (workloads in no wave, PDBs, scalers). A wave whose pods are not all bound
  in time raises ``kube-wave-not-bound`` with kube-scheduler's message for a
  pod still pending. A server dry run applies in the same order without waiting.

Which workload is which flow node: the ``vfcore.io/node-name`` annotation the
renderer puts on every per-node object.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vfadapters.kubernetes.apply import Applied, ApplyReport, apply_objects, apply_order
from vfadapters.kubernetes.client import KubeApiError, KubeClient
from vfadapters.kubernetes.snapshot import list_all

__all__ = [
    "HOSTNAME_LABEL",
    "NODE_ANNOTATION",
    "apply_in_waves",
    "node_of",
    "with_affinity",
    "with_claim_selectors",
]

NODE_ANNOTATION = "vfcore.io/node-name"
HOSTNAME_LABEL = "kubernetes.io/hostname"
_WORKLOADS = ("Job", "Deployment", "StatefulSet")


def node_of(obj: Mapping[str, Any]) -> str | None:
    """The flow node a per-node object belongs to (its ``vfcore.io/node-name`` annotation)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(NODE_ANNOTATION)
    return value if isinstance(value, str) else None


def with_affinity(
    objects: Sequence[Mapping[str, Any]],
    affinity: Mapping[str, Sequence[str]],
    hostnames: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], ...]:
    """``objects`` with each workload of ``affinity``'s flow nodes pinned to its hosts.

    ``affinity`` maps a flow node to cluster node names; ``hostnames`` maps a
    cluster node name to its ``kubernetes.io/hostname`` label value.
    """
    names = hostnames or {}
    out: list[dict[str, Any]] = []
    for obj in objects:
        node = node_of(obj)
        new = dict(obj)
        if obj.get("kind") in _WORKLOADS and node is not None and node in affinity:
            new = copy.deepcopy(dict(obj))
            pod_spec = new["spec"]["template"]["spec"]
            hosts = sorted({names.get(h, h) for h in affinity[node]})
            expression = {"key": HOSTNAME_LABEL, "operator": "In", "values": hosts}
            node_affinity = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
            required = node_affinity.setdefault(
                "requiredDuringSchedulingIgnoredDuringExecution", {}
            )
            terms = required.setdefault("nodeSelectorTerms", [])
            if not terms:
                terms.append({"matchExpressions": [expression]})
            else:
                for term in terms:
                    term.setdefault("matchExpressions", []).append(dict(expression))
        out.append(new)
    return tuple(out)


def with_claim_selectors(
    objects: Sequence[Mapping[str, Any]], pins: Mapping[str, Sequence[str]]
) -> tuple[dict[str, Any], ...]:
    """``objects`` with each named flow node's ResourceClaimTemplate requests narrowed by
    ``pins`` (CEL selectors, ANDed with the request's own)."""
    out: list[dict[str, Any]] = []
    for obj in objects:
        node = node_of(obj)
        new = dict(obj)
        if obj.get("kind") == "ResourceClaimTemplate" and node is not None and node in pins:
            new = copy.deepcopy(dict(obj))
            for request in new["spec"]["spec"]["devices"]["requests"]:
                selectors = request["exactly"].setdefault("selectors", [])
                selectors.extend({"cel": {"expression": e}} for e in pins[node])
        out.append(new)
    return tuple(out)


def _pods(client: KubeClient, namespace: str, selector: str) -> list[Mapping[str, Any]]:
    from vfadapters.kubernetes.client import object_path

    doc, failed = list_all(
        client, object_path("v1", "pods", namespace, None), "PodList", label_selector=selector
    )
    if doc is None:
        assert failed is not None
        raise KubeApiError(
            "kube-list-failed",
            f"listing the wave's pods in {namespace} failed: {failed.status_line()}",
            "check `list pods` (docs/kubernetes.md, RBAC) and deploy again",
        )
    return [p for p in doc["items"] if isinstance(p, Mapping)]


def _pending_message(pods: Sequence[Mapping[str, Any]]) -> str:
    for pod in pods:
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                name = (pod.get("metadata") or {}).get("name")
                return f"pod {name}: {c.get('reason')}: {c.get('message')}"
    return "no pod reports why (their controllers may not have created them yet)"


def apply_in_waves(
    client: KubeClient,
    objects: Sequence[Mapping[str, Any]],
    waves: Sequence[Sequence[str]],
    *,
    expected: Mapping[str, tuple[str, int]],
    namespace: str,
    run_selector: str,
    dry_run: bool = False,
    force_conflicts: bool = False,
    bound_timeout_s: float = 300.0,
    poll_s: float = 2.0,
    progress: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ApplyReport:
    """Apply ``objects`` wave by wave (see the module docstring).

    ``waves`` are flow node names per wave; ``expected`` maps a flow node to
    ``(its vfcore.io/node label value, its number of pods)``.
    """
    ordered = apply_order(objects)
    in_waves = {n for wave in waves for n in wave}

    def workload_of(obj: Mapping[str, Any]) -> str | None:
        node = node_of(obj)
        return node if obj.get("kind") in _WORKLOADS and node in in_waves else None

    first_wave_rank = next(
        (i for i, o in enumerate(ordered) if workload_of(o) is not None), len(ordered)
    )
    before = [o for o in ordered[:first_wave_rank] if workload_of(o) is None]
    after = [o for o in ordered[first_wave_rank:] if workload_of(o) is None]
    applied: list[Applied] = []

    def apply(group: Sequence[Mapping[str, Any]]) -> None:
        if group:
            report = apply_objects(client, group, dry_run=dry_run, force_conflicts=force_conflicts)
            applied.extend(report.applied)

    apply(before)
    for number, wave in enumerate(waves, start=1):
        members = set(wave)
        apply([o for o in ordered if workload_of(o) in members])
        if dry_run:
            continue
        started = clock()
        while True:
            unbound: list[Mapping[str, Any]] = []
            missing = 0
            for node in sorted(members):
                label, count = expected[node]
                pods = _pods(client, namespace, f"{run_selector},vfcore.io/node={label}")
                live = [p for p in pods if (p.get("status") or {}).get("phase") != "Failed"]
                bound = [p for p in live if (p.get("spec") or {}).get("nodeName")]
                unbound += [p for p in live if not (p.get("spec") or {}).get("nodeName")]
                missing += max(0, count - len(bound))
            if missing == 0:
                if progress is not None:
                    progress(f"wave {number}/{len(waves)} bound: {', '.join(sorted(members))}")
                break
            if clock() - started >= bound_timeout_s:
                raise KubeApiError(
                    "kube-wave-not-bound",
                    f"wave {number} ({', '.join(sorted(members))}): {missing} pod(s) not bound "
                    f"after {bound_timeout_s:g} s; {_pending_message(unbound)}",
                    "the cluster changed since the preflight plan, or its remedy did not hold; "
                    "check `vf plan FLOW --kube`, then tear down and deploy again",
                )
            sleep(poll_s)
    apply(after)
    return ApplyReport(tuple(applied), dry_run)
