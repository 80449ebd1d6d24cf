"""The whole ``vf plan`` on heterogeneous GPU pools (targets: ≤ 2 s at 1,000 pods × 200 nodes,
≤ 10 s at 10,000 pods × 2,000 nodes, ≤ 500 MB), against the naive filter-and-score loop.

Instances (``bench/clusters.py``, seeded): GPU nodes with 1, 2, 4 or 8 GPUs drawn at
random (64 cpu, 512Gi, tainted ``nvidia.com/gpu:NoSchedule``, labelled
``nvidia.com/gpu.present=true``, each with its own ``kubernetes.io/hostname``)
plus untainted CPU nodes of the same size; a flow of 18 GPU stages of 1/1/2/4-GPU
pods filling 80 % of the GPUs, and CPU stages (500m, 1Gi) making up the rest:

- ``issue-200``: the issue's pool — 200 GPU nodes + 1 CPU node, 364 GPU pods;
- ``200``: 190 GPU + 10 CPU nodes, 1,000 pods;
- ``2000``: 1,900 GPU + 100 CPU nodes, 10,000 pods.

Per instance, each a fresh process under ``RLIMIT_AS`` 4 GiB (so a runaway run
dies of MemoryError instead of taking the machine):

- ``vf plan --json`` as a user runs it: wall time and peak RSS (``wait4``);
- in one process: ``plan()`` with and without the scheduler model, so the
  model's share (prediction and remedy) of the plan;
- baseline, in the same process: kube-scheduler's own loop (filter and score
  every node for every pod, first node on ties; ``bench_scheduler.naive``),
  timed on 1 % of the pods (at least 20) and extrapolated — one greedy run, where
  the model's verdict takes a tie search and twelve runs.

``--src DIR`` runs the ``vf plan`` processes on another checkout's ``src`` (the
baselines in docs/performance.md come from the commit before the bounds).
``--baseline DIR`` runs each ``vf plan`` twice in the same run, this checkout
and ``DIR`` (another checkout's ``src``, e.g. the commit before issue 27), and
prints the ratio. ``2000-rt`` is the 2,000-node instance as a REALTIME flow:
its processors are Deployments, so PodTopologySpread's default spreading
applies (a BATCH flow's Jobs do not spread).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clusters import empty_pods, gpu_flow, gpu_pool

AS_LIMIT = 4 * 2**30
INSTANCES = {  # name: (GPU nodes, CPU nodes, total pods or None for GPU pods only, targets)
    "issue-200": (200, 1, None, 2.0),
    "200": (190, 10, 1_000, 2.0),
    "2000": (1_900, 100, 10_000, 10.0),
    "2000-rt": (1_900, 100, 10_000, 10.0),
}
MEMORY_TARGET_MB = 500
#: ``--baseline``: runs of each side, alternating; the medians are compared.
REPEATS = 3


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def write(name: str, root: Path) -> Path:
    gpu_nodes, cpu_nodes, total, _ = INSTANCES[name]
    where = root / name
    (where / "cluster").mkdir(parents=True)
    (where / "cluster" / "nodes.json").write_text(
        json.dumps(gpu_pool(gpu_nodes, cpu_nodes=cpu_nodes))
    )
    (where / "cluster" / "pods.json").write_text(json.dumps(empty_pods()))
    spec = gpu_flow(gpu_nodes, total_pods=total)
    if name.endswith("-rt"):
        from dataclasses import replace

        spec = replace(spec, flow_type="realtime")
    (where / "flow.json").write_text(spec.to_json())
    return where


def whole_vf_plan(where: Path, src: str | None) -> tuple[float, float, dict[str, object] | None]:
    """(wall s, peak RSS MB, the JSON plan or None if the process failed)."""
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    cmd = [
        sys.executable,
        "-c",
        "from vfadapters.cli import main; raise SystemExit(main())",
        "plan",
        str(where / "flow.json"),
        "--cluster",
        str(where / "cluster"),
        "--json",
    ]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, preexec_fn=_limit)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    doc = json.loads(text) if proc.returncode in (0, 3) and text else None
    return wall, usage.ru_maxrss / 1024, doc


IN_PROCESS = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
from vfadapters.clusterload import load_cluster
from vfcore import FlowSpec
from vfcore.placement.plan import plan
from vfcore.placement.scheduler import simulate
from bench_scheduler import naive
where = sys.argv[1]
spec = FlowSpec.from_json(open(f"{where}/flow.json").read())
cluster = load_cluster(f"{where}/cluster")
t = time.perf_counter(); without = plan(spec, cluster, predict_scheduler=False)
t_without = time.perf_counter() - t
t = time.perf_counter(); full = plan(spec, cluster); t_full = time.perf_counter() - t
pods = list(full.pods)
t = time.perf_counter(); sim = simulate(pods, cluster, config=full.scheduler.prediction.config)
t_sim = time.perf_counter() - t
sample = pods[: max(20, len(pods) // 100)]
t = time.perf_counter(); bound = naive(sample, cluster, full.scheduler.prediction.config)
t_naive = (time.perf_counter() - t) * len(pods) / len(sample)
agree = bound == list(sim.placements[: len(bound)])
print(json.dumps({"without": t_without, "full": t_full, "sim": t_sim, "naive": t_naive,
                  "agree": agree, "pods": len(pods), "nodes": len(cluster.nodes),
                  "verdict": full.verdict, "scheduler": full.scheduler.to_dict()["verdict"],
                  "with_remedy": full.scheduler.verdict_with_remedy,
                  "cut": list(full.scheduler.cut_short),
                  "exhaustive": full.scheduler.prediction.exhaustive}))
"""


