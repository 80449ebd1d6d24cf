"""The local executor: set up a run from its layout, hand it to the supervisor, sum it up.

:func:`vfcore.runtime.local_layout` (replica bounds, pods and slots, routing,
devices, the runtime join policy) says what to build; this module creates the
shared-memory rings, the control segment and each BATCH join replica's journal,
and each replica's :class:`~vfadapters.local.transport.LocalPlan`, then hands
the run to the transport-neutral parts of :mod:`vfadapters.runtime` — the
:class:`~vfadapters.runtime.supervisor.Supervisor` (processes, restarts, end of
stream, stopping), :class:`~vfadapters.runtime.progress.Progress` (live table,
watchdog, summary) and the autoscaler — with :class:`LocalRun` as the run's
transport: how a dead replica's half-done steps are undone and its records
handed out again, how end of stream travels (a finished node's output rings
close), how stop and abort are asked.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import secrets
import signal
import threading
import time
from dataclasses import replace
from typing import Any

from vfadapters.local.atomic import Cells
from vfadapters.local.ring import MC, ME, MW, RD, WAITS, Ring, RingHandle
from vfadapters.local.shm import (
    Segment,
    run_prefix,
    run_semaphore_prefix,
    sweep_stale,
    unlink_prefix,
)
from vfadapters.local.transport import (
    CONTROL_SEGMENT,
    JOURNAL_SEGMENT,
    LocalPlan,
    control_size,
    private_log,
    read_letter_lines,
    worker_main,
)
from vfadapters.runtime.autoscaling import Autoscaler
from vfadapters.runtime.config import CTL, SLOT, EdgePlan, NodeConfig, slot_base
from vfadapters.runtime.nodes import node_blob, preload_files
from vfadapters.runtime.options import (
    LOCAL_BATCH_MAX,
    MAX_BUFFER_MIB,
    GpuRefusedError,
    RunOptions,
    check_dead_letter_path,
    default_dead_letter_name,
    default_linger_s,
)
from vfadapters.runtime.progress import Progress, build_summary, edge_counts
from vfadapters.runtime.state import EdgeCounts, EdgeView, LiveNode, Replica, RunState, Voice
from vfadapters.runtime.summary import RunSummary
from vfadapters.runtime.supervisor import Supervisor, install_forkserver
from vfcore import REALTIME, Flow, FlowSpec, InvalidFlowError, InvalidInputError, validate
from vfcore.runtime import (
    Books,
    EdgeTally,
    GpuDevice,
    LocalLayout,
    NodeTally,
    PodLayout,
    check_books,
    local_layout,
)

__all__ = [
    "MAX_BUFFER_MIB",
    "GpuRefusedError",
    "LocalRun",
    "RunOptions",
    "check_dead_letter_path",
    "count_letters",
    "default_dead_letter_name",
    "execute",
    "node_tokens",
]

#: ring segments are numbered from here in a run's Cells (0: control, 1: a journal)
_FIRST_RING = 2


def node_tokens(spec: FlowSpec, run: str) -> dict[str, str]:
    """Each node's physical token (:func:`vfcore.physical_name`): what ids are made of."""
    from vfcore import physical_name

    return {
        n.name: physical_name(n.name, flow=spec.name, run=run).subject.rsplit(".", 1)[1]
        for n in spec.nodes
    }


def edge_plans(spec: FlowSpec, layout: LocalLayout, node: str) -> tuple[EdgePlan, ...]:
    """A node's output edges as its replicas see them, from the layout."""
    out = []
    for edge in layout.outputs(node):
        out.append(
            EdgePlan(
                child=edge.child,
                child_spec=spec.node(edge.child),
                routing=edge.routing,
                strategy=edge.strategy,
                outlets=edge.owners,
                shared=edge.routing == "competing",
                keep=edge.realtime_keep,
            )
        )
    return tuple(out)


class RingView:
    """One ring, as the run observes an edge (:class:`vfadapters.runtime.state.EdgeView`)."""

    unobserved: str | None = None

    def __init__(self, ring: Ring) -> None:
        self.ring = ring
        self.keep = ring.keep

    def counts(self) -> EdgeCounts:
        h = self.ring.h
        return EdgeCounts(int(h[MW]), int(h[MC]), int(h[ME]), int(h[RD]), int(h[WAITS]))

    def pending(self) -> int:
        return self.ring.pending()

    def unsettled(self) -> int:
        return self.ring.unsettled()


