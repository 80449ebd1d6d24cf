"""Autoscaling of a run: backlogs in, :func:`vfcore.decide_replicas` decides, replicas follow.

Only the nodes the layout made ``scalable`` are looked at, within the bounds it
set (``min_replicas``..``max_replicas``): which nodes may scale is
:func:`vfcore.runtime.local_layout`'s decision, how many replicas they need is
:func:`vfcore.decide_replicas`'; this module observes and carries both out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from vfadapters.runtime.config import SLOT, slot_base
from vfadapters.runtime.state import LiveNode, Replica, RunState
from vfadapters.runtime.summary import ScalingEvent

__all__ = ["Autoscaler"]


class Autoscaler:
    """Feeds each scalable node's backlog to :func:`vfcore.decide_replicas` and resizes it."""

    def __init__(self, state: RunState, start_replica: Callable[[Replica], None]) -> None:
        self.state = state
        self.start_replica = start_replica
        self.events: list[ScalingEvent] = []

    def tick(self, now: float) -> None:
        try:
            from vfcore.scaling import Backlog, Unobserved, decide_replicas
        except ImportError:
            return
        for node in self.state.nodes.values():
            layout = node.layout
            if not layout.scalable or node.complete:
                continue
            observations: dict[str, Any] = {}
            for p, parent in enumerate(node.spec.parents):
                views = node.in_edges[p]
                # a buffer whose backlog could not be read (the broker's counters
                # did not answer) is unknown, never zero: the decision is unknown
                why = next((v.unobserved for v in views if v.unobserved), None)
                if why:
                    observations[parent] = Unobserved(why)
                    continue
                pending = sum(v.pending() for v in views)
                in_flight = sum(v.unsettled() for v in views) - pending
                observations[parent] = Backlog(pending=pending, ack_pending=max(0, in_flight))
            decision = decide_replicas(
                observations,
                target=self.state.opts.scale_target,
                min_replicas=layout.min_replicas,
                max_replicas=layout.max_replicas,
            )
            want = getattr(decision, "replicas", None)
            if want is None or want == node.active:
                continue
            self.resize(node, int(want), now, decision)

    def resize(self, node: LiveNode, want: int, now: float, decision: Any) -> None:
        """Start replicas ``active..want-1``, or retire ``want..active-1``.

        Competing replicas share one input, so a new replica takes work at once
        and a retiring one just stops claiming: it settles what it holds and
        exits (the supervisor tells it, through the transport).
        """
        state = self.state
        before = node.active
        if want > before:
            for r in range(before, want):
                rep = state.replicas[node.slots[r]]
                if rep.proc is not None:  # still finishing after an earlier retirement
                    want = r
                    break
                rep.state = "idle"
                self.start_replica(rep)
        else:
            for r in range(want, before):
                rep = state.replicas[node.slots[r]]
                state.ctl[slot_base(rep.slot) + SLOT.ACTIVE] = 0
                if rep.proc is not None:
                    rep.state = "retiring"
            for wake in node.wakers:
                wake()  # a waiting replica rechecks sooner
        if want == before:
            return
        node.active = want
        node.peak = max(node.peak, want)
        diagnosis = getattr(decision, "diagnosis", "")
        reason = f"{diagnosis}: backlog {node.backlog()}" if diagnosis else "backlog"
        self.events.append(ScalingEvent(now - state.t0, node.name, before, want, reason))
        state.voice.say(
            logging.INFO, f"autoscale: {node.name} {before} → {want} replicas ({reason})"
        )
