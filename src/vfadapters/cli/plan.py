"""``vf plan FLOW --cluster PATH``: will the flow fit, and where will each pod land?"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO, TypeVar

from vfadapters.cli.inputs import add_gpu_options, dra_options, load_spec
from vfadapters.cli.output import (
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_STRICT,
    TEXT_LIST_LIMIT,
    emit_json,
    first_few,
    report_error,
    table,
)

T = TypeVar("T")


def register(sub: Any) -> None:
    """Add the ``plan`` subparser to ``vf``'s subcommands."""
    plan = sub.add_parser(
        "plan",
        help="will the flow fit on a cluster, and where will each pod land?",
        description="Exact placement of every pod (CP-SAT), a three-valued verdict, reasons "
        "and fixes for what does not fit, and what kube-scheduler would do.",
    )
    plan.add_argument("flow", metavar="FLOW", help="flow.py, flow.py:factory or spec.json")
    source = plan.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--cluster",
        metavar="PATH",
        help="a directory with nodes.json and pods.json (kubectl get ... -o json) and, for "
        "--gpu-mode dra, resourceslices.json, deviceclasses.json and resourceclaims.json; or "
        "one file holding a List of those kinds",
    )
    source.add_argument(
        "--kube",
        action="store_true",
        help="read nodes, pods and RuntimeClasses (and the DRA objects) from the live "
        "cluster (--context, --kubeconfig; see docs/kubernetes.md)",
    )
    from vfadapters.kubernetes.client import add_connection_options

    add_connection_options(plan)
    add_gpu_options(plan)
    plan.add_argument(
        "--gpu-runtime-class", metavar="NAME", default=None, help="RuntimeClass for GPU pods"
    )
    plan.add_argument(
        "--gpu-node-selector",
        metavar="KEY=VALUE",
        default=None,
        help="label GPU pods select (default: nvidia.com/gpu.present=true)",
    )
    plan.add_argument(
        "--resources",
        action="append",
        default=[],
        metavar="NODE=cpu:2,memory:8Gi",
        help="per-node cpu/memory requests (repeatable)",
    )
    plan.add_argument(
        "--strict-preflight",
        action="store_true",
        help="exit 3 unless the flow fits and kube-scheduler (with the remedy) lands it",
    )
    plan.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="S",
        help="wall-clock limit in seconds for each phase: the solver, the scheduler model and "
        "its remedy (default: deterministic limits); a phase cut short says so",
    )
    plan.add_argument(
        "--kube-version",
        default="1.36",
        metavar="1.N",
        help="the Kubernetes minor version whose kube-scheduler the model predicts, "
        "1.29 to 1.36 (default 1.36; BalancedAllocation and tie-breaking changed in 1.36)",
    )
    plan.add_argument(
        "--priority-class",
        metavar="NAME",
        default=None,
        help="the PriorityClass the pods will carry (vf deploy --priority-class): its value, from "
        "the cluster's PriorityClasses, decides whether a stranded pod preempts others",
    )
    plan.add_argument(
        "--allow-preemption",
        action="store_true",
        help="with --strict-preflight: accept a plan whose pods evict lower-priority pods "
        "(by default a predicted eviction fails it)",
    )
    plan.add_argument(
        "--image",
        metavar="IMAGE",
        default=None,
        help="the workers' image (vf deploy --image), for kube-scheduler's ImageLocality score",
    )
    plan.add_argument(
        "--namespace",
        metavar="NS",
        default="default",
        help="the namespace vf deploy would use (existing pods' affinity terms and PDBs are "
        "per namespace)",
    )
    plan.add_argument("--json", action="store_true", help="print one JSON document")
    plan.add_argument(
        "--mig-config",
        metavar="FILE",
        help="with --gpu-mode mix: write the mig-parted config (YAML, for the MIG manager's "
        "ConfigMap) to FILE; when there is none, no file and a one-line message",
    )
    plan.set_defaults(handler=_cmd_plan)


