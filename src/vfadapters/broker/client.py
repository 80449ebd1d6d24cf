"""One NATS connection driven from synchronous code, and the run's objects on the server.

Node code is synchronous (it may block for 50 ms on a frame), nats-py is
asyncio: a :class:`Bridge` runs an event loop in a daemon thread that owns the
connection, so pings, reconnects and acknowledgements go on while a node works;
the worker hands it coroutines (:meth:`Bridge.run` waits, :meth:`Bridge.submit`
does not).

:func:`ensure_topology` creates what :func:`vfcore.broker_topology` lists —
every stream, consumer, the run's control bucket — through the raw JetStream
API with exactly the topology's JSON, leaving what already exists as it is;
:func:`delete_topology` removes it all at the end of a run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from vfadapters.broker.credentials import BrokerCredentials
from vfcore import InvalidInputError
from vfcore.runtime import BrokerTopology

__all__ = [
    "Bridge",
    "BrokerError",
    "api_request",
    "delete_topology",
    "ensure_topology",
    "is_not_found",
    "jetstream_required",
]

T = TypeVar("T")

#: JetStream API error codes (nats-server's errors.json) that mean "no such thing".
NOT_FOUND_CODES = frozenset({10014, 10059, 10037})  # consumer, stream, no message


class BrokerError(InvalidInputError):
    """The server refused what the run asked (``rule``: a stable kebab-case id; the CLI shows it)."""


def shown_url(url: str) -> str:
    """``url`` as it may be printed: a user name and password in it replaced by ``***``."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


@contextlib.contextmanager
def jetstream_required(url: str, needed_for: str) -> Iterator[None]:
    """Name a server that answers but runs without JetStream (``no-jetstream``).

    nats-py reports it as ``NoRespondersError`` (nobody answers ``$JS.API.*``) or
    ``ServiceUnavailableError`` (503); a command that needs JetStream says so with
    the server and what it wanted, instead of an internal error.
    """
    from nats.errors import NoRespondersError
    from nats.js.errors import ServiceUnavailableError

    try:
        yield
    except (NoRespondersError, ServiceUnavailableError):
        raise BrokerError(
            "no-jetstream",
            f"{shown_url(url)} answers, but no JetStream answers its API ($JS.API.*): the "
            f"server runs without JetStream, so {needed_for}",
            "start nats-server with -js (JetStream), or point --broker at one that has it",
        ) from None


def check_broker_url(url: str) -> tuple[str, int]:
    """``(host, port)`` of a ``nats://`` (or ``tls://``) URL; ``invalid-broker-url`` otherwise."""
    parsed = urllib.parse.urlsplit(url.split(",")[0].strip())
    try:
        port = parsed.port or 4222
    except ValueError:
        port = -1
    if parsed.scheme not in ("nats", "tls") or not parsed.hostname or not 0 < port < 65536:
        raise InvalidInputError(
            "invalid-broker-url",
            f"--broker {url!r} is not a NATS URL (nats://host:port)",
            "write nats://host:4222 (tls://… for TLS), or --broker embedded with vf run",
        )
    return parsed.hostname, port


def _is_timeout(exc: BaseException) -> bool:
    import nats.errors

    return isinstance(
        exc, TimeoutError | nats.errors.TimeoutError | concurrent.futures.TimeoutError
    )


def is_not_found(error: dict[str, Any] | None) -> bool:
    return bool(error) and (error or {}).get("err_code") in NOT_FOUND_CODES


async def api_request(
    nc: Any, subject: str, payload: dict[str, Any] | None = None, *, timeout_s: float = 5.0
) -> dict[str, Any]:
    """A raw JetStream API request; the decoded answer (with ``error`` when refused)."""
    body = b"" if payload is None else json.dumps(payload).encode()
    msg = await nc.request(subject, body, timeout=timeout_s)
    answer: dict[str, Any] = json.loads(msg.data)
    return answer


#: what one read of the connection takes at most (nats-py reads 32 KiB at a time, and
#: its stream reader stops reading past twice that: a 1 MiB message took 32 reads,
#: each a task wake-up, and about 16 pauses of the socket)
READ_BUFFER_BYTES = 4 << 20


