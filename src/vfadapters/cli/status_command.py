"""``vf status FLOW [--run ID]``: what a deployed run has on the cluster, and its broker lag."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from vfadapters.cli.output import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_RUNTIME,
    emit_json,
    report_error,
    table,
)


def register(sub: Any) -> None:
    """Add the ``status`` subparser."""
    from vfadapters.kubernetes.client import add_connection_options

    p = sub.add_parser(
        "status",
        help="a deployed run: objects, replicas desired/ready, scalers, broker lag per edge",
        description="List the objects of one run of a flow on the cluster (by the run's "
        "labels), their desired and ready replicas, KEDA scalers, and each edge's backlog "
        "when the broker is reachable (--broker or --monitor); see docs/kubernetes.md.",
    )
    p.add_argument("flow", metavar="FLOW", help="flow.py or flow.py:factory")
    p.add_argument(
        "--run", default=None, metavar="ID", help="the run id (default: the flow's only run)"
    )
    p.add_argument("--namespace", default="default", metavar="NS", help="namespace (default)")
    p.add_argument(
        "--broker",
        default=None,
        metavar="URL",
        help="the run's NATS server (nats://host:4222) to read lag from",
    )
    p.add_argument(
        "--monitor",
        default=None,
        metavar="URL",
        help="the NATS monitoring endpoint (http://host:8222), KEDA's reading",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    add_connection_options(p)
    p.set_defaults(handler=_cmd_status)


def check_namespace(namespace: str) -> str:
    """``namespace`` when it is a DNS label (what Kubernetes accepts), else ``invalid-namespace``.

    A namespace no object can be in would list nothing, and ``vf teardown`` would
    say "all gone" for a run it never looked for.
    """
    from vfcore.runtime import check_namespace as check

    return check(namespace)


def resolve_run(client: Any, namespace: str, spec: Any, run: str | None) -> str | None:
    """``run``, or the flow's only run in ``namespace``; ``None`` when there is none.

    Several runs and no ``--run`` is ``ambiguous-run`` (exit 2), listing them.
    """
    from vfadapters.kubernetes.status import find_runs
    from vfcore import InvalidInputError
    from vfcore.runtime import flow_label

    if run is not None:
        from vfcore.runtime import check_run_id

        check_run_id(run)
        return run
    runs = find_runs(client, namespace, flow_label(spec.name))
    if len(runs) > 1:
        raise InvalidInputError(
            "ambiguous-run",
            f"flow {spec.name} has {len(runs)} runs in namespace {namespace}: {', '.join(runs)}",
            "pass --run ID",
        )
    return runs[0] if runs else None


def _cmd_status(args: argparse.Namespace) -> int:
    from vfadapters.cli.inputs import load_spec
    from vfadapters.kubernetes.client import KubeApiError, connect_from_args
    from vfadapters.kubernetes.status import run_status
    from vfcore.runtime import run_selector

    check_namespace(args.namespace)
    if args.broker is not None:
        from vfadapters.broker.monitor import check_broker_url

        check_broker_url(args.broker)
    if args.monitor is not None:
        from vfadapters.broker.monitor import check_monitor_url

        check_monitor_url(args.monitor)
    spec = load_spec(args.flow)
    try:
        client = connect_from_args(args)
        run = resolve_run(client, args.namespace, spec, args.run)
        if run is None:
            doc: dict[str, Any] = {
                "flow": spec.name,
                "run": None,
                "namespace": args.namespace,
                "found": False,
            }
        else:
            doc = {
                "flow": spec.name,
                "run": run,
                **run_status(
                    client,
                    args.namespace,
                    run_selector(spec.name, run),
                    spec=spec,
                    run_id=run,
                    broker_url=args.broker,
                    monitor_url=args.monitor,
                ),
            }
        if run is not None and not doc["found"]:
            # a run asked for by name that has no object here: an error, never "found"
            from vfadapters.kubernetes.status import find_runs
            from vfcore.runtime import flow_label

            others = find_runs(client, args.namespace, flow_label(spec.name))
            report_error(
                "run-not-found",
                f"run {run} of flow {spec.name} was not found in namespace {args.namespace} on "
                f"{client.where}: no object carries its labels ({run_selector(spec.name, run)})",
                (
                    f"the flow's runs there: {', '.join(others)}; "
                    if others
                    else "the flow has no run there; "
                )
                + "look elsewhere with --namespace NS, or --kubeconfig PATH / --context C "
                "for another cluster",
                as_json=args.json,
            )
            return EXIT_INVALID  # as `vf broker-teardown`'s run-not-found: the --run given
    except KubeApiError as exc:
        report_error(exc.rule, exc.message, exc.hint, as_json=args.json)
        return EXIT_RUNTIME
    if args.json:
        emit_json(doc)
    else:
        _print(doc, sys.stdout)
        if not doc["found"]:
            sys.stderr.write(
                f"  (looked on {client.where}; another namespace? pass --namespace NS, or "
                "--kubeconfig PATH / --context C for another cluster)\n"
            )
    return EXIT_OK


def _print(doc: dict[str, Any], out: TextIO) -> None:
    if not doc["found"]:
        out.write(f"flow {doc['flow']}: no run found in namespace {doc['namespace']}\n")
        return
    out.write(f"flow {doc['flow']} run {doc['run']} in {doc['namespace']}\n")
    rows = [["KIND", "NAME", "STATE", "READY/DESIRED"]]
    for w in doc["workloads"]:
        ready, desired = ("?" if w[k] is None else w[k] for k in ("ready", "desired"))
        rows.append([w["kind"], str(w["name"]), str(w["state"]), f"{ready}/{desired}"])
    if len(rows) > 1:
        out.write("\nworkloads\n")
        table(rows, out)
    if doc["pods"]:
        out.write("\npods\n")
        prow = [["POD", "PHASE", "READY", "HOST"]]
        for p in doc["pods"]:
            prow.append([str(p["name"]), str(p["state"]), str(p["ready"]), str(p["host"] or "-")])
        table(prow, out)
    scalers = doc["scalers"]
    out.write("\nscalers\n")
    if not scalers["known"]:
        out.write(f"  unknown: {scalers['reason']}\n")
    elif not scalers["items"]:
        out.write("  none\n")
    for s in scalers["items"]:
        out.write(
            f"  {s['name']} -> {s['target']}: min {s['min']} max {s['max']}, ready {s['ready']}, "
            f"active {s['active']}, fallback {s['fallback']}\n"
        )
    lag = doc.get("lag")
    if lag is not None:
        out.write("\nbroker lag (pending + ack-pending per edge)\n")
        for e in lag["edges"]:
            value = "unknown" if e.get("lag") is None else str(e["lag"])
            why = f" ({e.get('reason')})" if e.get("lag") is None else ""
            out.write(f"  {e['parent']} -> {e['node']}: {value}{why}\n")
