"""Bad and oversized input: how fast `vf` answers, and how much memory it takes.

Each figure is a whole `vf` process (wall time and peak RSS of the child, from
``resource.getrusage``), next to a baseline measured in the same run: the same
command on a well-formed input of ordinary size.

- ``plan`` of a flow far larger than its cluster (ten 1,000-replica GPU nodes,
  10,002 pods, on two 4-GPU nodes) against ``plan`` of the traffic example;
- ``explain`` of a node with ``nb_tasks=10**7`` (refused by the replica limit)
  against ``explain`` of the traffic example;
- ``plan --cluster /dev/zero`` (refused at the 512 MiB read limit) and a
  5,001-digit quantity in a dump (an unreadable node) against the normal plan;
- ``vf run`` stopped by SIGTERM to its process group one second in: time from
  the signal to exit, against the run's own duration uninterrupted.

Run: ``python bench/bench_inputs.py [repeats]`` (default 3).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VF = [sys.executable, "-m", "vfadapters.cli"]
TRAFFIC = str(REPO / "examples" / "traffic.py")
GPU_POOL = str(REPO / "examples" / "clusters" / "gpu-pool")
TWO_4GPU = str(REPO / "examples" / "clusters" / "two-4gpu")


def measure(args: list[str], repeats: int, ok: tuple[int, ...] = (0, 2)) -> tuple[float, float]:
    """Median wall seconds and the largest peak RSS (MiB) of ``vf ARGS`` over ``repeats``."""
    times, peaks = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.Popen(
            [*VF, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        times.append(time.perf_counter() - start)
        code = os.waitstatus_to_exitcode(status)
        if code not in ok:
            raise SystemExit(f"vf {' '.join(args)} exited {code}: {proc.stderr.read()[-800:]}")
        peaks.append(usage.ru_maxrss / 1024)
    return statistics.median(times), max(peaks)


def wide_spec(tmp: Path) -> str:
    nodes = [{"name": "src", "kind": "producer"}]
    nodes += [
        {
            "name": f"d{i}",
            "kind": "processor",
            "parents": ["src"],
            "nb_tasks": 1000,
            "device_type": "gpu",
        }
        for i in range(10)
    ]
    nodes.append({"name": "sink", "kind": "consumer", "parents": [f"d{i}" for i in range(10)]})
    path = tmp / "wide.json"
    path.write_text(json.dumps({"name": "wide", "flow_type": "batch", "nodes": nodes}))
    return str(path)


def huge_replicas_flow(tmp: Path) -> str:
    path = tmp / "huge.py"
    path.write_text(
        "from vfcore import BATCH, ConsumerNode, Flow, ProcessorNode, ProducerNode\n"
        "class S(ProducerNode):\n    def next(self): raise StopIteration\n"
        "class D(ProcessorNode):\n    def process(self, x): return x\n"
        "class C(ConsumerNode):\n    def consume(self, x): pass\n"
        "d = D(name='d', nb_tasks=10**7, device_type='gpu')\n"
        "flow = Flow([C(name='c')(d(S(name='s')))], flow_type=BATCH)\n"
    )
    return str(path)


def absurd_quantity_cluster(tmp: Path) -> str:
    folder = tmp / "absurd"
    folder.mkdir()
    nodes = json.loads((Path(GPU_POOL) / "nodes.json").read_text())
    nodes["items"][0]["status"]["allocatable"]["memory"] = "9" * 5001
    (folder / "nodes.json").write_text(json.dumps(nodes))
    (folder / "pods.json").write_text((Path(GPU_POOL) / "pods.json").read_text())
    return str(folder)


def sigterm_stop_s(flow: str, after_s: float) -> tuple[float, int]:
    """Seconds from SIGTERM (to the run's process group) to the run's exit, and its code."""
    proc = subprocess.Popen(
        [*VF, "run", flow, "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(after_s)
    sent = time.perf_counter()
    os.killpg(proc.pid, signal.SIGTERM)
    code = proc.wait(timeout=60)
    return time.perf_counter() - sent, code


def main() -> int:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    rows: list[tuple[str, float, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        base_plan = measure(["plan", TRAFFIC, "--cluster", GPU_POOL, "--json"], repeats)
        rows.append(("plan traffic on gpu-pool (baseline)", *base_plan, "1.0×"))
        wide = measure(["plan", wide_spec(tmp), "--cluster", TWO_4GPU, "--json"], repeats)
        rows.append(("plan 10,002 pods on 2 GPU nodes", *wide, f"{wide[0] / base_plan[0]:.1f}×"))
        zero = measure(["plan", TRAFFIC, "--cluster", "/dev/zero"], repeats)
        rows.append(("plan --cluster /dev/zero (refused)", *zero, f"{zero[0] / base_plan[0]:.1f}×"))
        absurd = measure(["plan", TRAFFIC, "--cluster", absurd_quantity_cluster(tmp)], repeats)
        rows.append(
            ("plan, a 5,001-digit quantity in a dump", *absurd, f"{absurd[0] / base_plan[0]:.1f}×")
        )
        base_explain = measure(["explain", TRAFFIC], repeats)
        rows.append(("explain traffic (baseline)", *base_explain, "1.0×"))
        huge = measure(["explain", huge_replicas_flow(tmp)], repeats)
        rows.append(
            ("explain nb_tasks=10**7 (refused)", *huge, f"{huge[0] / base_explain[0]:.1f}×")
        )
    print(f"{'case':<42} {'median s':>9} {'peak MiB':>9}  ratio to baseline")
    for name, seconds, mib, ratio in rows:
        print(f"{name:<42} {seconds:>9.3f} {mib:>9.0f}  {ratio}")

    flow = str(REPO / "examples" / "traffic" / "flow.py")
    start = time.perf_counter()
    subprocess.run([*VF, "run", flow, "--no-progress"], capture_output=True, check=True)
    whole = time.perf_counter() - start
    stops = [sigterm_stop_s(flow, 1.0) for _ in range(repeats)]
    stop_s = statistics.median(s for s, _ in stops)
    codes = sorted({c for _, c in stops})
    print(
        f"\nvf run examples/traffic/flow.py: {whole:.2f} s uninterrupted; SIGTERM to the group "
        f"1 s in: stopped {stop_s:.2f} s after the signal (median of {repeats}), exit {codes}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
