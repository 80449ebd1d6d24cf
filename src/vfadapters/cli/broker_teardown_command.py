"""``vf broker-teardown FLOW --broker URL --run ID``: remove a run's streams, consumers and buckets.

What ``vf run --broker`` does at the end of a run, for runs whose streams were
kept (``--keep-streams``), whose coordinator died, or whose workers were started
by hand (``vf worker``): every stream of the run (the nodes' outputs with their
consumers, the ledger), its control, splits and large-payload buckets. The
dead-letter stream goes only when it is empty, or with ``--dead-letters`` (its
letters are data: list them first with ``vf dead-letters``). A run whose
coordinator is alive (its heartbeat is fresh) is refused unless ``--force``.

Exit codes: 0 removed (or nothing there, with ``--ignore-not-found``); 2 bad
input, no broker (``broker-unreachable``), nothing of the run on the server
(``run-not-found``), a run in use (``run-in-use``).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from vfadapters.cli.output import EXIT_OK, emit_json


def register(sub: Any) -> None:
    p = sub.add_parser(
        "broker-teardown",
        help="remove a broker run's streams, consumers and buckets from a NATS server",
        description="Remove every stream, consumer and bucket of run ID of the flow from the "
        "server (what `vf run --broker` removes at the end, unless --keep-streams). The "
        "dead-letter stream goes only when empty, or with --dead-letters.",
    )
    p.add_argument("flow", metavar="FLOW", help="flow.py or flow.py:factory")
    p.add_argument("--broker", required=True, metavar="URL", help="nats://host:port")
    p.add_argument("--run", required=True, metavar="ID", help="the run id")
    p.add_argument(
        "--dead-letters",
        action="store_true",
        help="remove the dead-letter stream even when it holds letters",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="remove it even while its coordinator's heartbeat is fresh (it is running)",
    )
    p.add_argument(
        "--ignore-not-found",
        action="store_true",
        help="exit 0 when nothing of the run is on the server",
    )
    p.add_argument("--json", action="store_true", help="print what was removed as JSON")
    from vfadapters.cli.broker_access import add_broker_credential_options

    add_broker_credential_options(p)
    p.set_defaults(handler=_cmd_broker_teardown)


def _cmd_broker_teardown(args: argparse.Namespace) -> int:
    from vfadapters.broker.client import (
        Bridge,
        check_broker_url,
        delete_topology,
        jetstream_required,
        shown_url,
    )
    from vfadapters.broker.run import STALE_OWNER_S
    from vfadapters.cli.broker_access import broker_credentials
    from vfadapters.loading import load_runnable
    from vfcore import InvalidInputError
    from vfcore.runtime import ADMIN_ROLE, broker_topology, check_run_id

    run_id = check_run_id(args.run)
    check_broker_url(args.broker)
    _, spec = load_runnable(args.flow)
    topo = broker_topology(spec, run_id)
    credentials = broker_credentials(args).for_role(topo, ADMIN_ROLE)
    bridge = Bridge()
    try:
        bridge.connect(
            args.broker, name=f"vf broker-teardown run {run_id}", credentials=credentials
        )
        with jetstream_required(args.broker, "it holds no run's streams"):
            owner = bridge.run(_owner(bridge, topo), timeout_s=30)
        if owner and not args.force:
            beat = float(owner.get("beat") or 0)
            if time.time() - beat < STALE_OWNER_S:
                raise InvalidInputError(
                    "run-in-use",
                    f"run {run_id} is running: pid {owner.get('pid')} on {owner.get('host')} "
                    f"wrote its heartbeat {time.time() - beat:.1f} s ago",
                    "stop it first (Ctrl-C), or pass --force to remove its streams under it",
                )
        deleted = bridge.run(
            delete_topology(bridge.nc, topo, dead_letters=args.dead_letters), timeout_s=60
        )
    finally:
        bridge.close()
    kept_letters = topo.dead_letters.config.name not in deleted and not args.dead_letters
    if not kept_letters:  # nothing of the run is left to read: its stored key goes too
        from vfadapters.broker.client import check_broker_url
        from vfadapters.broker.keys import forget_run_key, store_path

        host, port = check_broker_url(args.broker)
        forget_run_key(store_path(host, port, topo.control.bucket))
    if not deleted and not args.ignore_not_found:
        raise InvalidInputError(
            "run-not-found",
            f"nothing of run {run_id} of flow {spec.name!r} is on {shown_url(args.broker)}",
            "check --run and the flow (the run id and the flow's name make every stream "
            "name), or pass --ignore-not-found",
        )
    kept = topo.dead_letters.config.name not in deleted and not args.dead_letters
    if args.json:
        emit_json({"run": run_id, "flow": spec.name, "deleted": deleted})
    else:
        print(
            f"run {run_id} of {spec.name}: removed {len(deleted)} stream(s) from "
            f"{shown_url(args.broker)}"
        )
        for name in deleted:
            print(f"  {name}")
        if kept:
            print(
                f"  (dead-letter stream {topo.dead_letters.config.name} kept if it holds "
                "letters: --dead-letters removes it)"
            )
    return EXIT_OK


async def _owner(bridge: Any, topo: Any) -> dict[str, Any] | None:
    from nats.js.errors import BucketNotFoundError, KeyNotFoundError

    try:
        kv = await bridge.js.key_value(topo.control.bucket)
        entry = await kv.get(topo.control.run_key)
    except (BucketNotFoundError, KeyNotFoundError):
        return None
    doc: dict[str, Any] = json.loads(entry.value or b"{}")
    return doc
