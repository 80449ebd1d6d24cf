"""``vf teardown FLOW [--run ID]``: delete exactly what one run created, and wait until gone."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from vfadapters.cli.output import EXIT_OK, EXIT_RUNTIME, emit_json, report_error


def register(sub: Any) -> None:
    """Add the ``teardown`` subparser."""
    from vfadapters.kubernetes.client import add_connection_options

    p = sub.add_parser(
        "teardown",
        help="delete every object of one deployed run (by its labels) and wait until gone",
        description="Delete the objects carrying the run's labels "
        "(app.kubernetes.io/managed-by=vf, vfcore.io/flow, vfcore.io/run) in the namespace, "
        "and wait until none is left; see docs/kubernetes.md.",
    )
    p.add_argument("flow", metavar="FLOW", help="flow.py or flow.py:factory")
    p.add_argument(
        "--run", default=None, metavar="ID", help="the run id (default: the flow's only run)"
    )
    p.add_argument("--namespace", default="default", metavar="NS", help="namespace (default)")
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="give up waiting for the objects to go after S seconds (300)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    add_connection_options(p)
    p.set_defaults(handler=_cmd_teardown)


def _say(text: str) -> None:
    sys.stderr.write(f"  {text}\n")


def _cmd_teardown(args: argparse.Namespace) -> int:
    from vfadapters.cli.inputs import DAY, check_seconds, load_spec
    from vfadapters.cli.status_command import check_namespace, resolve_run
    from vfadapters.kubernetes.client import KubeApiError, connect_from_args
    from vfadapters.kubernetes.teardown import teardown
    from vfcore.runtime import run_selector

    check_seconds(args.timeout, "--timeout", most=DAY, example="300", rule="invalid-timeout")
    check_namespace(args.namespace)
    spec = load_spec(args.flow)
    why: tuple[Any, ...] = ()
    try:
        client = connect_from_args(args)
        run = resolve_run(client, args.namespace, spec, args.run)
        if run is None:
            doc: dict[str, Any] = {"flow": spec.name, "run": None, "deleted": [], "complete": True}
            message = (
                f"flow {spec.name}: no run found in namespace {args.namespace} on {client.where}; "
                "nothing to do (another namespace? pass --namespace NS, or --kubeconfig PATH / "
                "--context C for another cluster)"
            )
        else:
            report = teardown(
                client,
                args.namespace,
                run_selector(spec.name, run),
                timeout_s=args.timeout,
                progress=_say,
            )
            doc = {"flow": spec.name, "run": run, **report.to_dict()}
            why = report.lingering
            if not report.deleted and report.complete:
                message = (
                    f"run {run} of {spec.name}: no object of it in namespace {args.namespace} on "
                    f"{client.where}; nothing to delete (another namespace? pass --namespace NS, "
                    "or --kubeconfig PATH / --context C for another cluster)"
                )
            else:
                message = (
                    f"run {run} of {spec.name}: {len(report.deleted)} object(s) deleted, "
                    + ("all gone" if report.complete else f"{len(report.remaining)} still there")
                    + f" ({report.waited_s:.0f} s)"
                )
    except KubeApiError as exc:
        report_error(exc.rule, exc.message, exc.hint, as_json=args.json)
        return EXIT_RUNTIME
    if args.json:
        emit_json(doc)
    else:
        print(message)
    if not doc["complete"]:
        remaining = ", ".join(f"{r['kind']}/{r['name']}" for r in doc["remaining"][:10])
        if len(doc["remaining"]) > 10:
            remaining += f" and {len(doc['remaining']) - 10} more"
        report_error(
            "teardown-incomplete",
            f"after {args.timeout:g} s these objects remain: {remaining}",
            _lingering_hint(why, args.namespace),
            as_json=False,
        )
        return EXIT_RUNTIME
    return EXIT_OK


def _lingering_hint(items: Any, namespace: str) -> str:
    """Why the objects left are still there and what to do, one per reason (at most 4 named)."""
    said: list[str] = []
    by_reason: dict[str, list[Any]] = {}
    for item in items:
        by_reason.setdefault(item.reason, []).append(item)
    for reason in ("node-not-ready", "node-gone", "finalizers", "terminating"):
        group = by_reason.get(reason, [])
        for item in group[:4]:
            said.append(f"{item.kind.lower()}/{item.name}: {item.advice(namespace)}")
        if len(group) > 4:
            said.append(f"… and {len(group) - 4} more {reason}")
    if not said:
        return "inspect them with kubectl, then run the teardown again"
    return "; ".join(said) + "; then run the teardown again"
