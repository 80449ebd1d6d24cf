"""``vf explain FLOW``: validate a flow and print what it needs (no cluster needed)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from vfadapters.cli.inputs import add_gpu_options, dra_options, load_spec
from vfadapters.cli.output import EXIT_INVALID, EXIT_OK, emit_json, table


def register(sub: Any) -> None:
    """Add the ``explain`` subparser to ``vf``'s subcommands."""
    explain = sub.add_parser(
        "explain",
        help="validate a flow and print what it needs (no cluster needed)",
        description="Validation issues, per-node replicas and workload kind, GPU demand "
        "per resource, the largest pod, and autoscaling eligibility.",
    )
    explain.add_argument("flow", metavar="FLOW", help="flow.py, flow.py:factory or spec.json")
    add_gpu_options(explain)
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


def _cmd_explain(args: argparse.Namespace) -> int:
    from vfcore import AutoscalingOptions, explain

    spec = load_spec(args.flow)
    result = explain(
        spec,
        gpu_mode=args.gpu_mode,
        gpu_resource_name=args.gpu_resource_name,
        autoscaling=AutoscalingOptions(
            enabled=args.autoscaling,
            gpu_autoscaling=args.gpu_autoscaling,
            max_replicas=args.max_replicas,
        ),
        **dra_options(args),
    )
    if args.json:
        emit_json(result.to_dict())
        # stdout holds the one document; the errors that make the exit code 2 also go to
        # stderr, as every other exit 2 does, so a script sees why without parsing JSON
        for issue in result.issues:
            if issue.is_error:
                sys.stderr.write(issue.render() + "\n")
    else:
        _print_explanation(result.to_dict(), sys.stdout)
    return EXIT_OK if result.valid else EXIT_INVALID


def _device(node: dict[str, Any]) -> str:
    if node["device_type"] != "gpu":
        return "cpu"
    text = f"gpu×{node['gpu_count']}"
    memory = node["gpu_memory_gib"]
    if memory is not None:  # an invalid flow is shown too: a 400-digit int is no float
        from vfcore.errors import brief

        shown = (
            f"{memory:g}" if isinstance(memory, float) or abs(memory) < 10**15 else brief(memory)
        )
        text += f" {shown}GiB"
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
    table(rows, out)

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
        table(rows, out)
