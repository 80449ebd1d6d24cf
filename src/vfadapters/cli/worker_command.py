"""``vf worker FLOW --node NAME --broker URL --run ID``: one replica of one node (what a pod runs).

The replica index comes from ``--replica``, else from the environment a pod
gets: ``VF_REPLICA``, an Indexed Job's ``JOB_COMPLETION_INDEX``, or the
StatefulSet ordinal at the end of ``POD_NAME`` / ``HOSTNAME``; else 0. Exit
codes: 0 the replica finished (or was stopped by SIGTERM: what it held goes
back to the broker), 1 it failed (its traceback is on stderr), 2 bad input.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from vfadapters.cli.output import EXIT_OK, EXIT_RUNTIME

#: The most extra attempts ``--retries`` may ask for a message that raises.
MAX_RETRIES = 1000


def register(sub: Any) -> None:
    p = sub.add_parser(
        "worker",
        help="run one replica of one node against a NATS JetStream server (what a pod runs)",
        description="Run replica I of node NAME of the flow against the broker: read its "
        "parents' consumers, call the node, publish its outputs, acknowledge only what is "
        "stored downstream. Stops at the end of the stream (every upstream replica done) or "
        "on SIGTERM.",
    )
    p.add_argument("flow", metavar="FLOW", help="flow.py or flow.py:factory")
    p.add_argument("--node", required=True, metavar="NAME", help="the node this replica runs")
    p.add_argument(
        "--replica",
        type=int,
        default=None,
        metavar="I",
        help="replica index (default: VF_REPLICA, JOB_COMPLETION_INDEX, the ordinal of "
        "POD_NAME/HOSTNAME, else 0)",
    )
    p.add_argument("--broker", required=True, metavar="URL", help="nats://host:port")
    p.add_argument("--run", required=True, metavar="ID", help="the run id (names every stream)")
    add_broker_options(p)
    p.add_argument(
        "--no-create",
        action="store_true",
        help="do not create missing streams and consumers (someone else set the run up)",
    )
    p.add_argument(
        "--scalable",
        default="",
        metavar="NODES",
        help="comma-separated nodes whose replicas may be added while they run "
        "(autoscaling): they fetch one message at a time and are sent small batches, so "
        "that new replicas find work",
    )
    p.add_argument("--parent-death", action="store_true", help=argparse.SUPPRESS)
    from vfadapters.cli.broker_access import add_broker_credential_options

    add_broker_credential_options(p)
    p.set_defaults(handler=_cmd_worker)


def add_broker_options(p: Any) -> None:
    """Options ``vf worker`` and ``vf run --broker`` share."""
    p.add_argument(
        "--retries",
        type=int,
        default=2,
        metavar="N",
        help="extra attempts for a message whose processing raises, then dead letter (2)",
    )
    p.add_argument(
        "--ack-wait",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds before a message a dead worker held is redelivered (30)",
    )
    p.add_argument(
        "--max-ack-pending",
        type=int,
        default=1024,
        metavar="N",
        help="messages a consumer may have in flight, unacknowledged (1024)",
    )
    p.add_argument(
        "--stream-replicas",
        type=int,
        default=1,
        metavar="N",
        help="servers of a JetStream cluster that hold each stream and bucket this creates "
        "(1; 3 survives the loss of any one server of three)",
    )
    add_run_key_option(p)


def add_run_key_option(p: Any) -> None:
    """``--run-key-file``: the file holding the run's key (docs/security.md)."""
    p.add_argument(
        "--run-key-file",
        metavar="PATH",
        default=None,
        help="the file holding the run's key, which seals its records (default: "
        "$VF_RUN_KEY_FILE, else this user's key store; vf run and vf broker-setup write a "
        "new run's key there when it names no file yet)",
    )


