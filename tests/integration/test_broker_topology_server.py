"""The pure broker topology (vfcore.broker_topology) against a real nats-server.

Every stream and consumer is created from ``topology.to_dict()`` through the raw
JetStream API (``$JS.API.STREAM.CREATE.<name>``, ``$JS.API.CONSUMER.CREATE.<stream>.<name>``)
with exactly that JSON, so what the server validates is the document itself, and
the server's echo of each configuration must equal it. Then messages go through:
each consumer receives exactly the messages of its own subjects.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats
from nats.aio.client import Client
from nats.js.client import JetStreamContext
from nats.js.errors import APIError

from vfadapters.broker.server import NatsServer
from vfcore import FlowSpec, JoinPolicy, NodeSpec, owner_of
from vfcore.runtime import BrokerTopology, TopologyOptions, broker_topology

KEYS = [f"trace-{i}" for i in range(30)]


def chain(flow_type: str, *, name: str = "demo", tasks: int = 1, **child: Any) -> FlowSpec:
    return FlowSpec(
        name,
        flow_type,  # type: ignore[arg-type]
        (
            NodeSpec("camera", "producer"),
            NodeSpec("detector", "processor", ("camera",), nb_tasks=tasks, **child),
            NodeSpec("sink", "consumer", ("detector",)),
        ),
    )


def join_flow() -> FlowSpec:
    return FlowSpec(
        "joined",
        "batch",
        (
            NodeSpec("left", "producer"),
            NodeSpec("right", "producer"),
            NodeSpec(
                "fuse",
                "processor",
                ("left", "right"),
                nb_tasks=2,
                partition_by="trace_id",
                join_policy=JoinPolicy(max_pending=100),
            ),
            NodeSpec("sink", "consumer", ("fuse",)),
        ),
    )


# -- talking to the server ----------------------------------------------------------


async def api(nc: Client, subject: str, payload: dict[str, Any]) -> dict[str, Any]:
    msg = await nc.request(subject, json.dumps(payload).encode(), timeout=5)
    data: dict[str, Any] = json.loads(msg.data)
    assert "error" not in data, f"the server refused {subject}: {data['error']}\nsent: {payload}"
    return data


def assert_echoed(sent: dict[str, Any], echoed: dict[str, Any], what: str) -> None:
    differ = {k: (v, echoed.get(k)) for k, v in sent.items() if echoed.get(k) != v}
    assert not differ, f"{what}: the server stored other values (sent, stored): {differ}"


async def create(nc: Client, topo: BrokerTopology) -> None:
    """Create every stream, then every consumer, from ``topo.to_dict()`` (twice: idempotent)."""
    doc = topo.to_dict()
    streams = [s["config"] for s in doc["streams"]] + [doc["dead_letters"]["config"]]
    if doc["ledger"] is not None:  # BATCH runs keep their books in a ledger stream
        streams.append(doc["ledger"])
    consumers = [c for edge in doc["edges"] for c in edge["consumers"]]
    assert len(streams) == len(topo.all_streams()) and len(consumers) == len(topo.consumers)
    for _ in range(2):  # a restarted worker creates them again: same config, accepted
        for config in streams:
            reply = await api(nc, f"$JS.API.STREAM.CREATE.{config['name']}", config)
            assert_echoed(config, reply["config"], f"stream {config['name']}")
        for consumer in consumers:
            config = consumer["config"]
            subject = f"$JS.API.CONSUMER.CREATE.{consumer['stream']}.{config['durable_name']}"
            reply = await api(nc, subject, {"stream_name": consumer["stream"], "config": config})
            assert_echoed(config, reply["config"], f"consumer {config['durable_name']}")


async def drain(js: JetStreamContext, stream: str, durable: str) -> list[bytes]:
    """Everything the durable has for us now, acknowledged (acks confirmed by the server).

    The server says how many messages wait for the durable (``num_pending``, what
    KEDA reads), so no fetch has to time out; afterwards none may wait or be in flight.
    """
    waiting = (await js.consumer_info(stream, durable)).num_pending
    got: list[bytes] = []
    if waiting:
        sub = await js.pull_subscribe_bind(durable=durable, stream=stream)
        try:
            while len(got) < waiting:
                for msg in await sub.fetch(waiting - len(got), timeout=5):
                    got.append(msg.data)
                    await msg.ack_sync()
        finally:
            await sub.unsubscribe()
    info = await js.consumer_info(stream, durable)
    assert (info.num_pending, info.num_ack_pending) == (0, 0), (durable, info)
    return got


async def stream_messages(js: JetStreamContext, stream: str) -> int:
    return int((await js.stream_info(stream)).state.messages)


def run(server: NatsServer, body: Any) -> None:
    async def main() -> None:
        nc = await nats.connect(server.url, connect_timeout=5, max_reconnect_attempts=0)
        try:
            await body(nc, nc.jetstream(timeout=5))
        finally:
            await nc.close()

    asyncio.run(asyncio.wait_for(main(), timeout=60))


async def publish_everywhere(
    js: JetStreamContext, spec: FlowSpec, topo: BrokerTopology, *, per_subject: int = 3
) -> dict[tuple[str, str], set[bytes]]:
    """Publish to every edge (keyed through owner_of for partitioned ones).

    Returns what each consumer ``(stream, durable)`` must receive.
    """
    expected: dict[tuple[str, str], set[bytes]] = {
        (c.stream, c.name): set() for c in topo.consumers
    }
    for edge in topo.edges:
        if edge.routing == "partitioned":
            child = spec.node(edge.child)
            sends = [(owner_of(child, trace_id=key, strategy=edge.strategy), key) for key in KEYS]
        else:
            sends = [(0, f"m{i}") for i in range(per_subject)]
        for index, key in sends:
            payload = f"{edge.parent}>{edge.child}:{key}".encode()
            ack = await js.publish(
                edge.subjects[index], payload, headers={"Nats-Msg-Id": payload.decode()}
            )
            assert ack.stream == edge.stream and not ack.duplicate
            consumer = edge.consumers[index]
            assert consumer.owner in (None, index)
            expected[(consumer.stream, consumer.name)].add(payload)
    return expected


# -- the tests --------------------------------------------------------------------


def test_batch_chain_streams_consumers_and_competing_replicas(nats_server: NatsServer) -> None:
    spec = chain("batch", tasks=2)
    topo = broker_topology(spec, "batch1")

    async def body(nc: Client, js: JetStreamContext) -> None:
        await create(nc, topo)
        expected = await publish_everywhere(js, spec, topo, per_subject=6)
        # the competing detector ×2: two replicas bound to one durable split the edge
        shared = topo.edge("camera", "detector").consumers[0]
        subs = [
            await js.pull_subscribe_bind(durable=shared.name, stream=shared.stream)
            for _ in range(2)
        ]
        seen: list[list[bytes]] = [[], []]
        for turn in range(6):
            (msg,) = await subs[turn % 2].fetch(1, timeout=2)
            seen[turn % 2].append(msg.data)
            await msg.ack_sync()
        assert all(seen), f"both replicas take work: {seen}"
        assert sorted(seen[0] + seen[1]) == sorted(expected[(shared.stream, shared.name)])
        for sub in subs:
            await sub.unsubscribe()
        assert await drain(js, shared.stream, shared.name) == []  # nothing twice
        single = topo.edge("detector", "sink").consumers[0]
        got = await drain(js, single.stream, single.name)
        assert sorted(got) == sorted(expected[(single.stream, single.name)])
        # work queues: an acknowledged message is gone
        for _, stream in topo.streams:
            assert await stream_messages(js, stream.name) == 0

    run(nats_server, body)


def test_batch_duplicate_message_id_is_stored_once(nats_server: NatsServer) -> None:
    topo = broker_topology(chain("batch"), "dedup1")

    async def body(nc: Client, js: JetStreamContext) -> None:
        await create(nc, topo)
        edge = topo.edge("camera", "detector")
        headers = {"Nats-Msg-Id": "trace-7:camera:0:detector"}
        first = await js.publish(edge.subjects[0], b"out", headers=headers)
        again = await js.publish(edge.subjects[0], b"out", headers=headers)  # after a crash
        assert not first.duplicate and again.duplicate and again.seq == first.seq
        assert await stream_messages(js, edge.stream) == 1
        assert await drain(js, edge.stream, edge.consumers[0].name) == [b"out"]

    run(nats_server, body)


def test_batch_full_stream_refuses_a_publish_and_evicts_nothing(nats_server: NatsServer) -> None:
    topo = broker_topology(chain("batch"), "full1", TopologyOptions(batch_max_msgs=5))

    async def body(nc: Client, js: JetStreamContext) -> None:
        await create(nc, topo)
        edge = topo.edge("camera", "detector")
        for i in range(5):
            await js.publish(edge.subjects[0], b"%d" % i)
        refused = False
        try:
            await js.publish(edge.subjects[0], b"5")
        except APIError:
            refused = True
        assert refused, "discard new: the sixth publish into a 5-message stream is refused"
        got = await drain(js, edge.stream, edge.consumers[0].name)
        assert got == [b"%d" % i for i in range(5)]  # the oldest were kept

    run(nats_server, body)


def test_realtime_keeps_only_the_freshest_per_subject(nats_server: NatsServer) -> None:
    async def body(nc: Client, js: JetStreamContext) -> None:
        for keep in (1, 3):
            spec = chain("realtime")
            topo = broker_topology(spec, f"rt{keep}", TopologyOptions(realtime_keep=keep))
            await create(nc, topo)
            for edge in topo.edges:
                for i in range(10):  # never refused: the oldest of the subject goes
                    await js.publish(edge.subjects[0], b"%d" % i)
            for edge in topo.edges:
                (consumer,) = edge.consumers
                got = await drain(js, consumer.stream, consumer.name)
                assert got == [b"%d" % i for i in range(10 - keep, 10)], (keep, got)

    run(nats_server, body)


def test_partitioned_child_x3_each_replica_receives_only_its_keys(
    nats_server: NatsServer,
) -> None:
    spec = chain("batch", tasks=3, partition_by="trace_id")
    topo = broker_topology(spec, "part1")

    async def body(nc: Client, js: JetStreamContext) -> None:
        await create(nc, topo)
        expected = await publish_everywhere(js, spec, topo)
        edge = topo.edge("camera", "detector")
        assert edge.routing == "partitioned" and len(edge.consumers) == 3
        node = spec.node("detector")
        for replica in range(3):
            (consumer,) = topo.reads("detector", replica)
            got = await drain(js, consumer.stream, consumer.name)
            keys = {k for k in KEYS if owner_of(node, trace_id=k) == replica}
            assert keys, f"30 keys leave partition {replica} empty: pick other keys"
            assert sorted(got) == sorted(f"camera>detector:{k}".encode() for k in keys)
            assert set(got) == expected[(consumer.stream, consumer.name)]
        assert await stream_messages(js, edge.stream) == 0

    run(nats_server, body)


def test_two_parent_join_reads_its_partition_from_both_streams(nats_server: NatsServer) -> None:
    spec = join_flow()
    topo = broker_topology(spec, "join1")

    async def body(nc: Client, js: JetStreamContext) -> None:
        await create(nc, topo)
        expected = await publish_everywhere(js, spec, topo)
        node = spec.node("fuse")
        for replica in range(2):
            reads = topo.reads("fuse", replica)
            assert [c.parent for c in reads] == ["left", "right"]
            keys = {k for k in KEYS if owner_of(node, trace_id=k) == replica}
            for consumer in reads:
                got = await drain(js, consumer.stream, consumer.name)
                assert set(got) == expected[(consumer.stream, consumer.name)]
                assert sorted(got) == sorted(f"{consumer.parent}>fuse:{k}".encode() for k in keys)
        (to_sink,) = topo.edge("fuse", "sink").consumers
        assert len(await drain(js, to_sink.stream, to_sink.name)) == 3

    run(nats_server, body)


def test_two_runs_and_two_flows_on_one_server_see_none_of_each_other(
    nats_server: NatsServer,
) -> None:
    spec = chain("batch", tasks=2)
    # two runs of one flow, and two flows whose names squeeze to the same token
    topos = [
        (spec, broker_topology(spec, "iso-a")),
        (spec, broker_topology(spec, "iso-b")),
        (chain("batch", name="a.b"), broker_topology(chain("batch", name="a.b"), "iso")),
        (chain("batch", name="a_b"), broker_topology(chain("batch", name="a_b"), "iso")),
    ]

    async def body(nc: Client, js: JetStreamContext) -> None:
        for _, topo in topos:  # the server refuses a stream overlapping another's subjects
            await create(nc, topo)
        for sender, (flow, topo) in enumerate(topos):
            expected = await publish_everywhere(js, flow, topo)
            for receiver, (_, other) in enumerate(topos):
                for c in other.consumers:
                    got = await drain(js, c.stream, c.name)
                    want = expected[(c.stream, c.name)] if receiver == sender else set()
                    assert sorted(got) == sorted(want), (sender, receiver, c.name)

    run(nats_server, body)


def test_dead_letter_stream_accepts_each_nodes_dead_letters(nats_server: NatsServer) -> None:
    spec = join_flow()
    topo = broker_topology(spec, "dlq1")

    async def body(nc: Client, js: JetStreamContext) -> None:
        await create(nc, topo)
        dlq = topo.dead_letters
        for node in spec.nodes:
            ack = await js.publish(dlq.subject_of(node.name), node.name.encode())
            assert ack.stream == dlq.config.name
        assert await stream_messages(js, dlq.config.name) == len(spec.nodes)
        # one subject per node, each holding its dead letter
        info = await api(nc, f"$JS.API.STREAM.INFO.{dlq.config.name}", {"subjects_filter": ">"})
        assert info["state"]["subjects"] == {subject: 1 for _, subject in dlq.subjects}

    run(nats_server, body)
