"""Live backlogs of a broker run: each node's lag on each parent, read from NATS JetStream.

A node's backlog on a parent is what KEDA's ``nats-jetstream`` scaler reads:
``num_pending + num_ack_pending`` of the node's durable consumer in the
parent's output stream, summed over the edge's consumers (one per partition for
a partitioned child, see :func:`vfcore.broker_topology`). Two ways to read it:

* :func:`read_lags`: raw JetStream API requests
  (``$JS.API.CONSUMER.INFO.<stream>.<consumer>``) on a connection the caller
  already holds — ``vf scale --broker`` and ``vf run --broker --autoscale``;
* :func:`read_lags_http`: the HTTP monitoring endpoint
  (``/jsz?acc=$G&consumers=true&config=true``), exactly the document KEDA reads.

Anything not read is a :class:`LagReading` with ``value=None`` and a reason —
never 0: an unreachable server (``unreachable``), no answer in time
(``timeout``), no JetStream (``no-jetstream``), a stream or consumer the run has
not created (``stream-missing``, ``consumer-missing``: the run has not started
or the run id is wrong), a refused request (``refused``) or an answer that is
not what the API documents (``bad-reply``). An edge is known only when every
one of its consumers was read.

:func:`observe` does it all from synchronous code (connect, read, close, all
bounded) and returns the observations ``vf scale`` builds from a file.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

from vfcore import InvalidInputError
from vfcore.flow import FlowSpec
from vfcore.runtime import (
    BrokerTopology,
    EdgeRoute,
    TopologyConsumer,
    TopologyOptions,
    broker_topology,
)
from vfcore.scaling import Backlog, NodeObservation, Unobserved

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_JSZ_BYTES",
    "REASONS",
    "LagReading",
    "LiveObservations",
    "check_broker_url",
    "check_monitor_url",
    "lag_edges",
    "observe",
    "read_lags",
    "read_lags_http",
    "unknown_everywhere",
]

#: Seconds one request (and the connection) may take before the reading is ``timeout``.
DEFAULT_TIMEOUT_S: Final[float] = 2.0
#: The most bytes of a ``/jsz`` reply read; a larger one is ``bad-reply`` (never half-parsed).
MAX_JSZ_BYTES: Final[int] = 64 * 1024 * 1024
#: Concurrent CONSUMER.INFO requests in flight on one connection.
MAX_IN_FLIGHT: Final[int] = 64
#: Every reason a reading can be unknown for.
REASONS: Final[tuple[str, ...]] = (
    "unreachable",
    "timeout",
    "no-jetstream",
    "stream-missing",
    "consumer-missing",
    "refused",
    "bad-reply",
)
#: JetStream API error codes (nats-server's errors.json): consumer not found, stream not found.
_CONSUMER_NOT_FOUND: Final[int] = 10014
_STREAM_NOT_FOUND: Final[int] = 10059
_BROKER_SCHEMES: Final[frozenset[str]] = frozenset({"nats", "tls", "ws", "wss"})

Method = Literal["jetstream-api", "monitoring-http"]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LagReading:
    """One node's backlog on one parent: ``value`` = pending + ack_pending, or None and why.

    ``reason`` is one of :data:`REASONS` (None when read); ``detail`` says what
    failed in words; ``consumers`` are the ``stream/consumer`` pairs read (summed).
    """

    value: int | None
    reason: str | None = None
    detail: str = ""
    pending: int | None = None
    ack_pending: int | None = None
    consumers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.value is None) == (self.reason is None):
            raise ValueError("a LagReading has a value or a reason, exactly one")
        if self.value is not None and (
            self.pending is None
            or self.ack_pending is None
            or self.pending + self.ack_pending != self.value
        ):
            raise ValueError("a known LagReading's value is pending + ack_pending")

    @property
    def known(self) -> bool:
        return self.value is not None

    def observation(self) -> Backlog | Unobserved:
        """What ``vfcore.scaling`` takes: a :class:`Backlog`, or :class:`Unobserved` (never 0)."""
        if self.pending is not None and self.ack_pending is not None and self.reason is None:
            return Backlog(self.pending, self.ack_pending)
        return Unobserved(f"{self.reason}: {self.detail}" if self.detail else str(self.reason))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "lag": self.value,
            "pending": self.pending,
            "ack_pending": self.ack_pending,
            "consumers": list(self.consumers),
        }
        if self.reason is not None:
            out["unknown"] = self.reason
            out["detail"] = self.detail
        return out


def _known(pending: int, ack_pending: int, consumers: tuple[str, ...]) -> LagReading:
    return LagReading(pending + ack_pending, None, "", pending, ack_pending, consumers)


def _unknown(reason: str, detail: str, consumers: tuple[str, ...] = ()) -> LagReading:
    return LagReading(None, reason, detail, consumers=consumers)


def _label(consumer: TopologyConsumer) -> str:
    return f"{consumer.stream}/{consumer.name}"


def lag_edges(
    topology: BrokerTopology, children: Iterable[str] | None = None
) -> tuple[EdgeRoute, ...]:
    """The edges whose lags are read: all of them, or those into ``children``."""
    if children is None:
        return topology.edges
    wanted = set(children)
    return tuple(edge for edge in topology.edges if edge.child in wanted)


def _combine(edge: EdgeRoute, parts: list[LagReading]) -> LagReading:
    """One edge's reading from its consumers' (summed; unknown if any one is unknown)."""
    labels = tuple(_label(c) for c in edge.consumers)
    failed = [(c, r) for c, r in zip(edge.consumers, parts, strict=True) if not r.known]
    if failed:
        consumer, first = failed[0]
        detail = first.detail
        if len(edge.consumers) > 1:
            detail = (
                f"{len(failed)} of {len(edge.consumers)} consumers of {edge.parent} → "
                f"{edge.child} not read (first: {consumer.name}: {first.detail})"
            )
        return _unknown(str(first.reason), detail, labels)
    pending = sum(r.pending or 0 for r in parts)
    ack = sum(r.ack_pending or 0 for r in parts)
    return _known(pending, ack, labels)


def _count(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _from_consumer_info(data: Mapping[str, Any], where: str) -> LagReading:
    pending, ack = _count(data, "num_pending"), _count(data, "num_ack_pending")
    if pending is None or ack is None:
        return _unknown(
            "bad-reply",
            f"{where}: num_pending={data.get('num_pending')!r}, "
            f"num_ack_pending={data.get('num_ack_pending')!r} are not counts",
        )
    return _known(pending, ack, ())


# -- the JetStream API, on a connection the caller holds -----------------------------------------


async def _consumer_info(nc: Any, consumer: TopologyConsumer, timeout_s: float) -> LagReading:
    from nats import errors as nats_errors

    subject = f"$JS.API.CONSUMER.INFO.{consumer.stream}.{consumer.name}"
    where = f"consumer {consumer.name} of stream {consumer.stream}"
    try:
        msg = await nc.request(subject, b"", timeout=timeout_s)
    except nats_errors.NoRespondersError:
        return _unknown("no-jetstream", f"no JetStream answers {subject} (is -js enabled?)")
    except (TimeoutError, nats_errors.TimeoutError):
        return _unknown("timeout", f"{where}: no answer within {timeout_s:g} s")
    except (nats_errors.ConnectionClosedError, nats_errors.StaleConnectionError, OSError) as exc:
        return _unknown("unreachable", f"{where}: the connection is gone ({_describe(exc)})")
    except nats_errors.Error as exc:
        return _unknown("refused", f"{where}: {_describe(exc)}")
    try:
        data = json.loads(msg.data)
    except (ValueError, RecursionError):
        return _unknown("bad-reply", f"{where}: the answer is not JSON")
    if not isinstance(data, dict):
        return _unknown("bad-reply", f"{where}: the answer is not a JSON object")
    error = data.get("error")
    if error is not None:
        code = error.get("err_code") if isinstance(error, dict) else None
        text = error.get("description", error) if isinstance(error, dict) else error
        if code == _CONSUMER_NOT_FOUND:
            return _unknown(
                "consumer-missing",
                f"{where} does not exist (the run has not created it yet, or the run id is wrong)",
            )
        if code == _STREAM_NOT_FOUND:
            return _unknown(
                "stream-missing",
                f"stream {consumer.stream} does not exist (the run has not created it yet, "
                "or the run id is wrong)",
            )
        return _unknown("refused", f"{where}: the server refused: {text} (err_code {code})")
    return _from_consumer_info(data, where)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def read_lags(
    nc: Any,
    topology: BrokerTopology,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    children: Iterable[str] | None = None,
) -> dict[tuple[str, str], LagReading]:
    """``{(parent, child): LagReading}`` for every edge (or those into ``children``).

    ``nc`` is a connected ``nats.aio.client.Client``; it is left open. Each
    consumer is one ``$JS.API.CONSUMER.INFO`` request bounded by ``timeout_s``
    (at most :data:`MAX_IN_FLIGHT` at once), so the whole read takes about
    ``timeout_s`` when the server is slow. Never raises for what the server
    does or does not answer: those are unknown readings.
    """
    _check_timeout(timeout_s)
    edges = lag_edges(topology, children)
    gate = asyncio.Semaphore(MAX_IN_FLIGHT)

    async def one(consumer: TopologyConsumer) -> LagReading:
        async with gate:
            return await _consumer_info(nc, consumer, timeout_s)

    consumers = [c for edge in edges for c in edge.consumers]
    results = await asyncio.gather(*(one(c) for c in consumers))
    by_consumer = dict(zip(((c.stream, c.name) for c in consumers), results, strict=True))
    return {
        (edge.parent, edge.child): _combine(
            edge, [by_consumer[(c.stream, c.name)] for c in edge.consumers]
        )
        for edge in edges
    }


def unknown_everywhere(
    topology: BrokerTopology,
    reason: str,
    detail: str,
    children: Iterable[str] | None = None,
) -> dict[tuple[str, str], LagReading]:
    """Every edge unknown for one reason (the server could not be reached at all)."""
    return {
        (edge.parent, edge.child): _unknown(
            reason, detail, tuple(_label(c) for c in edge.consumers)
        )
        for edge in lag_edges(topology, children)
    }


# -- the HTTP monitoring endpoint, as KEDA reads it ------------------------------------------------


def jsz_url(monitor_url: str, account: str = "$G") -> str:
    """KEDA's request: ``<monitor>/jsz?acc=<account>&consumers=true&config=true``."""
    query = urllib.parse.urlencode({"acc": account, "consumers": "true", "config": "true"})
    return f"{monitor_url.rstrip('/')}/jsz?{query}"


