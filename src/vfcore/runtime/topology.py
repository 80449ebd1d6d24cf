"""The broker topology: the NATS JetStream streams, subjects and consumers of one run.

:func:`broker_topology` turns a valid :class:`~vfcore.FlowSpec` and a run id into
a frozen :class:`BrokerTopology`. The broker adapter creates what it lists and
decides nothing of its own; ``docs/broker.md`` ("Topology") explains every
choice with a worked example. In short:

* **one stream per node that has children** (its output stream, ``VF_<name>``),
  capturing ``<node subject>.>``; a node no one reads has no stream;
* **one subject per edge** ``<parent subject>.<child token>``: the sender
  publishes each output once per child, so a child's consumer reads only its
  own edge; a **partitioned child** (``partition_by`` and more than one replica)
  has **one subject per partition** ``….p<k>``: the sender publishes to
  ``subjects[owner_of(child, ...)]`` and replica ``r`` reads only partition
  ``r`` (partition ``p`` ↔ replica ``p``, as :func:`vfcore.owner_of` numbers them);
* **consumers**: one durable pull consumer per (child, edge) shared by all the
  child's replicas (``single`` and ``competing`` routing: whoever is free pulls
  the next message), or one per (partition, edge) for a partitioned child; a
  consumer lives in its parent's stream and filters exactly its subjects;
* **BATCH streams**: file storage, work-queue retention (a message is deleted
  once its one consumer acks it), discard *new* at ``batch_max_msgs`` (a full
  stream refuses the publish: the producer backs off, nothing is evicted), a
  duplicate window for publish-with-message-id dedupe; consumers redeliver
  without limit after ``ack_wait`` (the worker dead-letters after its retries);
* **REALTIME streams**: memory storage, limits retention, ``max_msgs_per_subject``
  = ``realtime_keep`` (the freshest few per edge and partition; 1 by default,
  as videoflow keeps) with discard *old* (a publish never fails for space);
  consumers deliver a message at most once (a stale frame is never redelivered);
* **one dead-letter stream per run** (``VF_DLQ_<name>``, file storage, kept
  until removed), one subject per node: ``<run scope>.dlq_<hash>.<node token>``.

Every stream and consumer name and every subject token comes from
:func:`vfcore.physical_name` with the run id, so two flows and two runs of one
flow share no name and no subject (a stream's subjects never overlap another
run's, which JetStream would refuse). :func:`nats_name_problem` and
:func:`nats_subject_problem` check the NATS rules; every name here passes them.

``to_dict()`` of :class:`StreamConfig` and :class:`ConsumerConfig` has exactly the
JetStream API's JSON field names (durations in nanoseconds), ready to send::

    >>> from vfcore import FlowSpec, NodeSpec
    >>> spec = FlowSpec("demo", "batch", (
    ...     NodeSpec("camera", "producer"),
    ...     NodeSpec("tracker", "processor", ("camera",), nb_tasks=2, partition_by="trace_id"),
    ...     NodeSpec("sink", "consumer", ("tracker",)),
    ... ))
    >>> topo = broker_topology(spec, "run1")
    >>> edge = topo.edge("camera", "tracker")
    >>> edge.routing, len(edge.subjects), [c.partitions for c in edge.consumers]
    ('partitioned', 2, [(0,), (1,)])
    >>> topo.stream_of("camera").to_dict()["retention"]
    'workqueue'
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from vfcore.errors import InvalidInputError, brief
from vfcore.flow.join_policy import JoinPolicy
from vfcore.flow.names import PhysicalName, physical_name
from vfcore.flow.spec import REALTIME, FlowSpec, NodeSpec
from vfcore.routing.partition import STRATEGIES, Strategy
from vfcore.runtime.layout import Routing

__all__ = [
    "MAX_NATS_NAME",
    "MAX_STREAM_REPLICAS",
    "MAX_SUBJECT",
    "RUN_ID_PATTERN",
    "BrokerTopology",
    "ConsumerConfig",
    "DeadLetters",
    "EdgeRoute",
    "RunControl",
    "StreamConfig",
    "TopologyConsumer",
    "TopologyOptions",
    "broker_topology",
    "check_run_id",
    "nats_name_problem",
    "nats_subject_problem",
    "subject_matches",
]

Retention = Literal["limits", "interest", "workqueue"]
Storage = Literal["file", "memory"]
Discard = Literal["old", "new"]

#: The longest stream or consumer name nats-server accepts (``JSMaxNameLen``).
#: Ours stay under 80 characters (a Kubernetes-length name and a short prefix).
MAX_NATS_NAME: Final[int] = 255
#: The longest subject this house writes: far under the server's default 4 KiB
#: protocol line, which must also hold the reply inbox and the size.
MAX_SUBJECT: Final[int] = 1024
#: A run id: 1-63 letters, digits, ``_`` or ``-``, starting and ending with a
#: letter or digit (a NATS subject token and a Kubernetes label value as is).
RUN_ID_PATTERN: Final[str] = r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?"
_RUN_ID = re.compile(RUN_ID_PATTERN)
_NS_PER_S: Final[int] = 1_000_000_000
_NAME_FORBIDDEN: Final[frozenset[str]] = frozenset(".*>/\\")
_MAX_KEEP: Final[int] = 1 << 24
#: The most servers JetStream keeps one stream on (``num_replicas``).
MAX_STREAM_REPLICAS: Final[int] = 5


# -- the NATS rules --------------------------------------------------------------


def nats_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a JetStream stream or consumer name, or None if it can.

    The rules (docs.nats.io, "Naming Streams, Consumers, and Accounts"; names
    are subject tokens and directory names): a non-empty string of at most
    :data:`MAX_NATS_NAME` characters, with no whitespace, no ``.``, ``*`` or
    ``>``, no path separator (``/``, ``\\``) and no control character.

    >>> nats_name_problem("VF_demo-run1-camera-abc"), nats_name_problem("a.b")
    (None, "'a.b' contains '.'")
    """
    if not isinstance(name, str):
        return f"{brief(name)} is not a string"
    if not name:
        return "the name is empty"
    if len(name) > MAX_NATS_NAME:
        return f"the name has {len(name)} characters; at most {MAX_NATS_NAME} are allowed"
    for ch in name:
        if ch in _NAME_FORBIDDEN:
            return f"{brief(name)} contains {ch!r}"
        if ch.isspace():
            return f"{brief(name)} contains whitespace ({ch!r})"
        if not ch.isprintable():
            return f"{brief(name)} contains the control character {ch!r}"
    return None


