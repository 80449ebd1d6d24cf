"""The fault soak: many seeded schedules of faults against real runs, on both transports.

    python bench/soak_faults.py                    # 20 seeds per transport
    python bench/soak_faults.py 100 broker         # 100 seeds, the broker only
    python bench/soak_faults.py 5 local --from 40  # seeds 40..44

Each seed draws a flow shape and a schedule of faults (``tests/support/faults.py``:
kill -9 of any replica but the sinks, producers included; SIGSTOP past the ack
wait; over the broker, a kill -9 and restart of the server, a pause of the
server), runs the flow with ``vf run`` or ``vf run --broker`` and checks that it
completed, that every item reached every sink exactly once and that the books
balance. ``make test`` runs a few of the same kind (hypothesis-drawn,
``tests/integration/test_exactly_once_under_faults.py``); this runs many. It
prints one line per run and a summary; a failing seed is reproduced with
``--from SEED`` and a count of 1. Results are appended to ``VF_FAULT_LOG``
(JSON lines) when set.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.support.faults import random_scenario, run_scenario  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("count", nargs="?", type=int, default=20)
    parser.add_argument("transports", nargs="*", default=["local", "broker"])
    parser.add_argument("--from", dest="first", type=int, default=0)
    args = parser.parse_args(argv)
    failures = 0
    runs = 0
    faults = 0
    t0 = time.time()
    for transport in args.transports:
        for seed in range(args.first, args.first + args.count):
            scenario = random_scenario(seed, transport)
            started = time.time()
            applied = {"n": 0}

            def event(text: str, applied: dict[str, int] = applied) -> None:
                applied["n"] = int(text.split(": ")[1].split(" ")[0])

            try:
                doc = run_scenario(scenario, transport, event=event)
                verdict = f"ok ({doc['books']['checked']} equations balance)"
            except AssertionError as exc:
                failures += 1
                verdict = f"FAILED: {str(exc)[:300]}"
            runs += 1
            faults += applied["n"]
            kinds = ",".join(
                f"{f.kind}{':' + f.target if f.target else ''}" for f in scenario.faults
            )
            print(
                f"{transport:6} seed {seed:4} {scenario.shape:11} {applied['n']} of "
                f"{len(scenario.faults)} fault(s) [{kinds}] {time.time() - started:5.1f} s  {verdict}",
                flush=True,
            )
    print(
        f"\n{runs} runs, {faults} faults applied, {failures} failed, "
        f"{time.time() - t0:.0f} s in all ({json.dumps(args.transports)}, seeds "
        f"{args.first}..{args.first + args.count - 1})"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
