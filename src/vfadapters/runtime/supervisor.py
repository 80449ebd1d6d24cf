"""Supervision of a run, whatever its transport: start, watch, restart and stop replicas.

:class:`Supervisor` starts one process per replica (consumers first) from the
fork server, each running :class:`vfadapters.runtime.worker.Worker` over the
run's transport; it restarts a replica that dies without its node failing (one
rule for every node and both transports: up to :data:`MAX_RESTARTS` times;
what the replica held is made available again by the transport first, and a
producer resumes where its outputs stop, or fails the run naming itself when
its node cannot), marks a node complete once its replicas have all finished
(the transport then ends its children's input: the local rings close; broker
workers see the ``done`` keys themselves), and stops on SIGINT/SIGTERM with a
bounded drain. Its :meth:`loop` runs the run and calls the progress and
autoscaling ticks between events. The stop vocabulary (``summary.stop.how``):
``drained`` (a first signal: producers stopped, everything produced went
through), ``immediate`` (a second signal), ``drain-timeout``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing.connection as mpc
import signal
import time
from collections.abc import Callable
from typing import Any, Protocol

from vfadapters.runtime.config import SLOT, slot_base
from vfadapters.runtime.forkserver import install_forkserver, signals_ignored
from vfadapters.runtime.state import LiveNode, Replica, RunState

__all__ = [
    "CLOSE_GRACE_S",
    "MAX_RESTARTS",
    "RunTransport",
    "Supervisor",
    "install_forkserver",
    "signals_ignored",
]

#: How many times one replica is restarted after dying before the run fails.
MAX_RESTARTS = 5


#: the same signal delivered again within this long is the same stop request, not a
#: second one: GNU ``timeout`` sends its signal to ``vf`` and then to its whole process
#: group, and on a loaded machine our handler may run between the two deliveries. A
#: person pressing Ctrl-C twice takes longer than this.
SAME_REQUEST_S = 0.1


class RunTransport(Protocol):
    """What the supervisor asks of a run's transport (the coordinator's side)."""

    #: the function a replica's process runs: ``target(rep.cfg, pipe)``
    target: Callable[..., None]

    def recover(self, rep: Replica) -> int:
        """A replica died: undo what it left half done, make what it held available
        to the others again; how many messages were handed back."""

    def node_complete(self, node: LiveNode) -> None:
        """Every replica of ``node`` finished: its children's input from it has ended."""

    def request_stop(self) -> None:
        """Producers stop; everything produced drains through."""

    def abort(self) -> None:
        """Every replica stops now (what it holds goes back)."""

    def retire(self, rep: Replica) -> None:
        """Autoscaling retires ``rep``: it finishes what it holds and exits."""


#: After a forced stop, how long workers get to call close() before SIGKILL.
CLOSE_GRACE_S = 2.0

Tick = Callable[[float], None]


