"""The local executor: run a flow on this machine, one OS process per replica.

    from vfadapters.local import run
    summary = run("examples/traffic/flow.py")        # or run(flow_object)
    summary.status, summary.nodes["tracker"].processed

Messages travel through bounded shared-memory rings (batched, large arrays
out of band); BATCH flows lose nothing and duplicate nothing in a normal run,
REALTIME flows never block their producers and count every eviction.
``docs/local.md`` states the guarantees.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from vfadapters.local.executor import GpuRefusedError, RunOptions, execute
from vfadapters.runtime.context import Context
from vfadapters.runtime.summary import (
    EdgeSummary,
    NodeSummary,
    RunStatus,
    RunSummary,
    ScalingEvent,
    Stall,
)
from vfcore import Flow

__all__ = [
    "Context",
    "EdgeSummary",
    "GpuRefusedError",
    "NodeSummary",
    "RunOptions",
    "RunStatus",
    "RunSummary",
    "ScalingEvent",
    "Stall",
    "run",
]


def run(
    flow: Flow | str | os.PathLike[str],
    *,
    drain_timeout_s: float = 10.0,
    retries: int = 2,
    dead_letters: str | os.PathLike[str] | None = None,
    gpu_policy: str = "share",
    autoscale: bool = False,
    gpu_autoscaling: bool = False,
    max_replicas: int = 10,
    scale_interval_s: float = 1.0,
    scale_target: int = 10,
    buffer_mib: float = 16.0,
    buffer_messages: int = 4096,
    realtime_keep: int | None = None,
    progress: bool | None = None,
    start_method: str = "forkserver",
    handle_signals: bool = True,
    log_level: int = logging.INFO,
    log_sink: Callable[[int, str], None] | None = None,
    gpu_inventory: Any = None,
    stall_warning_s: float = 10.0,
) -> RunSummary:
    """Run ``flow`` (a :class:`vfcore.Flow`, or ``path/flow.py[:factory]``) to its end.

    Returns a :class:`RunSummary` whose ``status`` is ``completed``,
    ``stopped`` (SIGINT/SIGTERM: producers stop, in-flight work drains for up
    to ``drain_timeout_s``, a second signal stops at once) or ``failed``
    (``summary.error`` says why). Raises :class:`vfcore.InvalidFlowError` for an
    invalid flow and :class:`vfcore.InvalidInputError` for bad options.

    ``retries``: extra attempts for a message whose processing raises, before it
    is appended to the dead-letter file: ``dead_letters`` when given (an
    existing file is appended to, never truncated), else a new file per run,
    ``<flow>.<run id>.dead-letters.jsonl`` in the current folder, created only
    when a first letter is written; ``summary.dead_letter_path`` says which.
    ``stall_warning_s``: warn (and list in ``summary.stalls``) about a node
    that makes no progress for that long (0: never). ``gpu_policy='strict'`` refuses to start when
    the host's GPUs do not cover the flow (:class:`GpuRefusedError`).
    ``autoscale``: competing processors grow from ``nb_tasks`` up to
    ``max_replicas`` and back with their backlog (``scale_target`` messages per
    replica, checked every ``scale_interval_s``). ``buffer_mib`` and
    ``buffer_messages`` bound each input buffer. ``realtime_keep``
    (REALTIME flows): how many of the freshest messages each input buffer keeps
    waiting; older ones are evicted and counted (None: 1 per parent of the
    receiving node, see :func:`vfcore.runtime.layout.realtime_keep_of`).
    """
    options = RunOptions(
        drain_timeout_s=drain_timeout_s,
        retries=retries,
        dead_letter_path=None if dead_letters is None else os.fspath(dead_letters),
        gpu_policy=gpu_policy,
        autoscale=autoscale,
        gpu_autoscaling=gpu_autoscaling,
        max_replicas=max_replicas,
        scale_interval_s=scale_interval_s,
        scale_target=scale_target,
        buffer_mib=buffer_mib,
        buffer_messages=buffer_messages,
        realtime_keep=realtime_keep,
        progress=progress,
        start_method=start_method,
        handle_signals=handle_signals,
        log_level=log_level,
        log_sink=log_sink,
        gpu_inventory=None if gpu_inventory is None else tuple(gpu_inventory),
        stall_warning_s=stall_warning_s,
    )
    return execute(flow, options)
