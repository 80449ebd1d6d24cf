"""Progress of a run: the live table, the no-progress watchdog and the summary.

:class:`Progress` reads the control fields and the edges' views (it never moves
a message), whatever the transport: every half second it updates the live
table (when shown) and the watchdog; at the end :func:`build_summary` turns
the counters into the :class:`~vfadapters.runtime.summary.RunSummary`, with the
run's books (:func:`vfcore.runtime.delivery.check_books`).
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

from vfadapters.runtime.config import SLOT
from vfadapters.runtime.latency import merge, summarise
from vfadapters.runtime.state import EdgeCounts, LiveNode, RunState
from vfadapters.runtime.summary import EdgeSummary, NodeSummary, RunSummary, ScalingEvent, Stall

__all__ = ["Progress", "Watch", "build_summary"]


@dataclass(slots=True)
class Watch:
    """What the no-progress watchdog remembers of one node."""

    count: int  # processed + received when it last progressed
    nones: int  # producers: next() calls that had returned None by then
    since: float  # monotonic time of its last progress (or of nothing to do)
    stall: dict[str, Any] | None = None  # the episode under way, once warned


class Progress:
    """The live table and the no-progress watchdog of one run."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.watches: dict[str, Watch] = {}
        self.stalls: list[dict[str, Any]] = []
        self._live: Any = None
        self._last_rates: dict[str, tuple[float, int]] = {}

    def tick(self, now: float) -> None:
        """What the run loop calls every half second: the watchdog, then the table."""
        self.watch(now)
        if self._live is not None:
            self._live.update(self.table(now))

    # -- counters ----------------------------------------------------------------------------

    def node_summary(self, node: LiveNode) -> NodeSummary:
        state = self.state
        f = state.field_sum
        counts = [view.counts() for view in node.all_inputs()]
        evicted = sum(c.evicted for c in counts)
        redelivered = sum(c.redelivered for c in counts)
        restarts = sum(state.replicas[s].restarts for s in node.slots)
        devices = {
            pod.name: ",".join(str(i) for i in pod.devices) or "cpu"
            for pod in node.layout.pods
            if node.spec.is_gpu
        }
        return NodeSummary(
            name=node.name,
            kind=node.spec.kind,
            replicas=node.active,
            processed=f(node, SLOT.PROCESSED),
            received=f(node, SLOT.RECEIVED),
            errors=f(node, SLOT.ERRORS),
            retries=f(node, SLOT.RETRIES),
            dead_letters=f(node, SLOT.DEAD_LETTERS),
            evicted=int(evicted),
            redelivered=int(redelivered),
            restarts=restarts,
            join_dropped=f(node, SLOT.JOIN_DROPPED) + f(node, SLOT.DUPLICATES),
            filtered=f(node, SLOT.FILTERED),
            returned_none=f(node, SLOT.NONES),
            backlog=node.backlog(),
            max_replicas=node.peak,
            devices=devices,
            latency=summarise(node.latency, node.latency_max_ns),
        )

    def edge_summaries(self) -> tuple[EdgeSummary, ...]:
        out = []
        for node in self.state.nodes.values():
            for p, parent in enumerate(node.spec.parents):
                views = node.in_edges[p]
                c = edge_counts(views)
                out.append(
                    EdgeSummary(
                        parent,
                        node.name,
                        c.written,
                        c.settled - c.evicted,
                        c.evicted,
                        c.redelivered,
                        c.waits,
                        views[0].keep or None,
                    )
                )
        return tuple(out)

    # -- the watchdog ------------------------------------------------------------------------

    def watch(self, now: float, *, final: bool = False) -> None:
        """The no-progress watchdog: warn once per episode, note when it ends.

        A node *should* progress when it is a running producer, or when messages
        wait for it (a join: messages not yet claimed; other nodes: messages not
        yet settled, so a stuck ``process()`` holding its batch counts). Progress
        is its ``processed + received`` growing. Example (threshold 10 s): a
        producer whose ``next()`` returns None from the start is warned about at
        10 s with how many Nones it returned, and is listed in the summary.
        ``final``: the run has ended; settle the episodes under way, start none.
        """
        state = self.state
        limit = state.opts.stall_warning_s
        if not limit:
            return
        for node in state.nodes.values():
            name = node.name
            count = state.field_sum(node, SLOT.PROCESSED) + state.field_sum(node, SLOT.RECEIVED)
            nones = state.field_sum(node, SLOT.NONES)
            w = self.watches.get(name)
            if w is None:
                w = self.watches[name] = Watch(count, nones, now)
            running = any(state.replicas[s].state == "running" for s in node.slots)
            if node.spec.is_producer:
                waiting = 1
            elif len(node.spec.parents) > 1:
                waiting = sum(view.pending() for view in node.all_inputs())
            else:
                waiting = node.backlog()
            if count != w.count or node.complete or not running or not waiting:
                if w.stall is not None:
                    w.stall["duration_s"] = now - w.since
                    if count != w.count:
                        w.stall["resumed"] = True
                        state.voice.say(
                            logging.INFO,
                            f"{name}: progressing again after {now - w.since:.1f} s without",
                        )
                self.watches[name] = Watch(count, nones, now)
                continue
            idle = now - w.since
            if w.stall is not None:
                w.stall["duration_s"] = idle
                continue
            if idle < limit or final:
                continue
            if node.spec.is_producer and nones > w.nones:
                detail = (
                    f"next() returned None {nones - w.nones:,} times and produced nothing "
                    "(None means 'nothing now'; raise StopIteration to end the stream)"
                )
            elif node.spec.is_producer:
                detail = "next() has not returned an item (is it blocked?)"
            else:
                verb = "consume" if node.spec.kind == "consumer" else "process"
                detail = f"{waiting:,} message(s) wait and {verb}() handled none (is it stuck?)"
            w.stall = {
                "node": name,
                "at_s": w.since - state.t0,
                "duration_s": idle,
                "resumed": False,
                "detail": detail,
            }
            self.stalls.append(w.stall)
            state.voice.warn(f"no progress: {name} for {idle:.1f} s: {detail}")

    # -- the live table ----------------------------------------------------------------------

    def table(self, now: float) -> Any:
        from rich.table import Table

        state = self.state
        elapsed = now - state.t0
        table = Table(
            title=f"vf run {state.spec.name} ({state.spec.flow_type}) — {elapsed:.1f} s",
            title_justify="left",
        )
        columns = (
            "node",
            "replicas",
            "processed",
            "rate/s",
            "backlog",
            "evicted",
            "errors",
            "note",
        )
        for col in columns:
            table.add_column(col, justify="right" if col not in ("node", "note") else "left")
        for node in state.nodes.values():
            s = self.node_summary(node)
            last_t, last_n = self._last_rates.get(s.name, (state.t0, 0))
            rate = (s.processed - last_n) / max(now - last_t, 1e-6)
            self._last_rates[s.name] = (now, s.processed)
            errors = str(s.errors) + (f" ({s.dead_letters} dl)" if s.dead_letters else "")
            w = self.watches.get(s.name)
            stalled = w is not None and w.stall is not None and not node.complete
            note = f"stalled {now - w.since:.0f} s" if stalled and w is not None else ""
            table.add_row(
                s.name,
                str(s.replicas),
                str(s.processed),
                f"{rate:,.0f}",
                str(s.backlog),
                str(s.evicted),
                errors,
                note,
            )
        return table

    def open(self) -> None:
        """Show the live table when asked (``progress``), or when stderr is a terminal."""
        show = self.state.opts.progress
        if show is None:
            show = sys.stderr.isatty()
        if not show:
            return
        from rich.console import Console
        from rich.live import Live

        console = Console(stderr=True)
        self.state.voice.console = console
        self._live = Live(
            self.table(time.monotonic()),
            console=console,
            refresh_per_second=4,
            transient=False,
        )
        self._live.start()

    def close(self) -> None:
        if self._live is not None:
            try:
                self._live.update(self.table(time.monotonic()))
                self._live.stop()
            except Exception:
                pass
            self._live = None


