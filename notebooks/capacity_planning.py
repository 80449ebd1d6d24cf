# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Capacity planning with vfcore
#
# A realistic flow (`examples/traffic.py`: decoding, a 4-replica GPU detector, a
# partitioned tracker, a plate reader and a join) meets a realistic cluster
# (`examples/clusters/gpu-pool`: a `kubectl get nodes/pods -o json` dump with busy
# GPU nodes). We look at what the flow needs, where every pod lands, how full the
# GPUs get, what kube-scheduler would really do, and how far the detector can scale.

# %%
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt  # Jupyter shows the figures inline; MPLBACKEND still applies

import vfcore
from vfadapters.clusterload import load_cluster
from vfadapters.loading import load_flow
from vfcore import SolverConfig, explain, plan


def find_repository() -> Path:
    """The checkout holding examples/: above the working folder, or above vfcore's source."""
    starts = (Path.cwd(), Path(vfcore.__file__).resolve().parent)
    for start in starts:
        for folder in (start, *start.parents):
            if (folder / "examples" / "traffic.py").is_file():
                return folder
    raise FileNotFoundError(
        "examples/traffic.py not found above the working folder or vfcore's source: "
        "open this notebook from a vfcore checkout (any folder inside it works)"
    )


REPO = find_repository()
spec = load_flow(str(REPO / "examples" / "traffic.py")).spec()
cluster = load_cluster(str(REPO / "examples" / "clusters" / "gpu-pool"))
SOLVER = SolverConfig.deterministic()  # same answer on every machine

# %% [markdown]
# ## What the flow needs (no cluster involved)

# %%
report = explain(spec)
print(f"{'node':<10} {'kind':<20} {'replicas':>8}  workload")
for shape in report.shapes:
    print(f"{shape.name:<10} {shape.kind:<20} {shape.replicas:>8}  {shape.workload}")
print("GPU demand:", dict(report.demand.total), "| largest pod:", report.demand.largest_pod.pod)
assert dict(report.demand.total) == {"nvidia.com/gpu": 4}

# %% [markdown]
# ## The plan: an exact placement, checked independently

# %%
result = plan(spec, cluster, solver=SOLVER)
print("verdict:", result.verdict, "| solver:", result.solver.method, result.solver.status)
by_node: dict[str, list[str]] = {}
for pod, node in result.assignments:
    by_node.setdefault(node, []).append(pod)
for node, pods in sorted(by_node.items()):
    print(f"  {node:<12} {', '.join(pods)}")
print("kube-scheduler model:", result.scheduler.verdict)
assert result.verdict == "fits"

# %% [markdown]
# ## GPU utilisation per node: busy before, planned, free after

# %%
gpu_rows = [u for u in result.usage if u.resource == "nvidia.com/gpu"]
names = [u.node for u in gpu_rows]
busy = [u.allocatable - (u.free_before or 0) for u in gpu_rows]
planned = [u.planned for u in gpu_rows]
free_after = [u.free_after or 0 for u in gpu_rows]
fig, ax = plt.subplots(figsize=(7, 3))
ax.bar(names, busy, label="busy before", color="#999999")
ax.bar(names, planned, bottom=busy, label="planned for the flow", color="#1f77b4")
ax.bar(
    names,
    free_after,
    bottom=[b + p for b, p in zip(busy, planned, strict=True)],
    label="free after",
    color="#c7e9c0",
)
ax.set_ylabel("nvidia.com/gpu")
ax.set_title("GPUs per node")
ax.legend(loc="upper right", fontsize=8)
fig.tight_layout()
plt.show()
print(dict(zip(names, free_after, strict=True)))

# %% [markdown]
# ## A packing exists, yet kube-scheduler strands a pod
#
# `examples/stranding.py` asks for two 2-GPU encoders and one 4-GPU model on two
# 4-GPU nodes. The exact packing puts the encoders together; the default
# LeastAllocated scoring spreads them, and the 4-GPU pod finds no node.

# %%
stranding = load_flow(str(REPO / "examples" / "stranding.py")).spec()
two_nodes = load_cluster(str(REPO / "examples" / "clusters" / "two-4gpu"))
strand_plan = plan(stranding, two_nodes, solver=SOLVER)
print("exact verdict:", strand_plan.verdict)
print("kube-scheduler model:", strand_plan.scheduler.verdict, strand_plan.scheduler.stranded)
print(strand_plan.scheduler.remedy.describe())
assert strand_plan.verdict == "fits" and strand_plan.scheduler.verdict == "strands"
assert strand_plan.scheduler.remedy.verdict_after == "lands"

# %% [markdown]
# ## What if the detector scaled? Replicas vs verdict and nodes used


# %%
def with_detector_replicas(n: int):
    nodes = tuple(replace(x, nb_tasks=n) if x.name == "detector" else x for x in spec.nodes)
    return replace(spec, nodes=nodes)


sweep = []
for replicas in range(1, 19):
    p = plan(with_detector_replicas(replicas), cluster, solver=SOLVER, predict_scheduler=False)
    used = len({node for _, node in p.assignments})
    sweep.append((replicas, p.verdict, used))
    print(f"detector ×{replicas:<2} → {p.verdict:<13} nodes used: {used}")

fits_up_to = max(r for r, v, _ in sweep if v == "fits")
fig, ax = plt.subplots(figsize=(7, 3))
xs = [r for r, _, _ in sweep]
ax.plot(xs, [u for _, _, u in sweep], marker="o", label="nodes used")
ax.axvline(fits_up_to + 0.5, color="red", linestyle="--", label=f"fits up to {fits_up_to}")
ax.set_xlabel("detector replicas (1 GPU each)")
ax.set_ylabel("nodes used")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
free_gpus = sum(u.free_before or 0 for u in gpu_rows)
print(f"the detector fits up to {fits_up_to} replicas; the pool had {free_gpus} free GPUs")
assert fits_up_to == free_gpus  # one GPU per replica: the exact answer is the free count
