"""The coordinator of a local run: sets up rings, starts and watches workers, ends the run.

It moves no messages itself. It creates every shared-memory ring and
semaphore, starts one process per replica, restarts a replica that dies,
closes a node's output rings once all its replicas finished (that is how end of
stream travels), stops on SIGINT/SIGTERM with a bounded drain, autoscales
competing replicas, draws the live table, and builds the summary.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pickle
import re
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from vfadapters.local.config import CTL, SLOT, EdgeOut, WorkerConfig, slot_base
from vfadapters.local.ring import MC, ME, MW, RD, WAITS, Ring, RingHandle
from vfadapters.local.shm import (
    Segment,
    run_prefix,
    run_semaphore_prefix,
    sweep_stale,
    unlink_prefix,
)
from vfadapters.local.summary import EdgeSummary, NodeSummary, RunSummary, ScalingEvent, Stall
from vfcore import (
    REALTIME,
    Flow,
    FlowSpec,
    InvalidFlowError,
    InvalidInputError,
    NodeSpec,
    effective_replicas,
    validate,
)
from vfcore.validate import effective_join_policy

__all__ = [
    "MAX_BUFFER_MIB",
    "GpuRefusedError",
    "RunOptions",
    "check_dead_letter_path",
    "default_dead_letter_name",
    "execute",
]

log = logging.getLogger("vf.run")

#: How many times one replica is restarted after dying before the run fails.
MAX_RESTARTS = 3
#: After a forced stop, how long workers get to call close() before SIGKILL.
CLOSE_GRACE_S = 2.0
#: The largest input buffer (``buffer_mib``): a record's size is a 32-bit field.
MAX_BUFFER_MIB = 2048
#: The most messages one input buffer may be asked to hold (``buffer_messages``).
MAX_BUFFER_MESSAGES = 1 << 24


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
    folder that does not exist (``dead-letters-folder-missing``), a file or
    folder this user cannot write (``dead-letters-not-writable``).
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
    progress: bool | None = None  # None: a live table when stderr is a terminal
    start_method: str = "forkserver"
    handle_signals: bool = True
    log_level: int = logging.INFO
    linger_s: float = 0.002
    batch_max: int = 1024
    log_sink: Callable[[int, str], None] | None = None
    gpu_inventory: tuple[Any, ...] | None = None  # tests: a fake host inventory
    stall_warning_s: float = 10.0  # warn about a node without progress this long; 0: never

    def check(self) -> None:
        def bad(name: str, value: Any, hint: str) -> InvalidInputError:
            return InvalidInputError("invalid-run-option", f"{name}={value!r} is invalid", hint)

        if not (isinstance(self.drain_timeout_s, int | float) and self.drain_timeout_s >= 0):
            raise bad("drain_timeout_s", self.drain_timeout_s, "give a number of seconds >= 0")
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


@dataclass(slots=True)
class _Replica:
    node: str
    index: int
    slot: int
    cfg: WorkerConfig
    proc: Any = None
    conn: Any = None
    state: str = "idle"  # idle starting running done failed aborted retiring
    restarts: int = 0
    pids: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _Node:
    spec: NodeSpec
    index: int
    min_replicas: int
    max_replicas: int
    slots: list[int]
    scalable: bool
    active: int = 0
    complete: bool = False
    peak: int = 0
    partitioned: bool = False  # replicas own keys: one input ring per replica
    in_rings: list[list[Ring]] = field(default_factory=list)  # [parent][owner]
    doorbells: list[Any] = field(default_factory=list)  # [owner]


@dataclass(slots=True)
class _Watch:
    """What the no-progress watchdog remembers of one node."""

    count: int  # processed + received when it last progressed
    nones: int  # producers: next() calls that had returned None by then
    since: float  # monotonic time of its last progress (or of nothing to do)
    stall: dict[str, Any] | None = None  # the episode under way, once warned


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


def _install_forkserver(method: str) -> Any:
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["__main__", "numpy", "vfcore", "vfadapters.local.worker"])
        from multiprocessing import forkserver

        # started with SIGINT and SIGTERM ignored (an ignored signal stays ignored
        # across exec and fork), so that neither the fork server nor any worker it
        # forks dies of a signal sent to the whole process group (Ctrl-C, `timeout`,
        # systemd, Kubernetes, CI cancellation): the coordinator alone decides how
        # to stop. (The fork server dying would take every worker with it: their
        # parent-death signal.)
        with _signals_ignored(signal.SIGINT, signal.SIGTERM):
            forkserver.ensure_running()
    return ctx


@contextlib.contextmanager
def _signals_ignored(*signums: int) -> Any:
    """Ignore ``signums`` while a process is started (it inherits SIG_IGN), losing none.

    The signals are blocked first; one that arrives while they are ignored stays
    pending (Linux never discards a blocked signal) and is delivered when the
    old handlers are back; one already pending is re-raised then.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = set(signums)
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    pending = signal.sigpending() & sigs  # setting SIG_IGN would discard these
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in sorted(sigs)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for sig in sorted(pending):
            signal.raise_signal(sig)  # still blocked: delivered on the unblock below
        signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)