def in_process(where: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", IN_PROCESS, str(where), str(Path(__file__).resolve().parent)],
        capture_output=True,
        text=True,
        preexec_fn=_limit,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    args = sys.argv[1:]
    src = None
    baseline = None
    if args[:1] == ["--src"]:
        src, args = args[1], args[2:]
    if args[:1] == ["--baseline"]:
        baseline, args = args[1], args[2:]
    names = args or list(INSTANCES)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            where = write(name, Path(tmp))
            wall, rss, doc = whole_vf_plan(where, src)
            if baseline is not None and doc is not None:
                walls, base_walls = [wall], []
                base_rss, base_doc = 0.0, None
                for k in range(REPEATS):  # alternate, so both see the same noise
                    base_wall, base_rss, base_doc = whole_vf_plan(where, baseline)
                    base_walls.append(base_wall)
                    if k + 1 < REPEATS:
                        walls.append(whole_vf_plan(where, src)[0])
                new_s, base_s = statistics.median(walls), statistics.median(base_walls)
                base_sched = (base_doc or {}).get("scheduler") or {}
                sched = doc.get("scheduler") or {}
                print(
                    f"{name}: vf plan median {new_s:.2f} s {[round(w, 2) for w in walls]} / "
                    f"{rss:.0f} MB (verdict {sched.get('verdict')}, stranded "
                    f"{sched.get('stranded_range')}); baseline median {base_s:.2f} s "
                    f"{[round(w, 2) for w in base_walls]} / {base_rss:.0f} MB (verdict "
                    f"{base_sched.get('verdict')}); ratio {new_s / base_s:.2f}x"
                )
                continue
            target = INSTANCES[name][3]
            if doc is None:
                print(f"{name}: vf plan FAILED after {wall:.1f} s, peak {rss:.0f} MB (4 GiB limit)")
                ok = False
                continue
            sched = doc.get("scheduler") or {}
            met = wall <= target and rss <= MEMORY_TARGET_MB
            ok = ok and met
            print(
                f"{name}: vf plan {wall:.2f} s, peak {rss:.0f} MB "
                f"(target ≤ {target:.0f} s, ≤ {MEMORY_TARGET_MB} MB: {'met' if met else 'NOT met'}); "
                f"verdict {doc['verdict']}, scheduler {sched.get('verdict')} "
                f"(with remedy {sched.get('verdict_with_remedy')}), "
                f"cut short {sched.get('cut_short', '-')}"
            )
            if src:
                continue
            r = in_process(where)
            share = (float(r["full"]) - float(r["without"])) / float(r["full"])  # type: ignore[arg-type]
            print(
                f"  {r['pods']:,} pods × {r['nodes']:,} nodes: plan() {r['full']:.2f} s, "
                f"without the scheduler model {r['without']:.2f} s → model's share {share:.0%}; "
                f"one greedy run (simulate) {r['sim']:.2f} s; naive filter+score loop "
                f"{r['naive']:.1f} s extrapolated (same bindings: {r['agree']})"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
