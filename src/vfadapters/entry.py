"""The ``vf`` console script's entry point: quiet about a signal before the CLI is loaded.

Loading the command line imports numpy, networkx and the rest (a second or more
on a loaded machine). A Ctrl-C or SIGTERM in that window would print an import
traceback (SIGINT) or kill the process without a word (SIGTERM). Until
:func:`vfadapters.cli.run` takes over the signals, either one ends ``vf`` with
``interrupted`` and exit 130, as it does later: nothing has started yet, so
there is nothing to drain or clean up.
"""

from __future__ import annotations

import os
import signal
import sys

EXIT_STOPPED = 130  # vfadapters.cli.output.EXIT_STOPPED (not imported: it is what is slow)


def _stopped_early(signum: int, frame: object) -> None:
    os.write(2, b"interrupted\n")
    os._exit(EXIT_STOPPED)


def run() -> None:
    """Install the early handlers, load the CLI, run the command (``vfadapters.cli.run``)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # an ignored signal stays ignored
            signal.signal(sig, _stopped_early)
    from vfadapters.cli import run as run_cli

    run_cli()
    sys.exit(0)  # run_cli ends the process itself