def _cmd_plan(args: argparse.Namespace) -> int:
    from vfadapters.clusterload import load_cluster
    from vfcore import InvalidInputError
    from vfcore.placement import SolverConfig, parse_kube_version, parse_resources_option, plan

    kube_version = parse_kube_version(args.kube_version)  # before any work
    phases = _Phases(sys.stderr)  # "parse" runs from here to the exact plan
    spec = load_spec(args.flow)
    if args.kube:
        from vfadapters.kubernetes.client import KubeApiError, connect_from_args
        from vfadapters.kubernetes.scheduling import read_snapshot_and_facts

        try:
            cluster, facts = read_snapshot_and_facts(connect_from_args(args))
        except KubeApiError as exc:
            report_error(exc.rule, exc.message, exc.hint, as_json=args.json)
            return EXIT_RUNTIME
    else:
        from vfadapters.clusterload import load_scheduling_facts

        cluster = load_cluster(args.cluster)
        facts = load_scheduling_facts(args.cluster)
    resources: dict[str, dict[str, str]] = {}
    for text in args.resources:
        for node, entries in parse_resources_option(text).items():
            resources.setdefault(node, {}).update(entries)
    selector = None
    if args.gpu_node_selector is not None:
        key, sep, value = args.gpu_node_selector.partition("=")
        if not sep or not key:
            raise InvalidInputError(
                "invalid-node-selector",
                f"--gpu-node-selector {args.gpu_node_selector!r} is not KEY=VALUE",
                "write it like --gpu-node-selector videoflow.io/gpu-pool=true",
            )
        selector = (key, value)
    if args.time_limit is not None and not args.time_limit > 0:
        raise InvalidInputError(
            "invalid-time-limit",
            f"--time-limit {args.time_limit} must be > 0 seconds",
            "give the solver a positive limit, e.g. --time-limit 30",
        )
    solver = (
        SolverConfig.wall_clock(args.time_limit)
        if args.time_limit is not None
        else SolverConfig.deterministic()
    )
    from vfadapters.kubernetes.scheduling import scheduler_workloads

    workloads = scheduler_workloads(
        spec,
        facts,
        priority_class=args.priority_class,
        image=args.image,
        namespace=args.namespace,
        gpu_mode=args.gpu_mode,
        gpu_resource_name=args.gpu_resource_name,
        gpu_runtime_class=args.gpu_runtime_class,
        gpu_node_selector=selector,
        resources=resources,
        dra=dra_options(args),
    )
    dra = dra_options(args)
    sys.stderr.write(
        f"planning {len(spec.nodes)} node(s) on {len(cluster.nodes)} cluster node(s)…\n"
    )
    try:
        result = _interruptible(
            lambda: plan(
                spec,
                cluster,
                gpu_mode=args.gpu_mode,
                gpu_resource_name=args.gpu_resource_name,
                gpu_runtime_class=args.gpu_runtime_class,
                gpu_node_selector=selector,
                resources=resources,
                solver=solver,
                time_limit=args.time_limit,
                clock=time.monotonic,
                progress=phases.start,
                kube_version=kube_version,
                workloads=workloads,
                facts=facts,
                **dra,
            ),
            tick=phases.tick,
        )
    finally:
        phases.close()
    doc = result.to_dict()
    doc["flow"] = {"name": spec.name, "flow_type": spec.flow_type}
    if args.json:
        emit_json(doc)
    else:
        _print_plan(doc, cluster, sys.stdout)
    if args.mig_config is not None:
        _write_mig_config(args.mig_config, doc)
    report = result.scheduler
    preempting = (
        args.allow_preemption
        and result.verdict == "does-not-fit"
        and report is not None
        and report.evicts
        and report.verdict_with_remedy == "lands"
        and not any(p.is_error for p in result.problems)
    )  # it does not fit beside the bound pods, and lands by evicting lower-priority ones
    if args.strict_preflight and not result.passes_preflight and not preempting:
        sched = "not modelled" if result.scheduler is None else result.scheduler.verdict_with_remedy
        errors = any(p.is_error for p in result.problems)
        sys.stderr.write(
            f"error: strict-preflight\n  verdict {result.verdict}, scheduler {sched}"
            f"{', with problems' if errors else ''}\n"
            "  hint: fix what the plan reports, or drop --strict-preflight\n"
        )
        return EXIT_STRICT
    if args.strict_preflight and report is not None and report.evicts and not args.allow_preemption:
        sys.stderr.write(
            "error: strict-preflight-preempts\n"
            f"  the pods land only by evicting {len(report.evicted)} lower-priority pod(s): "
            f"{first_few(list(report.evicted))}\n"
            "  hint: pass --allow-preemption to accept the evictions, deploy without "
            "--priority-class, or make room first\n"
        )
        return EXIT_STRICT
    return EXIT_OK


