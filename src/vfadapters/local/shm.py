"""POSIX shared-memory segments owned by one run, without the resource tracker.

``multiprocessing.shared_memory`` registers every *attached* segment with the
resource tracker (Python < 3.13), which then unlinks segments other processes
still use and warns about "leaks". The executor needs neither: the coordinator
creates every segment, unlinks every segment at the end, and names them
``vf-<pid>-<token>-<what>`` so that :func:`sweep_stale` can remove those left by
a coordinator that was killed (its pid no longer runs). The run's POSIX
semaphores carry the same prefix (:func:`run_semaphore_prefix`): glibc keeps
them in ``/dev/shm`` as ``sem.vf-<pid>-<token>-sem-<random>``, and the sweep
removes those of a dead coordinator too. Example: a run of coordinator 4242
killed with ``kill -9 -- -<pgid>`` leaves ``vf-4242-1a2b3c4d-ctl``,
``vf-4242-1a2b3c4d-r1-0-0`` and ``sem.vf-4242-1a2b3c4d-sem-x7k2m9qa``; the
next run (any pid but 4242, which no longer runs) unlinks all three, and
leaves ``vf-5151-…`` alone while coordinator 5151 runs.
"""

from __future__ import annotations

import _posixshmem  # type: ignore[import-not-found]
import contextlib
import mmap
import os
import re
from pathlib import Path

__all__ = [
    "Segment",
    "is_alive",
    "run_prefix",
    "run_semaphore_prefix",
    "sweep_stale",
    "unlink_prefix",
]

_SHM_DIR = Path("/dev/shm")
_NAME = re.compile(r"^(?:sem\.)?vf-(\d+)-[0-9a-f]+-")


def run_prefix(token: str) -> str:
    """The name prefix of every segment of one run: ``vf-<pid>-<token>-``."""
    return f"vf-{os.getpid()}-{token}-"


def run_semaphore_prefix(prefix: str) -> str:
    """What ``multiprocessing`` names a run's semaphores with: ``/<prefix>sem``."""
    return f"/{prefix}sem"


class Segment:
    """One mapped shared-memory segment: ``buf`` is a writable memoryview of it."""

    __slots__ = ("_mmap", "buf", "name", "size")

    def __init__(self, name: str, size: int, *, create: bool) -> None:
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = _posixshmem.shm_open("/" + name, flags, mode=0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            else:
                size = os.fstat(fd).st_size
            self._mmap = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.name = name
        self.size = size
        self.buf = memoryview(self._mmap)

    @classmethod
    def create(cls, name: str, size: int) -> Segment:
        return cls(name, size, create=True)

    @classmethod
    def attach(cls, name: str) -> Segment:
        return cls(name, 0, create=False)

    def close(self) -> None:
        try:
            self.buf.release()
            self._mmap.close()
        except (BufferError, ValueError):
            pass  # a view is still exported; the mapping goes with the process

    def unlink(self) -> None:
        unlink(self.name)


def unlink(name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        _posixshmem.shm_unlink("/" + name)


def unlink_prefix(prefix: str) -> int:
    """Unlink every segment whose name starts with ``prefix``; how many there were."""
    count = 0
    try:
        names = [p.name for p in _SHM_DIR.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return 0
    for name in names:
        unlink(name)
        count += 1
    return count


def is_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> int:
    """Unlink segments and semaphores of runs whose coordinator no longer runs.

    A run's files are named after its coordinator's pid, so a live run's files
    are never touched (its pid runs); what a coordinator killed with -9 left is
    removed by the next run that starts on the machine. Returns how many files.
    """
    count = 0
    try:
        entries = list(_SHM_DIR.iterdir())
    except OSError:
        return 0
    for entry in entries:
        match = _NAME.match(entry.name)
        if match and not is_alive(int(match.group(1))):
            unlink(entry.name)
            count += 1
    return count
