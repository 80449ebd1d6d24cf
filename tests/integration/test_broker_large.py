"""Large payloads through a broker run: numpy arrays of 1 and 8 MiB, bytes of 3 MiB.

producer → processor → sink, every replica a ``vf worker`` process. The
processor adds 1 to each array *in place* (numpy refuses a read-only array, so
this proves the worker hands the node a writable array), the sink writes the
SHA-256 of what it got, and the test compares it with what it should be.

* Against the session's ``nats_server`` (NATS's default 1 MiB message limit)
  every payload is above the limit: each goes through the run's large-payload
  bucket (:mod:`vfadapters.broker.payloads`). The run keeps its streams, so the
  test can then read the bucket over the raw JetStream API: it was used and it
  holds 0 messages — each record was freed once consumed. ``delete_topology``
  then removes every stream of the run, the bucket included.
* Through ``--broker embedded`` (8 MiB messages) the 1 MiB arrays travel as
  plain messages and the 8 MiB ones through the bucket.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from pathlib import Path
from typing import Any

import nats
import numpy as np

from tests.support.flows import read_lines, write_flow
from vfadapters.broker.client import api_request, delete_topology, is_not_found
from vfadapters.broker.run import BrokerRunOptions, run_on_broker
from vfadapters.broker.server import NatsServer
from vfadapters.loading import load_runnable
from vfadapters.runtime.options import RunOptions
from vfcore.runtime import BrokerTopology, broker_topology

MIB = 1 << 20
#: (index, kind, bytes): what the producer emits, in this order
ITEMS = (
    (0, "array", MIB),
    (1, "array", 8 * MIB),
    (2, "bytes", 3 * MIB),
    (3, "array", MIB),
    (4, "array", 8 * MIB),
    (5, "bytes", 3 * MIB),
)

BODY = """
import hashlib
import numpy as np

ITEMS = {items!r}