class _Phases:
    """The plan's phases on a terminal: shown (rich, on stderr) once the plan passes a second.

    Only when stderr is a TTY; pipes and files get nothing. ``start`` is called
    from the planning thread, ``tick`` and ``close`` from the main thread.
    """

    def __init__(self, stream: TextIO) -> None:
        # VF_PROGRESS_AFTER_S (default 1) moves the threshold; the tests set it to 0.
        try:
            self.SHOW_AFTER_S = float(os.environ.get("VF_PROGRESS_AFTER_S", "1"))
        except ValueError:
            self.SHOW_AFTER_S = 1.0
        self.stream = stream
        self.enabled = stream.isatty()
        self.began = time.monotonic()
        self.done: list[tuple[str, float]] = []
        self.current: tuple[str, float] = ("parse", self.began)
        self.status: Any = None

    def start(self, name: str) -> None:
        now = time.monotonic()
        label, since = self.current
        self.done.append((label, now - since))
        self.current = (name, now)

    def _text(self) -> str:
        now = time.monotonic()
        label, since = self.current
        parts = [f"{name} {seconds:.1f}s" for name, seconds in self.done]
        parts.append(f"[bold]{label}[/bold] {now - since:.1f}s…")
        return "planning: " + " · ".join(parts)

    def tick(self) -> None:
        if not self.enabled:
            return
        if self.status is None:
            if time.monotonic() - self.began < self.SHOW_AFTER_S:
                return
            from rich.console import Console

            self.status = Console(file=self.stream).status(self._text())
            self.status.start()
        self.status.update(self._text())

    def close(self) -> None:
        if self.status is None:
            return
        self.status.stop()
        self.start("done")
        shown = " · ".join(f"{name} {seconds:.1f}s" for name, seconds in self.done)
        self.stream.write(f"planned in {time.monotonic() - self.began:.1f}s: {shown}\n")


