"""Live backlogs (vfadapters.broker.monitor, ``vf scale --broker``) against a real nats-server.

The topology of a flow with a competing node (×2), a partitioned child (×3) and
a join is created from ``broker_topology(...).to_dict()`` through the raw
JetStream API; known numbers of messages are published to the edge subjects,
some fetched and left unacknowledged (ack pending), some acknowledged. The lag
read for each (parent, node) must be exactly pending + ack pending summed over
the edge's consumers — through the JetStream API on a connection
(``read_lags``) and through ``/jsz`` as KEDA reads it (``read_lags_http``).
What cannot be read (a missing consumer, a wrong run id, a stopped server, a
port that does not speak NATS) is unknown with its reason, never 0.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js.client import JetStreamContext

from tests.integration.cli_helpers import REPO, assert_bad_input, one_json_document, run_vf
from vfadapters.broker.monitor import (
    LagReading,
    LiveObservations,
    observe,
    read_lags,
    read_lags_http,
)
from vfadapters.broker.server import NatsServer, free_port
from vfcore import FlowSpec, JoinPolicy, NodeSpec, require_valid
from vfcore.runtime import BrokerTopology, TopologyConsumer, broker_topology
from vfcore.scaling import Backlog, Unobserved, decide_flow

EXAMPLE_FLOW = REPO / "examples" / "realtime_scaling.py"


def mixed_flow(name: str = "lagdemo") -> FlowSpec:
    """camera → det (competing ×2), track (partitioned ×3) → fuse (a join) → sink."""
    return require_valid(
        FlowSpec(
            name,
            "batch",
            (
                NodeSpec("camera", "producer"),
                NodeSpec("det", "processor", ("camera",), nb_tasks=2),
                NodeSpec("track", "processor", ("camera",), nb_tasks=3, partition_by="trace_id"),
                NodeSpec(
                    "fuse", "processor", ("det", "track"), join_policy=JoinPolicy(max_pending=50)
                ),
                NodeSpec("sink", "consumer", ("fuse",)),
            ),
        )
    )


# -- talking to the server ----------------------------------------------------------------------


async def api(nc: Client, subject: str, payload: dict[str, Any]) -> dict[str, Any]:
    msg = await nc.request(subject, json.dumps(payload).encode(), timeout=5)
    data: dict[str, Any] = json.loads(msg.data)
    assert "error" not in data, f"the server refused {subject}: {data['error']}"
    return data


async def create(
    nc: Client, topo: BrokerTopology, *, skip: Callable[[TopologyConsumer], bool] | None = None
) -> None:
    """Every stream and consumer of ``topo`` (but those ``skip`` names), from ``to_dict()``."""
    for config in topo.all_streams():
        await api(nc, f"$JS.API.STREAM.CREATE.{config.name}", config.to_dict())
    for consumer in topo.consumers:
        if skip is not None and skip(consumer):
            continue
        await api(
            nc,
            f"$JS.API.CONSUMER.CREATE.{consumer.stream}.{consumer.name}",
            {"stream_name": consumer.stream, "config": consumer.config.to_dict()},
        )


async def publish(js: JetStreamContext, subject: str, count: int, tag: str) -> None:
    for i in range(count):
        await js.publish(subject, f"{tag}:{i}".encode())


async def take(js: JetStreamContext, consumer: TopologyConsumer, fetch: int, ack: int) -> list[Any]:
    """Fetch ``fetch`` messages of ``consumer``, acknowledge ``ack`` of them (confirmed)."""
    sub = await js.pull_subscribe_bind(durable=consumer.name, stream=consumer.stream)
    got: list[Any] = []
    while len(got) < fetch:
        got.extend(await sub.fetch(fetch - len(got), timeout=5))
    for msg in got[:ack]:
        await msg.ack_sync()
    await sub.unsubscribe()  # the unacknowledged ones stay ack pending (ack_wait 30 s)
    return got


def run(server: NatsServer, body: Callable[[Client, JetStreamContext], Awaitable[None]]) -> None:
    async def main() -> None:
        nc = await nats.connect(server.url, connect_timeout=5, max_reconnect_attempts=1)
        try:
            await body(nc, nc.jetstream(timeout=5))
        finally:
            await nc.close()

    asyncio.run(asyncio.wait_for(main(), timeout=60))


def lags(readings: dict[tuple[str, str], LagReading]) -> dict[tuple[str, str], Any]:
    """Each edge as (pending, ack_pending) when read, else its reason."""
    return {
        edge: (r.pending, r.ack_pending) if r.known else r.reason for edge, r in readings.items()
    }


async def load(js: JetStreamContext, topo: BrokerTopology) -> dict[tuple[str, str], Any]:
    """Publish and take known numbers; what every edge must read as (pending, ack_pending)."""
    det = topo.edge("camera", "det")
    await publish(js, det.subjects[0], 7, "det")
    await take(js, det.consumers[0], fetch=3, ack=1)  # 1 gone, 2 ack pending, 4 pending
    track = topo.edge("camera", "track")
    for p, count in enumerate((4, 5, 6)):
        await publish(js, track.subjects[p], count, f"track{p}")
    await take(js, track.consumers[1], fetch=2, ack=0)  # p1: 3 pending + 2 ack pending
    await take(js, track.consumers[2], fetch=6, ack=6)  # p2: all acknowledged
    await publish(js, topo.edge("det", "fuse").subjects[0], 3, "fuse")
    await take(js, topo.edge("det", "fuse").consumers[0], fetch=1, ack=0)
    return {
        ("camera", "det"): (4, 2),
        ("camera", "track"): (4 + 3 + 0, 0 + 2 + 0),
        ("det", "fuse"): (2, 1),
        ("track", "fuse"): (0, 0),  # an existing consumer with nothing waiting: a real 0
        ("fuse", "sink"): (0, 0),
    }


# -- exact counts -----------------------------------------------------------------------------


def test_lags_are_pending_plus_ack_pending_per_parent_by_api_and_by_jsz(
    nats_server: NatsServer,
) -> None:
    spec = mixed_flow()
    topo = broker_topology(spec, "exact1")
    assert len(topo.edge("camera", "track").consumers) == 3

    async def body(nc: Client, js: JetStreamContext) -> None:
        await create(nc, topo)
        expected = await load(js, topo)
        by_api = await read_lags(nc, topo, timeout_s=5)
        assert lags(by_api) == expected
        for edge, reading in by_api.items():
            assert reading.value == sum(expected[edge])
            assert len(reading.consumers) == len(topo.edge(*edge).consumers)
        by_http = read_lags_http(nats_server.monitor_url, topo, timeout_s=5)
        assert lags(by_http) == expected
        # the same connection reads again (vf run --autoscale keeps one): acks show at once
        det = topo.edge("camera", "det").consumers[0]
        await take(js, det, fetch=4, ack=4)
        again = await read_lags(nc, topo, timeout_s=5, children=["det"])
        assert lags(again) == {("camera", "det"): (0, 2)}

    run(nats_server, body)

    # observe(): the observations of every processor, as vf scale builds them from a file
    for monitor in (None, nats_server.monitor_url):
        live = observe(nats_server.url, spec, "exact1", monitor_url=monitor, timeout_s=5)
        assert isinstance(live, LiveObservations)
        assert set(live) == {"det", "track", "fuse"}  # processors only
        assert live.method == ("jetstream-api" if monitor is None else "monitoring-http")
        assert live["det"].parents_map == {"camera": Backlog(0, 2)}
        assert live["track"].parents_map == {"camera": Backlog(7, 2)}
        assert live["fuse"].parents_map == {"det": Backlog(2, 1), "track": Backlog(0, 0)}
        assert live["det"].current is None  # the broker does not know the replica count
        decisions = decide_flow(spec, live, target=1).to_dict()["decisions"]
        assert decisions["track"]["replicas"] == 9  # ceil(9 / 1), within 3..10
        assert decisions["det"]["replicas"] == 2  # ceil(2 / 1), the floor nb_tasks
        assert decisions["fuse"]["diagnosis"] == "starved"  # det backs up, track is empty


# -- unknown, never zero ---------------------------------------------------------------------------


def test_a_missing_consumer_makes_its_parent_unknown_by_api_and_by_jsz(
    nats_server: NatsServer,
) -> None:
    spec = mixed_flow()
    topo = broker_topology(spec, "missing1")
    gone = topo.edge("camera", "track").consumers[1]

    async def body(nc: Client, js: JetStreamContext) -> None:
        await create(nc, topo, skip=lambda c: c.name == gone.name)
        await publish(js, topo.edge("camera", "track").subjects[0], 5, "p0")
        by_api = await read_lags(nc, topo, timeout_s=5)
        by_http = read_lags_http(nats_server.monitor_url, topo, timeout_s=5)
        for readings in (by_api, by_http):
            track = readings[("camera", "track")]
            assert (track.value, track.reason) == (None, "consumer-missing")
            assert track.pending is None and track.ack_pending is None  # not 5, not 0
            assert gone.name in track.detail and "1 of 3 consumers" in track.detail
            assert isinstance(track.observation(), Unobserved)
            assert readings[("camera", "det")].value == 0  # the others are still read

    run(nats_server, body)
    live = observe(nats_server.url, spec, "missing1", timeout_s=5)
    decision = decide_flow(spec, live).to_dict()["decisions"]["track"]
    assert (decision["status"], decision["replicas"]) == ("unknown", None)
    assert decision["parents"]["camera"]["unknown"].startswith("consumer-missing: ")


def test_a_wrong_run_id_reads_nothing(nats_server: NatsServer) -> None:
    spec = mixed_flow()
    topo = broker_topology(spec, "right1")

    async def body(nc: Client, js: JetStreamContext) -> None:
        await create(nc, topo)
        await publish(js, topo.edge("camera", "det").subjects[0], 4, "x")

    run(nats_server, body)
    for monitor in (None, nats_server.monitor_url):
        live = observe(nats_server.url, spec, "wrong1", monitor_url=monitor, timeout_s=5)
        # the run's streams are named after the run id: none of wrong1's exists
        assert {r.reason for r in live.readings.values()} == {"stream-missing"}
        assert all(r.value is None for r in live.readings.values())
        assert decide_flow(spec, live).to_dict()["decisions"]["det"]["replicas"] is None
    live = observe(nats_server.url, spec, "right1", timeout_s=5)  # the right id reads
    assert live.readings[("camera", "det")].value == 4

    async def from_a_running_loop() -> LiveObservations:  # a notebook's situation
        return observe(nats_server.url, spec, "right1", timeout_s=5)

    live = asyncio.run(from_a_running_loop())
    assert live.readings[("camera", "det")].value == 4


def test_a_stopped_server_or_a_port_that_is_not_nats_is_unknown_everywhere(
    fresh_nats_server: NatsServer,
) -> None:
    spec = mixed_flow()
    topo = broker_topology(spec, "gone1")
    run(fresh_nats_server, lambda nc, js: create(nc, topo))
    # a port that answers but does not speak NATS (the HTTP monitor): bounded, unknown
    started = time.monotonic()
    live = observe(
        f"nats://127.0.0.1:{fresh_nats_server.monitor_port}", spec, "gone1", timeout_s=0.5
    )
    assert time.monotonic() - started < 5
    assert {r.reason for r in live.readings.values()} == {"unreachable"}
    fresh_nats_server.stop()
    for monitor in (None, fresh_nats_server.monitor_url):
        started = time.monotonic()
        live = observe(fresh_nats_server.url, spec, "gone1", monitor_url=monitor, timeout_s=1)
        assert time.monotonic() - started < 5
        assert set(live.readings) == {(e.parent, e.child) for e in topo.edges if e.child != "sink"}
        for reading in live.readings.values():
            assert (reading.value, reading.reason) == (None, "unreachable")
            assert "refused" in reading.detail.lower()
        decisions = decide_flow(spec, live).to_dict()["decisions"]
        assert {d["status"] for d in decisions.values()} == {"unknown"}

    # vf scale --broker on the stopped server: an answer (exit 0), every decision unknown
    result = run_vf(
        "scale", _spec_file(spec, fresh_nats_server.store_dir), "--broker",
        fresh_nats_server.url, "--run", "gone1", "--timeout", "1", "--json", script=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    doc = one_json_document(result)
    assert {d["replicas"] for d in doc["decisions"].values()} == {None}
    assert {e["unknown"] for e in doc["observed"]["edges"]} == {"unreachable"}
    text = run_vf(
        "scale", _spec_file(spec, fresh_nats_server.store_dir), "--broker",
        fresh_nats_server.url, "--run", "gone1", "--timeout", "1", script=True,
    )  # fmt: skip
    assert text.returncode == 0 and "Traceback" not in text.stderr
    assert "camera  track  ?" in text.stdout and "unknown: unreachable" in text.stdout


class _NoJetStream(NatsServer):
    """The same nats-server without ``-js``."""

    def command(self) -> list[str]:
        return [arg for arg in super().command() if arg != "-js"]


def test_no_jetstream_and_a_silent_responder_are_unknown(tmp_path: Path) -> None:
    from tests.integration.conftest import _binary

    spec = mixed_flow()
    with _NoJetStream(_binary(), tmp_path / "plain") as server:
        for monitor in (None, server.monitor_url):
            live = observe(server.url, spec, "r1", monitor_url=monitor, timeout_s=2)
            assert {r.reason for r in live.readings.values()} == {"no-jetstream"}

        async def body(nc: Client, js: JetStreamContext) -> None:
            # someone answers nothing on the API subjects: each request times out, bounded
            async def ignore(msg: Any) -> None:
                return None

            other = await nats.connect(server.url, connect_timeout=5, max_reconnect_attempts=1)
            await other.subscribe("$JS.API.CONSUMER.INFO.>", cb=ignore)
            await other.flush()
            started = time.monotonic()
            readings = await read_lags(nc, broker_topology(spec, "r1"), timeout_s=0.5)
            assert time.monotonic() - started < 3  # concurrent: about one timeout in all
            assert {r.reason for r in readings.values()} == {"timeout"}
            await other.close()

        run(server, body)


def test_a_port_with_nothing_listening_is_unreachable() -> None:
    port = free_port()
    live = observe(f"nats://127.0.0.1:{port}", mixed_flow(), "r1", timeout_s=1)
    assert {r.reason for r in live.readings.values()} == {"unreachable"}
    live = observe(None, mixed_flow(), "r1", monitor_url=f"http://127.0.0.1:{port}", timeout_s=1)
    assert {r.reason for r in live.readings.values()} == {"unreachable"}


# -- vf scale --broker end to end -----------------------------------------------------------------


def _spec_file(spec: FlowSpec, folder: Path) -> Path:
    path = folder / f"{spec.name}.json"
    path.write_text(spec.to_json(), encoding="utf-8")
    return path


def test_vf_scale_broker_end_to_end_on_the_example_flow(nats_server: NatsServer) -> None:
    """examples/realtime_scaling.py (REALTIME: each edge keeps its freshest message)."""
    from vfadapters.cli.inputs import load_spec

    spec = load_spec(str(EXAMPLE_FLOW))
    topo = broker_topology(spec, "r1")

    async def body(nc: Client, js: JetStreamContext) -> None:
        await create(nc, topo)
        await publish(js, topo.edge("frames", "detector").subjects[0], 5, "f")  # keeps 1
        for subject in topo.edge("detector", "fuse").subjects:
            await publish(js, subject, 1, "d")

    run(nats_server, body)
    args = ["scale", EXAMPLE_FLOW, "--broker", nats_server.url, "--run", "r1", "--target", "1"]
    result = run_vf(*args, "--json", script=True)
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    assert doc["observed"]["method"] == "jetstream-api"
    assert doc["observed"]["source"] == nats_server.url
    edges = {(e["parent"], e["node"]): e for e in doc["observed"]["edges"]}
    assert (edges[("frames", "detector")]["pending"], edges[("frames", "detector")]["lag"]) == (
        1,
        1,
    )
    assert edges[("detector", "fuse")]["lag"] == 2  # one per partition, summed
    assert len(edges[("detector", "fuse")]["consumers"]) == 2
    detector = doc["decisions"]["detector"]
    assert detector["parents"]["frames"] == {"pending": 1, "ack_pending": 0, "lag": 1, "wants": 1}
    assert detector["status"] == "known"
    # the same through /jsz, and in text
    result = run_vf(*args, "--monitor", nats_server.monitor_url, script=True)
    assert result.returncode == 0, result.stderr
    assert f"backlogs read live from {nats_server.monitor_url} (HTTP monitoring /jsz" in (
        result.stdout
    )
    assert "frames    detector  1    1        0            1          ok" in result.stdout


@pytest.mark.parametrize(
    ("extra", "rule"),
    [
        (["--observations", "examples/observations.json", "--broker", "nats://127.0.0.1:4222",
          "--run", "r1"], "invalid-option"),
        ([], "invalid-option"),
        (["--broker", "nats://127.0.0.1:4222"], "invalid-option"),
        (["--observations", "examples/observations.json", "--run", "r1"], "invalid-option"),
        (["--broker", "nats://127.0.0.1:4222", "--run", "no spaces"], "invalid-run-id"),
        (["--broker", "http://127.0.0.1:4222", "--run", "r1"], "invalid-broker-url"),
        (["--monitor", "nats://127.0.0.1:8222", "--run", "r1"], "invalid-monitor-url"),
        (["--broker", "nats://127.0.0.1:4222", "--run", "r1", "--timeout", "0"], "invalid-option"),
    ],
)  # fmt: skip
def test_vf_scale_source_arguments_are_checked(extra: list[str], rule: str) -> None:
    assert_bad_input(run_vf("scale", EXAMPLE_FLOW, *extra), rule)
