"""GPU assignment for local runs (vfcore.runtime.devices): a table of fake host inventories.

Each row: the host's cards (index, free GiB), the GPU replicas (pod, gpu_count,
gpu_memory_gib), the policy, and the expected devices per pod, status and
whether a warning (or, strict, a shortfall) names the problem.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from vfcore import InvalidInputError
from vfcore.runtime.devices import (
    DeviceAssignment,
    DeviceRequest,
    GpuDevice,
    assign_devices,
    visible_devices,
)

GIB = 1024


def cards(*free_gib: float, total_gib: float = 80) -> tuple[GpuDevice, ...]:
    return tuple(
        GpuDevice(i, f"GPU-{i:04d}", "H100", int(total_gib * GIB), int(f * GIB))
        for i, f in enumerate(free_gib)
    )


def req(pod: str, count: int = 1, mem: float | None = None) -> DeviceRequest:
    return DeviceRequest(pod, count, mem)


# (id, inventory, requests, policy, expected devices, status, text expected in warning/shortfall)
CASES: list[tuple[str, Any, Any, str, dict[str, tuple[int, ...]], str, str | None]] = [
    (
        "no GPU: every GPU replica on the CPU, one warning",
        (),
        [req("det/0"), req("det/1"), req("pose/0", mem=10)],
        "share",
        {"det/0": (), "det/1": (), "pose/0": ()},
        "cpu-fallback",
        "no GPU on this host: 3 GPU replica(s)",
    ),
    (
        "no GPU, strict: refused naming the shortfall",
        (),
        [req("det/0")],
        "strict",
        {},
        "refused",
        "1 GPU replica(s) need a GPU; the host has 0",
    ),
    (
        "demand equal to supply: one card each, no warning",
        cards(80, 80),
        [req("det/0"), req("det/1")],
        "share",
        {"det/0": (0,), "det/1": (1,)},
        "gpu",
        None,
    ),
    (
        "demand above supply wraps round robin with one warning",
        cards(80, 80),
        [req("det/0"), req("det/1"), req("det/2")],
        "share",
        {"det/0": (0,), "det/1": (1,), "det/2": (0,)},
        "gpu",
        "3 GPU replica(s) want 3 whole GPU(s); the host has 2",
    ),
    (
        "demand above supply, strict: refused with demand and supply",
        cards(80, 80),
        [req("det/0"), req("det/1"), req("det/2")],
        "strict",
        {"det/0": (0,), "det/1": (1,), "det/2": (0,)},
        "refused",
        "3 GPU replica(s) want 3 whole GPU(s); the host has 2",
    ),
    (
        "multi-GPU replicas take disjoint cards",
        cards(80, 80, 80, 80),
        [req("big/0", 2), req("big/1", 2)],
        "share",
        {"big/0": (0, 1), "big/1": (2, 3)},
        "gpu",
        None,
    ),
    (
        "a replica wanting more cards than the host has gets them all, with a warning",
        cards(80, 80),
        [req("huge/0", 4)],
        "share",
        {"huge/0": (0, 1)},
        "gpu",
        "huge/0 asks for 4 GPUs, the host has 2",
    ),
    (
        "sharers go to the card with the most memory left, and share it while it holds",
        cards(20, 40),
        [req("pose/0", mem=10), req("pose/1", mem=10), req("pose/2", mem=15)],
        "share",
        # 40 → pose/0 (30 left), 30 vs 20 → pose/1 on 1 (20 left), tie 20/20 → card 0
        {"pose/0": (1,), "pose/1": (1,), "pose/2": (0,)},
        "gpu",
        None,
    ),
    (
        "declared memory equal to what is left fits",
        cards(10),
        [req("pose/0", mem=10)],
        "strict",
        {"pose/0": (0,)},
        "gpu",
        None,
    ),
    (
        "declared memory above what is left: shared anyway with a warning",
        cards(20, 20),
        [req("a/0", mem=15), req("b/0", mem=15), req("c/0", mem=15)],
        "share",
        {"a/0": (0,), "b/0": (1,), "c/0": (0,)},
        "gpu",
        "c/0 declares 15 GiB; the card with the most left (GPU 0) has 5 GiB",
    ),
    (
        "declared memory above what is left, strict: refused naming the card",
        cards(20, 20),
        [req("a/0", mem=15), req("b/0", mem=15), req("c/0", mem=15)],
        "strict",
        {"a/0": (0,), "b/0": (1,), "c/0": (0,)},
        "refused",
        "c/0 declares 15 GiB",
    ),
    (
        "whole-card replicas prefer cards no sharer uses",
        cards(80, 80),
        [req("det/0"), req("pose/0", mem=10)],
        "share",
        {"det/0": (1,), "pose/0": (0,)},
        "gpu",
        None,
    ),
    (
        "unknown free memory counts as the total",
        (GpuDevice(0, None, "T4", 16 * GIB, None),),
        [req("pose/0", mem=16)],
        "strict",
        {"pose/0": (0,)},
        "gpu",
        None,
    ),
]


@pytest.mark.parametrize(
    ("inventory", "requests", "policy", "devices", "status", "text"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_assignment_table(
    inventory: Any,
    requests: Any,
    policy: str,
    devices: dict[str, tuple[int, ...]],
    status: str,
    text: str | None,
) -> None:
    before = (copy.deepcopy(inventory), copy.deepcopy(requests))
    result = assign_devices(requests, inventory, policy=policy)  # type: ignore[arg-type]
    assert (inventory, requests) == before  # inputs untouched
    assert result.status == status
    if status == "refused":
        assert result.shortfall is not None and text is not None and text in result.shortfall
        assert result.refused
    else:
        assert result.devices == devices
        assert list(result.devices) == [r.pod for r in requests]  # in request order
        if text is None:
            assert result.warnings == ()
        else:
            assert len(result.warnings) == 1 and text in result.warnings[0]
    assert result == assign_devices(requests, inventory, policy=policy)  # type: ignore[arg-type]


def test_every_replica_gets_gpu_count_distinct_cards_when_they_exist() -> None:
    inv = cards(*([80] * 8))
    requests = [req(f"n{i}/0", count) for i, count in enumerate((1, 2, 3, 1, 4))]
    result = assign_devices(requests, inv)
    for r in requests:
        got = result.devices[r.pod]
        assert len(got) == len(set(got)) == r.gpu_count
        assert got == tuple(sorted(got))


def test_cuda_visible_devices_values_and_document() -> None:
    result = assign_devices([req("det/0", 2), req("cpu/0")], cards(80, 80, 80))
    assert result.cuda_visible_devices("det/0") == "0,1"
    assert result.cuda_visible_devices("cpu/0") == "2"
    assert result.cuda_visible_devices("absent/0") == ""
    doc = result.to_dict()
    assert doc["devices"] == {"det/0": [0, 1], "cpu/0": [2]}
    assert doc["status"] == "gpu" and doc["inventory"][0]["uuid"] == "GPU-0000"
    assert result.rows() == (("det/0", "0,1"), ("cpu/0", "2"))
    fallback = assign_devices([req("det/0")], ())
    assert fallback.rows() == (("det/0", "cpu"),)
    assert assign_devices([], cards(80)) == DeviceAssignment(
        "no-gpu-nodes", {}, inventory=cards(80)
    )


def test_the_module_docstring_example() -> None:
    inv = (GpuDevice(0, "GPU-a", "H100", 81920, 81920), GpuDevice(1, "GPU-b", "H100", 81920, 81920))
    reqs = (req("detector/0"), req("detector/1"), req("pose/0", mem=10.0))
    a = assign_devices(reqs, inv)
    assert {p: list(d) for p, d in a.devices.items()} == {
        "detector/0": [1],
        "detector/1": [0],
        "pose/0": [0],
    }
    assert a.shared == {0: ("pose/0", "detector/1")}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, [0, 1, 2]),
        ("", []),
        ("2,0", [2, 0]),
        ("1", [1]),
        ("GPU-0002", [2]),
        ("GPU-000", []),  # an ambiguous UUID prefix resolves nothing
        ("0,7,1", [0]),  # CUDA stops at the first entry it cannot resolve
        ("0,0", [0]),
        ("-1", []),
        (" 1 , 2 ", [1, 2]),
    ],
)
def test_visible_devices_follow_cuda_rules(value: str | None, expected: list[int]) -> None:
    inv = cards(80, 80, 80)
    assert [d.index for d in visible_devices(inv, value)] == expected


@pytest.mark.parametrize(
    ("requests", "policy", "rule"),
    [
        ([req("a/0", 0)], "share", "invalid-parameter"),
        ([req("a/0", True)], "share", "invalid-parameter"),  # type: ignore[arg-type]
        ([req("a/0", mem=0)], "share", "invalid-parameter"),
        ([req("a/0"), req("a/0")], "share", "invalid-parameter"),
        ([req("a/0")], "greedy", "invalid-gpu-policy"),
    ],
)
def test_bad_requests_are_refused_with_a_rule(requests: Any, policy: str, rule: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        assign_devices(requests, cards(80), policy=policy)  # type: ignore[arg-type]
    assert info.value.rule == rule