def nats_subject_problem(subject: object, *, wildcards: bool = False) -> str | None:
    """Why ``subject`` is not a valid NATS subject, or None if it is.

    Tokens are separated by ``.`` and none may be empty; no whitespace or control
    character anywhere; ``*`` and ``>`` only as whole tokens, ``>`` only last, and
    only when ``wildcards`` (a stream's or a filter's pattern; a publish subject is
    literal); at most :data:`MAX_SUBJECT` characters.

    >>> nats_subject_problem("vf.demo.run1.cam-x.>", wildcards=True) is None
    True
    >>> nats_subject_problem("vf..x")
    "'vf..x' has an empty token"
    """
    if not isinstance(subject, str):
        return f"{brief(subject)} is not a string"
    if not subject:
        return "the subject is empty"
    if len(subject) > MAX_SUBJECT:
        return f"the subject has {len(subject)} characters; at most {MAX_SUBJECT} are allowed"
    for ch in subject:
        if ch.isspace():
            return f"{brief(subject)} contains whitespace ({ch!r})"
        if not ch.isprintable():
            return f"{brief(subject)} contains the control character {ch!r}"
    tokens = subject.split(".")
    for i, token in enumerate(tokens):
        if not token:
            return f"{brief(subject)} has an empty token"
        if token in ("*", ">"):
            if not wildcards:
                return f"{brief(subject)} has the wildcard {token!r}; a publish subject is literal"
            if token == ">" and i != len(tokens) - 1:
                return f"{brief(subject)} has '>' before its last token"
        elif "*" in token or ">" in token:
            return f"{brief(subject)} has a token {token!r} mixing a wildcard with other characters"
    return None


