"""Rollouts (issue 26, item 8): two generations of one node of a REALTIME run on a real
nats-server, as `vf deploy --rollout surge|drain` makes Kubernetes run them.

Every pod runs ``vf worker``; a Deployment's pods all read the node's one durable
consumer as replica 0. Here the processor's first generation runs while items
flow; then either **surge** (the second generation starts and processes, *then* the
first gets SIGTERM) or **drain** (the first gets SIGTERM and exits, *then* the second
starts). Checked: the retired generation exits 0 after finishing what it held; no
item is processed by both generations or twice by one; every item either generation
processed (and so acknowledged) reaches the sink exactly once; and with the edges
keeping every frame (``realtime_keep`` above the item count) no item is lost at all —
what the old generation had not taken waits in the stream for the new one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.cli_helpers import REPO
from vfadapters.broker.client import Bridge, ensure_topology
from vfadapters.broker.keys import new_run_key, write_run_key
from vfadapters.broker.server import NatsServer
from vfadapters.loading import load_runnable
from vfcore.runtime import TopologyOptions, broker_topology

N_ITEMS = 600

FLOW = '''
import os, time
from vfcore import REALTIME, ConsumerNode, Flow, ProcessorNode, ProducerNode

OUT = {out!r}


class Numbers(ProducerNode):
    def open(self):
        self.i = 0

    def next(self):
        if self.i >= {n}:
            raise StopIteration
        self.i += 1
        time.sleep(0.004)
        return self.i - 1


class Work(ProcessorNode):
    """Each item it processes goes to its generation's file (GEN), once it is done."""

    def open(self):
        self.fd = os.open(OUT + ".work." + os.environ["GEN"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def process(self, x, ctx):
        time.sleep(0.006)  # slower than the source: a backlog waits in the stream
        os.write(self.fd, ("%d\\n" % x).encode())
        return x

    def close(self):
        os.close(self.fd)


class Record(ConsumerNode):
    def open(self):
        self.fd = os.open(OUT + ".sink", os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def consume(self, x):
        os.write(self.fd, ("%d\\n" % x).encode())

    def close(self):
        os.close(self.fd)


flow = Flow([Record(name="sink")(Work(name="work")(Numbers(name="src")))], flow_type=REALTIME)
'''


def _lines(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


class Rollout:
    def __init__(self, server: NatsServer, folder: Path) -> None:
        self.folder = folder
        self.out = folder / "out"
        self.flow = folder / "flow.py"
        self.flow.write_text(textwrap.dedent(FLOW.format(out=str(self.out), n=N_ITEMS)))
        self.run_id = f"ro{uuid.uuid4().hex[:8]}"
        self.url = server.url
        self.key = folder / "run.key"
        write_run_key(self.key, new_run_key())
        # what `vf broker-setup` does, with edges that keep every frame: a loss shows
        _, spec = load_runnable(str(self.flow))
        topo = broker_topology(spec, self.run_id, TopologyOptions(realtime_keep=100_000))
        bridge = Bridge()
        try:
            bridge.connect(self.url, name="rollout test setup")
            bridge.run(ensure_topology(bridge.nc, topo), timeout_s=30)
        finally:
            bridge.close()
        self.procs: list[subprocess.Popen[str]] = []

    def worker(self, node: str, gen: str = "") -> subprocess.Popen[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("POD_NAME", "HOSTNAME")}
        # a Deployment's pods: every one is replica 0 of the node, reading its one consumer
        env.update({"VF_REPLICA": "0", "GEN": gen or "-"})
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "vfadapters.cli",
                "worker",
                str(self.flow),
                "--node",
                node,
                "--broker",
                self.url,
                "--run",
                self.run_id,
                "--no-create",
                "--run-key-file",
                str(self.key),
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def processed(self, gen: str) -> list[int]:
        return _lines(Path(f"{self.out}.work.{gen}"))

    def wait_for(self, what: object, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not what():  # type: ignore[operator]
            assert time.monotonic() < deadline, "timed out"
            assert all(p.poll() in (None, 0) for p in self.procs), [
                p.stderr.read() if p.stderr else "" for p in self.procs if p.poll()
            ]
            time.sleep(0.02)

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()


@pytest.mark.parametrize("how", ["surge", "drain"])
def test_a_rollout_loses_nothing_acknowledged_and_processes_nothing_twice(
    how: str, fresh_nats_server: NatsServer, tmp_path: Path
) -> None:
    r = Rollout(fresh_nats_server, tmp_path)
    try:
        sink = r.worker("sink")
        old = r.worker("work", "old")
        r.wait_for(lambda: Path(f"{r.out}.work.old").exists())  # opened
        src = r.worker("src")
        r.wait_for(lambda: len(r.processed("old")) >= 100)
        if how == "surge":
            new = r.worker("work", "new")
            r.wait_for(lambda: len(r.processed("new")) >= 5)  # both read the consumer
            retired_at = len(r.processed("old"))
            old.send_signal(signal.SIGTERM)
            _, err_old = old.communicate(timeout=30)
        else:
            old.send_signal(signal.SIGTERM)
            _, err_old = old.communicate(timeout=30)
            retired_at = len(r.processed("old"))
            new = r.worker("work", "new")
        assert old.returncode == 0, err_old
        for proc in (src, new, sink):
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
    finally:
        r.stop_all()
    old_items, new_items = r.processed("old"), r.processed("new")
    assert len(old_items) >= retired_at  # what it held when told to stop, it finished
    both = Counter(old_items) + Counter(new_items)
    assert not {x: n for x, n in both.items() if n > 1}, "an item processed twice"
    at_sink = Counter(_lines(Path(f"{r.out}.sink")))
    assert not {x: n for x, n in at_sink.items() if n > 1}, "an item twice at the sink"
    assert set(at_sink) == set(both), "an item processed (acknowledged) did not reach the sink"
    assert set(both) == set(range(N_ITEMS)), (N_ITEMS - len(both), "items lost in the rollout")
    assert new_items, "the new generation processed nothing"
    print(
        f"\n{how}: old generation {len(old_items)} items (SIGTERM after {retired_at}), "
        f"new {len(new_items)}; {len(at_sink)} of {N_ITEMS} at the sink, each once"
    )
