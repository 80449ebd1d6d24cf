"""What is read from GPU nodes as GPU Feature Discovery and the device plugin publish them.

Each fixture under ``tests/data/nodes/`` is a Node object written in our own
values, shaped like the ones NVIDIA and users publish (its
``vf.test/shape-from`` annotation and ``tests/data/nodes/README.md`` say where
the shape comes from). One row per fixture: what vfcore reads, and which
finding (if any) comes with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vfcore.cluster import ClusterSnapshot, GpuInfo, snapshot_from_kubernetes
from vfcore.cluster.kubeparse.gpu_labels import GPU_MEMORY_MIB_BOUNDS, gpu_info

NODES = Path(__file__).resolve().parents[1] / "data" / "nodes"


def _load(name: str) -> dict[str, Any]:
    item: dict[str, Any] = json.loads((NODES / f"{name}.json").read_text())
    return item


def _snapshot(*names: str) -> ClusterSnapshot:
    items = [_load(n) for n in names]
    return snapshot_from_kubernetes(
        {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items},
        {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []},
    )


# name → (memory_mib, count, sharing, replicas, mig_strategy, GPU-ish allocatable, finding id)
TABLE: list[tuple[str, int | None, int, str, int, str | None, dict[str, int], str | None]] = [
    # NVML's memorySizeMB is MiB: a 1g.10gb is 9728 MiB (9.50 GiB), kept as is
    ("mig-single-a100-80gb", 9728, 56, "none", 1, "single", {"nvidia.com/gpu": 56}, None),
    # gpu.replicas=0 is GFD's output under mixed: one unit per device, no finding
    (
        "mig-mixed-a100-80gb",
        81920,
        1,
        "none",
        1,
        "mixed",
        {"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-3g.40gb": 1},
        None,
    ),
    ("t4-time-slicing", 15360, 1, "time-slicing", 4, None, {"nvidia.com/gpu": 4}, None),
    (
        "t4-time-slicing-renamed",
        15360,
        2,
        "time-slicing",
        4,
        None,
        {"nvidia.com/gpu.shared": 8},
        None,
    ),
    ("t4-mps", 15360, 1, "mps", 4, None, {"nvidia.com/gpu": 4}, None),
    # a cluster-wide single strategy on a card that is not MIG-capable changes nothing
    # and no MIG strategy is in effect on it (mig.capable=false)
    ("t4-cluster-wide-single", 15360, 1, "none", 1, "none", {"nvidia.com/gpu": 1}, None),
    # bytes where GFD writes MiB: unknown, with a finding naming the label and value
    (
        "t4-memory-in-bytes",
        None,
        1,
        "none",
        1,
        None,
        {"nvidia.com/gpu": 1},
        "gpu-memory-implausible",
    ),
    ("capacity-without-allocatable", 23034, 1, "none", 1, None, {"nvidia.com/gpu": 1}, None),
]


@pytest.mark.parametrize(
    ("name", "memory", "count", "sharing", "replicas", "strategy", "gpu_alloc", "finding"),
    TABLE,
    ids=[row[0] for row in TABLE],
)
def test_what_is_read_from_each_published_node_shape(
    name: str,
    memory: int | None,
    count: int,
    sharing: str,
    replicas: int,
    strategy: str | None,
    gpu_alloc: dict[str, int],
    finding: str | None,
) -> None:
    snap = _snapshot(name)
    [node] = snap.nodes  # every fixture stays plannable
    gpu = node.gpu
    assert isinstance(gpu, GpuInfo)
    assert (gpu.memory_mib, gpu.count, gpu.sharing, gpu.replicas, gpu.mig_strategy) == (
        memory,
        count,
        sharing,
        replicas,
        strategy,
    )
    for resource, units in gpu_alloc.items():
        assert node.allocatable_of(resource) == units
    reasons = [u.reason for u in snap.unknowns]
    if finding is None:
        assert reasons == []
    else:
        [reason] = reasons
        assert reason.startswith(f"{finding}: ")
        assert "nvidia.com/gpu.memory = 16106127360" in reason  # the label and its value
        assert "hint:" in reason


def test_capacity_without_allocatable_is_read_as_the_api_server_defaults_it_with_a_note() -> None:
    snap = _snapshot("capacity-without-allocatable")
    node = snap.node("capacity-without-allocatable")
    assert node.allocatable_of("cpu") == 47900 and node.allocatable_of("pods") == 110
    assert snap.unreadable_nodes == ()
    [note] = snap.notes
    assert (note.what, note.code) == (
        "node/capacity-without-allocatable",
        "allocatable-from-capacity",
    )
    assert "status.capacity" in note.message and note.hint


def test_neither_capacity_nor_allocatable_is_unknown() -> None:
    item = _load("capacity-without-allocatable")
    del item["status"]["capacity"]
    snap = snapshot_from_kubernetes(
        {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": [item]},
        {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []},
    )
    assert snap.nodes == () and snap.notes == ()
    [unreadable] = snap.unreadable_nodes
    assert unreadable.bound is None and "status.allocatable is missing" in unreadable.reason


def test_every_fixture_cites_where_its_shape_comes_from() -> None:
    for path in sorted(NODES.glob("*.json")):
        source = json.loads(path.read_text())["metadata"]["annotations"]["vf.test/shape-from"]
        assert len(source) > 30, path.name


@pytest.mark.parametrize(
    ("value", "memory"),
    [
        pytest.param("1024", 1024, id="1 GiB, the lower bound, is kept"),
        pytest.param("1023", None, id="one MiB under the lower bound is unknown"),
        pytest.param(str(GPU_MEMORY_MIB_BOUNDS[1]), GPU_MEMORY_MIB_BOUNDS[1], id="288 GiB is kept"),
        pytest.param(str(GPU_MEMORY_MIB_BOUNDS[1] + 1), None, id="one MiB over 288 GiB is unknown"),
        pytest.param("16", None, id="GiB where MiB is meant is unknown, never 16 MiB"),
        pytest.param("15728640", None, id="KiB where MiB is meant is unknown"),
    ],
)
def test_plausibility_bounds_of_gpu_memory(value: str, memory: int | None) -> None:
    info, problems = gpu_info({"nvidia.com/gpu.memory": value, "nvidia.com/gpu.count": "1"}, {})
    assert info is not None and info.memory_mib == memory
    assert bool(problems) == (memory is None)
    if problems:
        assert problems[0].startswith("gpu-memory-implausible: ") and value in problems[0]


def test_the_renamed_time_sliced_resource_alone_means_time_slicing() -> None:
    info, problems = gpu_info({}, {"nvidia.com/gpu.shared": 8})
    assert info is not None and info.sharing == "time-slicing" and problems == []


def test_a_t4_under_a_cluster_wide_single_strategy_takes_whole_card_pods_in_mix_mode() -> None:
    from vfcore.cluster import GPU_PRESENT_LABEL
    from vfcore.placement.claims import GPU_TOLERATION, PodRequest
    from vfcore.placement.plan import plan_pods

    pod = PodRequest(
        "det/0", "det", 0, (("nvidia.com/gpu", 1),), (GPU_PRESENT_LABEL,), (GPU_TOLERATION,)
    )
    result = plan_pods(
        [pod], _snapshot("t4-cluster-wide-single"), gpu_mode="mix", predict_scheduler=False
    )
    assert result.verdict == "fits"
    assert "mig-single-strategy" not in {p.id for p in result.problems}
