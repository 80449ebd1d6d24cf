"""The one node runtime: one replica of one node, over any transport.

A :class:`Worker` rebuilds nothing and knows no transport: it gets its ports
(:mod:`vfadapters.runtime.ports`) from a :class:`WorkerTransport` and runs the
node — ``open()`` once, then the producer loop, the one-parent loop or the join
loop, retries then dead letters, ``close()``. The shared-memory executor
(``vfadapters.local``) and the broker (``vfadapters.broker``, ``vf worker``)
both run this class; only their ports differ. Its loops live in modules of their
own: :mod:`~vfadapters.runtime.producer_loop`,
:mod:`~vfadapters.runtime.one_parent_loop` and :mod:`~vfadapters.runtime.join_loop`,
over what they share (:mod:`~vfadapters.runtime.worker_base`: the node's calls,
retries, dead letters and the output buffers of each edge).

Exactly once (BATCH). Every output is written under an
:class:`~vfadapters.runtime.ports.OutputKey` naming the input positions it
carries the outputs of (:mod:`vfcore.runtime.delivery`): the outputs of one
input batch toward one edge are cut into chunks of consecutive input positions
(the chunk size is :func:`~vfcore.runtime.delivery.batch_limit`'s, recorded by
the input port so that a redelivered batch is cut the same way), a join's
outputs are named after their group, a producer's after its segment (a run of
items whose boundaries the transport stores before any of them is written).
A batch is settled only after all its outputs are written, together with its
:class:`~vfadapters.runtime.ports.Tally`. So a replica killed at any instant
leaves its batches unsettled; whoever takes them again writes the same keys
and the transport drops what it already holds.
"""

from __future__ import annotations

import logging
import os

from vfadapters.runtime.config import SLOT
from vfadapters.runtime.context import Context
from vfadapters.runtime.join_loop import JoinLoop
from vfadapters.runtime.one_parent_loop import OneParentLoop
from vfadapters.runtime.ports import LetterNotWritten
from vfadapters.runtime.producer_loop import ProducerLoops
from vfadapters.runtime.worker_base import (
    Aborted,
    OutEdge,
    ProducerFailed,
    ProducerNotResumable,
    ProducerSegment,
    ResumePlan,
    WorkerTransport,
    estimate,
    keep_large_allocations,
    set_parent_death_signal,
    set_process_name,
    short_repr,
)

__all__ = [
    "Aborted",
    "ProducerSegment",
    "ResumePlan",
    "Worker",
    "WorkerTransport",
    "estimate",
    "keep_large_allocations",
    "set_parent_death_signal",
    "set_process_name",
    "short_repr",
]


class Worker(ProducerLoops, OneParentLoop, JoinLoop):
    """One replica (see the module docstring)."""

    def main(self) -> int:
        """The replica's whole life; its exit status (0 done or stopped, 1 failed)."""
        cfg, t = self.cfg, self.t
        keep_large_allocations()
        try:
            t.attach(cfg)
        except Exception as exc:
            self.send(("failed", "connect", f"{type(exc).__name__}: {exc}", ""))
            return 1
        self.ctl = t.control.ctl
        self.base = t.control.base
        self.ctl[self.base + SLOT.PID] = os.getpid()
        self.ctl[self.base + SLOT.STATE] = SLOT.STARTING
        root = logging.getLogger()
        root.handlers[:] = [t.log_handler(f"[{self.name}]")]
        root.setLevel(cfg.log_level)
        self.logger = logging.getLogger(f"vf.{self.name}")
        try:
            node = t.build_node()
        except Exception as exc:
            self.fail("build", exc)
            return 1
        self.node = node
        try:
            self.inputs = t.inputs()
            self.edges = [OutEdge(plan, t.outlets(i)) for i, plan in enumerate(cfg.edges)]
        except Exception as exc:
            self.fail("connect", exc)
            return 1
        self.ctx = Context(
            cfg.node, cfg.replica, cfg.replicas, cfg.device, cfg.devices, self.logger
        )
        from vfcore.flow import takes_ctx

        try:
            if takes_ctx(node.open):
                node.open(ctx=self.ctx)
            else:
                node.open()
        except Exception as exc:
            self.fail("open", exc)
            return 1
        self.ctl[self.base + SLOT.STATE] = SLOT.RUNNING
        self.send(("opened",))
        try:
            if cfg.spec.kind == "producer":
                self.run_producer()
            elif len(self.inputs) > 1:
                self.run_join()
            else:
                self.run_single()
        except Aborted:
            if not self.close_node(report=True):
                return 1
            self.send_latency()
            self.send(("aborted",))
            return 0
        except ProducerFailed as exc:
            batches = callable(getattr(self.node, "next_batch", None))
            self.fail("next_batch" if batches else "next", exc.error)
            self.close_node()
            return 1
        except ProducerNotResumable as exc:
            self.fail("resume", exc)
            self.close_node()
            return 1
        except LetterNotWritten as exc:
            self.fail("dead-letter", exc)
            self.close_node()
            return 1
        except Exception as exc:  # a fault of the runtime itself or of the transport
            self.fail("run", exc)
            self.close_node()
            return 1
        if not self.close_node(report=True):
            return 1  # what close() should have flushed may be lost: the run fails
        try:
            t.finished()
        except Exception as exc:
            self.fail("finish", exc)
            return 1
        self.ctl[self.base + SLOT.STATE] = SLOT.DONE
        self.send_latency()
        self.send(("done",))
        return 0