def subject_matches(pattern: str, subject: str) -> bool:
    """Whether the literal ``subject`` matches ``pattern`` (``*``: one token, ``>``: the rest).

    >>> subject_matches("vf.a.>", "vf.a.b.c"), subject_matches("vf.*.c", "vf.a.b.c")
    (True, False)
    """
    pat, sub = pattern.split("."), subject.split(".")
    for i, token in enumerate(pat):
        if token == ">":
            return len(sub) > i
        if i >= len(sub) or (token != "*" and token != sub[i]):
            return False
    return len(pat) == len(sub)


# -- options ---------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _option_error(message: str, hint: str) -> InvalidInputError:
    return InvalidInputError("invalid-topology-option", message, hint)


@dataclass(frozen=True, slots=True)
class TopologyOptions:
    """The knobs of a broker run's topology (see docs/broker.md, "Topology").

    ``realtime_keep``: messages a REALTIME stream keeps per subject (per edge and
    partition), the freshest; 1 as videoflow keeps, like the local executor's
    default. ``max_ack_pending``: messages a consumer may have delivered and not
    yet acknowledged, across all the replicas that share it (a join's consumers
    get its ``max_pending`` groups on top). ``ack_wait_s``: how long a delivered,
    unacknowledged message waits before the server redelivers it (a dead
    worker's messages come back after this). ``duplicate_window_s``: how long a
    BATCH stream remembers message ids; it must exceed ``ack_wait_s`` so an
    output republished after a redelivery is still recognised.
    ``batch_max_msgs``: the most messages a BATCH stream holds before it refuses
    publishes (-1: no bound). ``strategy``: how partitioned edges map keys to
    owners (:func:`vfcore.partition_of`). ``scalable``: nodes whose replicas may
    be added or removed while they run (autoscaling, KEDA): their edges are
    ``competing`` whatever their ``nb_tasks``, so their replicas share work.
    ``stream_replicas``: how many servers of a JetStream cluster hold each of the
    run's streams and buckets (``num_replicas``, 1 .. :data:`MAX_STREAM_REPLICAS`):
    3 on a three-server cluster survives the loss of any one server (a stream's
    Raft group keeps a quorum of 2); 1, the default, is what one server can hold.
    """

    realtime_keep: int = 1
    max_ack_pending: int = 1024
    ack_wait_s: float = 30.0
    duplicate_window_s: float = 120.0
    batch_max_msgs: int = 1_000_000
    strategy: Strategy = "modulo"
    scalable: tuple[str, ...] = ()
    stream_replicas: int = 1

    def __post_init__(self) -> None:
        keep = self.realtime_keep
        if not _is_int(keep) or not 1 <= keep <= _MAX_KEEP:
            raise _option_error(
                f"realtime_keep={brief(keep)} must be an int from 1 to {_MAX_KEEP}",
                "give how many of the freshest messages a REALTIME edge keeps, e.g. 1",
            )
        pending = self.max_ack_pending
        if not _is_int(pending) or pending < 1:
            raise _option_error(
                f"max_ack_pending={brief(pending)} must be an int >= 1",
                "give how many messages a consumer may have in flight, e.g. 1024",
            )
        for name in ("ack_wait_s", "duplicate_window_s"):
            value = getattr(self, name)
            if not _is_seconds(value):
                raise _option_error(
                    f"{name}={brief(value)} must be a finite number of seconds > 0",
                    "e.g. ack_wait_s=30, duplicate_window_s=120",
                )
        if self.duplicate_window_s <= self.ack_wait_s:
            raise _option_error(
                f"duplicate_window_s={self.duplicate_window_s} must exceed "
                f"ack_wait_s={self.ack_wait_s}: an output republished after a "
                "redelivery would fall outside the window and be stored twice",
                "make the duplicate window several ack waits long, e.g. 120 s for 30 s",
            )
        cap = self.batch_max_msgs
        if not _is_int(cap) or (cap < 1 and cap != -1):
            raise _option_error(
                f"batch_max_msgs={brief(cap)} must be an int >= 1, or -1 for no bound",
                "e.g. 1000000 (a full BATCH stream makes its producer back off)",
            )
        if self.strategy not in STRATEGIES:
            raise _option_error(
                f"strategy={brief(self.strategy)} is not one of {', '.join(STRATEGIES)}",
                "use 'modulo' (the default) or 'jump'",
            )
        scalable = self.scalable
        if not isinstance(scalable, tuple) or not all(isinstance(n, str) and n for n in scalable):
            raise _option_error(
                f"scalable={brief(scalable)} must be a tuple of node names",
                "name the nodes whose replicas may be added while they run",
            )
        replicas = self.stream_replicas
        if not _is_int(replicas) or not 1 <= replicas <= MAX_STREAM_REPLICAS:
            raise _option_error(
                f"stream_replicas={brief(replicas)} must be an int from 1 to "
                f"{MAX_STREAM_REPLICAS} (JetStream keeps a stream on at most "
                f"{MAX_STREAM_REPLICAS} servers)",
                "use 1 on one server, 3 on a cluster of 3 or more servers",
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "realtime_keep": self.realtime_keep,
            "max_ack_pending": self.max_ack_pending,
            "ack_wait_s": self.ack_wait_s,
            "duplicate_window_s": self.duplicate_window_s,
            "batch_max_msgs": self.batch_max_msgs,
            "strategy": self.strategy,
            "scalable": list(self.scalable),
            "stream_replicas": self.stream_replicas,
        }


