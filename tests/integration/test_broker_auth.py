"""Attacks on a run's broker with credentials, against a real nats-server (issue 24).

The server is configured with the run's ``authorization`` block
(:func:`vfcore.runtime.render_authorization` from one nkey per role), as
``vf run --broker embedded`` and ``vf deploy`` configure theirs. Then, with
plain nats-py (what an attacker would use):

* a client without credentials, or with a seed the server does not list,
  cannot connect — so it can neither publish nor subscribe;
* node A's credentials cannot publish to node B's edges, fetch from B's
  consumer, create a consumer on B's stream, subscribe to B's inbox or to
  everything (``>``), or touch another run's streams; what the server refuses
  is refused by name (``Permissions Violation``), and nothing reaches B;
* the setup role creates the run's topology and can do nothing else;
* ``vf broker-setup`` and ``vf broker-teardown`` take the role's seed from a
  file (``--broker-nkey-file`` or ``VF_BROKER_NKEY_FILE``); without it they exit 2
  with ``broker-unauthorized``, and no seed appears in anything they print.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.integration.cli_helpers import REPO, assert_bad_input, run_vf
from tests.integration.conftest import _binary
from tests.support.flows import write_flow
from vfadapters.broker.client import Bridge, ensure_topology
from vfadapters.broker.credentials import (
    BrokerCredentials,
    authorization_for,
    generate_run_keys,
    generate_seed,
)
from vfadapters.broker.server import NatsServer
from vfadapters.loading import load_runnable
from vfcore.runtime import BrokerTopology, broker_topology, inbox_prefix, node_role

FLOW_TEXT = """
src = Numbers(30, keys=5, name="src", sets_keys=["key"])
work = Tag("w", name="work", nb_tasks=2)(src)
count = Count(name="count", nb_tasks=2, partition_by="key")(src)
sink = Record({a!r}, name="sink")(work)
sink2 = Record({b!r}, name="sink2")(count)
flow = Flow([sink, sink2], flow_type=BATCH)
"""


class Secured:
    """A server that knows one run's roles, the run's topology, and the seeds."""

    def __init__(self, server: NatsServer, topo: BrokerTopology, seeds: dict[str, str], flow: Path):
        self.server = server
        self.topo = topo
        self.seeds = seeds
        self.flow = flow

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    tmp = tmp_path_factory.mktemp("auth")
    flow = write_flow(tmp, FLOW_TEXT.format(a=str(tmp / "a.jsonl"), b=str(tmp / "b.jsonl")))
    _, spec = load_runnable(str(flow))
    topo = broker_topology(spec, "r1")
    seeds = generate_run_keys(topo)
    with NatsServer(_binary(), tmp / "nats", authorization=authorization_for(topo, seeds)) as srv:
        bridge = Bridge()  # the setup role creates the run's topology
        creds = BrokerCredentials(nkey_seed=seeds["setup"]).for_role(topo, "setup")
        bridge.connect(srv.url, name="setup", credentials=creds)
        try:
            bridge.run(ensure_topology(bridge.nc, topo), timeout_s=60)
        finally:
            bridge.close()
        yield Secured(srv, topo, seeds, flow)


class Client:
    """A raw nats-py connection that records what the server refused."""

    def __init__(self) -> None:
        self.nc: Any = None
        self.errors: list[str] = []

    async def connect(self, url: str, **options: Any) -> Client:
        async def on_error(exc: Exception) -> None:
            self.errors.append(str(exc).lower())

        self.nc = await nats.connect(
            url, allow_reconnect=False, connect_timeout=3, error_cb=on_error, **options
        )
        return self

    def refused(self, subject: str) -> bool:
        return any("permissions violation" in e and subject.lower() in e for e in self.errors)

    async def close(self) -> None:
        await self.nc.close()


async def as_role(secured: Secured, role: str, **extra: Any) -> Client:
    options = {
        "nkeys_seed_str": secured.seeds[role],
        "inbox_prefix": inbox_prefix(secured.topo, role),
        **extra,
    }
    return await Client().connect(secured.url, **options)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- strangers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({}, id="no-credentials"),
        pytest.param({"nkeys_seed_str": generate_seed()}, id="a-seed-the-server-does-not-list"),
        pytest.param({"user": "admin", "password": "admin"}, id="a-guessed-password"),
        pytest.param({"token": "s3cret"}, id="a-token"),
    ],
)
def test_a_stranger_cannot_connect_so_cannot_publish_or_subscribe(
    secured: Secured, options: dict[str, Any]
) -> None:
    async def attempt() -> None:
        with pytest.raises(Exception) as caught:
            await Client().connect(secured.url, max_reconnect_attempts=0, **options)
        assert "authorization" in str(caught.value).lower() or isinstance(
            caught.value, nats.errors.NoServersError
        )

    run(attempt())


def test_the_bridge_names_a_refused_connection_at_once(secured: Secured) -> None:
    bridge = Bridge()
    try:
        with pytest.raises(Exception) as caught:
            bridge.connect(
                secured.url,
                name="stranger",
                credentials=BrokerCredentials(nkey_seed=generate_seed()),
            )
    finally:
        bridge.close()
    assert getattr(caught.value, "rule", None) == "broker-unauthorized"
    assert "SU" not in str(caught.value)  # no seed in the message


# -- node A against node B ---------------------------------------------------------


def test_node_a_cannot_publish_to_node_b_edges(secured: Secured) -> None:
    topo = secured.topo
    theirs = topo.edge("work", "sink").subjects[0]  # an edge out of "work"
    mine = topo.edge("src", "work").subjects[0]

    async def attempt() -> None:
        a = await as_role(secured, node_role("src"))
        js = a.nc.jetstream()
        with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
            await js.publish(theirs, b"forged", timeout=1)
        await a.nc.flush()
        assert a.refused(theirs), a.errors
        ack = await js.publish(mine, b"fine", timeout=5)  # its own edge: stored
        assert ack.stream == topo.edge("src", "work").stream
        await a.close()
        admin = await as_role(secured, "admin")  # B's stream got nothing
        info = await admin.nc.jetstream().stream_info(topo.stream_of("work").name)
        assert info.state.messages == 0
        await admin.nc.jetstream().purge_stream(topo.stream_of("src").name)
        await admin.close()

    run(attempt())


def test_node_a_cannot_read_node_b_consumer_nor_make_one(secured: Secured) -> None:
    topo = secured.topo
    (theirs,) = topo.edge("work", "sink").consumers  # sink's consumer on work's stream

    async def attempt() -> None:
        a = await as_role(secured, node_role("count"))
        next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{theirs.stream}.{theirs.name}"
        inbox = a.nc.new_inbox()
        await a.nc.subscribe(inbox)
        await a.nc.publish(next_subject, b'{"batch": 1}', reply=inbox)
        create = f"$JS.API.CONSUMER.CREATE.{theirs.stream}.spy"
        await a.nc.publish(create, b"{}", reply=inbox)
        info = f"$JS.API.STREAM.INFO.{theirs.stream}"
        await a.nc.publish(info, b"", reply=inbox)
        await a.nc.flush()
        await asyncio.sleep(0.2)
        for subject in (next_subject, create, info):
            assert a.refused(subject), (subject, a.errors)
        await a.close()

    run(attempt())


def test_node_a_cannot_subscribe_to_b_inbox_or_to_everything(secured: Secured) -> None:
    topo = secured.topo
    b_inbox = inbox_prefix(topo, node_role("sink"))

    async def attempt() -> None:
        a = await as_role(secured, node_role("work"))
        for subject in (f"{b_inbox}.>", ">", "_INBOX.>", topo.edge("src", "work").subjects[0]):
            await a.nc.subscribe(subject)
        await a.nc.flush()
        await asyncio.sleep(0.2)
        for subject in (f"{b_inbox}.>", ">", "_INBOX.>", topo.edge("src", "work").subjects[0]):
            assert a.refused(subject), (subject, a.errors)
        # its own inbox, as nats-py uses it for replies: allowed
        mine = inbox_prefix(topo, node_role("work"))
        assert not a.refused(mine)
        await a.close()

    run(attempt())


def test_node_a_cannot_use_the_default_inbox(secured: Secured) -> None:
    """A client that ignores its role's inbox prefix gets no reply: it cannot listen on _INBOX."""

    async def attempt() -> None:
        client = Client()
        await client.connect(secured.url, nkeys_seed_str=secured.seeds[node_role("src")])
        with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
            await client.nc.request("$JS.API.INFO", b"", timeout=1)
        assert any("_inbox" in e for e in client.errors), client.errors
        await client.close()

    run(attempt())