class Supervisor:
    """The replica processes of one run, and how the run ends (see the module docstring)."""

    def __init__(self, state: RunState, ctx: Any, transport: RunTransport) -> None:
        self.state = state
        self.mp = ctx
        self.transport = transport
        self.failed = False
        self.error: str | None = None
        self.aborting = False
        self.stop_requests = 0
        self.stop_signal: str | None = None  # the first signal that asked to stop
        self.last_signal: tuple[int, float] = (0, -math.inf)  # (signum, when) of the last
        self.stop_info: dict[str, Any] | None = None

    def fail(self, error: str, detail: str = "") -> None:
        """The run fails (the first failure is the one reported)."""
        self.failed = True
        self.error = error
        self.state.voice.say(logging.ERROR, f"error: {error}{detail}")

    # -- processes ------------------------------------------------------------------------

    def start_replica(self, rep: Replica) -> None:
        reader, writer = self.mp.Pipe(duplex=False)
        proc = self.mp.Process(
            target=self.transport.target, args=(rep.cfg, writer), name=f"vf:{rep.pod}"
        )
        try:
            if self.state.opts.start_method == "spawn":
                # a spawned worker is exec'd from this process: it inherits SIG_IGN,
                # so a signal to the group cannot kill it before worker_main ignores it
                with signals_ignored(signal.SIGINT, signal.SIGTERM):
                    proc.start()
            else:
                proc.start()  # forked by the fork server, which ignores both already
        except (OSError, EOFError) as exc:  # e.g. the fork server was killed
            writer.close()
            reader.close()
            rep.state = "failed"
            if not self.failed:
                self.fail(
                    f"{rep.pod}: could not start its worker process: {type(exc).__name__}: {exc}"
                )
            return
        writer.close()
        rep.proc = proc
        rep.conn = reader
        rep.state = "starting"
        rep.told = False
        rep.pids.append(proc.pid)
        self.state.ctl[slot_base(rep.slot) + SLOT.ACTIVE] = 1

    def start_all(self) -> None:
        """Start each node's ``min_replicas``, consumers first (their rings are read at once)."""
        state = self.state
        for node in state.nodes.values():
            node.active = node.layout.min_replicas
            node.peak = node.layout.min_replicas
        for node in reversed(list(state.nodes.values())):
            for r in range(node.layout.min_replicas):
                self.start_replica(state.replicas[node.slots[r]])

    def live_replicas(self) -> list[Replica]:
        return [rep for rep in self.state.replicas.values() if rep.proc is not None]

    def drain_events(self, rep: Replica) -> None:
        conn = rep.conn
        if conn is None:
            return
        try:
            while conn.poll():
                self.on_event(rep, conn.recv())
        except (EOFError, OSError):
            pass

    def on_event(self, rep: Replica, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind == "opened":
            rep.state = "running"
        elif kind == "done":
            rep.state = "done"
        elif kind == "aborted":
            rep.state = "aborted"
        elif kind == "log":
            self.state.voice.say(event[1], event[2])
        elif kind == "latency":
            node = self.state.nodes[rep.node]
            for bucket, n in event[1].items():
                node.latency[bucket] = node.latency.get(bucket, 0) + n
            node.latency_max_ns = max(node.latency_max_ns, event[2])
        elif kind == "failed":
            _, phase, message, tb = event
            rep.state = "failed"
            if not self.failed:
                what = {
                    "open": "open() raised",
                    "next": "next() raised",
                    "next_batch": "next_batch() raised",
                    "build": "could not be rebuilt in its worker:",
                    "run": "failed:",
                    "close": "close() raised",
                    "resume": "could not resume:",
                    "dead-letter": "could not store a dead letter:",
                    "connect": "could not connect:",
                    "finish": "could not finish:",
                }.get(phase, f"failed in {phase}():")
                error = f"{rep.pod}: {what} {message}"
                if phase == "build" and "Can't get attribute" in message:
                    error += (
                        " (node classes must be importable by the worker: define them in a "
                        "module or a flow file, not in an interactive session)"
                    )
                # a letter that could not be stored is no bug of the node: no traceback
                self.fail(error, "" if phase == "dead-letter" else f"\n{tb.rstrip()}")

    def on_exit(self, rep: Replica) -> None:
        state = self.state
        self.drain_events(rep)
        proc = rep.proc
        proc.join(0.5)
        code = proc.exitcode
        if rep.conn is not None:
            rep.conn.close()
        rep.proc = None
        rep.conn = None
        if rep.state in ("done", "aborted", "failed"):
            return
        if self.aborting or self.failed:
            rep.state = "aborted"
            return
        pod = rep.pod
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        if rep.state == "retiring":
            rep.state = "idle"  # retired by autoscaling
            return
        if rep.restarts >= MAX_RESTARTS:
            self.fail(f"{pod} died {rep.restarts + 1} times (last: {how})")
            rep.state = "failed"
            return
        rep.restarts += 1
        what = (
            "it resumes after the last item its children hold"
            if state.nodes[rep.node].spec.is_producer
            else "what it held is handed out again"
        )
        state.voice.warn(
            f"{pod} died ({how}); restarting it ({rep.restarts}/{MAX_RESTARTS}): {what}"
        )
        returned = self.transport.recover(rep)
        if returned:
            state.voice.say(
                logging.WARNING,
                f"{pod}: {returned} in-flight message(s) returned for redelivery",
            )
        self.start_replica(rep)

    # -- end of stream -----------------------------------------------------------------------

    def check_completion(self) -> bool:
        """Mark nodes whose replicas all finished complete (their children's input ends)."""
        state = self.state
        changed = True
        while changed:
            changed = False
            for node in state.nodes.values():
                if node.complete:
                    continue
                reps = [state.replicas[s] for s in node.slots]
                if any(rep.proc is not None for rep in reps):
                    continue
                if not any(rep.state == "done" for rep in reps):
                    continue
                node.complete = True
                changed = True
                self.transport.node_complete(node)
        return all(node.complete for node in state.nodes.values())

    # -- stopping ----------------------------------------------------------------------------

    def on_signal(self, signum: int, frame: Any) -> None:
        now = time.monotonic()
        last_signum, last_at = self.last_signal
        self.last_signal = (signum, now)
        if signum == last_signum and now - last_at < SAME_REQUEST_S:
            return  # one request delivered twice (timeout, kill -- -PGID): not "stop at once"
        self.stop_requests += 1
        if self.stop_signal is None:
            self.stop_signal = signal.Signals(signum).name
        if self.stop_requests >= 2:
            self.transport.abort()

    def abort(self) -> None:
        """Ask every worker to stop now."""
        self.transport.abort()

    def kill_all(self) -> None:
        for rep in self.live_replicas():
            with contextlib.suppress(OSError, ValueError):
                rep.proc.kill()
        for rep in self.live_replicas():
            rep.proc.join(2.0)
            self.drain_events(rep)
            if rep.conn is not None:
                rep.conn.close()
            if rep.state not in ("done", "failed"):
                rep.state = "aborted"
            rep.proc = None
            rep.conn = None

    # -- the loop ----------------------------------------------------------------------------

    def loop(self, progress: Tick, autoscale: Tick | None) -> str:
        """Run until the flow completes, fails or is stopped; its status.

        ``progress`` is called every 0.5 s; ``autoscale`` (when autoscaling is on)
        every ``scale_interval_s`` until a stop is requested.
        """
        state = self.state
        opts = state.opts
        say = state.voice.say
        self.aborting = False
        drain_deadline = math.inf
        abort_deadline = math.inf
        stop_at: float | None = None
        next_progress = 0.0
        next_scale = time.monotonic() + opts.scale_interval_s
        while True:
            waitables: list[Any] = []
            by_key: dict[Any, Replica] = {}
            for rep in self.live_replicas():
                waitables.append(rep.conn)
                waitables.append(rep.proc.sentinel)
                by_key[rep.conn] = rep
                by_key[rep.proc.sentinel] = rep
            ready = mpc.wait(waitables, timeout=0.1) if waitables else []
            exited: list[Replica] = []
            for key in ready:
                rep = by_key[key]
                if key is rep.conn:
                    self.drain_events(rep)
                elif rep not in exited:
                    exited.append(rep)
            for rep in exited:
                if rep.proc is not None:
                    self.on_exit(rep)
            for rep in self.live_replicas():
                if rep.state == "retiring" and not rep.told:
                    rep.told = True
                    self.transport.retire(rep)
            now = time.monotonic()
            if self.failed:
                if not self.aborting:
                    self.aborting = True
                    self.transport.abort()
                    abort_deadline = now + CLOSE_GRACE_S
                if not self.live_replicas() or now > abort_deadline:
                    self.kill_all()
                    return "failed"
            elif self.check_completion():
                return "stopped" if self.stop_requests else "completed"
            if self.stop_requests and stop_at is None:
                stop_at = now
                self.transport.request_stop()
                drain_deadline = now + opts.drain_timeout_s
                say(
                    logging.WARNING,
                    f"stopping ({self.stop_signal or 'requested'}): producers stopped, draining "
                    f"in-flight work for up to {opts.drain_timeout_s:g} s (Ctrl-C again to stop "
                    "at once)",
                )
            if self.stop_requests >= 2:
                self.stop_info = {
                    "how": "immediate",
                    "after_s": round(now - (stop_at or now), 3),
                }
                self.kill_all()
                return "stopped"
            if stop_at is not None and not self.aborting and now > drain_deadline:
                self.aborting = True
                self.transport.abort()
                abort_deadline = now + CLOSE_GRACE_S
                state.voice.warn(
                    f"drain did not finish within {opts.drain_timeout_s:g} s: stopping every "
                    "node now (what is still queued is not delivered)"
                )
            if (
                self.aborting
                and not self.failed
                and (not self.live_replicas() or now > abort_deadline)
            ):
                self.kill_all()
                self.stop_info = {
                    "how": "drain-timeout",
                    "after_s": round(now - (stop_at or now), 3),
                }
                return "stopped"
            if now >= next_progress:
                progress(now)
                next_progress = now + 0.5
            if autoscale is not None and now >= next_scale and not self.stop_requests:
                autoscale(now)
                next_scale = now + opts.scale_interval_s

    def stop_document(self, status: str) -> dict[str, Any] | None:
        """How the run stopped (``summary.stop``), naming the signal that asked."""
        stop = self.stop_info
        if status == "stopped" and stop is None:
            stop = {"how": "drained"}
        if stop is not None and self.stop_signal is not None:
            stop = {**stop, "signal": self.stop_signal}
        return stop