# -- JetStream configurations ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """A JetStream stream configuration; ``to_dict()`` is the API's JSON (``StreamConfig``).

    Counts of -1 mean "no limit" (the server's convention); durations are in
    nanoseconds (``max_age`` 0: messages never expire by age).
    """

    name: str
    subjects: tuple[str, ...]
    retention: Retention
    storage: Storage
    discard: Discard
    max_msgs: int = -1
    max_msgs_per_subject: int = -1
    max_bytes: int = -1
    max_age: int = 0
    duplicate_window: int = 120 * _NS_PER_S
    num_replicas: int = 1
    allow_direct: bool = False

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "subjects": list(self.subjects),
            "retention": self.retention,
            "storage": self.storage,
            "discard": self.discard,
            "max_msgs": self.max_msgs,
            "max_msgs_per_subject": self.max_msgs_per_subject,
            "max_bytes": self.max_bytes,
            "max_age": self.max_age,
            "duplicate_window": self.duplicate_window,
            "num_replicas": self.num_replicas,
        }
        if self.allow_direct:  # the ledger: entries are looked up by subject
            data["allow_direct"] = True
        return data


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """A durable pull consumer; ``to_dict()`` is the API's JSON (``ConsumerConfig``).

    One filter subject is sent as ``filter_subject``, several as
    ``filter_subjects`` (the server refuses both at once).
    """

    durable_name: str
    filter_subjects: tuple[str, ...]
    ack_wait: int
    max_deliver: int
    max_ack_pending: int
    deliver_policy: Literal["all"] = "all"
    ack_policy: Literal["explicit"] = "explicit"
    replay_policy: Literal["instant"] = "instant"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "durable_name": self.durable_name,
            "deliver_policy": self.deliver_policy,
            "ack_policy": self.ack_policy,
            "ack_wait": self.ack_wait,
            "max_deliver": self.max_deliver,
            "max_ack_pending": self.max_ack_pending,
            "replay_policy": self.replay_policy,
        }
        if len(self.filter_subjects) == 1:
            data["filter_subject"] = self.filter_subjects[0]
        else:
            data["filter_subjects"] = list(self.filter_subjects)
        return data


# -- the topology ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopologyConsumer:
    """One consumer: in ``stream`` (the parent's), read by ``child``'s replicas.

    ``owner``: the one replica that reads it (a partitioned child), or None when
    every replica of the child shares it. ``partitions``: the partitions whose
    subjects it filters (``(owner,)``; ``()`` when shared: it filters the edge's
    one subject).
    """

    stream: str
    parent: str
    child: str
    owner: int | None
    partitions: tuple[int, ...]
    config: ConsumerConfig

    @property
    def name(self) -> str:
        return self.config.durable_name

    def to_dict(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "parent": self.parent,
            "child": self.child,
            "owner": self.owner,
            "partitions": list(self.partitions),
            "config": self.config.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class EdgeRoute:
    """One edge ``parent → child``: its stream, its subjects, its consumers.

    ``subjects[p]`` is partition ``p``'s subject for a partitioned edge (the
    sender publishes to ``subjects[owner_of(child, ..., strategy=strategy)]``),
    else the edge's one subject. ``consumers`` in partition order.
    """

    parent: str
    child: str
    routing: Routing
    stream: str
    subjects: tuple[str, ...]
    consumers: tuple[TopologyConsumer, ...]
    partition_by: str | None = None
    strategy: Strategy = "modulo"

    def to_dict(self) -> dict[str, Any]:
        return {
            "parent": self.parent,
            "child": self.child,
            "routing": self.routing,
            "stream": self.stream,
            "subjects": list(self.subjects),
            "consumers": [c.to_dict() for c in self.consumers],
            "partition_by": self.partition_by,
            "strategy": self.strategy,
        }


@dataclass(frozen=True, slots=True)
class DeadLetters:
    """The run's dead-letter stream and each node's dead-letter subject (in flow order)."""

    config: StreamConfig
    subjects: tuple[tuple[str, str], ...]

    def subject_of(self, node: str) -> str:
        for name, subject in self.subjects:
            if name == node:
                return subject
        raise KeyError(node)

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "subjects": dict(self.subjects)}


@dataclass(frozen=True, slots=True)
class RunControl:
    """Where the workers of a run meet besides the streams: buckets and the ledger.

    ``bucket`` (JetStream KV, history 1): ``run`` (created once, if absent, by
    whoever starts the run: a second start of the same run id is refused),
    ``done.<node>.<replica>`` once a replica finished with everything it
    published stored (a child ends when each parent has ended and its consumers
    hold nothing more), ``stats.<node>.<replica>`` (its live counters),
    ``seg.<node>.<replica>`` (a producer's open segments: their boundaries are
    stored before any of their items is published, so a restarted producer cuts
    them again the same way) and ``stop`` (producers stop; set on Ctrl-C/SIGTERM
    of ``vf run``). ``splits`` (KV, entries expire after the duplicate window):
    how an input message's outputs toward replicas that share work were cut
    into chunks (``split.<node>.<parent>.<seq>``, created if absent, so every
    attempt at one message cuts alike). ``ledger``: a stream with one entry per
    origin a node finished (its counters, named by
    :func:`vfcore.runtime.delivery.ledger_id`), the run's books.
    ``objects``: the object store bucket for records larger than the server's
    message limit (deleted once consumed). Keys use the node tokens of the
    subjects (``node_tokens``), so they are valid KV keys for any node name.
    """

    bucket: str
    objects: str
    node_tokens: tuple[tuple[str, str], ...]
    stop_key: str = "stop"
    run_key: str = "run"
    splits: str = ""
    ledger_prefix: str = ""

    def token_of(self, node: str) -> str:
        for name, token in self.node_tokens:
            if name == node:
                return token
        raise KeyError(node)

    def done_key(self, node: str, replica: int) -> str:
        return f"done.{self.token_of(node)}.{replica}"

    def stats_key(self, node: str, replica: int) -> str:
        return f"stats.{self.token_of(node)}.{replica}"

    def segment_key(self, node: str, replica: int) -> str:
        return f"seg.{self.token_of(node)}.{replica}"

    def split_key(self, node: str, parent: str, seq: int) -> str:
        return f"split.{self.token_of(node)}.{self.token_of(parent)}.{seq}"

    def ledger_subject(self, node: str, origin_text: str) -> str:
        """The ledger subject of ``node``'s entry for an origin (``InputOrigin.text`` …)."""
        return f"{self.ledger_prefix}.{self.token_of(node)}.{origin_text}"

    @staticmethod
    def replicas_needed(node: NodeSpec) -> int:
        """How many of ``node``'s replicas must have written ``done`` before it has ended.

        Replicas that each own their share (a producer's, a partitioned node's):
        every one, ``0 … nb_tasks − 1``. Competing replicas share one consumer, and
        one of them ends only once that consumer holds nothing pending and nothing
        in flight (its siblings' outputs are all stored by then), so any one —
        which also covers a Deployment, whose pods all run as replica 0.

        >>> from vfcore import NodeSpec
        >>> RunControl.replicas_needed(NodeSpec("w", "processor", ("s",), nb_tasks=3))
        1
        >>> RunControl.replicas_needed(
        ...     NodeSpec("t", "processor", ("s",), nb_tasks=3, partition_by="trace_id"))
        3
        """
        replicas = node.replicas
        owned = node.is_producer or (node.partition_by is not None and replicas > 1)
        return replicas if owned else 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "objects": self.objects,
            "splits": self.splits,
            "ledger_prefix": self.ledger_prefix,
            "stop_key": self.stop_key,
            "run_key": self.run_key,
            "node_tokens": dict(self.node_tokens),
        }


