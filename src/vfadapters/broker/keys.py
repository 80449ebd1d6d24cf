"""Where a run's key comes from: the file a user names, ``$VF_RUN_KEY_FILE``, or the
key store this user keeps for the runs it started.

A broker run's records are sealed under a 32-byte run key
(:mod:`vfadapters.broker.sealing`). ``vf run --broker`` makes one for a new run;
every other process of the run must read the same key:

* ``--run-key-file PATH`` (``vf run``, ``vf worker``, ``vf dead-letters``,
  ``vf broker-setup``) or ``$VF_RUN_KEY_FILE`` (a pod: the key mounted from the
  run's Secret) — the file holds the 32 bytes raw, or as 64 hex digits;
* otherwise the **key store**: ``$VF_RUN_KEYS`` or
  ``$XDG_STATE_HOME/vf/run-keys`` (``~/.local/state/vf/run-keys``), a folder only
  this user can read (0700), one file per server and run (0600). ``vf run --broker``
  keeps a run's key there while its streams exist (``--keep-streams``, a run
  stopped midway for ``--resume``), so that ``vf dead-letters --replay`` and
  ``vf run --resume`` on this machine find it; ``vf broker-teardown`` removes it.

An embedded broker's run key lives only in memory: its streams end with it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from vfadapters.broker.sealing import KEY_BYTES
from vfcore import InvalidInputError

__all__ = [
    "KEY_FILE_ENV",
    "KEY_STORE_ENV",
    "forget_run_key",
    "new_run_key",
    "read_run_key",
    "resolve_run_key",
    "store_path",
    "write_run_key",
]

KEY_FILE_ENV = "VF_RUN_KEY_FILE"
KEY_STORE_ENV = "VF_RUN_KEYS"
_MAX_FILE = 4096


def new_run_key() -> bytes:
    """32 bytes from the operating system's generator."""
    return os.urandom(KEY_BYTES)


def key_store() -> Path:
    explicit = os.environ.get(KEY_STORE_ENV)
    if explicit:
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "vf" / "run-keys"


def store_path(host: str, port: int, bucket: str) -> Path:
    """The key store's file for the run whose control bucket is ``bucket`` on ``host:port``."""
    safe_host = "".join(c if c.isalnum() or c in "-." else "_" for c in host)
    return key_store() / f"{safe_host}-{port}-{bucket}.key"


def read_run_key(path: Path | str, *, what: str = "--run-key-file") -> bytes:
    """The key in ``path`` (32 raw bytes, or 64 hex digits); ``run-key-invalid`` else."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = f.read(_MAX_FILE + 1)
    except FileNotFoundError:
        raise InvalidInputError(
            "run-key-missing",
            f"{what} {p}: no such file",
            "give the file that holds the run's key (vf run --broker made it; a pod has it "
            "from the run's Secret)",
        ) from None
    except OSError as exc:
        raise InvalidInputError(
            "run-key-invalid",
            f"{what} {p}: cannot be read ({exc.strerror or exc})",
            "give a readable file holding the run's key",
        ) from None
    text = data.strip()
    if len(data) == KEY_BYTES:
        return data
    if len(text) == 2 * KEY_BYTES:
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            pass
    raise InvalidInputError(
        "run-key-invalid",
        f"{what} {p}: holds {len(data)} bytes; a run key is {KEY_BYTES} bytes, raw or as "
        f"{2 * KEY_BYTES} hex digits",
        "give the key file vf made for the run (or its Secret's run-key entry)",
    )


def write_run_key(path: Path, key: bytes) -> None:
    """Write ``key`` (hex) to a new file only this user can read; its folder 0700."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = os.lstat(path.parent)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise InvalidInputError(
            "run-key-store-unsafe",
            f"{path.parent} is not a folder of this user's: a run key is not written there",
            f"set {KEY_STORE_ENV} to a folder of your own",
        )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key.hex().encode() + b"\n")
    finally:
        os.close(fd)


def forget_run_key(path: Path) -> bool:
    """Remove a stored key; whether there was one."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def resolve_run_key(explicit: str | None, stored: Path | None) -> bytes | None:
    """The run key named by ``--run-key-file``, else ``$VF_RUN_KEY_FILE``, else the key
    store's file ``stored`` if it exists; None when there is none."""
    if explicit:
        return read_run_key(explicit)
    env = os.environ.get(KEY_FILE_ENV)
    if env:
        return read_run_key(env, what=f"${KEY_FILE_ENV}")
    if stored is not None and stored.exists():
        return read_run_key(stored, what="the key store's file")
    return None


def require_run_key(explicit: str | None, url: str, bucket: str, run_id: str, who: str) -> bytes:
    """The run key a process that joins a run needs (``vf worker``, a replay):
    ``--run-key-file``, ``$VF_RUN_KEY_FILE``, or the key store; ``run-key-missing`` else."""
    from vfadapters.broker.client import check_broker_url, shown_url

    host, port = check_broker_url(url)
    stored = store_path(host, port, bucket)
    key = resolve_run_key(explicit, stored)
    if key is None:
        raise InvalidInputError(
            "run-key-missing",
            f"{who} needs the key of run {run_id} on {shown_url(url)} (its records are sealed "
            f"under it) and none was given: no --run-key-file, no ${KEY_FILE_ENV}, nothing "
            f"in this machine's key store ({stored})",
            "give the key file of the run with --run-key-file (vf run --broker keeps it in "
            "the key store of the machine it ran on; `vf broker-setup --run-key-file PATH` "
            "makes one for workers started by hand; a pod reads it from the run's Secret)",
        )
    return key
