"""The ``vf`` command line.

Exit codes: 0 ok; 1 runtime error; 2 usage error or invalid input (the flow has
errors, a file does not load); 3 a strict verdict failed. ``--json`` prints
exactly one JSON document on stdout; diagnostics go to stderr. Bad input never
shows a traceback (set ``VF_DEBUG=1`` to see one for runtime errors).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, NoReturn, TextIO, TypeVar

EXIT_OK, EXIT_RUNTIME, EXIT_INVALID, EXIT_STRICT = 0, 1, 2, 3
T = TypeVar("T")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"error: usage\n  {message}\n  hint: run `{self.prog} --help`\n")
        raise SystemExit(EXIT_INVALID)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="vf",
        description="Decide how stream-processing flows fit onto GPUs and clusters.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    explain = sub.add_parser(
        "explain",
        help="validate a flow and print what it needs (no cluster needed)",
        description="Validation issues, per-node replicas and workload kind, GPU demand "
        "per resource, the largest pod, and autoscaling eligibility.",
    )
    explain.add_argument("flow", metavar="FLOW", help="flow.py, flow.py:factory or spec.json")
    _add_gpu_options(explain)
    explain.add_argument(
        "--autoscaling", action="store_true", help="check the flow as deployed with autoscaling"
    )
    explain.add_argument(
        "--gpu-autoscaling", action="store_true", help="let GPU nodes autoscale too"
    )
    explain.add_argument(
        "--max-replicas", type=int, default=10, metavar="N", help="autoscaling ceiling (10)"
    )
    explain.add_argument("--json", action="store_true", help="print one JSON document")
    explain.set_defaults(handler=_cmd_explain)

    plan = sub.add_parser(
        "plan",
        help="will the flow fit on a cluster, and where will each pod land?",
        description="Exact placement of every pod (CP-SAT), a three-valued verdict, reasons "
        "and fixes for what does not fit, and what kube-scheduler would do.",
    )
    plan.add_argument("flow", metavar="FLOW", help="flow.py, flow.py:factory or spec.json")
    plan.add_argument(
        "--cluster",
        required=True,
        metavar="PATH",
        help="a directory with nodes.json and pods.json (kubectl get ... -o json), "
        "or one file holding a List of both",
    )
    _add_gpu_options(plan)
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
        help="wall-clock limit for the solver (default: deterministic limits)",
    )
    plan.add_argument("--json", action="store_true", help="print one JSON document")
    plan.set_defaults(handler=_cmd_plan)

    # Commands that live in their own modules register themselves; each module
    # imports nothing heavy at import time, so `vf --help` stays fast.
    import importlib

    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"vfadapters.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"vfadapters.commands.{name}":
                raise
            continue
        module.register(sub)
    return parser


#: `vfadapters.commands.<name>` modules, each with ``register(subparsers)``.
COMMAND_MODULES = ("scale", "run")


def _add_gpu_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpu-mode",
        choices=("exclusive", "shared", "mix"),
        default="exclusive",
        help="how GPU pods take GPUs (default: exclusive)",
    )
    p.add_argument(
        "--gpu-resource-name",
        metavar="R",
        default=None,
        help="deploy-wide GPU resource (default: nvidia.com/gpu)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    global _last_command
    parser = _parser()
    args = parser.parse_args(argv)
    _last_command = args.command
    if args.version:
        from vfcore import __version__

        print(f"vf {__version__}")
        return EXIT_OK
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_INVALID
    from vfcore import InvalidFlowError, InvalidInputError

    try:
        code: int = args.handler(args)
        return code
    except InvalidFlowError as exc:
        _report_issues(exc.issues, as_json=getattr(args, "json", False))
        return EXIT_INVALID
    except InvalidInputError as exc:
        _report_error(exc.rule, exc.message, exc.hint, as_json=getattr(args, "json", False))
        return EXIT_INVALID
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        # The reader went away (`vf explain ... | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_RUNTIME
    except Exception as exc:  # a bug or an environment failure: short, with a way to see more
        if os.environ.get("VF_DEBUG"):
            traceback.print_exc()
        _report_error(
            "internal-error",
            f"{type(exc).__name__}: {exc}",
            "set VF_DEBUG=1 to see the traceback, and report it",
            as_json=getattr(args, "json", False),
        )
        return EXIT_RUNTIME


def _emit_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, indent=2, allow_nan=False) + "\n")


def _report_error(rule: str, message: str, hint: str, *, as_json: bool) -> None:
    sys.stderr.write(f"error: {rule}\n  {message}\n  hint: {hint}\n")
    if as_json:
        _emit_json({"error": {"rule": rule, "message": message, "hint": hint}})


def _report_issues(issues: Sequence[Any], *, as_json: bool) -> None:
    for issue in issues:
        sys.stderr.write(issue.render() + "\n")
    if as_json:
        first = next((i for i in issues if i.is_error), issues[0])
        _emit_json(
            {
                "error": {"rule": first.rule, "message": first.message, "hint": first.hint},
                "valid": False,
                "issues": [i.to_dict() for i in issues],
            }
        )


def _load_spec(target: str) -> Any:
    from vfadapters.loading import load_flow, split_target
    from vfcore import FlowSpec

    loaded = load_flow(target)
    if isinstance(loaded, FlowSpec):
        return loaded
    spec = loaded.spec()
    if loaded.name is None:
        spec = replace(spec, name=split_target(target)[0].stem)
    return spec


def _cmd_explain(args: argparse.Namespace) -> int:
    from vfcore import AutoscalingOptions, explain

    spec = _load_spec(args.flow)
    result = explain(
        spec,
        gpu_mode=args.gpu_mode,
        gpu_resource_name=args.gpu_resource_name,
        autoscaling=AutoscalingOptions(
            enabled=args.autoscaling,
            gpu_autoscaling=args.gpu_autoscaling,
            max_replicas=args.max_replicas,
        ),
    )
    if args.json:
        _emit_json(result.to_dict())
    else:
        _print_explanation(result.to_dict(), sys.stdout)
    return EXIT_OK if result.valid else EXIT_INVALID


def _cmd_plan(args: argparse.Namespace) -> int:
    from vfadapters.clusterload import load_cluster
    from vfcore import InvalidInputError
    from vfcore.placement.claims import parse_resources_option
    from vfcore.placement.packing import SolverConfig
    from vfcore.placement.plan import plan

    spec = _load_spec(args.flow)
    cluster = load_cluster(args.cluster)
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
    sys.stderr.write(
        f"planning {len(spec.nodes)} node(s) on {len(cluster.nodes)} cluster node(s)…\n"
    )
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
        )
    )
    doc = result.to_dict()
    doc["flow"] = {"name": spec.name, "flow_type": spec.flow_type}
    if args.json:
        _emit_json(doc)
    else:
        _print_plan(doc, cluster, sys.stdout)
    if args.strict_preflight and not result.passes_preflight:
        sched = "not modelled" if result.scheduler is None else result.scheduler.verdict_with_remedy
        errors = any(p.is_error for p in result.problems)
        sys.stderr.write(
            f"error: strict-preflight\n  verdict {result.verdict}, scheduler {sched}"
            f"{', with problems' if errors else ''}\n"
            "  hint: fix what the plan reports, or drop --strict-preflight\n"
        )
        return EXIT_STRICT
    return EXIT_OK


def _interruptible(work: Callable[[], T]) -> T:
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
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()
        os._exit(130)  # the solver thread cannot be stopped from here; nothing was written
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


#: How many items a text listing shows before it says how many more there are.
TEXT_LIST_LIMIT = 20


def _first_few(names: Sequence[str], limit: int = TEXT_LIST_LIMIT) -> str:
    """``a, b, c`` — or the first ``limit`` names and how many more (``--json`` has them all)."""
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])} and {len(names) - limit:,} more"


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
    out.write(
        f"  solver: {solver['method']} {solver['status']} in {solver['wall_s']:.3f} s "
        f"({'deterministic' if solver['deterministic'] else 'wall-clock limited'}); "
        f"{len(doc['assignments'])} pod(s) on {used} node(s)\n"
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
        _table(rows, out)
    if by_node:
        out.write("\npods by node\n")
        cards = doc["cards"]
        for node, pods in sorted(by_node.items()):
            shown = [f"{p}@card{cards[p]}" if p in cards else p for p in pods]
            out.write(f"  {node}: {', '.join(shown)}\n")
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
    if doc["unknown"]:
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
        out.write(f"\nkube-scheduler model: {sched['verdict']}")
        if sched.get("stranded"):
            out.write(f" (stranded: {_first_few(sched['stranded'])})")
        out.write("\n")
        remedy = sched.get("remedy")
        if remedy:
            out.write(f"  remedy: {remedy.get('description', remedy)}\n")
            out.write(f"  with the remedy: {sched.get('verdict_with_remedy')}\n")


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
        assumed = " (card indices assumed)" if node["indices_assumed"] else ""
        out.write(
            f"  {node['node']} ({family}): {node['cards_reconfigured']} card(s) reconfigured, "
            f"config {node['config_name']}{assumed}\n"
        )
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
            if card["creation_order"]:
                order = ", ".join(f"{p['profile']}@{p['start']}" for p in card["creation_order"])
                out.write(f"      create in order: {order}\n")
    for note in mig["notes"]:
        out.write(f"  note: {note}\n")
    if mig["mig_parted_config"]["mig-configs"]:
        from vfcore.placement.mig import mig_parted_yaml

        out.write(
            "\nmig-parted config (add it to the MIG manager's configs, then label each node):\n"
        )
        for node in mig["nodes"]:
            if node["label"]:
                out.write(f"  {node['label']}\n")
        text = mig_parted_yaml(mig["mig_parted_config"])
        out.write("\n" + "".join(f"  {line}\n" for line in text.splitlines()))


# END mix-mode block


# -- text rendering ------------------------------------------------------------


def _table(rows: list[list[str]], out: TextIO, indent: str = "  ") -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        out.write(indent + line.rstrip() + "\n")


def _device(node: dict[str, Any]) -> str:
    if node["device_type"] != "gpu":
        return "cpu"
    text = f"gpu×{node['gpu_count']}"
    if node["gpu_memory_gib"] is not None:
        text += f" {node['gpu_memory_gib']:g}GiB"
    if node["gpu_resource"] != "nvidia.com/gpu":
        text += f" ({node['gpu_resource']})"
    return text


def _print_explanation(doc: dict[str, Any], out: TextIO) -> None:
    from vfcore import JoinPolicy

    flow = doc["flow"]
    issues = doc["issues"]
    errors = sum(1 for i in issues if i["severity"] == "error")
    warnings = len(issues) - errors
    state = "valid" if doc["valid"] else "INVALID"
    out.write(
        f"flow {flow['name']} ({flow['flow_type']}): {state} — "
        f"{errors} error(s), {warnings} warning(s)\n"
    )
    for issue in issues:
        where = f" ({issue['node']})" if issue["node"] else ""
        out.write(f"\n{issue['severity']}: {issue['rule']}{where}\n")
        out.write(f"  {issue['message']}\n  hint: {issue['hint']}\n")

    out.write("\nnodes\n")
    rows = [["NAME", "KIND", "REPLICAS", "WORKLOAD", "DEVICE", "PARTITION", "PARENTS", "JOIN"]]
    for node in doc["nodes"]:
        policy = node["join_policy"]
        if policy:
            join = JoinPolicy.from_dict(policy).describe()
        elif len(node["parents"]) >= 2:
            join = JoinPolicy.default_for(flow["flow_type"]).describe() + " (default)"
        else:
            join = "-"
        rows.append(
            [
                node["name"],
                node["kind"],
                str(node["replicas"]),
                node["workload"],
                _device(node),
                node["partition_by"] or "-",
                ",".join(node["parents"]) or "-",
                join,
            ]
        )
    _table(rows, out)

    demand = doc["gpu_demand"]
    out.write(f"\ngpu demand ({demand['mode']} mode)\n")
    if not demand["pods"]:
        out.write("  no GPU pods\n")
    else:
        for resource, units in demand["total"].items():
            out.write(f"  {resource}: {units} in total\n")
        if demand["declared_gpu_memory_gib"]:
            total = demand["total_gpu_memory_gib"]
            suffix = "" if total is not None else " (some pods declare none: total unknown)"
            out.write(
                f"  declared VRAM: {demand['declared_gpu_memory_gib']:g} GiB in total{suffix}\n"
            )
        mig = [p["pod"] for p in demand["pods"] if p["slice"] == "mig"]
        if mig:
            out.write(f"  MIG slices (profile chosen at plan time): {len(mig)} pod(s)\n")
        largest = demand["largest_pod"]
        name = demand["largest_pod_name"]
        if largest:
            claims = ", ".join(f"{u} {r}" for r, u in largest.items())
            out.write(f"  largest pod: {name} needs {claims} on one host\n")
        elif demand["largest_pod_gpu_memory_gib"]:
            out.write(
                f"  largest pod: {name} needs {demand['largest_pod_gpu_memory_gib']:g} GiB of VRAM\n"
            )
        if demand["undeclared_memory"]:
            out.write(f"  no gpu_memory_gib declared: {', '.join(demand['undeclared_memory'])}\n")

    opts = doc["options"]
    flag = "on" if opts["enabled"] else "off"
    out.write(f"\nautoscaling (--autoscaling {flag})\n")
    rows = []
    for name, item in doc["autoscaling"].items():
        if item["eligible"]:
            rows.append(
                [name, f"eligible: {item['min_replicas']}..{item['max_replicas']} replicas"]
            )
        else:
            rows.append([name, "fixed: " + "; ".join(item["reasons"])])
    if rows:
        _table(rows, out)


#: The command ``main`` ran last (``run()`` ends every other command at once).
_last_command: str | None = None


def run() -> None:
    """Console-script entry point.

    Every command but ``vf run`` ends the process as soon as it has answered
    (stdout and stderr flushed, then ``os._exit``): a flow file that started a
    non-daemon thread, or registered an ``atexit`` hook that blocks, would
    otherwise keep ``vf explain`` from ever exiting. ``vf run`` exits the
    usual way, so that its workers and shared memory are cleaned up.
    """
    code = main()
    if _last_command == "run":
        raise SystemExit(code)
    import contextlib

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
