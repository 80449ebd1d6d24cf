"""``vf deploy`` after render: preflight on the live cluster, server-side apply, the wait loop.

:func:`apply_and_wait` is what :mod:`vfadapters.cli.deploy_command` calls with
the rendered objects:

1. **Preflight**: the live snapshot (:func:`.snapshot.read_snapshot`) and
   vfcore's exact plan (:func:`vfcore.placement.plan.plan`) with the deploy's GPU
   options. :func:`preflight_refusal` decides: ``does-not-fit`` or a plan
   problem of severity error is always refused (exit 3) with the plan's reasons
   and fixes; with ``--strict-preflight`` an ``unknown`` verdict (say, a
   refused pod listing) or a scheduler model that strands pods (even with its
   remedy) is refused too; without it they are printed as warnings.
2. **Apply** (:func:`.apply.apply_objects`): dependency order, field manager
   ``vf``; ``--dry-run=server`` sends ``dryRun=All`` and stops there.
   When the kube-scheduler model says the flow strands (or may strand) pods
   as applied and its remedy makes it land, the remedy is applied and said:
   node-affinity pins and/or apply waves (:mod:`.remedy`).
3. **Wait** (:func:`.wait.wait_for_run`): BATCH until every Job completes,
   REALTIME until every workload is ready; an unschedulable pod shows the
   scheduler's message next to vfcore's explanation (from the same plan); Ctrl-C
   leaves the run and prints the ``vf teardown`` command.

Exit codes: 0 done (or dry run applied), 1 the run failed / could not be read /
timed out, 3 preflight refused, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

__all__ = [
    "PreflightRefusal",
    "apply_and_wait",
    "explainer",
    "preflight_refusal",
    "run_live_plan",
    "teardown_command",
]

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_STRICT, EXIT_STOPPED = 0, 1, 2, 3, 130


@dataclass(frozen=True)
class PreflightRefusal:
    """Why the deploy is refused: a stable ``rule``, what, and what to do."""

    rule: str
    message: str
    hint: str


def _few(items: Sequence[str], limit: int = 10) -> str:
    shown = "; ".join(items[:limit])
    return shown + (f"; … and {len(items) - limit} more" if len(items) > limit else "")


def preflight_refusal(
    result: Any, *, strict: bool, allow_preemption: bool = False
) -> tuple[PreflightRefusal | None, list[str]]:
    """``(refusal or None, warnings)`` for a :class:`vfcore.placement.plan.Plan`.

    With ``strict``, a plan whose pods land only by evicting lower-priority
    pods (kube-scheduler's preemption, as the model predicts it) is refused
    unless ``allow_preemption``; with ``allow_preemption`` a flow that does
    not fit beside the bound pods but that the model lands by preempting
    them is deployed (a warning says so).
    """
    warnings: list[str] = []
    hint_plan = "run `vf plan FLOW --kube` for the whole plan"
    sched = result.scheduler
    preempting = sched is not None and sched.evicts and sched.verdict_with_remedy == "lands"
    if result.verdict == "does-not-fit" and allow_preemption and preempting:
        warnings.append(
            "the flow does not fit beside the pods already bound; kube-scheduler lands it by "
            "evicting lower-priority pods (--allow-preemption)"
        )
    elif result.verdict == "does-not-fit":
        reasons = [u.summary + (f" (fix: {u.fix})" if u.fix else "") for u in result.unplaced]
        fix = result.fix
        return (
            PreflightRefusal(
                "preflight-does-not-fit",
                f"the flow does not fit on the cluster: {_few(reasons)}",
                (f"smallest change that makes it fit: {fix}; " if fix else "") + hint_plan,
            ),
            warnings,
        )
    errors = [p for p in result.problems if p.is_error]
    if errors:
        return (
            PreflightRefusal(
                "preflight-" + errors[0].id,
                _few([p.message for p in errors]),
                _few([p.hint for p in errors]),
            ),
            warnings,
        )
    for p in result.problems:
        warnings.append(f"{p.severity}: {p.id}: {p.message} (hint: {p.hint})")
    if result.verdict == "unknown":
        said = _few([f"{u.what}: {u.reason}" for u in result.unknown])
        if strict:
            return (
                PreflightRefusal(
                    "preflight-unknown",
                    f"whether the flow fits is unknown: {said}",
                    "make the unknown readable (e.g. `list pods` for the deploying user; "
                    "docs/kubernetes.md, RBAC), or drop --strict-preflight",
                ),
                warnings,
            )
        warnings.append(f"whether the flow fits is unknown: {said}")
    if sched is not None and sched.verdict_with_remedy != "lands":
        said = f"the kube-scheduler model says: {sched.verdict_with_remedy}"
        if sched.verdict_with_remedy == "unknown" and getattr(sched, "reason", ""):
            said += f" ({sched.reason})"
        if strict:
            return (
                PreflightRefusal(
                    "preflight-strands",
                    f"{said}; pods may be left Pending even though an exact placement exists",
                    f"{hint_plan}; apply its remedy, or drop --strict-preflight",
                ),
                warnings,
            )
        warnings.append(said)
    if sched is not None and sched.evicts:
        said = (
            f"the pods land only by evicting {len(sched.evicted)} lower-priority pod(s): "
            f"{_few(list(sched.evicted))}"
        )
        if strict and not allow_preemption:
            return (
                PreflightRefusal(
                    "preflight-preempts",
                    said,
                    "pass --allow-preemption to accept the evictions, or make room first",
                ),
                warnings,
            )
        warnings.append(said)
    return None, warnings


def _selector_pair(text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    key, sep, value = text.partition("=")
    if not sep or not key:
        from vfcore import InvalidInputError

        raise InvalidInputError(
            "invalid-node-selector",
            f"--gpu-node-selector {text!r} is not KEY=VALUE",
            "write it like --gpu-node-selector nvidia.com/gpu.present=true",
        )
    return key, value


def _overrides(values: Sequence[str]) -> dict[str, str]:
    """``--image-override NODE=IMAGE`` as a mapping (rendering checks and refuses bad ones)."""
    out: dict[str, str] = {}
    for value in values:
        node, sep, image = value.partition("=")
        if sep and node and image:
            out[node.strip()] = image.strip()
    return out


def run_live_plan(client: Any, spec: Any, args: argparse.Namespace) -> tuple[Any, Any]:
    """``(snapshot, plan)``: vfcore's plan of ``spec`` on the live cluster, with the deploy's
    GPU options.

    One ``vf deploy`` plans once: the answer is kept on ``args`` (rendering takes MIG
    choices and KEDA caps from it, the preflight its verdict) for the same spec.
    """
    cached = getattr(args, "_vf_live_plan", None)
    if cached is not None and cached[0] is spec:
        return cached[1], cached[2]
    from vfadapters.kubernetes.scheduling import read_without_run, scheduler_workloads
    from vfcore.placement import parse_resources_option, plan

    resources: dict[str, dict[str, str]] = {}
    for text in getattr(args, "resources", None) or []:
        for node, entries in parse_resources_option(text).items():
            resources.setdefault(node, {}).update(entries)
    run_id = getattr(args, "run", None)
    namespace = getattr(args, "namespace", "default")
    cluster, facts, own = read_without_run(
        client, None if run_id is None else (spec.name, run_id, namespace)
    )
    args._vf_run_pods = own
    gpu_options: dict[str, Any] = {
        "gpu_mode": getattr(args, "gpu_mode", "exclusive"),
        "gpu_resource_name": getattr(args, "gpu_resource_name", None),
        "gpu_runtime_class": getattr(args, "gpu_runtime_class", None),
        "gpu_node_selector": _selector_pair(getattr(args, "gpu_node_selector", None)),
    }
    dra = {
        "dra_device_class": getattr(args, "dra_device_class", "gpu.nvidia.com"),
        "dra_mig_device_class": getattr(args, "dra_mig_device_class", "mig.nvidia.com"),
    }
    if gpu_options["gpu_mode"] == "dra" and gpu_options["gpu_node_selector"] == (
        "nvidia.com/gpu.present",
        "true",
    ):
        gpu_options["gpu_node_selector"] = None  # a claim's devices select the node
    workloads = scheduler_workloads(  # how the pods are created: spreading, priority, image
        spec,
        facts,
        priority_class=getattr(args, "priority_class", None),
        image=getattr(args, "image", None),
        namespace=namespace,
        resources=resources,
        dra=dra,
        image_overrides=_overrides(getattr(args, "image_override", None) or []),
        **gpu_options,
    )
    result = plan(
        spec,
        cluster,
        resources=resources,
        workloads=workloads,
        facts=facts,
        dra_device_class=dra["dra_device_class"],
        dra_mig_device_class=dra["dra_mig_device_class"],
        **gpu_options,
    )
    args._vf_live_plan = (spec, cluster, result)
    return cluster, result


def explainer(result: Any, spec: Any, run_id: str) -> Any:
    """``pod → vfcore's explanation`` for an unschedulable pod, from the preflight plan."""
    from vfcore.flow import physical_name

    by_label = {physical_name(n.name, flow=spec.name, run=run_id).k8s: n.name for n in spec.nodes}
    sched = "not modelled" if result.scheduler is None else result.scheduler.verdict_with_remedy

    def explain(pod: Mapping[str, Any]) -> str | None:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        node = by_label.get(labels.get("vfcore.io/node", ""))
        if node is None:
            return None
        unplaced = [u.summary for u in result.unplaced if u.pod.split("/")[0] == node]
        if unplaced:
            return _few(unplaced)
        placed = sorted(
            f"{pod_name} on {host}"
            for pod_name, host in result.assignments
            if pod_name.split("/")[0] == node
        )
        return (
            f"the preflight plan ({result.verdict}, kube-scheduler model: {sched}) placed "
            f"{_few(placed) or 'nothing'} for node {node}; the cluster has changed since, or "
            "other pods were placed first"
        )

    return explain


def _check_durations(args: argparse.Namespace) -> None:
    """``--timeout`` > 0 and ``--unschedulable-grace`` >= 0, before anything is applied."""
    import math

    from vfcore import InvalidInputError

    timeout = getattr(args, "timeout", None)
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise InvalidInputError(
            "invalid-timeout", f"--timeout {timeout} must be > 0 seconds", "e.g. --timeout 600"
        )
    grace = getattr(args, "unschedulable_grace", 60.0)
    if not (math.isfinite(grace) and grace >= 0):
        raise InvalidInputError(
            "invalid-timeout",
            f"--unschedulable-grace {grace} must be >= 0 seconds",
            "e.g. --unschedulable-grace 60",
        )


def _remedy_to_apply(result: Any) -> Any:
    """The scheduler model's remedy when the flow as applied does not surely land and the
    remedy changes that; else ``None``."""
    sched = result.scheduler
    if sched is None or sched.remedy is None or sched.verdict == "lands":
        return None
    remedy = sched.remedy
    if remedy.kind == "none":
        return None
    return remedy


def _apply_remedy(
    client: Any,
    objects: Sequence[Mapping[str, Any]],
    remedy: Any,
    result: Any,
    cluster: Any,
    spec: Any,
    run_id: str,
    namespace: str,
    args: argparse.Namespace,
    *,
    dry_run: bool,
    force: bool,
    err: TextIO,
) -> Any:
    """Pins (node affinity, or DRA claims' devices) and/or waves, as the remedy says; see
    :mod:`.remedy`."""
    from vfadapters.kubernetes.apply import apply_objects
    from vfadapters.kubernetes.remedy import (
        HOSTNAME_LABEL,
        apply_in_waves,
        with_affinity,
        with_claim_selectors,
    )
    from vfcore.flow import physical_name
    from vfcore.runtime import run_selector

    if "affinity" in remedy.kind:
        hostnames = {n.name: dict(n.labels).get(HOSTNAME_LABEL, n.name) for n in cluster.nodes}
        objects = with_affinity(objects, remedy.affinity_map, hostnames)
    if "pins" in remedy.kind:
        objects = with_claim_selectors(objects, remedy.pins_map)
    if "waves" not in remedy.kind:
        return apply_objects(client, objects, dry_run=dry_run, force_conflicts=force)
    node_of_pod = {p.pod: p.node for p in result.pods}
    waves: list[list[str]] = []
    for wave in remedy.waves:
        nodes = sorted({node_of_pod.get(pod, pod.split("/")[0]) for pod in wave})
        waves.append(nodes)
    counts: dict[str, int] = {}
    for p in result.pods:
        counts[p.node] = counts.get(p.node, 0) + 1
    expected = {
        n: (physical_name(n, flow=spec.name, run=run_id).k8s, counts.get(n, 0))
        for wave in waves
        for n in wave
    }

    def say(text: str) -> None:
        err.write(f"  {text}\n")

    return apply_in_waves(
        client,
        objects,
        waves,
        expected=expected,
        namespace=namespace,
        run_selector=run_selector(spec.name, run_id),
        dry_run=dry_run,
        force_conflicts=force,
        bound_timeout_s=float(getattr(args, "timeout", None) or 300.0),
        progress=say,
    )


#: Kinds whose objects :func:`existing_run_objects` does not read (their data is secret, and
#: a redeploy keeps them as they are).
_NOT_COMPARED = frozenset({"Secret"})


def existing_run_objects(
    client: Any, objects: Sequence[Mapping[str, Any]], namespace: str, selector: str
) -> list[Mapping[str, Any]] | None:
    """The run's objects already on the cluster, of the kinds ``objects`` hold (``None``
    when a listing fails: what a redeploy changes is then unknown)."""
    from vfadapters.kubernetes.apply import kind_info
    from vfadapters.kubernetes.client import object_path
    from vfadapters.kubernetes.snapshot import list_all

    found: list[Mapping[str, Any]] = []
    kinds: dict[str, Any] = {}
    for obj in objects:
        kind = str(obj.get("kind"))
        if kind not in _NOT_COMPARED and kind not in kinds:
            kinds[kind] = kind_info(obj)
    for kind, info in kinds.items():
        path = object_path(
            info.api_version, info.plural, namespace if info.namespaced else None, None
        )
        doc, _failed = list_all(client, path, f"{kind}List", label_selector=selector)
        if doc is None:
            return None
        found.extend({**item, "kind": kind} for item in doc["items"] if isinstance(item, Mapping))
    return found


def redeploy_refusal(
    changes: Any, args: argparse.Namespace, run_id: str
) -> PreflightRefusal | None:
    """Why a redeploy cannot go on, or ``None``.

    A Job whose pods would change is refused (Kubernetes keeps a Job's pod template
    immutable: a BATCH run is finished, or torn down and deployed again, never rolled);
    a Deployment or StatefulSet whose pods would change needs ``--rollout drain|surge``
    (which way the running replicas give way to the new ones).
    """
    jobs = changes.immutable
    if jobs:
        return PreflightRefusal(
            "redeploy-job-immutable",
            f"run {run_id} exists and the pods of {len(jobs)} of its Job(s) would change: "
            f"{_few([j.line() for j in jobs], 4)}; Kubernetes refuses to change a Job's pod "
            "template, and a BATCH run is never rolled",
            f"let the run finish, or remove it (`{teardown_command(args, run_id)}`) and deploy "
            "again; or deploy the new version as a new run (--run ID)",
        )
    rolled = [c for c in changes.of("changed-pods") if c.kind in ("Deployment", "StatefulSet")]
    if rolled and getattr(args, "rollout", None) is None:
        return PreflightRefusal(
            "redeploy-needs-rollout",
            f"run {run_id} is running and the pods of {len(rolled)} of its workload(s) would "
            f"change: {_few([c.line() for c in rolled], 4)}",
            "say how the running replicas give way: --rollout drain (each stops after its "
            "in-flight messages, then the new version reads the same consumers) or --rollout "
            "surge (new replicas start before the old ones stop); docs/kubernetes.md, Rollouts",
        )
    return None


def _redeploy_and_storage(
    client: Any,
    args: argparse.Namespace,
    objects: Sequence[Mapping[str, Any]],
    spec: Any,
    run_id: str,
    result: Any,
    err: TextIO,
) -> tuple[PreflightRefusal | None, Sequence[Mapping[str, Any]]]:
    """The preflight's second half: what a redeploy changes, whether the volumes bind and
    the objects the pods name exist (ConfigMaps, Secrets, the PriorityClass); the objects to
    apply (a redeploy keeps the run's setup Job as it is)."""
    from vfadapters.kubernetes.storage import storage_problems
    from vfcore.runtime import redeploy_changes, run_selector

    namespace = getattr(args, "namespace", "default")
    own = getattr(args, "_vf_run_pods", None)
    if own is not None and own.pods:
        err.write(
            f"preflight: redeploy: {own.describe()}: left out of the plan (they are the pods "
            "it places)\n"
        )
    existing = existing_run_objects(client, objects, namespace, run_selector(spec.name, run_id))
    if existing is None:
        err.write(
            f"preflight warning: the objects run {run_id} already has could not be listed: "
            "what this deploy changes is unknown (the apply says what it configured)\n"
        )
    elif existing:
        compared = [o for o in objects if o.get("kind") not in _NOT_COMPARED]
        changes = redeploy_changes(compared, existing)
        err.write(f"preflight: run {run_id} exists: {changes.summary()}\n")
        for change in (
            *changes.of("changed-pods"),
            *changes.of("kept"),
            *changes.of("not-rendered"),
        ):
            err.write(f"  {change.line()}\n")
        if changes.of("not-rendered"):
            err.write(
                "  (objects no longer rendered are left in place; `vf teardown` removes the "
                "whole run)\n"
            )
        from vfcore.runtime import broker_size_change

        resized = broker_size_change(objects, existing)
        if resized is not None:
            return PreflightRefusal(
                "redeploy-broker-size",
                f"run {run_id}'s in-cluster broker has {resized[0]} server(s) and this deploy "
                f"asks {resized[1]} (--broker-replicas): a run's broker keeps its size (its "
                "streams' replicas and the routes in its immutable Secret are fixed when it "
                "starts)",
                f"deploy with --broker-replicas {resized[0]}, or deploy the new size as a new "
                f"run (--run ID), or remove this one first (`{teardown_command(args, run_id)}`)",
            ), objects
        refusal = redeploy_refusal(changes, args, run_id)
        if refusal is not None:
            return refusal, objects
        if getattr(args, "rollout", None) == "surge":
            from vfcore.runtime import surge_needs, surge_warning

            rolled = [c.name for c in changes.of("changed-pods") if c.kind == "Deployment"]
            warning = surge_warning(surge_needs(objects, rolled))
            if warning is not None:
                err.write(f"preflight warning: {warning}\n")
        objects = changes.to_apply(objects)
    from vfadapters.kubernetes.references import reference_problems
    from vfcore.runtime import credentials_secret_name

    problems = (
        *storage_problems(client, objects, namespace, dict(result.assignments)),
        *reference_problems(
            client,
            objects,
            namespace,
            own_secrets=(credentials_secret_name(spec.name, run_id),),
        ),
    )
    errors = [p for p in problems if p.is_error]
    for p in problems:
        if not p.is_error:
            err.write(f"preflight warning: {p.id}: {p.message} (hint: {p.hint})\n")
    if errors:
        return (
            PreflightRefusal(
                "preflight-" + errors[0].id,
                _few([p.message for p in errors]),
                _few(sorted({p.hint for p in errors})),
            ),
            objects,
        )
    return None, objects


def check_served_kinds(client: Any, objects: Sequence[Mapping[str, Any]]) -> None:
    """Raise ``kube-kind-not-served`` before anything is applied when the cluster does not
    serve a kind of ``objects`` (KEDA's ScaledObject without KEDA installed): its API group
    version is not in discovery, or lists no such resource. A discovery request that fails
    otherwise is left to the apply."""
    from vfadapters.kubernetes.apply import kind_info
    from vfadapters.kubernetes.client import KubeApiError

    wanted: dict[str, set[str]] = {}
    kinds: dict[tuple[str, str], int] = {}
    for obj in objects:
        info = kind_info(obj)
        if "/" not in info.api_version:
            continue  # the core group is always served
        wanted.setdefault(info.api_version, set()).add(info.plural)
        key = (str(obj.get("kind")), info.api_version)
        kinds[key] = kinds.get(key, 0) + 1
    for version, plurals in sorted(wanted.items()):
        answer = client.get_json(f"/apis/{version}")
        if answer.status == 404:
            missing = sorted(plurals)
        elif answer.ok and isinstance(answer.body, Mapping):
            served = {
                r.get("name") for r in answer.body.get("resources") or [] if isinstance(r, Mapping)
            }
            missing = sorted(p for p in plurals if p not in served)
        else:
            continue
        if missing:
            which = sorted(f"{n} {k}" for (k, v), n in kinds.items() if v == version)
            raise KubeApiError(
                "kube-kind-not-served",
                f"the cluster at {client.where} does not serve {version} "
                f"({', '.join(missing)}), which {', '.join(which)} of this run need; nothing "
                "was applied",
                "install what serves it (KEDA for keda.sh ScaledObjects: "
                "https://keda.sh/docs/deploy/), or deploy without the option that renders it "
                "(--autoscaling)",
            )


def teardown_command(args: argparse.Namespace, run_id: str) -> str:
    parts = ["vf", "teardown", str(args.flow), "--run", run_id]
    if getattr(args, "namespace", "default") != "default":
        parts += ["--namespace", args.namespace]
    for flag in ("context", "kubeconfig"):
        value = getattr(args, flag, None)
        if value:
            parts += [f"--{flag}", str(value)]
    import shlex

    return " ".join(shlex.quote(p) for p in parts)


def _run_of(objects: Sequence[Mapping[str, Any]]) -> str:
    for obj in objects:
        run = ((obj.get("metadata") or {}).get("labels") or {}).get("vfcore.io/run")
        if isinstance(run, str) and run:
            return run
    return "?"


def apply_and_wait(
    args: argparse.Namespace,
    objects: Sequence[Mapping[str, Any]],
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Preflight, apply and wait; see the module docstring. Returns the exit code."""
    from vfadapters.kubernetes.apply import apply_objects
    from vfadapters.kubernetes.client import KubeApiError, connect_from_args
    from vfadapters.kubernetes.wait import WaitOptions, expected_from_objects, wait_for_run
    from vfadapters.loading import load_runnable

    out = out or sys.stdout
    err = err or sys.stderr
    _check_durations(args)
    cached = getattr(args, "_vf_live_plan", None)
    spec = cached[0] if cached is not None else load_runnable(args.flow)[1]
    run_id = _run_of(objects)
    namespace = getattr(args, "namespace", "default")

    def report(rule: str, message: str, hint: str) -> None:
        err.write(f"error: {rule}\n  {message}\n  hint: {hint}\n")

    try:
        client = connect_from_args(args)
        err.write(f"preflight: planning {spec.name} on {client.where}…\n")
        cluster, result = run_live_plan(client, spec, args)
        refusal, warnings = preflight_refusal(
            result,
            strict=bool(getattr(args, "strict_preflight", False)),
            allow_preemption=bool(getattr(args, "allow_preemption", False)),
        )
        for w in warnings:
            err.write(f"preflight warning: {w}\n")
        if refusal is not None:
            report(refusal.rule, refusal.message, refusal.hint)
            return EXIT_STRICT
        err.write(
            f"preflight: {result.verdict}"
            + (
                ""
                if result.scheduler is None
                else f", kube-scheduler model: {result.scheduler.verdict_with_remedy}"
            )
            + "\n"
        )
        refusal, objects = _redeploy_and_storage(client, args, objects, spec, run_id, result, err)
        if refusal is not None:
            report(refusal.rule, refusal.message, refusal.hint)
            return EXIT_USAGE if refusal.rule.startswith("redeploy-") else EXIT_STRICT
        from vfcore.runtime import broker_hosts

        hosts = broker_hosts(objects, cluster.nodes, [u.name for u in cluster.unreadable_nodes])
        if hosts is not None and hosts.verdict == "does-not-fit":  # --broker-replicas 3
            report("preflight-broker-hosts", hosts.message, hosts.hint)
            return EXIT_STRICT
        if hosts is not None and hosts.verdict == "unknown":
            err.write(f"preflight warning: broker-hosts-unknown: {hosts.message}\n")
        check_served_kinds(client, objects)
        dry_run = getattr(args, "dry_run", None) == "server"
        force = bool(getattr(args, "force_conflicts", False))
        remedy = _remedy_to_apply(result)
        if remedy is None:
            applied = apply_objects(client, objects, dry_run=dry_run, force_conflicts=force)
        else:
            err.write(f"remedy: {remedy.describe()} vf deploy applies it ({remedy.kind}).\n")
            applied = _apply_remedy(
                client, objects, remedy, result, cluster, spec, run_id, namespace, args,
                dry_run=dry_run, force=force, err=err,
            )  # fmt: skip
    except KubeApiError as exc:
        report(exc.rule, exc.message, exc.hint)
        return EXIT_RUNTIME
    except KeyboardInterrupt:
        err.write(
            f"interrupted: what was applied of run {run_id} stays; remove it with:\n"
            f"  {teardown_command(args, run_id)}\n"
        )
        return EXIT_STOPPED
    for a in applied.applied:
        out.write(a.line(dry_run) + "\n")
    counts = applied.counts()
    out.write(
        f"run {run_id} of {spec.name} in {namespace}: {counts['created']} created, "
        f"{counts['configured']} configured, {counts['unchanged']} unchanged"
        + (" (server dry run: nothing stored)" if dry_run else "")
        + "\n"
    )
    if dry_run or getattr(args, "no_wait", False):
        return EXIT_OK
    from vfcore.runtime import run_selector

    jobs, workloads = expected_from_objects(objects)
    opts = WaitOptions(
        namespace=namespace,
        selector=run_selector(spec.name, run_id),
        flow_type=str(spec.flow_type),
        jobs=jobs,
        workloads=workloads,
        timeout_s=getattr(args, "timeout", None),
        unschedulable_grace_s=float(getattr(args, "unschedulable_grace", 60.0)),
        explain=explainer(result, spec, run_id),
    )
    teardown = teardown_command(args, run_id)
    err.write(f"waiting for run {run_id} (Ctrl-C leaves it running; `{teardown}` removes it)\n")

    def say(text: str) -> None:
        err.write(f"  {text}\n")

    outcome = wait_for_run(client, opts, progress=say)
    if outcome.ok:
        out.write(f"{outcome.message} ({outcome.waited_s:.0f} s)\n")
        return EXIT_OK
    if outcome.outcome == "interrupted":
        err.write(f"interrupted: run {run_id} left in place; remove it with:\n  {teardown}\n")
        return EXIT_STOPPED
    report(
        f"run-{outcome.outcome}",
        outcome.message,
        f"the run was left in place for inspection (`vf status {args.flow} --run {run_id}`); "
        f"remove it with `{teardown}`",
    )
    return EXIT_RUNTIME
