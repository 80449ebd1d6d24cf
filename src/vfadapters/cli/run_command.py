"""``vf run FLOW``: run a flow locally, one process per replica.

Live progress goes to stderr (a table when stderr is a terminal); the summary
goes to stdout, or, with ``--json``, the ``run`` document of docs/cli.md. Exit
codes: 0 completed, 1 failed (a node's open() or close() raised, a replica kept
dying…), 2 invalid flow or options, 3 ``--gpu-policy strict`` refused, 130
stopped by SIGINT/SIGTERM (to ``vf`` alone or to its whole process group).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from vfadapters.cli.output import (
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_STOPPED,
    EXIT_STRICT,
    emit_json,
    report_error,
    table,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run a flow locally (one process per replica), with live progress",
        description="Run the flow on this machine: every replica in its own process, messages "
        "through bounded shared-memory buffers. BATCH loses nothing (backpressure, retries, "
        "dead letters); REALTIME never blocks producers and counts evictions. Ctrl-C drains "
        "for up to --drain-timeout seconds; a second Ctrl-C stops at once.",
    )
    p.add_argument("flow", metavar="FLOW", help="flow.py or flow.py:factory")
    p.add_argument("--json", action="store_true", help="print the run document on stdout")
    p.add_argument(
        "--drain-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="on Ctrl-C or SIGTERM, how long in-flight work may drain (10)",
    )
    p.add_argument(
        "--retries",
        type=int,
        default=2,
        metavar="N",
        help="extra attempts for a message whose processing raises, then dead letter (2)",
    )
    p.add_argument(
        "--dead-letters",
        metavar="PATH",
        default=None,
        help="append dead letters (JSON lines) to this file; it is never truncated "
        "(default: a new <flow>.<run id>.dead-letters.jsonl per run, created on the first one)",
    )
    p.add_argument(
        "--gpu-policy",
        choices=("share", "strict"),
        default="share",
        help="share: GPU replicas share cards (or run on the CPU without a GPU), with a "
        "warning; strict: refuse to start when the host's GPUs do not cover the flow",
    )
    p.add_argument(
        "--autoscale",
        "--autoscaling",
        dest="autoscale",
        action="store_true",
        help="grow and shrink competing processors with their backlog",
    )
    p.add_argument("--gpu-autoscaling", action="store_true", help="let GPU nodes autoscale too")
    p.add_argument(
        "--max-replicas", type=int, default=10, metavar="N", help="autoscaling ceiling (10)"
    )
    p.add_argument(
        "--scale-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between autoscaling decisions (1)",
    )
    p.add_argument(
        "--scale-target",
        type=int,
        default=10,
        metavar="N",
        help="backlog one replica should carry (10)",
    )
    p.add_argument(
        "--buffer-mib",
        type=float,
        default=16.0,
        metavar="MIB",
        help="bytes of each input buffer (16 MiB)",
    )
    p.add_argument(
        "--buffer-messages",
        type=int,
        default=4096,
        metavar="N",
        help="messages each input buffer holds (4096)",
    )
    p.add_argument(
        "--realtime-keep",
        type=int,
        default=None,
        metavar="N",
        help="REALTIME: the freshest messages each input buffer keeps waiting; older ones "
        "are evicted and counted (default: 1 per parent of the receiving node)",
    )
    p.add_argument(
        "--stall-warning",
        type=float,
        default=10.0,
        metavar="S",
        help="warn about a node that makes no progress for S seconds (10; 0: never)",
    )
    p.add_argument("--no-progress", action="store_true", help="no live table, even on a terminal")
    p.add_argument(
        "--start-method",
        choices=("forkserver", "spawn"),
        default="forkserver",
        help="how workers start (forkserver: fast and CUDA-safe; spawn: fully fresh)",
    )
    p.add_argument(
        "--broker",
        metavar="URL",
        default=None,
        help="run every replica as a `vf worker` process against this NATS JetStream server "
        "(nats://host:port), or start one for the run: `embedded` (docs/broker.md)",
    )
    p.add_argument(
        "--run",
        dest="run_id",
        metavar="ID",
        default=None,
        help="--broker: the run id naming its streams (default: r<date><time>-<random>)",
    )
    p.add_argument(
        "--ack-wait",
        type=float,
        default=30.0,
        metavar="S",
        help="--broker: seconds before what a killed worker held is redelivered (30)",
    )
    p.add_argument(
        "--max-ack-pending",
        type=int,
        default=1024,
        metavar="N",
        help="--broker: messages a consumer may have in flight, unacknowledged (1024)",
    )
    p.add_argument(
        "--stream-replicas",
        type=int,
        default=1,
        metavar="N",
        help="--broker URL: servers of its JetStream cluster that hold each of the run's "
        "streams and buckets (1; 3 survives the loss of any one server of three)",
    )
    p.add_argument(
        "--keep-streams",
        action="store_true",
        help="--broker: leave the run's streams on the server at the end (default: deleted; "
        "a dead-letter stream holding letters is always kept)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="--broker: go on with run --run ID, whose streams were kept (--keep-streams) or "
        "whose coordinator died: what its consumers hold is processed, its producers resume "
        "(default: a run id whose streams exist is refused, run-exists)",
    )
    from vfadapters.cli.worker_command import add_run_key_option

    add_run_key_option(p)
    from vfadapters.cli.broker_access import add_broker_credential_options

    add_broker_credential_options(p)  # --broker URL (an embedded one makes its own keys)
    p.set_defaults(handler=_cmd_run)


def _cmd_run(args: argparse.Namespace) -> int:
    if args.broker is not None:
        # the fork server imports what workers need while this process imports the
        # same, loads the flow and sets up the run's topology (the first item arrives
        # sooner); its module is light: started before anything heavy is imported
        from vfadapters.runtime.forkserver import install_forkserver

        install_forkserver("forkserver", ("vfadapters.broker.worker", "nats"))
    from vfadapters.local import GpuRefusedError, RunOptions, run

    try:
        if args.broker is not None:
            return _finish(_run_on_broker(args), args)
        options = RunOptions(
            drain_timeout_s=args.drain_timeout,
            retries=args.retries,
            dead_letter_path=args.dead_letters,
            gpu_policy=args.gpu_policy,
            autoscale=args.autoscale,
            gpu_autoscaling=args.gpu_autoscaling,
            max_replicas=args.max_replicas,
            scale_interval_s=args.scale_interval,
            scale_target=args.scale_target,
            buffer_mib=args.buffer_mib,
            buffer_messages=args.buffer_messages,
            realtime_keep=args.realtime_keep,
            progress=False if args.no_progress else None,
            start_method=args.start_method,
            stall_warning_s=args.stall_warning,
        )
        summary = run(args.flow, options)
    except GpuRefusedError as exc:
        report_error(exc.rule, exc.message, exc.hint, as_json=args.json)
        return EXIT_STRICT
    return _finish(summary, args)


def _run_on_broker(args: argparse.Namespace) -> Any:
    from vfadapters.broker.run import BrokerRunOptions, run_on_broker
    from vfadapters.cli.worker_command import topology_options
    from vfadapters.runtime.options import RunOptions
    from vfcore import InvalidInputError

    if args.broker == "embedded" and args.stream_replicas != 1:
        raise InvalidInputError(
            "invalid-option",
            f"--stream-replicas {args.stream_replicas}: --broker embedded starts one server, "
            "which holds one copy of each stream",
            "leave --stream-replicas out, or run on a JetStream cluster: --broker "
            "nats://host:4222 --stream-replicas 3",
        )
    options = RunOptions(
        drain_timeout_s=args.drain_timeout,
        retries=args.retries,
        dead_letter_path=args.dead_letters,
        gpu_policy=args.gpu_policy,
        autoscale=args.autoscale,
        gpu_autoscaling=args.gpu_autoscaling,
        max_replicas=args.max_replicas,
        scale_interval_s=args.scale_interval,
        scale_target=args.scale_target,
        realtime_keep=args.realtime_keep,
        progress=False if args.no_progress else None,
        stall_warning_s=args.stall_warning,
    )
    bopts = BrokerRunOptions(
        broker=args.broker,
        run_id=args.run_id,
        topology=topology_options(args, args.realtime_keep),
        keep_streams=args.keep_streams,
        resume=args.resume,
        run_key_file=args.run_key_file,
        credentials=_broker_credentials(args),
    )
    return run_on_broker(args.flow, options, bopts)


def _broker_credentials(args: argparse.Namespace) -> Any:
    """``--broker URL``'s credentials; ``embedded`` makes its own and takes none."""
    from vfadapters.cli.broker_access import broker_credentials
    from vfcore import InvalidInputError

    credentials = broker_credentials(args)
    if args.broker == "embedded" and not credentials.is_empty:
        raise InvalidInputError(
            "invalid-option",
            "--broker embedded makes a key for every role of the run itself: it takes no "
            "broker credentials (a --broker-* option or a VF_BROKER_* variable was given)",
            "drop them, or give --broker nats://host:port for a server of yours",
        )
    return credentials