def edge_counts(views: list[Any]) -> EdgeCounts:
    """The counts of an edge: the sum over its buffers (one per owner)."""
    counts = [v.counts() for v in views]
    return EdgeCounts(
        written=sum(c.written for c in counts),
        settled=sum(c.settled for c in counts),
        evicted=sum(c.evicted for c in counts),
        redelivered=sum(c.redelivered for c in counts),
        waits=sum(c.waits for c in counts),
    )


def build_summary(
    state: RunState,
    progress: Progress,
    *,
    status: str,
    duration_s: float,
    error: str | None,
    stop: dict[str, Any] | None,
    scaling: tuple[ScalingEvent, ...],
    gpu: dict[str, Any] | None,
    dead_letter_path: str,
    books: Any = None,
    letters: dict[str, int] | None = None,
) -> RunSummary:
    """The run's :class:`RunSummary` from its counters and what the other parts report.

    ``letters``: each node's dead letters as counted in the letters themselves
    (distinct ids), when the transport can read them back; ``books``: the run's
    :class:`vfcore.runtime.delivery.Books`.
    """
    from dataclasses import replace

    nodes = {name: progress.node_summary(node) for name, node in state.nodes.items()}
    if letters is not None:
        nodes = {name: replace(n, dead_letters=letters.get(name, 0)) for name, n in nodes.items()}
    dead = sum(n.dead_letters for n in nodes.values())
    consumers = [node for node in state.nodes.values() if node.latency]
    latency = summarise(
        merge(node.latency for node in consumers),
        max((node.latency_max_ns for node in consumers), default=0),
    )
    return RunSummary(
        flow=state.spec.name,
        flow_type=state.spec.flow_type,
        status=status,  # type: ignore[arg-type]
        duration_s=duration_s,
        nodes=nodes,
        edges=progress.edge_summaries(),
        dead_letters=dead,
        dead_letter_path=dead_letter_path if dead else None,
        error=error,
        warnings=tuple(state.voice.warnings),
        gpu=gpu,
        scaling=scaling,
        stop=stop,
        pids=tuple(pid for rep in state.replicas.values() for pid in rep.pids),
        stalls=tuple(Stall(**stall) for stall in progress.stalls),
        stall_warning_s=state.opts.stall_warning_s or None,
        latency=latency,
        books=books,
    )