def test_node_a_can_do_exactly_its_own_work(secured: Secured) -> None:
    """The positive side: its consumer, its control keys, its ledger; not another node's keys."""
    topo = secured.topo
    control = topo.control
    (mine,) = topo.edge("src", "work").consumers

    async def attempt() -> None:
        a = await as_role(secured, node_role("work"))
        js = a.nc.jetstream()
        sub = await js.pull_subscribe_bind(durable=mine.name, stream=mine.stream)
        with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
            await sub.fetch(1, timeout=0.3)  # allowed; nothing there
        kv = await js.key_value(control.bucket)
        await kv.put(control.stats_key("work", 0), b"{}")
        with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
            await kv.put(control.done_key("src", 0), b"{}")  # another node's key
        with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
            await kv.put(control.stop_key, b"1")  # only the coordinator stops a run
        await a.nc.flush()
        assert a.refused(f"$KV.{control.bucket}.{control.done_key('src', 0)}")
        await a.close()

    run(attempt())


# -- the setup role -------------------------------------------------------------------------


def test_setup_can_only_create(secured: Secured) -> None:
    topo = secured.topo
    subject = topo.edge("src", "work").subjects[0]

    async def attempt() -> None:
        s = await as_role(secured, "setup")
        js = s.nc.jetstream()
        with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
            await js.publish(subject, b"x", timeout=1)
        with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
            await js.delete_stream(topo.stream_of("src").name)
        await s.nc.flush()
        assert s.refused(subject) and s.refused(
            f"$JS.API.STREAM.DELETE.{topo.stream_of('src').name}"
        )
        await s.close()

    run(attempt())