class _Coordinator:
    def __init__(self, flow: Flow, name: str, opts: RunOptions) -> None:
        self.flow = flow
        self.opts = opts
        spec = flow.spec()
        if spec.name != name:
            spec = replace(spec, name=name)
        self.spec = spec
        self.realtime = spec.flow_type == REALTIME
        self.warnings: list[str] = []
        self.scaling: list[ScalingEvent] = []
        self.error: str | None = None
        self.failed = False
        self.stop_requests = 0
        self.stop_signal: str | None = None  # the first signal that asked to stop
        self.stop_info: dict[str, Any] | None = None
        self.gpu_doc: dict[str, Any] | None = None
        self.t0 = time.monotonic()
        self._live: Any = None
        self._console: Any = None
        self._last_rates: dict[str, tuple[float, int]] = {}
        self.aborting = False
        self._cleaned = False
        self.watches: dict[str, _Watch] = {}
        self.stalls: list[dict[str, Any]] = []

    # -- messages to the user ------------------------------------------------------------

    def say(self, level: int, text: str) -> None:
        if self.opts.log_sink is not None:
            self.opts.log_sink(level, text)
        elif self._console is not None:
            self._console.print(text, markup=False, highlight=False)
        else:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def warn(self, text: str) -> None:
        self.warnings.append(text)
        self.say(logging.WARNING, f"warning: {text}")

    # -- setup -------------------------------------------------------------------------------

    def prepare(self) -> None:
        spec, opts = self.spec, self.opts
        issues = validate(spec)
        errors = [i for i in issues if i.is_error]
        if errors:
            raise InvalidFlowError(issues)
        for issue in issues:
            self.warn(f"{issue.rule}: {issue.message}")
        live = {n.name: n for n in self.flow.nodes}
        rejections: dict[str, tuple[Any, ...]] = {}
        if opts.autoscale:
            from vfcore import AutoscalingOptions, autoscaling_rejections

            rejections = autoscaling_rejections(
                spec,
                AutoscalingOptions(
                    enabled=True,
                    gpu_autoscaling=opts.gpu_autoscaling,
                    max_replicas=opts.max_replicas,
                ),
            )
        self.nodes: dict[str, _Node] = {}
        slot = 0
        for i, node in enumerate(spec.nodes):
            n = effective_replicas(node)
            reasons = [r for r in rejections.get(node.name, ()) if r.code != "batch-job"]
            scalable = opts.autoscale and node.is_processor and not reasons
            top = max(n, opts.max_replicas) if scalable else n
            self.nodes[node.name] = _Node(
                node,
                i,
                n,
                top,
                list(range(slot, slot + top)),
                scalable,
                partitioned=node.partition_by is not None and n > 1,
            )
            slot += top
        self.total_slots = slot
        self.children = spec.children()
        self.token = secrets.token_hex(4)
        self.prefix = run_prefix(self.token)
        self.blobs = {name: _node_blob(live[name]) for name in self.nodes}
        self.preload = _preload_files(live.values())
        # dead letters are the user's data: appended to the named file, or to a new
        # file named after this run; never truncated, never removed
        self.dead_letters_explicit = opts.dead_letter_path is not None
        self.dead_letter_path = check_dead_letter_path(
            opts.dead_letter_path or default_dead_letter_name(spec.name, self.token)
        )
        self.assign_gpus()

    def assign_gpus(self) -> None:
        from vfcore.runtime.devices import DeviceRequest, assign_devices, visible_devices

        requests = [
            DeviceRequest(f"{n.spec.name}/{r}", n.spec.gpu_count, n.spec.gpu_memory_gib)
            for n in self.nodes.values()
            if n.spec.is_gpu
            for r in range(n.max_replicas)
        ]
        self.devices: dict[str, tuple[int, ...]] = {}
        if not requests:
            return
        if self.opts.gpu_inventory is not None:
            inventory = tuple(self.opts.gpu_inventory)
        else:
            from vfadapters.local.gpus import detect_gpus

            inventory = visible_devices(detect_gpus(), os.environ.get("CUDA_VISIBLE_DEVICES"))
        assignment = assign_devices(requests, inventory, policy=self.opts.gpu_policy)  # type: ignore[arg-type]
        self.gpu_doc = assignment.to_dict()
        if assignment.refused:
            raise GpuRefusedError(
                "gpu-shortfall",
                f"--gpu-policy strict: {assignment.shortfall}",
                "drop --gpu-policy strict to share GPUs (locally only memory bounds sharing), "
                "or lower nb_tasks / gpu_count",
            )
        for text in assignment.warnings:
            self.warn(text)
        self.devices = dict(assignment.devices)

    def create(self) -> None:
        opts = self.opts
        self.mp = _install_forkserver(opts.start_method)
        ctx = self.mp
        # the run's semaphores are named after it (sem.vf-<pid>-<token>-sem-…), so
        # that the next run removes them if this coordinator is killed with -9
        config = getattr(mp.current_process(), "_config", None)
        if not isinstance(config, dict) or "semprefix" not in config:
            self.create_rings(ctx)  # another Python: the semaphores keep their own names
            return
        old_prefix = config["semprefix"]
        config["semprefix"] = run_semaphore_prefix(self.prefix)
        try:
            self.create_rings(ctx)
        finally:
            config["semprefix"] = old_prefix

    def create_rings(self, ctx: Any) -> None:
        opts = self.opts
        self.segments: list[Segment] = []
        size = (CTL.BASE + self.total_slots * SLOT.FIELDS) * 8
        self.control = Segment.create(self.prefix + "ctl", size)
        self.segments.append(self.control)
        self.ctl = self.control.buf.cast("Q")
        capacity = int(opts.buffer_mib * 2**20)
        # (parent, child) → the child's input rings on that edge: one shared by all
        # replicas, or one per replica when the child is partitioned
        self.rings: dict[tuple[str, str], list[Ring]] = {}
        for node in self.nodes.values():
            spec = node.spec
            join = len(spec.parents) > 1
            owners = node.max_replicas if node.partitioned else 1
            node.doorbells = [ctx.Semaphore(0) for _ in range(owners)]
            node.in_rings = []
            for p, parent in enumerate(spec.parents):
                per_owner: list[Ring] = []
                for r in range(owners):
                    handle = RingHandle(
                        f"{self.prefix}r{node.index}-{p}-{r}",
                        ctx.Lock(),
                        ctx.Semaphore(0),
                        node.doorbells[r],
                    )
                    ring, segment = Ring.create(
                        handle,
                        capacity=capacity,
                        # a join pins halves until their group leaves: room for the lead
                        max_messages=opts.buffer_messages * (4 if join else 1),
                    )
                    self.segments.append(segment)
                    per_owner.append(ring)
                self.rings[(parent, spec.name)] = per_owner
                node.in_rings.append(per_owner)
        self.replicas: dict[int, _Replica] = {}
        for node in self.nodes.values():
            for r in range(node.max_replicas):
                cfg = self.worker_config(node, r)
                self.replicas[node.slots[r]] = _Replica(node.spec.name, r, node.slots[r], cfg)

    def inputs_of(self, node: _Node, replica: int) -> list[Ring]:
        """The rings one replica reads, in parent order."""
        owner = replica if node.partitioned else 0
        return [per_owner[owner] for per_owner in node.in_rings]

    def all_inputs(self, node: _Node) -> list[Ring]:
        return [ring for per_owner in node.in_rings for ring in per_owner]

    def worker_config(self, node: _Node, r: int) -> WorkerConfig:
        spec = node.spec
        outputs = []
        for child_name in self.children[spec.name]:
            child = self.nodes[child_name]
            if child.partitioned:
                routing = "partitioned"
            elif child.max_replicas > 1:
                routing = "competing"
            else:
                routing = "single"
            rings = tuple(ring.handle for ring in self.rings[(spec.name, child_name)])
            outputs.append(EdgeOut(child_name, child.spec, routing, rings, tuple(child.slots)))  # type: ignore[arg-type]
        policy = effective_join_policy(spec, self.spec.flow_type)
        if policy is not None and not self.realtime and spec.join_policy is None:
            # BATCH: pinned halves are bounded by the input rings, not by max_pending
            policy = replace(policy, max_pending=max(policy.max_pending, 1 << 30))
        pod = f"{spec.name}/{r}"
        env: dict[str, str] = {"VF_RUN": self.token, "VF_POD": pod}
        device: str | None = None
        devices: tuple[int, ...] = ()
        if spec.is_gpu:
            devices = self.devices.get(pod, ())
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in devices)
            device = "cuda" if devices else "cpu"
        return WorkerConfig(
            run_id=self.token,
            control=self.control.name,
            node=spec.name,
            replica=r,
            slot=node.slots[r],
            spec=spec,
            flow_type=self.spec.flow_type,
            node_blob=self.blobs[spec.name],
            preload=self.preload,
            inputs=tuple(
                (parent, ring.handle)
                for parent, ring in zip(spec.parents, self.inputs_of(node, r), strict=True)
            ),
            outputs=tuple(outputs),
            doorbell=node.doorbells[r if node.partitioned else 0],
            join_policy=policy,
            retries=self.opts.retries,
            dead_letter_path=self.dead_letter_path,
            coordinator_pid=os.getpid(),
            env=env,
            device=device,
            devices=devices,
            linger_s=self.opts.linger_s,
            batch_max=self.opts.batch_max,
            log_level=self.opts.log_level,
        )

    # -- processes ------------------------------------------------------------------------

    def start_replica(self, rep: _Replica) -> None:
        from vfadapters.local.worker import worker_main

        reader, writer = self.mp.Pipe(duplex=False)
        proc = self.mp.Process(
            target=worker_main, args=(rep.cfg, writer), name=f"vf:{rep.node}/{rep.index}"
        )
        try:
            if self.opts.start_method == "spawn":
                # a spawned worker is exec'd from this process: it inherits SIG_IGN,
                # so a signal to the group cannot kill it before worker_main ignores it
                with _signals_ignored(signal.SIGINT, signal.SIGTERM):
                    proc.start()
            else:
                proc.start()  # forked by the fork server, which ignores both already
        except (OSError, EOFError) as exc:  # e.g. the fork server was killed
            writer.close()
            reader.close()
            rep.state = "failed"
            if not self.failed:
                self.failed = True
                self.error = (
                    f"{rep.node}/{rep.index}: could not start its worker process: "
                    f"{type(exc).__name__}: {exc}"
                )
                self.say(logging.ERROR, f"error: {self.error}")
            return
        writer.close()
        rep.proc = proc
        rep.conn = reader
        rep.state = "starting"
        rep.pids.append(proc.pid)
        self.ctl[slot_base(rep.slot) + SLOT.ACTIVE] = 1

    def start_all(self) -> None:
        for node in self.nodes.values():
            node.active = node.min_replicas
            node.peak = node.min_replicas
        # consumers first, so that their rings are read as soon as producers write
        for node in reversed(list(self.nodes.values())):
            for r in range(node.min_replicas):
                self.start_replica(self.replicas[node.slots[r]])

    def live_replicas(self) -> list[_Replica]:
        replicas = getattr(self, "replicas", {})
        return [rep for rep in replicas.values() if rep.proc is not None]

    def drain_events(self, rep: _Replica) -> None:
        conn = rep.conn
        if conn is None:
            return
        try:
            while conn.poll():
                self.on_event(rep, conn.recv())
        except (EOFError, OSError):
            pass

    def on_event(self, rep: _Replica, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind == "opened":
            rep.state = "running"
        elif kind == "done":
            rep.state = "done"
        elif kind == "aborted":
            rep.state = "aborted"
        elif kind == "log":
            self.say(event[1], event[2])
        elif kind == "failed":
            _, phase, message, tb = event
            rep.state = "failed"
            if not self.failed:
                self.failed = True
                what = {
                    "open": "open() raised",
                    "next": "next() raised",
                    "build": "could not be rebuilt in its worker:",
                    "run": "failed:",
                    "close": "close() raised",
                }[phase]
                self.error = f"{rep.node}/{rep.index}: {what} {message}"
                if phase == "build" and "Can't get attribute" in message:
                    self.error += (
                        " (node classes must be importable by the worker: define them in a "
                        "module or a flow file, not in an interactive session)"
                    )
                self.say(logging.ERROR, f"error: {self.error}\n{tb.rstrip()}")

    def on_exit(self, rep: _Replica) -> None:
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
        node = self.nodes[rep.node]
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        if node.spec.is_producer:
            self.failed = True
            self.error = (
                f"{rep.node}/{rep.index}: the producer died ({how}); a producer's position "
                "cannot be recovered, so the run stops"
            )
            self.say(logging.ERROR, f"error: {self.error}")
            rep.state = "failed"
            return
        if rep.restarts >= MAX_RESTARTS:
            self.failed = True
            self.error = f"{rep.node}/{rep.index} died {rep.restarts + 1} times (last: {how})"
            self.say(logging.ERROR, f"error: {self.error}")
            rep.state = "failed"
            return
        rep.restarts += 1
        self.warn(
            f"{rep.node}/{rep.index} died ({how}); restarting it "
            f"({rep.restarts}/{MAX_RESTARTS}): its in-flight messages are redelivered"
        )
        for ring in self.rings_of(rep):
            if ring.recover_lock():
                self.warn(f"released a lock {rep.node}/{rep.index} held when it died")
        returned = sum(ring.redeliver(rep.index) for ring in self.inputs_of(node, rep.index))
        if returned:
            self.say(
                logging.WARNING,
                f"{rep.node}/{rep.index}: {returned} in-flight message(s) returned for redelivery",
            )
        self.start_replica(rep)

    def rings_of(self, rep: _Replica) -> list[Ring]:
        """Every ring a replica reads or writes (to recover a lock it died holding)."""
        out = self.inputs_of(self.nodes[rep.node], rep.index)
        for child in self.children[rep.node]:
            out.extend(self.rings[(rep.node, child)])
        return out

    # -- end of stream -----------------------------------------------------------------------

    def check_completion(self) -> bool:
        changed = True
        while changed:
            changed = False
            for node in self.nodes.values():
                if node.complete:
                    continue
                reps = [self.replicas[s] for s in node.slots]
                if any(rep.proc is not None for rep in reps):
                    continue
                if not any(rep.state == "done" for rep in reps):
                    continue
                node.complete = True
                changed = True
                for child in self.children[node.spec.name]:
                    for ring in self.rings[(node.spec.name, child)]:
                        ring.set_closed(True)
        return all(node.complete for node in self.nodes.values())

    # -- stopping ----------------------------------------------------------------------------

    def on_signal(self, signum: int, frame: Any) -> None:
        self.stop_requests += 1
        if self.stop_signal is None:
            self.stop_signal = signal.Signals(signum).name
        if self.stop_requests >= 2:
            self.ctl[CTL.ABORT] = 1

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

    def loop(self) -> str:
        opts = self.opts
        self.aborting = False
        drain_deadline = math.inf
        abort_deadline = math.inf
        stop_at: float | None = None
        next_progress = 0.0
        next_scale = time.monotonic() + opts.scale_interval_s
        while True:
            waitables: list[Any] = []
            by_key: dict[Any, _Replica] = {}
            for rep in self.live_replicas():
                waitables.append(rep.conn)
                waitables.append(rep.proc.sentinel)
                by_key[rep.conn] = rep
                by_key[rep.proc.sentinel] = rep
            ready = mpc.wait(waitables, timeout=0.1) if waitables else []
            exited: list[_Replica] = []
            for key in ready:
                rep = by_key[key]
                if key is rep.conn:
                    self.drain_events(rep)
                elif rep not in exited:
                    exited.append(rep)
            for rep in exited:
                if rep.proc is not None:
                    self.on_exit(rep)
            now = time.monotonic()
            if self.failed:
                if not self.aborting:
                    self.aborting = True
                    self.ctl[CTL.ABORT] = 1
                    abort_deadline = now + CLOSE_GRACE_S
                if not self.live_replicas() or now > abort_deadline:
                    self.kill_all()
                    return "failed"
            elif self.check_completion():
                return "stopped" if self.stop_requests else "completed"
            if self.stop_requests and stop_at is None:
                stop_at = now
                self.ctl[CTL.STOP_PRODUCERS] = 1
                drain_deadline = now + opts.drain_timeout_s
                self.say(
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
                self.ctl[CTL.ABORT] = 1
                abort_deadline = now + CLOSE_GRACE_S
                self.warn(
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
                self.watch(now)
                self.progress(now)
                next_progress = now + 0.5
            if opts.autoscale and now >= next_scale and not self.stop_requests:
                self.autoscale(now)
                next_scale = now + opts.scale_interval_s

    # -- observing ---------------------------------------------------------------------------

    def field_sum(self, node: _Node, f: int) -> int:
        ctl = self.ctl
        return int(sum(ctl[slot_base(s) + f] for s in node.slots))

    def node_backlog(self, node: _Node) -> int:
        return sum(ring.unsettled() for ring in self.all_inputs(node))

    def node_summary(self, node: _Node) -> NodeSummary:
        f = self.field_sum
        evicted = sum(ring.h[ME] for ring in self.all_inputs(node))
        redelivered = sum(ring.h[RD] for ring in self.all_inputs(node))
        restarts = sum(self.replicas[s].restarts for s in node.slots)
        name = node.spec.name
        devices = {
            f"{name}/{r}": ",".join(str(i) for i in self.devices.get(f"{name}/{r}", ())) or "cpu"
            for r in range(node.max_replicas)
            if node.spec.is_gpu
        }
        return NodeSummary(
            name=name,
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
            join_dropped=f(node, SLOT.JOIN_DROPPED),
            filtered=f(node, SLOT.FILTERED),
            returned_none=f(node, SLOT.NONES),
            backlog=self.node_backlog(node),
            max_replicas=node.peak,
            devices=devices,
        )

    def edge_summaries(self) -> tuple[EdgeSummary, ...]:
        out = []
        for node in self.nodes.values():
            for p, parent in enumerate(node.spec.parents):
                rings = node.in_rings[p]
                written = sum(r.h[MW] for r in rings)
                committed = sum(r.h[MC] for r in rings)
                evicted = sum(r.h[ME] for r in rings)
                redelivered = sum(r.h[RD] for r in rings)
                waits = sum(r.h[WAITS] for r in rings)
                out.append(
                    EdgeSummary(
                        parent,
                        node.spec.name,
                        int(written),
                        int(committed - evicted),
                        int(evicted),
                        int(redelivered),
                        int(waits),
                    )
                )
        return tuple(out)

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
        limit = self.opts.stall_warning_s
        if not limit:
            return
        for node in self.nodes.values():
            name = node.spec.name
            count = self.field_sum(node, SLOT.PROCESSED) + self.field_sum(node, SLOT.RECEIVED)
            nones = self.field_sum(node, SLOT.NONES)
            w = self.watches.get(name)
            if w is None:
                w = self.watches[name] = _Watch(count, nones, now)
            running = any(self.replicas[s].state == "running" for s in node.slots)
            if node.spec.is_producer:
                waiting = 1
            elif len(node.spec.parents) > 1:
                waiting = sum(ring.pending() for ring in self.all_inputs(node))
            else:
                waiting = self.node_backlog(node)
            if count != w.count or node.complete or not running or not waiting:
                if w.stall is not None:
                    w.stall["duration_s"] = now - w.since
                    if count != w.count:
                        w.stall["resumed"] = True
                        self.say(
                            logging.INFO,
                            f"{name}: progressing again after {now - w.since:.1f} s without",
                        )
                self.watches[name] = _Watch(count, nones, now)
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
                "at_s": w.since - self.t0,
                "duration_s": idle,
                "resumed": False,
                "detail": detail,
            }
            self.stalls.append(w.stall)
            self.warn(f"no progress: {name} for {idle:.1f} s: {detail}")

    def progress(self, now: float) -> None:
        if self._live is None:
            return
        self._live.update(self.table(now))

    def table(self, now: float) -> Any:
        from rich.table import Table

        elapsed = now - self.t0
        table = Table(
            title=f"vf run {self.spec.name} ({self.spec.flow_type}) — {elapsed:.1f} s",
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
        for node in self.nodes.values():
            s = self.node_summary(node)
            last_t, last_n = self._last_rates.get(s.name, (self.t0, 0))
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

    # -- autoscaling -------------------------------------------------------------------------

    def autoscale(self, now: float) -> None:
        try:
            from vfcore.scaling import Backlog, decide_replicas
        except ImportError:
            return
        for node in self.nodes.values():
            if not node.scalable or node.complete:
                continue
            observations: dict[str, Any] = {}
            for p, parent in enumerate(node.spec.parents):
                rings = node.in_rings[p]
                pending = sum(r.pending() for r in rings)
                in_flight = sum(r.unsettled() for r in rings) - pending
                observations[parent] = Backlog(pending=pending, ack_pending=max(0, in_flight))
            decision = decide_replicas(
                observations,
                target=self.opts.scale_target,
                min_replicas=node.min_replicas,
                max_replicas=node.max_replicas,
            )
            want = getattr(decision, "replicas", None)
            if want is None or want == node.active:
                continue
            self.resize(node, int(want), now, decision)

    def resize(self, node: _Node, want: int, now: float, decision: Any) -> None:
        """Start replicas ``active..want-1``, or retire ``want..active-1``.

        Competing replicas share one input ring, so a new replica takes work at
        once and a retiring one just stops claiming: it settles what it holds
        and exits.
        """
        name = node.spec.name
        before = node.active
        if want > before:
            for r in range(before, want):
                rep = self.replicas[node.slots[r]]
                if rep.proc is not None:  # still finishing after an earlier retirement
                    want = r
                    break
                rep.state = "idle"
                self.start_replica(rep)
        else:
            for r in range(want, before):
                rep = self.replicas[node.slots[r]]
                self.ctl[slot_base(rep.slot) + SLOT.ACTIVE] = 0
                if rep.proc is not None:
                    rep.state = "retiring"
            for doorbell in node.doorbells:
                doorbell.release()  # a waiting replica rechecks sooner
        if want == before:
            return
        node.active = want
        node.peak = max(node.peak, want)
        diagnosis = getattr(decision, "diagnosis", "")
        reason = f"{diagnosis}: backlog {self.node_backlog(node)}" if diagnosis else "backlog"
        event = ScalingEvent(now - self.t0, name, before, want, reason)
        self.scaling.append(event)
        self.say(logging.INFO, f"autoscale: {name} {before} → {want} replicas ({reason})")

    # -- the whole run ---------------------------------------------------------------------

    def run(self) -> RunSummary:
        self.prepare()
        sweep_stale()
        handlers: dict[int, Any] = {}
        main = threading.current_thread() is threading.main_thread()
        status = "failed"
        try:
            self.create()
            if self.opts.handle_signals and main:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    handlers[sig] = signal.signal(sig, self.on_signal)
            self.open_progress()
            self.t0 = time.monotonic()
            self.start_all()
            status = self.loop()
        except BaseException:
            self.ctl_abort()
            self.kill_all()
            raise
        finally:
            self.close_progress()
            for signum, old in handlers.items():
                signal.signal(signum, old)
        duration = time.monotonic() - self.t0
        if hasattr(self, "ctl"):
            self.watch(time.monotonic(), final=True)
        summary = self.summarise(status, duration)
        self.cleanup()
        return summary

    def ctl_abort(self) -> None:
        ctl = getattr(self, "ctl", None)
        if ctl is not None:
            ctl[CTL.ABORT] = 1

    def summarise(self, status: str, duration: float) -> RunSummary:
        nodes = {name: self.node_summary(node) for name, node in self.nodes.items()}
        dead = sum(n.dead_letters for n in nodes.values())
        if status == "stopped" and self.stop_info is None:
            self.stop_info = {"how": "drained"}
        if self.stop_info is not None and self.stop_signal is not None:
            self.stop_info = {**self.stop_info, "signal": self.stop_signal}
        return RunSummary(
            flow=self.spec.name,
            flow_type=self.spec.flow_type,
            status=status,  # type: ignore[arg-type]
            duration_s=duration,
            nodes=nodes,
            edges=self.edge_summaries(),
            dead_letters=dead,
            dead_letter_path=self.dead_letter_path if dead else None,
            error=self.error,
            warnings=tuple(self.warnings),
            gpu=self.gpu_doc,
            scaling=tuple(self.scaling),
            stop=self.stop_info,
            pids=tuple(pid for rep in self.replicas.values() for pid in rep.pids),
            stalls=tuple(Stall(**stall) for stall in self.stalls),
            stall_warning_s=self.opts.stall_warning_s or None,
        )

    def cleanup(self) -> None:
        if self._cleaned:
            return
        self._cleaned = True
        for rings in getattr(self, "rings", {}).values():
            for ring in rings:
                with contextlib.suppress(Exception):
                    ring.close()
        ctl = getattr(self, "ctl", None)
        if ctl is not None:
            ctl.release()
        for segment in getattr(self, "segments", []):
            segment.close()
            segment.unlink()
        unlink_prefix(getattr(self, "prefix", "vf-none-"))

    def open_progress(self) -> None:
        show = self.opts.progress
        if show is None:
            show = sys.stderr.isatty()
        if not show:
            return
        from rich.console import Console
        from rich.live import Live

        self._console = Console(stderr=True)
        self._live = Live(
            self.table(time.monotonic()),
            console=self._console,
            refresh_per_second=4,
            transient=False,
        )
        self._live.start()

    def close_progress(self) -> None:
        if self._live is not None:
            try:
                self._live.update(self.table(time.monotonic()))
                self._live.stop()
            except Exception:
                pass
            self._live = None


def execute(flow: Flow | FlowSpec | str | os.PathLike[str], options: RunOptions) -> RunSummary:
    """Run a flow locally (see :func:`vfadapters.local.run`)."""
    options.check()
    live, name = _to_flow(flow)
    coordinator = _Coordinator(live, name or "flow", options)
    try:
        return coordinator.run()
    finally:
        coordinator.cleanup()
