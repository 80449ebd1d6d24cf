"""The local executor: run a flow on this machine, one OS process per replica.

    from vfadapters.local import RunOptions, run
    summary = run("examples/traffic/flow.py")        # or run(flow_object, RunOptions(...))
    summary.status, summary.nodes["tracker"].processed

Messages travel through bounded shared-memory rings (batched, large arrays
out of band); BATCH flows lose nothing and duplicate nothing in a normal run,
REALTIME flows never block their producers and count every eviction.
``docs/local.md`` states the guarantees.
"""

from __future__ import annotations

import os

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


def run(flow: Flow | str | os.PathLike[str], options: RunOptions | None = None) -> RunSummary:
    """Run ``flow`` (a :class:`vfcore.Flow`, or ``path/flow.py[:factory]``) to its end.

    ``options`` (:class:`RunOptions`; ``None``: every default) say how, e.g.
    ``run(flow, RunOptions(retries=3, autoscale=True))``. Returns a
    :class:`RunSummary` whose ``status`` is ``completed``, ``stopped``
    (SIGINT/SIGTERM: producers stop, in-flight work drains for up to
    ``drain_timeout_s``, a second signal stops at once) or ``failed``
    (``summary.error`` says why). Raises :class:`vfcore.InvalidFlowError` for an
    invalid flow and :class:`vfcore.InvalidInputError` for bad options.

    The options (``vf run``'s flags set the same fields):

    - ``retries``: extra attempts for a message whose processing raises, before it
      is appended to the dead-letter file: ``dead_letter_path`` when given (an
      existing file is appended to, never truncated), else a new file per run,
      ``<flow>.<run id>.dead-letters.jsonl`` in the current folder, created only
      when a first letter is written; ``summary.dead_letter_path`` says which.
    - ``stall_warning_s``: warn (and list in ``summary.stalls``) about a node
      that makes no progress for that long (0: never).
    - ``gpu_policy='strict'`` refuses to start when the host's GPUs do not cover
      the flow (:class:`GpuRefusedError`).
    - ``autoscale``: competing processors grow from ``nb_tasks`` up to
      ``max_replicas`` and back with their backlog (``scale_target`` messages per
      replica, checked every ``scale_interval_s``).
    - ``buffer_mib`` and ``buffer_messages`` bound each input buffer.
    - ``realtime_keep`` (REALTIME flows): how many of the freshest messages each
      input buffer keeps waiting; older ones are evicted and counted (None: 1 per
      parent of the receiving node, see :func:`vfcore.runtime.layout.realtime_keep_of`).
    - ``progress``: the live table on stderr (None: when stderr is a terminal);
      ``log_sink(level, text)`` receives the run's log lines instead of stderr.
    """
    return execute(flow, RunOptions() if options is None else options)