def _fetch_jsz(url: str, timeout_s: float) -> tuple[Any, LagReading | None]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            body = resp.read(MAX_JSZ_BYTES + 1)
    except urllib.error.HTTPError as exc:
        return None, _unknown("refused", f"{url} answered HTTP {exc.code} {exc.reason}")
    except urllib.error.URLError as exc:
        inner = exc.reason
        if isinstance(inner, TimeoutError):
            return None, _unknown("timeout", f"{url}: no answer within {timeout_s:g} s")
        text = inner if isinstance(inner, str) else _describe(inner)
        return None, _unknown("unreachable", f"{url}: {text}")
    except TimeoutError:
        return None, _unknown("timeout", f"{url}: no answer within {timeout_s:g} s")
    except OSError as exc:
        return None, _unknown("unreachable", f"{url}: {_describe(exc)}")
    if len(body) > MAX_JSZ_BYTES:
        return None, _unknown(
            "bad-reply", f"{url}: the reply exceeds {MAX_JSZ_BYTES // (1024 * 1024)} MiB"
        )
    try:
        return json.loads(body), None
    except (ValueError, RecursionError):
        return None, _unknown("bad-reply", f"{url}: the reply is not JSON")


def _jsz_consumers(
    doc: Any, account: str, url: str
) -> tuple[dict[str, dict[str, Mapping[str, Any]]] | None, LagReading | None]:
    """``{stream: {consumer: detail}}`` of ``account`` in a ``/jsz`` document."""
    if not isinstance(doc, dict):
        return None, _unknown("bad-reply", f"{url}: the reply is not a JSON object")
    if doc.get("disabled") is True:
        return None, _unknown("no-jetstream", f"{url}: JetStream is disabled on this server")
    accounts = doc.get("account_details") or []
    if not isinstance(accounts, list):
        return None, _unknown("bad-reply", f"{url}: account_details is not a list")
    streams: dict[str, dict[str, Mapping[str, Any]]] = {}
    for acc in accounts:
        if not isinstance(acc, dict) or acc.get("name") != account:
            continue
        for stream in acc.get("stream_detail") or []:
            if not isinstance(stream, dict) or not isinstance(stream.get("name"), str):
                continue
            consumers = streams.setdefault(stream["name"], {})
            for detail in stream.get("consumer_detail") or []:
                if isinstance(detail, dict) and isinstance(detail.get("name"), str):
                    consumers[detail["name"]] = detail
    return streams, None


