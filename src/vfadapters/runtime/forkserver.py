"""The fork server replicas start from, started as early and as cheaply as possible.

Light on purpose (the standard library only): ``vf run`` starts the fork server
before it imports the flow, vfcore or the transport, so that the fork server
imports what workers need (:func:`install_forkserver`'s ``preload``) while this
process does the same — the first replica then forks from a ready server.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import threading
from typing import Any

__all__ = ["ENV", "install_forkserver", "signals_ignored"]

#: the coordinator's pid, for the fork server's guard (vfadapters/runtime/forkserver_guard.py)
ENV = "VF_FORKSERVER_OF"


def install_forkserver(method: str, preload: tuple[str, ...] = ()) -> Any:
    """The multiprocessing context workers start from (the fork server started, signal-proof).

    ``preload``: modules the fork server imports once, so that each worker forked
    from it starts without importing them (the transport's worker module).
    """
    ctx = mp.get_context(method)
    if method == "forkserver":
        # the guard first: the fork server dies with this process, even by kill -9
        # (vfadapters/runtime/forkserver_guard.py says why it would not otherwise)
        ctx.set_forkserver_preload(
            [
                "vfadapters.runtime.forkserver_guard",
                "__main__",
                "numpy",
                "vfcore",
                "vfadapters.runtime.worker",
                *preload,
            ]
        )
        from multiprocessing import forkserver

        os.environ[ENV] = str(os.getpid())
        # started with SIGINT and SIGTERM ignored (an ignored signal stays ignored
        # across exec and fork), so that neither the fork server nor any worker it
        # forks dies of a signal sent to the whole process group (Ctrl-C, `timeout`,
        # systemd, Kubernetes, CI cancellation): the coordinator alone decides how
        # to stop. (The fork server dying would take every worker with it: their
        # parent-death signal.)
        with signals_ignored(signal.SIGINT, signal.SIGTERM), _socket_dir_that_fits():
            forkserver.ensure_running()
    return ctx


#: the longest path an AF_UNIX socket may have on Linux (108 bytes with the NUL)
_SUN_PATH_MAX = 107
#: what multiprocessing adds to the temp dir for the fork server's socket:
#: ``/pymp-XXXXXXXX/listener-XXXXXXXX``, and some room
_SOCKET_SUFFIX = 40


@contextlib.contextmanager
def _socket_dir_that_fits() -> Any:
    """The fork server listens on a Unix socket in multiprocessing's temp dir, made
    under ``$TMPDIR``: a long one (a CI runner's, a test's, a deep home) fails with
    "AF_UNIX path too long". Python 3.13 falls back to a short system dir by itself;
    here that dir is made under the first of ``/tmp``, ``/var/tmp`` that is writable
    when ``$TMPDIR`` is too long (multiprocessing keeps the dir it made first)."""
    import tempfile
    from multiprocessing import util

    base = tempfile.gettempdir()
    if len(os.fsencode(base)) + _SOCKET_SUFFIX <= _SUN_PATH_MAX:
        yield
        return
    short = next((d for d in ("/tmp", "/var/tmp") if os.access(d, os.W_OK | os.X_OK)), None)
    if short is None:
        yield  # nowhere shorter: multiprocessing's own error stands
        return
    saved = tempfile.tempdir
    tempfile.tempdir = short
    try:
        util.get_temp_dir()  # made now, under the short dir, and kept for the socket
    finally:
        tempfile.tempdir = saved
    yield


@contextlib.contextmanager
def signals_ignored(*signums: int) -> Any:
    """Ignore ``signums`` while a process is started (it inherits SIG_IGN), losing none.

    The signals are blocked first; one that arrives while they are ignored stays
    pending (Linux never discards a blocked signal) and is delivered when the
    old handlers are back; one already pending is re-raised then.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = set(signums)
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    pending = signal.sigpending() & sigs  # setting SIG_IGN would discard these
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in sorted(sigs)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for sig in sorted(pending):
            signal.raise_signal(sig)  # still blocked: delivered on the unblock below
        signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