def _interruptible(work: Callable[[], T], tick: Callable[[], None] | None = None) -> T:
    """``work()`` in a daemon thread, so that Ctrl-C stops ``vf plan`` at once.

    The solver runs in C++ and holds the thread that called it until it
    returns (up to its time limit); Python sees SIGINT only in the main thread,
    between bytecodes. Here the main thread only waits, so Ctrl-C prints
    ``interrupted`` and exits 130 without waiting for the solver, and with no
    partial plan on stdout.
    """
    import threading

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # re-raised in the main thread below
            box["error"] = exc

    thread = threading.Thread(target=target, name="vf-plan", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.1)
            if tick is not None:
                tick()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()
        os._exit(130)  # the solver thread cannot be stopped from here; nothing was written
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def _print_plan(doc: dict[str, Any], cluster: Any, out: TextIO) -> None:
    from vfcore.quantity import format_human

    flow = doc["flow"]
    verdict = {"fits": "FITS", "does-not-fit": "DOES NOT FIT", "unknown": "UNKNOWN"}[doc["verdict"]]
    out.write(
        f"plan for flow {flow['name']} ({flow['flow_type']}) on {len(cluster.nodes)} node(s), "
        f"{doc['gpu_mode']} mode: {verdict}\n"
    )
    solver = doc["solver"]
    used = len(set(doc["assignments"].values()))
    how = "deterministic" if solver["deterministic"] else "wall-clock limited"
    if doc["verdict"] == "unknown":
        # what is unknown and why first; the solver's status is about the known part only
        for item in doc["unknown"]:
            out.write(f"  unknown: {item['what']}: {item['reason']}\n")
        out.write(
            f"  on the nodes whose state is known: {len(doc['assignments'])} of "
            f"{len(doc['pods'])} pod(s) placed, on {used} node(s) ({solver['method']} solver, "
            f"{solver['wall_s']:.3f} s, {how}); the rest fits or not depending on what is "
            "unknown\n"
        )
    else:
        out.write(
            f"  solver: {solver['method']} {solver['status']} in {solver['wall_s']:.3f} s "
            f"({how}); {len(doc['assignments'])} pod(s) on {used} node(s)\n"
        )
    for proof in doc["proofs"]:
        out.write(f"  proof: {proof}\n")
    for note in solver["notes"]:
        out.write(f"  note: {note}\n")

    by_node: dict[str, list[str]] = {}
    for pod, node in sorted(doc["assignments"].items()):
        by_node.setdefault(node, []).append(pod)
    rows = [["NODE", "RESOURCE", "ALLOCATABLE", "FREE BEFORE", "PLANNED", "FREE AFTER"]]
    for u in doc["usage"]:
        if not u["planned"] and u["resource"] in ("cpu", "memory") and u["node"] not in by_node:
            continue

        def q(v: int | None, r: str = u["resource"]) -> str:
            return "unknown" if v is None else format_human(r, v)  # one unit per resource

        rows.append(
            [
                u["node"],
                u["resource"],
                q(u["allocatable"]),
                q(u["free_before"]),
                q(u["planned"]),
                q(u["free_after"]),
            ]
        )
    if len(rows) > 1:
        out.write("\nnodes\n")
        table(rows, out)
    if by_node:
        out.write("\npods by node\n")
        cards = doc["cards"]
        for node, pods in sorted(by_node.items()):
            shown = [f"{p}@card{cards[p]}" if p in cards else p for p in pods]
            out.write(f"  {node}: {', '.join(shown)}\n")
    _print_shared_pools(doc.get("shared_pools") or [], out)
    _print_dra(doc.get("dra"), out)
    if doc["unplaced"]:
        out.write("\nunplaced\n")
        for item in doc["unplaced"][:TEXT_LIST_LIMIT]:
            out.write(f"  {item['summary']} [{item['kind']}]\n")
            if item["fix"]:
                out.write(f"    fix: {item['fix']}\n")
        hidden = len(doc["unplaced"]) - TEXT_LIST_LIMIT
        if hidden > 0:
            out.write(f"  … and {hidden:,} more unplaced pod(s); --json lists every one\n")
    if doc["fix"]:
        out.write(f"\nsmallest change that makes it fit: {doc['fix']}\n")
    if doc["unknown"] and doc["verdict"] != "unknown":  # an unknown verdict said them first
        out.write("\nunknown\n")
        for item in doc["unknown"]:
            out.write(f"  {item['what']}: {item['reason']}\n")
    if doc["problems"]:
        out.write("\nproblems\n")
        for p in doc["problems"]:
            out.write(
                f"  {p['severity']}: {p['code']}\n    {p['message']}\n    hint: {p['hint']}\n"
            )
    if doc.get("mig") is not None:
        _print_mig(doc, out)
    sched = doc.get("scheduler")
    if sched:
        version = sched.get("config", {}).get("kube_version")
        label = "kube-scheduler model" + (f" ({version})" if version else "")
        out.write(f"\n{label}: {sched['verdict']}")
        counted = sched.get("stranded_range")
        window = sched.get("window")
        unknown = sched["verdict"] == "unknown"
        if unknown:  # why, not a list of pods that are "stranded" only maybe
            out.write(f": {sched['reason']}")
            if counted and counted[1] > 0:
                said = f"{counted[0]}–{counted[1]}" if counted[0] != counted[1] else str(counted[0])
                out.write(f"; {said} of {len(doc['pods'])} pod(s) may be left Pending")
        elif (
            counted
            and counted[1] > 0
            and (counted[0] != counted[1] or (window or {}).get("matters"))
        ):
            said = f"{counted[0]}–{counted[1]}" if counted[0] != counted[1] else str(counted[0])
            out.write(f", {said} of {len(doc['pods'])} pod(s) stranded")
        if sched.get("stranded") and not unknown:
            out.write(f" (stranded: {first_few(sched['stranded'])})")
        out.write("\n")
        if not unknown and (
            not sched.get("exhaustive", True)
            or sched.get("cut_short")
            or (window and window.get("matters"))
        ):
            out.write(f"  {sched['reason']}\n")
        for preemption in sched.get("preemptions") or []:
            victims = ", ".join(
                v["pod"] + (f" ({v['owner']})" if v.get("owner") else "")
                for v in preemption["victims"]
            )
            out.write(
                f"  preempts: {preemption['pod']} on {preemption['node']} evicts {victims}"
                + ("" if preemption["budgets_known"] else " (PodDisruptionBudgets not read)")
                + "\n"
            )
        if sched.get("evicted"):
            out.write(f"  evicted in some outcome: {first_few(sched['evicted'])}\n")
        for note in sched.get("notes") or []:
            out.write(f"  note: {note}\n")
        if sched.get("cut_short"):
            out.write(f"  cut short (time limit or work bound): {', '.join(sched['cut_short'])}\n")
        remedy = sched.get("remedy")
        if remedy:
            out.write(f"  remedy: {remedy.get('description', remedy)}\n")
            out.write(f"  with the remedy: {sched.get('verdict_with_remedy')}\n")