def read_lags_http(
    monitor_url: str,
    topology: BrokerTopology,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    account: str = "$G",
    children: Iterable[str] | None = None,
) -> dict[tuple[str, str], LagReading]:
    """The lags from the HTTP monitoring endpoint, as KEDA's nats-jetstream scaler reads them.

    One ``GET /jsz?acc=<account>&consumers=true&config=true`` (bounded by
    ``timeout_s`` and :data:`MAX_JSZ_BYTES`); per consumer, the
    ``num_pending + num_ack_pending`` of the ``consumer_detail`` named like it
    in the ``stream_detail`` named like its stream, in account ``account``
    (``$G`` when the server has no accounts). Where KEDA reports a stream's
    ``last_seq`` for a consumer it cannot find, this says ``consumer-missing``:
    a sequence number is not a backlog. A single server only: KEDA's search
    for a clustered consumer's leader is not done here.
    """
    _check_timeout(timeout_s)
    edges = lag_edges(topology, children)
    url = jsz_url(monitor_url, account)
    doc, failure = _fetch_jsz(url, timeout_s)
    streams = None
    if failure is None:
        streams, failure = _jsz_consumers(doc, account, url)
    out: dict[tuple[str, str], LagReading] = {}
    for edge in edges:
        labels = tuple(_label(c) for c in edge.consumers)
        if failure is not None or streams is None:
            assert failure is not None
            out[(edge.parent, edge.child)] = _unknown(str(failure.reason), failure.detail, labels)
            continue
        parts: list[LagReading] = []
        for consumer in edge.consumers:
            where = f"consumer {consumer.name} of stream {consumer.stream}"
            in_stream = streams.get(consumer.stream)
            if in_stream is None:
                parts.append(
                    _unknown(
                        "stream-missing",
                        f"{url} lists no stream {consumer.stream} in account {account} (the "
                        "run has not created it yet, or the run id is wrong)",
                    )
                )
            elif consumer.name not in in_stream:
                parts.append(
                    _unknown(
                        "consumer-missing",
                        f"{where} is not in {url} (the run has not created it yet, or the "
                        "run id is wrong)",
                    )
                )
            else:
                parts.append(_from_consumer_info(in_stream[consumer.name], where))
        out[(edge.parent, edge.child)] = _combine(edge, parts)
    return out


