"""``vf broker-setup FLOW --broker URL --run ID``: create a run's streams and consumers.

What the setup Job of a Kubernetes deploy runs before any worker starts (the
workers run with ``--no-create``): every stream, consumer and the control bucket
that :func:`vfcore.broker_topology` lists and the server lacks; what exists is
left alone, so running it twice is harmless. ``--wait S`` retries the first
connection for up to S seconds (the broker's pod may still be starting), and
the creation while a JetStream cluster has no leader (its servers are starting).
The broker credentials options (docs/cli.md) give the run's *setup* role:
create what the run lacks, nothing else. ``--wait`` is 0 to 3600 seconds (``nan``, ``inf`` and more are ``invalid-option``).
Exit codes: 0 done; 1 an unexpected failure; 2 bad input, no broker within
``--wait`` (``broker-unreachable``), a server without JetStream
(``no-jetstream``) or one that refuses the run's streams.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from vfadapters.cli.output import EXIT_OK


def register(sub: Any) -> None:
    from vfadapters.cli.broker_access import add_broker_credential_options
    from vfadapters.cli.worker_command import add_broker_options

    p = sub.add_parser(
        "broker-setup",
        help="create a run's NATS JetStream streams and consumers (a deploy's setup Job)",
        description="Create every stream, consumer and the control bucket of run ID of the "
        "flow that the server lacks (what `vf worker` creates itself without --no-create). "
        "Kubernetes deploys run it once, before the workers.",
    )
    p.add_argument("flow", metavar="FLOW", help="flow.py or flow.py:factory")
    p.add_argument("--broker", required=True, metavar="URL", help="nats://host:port")
    p.add_argument("--run", required=True, metavar="ID", help="the run id (names every stream)")
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="S",
        help="retry the first connection for up to S seconds (0: one attempt)",
    )
    add_broker_options(p)
    add_broker_credential_options(p)
    p.set_defaults(handler=_cmd_broker_setup)


def _cmd_broker_setup(args: argparse.Namespace) -> int:
    from vfadapters.broker.client import (
        Bridge,
        check_broker_url,
        ensure_topology,
        jetstream_required,
        shown_url,
    )
    from vfadapters.cli.broker_access import broker_credentials
    from vfadapters.cli.inputs import HOUR, check_seconds
    from vfadapters.cli.worker_command import topology_options
    from vfadapters.loading import load_runnable
    from vfcore import InvalidInputError
    from vfcore.runtime import SETUP_ROLE, broker_topology, check_run_id

    run_id = check_run_id(args.run)
    check_seconds(args.wait, "--wait", most=HOUR, zero=True, example="60")
    check_broker_url(args.broker)
    _, spec = load_runnable(args.flow)
    topo = broker_topology(spec, run_id, topology_options(args))
    credentials = broker_credentials(args).for_role(topo, SETUP_ROLE)
    deadline = time.monotonic() + args.wait
    while True:
        bridge = Bridge()
        try:
            bridge.connect(
                args.broker, name=f"vf broker-setup run {run_id}", credentials=credentials
            )
            break
        except InvalidInputError as exc:
            bridge.close()
            if exc.rule != "broker-unreachable" or time.monotonic() >= deadline:
                raise
            time.sleep(1.0)
    try:
        while True:
            try:
                with jetstream_required(args.broker, "the run's streams cannot be created"):
                    bridge.run(ensure_topology(bridge.nc, topo), timeout_s=60)
                break
            except Exception as exc:
                # a JetStream cluster that has no leader yet (its servers are starting, or
                # a majority is away) answers nothing, or 503; one with too few servers
                # online for the streams' replicas refuses to place them: wait within --wait
                if not _unavailable(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(1.0)
    finally:
        bridge.close()
    doc = topo.to_dict()
    where = _ensure_run_key(args.run_key_file, args.broker, topo.control.bucket)
    print(
        f"run {run_id} of {spec.name}: {len(doc['streams']) + 1} streams, "
        f"{len(topo.consumers)} consumers and bucket {topo.control.bucket} ready on "
        f"{shown_url(args.broker)}; its key: {where}"
    )
    return EXIT_OK


def _unavailable(exc: BaseException) -> bool:
    """A JetStream that cannot answer now (no meta leader: a timeout, or a 503), or that
    has fewer servers online than the streams' replicas (its servers are starting)."""
    import concurrent.futures

    import nats.errors

    from vfadapters.broker.client import NO_PEERS_FOR_PLACEMENT

    if isinstance(exc, TimeoutError | nats.errors.TimeoutError | concurrent.futures.TimeoutError):
        return True
    said = str(exc)
    return getattr(exc, "rule", None) == "broker-refused" and (
        "err_code 10008" in said
        or "temporarily unavailable" in said
        or f"err_code {NO_PEERS_FOR_PLACEMENT})" in said
    )


def _ensure_run_key(explicit: str | None, url: str, bucket: str) -> str:
    """Where the run's key is, made there first when missing (never replaced: workers
    may hold it already)."""
    import os
    from pathlib import Path

    from vfadapters.broker.client import check_broker_url
    from vfadapters.broker.keys import (
        KEY_FILE_ENV,
        new_run_key,
        read_run_key,
        store_path,
        write_run_key,
    )

    if explicit:
        path = Path(explicit)
    elif os.environ.get(KEY_FILE_ENV):
        read_run_key(os.environ[KEY_FILE_ENV], what=f"${KEY_FILE_ENV}")  # given: readable?
        return f"${KEY_FILE_ENV} ({os.environ[KEY_FILE_ENV]})"
    else:
        host, port = check_broker_url(url)
        path = store_path(host, port, bucket)
    if path.exists():
        read_run_key(path)
        return f"{path} (kept)"
    write_run_key(path, new_run_key())
    return f"{path} (new: give it to every worker with --run-key-file or ${KEY_FILE_ENV})"