@dataclass(frozen=True, slots=True)
class BrokerTopology:
    """Everything a broker run creates before its first worker starts (:func:`broker_topology`).

    ``streams``: ``(node, config)`` per node with children, in flow order;
    ``edges`` in child order, then parent order; ``dead_letters``: the run's
    dead-letter stream.
    """

    flow: str
    flow_type: str
    run_id: str
    options: TopologyOptions
    streams: tuple[tuple[str, StreamConfig], ...]
    edges: tuple[EdgeRoute, ...]
    dead_letters: DeadLetters
    control: RunControl
    ledger: StreamConfig | None = None
    consumers: tuple[TopologyConsumer, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "consumers", tuple(c for edge in self.edges for c in edge.consumers)
        )

    def stream_of(self, node: str) -> StreamConfig:
        """The output stream of ``node`` (KeyError when no node reads it)."""
        for name, config in self.streams:
            if name == node:
                return config
        raise KeyError(node)

    def all_streams(self) -> tuple[StreamConfig, ...]:
        """Every stream to create: the output streams, the dead-letter stream, the ledger."""
        ledger = () if self.ledger is None else (self.ledger,)
        return (*(config for _, config in self.streams), self.dead_letters.config, *ledger)

    def edge(self, parent: str, child: str) -> EdgeRoute:
        for edge in self.edges:
            if edge.parent == parent and edge.child == child:
                return edge
        raise KeyError((parent, child))

    def outputs(self, parent: str) -> tuple[EdgeRoute, ...]:
        """The edges out of ``parent``, in child order: where its outputs are published."""
        return tuple(edge for edge in self.edges if edge.parent == parent)

    def reads(self, node: str, replica: int) -> tuple[TopologyConsumer, ...]:
        """The consumers replica ``replica`` of ``node`` pulls from, one per parent, in parent order."""
        return tuple(
            c
            for edge in self.edges
            if edge.child == node
            for c in edge.consumers
            if c.owner is None or c.owner == replica
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "flow_type": self.flow_type,
            "run_id": self.run_id,
            "options": self.options.to_dict(),
            "streams": [{"node": n, "config": c.to_dict()} for n, c in self.streams],
            "edges": [edge.to_dict() for edge in self.edges],
            "dead_letters": self.dead_letters.to_dict(),
            "control": self.control.to_dict(),
            "ledger": None if self.ledger is None else self.ledger.to_dict(),
        }


