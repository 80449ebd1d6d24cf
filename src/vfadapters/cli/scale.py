"""``vf scale FLOW --observations FILE | --broker URL --run ID``: replica decisions from backlogs.

The backlogs come from a file, or live from the run's NATS JetStream consumers
(:func:`vfadapters.broker.monitor.observe`; ``--monitor`` reads the HTTP
monitoring endpoint instead, as KEDA does). Every number comes from
:func:`vfcore.scaling.decide_flow`. Exit codes: 0 when it answers (an
``unknown`` decision is an answer, and so is a broker that cannot be read: its
parents are unknown), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from vfadapters.cli.inputs import MINUTE, check_seconds, load_spec
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
        default=None,
        metavar="FILE",
        help="JSON: {node: {current, parents: {parent: {pending, ack_pending} | {unknown}}}}",
    )
    scale.add_argument(
        "--broker",
        default=None,
        metavar="URL",
        help="read the backlogs live from this NATS JetStream server (nats://host:4222); "
        "needs --run",
    )
    scale.add_argument(
        "--run", default=None, metavar="ID", help="the run id whose consumers are read"
    )
    scale.add_argument(
        "--monitor",
        default=None,
        metavar="HTTP_URL",
        help="read the server's HTTP monitoring endpoint (/jsz) instead, as KEDA does "
        "(http://host:8222); needs --run",
    )
    from vfadapters.cli.broker_access import add_broker_credential_options

    add_broker_credential_options(scale)
    scale.add_argument(
        "--timeout",
        type=float,
        default=2.0,
        metavar="S",
        help="seconds to connect and for each read before a parent is unknown (2)",
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
    check_seconds(args.timeout, "--timeout", most=10 * MINUTE, example="2")
    live = args.broker is not None or args.monitor is not None
    _check_source(args, live)
    spec = load_spec(args.flow)
    observed: Any
    if live:
        observed = _observe_live(args, spec)
        observations: Any = observed
    else:
        observations = observations_from_dict(_load_observations(args.observations))
        observed = None
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
    if observed is not None:
        doc["observed"] = observed.to_dict()
    else:
        doc["observed"] = {"source": args.observations, "method": "file"}
    if args.json:
        emit_json(doc)
    else:
        _print_scale(doc, sys.stdout)
    return EXIT_OK


def _check_source(args: argparse.Namespace, live: bool) -> None:
    from vfcore import InvalidInputError

    usage = (
        "give --observations FILE, or --broker nats://host:4222 --run ID "
        "(optionally --monitor http://host:8222)"
    )
    if live and args.observations is not None:
        raise InvalidInputError(
            "invalid-option",
            "--observations reads the backlogs from a file and --broker/--monitor from a "
            "server: give one source, not both",
            usage,
        )
    if not live and args.observations is None:
        raise InvalidInputError(
            "invalid-option", "no backlogs to decide from: no --observations and no --broker", usage
        )
    if live and args.run is None:
        raise InvalidInputError(
            "invalid-option",
            "--broker/--monitor need --run: the run id names the streams and consumers to read",
            "add --run ID (the id `vf run --broker` or `vf worker --run` was given)",
        )
    if not live and args.run is not None:
        raise InvalidInputError(
            "invalid-option", "--run is read only with --broker or --monitor", usage
        )


def _observe_live(args: argparse.Namespace, spec: Any) -> Any:
    from vfadapters.broker.monitor import check_broker_url, check_monitor_url, observe
    from vfcore import require_valid
    from vfcore.runtime import check_run_id

    check_run_id(args.run)
    if args.broker is not None:
        check_broker_url(args.broker)
    if args.monitor is not None:
        check_monitor_url(args.monitor)
    # the topology is built only for a valid flow (decide_flow validates again, cheaply)
    require_valid(spec, gpu_mode=args.gpu_mode, gpu_resource_name=args.gpu_resource_name)
    from vfadapters.cli.broker_access import broker_credentials

    credentials = broker_credentials(args) if args.broker is not None else None
    return observe(
        args.broker,
        spec,
        args.run,
        monitor_url=args.monitor,
        timeout_s=args.timeout,
        credentials=credentials,
    )


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
    observed = doc.get("observed") or {}
    if observed.get("method") in ("jetstream-api", "monitoring-http"):
        _print_observed(observed, out)
    for note in doc["notes"]:
        out.write(f"\nnote: {note}\n")


def _print_observed(observed: dict[str, Any], out: TextIO) -> None:
    how = (
        "JetStream API $JS.API.CONSUMER.INFO"
        if observed["method"] == "jetstream-api"
        else "HTTP monitoring /jsz, as KEDA reads it"
    )
    out.write(f"\nbacklogs read live from {observed['source']} ({how}), run {observed['run_id']}\n")
    edges = observed["edges"]
    if not edges:
        out.write("  no processor reads a parent\n")
        return
    rows = [["PARENT", "NODE", "LAG", "PENDING", "ACK PENDING", "CONSUMERS", "READ"]]
    for e in edges:
        known = e["lag"] is not None
        rows.append(
            [
                e["parent"],
                e["node"],
                str(e["lag"]) if known else "?",
                str(e["pending"]) if known else "-",
                str(e["ack_pending"]) if known else "-",
                str(len(e["consumers"])),
                "ok" if known else f"unknown: {e['unknown']}",
            ]
        )
    table(rows, out)
    for e in edges:
        if e["lag"] is None:
            out.write(f"  {e['parent']} → {e['node']}: {e['detail']}\n")
