"""Flows written to a file and run by path, as ``vf run`` runs them.

``write_flow`` puts the node classes the local tests share (``LIB``) in front of a
flow's body; the sinks append one JSON line per item to a file (one ``write`` on
an ``O_APPEND`` descriptor), so what ``read_lines`` reads is what the consumers
saw, even across process deaths. ``vf`` starts the CLI as a subprocess, ``finish``
waits for it, and ``slow_flow`` is a resumable producer slow enough to stop midway.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

VF = Path(sys.executable).parent / "vf"


#: Node classes shared by the flow files of the local tests.
LIB = '''
import json, os, time
from vfcore import (BATCH, REALTIME, ConsumerNode, Flow, JoinPolicy, OneTaskProcessorNode,
                    ProcessorNode, ProducerNode)


def record(path, item):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(item) + "\\n").encode())
    finally:
        os.close(fd)


class Numbers(ProducerNode):
    """0..n-1, each tagged with key i % keys (metadata field 'key')."""

    def __init__(self, n, keys=7, sleep=0.0, **kw):
        super().__init__(**kw)
        self.n, self.keys, self.sleep = n, keys, sleep

    def open(self):
        self.i = 0

    def next(self, ctx):
        if self.n is not None and self.i >= self.n:
            raise StopIteration
        i = self.i
        self.i += 1
        ctx.set_partition_key("key", i % self.keys)
        if self.sleep:
            time.sleep(self.sleep)
        return i


class Tag(ProcessorNode):
    """(tag, x, replica); sleeps `sleep` seconds per item."""

    def __init__(self, tag, sleep=0.0, pid_dir=None, **kw):
        super().__init__(**kw)
        self.tag, self.sleep, self.pid_dir = tag, sleep, pid_dir

    def open(self):
        if self.pid_dir:
            with open(os.path.join(self.pid_dir, f"{self.name}-{os.getpid()}"), "w") as f:
                f.write(str(os.getpid()))

    def process(self, x, ctx):
        if self.sleep:
            time.sleep(self.sleep)
        return {"tag": self.tag, "x": x, "replica": ctx.replica}


class Count(OneTaskProcessorNode):
    """Stateful: how many items of this key this replica has seen so far."""

    def open(self):
        self.seen = {}

    def process(self, x, ctx):
        key = ctx.metadata["key"]
        self.seen[key] = self.seen.get(key, 0) + 1
        return {"x": x, "key": key, "nth": self.seen[key], "replica": ctx.replica}


class Join3(ProcessorNode):
    def process(self, a, b, c, ctx):
        return {"parts": [a, b, c], "trace_id": ctx.trace_id, "replica": ctx.replica}


class Record(ConsumerNode):
    def __init__(self, path, **kw):
        super().__init__(**kw)
        self.path = path

    def consume(self, item):
        record(self.path, item)
'''


def write_flow(tmp_path: Path, body: str, name: str = "flow.py") -> Path:
    path = tmp_path / name
    path.write_text(LIB + textwrap.dedent(body))
    return path


def read_lines(path: Path) -> list[Any]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def vf(*args: object, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(VF), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def slow_flow(tmp_path: Path, out: Path, n: int = 600, sleep: float = 0.004) -> Path:
    return write_flow(
        tmp_path,
        f"""
        class Resumable(Numbers):
            def resume(self, position):
                self.i = position

        src = Resumable({n}, name="src", sleep={sleep})
        work = Tag("w", name="work")(src)
        flow = Flow([Record({str(out)!r}, name="sink")(work)], flow_type=BATCH)
        """,
    )