def _finish(summary: Any, args: argparse.Namespace) -> int:
    doc = summary.to_dict()
    if args.json:
        emit_json(doc)
    else:
        print_summary(doc, sys.stdout)
    if summary.status == "failed":
        sys.stderr.write(
            f"error: run-failed\n  {summary.error}\n  hint: {_failure_hint(summary.error)}\n"
        )
        return EXIT_RUNTIME
    if summary.status == "stopped":
        return EXIT_STOPPED
    return EXIT_OK


def _failure_hint(error: str | None) -> str:
    text = error or ""
    if "could not store a dead letter" in text:
        return (
            "make room where the dead letters go (or give --dead-letters another file) and "
            "run again: the item was not settled, so none is lost"
        )
    if text.startswith("books-unbalanced"):
        return "keep the run document (--json) and report it: the counters do not add up"
    return "fix the node named above (its traceback is printed above), then run again"


def print_summary(doc: dict[str, Any], out: TextIO) -> None:
    flow = doc["flow"]
    out.write(
        f"run {flow['name']} ({flow['flow_type']}): {doc['status']} in {doc['duration_s']:.2f} s\n"
    )
    rows = [
        [
            "NODE",
            "KIND",
            "REPLICAS",
            "PROCESSED",
            "ERRORS",
            "DEAD LETTERS",
            "EVICTED",
            "REDELIVERED",
            "RESTARTS",
        ]
    ]
    for name, n in doc["nodes"].items():
        replicas = str(n["replicas"])
        if n["max_replicas_seen"] > n["replicas"]:
            replicas += f" (max {n['max_replicas_seen']})"
        rows.append(
            [
                name,
                n["kind"],
                replicas,
                str(n["processed"]),
                str(n["errors"]),
                str(n["dead_letters"]),
                str(n["evicted"]),
                str(n["redelivered"]),
                str(n["restarts"]),
            ]
        )
    table(rows, out)
    evicted = [e for e in doc["edges"] if e["evicted"]]
    if evicted:
        out.write("\nevictions (REALTIME: a full buffer drops its oldest messages)\n")
        for e in evicted:
            out.write(f"  {e['parent']} → {e['child']}: {e['evicted']} of {e['written']} evicted\n")
    consumers = [(name, n["latency"]) for name, n in doc["nodes"].items() if n.get("latency")]
    if consumers:
        out.write("\nlatency (producer emit → consume, p50 / p99 / max)\n")
        for name, lat in consumers:
            out.write(
                f"  {name}: {lat['p50_ms'] / 1e3:.4f} s / {lat['p99_ms'] / 1e3:.4f} s / "
                f"{lat['max_ms'] / 1e3:.4f} s over {lat['messages']} message(s)\n"
            )
    gpu = doc.get("gpu")
    if gpu and gpu.get("devices"):
        out.write(f"\ngpu assignment ({gpu['status']})\n")
        for pod, devices in gpu["devices"].items():
            out.write(f"  {pod}: {', '.join(map(str, devices)) if devices else 'cpu'}\n")
    if doc["scaling"]:
        out.write("\nautoscaling\n")
        for e in doc["scaling"]:
            out.write(
                f"  {e['at_s']:7.2f} s  {e['node']}: {e['from']} → {e['to']} ({e['reason']})\n"
            )
    if doc["dead_letters"]:
        out.write(f"\ndead letters: {doc['dead_letters']} appended to {doc['dead_letter_path']}\n")
    stalls = doc.get("stalls") or []
    if stalls:
        out.write(f"\nno progress (warned after {doc['stall_warning_s']:g} s without any)\n")
        for s in stalls:
            until = "then progressed again" if s["resumed"] else "and never again"
            out.write(
                f"  {s['node']}: {s['duration_s']:.1f} s from {s['at_s']:.1f} s, {until}: "
                f"{s['detail']}\n"
            )
    if doc["redelivered"]:
        out.write(
            f"\nredelivered after restarts: {doc['redelivered']} message(s) "
            "(at most that many duplicates downstream)\n"
        )
    stop = doc.get("stop")
    if stop:
        by = f" (on {stop['signal']})" if stop.get("signal") else ""
        out.write(f"\nstop: {stop['how']}{by}\n")
