"""Finding and watching the processes of a run from outside, as a user (or the OOM killer) would.

Every replica process names itself ``vf:<pod>`` (``/proc/<pid>/comm``, 15 bytes),
whatever its transport, so a test finds ``work/0`` among the descendants of
the ``vf`` process it started. A run ``start``-ed in its own session is its
process group (``group_members``; ``with_group_killed`` leaves nothing of it
behind), ``run_files`` are its files in ``/dev/shm``, and ``wait_until`` polls.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any


def _stat(pid: int) -> tuple[str, int] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])  # state, ppid


def descendants(root: int) -> set[int]:
    """Every process below ``root`` (children, grandchildren, …)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                children.setdefault(st[1], []).append(int(entry.name))
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def running(pids: set[int]) -> set[int]:
    """Those still running (a zombie waiting for its reaper does not run)."""
    out = set()
    for pid in pids:
        st = _stat(pid)
        if st is not None and st[0] not in ("Z", "X"):
            out.add(pid)
    return out


def replica_pids(root: int, pod: str) -> list[int]:
    """The live processes below ``root`` running replica ``pod`` (``work/0``)."""
    name = f"vf:{pod}"[:15]
    out = []
    for pid in sorted(running(descendants(root))):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm == name:
            out.append(pid)
    return out


def node_pids(root: int, node: str) -> list[int]:
    """The live processes below ``root`` running any replica of ``node``."""
    prefix = f"vf:{node}/"
    out = []
    for pid in sorted(running(descendants(root))):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm.startswith(prefix[:15]) and (len(prefix) > 15 or comm[len(prefix) :].isdigit()):
            out.append(pid)
    return out


SHM = Path("/dev/shm")


def group_members(pgid: int) -> set[int]:
    """Pids of running (not zombie) processes whose process group is ``pgid``."""
    out = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.add(int(entry.name))
    return out


def run_files(coordinator: int) -> list[str]:
    """Files in /dev/shm of runs coordinated by pid ``coordinator``: segments and semaphores."""
    prefixes = (f"vf-{coordinator}-", f"sem.vf-{coordinator}-")
    return sorted(p.name for p in SHM.iterdir() if p.name.startswith(prefixes))


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def start(command: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        start_new_session=True,  # its own process group: the group is the run
    )


def with_group_killed(proc: subprocess.Popen[str]) -> None:
    """Cleanup after a failed assertion: nothing of the group may outlive the test."""
    if group_members(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)