# -- building it -------------------------------------------------------------------


def check_run_id(run_id: object) -> str:
    """``run_id`` if it matches :data:`RUN_ID_PATTERN`, else an ``invalid-run-id`` error."""
    if not isinstance(run_id, str) or _RUN_ID.fullmatch(run_id) is None:
        raise InvalidInputError(
            "invalid-run-id",
            f"run id {brief(run_id)} is not 1-63 letters, digits, '_' or '-' starting and "
            "ending with a letter or digit",
            "use a short id such as 'r20261203-1' (it becomes part of every stream, "
            "consumer and subject name of the run)",
        )
    return run_id


def _scope_digest(flow: str, run: str) -> str:
    h = hashlib.sha256()
    for part in ("vf-dead-letters", flow, run):
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return base64.b32encode(h.digest()).decode("ascii").lower()[:12]


def _last_token(name: PhysicalName) -> str:
    return name.subject.rsplit(".", 1)[1]


def _checked(kind: str, value: str, problem: str | None, flow: str) -> str:
    if problem is not None:
        raise InvalidInputError(
            "invalid-broker-name",
            f"flow {brief(flow)}: the {kind} {brief(value)} is not valid for NATS: {problem}",
            "shorten the flow name (it is part of every subject of the run)",
        )
    return value