def read_in_large_pieces() -> None:
    """Make nats-py read the socket :data:`READ_BUFFER_BYTES` at a time (its module
    constant, read at each connection and each read; it has no option for it)."""
    import nats.aio.client

    if getattr(nats.aio.client, "DEFAULT_BUFFER_SIZE", 0) < READ_BUFFER_BYTES:
        nats.aio.client.DEFAULT_BUFFER_SIZE = READ_BUFFER_BYTES


class Bridge:
    """An asyncio loop in a daemon thread with one NATS connection (``nc``, ``js``)."""

    def __init__(self) -> None:
        #: the server's last refusals of this client (``Permissions Violation for …``):
        #: a request it refuses is never answered, so a timeout is told by them
        self.denied: list[str] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="vf-nats", daemon=True)
        self.thread.start()
        self.nc: Any = None
        self.js: Any = None
        self.reconnects = 0
        self.disconnected = False
        self.reconnected_at = -1e18  # monotonic time of the last reconnection
        self.on_reconnect: Any = None  # a coroutine function to run after each reconnection
        self.who = "this client"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result.

        A timeout after the server refused this client something is
        ``broker-permission-denied`` (:meth:`raise_if_denied`), not a timeout.
        """
        seen = len(self.denied)
        try:
            return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)
        except Exception as exc:
            if len(self.denied) > seen and _is_timeout(exc):
                self.raise_if_denied()
            raise

    def raise_if_denied(self) -> None:
        """Raise ``broker-permission-denied`` when the server refused this client something."""
        if not self.denied:
            return
        said = self.denied[-1]
        raise BrokerError(
            "broker-permission-denied",
            f"the NATS server refused {said} to {self.who}: its credentials do not allow it",
            "each role may touch only its own part of a run (docs/security.md): start workers "
            "with --no-create after `vf broker-setup` with the setup role's credentials, and "
            "use the run's admin credentials for vf run, vf dead-letters and vf broker-teardown",
        )

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def connect(
        self,
        url: str,
        *,
        name: str,
        connect_timeout_s: float = 5.0,
        credentials: BrokerCredentials | None = None,
    ) -> None:
        """Connect (once, bounded); afterwards nats-py reconnects on its own, forever.

        The server is first reached with a plain TCP connection, so that a refused
        or unroutable address fails at once with the reason (nats-py, told to
        reconnect forever, would retry the first connection until the timeout).
        ``credentials``: how to prove who we are (:mod:`.credentials`); a server
        that refuses them is ``broker-unauthorized``. No message shows a secret
        (a URL's ``user:password`` is masked).
        """
        import nats

        read_in_large_pieces()
        # several servers of one cluster: nats://a:4222,nats://b:4222 (any of them will do;
        # nats-py also learns the cluster's other servers from the one it reaches)
        servers = [u.strip() for u in url.split(",") if u.strip()] or [url]
        addresses = [check_broker_url(u) for u in servers]
        shown = ",".join(shown_url(u) for u in servers)
        creds = credentials if credentials is not None else BrokerCredentials()
        self.who = f"{name} ({creds.describe()})"
        options = creds.connect_options(servers[0])
        reasons = []
        for host, port in addresses:
            try:
                with socket.create_connection((host, port), timeout=connect_timeout_s):
                    pass
                break
            except OSError as exc:
                reasons.append(str(exc.strerror or exc))
        else:
            raise InvalidInputError(
                "broker-unreachable",
                f"cannot connect to the NATS server at {shown}: {'; '.join(reasons)}",
                "start one (nats-server -js) or use --broker embedded; check host, port and "
                "that JetStream is enabled",
            )

        async def on_disconnect() -> None:
            self.disconnected = True

        async def on_reconnect() -> None:
            self.disconnected = False
            self.reconnects += 1
            self.reconnected_at = time.monotonic()
            if self.on_reconnect is not None:
                with contextlib.suppress(Exception):
                    await self.on_reconnect()

        async def on_error(exc: Exception) -> None:  # logged by the caller's counters
            text = str(exc)
            lower = text.lower()
            if "permissions violation" in lower:
                # 'nats: permissions violation for publish to "subject"': names no secret
                self.denied.append(lower.split("violation for", 1)[-1].strip() or text)
                del self.denied[:-16]
            elif "authorization" in lower and self.nc is None:
                refused.set()  # the first connection: nats-py would retry it forever

        async def go() -> Any:
            return await nats.connect(
                servers,
                name=name,
                connect_timeout=connect_timeout_s,
                allow_reconnect=True,
                max_reconnect_attempts=-1,
                reconnect_time_wait=0.25,
                disconnected_cb=on_disconnect,
                reconnected_cb=on_reconnect,
                error_cb=on_error,
                **options,
            )

        refused = asyncio.Event()

        async def first() -> Any:
            connecting = asyncio.ensure_future(go())
            told = asyncio.ensure_future(refused.wait())
            done, _ = await asyncio.wait({connecting, told}, return_when=asyncio.FIRST_COMPLETED)
            if connecting in done:
                told.cancel()
                return connecting.result()
            connecting.cancel()
            await asyncio.gather(connecting, return_exceptions=True)
            from nats.errors import AuthorizationError

            raise AuthorizationError

        future = self.submit(self._first_connect(first))
        try:
            self.nc = future.result(connect_timeout_s + 5)
        except Exception as exc:
            future.cancel()
            from nats.errors import AuthorizationError

            said = str(exc).lower()
            if isinstance(exc, AuthorizationError) or "authorization" in said:
                raise BrokerError(
                    "broker-unauthorized",
                    f"the NATS server at {shown} refused {name}'s credentials ({creds.describe()})",
                    "give the credentials of this run's role: --broker-nkey-file (the seed from "
                    "the run's Secret), --broker-creds, --broker-user with "
                    "--broker-password-file, or --broker-token-file, or their VF_BROKER_* "
                    "variables (docs/security.md)",
                ) from None
            if isinstance(exc, ssl.SSLError | ssl.CertificateError) or "ssl" in said:
                raise BrokerError(
                    "broker-tls-failed",
                    f"TLS with the NATS server at {shown} failed: {type(exc).__name__}",
                    "check --broker-ca (the CA that signed the server's certificate) and that "
                    "the URL's host is the name in the certificate",
                ) from None
            raise InvalidInputError(
                "broker-unreachable",
                f"cannot connect to the NATS server at {shown}: {type(exc).__name__}"
                + (f": {exc}" if str(exc) else f" after {connect_timeout_s:g} s"),
                "start one (nats-server -js) or use --broker embedded; check host, port and "
                "that JetStream is enabled",
            ) from None
        self.js = self.nc.jetstream(timeout=10.0)

    @staticmethod
    async def _first_connect(go: Any) -> Any:
        # nats.connect() retries the first connection itself only with
        # allow_reconnect and servers it has seen; one attempt is what we want
        return await go()

    def close(self) -> None:
        nc = self.nc
        if nc is not None and not nc.is_closed:
            # what we publish is acknowledged before we get here (the worker waits for
            # its deliveries), so no drain: it waits out pull requests still open on
            # the server, up to its timeout. Flush what is written, then close.
            with contextlib.suppress(Exception):
                self.run(nc.flush(timeout=2), timeout_s=3)
            with contextlib.suppress(Exception):
                self.run(nc.close(), timeout_s=3)

        async def cancel_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if nc is None:  # a connection attempt may still be pending: end it quietly
            with contextlib.suppress(Exception):
                self.run(cancel_rest(), timeout_s=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


#: JetStream's "no suitable peers for placement": a cluster with fewer servers online
#: than a stream's replicas (servers still starting, or away)
NO_PEERS_FOR_PLACEMENT = 10005


async def _create(nc: Any, kind: str, subject: str, config: dict[str, Any]) -> None:
    for _ in range(20):
        answer = await api_request(nc, subject, config)
        error = answer.get("error")
        # nats-server 2.15 may fail a file stream's creation while another stream
        # of the account is being deleted ("could not create storage directory"):
        # transient, so try again
        if not error or error.get("err_code") != 10049:
            break
        await asyncio.sleep(0.1)
    if error:
        hint = (
            "a run id is reused with other settings: pick a new --run, or delete the old run's "
            "streams (vf run --broker deletes them at the end unless --keep-streams)"
        )
        if error.get("err_code") == NO_PEERS_FOR_PLACEMENT:
            hint = (
                "fewer servers of the cluster are online than --stream-replicas asks for: "
                "start them (vf broker-setup --wait waits for them), or lower --stream-replicas"
            )
        raise BrokerError(
            "broker-refused",
            f"the NATS server refused to create {kind} {config.get('name') or config.get('durable_name')}: "
            f"{error.get('description')} (err_code {error.get('err_code')})",
            hint,
        )


async def ensure_topology(nc: Any, topo: BrokerTopology) -> None:
    """Create every stream, consumer and bucket of the run that is not there yet.

    The streams and buckets are asked for (and made) all at once, then the
    consumers (each needs its stream): a run's start waits for two rounds of
    requests, not one per object.
    """

    async def stream(config: dict[str, Any]) -> None:
        info = await api_request(nc, f"$JS.API.STREAM.INFO.{config['name']}")
        if is_not_found(info.get("error")):
            await _create(nc, "stream", f"$JS.API.STREAM.CREATE.{config['name']}", config)
        elif info.get("error"):
            raise BrokerError(
                "broker-refused",
                f"stream {config['name']}: {info['error'].get('description')} "
                f"(err_code {info['error'].get('err_code')})",
                "is JetStream enabled on the server (nats-server -js)? A cluster answers "
                "'temporarily unavailable' while it has no leader",
            )

    async def consumer(c: Any) -> None:
        info = await api_request(nc, f"$JS.API.CONSUMER.INFO.{c.stream}.{c.name}")
        if is_not_found(info.get("error")):
            await _create(
                nc,
                "consumer",
                f"$JS.API.CONSUMER.CREATE.{c.stream}.{c.name}",
                {"stream_name": c.stream, "config": c.config.to_dict()},
            )

    js = nc.jetstream()
    from nats.js.api import KeyValueConfig, StorageType

    async def bucket(name: str, ttl: float | None) -> None:
        try:
            await js.key_value(name)
        except Exception:
            await js.create_key_value(
                KeyValueConfig(
                    bucket=name,
                    history=1,
                    storage=StorageType.FILE,
                    replicas=topo.options.stream_replicas,
                    ttl=ttl,
                )
            )

    first = [stream(config.to_dict()) for config in topo.all_streams()]
    first.append(bucket(topo.control.bucket, None))
    if topo.control.splits:
        # how an input's outputs were cut matters within the duplicate window only
        first.append(bucket(topo.control.splits, max(topo.options.duplicate_window_s, 60.0)))
    await _all(first)
    await _all([consumer(c) for c in topo.consumers])


async def _all(coros: list[Any]) -> None:
    """Await every one of ``coros`` at once; the first failure is raised once all ended."""
    results = await asyncio.gather(*coros, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


async def delete_topology(
    nc: Any, topo: BrokerTopology, *, dead_letters: bool = False
) -> list[str]:
    """Delete the run's streams and buckets; the names of those that were there.

    The dead-letter stream goes only when it is empty, or with ``dead_letters``.
    """
    deleted: list[str] = []

    async def delete(name: str) -> None:
        answer = await api_request(nc, f"$JS.API.STREAM.DELETE.{name}")
        if answer.get("success"):
            deleted.append(name)

    for config in (c for _, c in topo.streams):
        await delete(config.name)
    if topo.ledger is not None:
        await delete(topo.ledger.name)
    dlq = topo.dead_letters.config.name
    info = await api_request(nc, f"$JS.API.STREAM.INFO.{dlq}")
    if not info.get("error") and (dead_letters or info.get("state", {}).get("messages", 0) == 0):
        await delete(dlq)
    # a KV bucket's stream is KV_<bucket>; the large-payload bucket is a stream of its own name
    buckets = [f"KV_{topo.control.bucket}", topo.control.objects]
    if topo.control.splits:
        buckets.append(f"KV_{topo.control.splits}")
    for bucket in buckets:
        await delete(bucket)
    return deleted