# -- observe: connect, read, close ----------------------------------------------------------------


@dataclass(frozen=True)
class LiveObservations(Mapping[str, NodeObservation]):
    """The observations read live (a mapping ``{node: NodeObservation}``, as from a file).

    It is what :func:`vfcore.scaling.decide_flow` takes as is; ``readings`` keep
    each edge's :class:`LagReading` (where every value came from), ``source``
    the URL read and ``method`` how (``jetstream-api`` or ``monitoring-http``).
    """

    run_id: str
    source: str
    method: Method
    observations: dict[str, NodeObservation]
    readings: dict[tuple[str, str], LagReading] = field(default_factory=dict)

    def __getitem__(self, node: str) -> NodeObservation:
        return self.observations[node]

    def __iter__(self) -> Iterator[str]:
        return iter(self.observations)

    def __len__(self) -> int:
        return len(self.observations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "method": self.method,
            "run_id": self.run_id,
            "edges": [
                {"parent": parent, "node": child, **reading.to_dict()}
                for (parent, child), reading in self.readings.items()
            ],
        }


def check_broker_url(url: object) -> str:
    """``url`` if it is a NATS client URL (``nats://host:port``), else ``invalid-broker-url``."""
    parsed = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in _BROKER_SCHEMES or not parsed.hostname:
        raise InvalidInputError(
            "invalid-broker-url",
            f"--broker {url!r} is not a NATS server URL (nats://host:port, tls://, ws://, wss://)",
            "e.g. --broker nats://127.0.0.1:4222",
        )
    try:
        parsed.port  # noqa: B018 (raises for a port that is not a number)
    except ValueError as exc:
        raise InvalidInputError(
            "invalid-broker-url", f"--broker {url!r}: {exc}", "e.g. --broker nats://127.0.0.1:4222"
        ) from None
    return str(url)


def check_monitor_url(url: object) -> str:
    """``url`` if it is an HTTP(S) monitoring URL (``http://host:8222``), else ``invalid-monitor-url``."""
    parsed = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    bad = parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname
    if not bad:
        assert parsed is not None
        try:
            parsed.port  # noqa: B018
        except ValueError:
            bad = True
    if bad:
        raise InvalidInputError(
            "invalid-monitor-url",
            f"--monitor {url!r} is not the server's HTTP monitoring URL",
            "e.g. --monitor http://127.0.0.1:8222 (nats-server -m 8222)",
        )
    return str(url)


