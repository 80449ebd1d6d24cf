"""GPU plumbing of local runs: each worker's CUDA_VISIBLE_DEVICES and ctx.device.

This host has no GPU. The assignment itself is tested as a pure function in
``tests/unit/test_devices.py``; here real workers report the environment they
got, for a fake inventory handed to ``RunOptions(gpu_inventory=...)`` and for this
host's real (empty) one. Two GPU nodes *really* sharing one card needs a GPU
machine: ``examples/traffic/gpu_share_check.py`` is the prepared script for one
(not run here: no GPU machine was lent to this task).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.flows import read_lines, write_flow
from vfadapters.local import RunOptions, run
from vfcore.runtime.devices import GpuDevice

VF = Path(sys.executable).parent / "vf"


def _gpu_flow(tmp_path: Path, out: Path) -> Path:
    return write_flow(
        tmp_path,
        f"""
        class Where(ProcessorNode):
            def open(self, ctx):   # every replica reports what it was given
                record({str(out)!r}, {{"node": self.name, "replica": ctx.replica,
                                       "device": ctx.device,
                                       "cvd": os.environ.get("CUDA_VISIBLE_DEVICES")}})

            def process(self, x):
                return x

        src = Numbers(40, name="src")
        det = Where(name="det", nb_tasks=2, device_type="gpu")(src)
        pose = Where(name="pose", device_type="gpu", gpu_memory_gib=10)(src)
        cpu = Where(name="cpu")(src)
        flow = Flow([Record("/dev/null", name=n)(p) for n, p in
                     (("s1", det), ("s2", pose), ("s3", cpu))], flow_type=BATCH)
        """,
    )


def _seen(out: Path) -> dict[tuple[str, int], tuple[str | None, str | None]]:
    return {(r["node"], r["replica"]): (r["device"], r["cvd"]) for r in read_lines(out)}


def test_workers_get_the_devices_assigned_on_a_fake_inventory(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    inventory = [GpuDevice(0, "GPU-a", "H100", 81920, 81920)]  # one card for three replicas
    warnings: list[str] = []
    summary = run(
        _gpu_flow(tmp_path, out),
        RunOptions(
            progress=False,
            gpu_inventory=tuple(inventory),
            log_sink=lambda level, text: warnings.append(text),
        ),
    )
    assert summary.status == "completed", summary.error
    seen = _seen(out)
    assert seen[("det", 0)] == ("cuda", "0")
    assert seen[("det", 1)] == ("cuda", "0")
    assert seen[("pose", 0)] == ("cuda", "0")
    assert seen[("cpu", 0)][0] is None  # CPU nodes are left alone
    assert summary.gpu is not None and summary.gpu["status"] == "gpu"
    assert summary.gpu["shared"] == {"0": ["pose/0", "det/0", "det/1"]}
    wraps = [w for w in warnings if "want 2 whole GPU(s); the host has 1" in w]
    assert len(wraps) == 1  # one warning, not one per replica
    assert summary.nodes["det"].devices == {"det/0": "0", "det/1": "0"}


def test_without_a_gpu_gpu_nodes_run_on_the_cpu_and_strict_refuses(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    flow = _gpu_flow(tmp_path, out)
    done = subprocess.run(
        [str(VF), "run", str(flow), "--json"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    seen = _seen(out)
    assert seen[("det", 0)] == seen[("det", 1)] == seen[("pose", 0)] == ("cpu", "")
    assert done.stderr.count("no GPU on this host") == 1
    assert json.loads(done.stdout)["gpu"]["status"] == "cpu-fallback"

    out.unlink()
    done = subprocess.run(
        [str(VF), "run", str(flow), "--gpu-policy", "strict"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 3
    assert "error: gpu-shortfall" in done.stderr
    assert "3 GPU replica(s) need a GPU; the host has 0" in done.stderr
    assert not out.exists()  # refused before anything ran
