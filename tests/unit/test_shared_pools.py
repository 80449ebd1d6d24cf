"""Time-sliced and MPS pools in a plan: declared VRAM per card, who shares a card, the numbers.

Nodes come from ``tests/data/nodes/`` (shaped as GFD and the device plugin
publish them); each row's id says the behaviour it pins, the equality edge
included.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vfcore.cluster import GPU_PRESENT_LABEL, ClusterSnapshot, snapshot_from_kubernetes
from vfcore.placement.claims import GPU_TOLERATION, PodRequest
from vfcore.placement.packing import check_placement
from vfcore.placement.plan import plan_pods

NODES = Path(__file__).resolve().parents[1] / "data" / "nodes"
GPU, SHARED = "nvidia.com/gpu", "nvidia.com/gpu.shared"


def cluster(*names: str, bound_gpus: dict[str, int] | None = None) -> ClusterSnapshot:
    items = [json.loads((NODES / f"{n}.json").read_text()) for n in names]
    pods: list[dict[str, Any]] = []
    for node, units in (bound_gpus or {}).items():
        pods.append(
            {
                "kind": "Pod",
                "metadata": {"namespace": "ml", "name": f"busy-{node}"},
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": "c", "resources": {"limits": {GPU: str(units)}}}],
                },
                "status": {"phase": "Running"},
            }
        )
    return snapshot_from_kubernetes(
        {"kind": "NodeList", "items": items}, {"kind": "PodList", "items": pods}
    )


def pods(count: int, gib: float | None, resource: str = GPU, units: int = 1) -> list[PodRequest]:
    return [
        PodRequest(
            f"det/{i}",
            "det",
            i,
            (("cpu", 1000), (resource, units)),
            (GPU_PRESENT_LABEL,),
            (GPU_TOLERATION,),
            None if gib is None else round(gib * 1024),
            "whole",
        )
        for i in range(count)
    ]


def plan(pod_list: list[PodRequest], snap: ClusterSnapshot):  # type: ignore[no-untyped-def]
    result = plan_pods(pod_list, snap, predict_scheduler=False)
    assert (
        check_placement(result.pods, snap.nodes, result.assignments, cards=dict(result.cards)) == ()
    )
    return result


CASES = [
    pytest.param(
        "t4-time-slicing",
        3,
        6,
        GPU,
        "does-not-fit",
        id="3 x 6 GiB on one 15 GiB time-sliced T4 do not fit",
    ),
    pytest.param(
        "t4-time-slicing", 2, 7.5, GPU, "fits", id="2 x 7.5 GiB fill one 15 GiB card exactly: fits"
    ),
    pytest.param(
        "t4-time-slicing",
        2,
        7.51,
        GPU,
        "does-not-fit",
        id="one MiB-ish over the card: does not fit",
    ),
    pytest.param(
        "t4-time-slicing", 4, None, GPU, "fits", id="pods that declare no VRAM take units only"
    ),
    pytest.param("t4-mps", 4, 3.75, GPU, "fits", id="MPS: 3.75 GiB each is exactly memory / 4"),
    pytest.param(
        "t4-mps", 1, 3.76, GPU, "does-not-fit", id="MPS: one pod over memory / 4 does not fit"
    ),
    pytest.param(
        "t4-time-slicing-renamed",
        2,
        6,
        SHARED,
        "fits",
        id="renamed pool, 2 x 6 GiB: fits whatever the card",
    ),
    pytest.param(
        "t4-time-slicing-renamed",
        4,
        6,
        SHARED,
        "unknown",
        id="renamed pool, 4 x 6 GiB: the plugin's card choice decides",
    ),
    pytest.param(
        "t4-time-slicing-renamed",
        6,
        6,
        SHARED,
        "does-not-fit",
        id="renamed pool, 6 x 6 GiB: 2 cards hold 4 at most",
    ),
    pytest.param(
        "t4-cluster-wide-single",
        1,
        14.9,
        GPU,
        "fits",
        id="T4 under a cluster-wide single strategy keeps 15 GiB",
    ),
]


@pytest.mark.parametrize(("node", "count", "gib", "resource", "verdict"), CASES)
def test_declared_vram_on_a_shared_pool(
    node: str, count: int, gib: float | None, resource: str, verdict: str
) -> None:
    result = plan(pods(count, gib, resource), cluster(node))
    assert result.verdict == verdict
    if verdict == "does-not-fit":
        assert all("GiB" in u.summary for u in result.unplaced)  # the numbers, never a bare count
    if verdict == "unknown":
        [reason] = [u.reason for u in result.unknown if u.reason.startswith("shared-card-vram: ")]
        assert "device plugin chooses the card" in reason and "24.00 GiB" in reason


def test_a_refusal_for_vram_names_what_was_asked_and_what_a_card_has() -> None:
    result = plan(pods(3, 6), cluster("t4-time-slicing"))
    [unplaced] = result.unplaced
    assert "6.00 GiB asked, at most 3.00 GiB of 15.00 GiB left" in unplaced.summary
    mps = plan(pods(1, 6), cluster("t4-mps"))
    assert "each of 4 clients of a 15.00 GiB card gets 3.75 GiB" in mps.unplaced[0].summary
    assert mps.unplaced[0].kind == "unresolvable"  # it never fits a share of that card


def test_the_json_says_which_pods_share_a_card_and_each_pool_s_cards() -> None:
    doc = plan(pods(3, 4), cluster("t4-time-slicing")).to_dict()
    [pool] = doc["shared_pools"]
    assert (pool["cards"], pool["units_per_card"], pool["sharing"], pool["memory_mib"]) == (
        1,
        4,
        "time-slicing",
        15360,
    )
    assert pool["mapping_certain"] and pool["verdict"] == "fits"
    assert doc["shares_card_with"]["det/0"] == ["det/1", "det/2"]


def test_pods_bound_to_a_time_sliced_card_make_the_vram_unknown_never_fits() -> None:
    result = plan(pods(1, 6), cluster("t4-time-slicing", bound_gpus={"t4-time-slicing": 1}))
    assert result.verdict == "unknown"
    [reason] = [u.reason for u in result.unknown if "shared-card-vram" in u.reason]
    assert "1 unit(s)" in reason and "held by pods already bound" in reason


def test_mps_caps_each_client_so_bound_pods_do_not_matter() -> None:
    result = plan(pods(1, 3), cluster("t4-mps", bound_gpus={"t4-mps": 3}))
    assert result.verdict == "fits"


def test_unknown_card_memory_on_a_time_sliced_pool_is_unknown_never_fits() -> None:
    snap = cluster("t4-time-slicing")
    node = snap.nodes[0]
    assert node.gpu is not None
    from dataclasses import replace

    blind = replace(snap, nodes=(replace(node, gpu=replace(node.gpu, memory_mib=None)),))
    result = plan(pods(2, 6), blind)
    assert result.verdict == "unknown"
    assert any("card memory or count is unknown" in u.reason for u in result.unknown)


def test_the_renamed_resource_is_planned_against_and_more_than_one_unit_is_a_finding() -> None:
    result = plan(pods(1, None, SHARED, units=2), cluster("t4-time-slicing-renamed"))
    assert result.verdict == "does-not-fit"
    [problem] = [p for p in result.problems if p.id == "shared-pool-multi-gpu"]
    assert "needs 2 GPUs per pod (2 nvidia.com/gpu.shared)" in problem.message
    assert "share GPUs by time-slicing" in result.unplaced[0].summary


def test_unshared_nodes_take_whole_cards_without_a_vram_check() -> None:
    # exclusive mode on an unshared node is unchanged: a unit is a whole card
    result = plan(pods(1, 20), cluster("t4-cluster-wide-single"))
    assert result.verdict == "fits" and result.to_dict()["shared_pools"] == []


# -- messages state the fact, with the numbers --------------------------------------


def _gpu_node(name: str, **kwargs: Any):  # type: ignore[no-untyped-def]
    from vfcore.cluster import GpuInfo, node

    return node(
        name,
        labels=dict([GPU_PRESENT_LABEL]),
        gpu=GpuInfo(memory_mib=15360, count=1),
        **kwargs,
    )


def test_an_unresolvable_fix_names_sizes_in_human_units_never_raw_bytes() -> None:
    t4 = _gpu_node("t4", allocatable={"cpu": 8000, "memory": 16492126208})
    big = PodRequest("big/0", "big", 0, (("memory", 64 * 2**30),), (GPU_PRESENT_LABEL,))
    [unplaced] = plan_pods([big], ClusterSnapshot.of([t4]), predict_scheduler=False).unplaced
    assert unplaced.fix is not None
    assert "needs 64Gi memory (the largest host has 15.4Gi)" in unplaced.fix
    assert "16492126208" not in unplaced.fix


def test_a_not_ready_node_is_the_reason_and_the_fix_for_what_it_keeps_out() -> None:
    down = _gpu_node("gpu-1", allocatable={"cpu": 8000, GPU: 1}, ready=False)
    pod = PodRequest("d/0", "d", 0, ((GPU, 1),), (GPU_PRESENT_LABEL,), (GPU_TOLERATION,))
    [unplaced] = plan_pods([pod], ClusterSnapshot.of([down]), predict_scheduler=False).unplaced
    assert unplaced.fix is not None
    assert "are not Ready (gpu-1)" in unplaced.fix and "selector/tolerations" not in unplaced.fix


@pytest.mark.parametrize(
    ("count", "gib", "kind", "words"),
    [
        pytest.param(
            1, 20, "unresolvable", "20.00 GiB asked, 15.00 GiB per card", id="over the card"
        ),
        pytest.param(
            2,
            10,
            "unschedulable",
            "10.00 GiB asked, at most 5.00 GiB of 15.00 GiB left",
            id="over what is left",
        ),
    ],
)
def test_shared_mode_refusals_for_vram_say_what_was_asked_and_what_a_card_has(
    count: int, gib: float, kind: str, words: str
) -> None:
    t4 = _gpu_node("t4", allocatable={"cpu": 8000, "memory": 2**34})
    shared = [
        PodRequest(
            f"s/{i}",
            "s",
            i,
            (("cpu", 1000),),
            (GPU_PRESENT_LABEL,),
            (GPU_TOLERATION,),
            round(gib * 1024),
            "shared",
        )
        for i in range(count)
    ]
    result = plan_pods(shared, ClusterSnapshot.of([t4]), gpu_mode="shared", predict_scheduler=False)
    [unplaced] = result.unplaced
    assert unplaced.kind == kind and words in unplaced.summary
