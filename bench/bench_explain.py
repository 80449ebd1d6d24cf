"""`vf explain` on a 100-node flow, whole process from start (target: <= 0.6 s median).

Baselines, in the same run: the bare interpreter (`python -c pass`) and the
interpreter importing networkx (vfcore's one heavy import). Also reports which
heavy libraries the explain process imported (none of ortools, kubernetes, torch
may be).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from flows import flow_module_source

TARGET_S = 0.6
HEAVY = ("ortools", "kubernetes", "torch", "numpy", "pandas")


def wall(cmd: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        if done.returncode not in (0,):
            raise SystemExit(f"{cmd} failed ({done.returncode}): {done.stderr[-2000:]}")
    return times


def main() -> int:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    vf = str(Path(sys.executable).with_name("vf"))
    with tempfile.TemporaryDirectory() as tmp:
        flow = Path(tmp) / "flow100.py"
        flow.write_text(flow_module_source(100), encoding="utf-8")
        cmd = [vf, "explain", str(flow), "--json"]
        wall(cmd, 2)  # warm the page cache and bytecode
        explain_s = statistics.median(wall(cmd, repeats))
        bare_s = statistics.median(wall([sys.executable, "-c", "pass"], repeats))
        nx_s = statistics.median(wall([sys.executable, "-c", "import networkx"], repeats))
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from vfadapters.cli import main; "
                f"main(['explain', {str(flow)!r}, '--json']); "
                f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})), "
                "file=sys.stderr)",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        heavy = probe.stderr.strip().splitlines()[-1]
    print(
        f"vf explain (100 nodes, --json), whole process: median {explain_s * 1000:.0f} ms "
        f"over {repeats} runs"
    )
    print(
        f"baseline python -c pass: median {bare_s * 1000:.0f} ms (ratio {explain_s / bare_s:.1f}x)"
    )
    print(
        f"baseline python -c 'import networkx': median {nx_s * 1000:.0f} ms "
        f"(ratio {explain_s / nx_s:.2f}x)"
    )
    print(f"heavy libraries imported by explain: {heavy}")
    verdict = "meets" if explain_s <= TARGET_S else "MISSES"
    print(f"target <= {TARGET_S * 1000:.0f} ms: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
