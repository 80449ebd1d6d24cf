"""``vf dead-letters FLOW --broker URL --run ID [--replay]``: list or replay a broker run's dead letters.

Lists the letters in the run's dead-letter stream (oldest first: node, trace
id, reason, error); ``--replay`` sends each replayable one back on the edge it
came in by and removes it from the stream (docs/broker.md). ``--json`` prints
one ``dead-letters`` document. Exit codes: 0 listed (or all replayed), 1 some
could not be replayed, 2 bad input or an unreachable server.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from vfadapters.cli.output import EXIT_OK, EXIT_RUNTIME, emit_json, table

#: The most letters ``--limit`` may ask to read (they are held in memory, then printed).
MAX_LETTERS = 1_000_000


def register(sub: Any) -> None:
    p = sub.add_parser(
        "dead-letters",
        help="list (or --replay) the dead letters of a broker run",
        description="Read the dead-letter stream of run ID of the flow on the broker: every "
        "message a node gave up on, with why. --replay publishes each one again on the edge it "
        "came in by, then removes it from the stream.",
    )
    p.add_argument("flow", metavar="FLOW", help="flow.py or flow.py:factory")
    p.add_argument("--broker", required=True, metavar="URL", help="nats://host:port")
    p.add_argument("--run", required=True, metavar="ID", help="the run id")
    p.add_argument("--replay", action="store_true", help="send the letters back, then remove them")
    p.add_argument(
        "--limit", type=int, default=10_000, metavar="N", help="read at most N letters (10000)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    from vfadapters.cli.worker_command import add_run_key_option

    add_run_key_option(p)  # --replay checks each letter's seal and seals it again
    from vfadapters.cli.broker_access import add_broker_credential_options

    add_broker_credential_options(p)
    p.set_defaults(handler=_cmd_dead_letters)


def _cmd_dead_letters(args: argparse.Namespace) -> int:
    from vfadapters.broker.client import Bridge, check_broker_url, jetstream_required
    from vfadapters.broker.dead_letters import read_letters, replay_letters
    from vfadapters.cli.inputs import check_count
    from vfadapters.loading import load_runnable
    from vfcore.runtime import broker_topology, check_run_id

    run_id = check_run_id(args.run)
    check_count(args.limit, "--limit", least=1, most=MAX_LETTERS, example="10000")
    check_broker_url(args.broker)
    _, spec = load_runnable(args.flow)
    topo = broker_topology(spec, run_id)
    run_key = b""
    if args.replay:
        from vfadapters.broker.keys import require_run_key

        run_key = require_run_key(
            args.run_key_file, args.broker, topo.control.bucket, run_id, "vf dead-letters --replay"
        )
    from vfadapters.cli.broker_access import broker_credentials
    from vfcore.runtime import ADMIN_ROLE

    credentials = broker_credentials(args).for_role(topo, ADMIN_ROLE)
    bridge = Bridge()
    try:
        bridge.connect(
            args.broker, name=f"vf dead-letters {spec.name} {run_id}", credentials=credentials
        )
        replayed: int = 0
        skipped: list[Any] = []
        with jetstream_required(args.broker, "it holds no run's dead letters"):
            letters = bridge.run(read_letters(bridge.nc, topo, limit=args.limit), timeout_s=120)
            if args.replay:
                replayed, skipped = bridge.run(
                    replay_letters(bridge.nc, spec, topo, letters, run_key), timeout_s=300
                )
    finally:
        bridge.close()
    stream = topo.dead_letters.config.name
    doc = {
        "flow": spec.name,
        "run_id": run_id,
        "stream": stream,
        "letters": [{"seq": letter.seq, **letter.entry} for letter in letters],
        "replayed": replayed,
        "not_replayed": [{"seq": letter.seq, "why": why} for letter, why in skipped],
    }
    if args.json:
        emit_json(doc)
    else:
        out = sys.stdout
        out.write(f"dead letters of run {run_id} of {spec.name} ({stream}): {len(letters)}\n")
        if letters:
            rows = [["SEQ", "NODE", "TRACE", "REASON", "ERROR"]]
            for letter in letters:
                e = letter.entry
                error = str(e.get("error") or "")
                rows.append(
                    [
                        str(letter.seq),
                        str(e.get("node")),
                        str(e.get("trace_id")),
                        str(e.get("reason")),
                        error if len(error) <= 60 else error[:57] + "...",
                    ]
                )
            table(rows, out)
        if args.replay:
            out.write(f"replayed {replayed}; not replayed {len(skipped)}\n")
            for letter, why in skipped:
                out.write(f"  seq {letter.seq}: {why}\n")
    return EXIT_RUNTIME if skipped else EXIT_OK
