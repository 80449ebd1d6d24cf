"""The coordinator of a local run: lays it out, creates its buffers, runs it, reports.

It moves no messages itself and decides nothing of its own: the layout
(:func:`vfcore.runtime.local_layout`: replica bounds, pods and slots, routing,
devices) says what to build; this module creates every shared-memory ring and
semaphore and each replica's :class:`~vfadapters.local.config.WorkerConfig`
from it, then hands the run to its parts: :mod:`~vfadapters.local.supervision`
(processes, restarts, end of stream, stopping), :mod:`~vfadapters.local.progress`
(live table, watchdog, summary) and :mod:`~vfadapters.local.autoscaling`.
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing as mp
import os
import pickle
import secrets
import signal
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from vfadapters.local.autoscaling import Autoscaler
from vfadapters.local.config import CTL, SLOT, EdgeOut, WorkerConfig
from vfadapters.local.options import (
    MAX_BUFFER_MIB,
    GpuRefusedError,
    RunOptions,
    check_dead_letter_path,
    default_dead_letter_name,
)
from vfadapters.local.progress import Progress, build_summary
from vfadapters.local.ring import Ring, RingHandle
from vfadapters.local.shm import (
    Segment,
    run_prefix,
    run_semaphore_prefix,
    sweep_stale,
    unlink_prefix,
)
from vfadapters.local.state import LiveNode, Replica, RunState, Voice
from vfadapters.local.summary import RunSummary
from vfadapters.local.supervision import Supervisor, install_forkserver
from vfcore import REALTIME, Flow, FlowSpec, InvalidFlowError, InvalidInputError, validate
from vfcore.flow.validate import effective_join_policy
from vfcore.runtime.devices import GpuDevice
from vfcore.runtime.layout import LocalLayout, PodLayout, local_layout

__all__ = [
    "MAX_BUFFER_MIB",
    "GpuRefusedError",
    "RunOptions",
    "check_dead_letter_path",
    "default_dead_letter_name",
    "execute",
]


def _to_flow(flow: Flow | FlowSpec | str | os.PathLike[str]) -> tuple[Flow, str | None]:
    if isinstance(flow, str | os.PathLike):
        from vfadapters.loading import load_flow, split_target

        target = str(flow)
        loaded = load_flow(target)
        if isinstance(loaded, FlowSpec):
            raise InvalidInputError(
                "run-needs-code",
                f"{target} is a FlowSpec: it describes the flow but holds no node code to run",
                "pass the flow's .py file (flow.py or flow.py:factory) to vf run",
            )
        return loaded, loaded.name or split_target(target)[0].stem
    if isinstance(flow, FlowSpec):
        raise InvalidInputError(
            "run-needs-code",
            f"flow {flow.name!r} is a FlowSpec: it holds no node code to run",
            "pass the Flow object (or the path of its .py file)",
        )
    if not isinstance(flow, Flow):
        raise InvalidInputError(
            "run-needs-code",
            f"expected a vfcore.Flow or the path of a flow file, got {type(flow).__name__}",
            "pass Flow([...]) or 'path/to/flow.py'",
        )
    return flow, flow.name


def _node_blob(node: Any) -> bytes:
    clone = copy.copy(node)
    clone._parents = ()
    clone._children = []
    try:
        return pickle.dumps(clone, protocol=5)
    except Exception as exc:
        raise InvalidInputError(
            "node-not-picklable",
            f"node {node.name!r} ({type(node).__qualname__}) cannot be sent to its worker "
            f"process: {type(exc).__name__}: {exc}",
            "create models, files, locks and clients in open(), not in __init__; "
            "define node classes in a module or flow file, not interactively",
        ) from None


def _preload_files(nodes: Iterable[Any]) -> tuple[str, ...]:
    files: list[str] = []
    for node in nodes:
        module = type(node).__module__
        if module.startswith("_vf_flow_"):
            path = getattr(sys.modules.get(module), "__file__", None)
            if path and path not in files:
                files.append(path)
    return tuple(files)


class _Coordinator:
    def __init__(self, flow: Flow, name: str, opts: RunOptions) -> None:
        self.flow = flow
        self.opts = opts
        spec = flow.spec()
        if spec.name != name:
            spec = replace(spec, name=name)
        self.spec = spec
        self.realtime = spec.flow_type == REALTIME
        self.voice = Voice(opts.log_sink)
        self.gpu_doc: dict[str, Any] | None = None
        self.state: RunState | None = None
        self.supervisor: Supervisor | None = None
        self.progress: Progress | None = None
        self.autoscaler: Autoscaler | None = None
        self.rings: dict[tuple[str, str], list[Ring]] = {}
        self.segments: list[Segment] = []
        self.ctl: Any = None
        self.prefix = "vf-none-"
        self._cleaned = False

    # -- setup -------------------------------------------------------------------------------

    def prepare(self) -> None:
        spec, opts = self.spec, self.opts
        issues = validate(spec)
        errors = [i for i in issues if i.is_error]
        if errors:
            raise InvalidFlowError(issues)
        for issue in issues:
            self.voice.warn(f"{issue.rule}: {issue.message}")
        live = {n.name: n for n in self.flow.nodes}
        self.layout: LocalLayout = local_layout(
            spec, opts.layout_options(), inventory=self.gpu_inventory()
        )
        self.nodes = {n.name: LiveNode(spec.node(n.name), n) for n in self.layout.nodes}
        self.children = spec.children()
        self.token = secrets.token_hex(4)
        self.prefix = run_prefix(self.token)
        self.blobs = {name: _node_blob(live[name]) for name in self.nodes}
        self.preload = _preload_files(live.values())
        # dead letters are the user's data: appended to the named file, or to a new
        # file named after this run; never truncated, never removed
        self.dead_letter_path = check_dead_letter_path(
            opts.dead_letter_path or default_dead_letter_name(spec.name, self.token)
        )
        self.check_devices()

    def gpu_inventory(self) -> tuple[GpuDevice, ...]:
        """The GPUs this run may use (detected only when the flow has a GPU node)."""
        if not any(node.is_gpu for node in self.spec.nodes):
            return ()
        if self.opts.gpu_inventory is not None:
            return tuple(self.opts.gpu_inventory)
        from vfadapters.local.gpus import detect_gpus
        from vfcore.runtime.devices import visible_devices

        return visible_devices(detect_gpus(), os.environ.get("CUDA_VISIBLE_DEVICES"))

    def check_devices(self) -> None:
        assignment = self.layout.devices
        if assignment is None:
            return
        self.gpu_doc = assignment.to_dict()
        if assignment.refused:
            raise GpuRefusedError(
                "gpu-shortfall",
                f"--gpu-policy strict: {assignment.shortfall}",
                "drop --gpu-policy strict to share GPUs (locally only memory bounds sharing), "
                "or lower nb_tasks / gpu_count",
            )
        for text in assignment.warnings:
            self.voice.warn(text)

    def create(self) -> None:
        ctx = install_forkserver(self.opts.start_method)
        # the run's semaphores are named after it (sem.vf-<pid>-<token>-sem-…), so
        # that the next run removes them if this coordinator is killed with -9
        config = getattr(mp.current_process(), "_config", None)
        if not isinstance(config, dict) or "semprefix" not in config:
            self.create_rings(ctx)  # another Python: the semaphores keep their own names
        else:
            old_prefix = config["semprefix"]
            config["semprefix"] = run_semaphore_prefix(self.prefix)
            try:
                self.create_rings(ctx)
            finally:
                config["semprefix"] = old_prefix
        replicas = {
            pod.slot: Replica(
                node.name, pod.replica, pod.slot, pod.name, self.worker_config(node, pod)
            )
            for node in self.nodes.values()
            for pod in node.layout.pods
        }
        self.state = state = RunState(
            self.spec,
            self.opts,
            self.layout,
            self.voice,
            self.nodes,
            replicas,
            self.rings,
            self.children,
            self.ctl,
        )
        self.supervisor = Supervisor(state, ctx)
        self.progress = Progress(state)
        self.autoscaler = Autoscaler(state, self.supervisor.start_replica)

    def create_rings(self, ctx: Any) -> None:
        opts = self.opts
        size = (CTL.BASE + self.layout.slots * SLOT.FIELDS) * 8
        self.control = Segment.create(self.prefix + "ctl", size)
        self.segments.append(self.control)
        self.ctl = self.control.buf.cast("Q")
        capacity = int(opts.buffer_mib * 2**20)
        # (parent, child) → the child's input rings on that edge: one shared by all
        # replicas, or one per replica when the child is partitioned
        for node in self.nodes.values():
            spec = node.spec
            join = len(spec.parents) > 1
            node.doorbells = [ctx.Semaphore(0) for _ in range(node.layout.owners)]
            node.in_rings = []
            for p, parent in enumerate(spec.parents):
                per_owner: list[Ring] = []
                for r in range(node.layout.owners):
                    handle = RingHandle(
                        f"{self.prefix}r{node.layout.index}-{p}-{r}",
                        ctx.Lock(),
                        ctx.Semaphore(0),
                        node.doorbells[r],
                    )
                    ring, segment = Ring.create(
                        handle,
                        capacity=capacity,
                        # a join pins halves until their group leaves: room for the lead
                        max_messages=opts.buffer_messages * (4 if join else 1),
                        # REALTIME: the freshest few wait, older ones are evicted
                        keep=self.layout.edge(parent, spec.name).realtime_keep,
                    )
                    self.segments.append(segment)
                    per_owner.append(ring)
                self.rings[(parent, spec.name)] = per_owner
                node.in_rings.append(per_owner)

    def worker_config(self, node: LiveNode, pod: PodLayout) -> WorkerConfig:
        spec = node.spec
        outputs = []
        for edge in self.layout.outputs(spec.name):
            child = self.nodes[edge.child]
            rings = tuple(ring.handle for ring in self.rings[(spec.name, edge.child)])
            outputs.append(
                EdgeOut(edge.child, child.spec, edge.routing, rings, child.slots, edge.strategy)
            )
        policy = effective_join_policy(spec, self.spec.flow_type)
        if policy is not None and not self.realtime and spec.join_policy is None:
            # BATCH: pinned halves are bounded by the input rings, not by max_pending
            policy = replace(policy, max_pending=max(policy.max_pending, 1 << 30))
        env: dict[str, str] = {"VF_RUN": self.token, "VF_POD": pod.name}
        if pod.device is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in pod.devices)
        return WorkerConfig(
            run_id=self.token,
            control=self.control.name,
            node=spec.name,
            replica=pod.replica,
            pod=pod.name,
            replicas=node.layout.replicas,
            slot=pod.slot,
            spec=spec,
            flow_type=self.spec.flow_type,
            node_blob=self.blobs[spec.name],
            preload=self.preload,
            inputs=tuple(
                (parent, ring.handle)
                for parent, ring in zip(spec.parents, node.inputs_of(pod.replica), strict=True)
            ),
            outputs=tuple(outputs),
            doorbell=node.doorbells[pod.owner],
            join_policy=policy,
            retries=self.opts.retries,
            dead_letter_path=self.dead_letter_path,
            coordinator_pid=os.getpid(),
            env=env,
            device=pod.device,
            devices=pod.devices,
            linger_s=self.opts.linger_s,
            batch_max=self.opts.batch_max,
            log_level=self.opts.log_level,
        )

    # -- the whole run ---------------------------------------------------------------------

    def run(self) -> RunSummary:
        self.prepare()
        sweep_stale()
        handlers: dict[int, Any] = {}
        main = threading.current_thread() is threading.main_thread()
        status = "failed"
        try:
            self.create()
            assert self.state and self.supervisor and self.progress and self.autoscaler
            supervisor, progress = self.supervisor, self.progress
            if self.opts.handle_signals and main:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    handlers[sig] = signal.signal(sig, supervisor.on_signal)
            progress.open()
            self.state.t0 = time.monotonic()
            supervisor.start_all()
            status = supervisor.loop(
                progress.tick, self.autoscaler.tick if self.opts.autoscale else None
            )
        except BaseException:
            if self.ctl is not None:
                self.ctl[CTL.ABORT] = 1
            if self.supervisor is not None:
                self.supervisor.kill_all()
            raise
        finally:
            if self.progress is not None:
                self.progress.close()
            for signum, old in handlers.items():
                signal.signal(signum, old)
        duration = time.monotonic() - self.state.t0
        progress.watch(time.monotonic(), final=True)
        summary = build_summary(
            self.state,
            progress,
            status=status,
            duration_s=duration,
            error=supervisor.error,
            stop=supervisor.stop_document(status),
            scaling=tuple(self.autoscaler.events),
            gpu=self.gpu_doc,
            dead_letter_path=self.dead_letter_path,
        )
        self.cleanup()
        return summary

    def cleanup(self) -> None:
        if self._cleaned:
            return
        self._cleaned = True
        for rings in self.rings.values():
            for ring in rings:
                with contextlib.suppress(Exception):
                    ring.close()
        if self.ctl is not None:
            self.ctl.release()
        for segment in self.segments:
            segment.close()
            segment.unlink()
        unlink_prefix(self.prefix)


def execute(flow: Flow | FlowSpec | str | os.PathLike[str], options: RunOptions) -> RunSummary:
    """Run a flow locally (see :func:`vfadapters.local.run`)."""
    options.check()
    live, name = _to_flow(flow)
    coordinator = _Coordinator(live, name or "flow", options)
    try:
        return coordinator.run()
    finally:
        coordinator.cleanup()
