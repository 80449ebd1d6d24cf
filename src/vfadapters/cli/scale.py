"""``vf scale FLOW --observations FILE``: replica decisions from observed backlogs.

The command only reads files and prints; every number comes from
:func:`vfcore.scaling.decide_flow`. Exit codes: 0 when it answers (an
``unknown`` decision is an answer), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from vfadapters.cli.inputs import load_spec
from vfadapters.cli.output import EXIT_OK, emit_json, table

_FORMAT_HINT = (
    'write {"<node>": {"current": 2, "parents": {"<parent>": {"pending": 120, '
    '"ack_pending": 3} or {"unknown": "<reason>"}}}} (see docs/scaling.md)'
)


def register(sub: Any) -> None:
    """Add the ``scale`` subparser to ``vf``'s subcommands."""
    scale = sub.add_parser(
        "scale",
        help="replica decisions from observed backlogs",
        description="For each processor: autoscaling eligibility (with reasons), the replica "
        "decision from its parents' backlogs (max over parents of ceil(lag / target)), the "
        "diagnosis, and optionally the capacity cap on a cluster and what KEDA/the HPA "
        "would set.",
    )
    scale.add_argument("flow", metavar="FLOW", help="flow.py, flow.py:factory or spec.json")
    scale.add_argument(
        "--observations",
        required=True,
        metavar="FILE",
        help="JSON: {node: {current, parents: {parent: {pending, ack_pending} | {unknown}}}}",
    )
    scale.add_argument(
        "--cluster",
        metavar="PATH",
        default=None,
        help="cap GPU nodes at what the exact packing can place on this cluster "
        "(nodes.json + pods.json, as for vf plan)",
    )
    scale.add_argument(
        "--target",
        type=int,
        default=10,
        metavar="N",
        help="messages one replica may have waiting (the trigger's lagThreshold; 10)",
    )
    scale.add_argument(
        "--max-replicas", type=int, default=10, metavar="N", help="autoscaling ceiling (10)"
    )
    scale.add_argument(
        "--gpu-autoscaling", action="store_true", help="let GPU processors autoscale too"
    )
    scale.add_argument(
        "--gpu-mode",
        choices=("exclusive", "shared", "mix"),
        default="exclusive",
        help="how GPU pods take GPUs, for the capacity cap (default: exclusive)",
    )
    scale.add_argument(
        "--gpu-resource-name",
        metavar="R",
        default=None,
        help="deploy-wide GPU resource (default: nvidia.com/gpu)",
    )
    scale.add_argument(
        "--predict-hpa",
        action="store_true",
        help="also predict what KEDA and the HPA would set (next evaluation, fresh controller)",
    )
    scale.add_argument("--json", action="store_true", help="print one JSON document")
    scale.set_defaults(handler=_cmd_scale)


def _load_observations(path: str) -> Any:
    from vfadapters.loading import MAX_OBSERVATIONS_BYTES, read_bounded
    from vfcore import InvalidInputError

    where = Path(path)
    try:
        text = read_bounded(where, MAX_OBSERVATIONS_BYTES, what="an observations file").decode(
            "utf-8"
        )
    except FileNotFoundError:
        raise InvalidInputError(
            "observations-not-found",
            f"no such file: {path}",
            "pass the JSON file of observed backlogs, e.g. examples/observations.json",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(
            "observations-unreadable",
            f"{path} cannot be read: {getattr(exc, 'strerror', None) or exc}",
            "check the file's permissions and that it is UTF-8 JSON",
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            "invalid-observations",
            f"{path} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            _FORMAT_HINT,
        ) from None
    except RecursionError:
        raise InvalidInputError(
            "invalid-observations",
            f"{path} is nested too deeply to read (thousands of levels); the format is "
            "3 levels deep",
            _FORMAT_HINT,
        ) from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise InvalidInputError(
            "invalid-observations", f"{path} holds a value that cannot be read: {exc}", _FORMAT_HINT
        ) from None


def _cmd_scale(args: argparse.Namespace) -> int:
    from vfcore import AutoscalingOptions, InvalidInputError
    from vfcore.scaling import decide_flow, observations_from_dict

    if args.target < 1:
        raise InvalidInputError(
            "invalid-scaling-rule",
            f"--target {args.target} must be >= 1 (messages one replica may have waiting)",
            "use the trigger's lagThreshold, e.g. --target 10",
        )
    spec = load_spec(args.flow)
    observations = observations_from_dict(_load_observations(args.observations))
    cluster = None
    if args.cluster is not None:
        from vfadapters.clusterload import load_cluster

        cluster = load_cluster(args.cluster)
    options = AutoscalingOptions(
        enabled=True, gpu_autoscaling=args.gpu_autoscaling, max_replicas=args.max_replicas
    )
    result = decide_flow(
        spec,
        observations,
        target=args.target,
        options=options,
        cluster=cluster,
        gpu_mode=args.gpu_mode,
        gpu_resource_name=args.gpu_resource_name,
        predict=args.predict_hpa,
    )
    doc = result.to_dict()
    if args.json:
        emit_json(doc)
    else:
        _print_scale(doc, sys.stdout)
    return EXIT_OK


def _print_scale(doc: dict[str, Any], out: TextIO) -> None:
    flow = doc["flow"]
    out.write(
        f"scale decisions for flow {flow['name']} ({flow['flow_type']}), "
        f"target {doc['target']} message(s) per replica\n"
    )
    decisions = doc["decisions"]
    if not decisions:
        out.write("  the flow has no processors\n")
        return
    predicted = any("hpa" in d for d in decisions.values())
    header = ["NODE", "STATUS", "REPLICAS", "CURRENT", "RANGE", "DIAGNOSIS", "AUTOSCALED"]
    if predicted:
        header.append("KEDA/HPA")
    rows = [header]
    for name, d in decisions.items():
        replicas = str(d["replicas"]) if d["replicas"] is not None else f"? (≥{d['floor']})"
        row = [
            name,
            d["status"],
            replicas,
            "-" if d["current"] is None else str(d["current"]),
            f"{d['min_replicas']}..{d['max_replicas']}",
            d["diagnosis"],
            "yes" if d["eligible"] else "no (fixed)",
        ]
        if predicted:
            row.append(str(d["hpa"]["replicas"]) if "hpa" in d else "-")
        rows.append(row)
    table(rows, out)
    for name, d in decisions.items():
        out.write(f"\n{name}\n")
        out.write(f"  {d['message']}\n")
        if d["hint"]:
            out.write(f"  hint: {d['hint']}\n")
        detail = d.get("capacity_detail")
        if detail and detail.get("blocker") and d["diagnosis"] == "capacity-capped":
            out.write(f"  first replica that does not fit: {detail['blocker']}\n")
        if not d["eligible"]:
            out.write("  not autoscaled: " + "; ".join(d["reasons"]) + "\n")
        hpa = d.get("hpa")
        if hpa:
            out.write(
                f"  KEDA/HPA: {hpa['previous']} → {hpa['replicas']} ({hpa['actor']}: "
                f"{hpa['reason']})\n"
            )
            for step in hpa["steps"]:
                out.write(f"    {step}\n")
            for difference in (hpa.get("comparison") or {}).get("differences", []):
                out.write(f"    differs: {difference}\n")
    for note in doc["notes"]:
        out.write(f"\nnote: {note}\n")