def broker_topology(
    spec: FlowSpec, run_id: str, options: TopologyOptions | None = None
) -> BrokerTopology:
    """The streams, subjects and consumers of run ``run_id`` of ``spec`` (valid).

    Raises :class:`~vfcore.errors.InvalidInputError` ``invalid-run-id`` for a bad
    run id, ``invalid-topology-option`` for bad options and ``invalid-broker-name``
    when a name would break a NATS rule (a flow name too long for a subject).
    """
    run = check_run_id(run_id)
    opts = options if options is not None else TopologyOptions()
    realtime = spec.flow_type == REALTIME
    names = {n.name: physical_name(n.name, flow=spec.name, run=run) for n in spec.nodes}
    children: dict[str, list[NodeSpec]] = {n.name: [] for n in spec.nodes}
    for node in spec.nodes:
        for parent in node.parents:
            children[parent].append(node)

    streams: list[tuple[str, StreamConfig]] = []
    for node in spec.nodes:
        if not children[node.name]:
            continue
        name = f"VF_{names[node.name].k8s}"
        _checked("stream name", name, nats_name_problem(name), spec.name)
        pattern = f"{names[node.name].subject}.>"
        _checked("subject", pattern, nats_subject_problem(pattern, wildcards=True), spec.name)
        streams.append((node.name, _output_stream(name, pattern, realtime, opts)))
    stream_names = dict(streams)

    edges: list[EdgeRoute] = []
    for child in spec.nodes:
        for parent in child.parents:
            stream = stream_names[parent].name
            edges.append(_edge(spec, parent, child, stream, names, realtime, opts))

    run_scope = physical_name("", flow=spec.name, run=run)  # its scope and label only
    scope = run_scope.subject.rsplit(".", 1)[0]
    label = run_scope.k8s.rsplit("-", 1)[0]
    digest = _scope_digest(spec.name, run)
    dlq_prefix = f"{scope}.dlq_{digest}"
    dlq_name = f"VF_DLQ_{label[:48].rstrip('-')}-{digest}"
    _checked("stream name", dlq_name, nats_name_problem(dlq_name), spec.name)
    dlq_subjects = tuple((n.name, f"{dlq_prefix}.{_last_token(names[n.name])}") for n in spec.nodes)
    for _, subject in dlq_subjects:
        _checked("subject", subject, nats_subject_problem(subject), spec.name)
    dlq = StreamConfig(
        name=dlq_name,
        subjects=(f"{dlq_prefix}.>",),
        retention="limits",
        storage="file",
        discard="new",
        duplicate_window=_ns(opts.duplicate_window_s),
        num_replicas=opts.stream_replicas,
    )
    short = label[:48].rstrip("-")
    ledger_prefix = f"{scope}.led_{digest}"
    control = RunControl(
        bucket=_checked("bucket name", f"VF_CTL_{short}-{digest}", None, spec.name),
        objects=_checked("bucket name", f"VF_OBJ_{short}-{digest}", None, spec.name),
        node_tokens=tuple((n.name, _last_token(names[n.name])) for n in spec.nodes),
        splits=_checked("bucket name", f"VF_SPL_{short}-{digest}", None, spec.name),
        ledger_prefix=ledger_prefix,
    )
    for bucket in (control.bucket, control.objects, control.splits):
        _checked("bucket name", bucket, nats_name_problem(bucket), spec.name)
    ledger = None
    if not realtime:
        ledger_name = f"VF_LED_{short}-{digest}"
        _checked("stream name", ledger_name, nats_name_problem(ledger_name), spec.name)
        ledger = StreamConfig(
            name=ledger_name,
            subjects=(f"{ledger_prefix}.>",),
            retention="limits",
            storage="file",
            discard="new",
            duplicate_window=_ns(opts.duplicate_window_s),
            num_replicas=opts.stream_replicas,
            allow_direct=True,
        )
    return BrokerTopology(
        spec.name,
        spec.flow_type,
        run,
        opts,
        tuple(streams),
        tuple(edges),
        DeadLetters(dlq, dlq_subjects),
        control,
        ledger,
    )


