"""How a local run behaves: :class:`RunOptions`, checked before anything starts.

Also where dead letters go (:func:`check_dead_letter_path`,
:func:`default_dead_letter_name`) and the error a strict GPU policy raises.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vfcore import InvalidInputError
from vfcore.runtime import DEFAULT_REALTIME_KEEP, MAX_REALTIME_KEEP, LayoutOptions

__all__ = [
    "BROKER_BATCH_MAX",
    "BROKER_LINGER_S",
    "LOCAL_BATCH_MAX",
    "LOCAL_LINGER_S",
    "MAX_BUFFER_MESSAGES",
    "MAX_BUFFER_MIB",
    "GpuRefusedError",
    "RunOptions",
    "check_dead_letter_path",
    "default_dead_letter_name",
    "default_linger_s",
]

#: The largest input buffer (``buffer_mib``): a record's size is a 32-bit field.
MAX_BUFFER_MIB = 2048
#: The most messages one input buffer may be asked to hold (``buffer_messages``).
MAX_BUFFER_MESSAGES = 1 << 24
#: Items one record (a ring record, a NATS message) holds at most by default, and a
#: producer's segment: locally a record costs little, over a broker each message
#: costs a publish, a ledger entry and an acknowledgement (docs/performance.md), so
#: it carries more — always within ``batch_bytes``, ``linger_s`` and about 5 s of a
#: child's work once its cost is known (``vfcore.runtime.ONE_CONSUMER_TARGET_S``).
LOCAL_BATCH_MAX = 1024
BROKER_BATCH_MAX = 8192
#: How long a producer's segment waits for its source (the time ``next()`` makes it
#: wait, and any time the producer is not running: a loaded machine's scheduler
#: counts too) before it is written. Locally a segment costs little: 2 ms. Over a
#: broker each message costs about 5 ms of CPU along a chain (publishes, ledger
#: entries, acknowledgements, the server's share; docs/performance.md), so a BATCH
#: flow's producer waits 20 ms: on 2 cores shared by a run's busy processes, 2 ms of
#: preemption cut segments of ~2,000 items where 8,192 may go, and the messages'
#: cost took the CPU the nodes needed. A REALTIME flow keeps 2 ms (a frame waits for
#: no company).
LOCAL_LINGER_S = 0.002
BROKER_LINGER_S = 0.02


def default_linger_s(*, broker: bool, realtime: bool) -> float:
    """A producer's linger when the run's options name none (:data:`BROKER_LINGER_S`
    for a BATCH flow over a broker, :data:`LOCAL_LINGER_S` otherwise)."""
    return BROKER_LINGER_S if broker and not realtime else LOCAL_LINGER_S


def default_dead_letter_name(flow: str, run_id: str) -> str:
    """The dead-letter file a run writes when none is named: one per run, never reused.

    >>> default_dead_letter_name("traffic", "1a2b3c4d")
    'traffic.1a2b3c4d.dead-letters.jsonl'
    """
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", flow).strip(".") or "flow"
    return f"{safe}.{run_id}.dead-letters.jsonl"


def check_dead_letter_path(path: str | os.PathLike[str]) -> str:
    """The absolute path dead letters will be appended to, checked before anything starts.

    The file is never truncated or removed: dead letters are appended to what
    it holds (through a symbolic link, to its target). Refused with an
    :class:`InvalidInputError`: a directory (``dead-letters-is-a-directory``), a
    folder that does not exist (``dead-letters-folder-missing``), something that
    is not a regular file — a FIFO, a device such as ``/dev/full`` —
    (``dead-letters-not-a-file``), a file or folder this user cannot write
    (``dead-letters-not-writable``).
    """
    text = os.fspath(path)
    absolute = os.path.abspath(text)
    hint = "give --dead-letters a file path in an existing, writable folder"
    if os.path.isdir(absolute):
        raise InvalidInputError(
            "dead-letters-is-a-directory",
            f"--dead-letters {text}: {absolute} is a directory, not a file",
            f"name a file, e.g. --dead-letters {os.path.join(text, 'dead-letters.jsonl')}",
        )
    folder = os.path.dirname(absolute)
    if not os.path.isdir(folder):
        raise InvalidInputError(
            "dead-letters-folder-missing",
            f"--dead-letters {text}: the folder {folder} does not exist",
            f"create it first (mkdir -p {folder}) or {hint}",
        )
    if os.path.exists(absolute):
        import stat

        mode = os.stat(absolute).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO (a write would wait for a reader for ever)"
                if stat.S_ISFIFO(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file"
            )
            raise InvalidInputError(
                "dead-letters-not-a-file",
                f"--dead-letters {text}: {absolute} is {kind}; dead letters are kept in a file",
                hint,
            )
        writable = os.access(absolute, os.W_OK)
        what = absolute
    else:
        writable = os.access(folder, os.W_OK | os.X_OK)
        what = f"the folder {folder}"
    if not writable:
        raise InvalidInputError(
            "dead-letters-not-writable",
            f"--dead-letters {text}: {what} is not writable by this user",
            hint,
        )
    return absolute


class GpuRefusedError(InvalidInputError):
    """``gpu_policy='strict'`` and the host's GPUs do not cover the flow's demand."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How a local run behaves (every field has the documented default)."""

    drain_timeout_s: float = 10.0
    retries: int = 2
    dead_letter_path: str | None = None
    gpu_policy: str = "share"
    autoscale: bool = False
    gpu_autoscaling: bool = False
    max_replicas: int = 10
    scale_interval_s: float = 1.0
    scale_target: int = 10
    buffer_mib: float = 16.0
    buffer_messages: int = 4096
    realtime_keep: int | None = None  # None: the layout's rule (1 per parent of the child)
    progress: bool | None = None  # None: a live table when stderr is a terminal
    start_method: str = "forkserver"
    handle_signals: bool = True
    log_level: int = logging.INFO
    #: how long a producer's segment waits for its source before it is written; None:
    #: LOCAL_LINGER_S, or BROKER_LINGER_S for a BATCH flow over a broker
    linger_s: float | None = None
    #: items a record holds at most; None: LOCAL_BATCH_MAX or BROKER_BATCH_MAX
    batch_max: int | None = None
    log_sink: Callable[[int, str], None] | None = None
    gpu_inventory: tuple[Any, ...] | None = None  # tests: a fake host inventory
    stall_warning_s: float = 10.0  # warn about a node without progress this long; 0: never

    def check(self) -> None:
        def bad(name: str, value: Any, hint: str) -> InvalidInputError:
            return InvalidInputError("invalid-run-option", f"{name}={value!r} is invalid", hint)

        if not (isinstance(self.drain_timeout_s, int | float) and self.drain_timeout_s >= 0):
            raise bad("drain_timeout_s", self.drain_timeout_s, "give a number of seconds >= 0")
        if self.batch_max is not None and not (
            isinstance(self.batch_max, int) and 1 <= self.batch_max <= MAX_BUFFER_MESSAGES
        ):
            raise bad("batch_max", self.batch_max, "give a whole number of items >= 1, e.g. 1024")
        if self.linger_s is not None and not (
            isinstance(self.linger_s, int | float)
            and not isinstance(self.linger_s, bool)
            and 0 <= self.linger_s < math.inf
        ):
            raise bad("linger_s", self.linger_s, "give seconds >= 0, e.g. 0.002")
        if not (isinstance(self.retries, int) and self.retries >= 0):
            raise bad("retries", self.retries, "give a whole number >= 0, e.g. 2")
        if self.gpu_policy not in ("share", "strict"):
            raise bad("gpu_policy", self.gpu_policy, "use 'share' (default) or 'strict'")
        if not (isinstance(self.max_replicas, int) and self.max_replicas >= 1):
            raise bad("max_replicas", self.max_replicas, "give a whole number >= 1")
        if not (isinstance(self.scale_target, int) and self.scale_target >= 1):
            raise bad("scale_target", self.scale_target, "give a backlog per replica >= 1")
        if not (
            isinstance(self.buffer_mib, int | float)
            and 0 < self.buffer_mib <= MAX_BUFFER_MIB  # NaN and infinity fail too
        ):
            raise InvalidInputError(
                "buffer-size-out-of-range",
                f"buffer_mib={self.buffer_mib!r} is outside (0, {MAX_BUFFER_MIB}] MiB: each "
                "input buffer is one shared-memory segment, and a batch's size is a "
                "32-bit field",
                f"give a size between 1 and {MAX_BUFFER_MIB} MiB (--buffer-mib, default 16)",
            )
        if not (
            isinstance(self.buffer_messages, int)
            and 1 <= self.buffer_messages <= MAX_BUFFER_MESSAGES
        ):
            raise InvalidInputError(
                "buffer-size-out-of-range",
                f"buffer_messages={self.buffer_messages!r} is outside [1, {MAX_BUFFER_MESSAGES:,}]",
                "give a whole number of messages, e.g. 4096 (--buffer-messages, the default)",
            )
        keep = self.realtime_keep
        if keep is not None and not (
            isinstance(keep, int) and not isinstance(keep, bool) and 1 <= keep <= MAX_REALTIME_KEEP
        ):
            raise InvalidInputError(
                "realtime-keep-out-of-range",
                f"realtime_keep={keep!r} is outside [1, {MAX_REALTIME_KEEP:,}]: it is how many "
                "of the freshest messages a REALTIME input buffer keeps waiting",
                f"give a whole number of messages, e.g. {DEFAULT_REALTIME_KEEP} "
                "(--realtime-keep; the default is 1 per parent of the receiving node)",
            )
        if not (
            isinstance(self.scale_interval_s, int | float) and 0 < self.scale_interval_s < math.inf
        ):
            raise bad("scale_interval_s", self.scale_interval_s, "give seconds > 0, e.g. 1")
        if not (
            isinstance(self.stall_warning_s, int | float) and 0 <= self.stall_warning_s < math.inf
        ):
            raise bad(
                "stall_warning_s",
                self.stall_warning_s,
                "give seconds >= 0 (0 turns the no-progress warning off), e.g. 10",
            )
        if self.start_method not in ("forkserver", "spawn"):
            raise bad("start_method", self.start_method, "use 'forkserver' or 'spawn'")
        if self.dead_letter_path is not None:
            check_dead_letter_path(self.dead_letter_path)

    def layout_options(self) -> LayoutOptions:
        """What of these options decides the run's layout (:func:`vfcore.runtime.local_layout`)."""
        return LayoutOptions(
            autoscale=self.autoscale,
            gpu_autoscaling=self.gpu_autoscaling,
            max_replicas=self.max_replicas,
            gpu_policy="strict" if self.gpu_policy == "strict" else "share",
            realtime_keep=self.realtime_keep,
        )
