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
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NoReturn, TextIO

EXIT_OK, EXIT_RUNTIME, EXIT_INVALID, EXIT_STRICT = 0, 1, 2, 3


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
    return parser


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
    parser = _parser()
    args = parser.parse_args(argv)
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


def run() -> None:
    """Console-script entry point."""
    raise SystemExit(main())


if __name__ == "__main__":
    run()