def _check_timeout(timeout_s: object) -> None:
    if (
        not isinstance(timeout_s, int | float)
        or isinstance(timeout_s, bool)
        or not math.isfinite(timeout_s)
        or not 0 < timeout_s <= 600
    ):
        raise InvalidInputError(
            "invalid-option",
            f"--timeout {timeout_s!r} must be a number of seconds in (0, 600]",
            "e.g. --timeout 2",
        )


async def _read_over_connection(
    url: str,
    topology: BrokerTopology,
    timeout_s: float,
    children: tuple[str, ...],
    credentials: Any = None,
) -> dict[tuple[str, str], LagReading]:
    import nats

    from vfadapters.broker.credentials import BrokerCredentials
    from vfcore.runtime import ADMIN_ROLE

    creds = credentials if credentials is not None else BrokerCredentials()
    options = creds.for_role(topology, ADMIN_ROLE).connect_options(url)

    errors: list[BaseException] = []

    async def on_error(exc: Exception) -> None:  # nats-py would log each one on stderr
        errors.append(exc)

    try:
        # max_reconnect_attempts=0 would retry the first connection forever
        # (nats-py keeps a server with 0 allowed attempts in its pool): 1 and no
        # reconnect means at most two bounded tries.
        nc = await asyncio.wait_for(
            nats.connect(
                url,
                name="vf scale",
                connect_timeout=timeout_s,
                allow_reconnect=False,
                max_reconnect_attempts=1,
                reconnect_time_wait=0.05,
                error_cb=on_error,
                **options,
            ),
            timeout=2 * timeout_s + 1,
        )
    except Exception as exc:
        cause = errors[-1] if errors else exc
        if isinstance(cause, TimeoutError) and not errors:
            detail = f"no connection to {url} within {2 * timeout_s + 1:g} s"
        else:
            detail = f"cannot connect to {url}: {_describe(cause)}"
        return unknown_everywhere(topology, "unreachable", detail, children)
    try:
        return await read_lags(nc, topology, timeout_s=timeout_s, children=children)
    finally:
        with contextlib.suppress(Exception):  # closing a dead connection: nothing left to do
            await asyncio.wait_for(nc.close(), timeout=timeout_s)


def _run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, from a helper thread if this thread runs a loop already."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="vf-observe") as pool:
        return pool.submit(asyncio.run, coro).result()


def observe(
    url: str | None,
    spec: FlowSpec,
    run_id: str,
    *,
    monitor_url: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    options: TopologyOptions | None = None,
    credentials: Any = None,
) -> LiveObservations:
    """Every processor's backlogs on its parents in run ``run_id`` of ``spec``, read now.

    With ``monitor_url`` the HTTP monitoring endpoint is read (KEDA's reading);
    otherwise ``url`` is connected to (bounded: about ``2 × timeout_s`` at most,
    no reconnect) with ``credentials`` (a
    :class:`~vfadapters.broker.credentials.BrokerCredentials`: the run's admin role
    reads consumer info), each consumer's info requested, and the connection closed.
    ``spec`` must be valid (``vfcore.require_valid``); a bad run id raises
    ``invalid-run-id``, a malformed URL ``invalid-broker-url`` or
    ``invalid-monitor-url``. What cannot be read is :class:`Unobserved` with its
    reason, never 0; ``current`` is not known from the broker (None).

    Synchronous: it runs its own event loop (in a helper thread when the calling
    thread already runs one, e.g. a notebook); inside a loop, prefer
    :func:`read_lags` on your connection.
    """
    _check_timeout(timeout_s)
    topology = broker_topology(spec, run_id, options)
    processors = tuple(n.name for n in spec.nodes if n.is_processor)
    method: Method
    if monitor_url is not None:
        source = check_monitor_url(monitor_url)
        method = "monitoring-http"
        readings = read_lags_http(source, topology, timeout_s=timeout_s, children=processors)
    else:
        if url is None:
            raise InvalidInputError(
                "invalid-option",
                "observe() needs a broker URL or a monitoring URL",
                "pass url='nats://host:4222' or monitor_url='http://host:8222'",
            )
        source = check_broker_url(url)
        method = "jetstream-api"
        readings = _run_sync(
            _read_over_connection(source, topology, timeout_s, processors, credentials)
        )
    observations = {
        name: NodeObservation(
            None,
            tuple(
                (parent, readings[(parent, name)].observation())
                for parent in spec.node(name).parents
            ),
        )
        for name in processors
    }
    return LiveObservations(topology.run_id, source, method, observations, readings)
