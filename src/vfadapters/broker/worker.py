"""One replica of one node against a NATS JetStream server: ``vf worker`` and ``vf run --broker``.

The replica runs the one node runtime, :class:`vfadapters.runtime.worker.Worker`,
over :class:`~vfadapters.broker.transport.BrokerTransport` (the module
docstring there says how exactly-once works over the broker). Two ways in:

* :func:`run_worker` — ``vf worker FLOW --node NAME`` (what a pod runs): the
  node comes from the flow file; SIGTERM (a pod deleted or scaled down, KEDA
  retiring a replica) finishes the batch in hand, hands back what was fetched
  and exits without ``done``; SIGINT or a second SIGTERM stops at once;
* :func:`worker_main` — a replica forked by ``vf run --broker``'s supervisor:
  SIGINT/SIGTERM are the coordinator's to act on (a Ctrl-C reaches the whole
  process group); it tells the replica SIGUSR1 to stop at once and SIGUSR2 to
  retire; events go to the supervisor through a pipe, as locally.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vfadapters.broker.credentials import BrokerCredentials
from vfadapters.broker.transport import BrokerPlan, BrokerTransport
from vfadapters.runtime.config import CTL, SLOT, EdgePlan, NodeConfig
from vfadapters.runtime.options import BROKER_BATCH_MAX, default_linger_s
from vfadapters.runtime.worker import Worker, set_parent_death_signal, set_process_name
from vfcore import REALTIME, FlowSpec
from vfcore.placement import pod_name
from vfcore.runtime import (
    BrokerTopology,
    TopologyOptions,
    broker_topology,
    node_role,
    runtime_join_policy,
)

__all__ = [
    "WorkerOptions",
    "node_config",
    "replica_from_env",
    "run_worker",
    "worker_main",
]


def replica_from_env(env: dict[str, str] | None = None) -> int | None:
    """The replica index a Kubernetes pod gets, or None when none is set.

    ``VF_REPLICA``; an Indexed Job's ``JOB_COMPLETION_INDEX``; a StatefulSet
    pod's ordinal, the number after the last ``-`` of ``POD_NAME`` (or
    ``HOSTNAME``, which a StatefulSet pod's hostname equals).
    """
    env = dict(os.environ) if env is None else env
    for key in ("VF_REPLICA", "JOB_COMPLETION_INDEX"):
        value = env.get(key, "").strip()
        if value:
            if not (value.isascii() and value.isdigit()):
                raise ValueError(f"{key}={value!r} is not a replica index (0, 1, 2, ...)")
            return int(value)
    for key in ("POD_NAME", "HOSTNAME"):
        value = env.get(key, "").strip()
        if value and "-" in value:
            ordinal = value.rsplit("-", 1)[1]
            if ordinal.isascii() and ordinal.isdigit():
                return int(ordinal)
    return None


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """What ``vf worker`` takes besides the flow and the node."""

    url: str
    run_id: str
    replica: int = 0
    retries: int = 2
    #: None: BROKER_LINGER_S for a BATCH flow, LOCAL_LINGER_S for a REALTIME one
    linger_s: float | None = None
    batch_max: int = BROKER_BATCH_MAX
    log_level: int = logging.INFO
    create_topology: bool = True
    topology: TopologyOptions = field(default_factory=TopologyOptions)
    parent_death: bool = False  # exit with the process that started us
    #: nodes whose replicas may be added while they run (autoscaling, KEDA): they
    #: fetch one message at a time and get small batches, so new replicas find work
    scalable: tuple[str, ...] = ()
    #: the run's key (records are sealed under it: vfadapters/broker/sealing.py)
    run_key: bytes = b""
    #: how to prove who we are to the server (vfadapters/broker/credentials.py)
    credentials: Any = None


def node_config(
    spec: FlowSpec,
    topo: BrokerTopology,
    node: str,
    replica: int,
    *,
    retries: int,
    linger_s: float | None = None,
    batch_max: int = BROKER_BATCH_MAX,
    log_level: int = logging.INFO,
    device: str | None = None,
    devices: tuple[int, ...] = (),
    env: dict[str, str] | None = None,
) -> NodeConfig:
    """One broker replica's :class:`NodeConfig`, every decision from vfcore (the topology).

    ``linger_s`` None: the broker's default for the flow's type (:func:`default_linger_s`).
    """
    nspec = spec.node(node)
    if linger_s is None:
        linger_s = default_linger_s(broker=True, realtime=spec.flow_type == REALTIME)
    edges = []
    for route in topo.outputs(node):
        edges.append(
            EdgePlan(
                child=route.child,
                child_spec=spec.node(route.child),
                routing=route.routing,
                strategy=route.strategy,
                outlets=len(route.subjects),
                shared=route.routing == "competing",
                keep=topo.options.realtime_keep if spec.flow_type == REALTIME else None,
            )
        )
    return NodeConfig(
        run_id=topo.run_id,
        node=node,
        token=topo.control.token_of(node),
        replica=replica,
        pod=pod_name(node, replica),
        replicas=nspec.replicas,
        spec=nspec,
        flow_type=spec.flow_type,
        join_policy=runtime_join_policy(nspec, spec.flow_type),
        retries=retries,
        edges=tuple(edges),
        parents=nspec.parents,
        env=dict(env or {}),
        device=device,
        devices=devices,
        linger_s=linger_s,
        batch_max=batch_max,
        log_level=log_level,
    )


def _print_events(
    name: str, raised_again: Callable[[], bool] = lambda: False
) -> Callable[[tuple[Any, ...]], None]:
    """``vf worker``'s events: logs and failures on stderr (no supervisor listens).
    ``raised_again``: whether the failure to connect is one run_worker raises again
    (``BrokerTransport.attach_error``: the CLI prints it once, as its error block)."""

    def events(event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind == "failed":
            _, phase, error, tb = event
            # the node's own code gets its traceback; the transport's failures
            # (connecting, finishing) say what failed and why, without one
            own = phase not in ("connect", "finish")
            if phase == "connect" and raised_again():
                return  # run_worker raises it (attach_error), the CLI prints it once
            sys.stderr.write(f"[{name}] failed in {phase}(): {error}\n" + (tb if own else ""))
        elif kind == "log":
            sys.stderr.write(event[2] + "\n")

    return events


def _retire(transport: BrokerTransport) -> None:
    ctl, base = transport.control.ctl, transport.control.base
    transport.retired = True
    ctl[base + SLOT.ACTIVE] = 0
    ctl[CTL.STOP_PRODUCERS] = 1


def _abort(transport: BrokerTransport) -> None:
    ctl = transport.control.ctl
    ctl[CTL.ABORT] = 1
    ctl[CTL.STOP_PRODUCERS] = 1


def run_worker(spec: FlowSpec, node_obj: Any, node: str, opts: WorkerOptions) -> int:
    """``vf worker``: run one replica to its end; 0 done or stopped, 1 failed."""
    topo = broker_topology(spec, opts.run_id, opts.topology)
    cfg = node_config(
        spec,
        topo,
        node,
        opts.replica,
        retries=opts.retries,
        linger_s=opts.linger_s,
        batch_max=opts.batch_max,
        log_level=opts.log_level,
    )
    plan = BrokerPlan(
        node=cfg,
        url=opts.url,
        topology=opts.topology,
        flow=spec,
        scalable=opts.scalable,
        create_topology=opts.create_topology,
        run_key=opts.run_key,
        credentials=(opts.credentials or BrokerCredentials()).for_role(topo, node_role(node)),
    )
    transport = BrokerTransport(
        plan, topo, node_obj, _print_events(cfg.pod, lambda: transport.attach_error is not None)
    )
    if opts.parent_death:
        set_parent_death_signal()
    is_join = len(cfg.parents) > 1

    def on_signal(signum: int, frame: Any) -> None:
        if signum == signal.SIGTERM and not is_join and not transport.retired:
            # a pod scaled down or deleted, a replica autoscaling retires: finish the
            # batch in hand, hand back what was fetched, exit — without writing
            # "done" (the node goes on elsewhere)
            _retire(transport)
            return
        # SIGINT, a second SIGTERM, or a join (it holds halves of open groups): stop
        # where we are; everything unacknowledged goes back to the consumers
        _abort(transport)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    code = _run(cfg, transport)
    if transport.attach_error is not None:
        raise transport.attach_error  # a named refusal: the CLI prints it (exit 2)
    return code


def _run(cfg: NodeConfig, transport: BrokerTransport) -> int:
    code = 1
    try:
        code = Worker(cfg, transport).main()
    except Exception:
        traceback.print_exc()
        code = 1
    finally:
        transport.close()
    return code


def worker_main(plan: BrokerPlan, conn: Any) -> None:
    """The target of every replica process ``vf run --broker`` forks."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator decides how to stop
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    set_parent_death_signal()
    set_process_name(plan.node.pod)
    with contextlib.suppress(OSError):
        os.dup2(2, 1)  # stdout belongs to the coordinator (`vf run --json`)
    os.environ.update(plan.node.env)

    def send(event: tuple[Any, ...]) -> None:
        try:
            conn.send(event)
        except (BrokenPipeError, OSError):
            os._exit(3)  # the coordinator is gone

    topo = broker_topology(plan.flow, plan.node.run_id, plan.topology)
    transport = BrokerTransport(plan, topo, None, send, _pipe_handler(send))
    signal.signal(signal.SIGUSR1, lambda s, f: _abort(transport))
    signal.signal(signal.SIGUSR2, lambda s, f: _retire(transport))
    code = 1
    try:
        code = _run(plan.node, transport)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _pipe_handler(send: Callable[[tuple[Any, ...]], None]) -> Callable[[str], logging.Handler]:
    def make(prefix: str) -> logging.Handler:
        class Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                with contextlib.suppress(Exception):
                    send(("log", record.levelno, f"{prefix} {record.getMessage()}"))

        return Handler()

    return make