def payload(i, kind, size):
    rng = np.random.default_rng(1000 + i)
    data = rng.integers(0, 256, size, dtype=np.uint8)
    if kind == "bytes":
        return data.tobytes()
    return data.reshape(size // 1024, 1024)


class Big(ProducerNode):
    def open(self):
        self.todo = list(ITEMS)

    def next(self):
        if not self.todo:
            raise StopIteration
        i, kind, size = self.todo.pop(0)
        return {{"i": i, "kind": kind, "data": payload(i, kind, size)}}


class Bump(ProcessorNode):
    def process(self, item):
        data = item["data"]
        if isinstance(data, np.ndarray):
            data += 1          # in place: raises on a read-only array
            data[0, 0] = 7     # and a plain item assignment too
            item["writable"] = bool(data.flags.writeable)
        return item


class Digest(ConsumerNode):
    def __init__(self, path, **kw):
        super().__init__(**kw)
        self.path = path

    def consume(self, item):
        data = item["data"]
        raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
        record(self.path, {{
            "i": item["i"],
            "type": type(data).__name__,
            "shape": list(getattr(data, "shape", ())),
            "dtype": str(getattr(data, "dtype", "")),
            "nbytes": len(raw),
            "sha256": hashlib.sha256(raw).hexdigest(),
            "writable": item.get("writable"),
        }})


src = Big(name="src")
bump = Bump(name="bump")(src)
sink = Digest({out!r}, name="sink")(bump)
flow = Flow([sink], flow_type=BATCH)
"""


def expected() -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for i, kind, size in ITEMS:
        data = np.random.default_rng(1000 + i).integers(0, 256, size, dtype=np.uint8)
        if kind == "bytes":
            raw = data.tobytes()
            out[i] = {"type": "bytes", "shape": [], "writable": None}
        else:
            arr = data.reshape(size // 1024, 1024)
            arr += 1
            arr[0, 0] = 7
            raw = arr.tobytes()
            out[i] = {"type": "ndarray", "shape": [size // 1024, 1024], "writable": True}
            out[i]["dtype"] = "uint8"
        out[i].update(nbytes=size, sha256=hashlib.sha256(raw).hexdigest())
    return out


def check_sink(out: Path) -> None:
    want = expected()
    lines = read_lines(out)
    assert sorted(line["i"] for line in lines) == sorted(want), lines
    for line in lines:
        ref = want[line["i"]]
        for key, value in ref.items():
            assert line[key] == value, (line["i"], key, line[key], value)


def make_flow(tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "out.jsonl"
    return write_flow(tmp_path, BODY.format(items=ITEMS, out=str(out))), out


def check_summary(summary: Any) -> None:
    assert summary.status == "completed", summary.error
    assert {n: v.processed for n, v in summary.nodes.items()} == dict.fromkeys(
        ("src", "bump", "sink"), len(ITEMS)
    )
    assert summary.dead_letters == 0


def stream_info(url: str, names: list[str]) -> dict[str, dict[str, Any]]:
    async def main() -> dict[str, dict[str, Any]]:
        nc = await nats.connect(url, max_reconnect_attempts=0)
        try:
            return {n: await api_request(nc, f"$JS.API.STREAM.INFO.{n}") for n in names}
        finally:
            await nc.close()

    return asyncio.run(main())


def delete_streams(url: str, names: list[str]) -> None:
    async def main() -> None:
        nc = await nats.connect(url, max_reconnect_attempts=0)
        try:
            for name in names:
                await api_request(nc, f"$JS.API.STREAM.DELETE.{name}")
        finally:
            await nc.close()

    asyncio.run(main())


def delete_run(url: str, topo: BrokerTopology) -> None:
    async def main() -> None:
        nc = await nats.connect(url, max_reconnect_attempts=0)
        try:
            await delete_topology(nc, topo)
        finally:
            await nc.close()

    asyncio.run(main())


def test_large_arrays_and_bytes_go_through_the_bucket_and_are_freed(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    flow, out = make_flow(tmp_path)
    run_id = f"big{uuid.uuid4().hex[:10]}"
    _, spec = load_runnable(str(flow))
    opts = RunOptions(progress=False, handle_signals=False)
    bopts = BrokerRunOptions(broker=nats_server.url, run_id=run_id, keep_streams=True)
    topo = broker_topology(spec, run_id, bopts.topology)
    objects = topo.control.objects
    try:
        summary = run_on_broker(str(flow), opts, bopts)
        check_summary(summary)
        assert summary.transport is not None and summary.transport["streams_kept"] is True
        check_sink(out)

        info = stream_info(nats_server.url, [objects])[objects]
        assert not info.get("error"), info  # the bucket was created: the large path was taken
        state = info["state"]
        # every record went through it (two hops per item, at least one chunk each) ...
        assert state["last_seq"] >= 2 * len(ITEMS), state
        # ... and was deleted once the message that referenced it was acknowledged
        assert state["messages"] == 0, state
        assert state["bytes"] == 0, state
    finally:
        delete_run(nats_server.url, topo)
    names = [c.name for c in topo.all_streams()] + [f"KV_{topo.control.bucket}", objects]
    left = sorted(
        n
        for n, i in stream_info(nats_server.url, names).items()
        if not is_not_found(i.get("error"))
    )
    if left:  # leave the session's server clean whatever happens
        delete_streams(nats_server.url, left)
    assert left == [], f"streams left after delete_topology: {left}"


def test_large_payloads_through_an_embedded_broker(tmp_path: Path) -> None:
    flow, out = make_flow(tmp_path)
    opts = RunOptions(progress=False, handle_signals=False)
    bopts = BrokerRunOptions(broker="embedded", run_id=f"big{uuid.uuid4().hex[:10]}")
    summary = run_on_broker(str(flow), opts, bopts)
    check_summary(summary)
    assert summary.transport is not None and summary.transport["broker"] == "embedded"
    check_sink(out)