# -- the commands ---------------------------------------------------------------------------


def seed_file(tmp_path: Path, seed: str) -> Path:
    path = tmp_path / "role.nk"
    path.write_text(seed + "\n")
    path.chmod(0o600)
    return path


def no_secret_in(secured: Secured, *texts: str) -> None:
    for text in texts:
        for seed in secured.seeds.values():
            assert seed not in text
            assert seed[:12] not in text


def test_broker_setup_needs_the_setup_seed(secured: Secured, tmp_path: Path) -> None:
    base = ("broker-setup", secured.flow, "--broker", secured.url, "--run", "r1")
    refused = run_vf(*base)
    assert_bad_input(refused, "broker-unauthorized")
    wrong = run_vf(*base, "--broker-nkey-file", seed_file(tmp_path, secured.seeds["admin"]))
    ok = run_vf(*base, "--broker-nkey-file", seed_file(tmp_path, secured.seeds["setup"]))
    assert ok.returncode == 0, ok.stderr
    assert wrong.returncode == 0, wrong.stderr  # the admin may set up too
    as_node = run_vf(*base, "--broker-nkey-file", seed_file(tmp_path, secured.seeds["node:src"]))
    assert_bad_input(as_node, "broker-permission-denied")
    no_secret_in(secured, refused.stderr, ok.stdout, ok.stderr, as_node.stderr)


def test_credentials_come_from_the_environment_too(secured: Secured, tmp_path: Path) -> None:
    import subprocess
    import sys

    path = seed_file(tmp_path, secured.seeds["setup"])
    result = subprocess.run(
        [sys.executable, "-m", "vfadapters.cli", "broker-setup", str(secured.flow),
         "--broker", secured.url, "--run", "r1"],
        cwd=REPO, env={**os.environ, "VF_BROKER_NKEY_FILE": str(path)},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("flags", "rule"),
    [
        pytest.param(("--broker-nkey-file", "/nonexistent.nk"), "broker-credentials-unreadable", id="missing-seed-file"),
        pytest.param(("--broker-user", "alice"), "broker-credentials-conflict", id="user-without-password"),
        pytest.param(("--broker-ca", "/nonexistent.pem"), "broker-credentials-unreadable", id="missing-ca"),
    ],
)  # fmt: skip
def test_bad_credentials_options_exit_2(
    secured: Secured, flags: tuple[str, ...], rule: str
) -> None:
    result = run_vf("broker-setup", secured.flow, "--broker", secured.url, "--run", "r1", *flags)
    assert_bad_input(result, rule)


def test_a_seed_file_that_holds_no_seed_is_named_without_its_content(
    secured: Secured, tmp_path: Path
) -> None:
    path = tmp_path / "bad.nk"
    path.write_text("SUTHISISNOTASEEDATALLBUTITLOOKSLIKEONEXXXXXXXXXXXXXXXXXXX\n")
    result = run_vf(
        "broker-setup", secured.flow, "--broker", secured.url, "--run", "r1",
        "--broker-nkey-file", path,
    )  # fmt: skip
    assert_bad_input(result, "broker-credentials-invalid")
    assert "SUTHISIS" not in result.stderr


def test_a_password_in_the_url_is_never_printed(secured: Secured) -> None:
    host = secured.url.removeprefix("nats://")
    result = run_vf(
        "broker-teardown", secured.flow, "--broker", f"nats://alice:hunter2@{host}", "--run", "r9"
    )
    assert_bad_input(result, "broker-unauthorized")
    assert "hunter2" not in result.stderr + result.stdout


def test_broker_teardown_needs_the_admin_seed(secured: Secured, tmp_path: Path) -> None:
    base = ("broker-teardown", secured.flow, "--broker", secured.url, "--run", "r1")
    as_setup = run_vf(*base, "--broker-nkey-file", seed_file(tmp_path, secured.seeds["setup"]))
    assert_bad_input(as_setup, "broker-permission-denied")
    no_secret_in(secured, as_setup.stderr)


def test_vf_worker_without_credentials_says_so_once(secured: Secured, tmp_path: Path) -> None:
    """A refused worker prints the refusal once (the error block), not also as a log line."""
    result = run_vf("worker", secured.flow, "--node", "src", "--broker", secured.url, "--run", "r1")
    assert_bad_input(result, "broker-unauthorized")
    assert result.stderr.count("broker-unauthorized") == 1, result.stderr