def _print_dra(dra: dict[str, Any] | None, out: TextIO) -> None:
    """``--gpu-mode dra``: the devices the plan gives each pod (driver/pool/device)."""
    if not dra or not dra.get("devices"):
        return
    out.write("\nDRA devices (the plan's; kube-scheduler's allocator picks its own)\n")
    for pod, devices in sorted(dra["devices"].items())[:TEXT_LIST_LIMIT]:
        out.write(f"  {pod}: {', '.join(devices)}\n")
    hidden = len(dra["devices"]) - TEXT_LIST_LIMIT
    if hidden > 0:
        out.write(f"  … and {hidden:,} more; --json lists every one\n")
    for note in dra.get("notes") or []:
        out.write(f"  note: {note}\n")


def _print_shared_pools(pools: list[dict[str, Any]], out: TextIO) -> None:
    """Time-sliced / MPS nodes: physical cards, units per card, and which pods share a card."""
    if not pools:
        return
    out.write("\nshared GPU pools (a unit is a share of a card, not a card)\n")
    for pool in pools:
        memory = pool["memory_mib"]
        per_card = "unknown memory" if memory is None else f"{memory / 1024:.2f} GiB per card"
        cards = "?" if pool["cards"] is None else pool["cards"]
        out.write(
            f"  {pool['node']}: {cards} card(s) x {pool['units_per_card']} {pool['resource']} "
            f"units ({pool['sharing']}), {per_card}\n"
        )
        assumed = "" if pool["mapping_certain"] else " (the solver's choice; the plugin picks)"
        for group in pool["card_groups"]:
            if len(group) > 1:
                out.write(f"    share one card{assumed}: {', '.join(group)}\n")
        if pool["pods"]:
            out.write(f"    VRAM {pool['verdict']}: {pool['reason']}\n")


# -- mix mode: MIG layouts and the mig-parted config (vfcore.mig) --------------
# BEGIN mix-mode block: self-contained; only `_print_plan` calls `_print_mig`.