def count_letters(
    path: str, run: str, offset: int = 0
) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """This run's dead letters in ``path`` after byte ``offset`` (the file's size when
    the run began), each id once: per node, those given up on (raised,
    undecodable, join halves) and, per node and child, the unroutable ones."""
    seen: set[str] = set()
    given_up: dict[str, int] = {}
    unroutable: dict[str, dict[str, int]] = {}
    for _, entry in read_letter_lines(path, offset):
        if entry is None or entry.get("run") != run:
            continue
        ident = str(entry.get("id") or "")
        if not ident or ident in seen:
            continue
        seen.add(ident)
        node = str(entry.get("node"))
        reason = str(entry.get("reason") or "")
        if reason.startswith("unroutable to "):
            child = reason[len("unroutable to ") :]
            per = unroutable.setdefault(node, {})
            per[child] = per.get(child, 0) + 1
        else:
            given_up[node] = given_up.get(node, 0) + 1
    return given_up, unroutable


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


class LocalRun:
    """One local run: its segments and plans, and the transport the supervisor drives."""

    target = staticmethod(worker_main)

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
        self.journals: dict[int, Segment] = {}  # slot -> a BATCH join replica's journal
        self.doorbells: dict[str, list[Any]] = {}  # node -> a semaphore per owner
        self.ctl: Any = None
        self.cells = Cells()
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
        self.tokens = node_tokens(spec, self.token)
        self.blobs = {name: node_blob(live[name]) for name in self.nodes}
        self.preload = preload_files(live.values())
        # dead letters are the user's data: appended to the named file, or to a new
        # file named after this run; never truncated, never removed
        self.dead_letter_path = check_dead_letter_path(
            opts.dead_letter_path or default_dead_letter_name(spec.name, self.token)
        )
        try:  # the run's letters come after what the file held when it began
            self.dead_letter_offset = os.stat(self.dead_letter_path).st_size
        except FileNotFoundError:
            self.dead_letter_offset = 0
        self.check_devices()

    def gpu_inventory(self) -> tuple[GpuDevice, ...]:
        """The GPUs this run may use (detected only when the flow has a GPU node)."""
        if not any(node.is_gpu for node in self.spec.nodes):
            return ()
        if self.opts.gpu_inventory is not None:
            return tuple(self.opts.gpu_inventory)
        from vfadapters.local.gpus import detect_gpus
        from vfcore.runtime import visible_devices

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
        ctx = install_forkserver(self.opts.start_method, ("vfadapters.local.transport",))
        # the run's semaphores are named after it (sem.vf-<pid>-<token>-sem-…), so
        # that the next run removes them if this coordinator is killed with -9
        config = getattr(mp.current_process(), "_config", None)
        if not isinstance(config, dict) or "semprefix" not in config:
            self.create_segments(ctx)  # another Python: the semaphores keep their own names
        else:
            old_prefix = config["semprefix"]
            config["semprefix"] = run_semaphore_prefix(self.prefix)
            try:
                self.create_segments(ctx)
            finally:
                config["semprefix"] = old_prefix
        replicas = {
            pod.slot: Replica(node.name, pod.replica, pod.slot, pod.name, self.plan(node, pod))
            for node in self.nodes.values()
            for pod in node.layout.pods
        }
        edges: dict[tuple[str, str], list[EdgeView]] = {
            key: [RingView(r) for r in rings] for key, rings in self.rings.items()
        }
        for node in self.nodes.values():
            node.in_edges = [edges[(parent, node.name)] for parent in node.spec.parents]
        self.state = state = RunState(
            self.spec,
            self.opts,
            self.layout,
            self.voice,
            self.nodes,
            replicas,
            edges,
            self.children,
            self.ctl,
        )
        self.supervisor = Supervisor(state, ctx, self)
        self.progress = Progress(state)
        self.autoscaler = Autoscaler(state, self.supervisor.start_replica)

    def create_segments(self, ctx: Any) -> None:
        opts = self.opts
        slots = self.layout.slots
        self.control = Segment.create(self.prefix + "ctl", control_size(slots))
        self.segments.append(self.control)
        self.ctl = self.control.buf[: self.control.size - self.control.size % 8].cast("Q")
        self.cells.add(CONTROL_SEGMENT, self.ctl)
        capacity = int(opts.buffer_mib * 2**20)
        number = _FIRST_RING
        # (parent, child) → the child's input rings on that edge: one shared by all
        # replicas, or one per replica when the child is partitioned
        for node in self.nodes.values():
            spec = node.spec
            join = len(spec.parents) > 1
            doorbells = [ctx.Semaphore(0) for _ in range(node.layout.owners)]
            node.wakers = [d.release for d in doorbells]
            self.doorbells[node.name] = doorbells
            # a record's progress cells: the reader's chunk size per output edge, then
            # its records written per output buffer (BATCH: exactly once)
            outs = self.layout.outputs(spec.name)
            progress = 0 if self.realtime else len(outs) + sum(e.owners for e in outs)
            for parent in spec.parents:
                per_owner: list[Ring] = []
                for r in range(node.layout.owners):
                    handle = RingHandle(
                        f"{self.prefix}r{node.layout.index}-{spec.parents.index(parent)}-{r}",
                        ctx.Lock(),
                        ctx.Semaphore(0),
                        doorbells[r],
                        number,
                    )
                    number += 1
                    ring, segment = Ring.create(
                        handle,
                        capacity=capacity,
                        # a join pins halves until their group leaves: room for the lead
                        max_messages=opts.buffer_messages * (4 if join else 1),
                        # REALTIME: the freshest few wait, older ones are evicted
                        keep=self.layout.edge(parent, spec.name).realtime_keep,
                        progress=progress,
                        cells=self.cells,
                    )
                    self.segments.append(segment)
                    per_owner.append(ring)
                self.rings[(parent, spec.name)] = per_owner
            if join and not self.realtime:
                outlets = sum(e.owners for e in outs)
                entries = opts.buffer_messages * 4 * len(spec.parents) * (outlets + 1) + 4096
                for pod in node.layout.pods:
                    journal = Segment.create(f"{self.prefix}j{pod.slot}", (4 + 2 * entries) * 8)
                    self.segments.append(journal)
                    self.journals[pod.slot] = journal

    def plan(self, node: LiveNode, pod: PodLayout) -> LocalPlan:
        spec = node.spec
        edges = edge_plans(self.spec, self.layout, spec.name)
        outputs = tuple(
            tuple(ring.handle for ring in self.rings[(spec.name, e.child)]) for e in edges
        )
        child_slots = tuple(self.layout.node(e.child).slots for e in edges)
        env: dict[str, str] = {"VF_RUN": self.token, "VF_POD": pod.name}
        if pod.device is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in pod.devices)
        cfg = NodeConfig(
            run_id=self.token,
            node=spec.name,
            token=self.tokens[spec.name],
            replica=pod.replica,
            pod=pod.name,
            replicas=node.layout.replicas,
            spec=spec,
            flow_type=self.spec.flow_type,
            join_policy=node.layout.join_policy,
            retries=self.opts.retries,
            edges=edges,
            parents=spec.parents,
            env=env,
            device=pod.device,
            devices=pod.devices,
            linger_s=(
                default_linger_s(broker=False, realtime=self.realtime)
                if self.opts.linger_s is None
                else self.opts.linger_s
            ),
            batch_max=self.opts.batch_max or LOCAL_BATCH_MAX,
            log_level=self.opts.log_level,
        )
        journal = self.journals.get(pod.slot)
        return LocalPlan(
            node=cfg,
            control=self.control.name,
            slots=self.layout.slots,
            slot=pod.slot,
            node_blob=self.blobs[spec.name],
            preload=self.preload,
            parent_tokens=tuple(self.tokens[p] for p in spec.parents),
            inputs=tuple(ring.handle for ring in self.inputs_of(node, pod.replica)),
            outputs=outputs,
            child_slots=child_slots,
            doorbell=self.doorbells[spec.name][pod.owner],
            journal=None if journal is None else journal.name,
            dead_letter_path=self.dead_letter_path,
            dead_letter_offset=self.dead_letter_offset,
            coordinator_pid=os.getpid(),
        )

    def inputs_of(self, node: LiveNode, replica: int) -> list[Ring]:
        owner = node.layout.pods[replica].owner
        return [self.rings[(parent, node.name)][owner] for parent in node.spec.parents]

    # -- the run's transport (what the supervisor asks) -------------------------------------

    def cells_of(self, rep: Replica) -> Cells:
        """The segments as replica ``rep`` numbers them (its own journal is number 1)."""
        cells = Cells()
        cells.views = dict(self.cells.views)
        journal = self.journals.get(rep.slot)
        if journal is not None:
            cells.add(JOURNAL_SEGMENT, journal.buf[: journal.size - journal.size % 8].cast("Q"))
        return cells

    def recover(self, rep: Replica) -> int:
        """Undo the steps ``rep`` left half done (those of the rings whose lock it held,
        and its private one), then hand back the records it had claimed."""
        cells = self.cells_of(rep)
        node = self.nodes[rep.node]
        rings = self.inputs_of(node, rep.index)
        for child in self.children[rep.node]:
            rings.extend(self.rings[(rep.node, child)])
        for ring in rings:
            if ring.recover(rep.slot + 1, cells):
                self.voice.warn(f"undid the step {rep.pod} had begun on a buffer when it died")
        private_log(cells, self.layout.slots, rep.slot).undo()
        return sum(ring.redeliver(rep.index) for ring in self.inputs_of(node, rep.index))

    def node_complete(self, node: LiveNode) -> None:
        for child in self.children[node.name]:
            for ring in self.rings[(node.name, child)]:
                ring.set_closed(True)

    def request_stop(self) -> None:
        self.ctl[CTL.STOP_PRODUCERS] = 1

    def abort(self) -> None:
        self.ctl[CTL.ABORT] = 1

    def retire(self, rep: Replica) -> None:
        self.ctl[slot_base(rep.slot) + SLOT.ACTIVE] = 0
        for wake in self.nodes[rep.node].wakers:
            wake()

    # -- the books ---------------------------------------------------------------------------

    def books(
        self, letters: tuple[dict[str, int], dict[str, dict[str, int]]], *, drained: bool = True
    ) -> Books:
        """The run's books; ``drained``: it ended at the end of its streams (a failed or
        stopped run may leave items pending: they are counted, not blamed)."""
        assert self.state is not None
        state = self.state
        given_up, unroutable = letters
        f = state.field_sum
        tallies = {}
        edge_tallies = []
        for node in self.nodes.values():
            spec = node.spec
            received = {}
            for p, parent in enumerate(spec.parents):
                c = edge_counts(node.in_edges[p])
                received[parent] = c.settled - c.evicted
                edge_tallies.append(EdgeTally(parent, spec.name, c.written - c.settled, c.evicted))
            emitted = {}
            for child in self.children[spec.name]:
                emitted[child] = edge_counts(state.edges[(spec.name, child)]).written
            tallies[spec.name] = NodeTally(
                node=spec.name,
                kind=spec.kind,
                received=received,
                produced=f(node, SLOT.PRODUCED),
                outputs=f(node, SLOT.OUTPUTS),
                filtered=f(node, SLOT.FILTERED),
                dead_letters=given_up.get(spec.name, 0),
                grouped=f(node, SLOT.GROUPED),
                groups=f(node, SLOT.GROUPS),
                join_dropped=f(node, SLOT.HALVES_DROPPED),
                duplicates=f(node, SLOT.DUPLICATES),
                emitted=emitted,
                unroutable=unroutable.get(spec.name, {}),
                # how far the sources went: each producer replica's position
                span=f(node, SLOT.POSITION) if spec.is_producer else None,
            )
        return check_books(self.spec, tallies, edge_tallies, drained=drained)

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
        letters = count_letters(self.dead_letter_path, self.token, self.dead_letter_offset)
        books = self.books(letters, drained=status == "completed")
        error = supervisor.error
        if status == "completed" and not books.balanced:
            status = "failed"
            error = f"books-unbalanced: {books.summary}"
            self.voice.say(40, f"error: {error}")
        per_node = dict(letters[0])
        for node, per_child in letters[1].items():
            per_node[node] = per_node.get(node, 0) + sum(per_child.values())
        summary = build_summary(
            self.state,
            progress,
            status=status,
            duration_s=duration,
            error=error,
            stop=supervisor.stop_document(status),
            scaling=tuple(self.autoscaler.events),
            gpu=self.gpu_doc,
            dead_letter_path=self.dead_letter_path,
            books=books,
            letters=per_node,
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
            with contextlib.suppress(Exception):
                self.ctl.release()
        for segment in self.segments:
            segment.close()
            segment.unlink()
        unlink_prefix(self.prefix)


def execute(flow: Flow | FlowSpec | str | os.PathLike[str], options: RunOptions) -> RunSummary:
    """Run a flow locally (see :func:`vfadapters.local.run`)."""
    options.check()
    live, name = _to_flow(flow)
    run = LocalRun(live, name or "flow", options)
    try:
        return run.run()
    finally:
        run.cleanup()