def _ns(seconds: float) -> int:
    return round(seconds * _NS_PER_S)


def _output_stream(name: str, pattern: str, realtime: bool, opts: TopologyOptions) -> StreamConfig:
    if realtime:
        return StreamConfig(
            name=name,
            subjects=(pattern,),
            retention="limits",
            storage="memory",
            discard="old",
            max_msgs_per_subject=opts.realtime_keep,
            duplicate_window=_ns(opts.duplicate_window_s),
            num_replicas=opts.stream_replicas,
        )
    return StreamConfig(
        name=name,
        subjects=(pattern,),
        retention="workqueue",
        storage="file",
        discard="new",
        max_msgs=opts.batch_max_msgs,
        duplicate_window=_ns(opts.duplicate_window_s),
        num_replicas=opts.stream_replicas,
    )


def _edge(
    spec: FlowSpec,
    parent: str,
    child: NodeSpec,
    stream: str,
    names: dict[str, PhysicalName],
    realtime: bool,
    opts: TopologyOptions,
) -> EdgeRoute:
    base = f"{names[parent].subject}.{_last_token(names[child.name])}"
    consumer = names[child.name].k8s
    replicas = child.replicas
    pending = opts.max_ack_pending
    if child.is_join:  # a join holds up to max_pending groups' halves unacknowledged
        policy = child.join_policy or JoinPolicy.default_for(spec.flow_type)
        pending += policy.max_pending
    ack_wait = _ns(opts.ack_wait_s)
    max_deliver = 1 if realtime else -1

    def config(durable: str, subjects: tuple[str, ...]) -> ConsumerConfig:
        for subject in subjects:
            _checked("subject", subject, nats_subject_problem(subject), spec.name)
        _checked("consumer name", durable, nats_name_problem(durable), spec.name)
        return ConsumerConfig(durable, subjects, ack_wait, max_deliver, pending)

    if child.partition_by is not None and replicas > 1:
        subjects = tuple(f"{base}.p{p}" for p in range(replicas))
        consumers = tuple(
            TopologyConsumer(
                stream, parent, child.name, p, (p,), config(f"{consumer}_r{p}", (subjects[p],))
            )
            for p in range(replicas)
        )
        return EdgeRoute(
            parent,
            child.name,
            "partitioned",
            stream,
            subjects,
            consumers,
            child.partition_by,
            opts.strategy,
        )
    routing: Routing = "competing" if replicas > 1 or child.name in opts.scalable else "single"
    shared = TopologyConsumer(stream, parent, child.name, None, (), config(consumer, (base,)))
    return EdgeRoute(
        parent, child.name, routing, stream, (base,), (shared,), strategy=opts.strategy
    )
