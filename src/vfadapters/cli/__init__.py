"""The ``vf`` command line.

One module per command (:mod:`~vfadapters.cli.explain`, :mod:`~vfadapters.cli.plan`,
:mod:`~vfadapters.cli.scale`, :mod:`~vfadapters.cli.run_command`), each with
``register(subparsers)``, which adds its subparser and sets ``handler`` to a
function ``(argparse.Namespace) -> int`` (the exit code). What they share on the
way in is :mod:`~vfadapters.cli.inputs`, on the way out :mod:`~vfadapters.cli.output`.
Command modules import heavy libraries inside their handlers, never at import
time, so that ``vf --help`` and ``vf explain`` stay fast.

Exit codes: 0 ok; 1 runtime error; 2 usage error or invalid input (the flow has
errors, a file does not load); 3 a strict verdict failed. ``--json`` prints
exactly one JSON document on stdout; diagnostics go to stderr. Bad input is
raised as :class:`vfcore.InvalidInputError` or :class:`vfcore.InvalidFlowError`
and printed here; it never shows a traceback (set ``VF_DEBUG=1`` to see one for
runtime errors).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from vfadapters.cli import (
    broker_setup_command,
    broker_teardown_command,
    dead_letters_command,
    deploy_command,
    dockerfile_command,
    explain,
    plan,
    run_command,
    scale,
    status_command,
    teardown_command,
    worker_command,
)
from vfadapters.cli.output import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_STOPPED,
    report_error,
    report_issues,
)

#: The command modules, in the order ``vf --help`` lists them.
COMMANDS = (
    explain,
    plan,
    scale,
    run_command,
    worker_command,
    dead_letters_command,
    deploy_command,
    status_command,
    teardown_command,
    dockerfile_command,
    broker_setup_command,
    broker_teardown_command,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"error: usage\n  {message}\n  hint: run `{self.prog} --help`\n")
        raise SystemExit(EXIT_INVALID)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="vf",
        description="Decide how stream-processing flows fit onto GPUs and clusters.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    global _last_command
    parser = _parser()
    args = parser.parse_args(argv)
    _last_command = args.command
    if args.version:
        from vfcore import __version__

        print(f"vf {__version__}")
        return EXIT_OK
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_INVALID
    from vfcore import InvalidFlowError, InvalidInputError

    previous = _stop_on_sigterm() if args.command not in RUNTIME_COMMANDS else None
    try:
        code: int = args.handler(args)
        return code
    except InvalidFlowError as exc:
        report_issues(exc.issues, as_json=getattr(args, "json", False))
        return EXIT_INVALID
    except InvalidInputError as exc:
        report_error(exc.rule, exc.message, exc.hint, as_json=getattr(args, "json", False))
        return EXIT_INVALID
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_STOPPED
    except BrokenPipeError:
        # The reader went away (`vf explain ... | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_RUNTIME
    except Exception as exc:  # a bug or an environment failure: short, with a way to see more
        if os.environ.get("VF_DEBUG"):
            traceback.print_exc()
        report_error(
            "internal-error",
            f"{type(exc).__name__}: {exc}",
            "set VF_DEBUG=1 to see the traceback, and report it",
            as_json=getattr(args, "json", False),
        )
        return EXIT_RUNTIME
    finally:
        if previous is not None:  # main() called in-process (tests): leave SIGTERM as it was
            import signal

            signal.signal(signal.SIGTERM, previous)


#: The commands that handle signals themselves (they drain, hand messages back, stop
#: workers): ``vf run`` and ``vf worker`` (docs/cli.md, Signals).
RUNTIME_COMMANDS = frozenset({"run", "worker"})


def _stop_on_sigterm() -> Any:
    """SIGTERM stops every other command as Ctrl-C does: ``interrupted``, exit 130.

    Without it, SIGTERM (``kill``, a pod's termination, ``timeout``) ended the
    process at once, silently, mid-message; as KeyboardInterrupt it goes through
    each command's own handling (``vf deploy`` prints the teardown command).
    Only the main thread can install it; elsewhere (a test calling ``main``
    from a thread) the default stays. Returns the handler it replaced, which ``main``
    puts back when the command ends (``None`` when none was installed).
    """
    import signal
    import threading

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, stop)


#: The command ``main`` ran last (``run()`` ends every other command at once).
_last_command: str | None = None


def run() -> None:
    """Console-script entry point.

    Every command ends the process as soon as it has answered (stdout and stderr
    flushed, then ``os._exit``): a flow file that started a non-daemon thread, or
    registered an ``atexit`` hook that blocks, would otherwise keep ``vf`` from
    ever exiting. ``vf run`` has cleaned up its workers, shared memory and
    embedded server itself by then; it also runs multiprocessing's exit hook
    (children still alive are reaped) and logging's, and names on stderr the
    threads the flow left running.
    """
    import contextlib

    _signals_to_keyboard_interrupt()
    try:
        code = main()
    except KeyboardInterrupt:  # while the arguments were parsed (commands are imported)
        sys.stderr.write("interrupted\n")
        code = EXIT_STOPPED
    if _last_command == "run":
        left = _threads_left()
        if left:
            names = ", ".join(sorted(t.name for t in left)[:5])
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(
                    f"warning: flow-threads-left: {len(left)} non-daemon thread(s) the "
                    f"flow started are still running ({names}); vf run exits without "
                    "waiting for them (start them with daemon=True, or stop them in the "
                    "node's close())\n"
                )
        _exit_hooks()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


def _exit_hooks() -> None:
    """The exit hooks ``vf run`` needs, without the flow's own (which may block)."""
    import logging

    mp_util = sys.modules.get("multiprocessing.util")
    exit_function = getattr(mp_util, "_exit_function", None)
    if exit_function is not None:
        exit_function()  # reaps the children still alive, stops the fork server
    logging.shutdown()


def _signals_to_keyboard_interrupt() -> None:
    """From here on SIGINT and SIGTERM raise KeyboardInterrupt (each command handles it).

    Replaces the quiet early exit of :mod:`vfadapters.entry`; a signal the parent
    set to be ignored stays ignored.
    """
    import signal
    import threading

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        return
    for sig, handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, stop)):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, handler)


def _threads_left() -> list[Any]:
    """The non-daemon threads besides this one still running (the interpreter would wait)."""
    import threading

    me = threading.current_thread()
    return [t for t in threading.enumerate() if t is not me and not t.daemon and t.is_alive()]