def topology_options(args: argparse.Namespace, realtime_keep: int | None = None) -> Any:
    from vfadapters.cli.inputs import DAY, check_count, check_seconds
    from vfcore import InvalidInputError
    from vfcore.runtime import MAX_STREAM_REPLICAS, TopologyOptions

    if args.retries < 0:
        raise InvalidInputError(
            "invalid-option", f"--retries {args.retries} is negative", "use 0 or more"
        )
    check_count(args.retries, "--retries", least=0, most=MAX_RETRIES, example="2")
    check_seconds(args.ack_wait, "--ack-wait", most=DAY, example="30")
    check_count(args.max_ack_pending, "--max-ack-pending", least=1, most=2**31 - 1, example="1024")
    replicas = getattr(args, "stream_replicas", 1)
    check_count(replicas, "--stream-replicas", least=1, most=MAX_STREAM_REPLICAS, example="3")
    window = max(120.0, 4 * args.ack_wait)
    return TopologyOptions(
        realtime_keep=realtime_keep or 1,
        max_ack_pending=args.max_ack_pending,
        ack_wait_s=args.ack_wait,
        duplicate_window_s=window,
        stream_replicas=replicas,
    )


def _check_replica(replica: int) -> int:
    """A replica index: 0 .. MAX_REPLICAS_PER_NODE - 1, else ``invalid-replica``."""
    from vfcore import InvalidInputError
    from vfcore.flow import MAX_REPLICAS_PER_NODE

    if replica < 0:
        raise InvalidInputError(
            "invalid-replica", f"--replica {replica} is negative", "replicas count from 0"
        )
    if replica >= MAX_REPLICAS_PER_NODE:
        raise InvalidInputError(
            "invalid-replica",
            f"replica {replica} is past the {MAX_REPLICAS_PER_NODE:,} replicas one node may run",
            f"replicas count from 0 to {MAX_REPLICAS_PER_NODE - 1}",
        )
    return replica


def _cmd_worker(args: argparse.Namespace) -> int:
    from vfadapters.broker.client import check_broker_url
    from vfadapters.loading import load_runnable
    from vfcore import InvalidInputError
    from vfcore.runtime import check_run_id

    run_id = check_run_id(args.run)
    check_broker_url(args.broker)
    topology = topology_options(args)
    flow, spec = load_runnable(args.flow)
    nodes = {n.name: n for n in flow.nodes}
    scalable = tuple(n.strip() for n in args.scalable.split(",") if n.strip())
    for name in (args.node, *scalable):
        if name not in nodes:
            flag = "--node" if name == args.node else "--scalable"
            raise InvalidInputError(
                "unknown-node",
                f"{flag}: flow {spec.name!r} has no node {name!r}",
                f"use one of: {', '.join(nodes)}",
            )
    if args.replica is not None:
        _check_replica(args.replica)
    from vfadapters.broker.worker import WorkerOptions, replica_from_env, run_worker

    try:
        replica = args.replica if args.replica is not None else replica_from_env()
    except ValueError as exc:
        raise InvalidInputError(
            "invalid-replica", str(exc), "unset it or pass --replica I"
        ) from None
    replica = _check_replica(0 if replica is None else replica)
    nspec = spec.node(args.node)
    if nspec.partition_by is not None and nspec.replicas > 1 and replica >= nspec.replicas:
        raise InvalidInputError(
            "invalid-replica",
            f"node {args.node!r} is partitioned into {nspec.replicas}; replica {replica} owns "
            "no partition",
            f"use 0..{nspec.replicas - 1}",
        )
    from vfadapters.broker.keys import require_run_key
    from vfcore.runtime import broker_topology

    bucket = broker_topology(spec, run_id, topology).control.bucket
    run_key = require_run_key(args.run_key_file, args.broker, bucket, run_id, "vf worker")
    from vfadapters.cli.broker_access import broker_credentials

    opts = WorkerOptions(
        url=args.broker,
        run_key=run_key,
        credentials=broker_credentials(args),
        run_id=run_id,
        replica=replica,
        retries=args.retries,
        log_level=logging.INFO,
        create_topology=not args.no_create,
        topology=topology,
        parent_death=args.parent_death,
        scalable=scalable,
    )
    code = run_worker(spec, nodes[args.node], args.node, opts)
    return EXIT_OK if code == 0 else EXIT_RUNTIME