def _print_mig(doc: dict[str, Any], out: TextIO) -> None:
    """The ``mig`` section of a mix-mode plan: resources, per-card layouts, the config."""
    mig = doc["mig"]
    bound = mig["cards_lower_bound"]
    out.write(
        f"\nMIG layouts: {mig['cards_reconfigured']} card(s) reconfigured on "
        f"{mig['nodes_touched']} node(s)"
        + ("" if bound is None else f" (lower bound {bound})")
        + "\n"
    )
    for flow_node, resource in mig["resources"].items():
        out.write(f"  {flow_node} requests {resource}\n")
    for node in mig["nodes"]:
        family = node["family"] or "unknown family"
        if not node["touched"]:
            pool = ", ".join(f"{n}×{p}" for p, n in node["pool"].items()) or "none"
            out.write(f"  {node['node']} ({family}): kept as is; free instances {pool}\n")
            by_profile: dict[str, list[str]] = {}
            for pod, profile in node["pool_pods"].items():
                by_profile.setdefault(profile, []).append(pod)
            for profile, pods in sorted(by_profile.items()):
                out.write(f"    {profile}: {', '.join(pods)}\n")
            if node["note"]:
                out.write(f"    ({node['note']})\n")
            continue
        count = node["cards_reconfigured"]
        if node["indices_assumed"]:
            said = f"up to {count} card(s) reconfigured (card order unknown: every card listed)"
        else:
            said = f"{count} card(s) reconfigured"
        reset = "; MIG mode change (may reset every GPU of the node)" if node["mode_change"] else ""
        out.write(f"  {node['node']} ({family}): {said}, config {node['config_name']}{reset}\n")
        cards = node["cards"]
        k = 0
        while k < len(cards):
            card = cards[k]
            if not card["mig_enabled"]:
                holders = f": {', '.join(card['pods'])}" if card["pods"] else ""
                last = k
                while (
                    not holders
                    and last + 1 < len(cards)
                    and not cards[last + 1]["mig_enabled"]
                    and not cards[last + 1]["pods"]
                    and cards[last + 1]["action"] == card["action"]
                ):
                    last += 1
                span = f"card {card['index']}"
                if last > k:
                    span = f"cards {card['index']}-{cards[last]['index']}"
                out.write(f"    {span} [{card['action']}] whole card{holders}\n")
                k = last + 1
                continue
            k += 1
            slots = ", ".join(
                f"{i['profile']}@{'?' if i['start'] is None else i['start']}"
                + (f" {i['pod']}" if i["pod"] else "")
                for i in card["instances"]
            )
            out.write(f"    card {card['index']} [{card['action']}] {slots}\n")
    if any(n["touched"] for n in mig["nodes"]):
        out.write(
            "  (@N: one valid start slot per instance, a witness that the layout fits; "
            "mig-parted applies counts and the driver picks the slots)\n"
        )
    for note in mig["notes"]:
        out.write(f"  note: {note}\n")
    if mig["mig_parted_config"] is None:
        why = mig.get("config_withheld") or "nothing to apply"
        out.write(f"\nno mig-parted config: {why}\n")
    else:
        from vfcore.placement import mig_parted_yaml

        out.write(
            "\nmig-parted config (add it to the MIG manager's configs, then label each node):\n"
        )
        for node in mig["nodes"]:
            if node["label"]:
                out.write(f"  {node['label']}\n")
        text = mig_parted_yaml(mig["mig_parted_config"])
        out.write("\n" + "".join(f"  {line}\n" for line in text.splitlines()))


def _write_mig_config(path: str, doc: dict[str, Any]) -> None:
    """``--mig-config FILE``: the YAML config, or (when there is none) a line on stderr."""
    from vfcore import InvalidInputError
    from vfcore.placement import mig_parted_yaml

    mig = doc.get("mig")
    if mig is None:
        sys.stderr.write(f"no mig-parted config: not a --gpu-mode mix plan; {path} not written\n")
        return
    if mig["mig_parted_config"] is None:
        why = mig.get("config_withheld") or "nothing to apply"
        sys.stderr.write(f"no mig-parted config: {why}; {path} not written\n")
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(mig_parted_yaml(mig["mig_parted_config"]))
    except OSError as e:
        raise InvalidInputError(
            "mig-config-unwritable",
            f"--mig-config {path!r} could not be written: {e.strerror or e}",
            "give a writable file path, e.g. --mig-config mig-config.yaml",
        ) from None
    sys.stderr.write(f"mig-parted config written to {path}\n")


# END mix-mode block
