"""GPU mode parsed once: GpuMode, parse_gpu_mode, the one slice_of rule, one planner per mode."""

from __future__ import annotations

import pytest

from vfcore import (
    GPU_MODES,
    ClusterSnapshot,
    FlowSpec,
    GpuMode,
    InvalidInputError,
    NodeSpec,
    explain,
    gpu_demand,
    plan,
    plan_pods,
    pod_requests,
    validate,
)
from vfcore.cluster import node
from vfcore.flow.gpu_mode import parse_gpu_mode, slice_of
from vfcore.placement.dra.planner import DraPlanner
from vfcore.placement.packing import SolverConfig
from vfcore.placement.planners import MixPlanner, WholeCardPlanner, planner_for

CONFIG = SolverConfig.deterministic()


@pytest.mark.parametrize(
    ("given", "mode"),
    [
        (None, GpuMode.EXCLUSIVE),
        ("exclusive", GpuMode.EXCLUSIVE),
        ("shared", GpuMode.SHARED),
        ("mix", GpuMode.MIX),
        ("dra", GpuMode.DRA),
        (GpuMode.MIX, GpuMode.MIX),
    ],
    ids=["none-is-exclusive", "exclusive", "shared", "mix", "dra", "an-enum-passes-through"],
)
def test_parse_gpu_mode(given, mode):
    parsed = parse_gpu_mode(given)
    assert parsed is mode
    assert parsed == mode.value  # a str: comparisons with names keep working
    assert f"{parsed}" == mode.value and str(parsed) == mode.value


@pytest.mark.parametrize(
    "bad",
    ["Mix", "EXCLUSIVE", " mix", "mixed", "whole", "DRA", "", 1, True],
    ids=[
        "capitalised",
        "upper-case",
        "leading-space",
        "mixed",
        "whole",
        "dra-upper",
        "empty",
        "int",
        "bool",
    ],
)
def test_anything_else_is_invalid_gpu_mode(bad):
    with pytest.raises(InvalidInputError) as err:
        parse_gpu_mode(bad)
    assert err.value.rule == "invalid-gpu-mode"
    assert "is not one of ['exclusive', 'shared', 'mix', 'dra']" in err.value.message
    assert "--gpu-mode" in err.value.hint


def test_gpu_modes_lists_the_names_in_order():
    assert GPU_MODES == ("exclusive", "shared", "mix", "dra")
    assert tuple(GpuMode) == GPU_MODES


def _gpu(name="det", **kw):
    return NodeSpec(name, "processor", ("src",), device_type="gpu", **kw)


@pytest.mark.parametrize(
    ("spec", "exclusive", "shared", "mix"),
    [
        (NodeSpec("cpu", "processor", ("src",)), "none", "none", "none"),
        (_gpu(), "whole", "shared", "whole"),
        (_gpu(gpu_memory_gib=10), "whole", "shared", "mig"),
        (_gpu(gpu_count=2), "whole", "shared", "whole"),
        (_gpu(gpu_count=2, gpu_memory_gib=10), "whole", "shared", "whole"),
        (_gpu(gpu_memory_gib=0.5), "whole", "shared", "mig"),
    ],
    ids=[
        "cpu-node-takes-no-gpu",
        "one-gpu-no-memory",
        "one-gpu-with-memory-is-a-mig-slice-in-mix",
        "two-gpus-no-memory",
        "two-gpus-with-memory-stay-whole-in-mix",
        "tiny-memory-is-still-a-slice",
    ],
)
def test_slice_of(spec, exclusive, shared, mix):
    got = {mode.value: slice_of(spec, mode) for mode in GpuMode}
    dra = "none" if exclusive == "none" else "dra"  # every GPU pod claims through DRA
    assert got == {"exclusive": exclusive, "shared": shared, "mix": mix, "dra": dra}


def _flow():
    return FlowSpec(
        "f",
        "realtime",
        (
            NodeSpec("src", "producer"),
            _gpu("det", nb_tasks=2, gpu_memory_gib=10),
            _gpu("cap", gpu_count=2),
            NodeSpec("cpu", "processor", ("src",)),
            NodeSpec("sink", "consumer", ("det", "cap", "cpu")),
        ),
    )


@pytest.mark.parametrize("mode", list(GpuMode), ids=[m.value for m in GpuMode])
def test_pods_and_demand_follow_slice_of(mode):
    spec = _flow()
    by_node = {n.name: slice_of(n, mode) for n in spec.nodes}
    assert all(p.slice == by_node[p.node] for p in pod_requests(spec, gpu_mode=mode))
    assert all(p.slice == by_node[p.node] for p in gpu_demand(spec, gpu_mode=mode.value).pods)
    assert pod_requests(spec, gpu_mode=mode) == pod_requests(spec, gpu_mode=mode.value)


def test_every_edge_raises_invalid_gpu_mode():
    spec = _flow()
    cluster = ClusterSnapshot.of([node("a", allocatable={"cpu": 8000})])
    calls = [
        lambda: validate(spec, gpu_mode="Mix"),
        lambda: gpu_demand(spec, gpu_mode="Mix"),
        lambda: explain(spec, gpu_mode="Mix"),
        lambda: pod_requests(spec, gpu_mode="Mix"),
        lambda: plan(spec, cluster, gpu_mode="Mix"),
        lambda: plan_pods((), cluster, gpu_mode="Mix"),
    ]
    for call in calls:
        with pytest.raises(InvalidInputError, match="invalid-gpu-mode"):
            call()


def test_results_carry_the_parsed_mode_and_print_its_name():
    spec = _flow()
    cluster = ClusterSnapshot.of([node("a", allocatable={"cpu": 8000, "nvidia.com/gpu": 8})])
    result = plan(spec, cluster, gpu_mode="exclusive", solver=CONFIG, predict_scheduler=False)
    assert result.gpu_mode is GpuMode.EXCLUSIVE
    assert type(result.to_dict()["gpu_mode"]) is str and result.to_dict()["gpu_mode"] == "exclusive"
    shown = explain(spec, gpu_mode="shared")
    assert shown.gpu_mode is GpuMode.SHARED
    assert type(shown.to_dict()["options"]["gpu_mode"]) is str
    demand = gpu_demand(spec, gpu_mode="mix")
    assert demand.mode is GpuMode.MIX and type(demand.to_dict()["mode"]) is str


@pytest.mark.parametrize(
    ("mode", "planner"),
    [
        (GpuMode.EXCLUSIVE, WholeCardPlanner),
        (GpuMode.SHARED, WholeCardPlanner),
        (GpuMode.MIX, MixPlanner),
        (GpuMode.DRA, DraPlanner),
    ],
    ids=[
        "exclusive-packs-whole-cards",
        "shared-packs-whole-cards",
        "mix-plans-mig-layouts",
        "dra-plans-claims",
    ],
)
def test_one_planner_per_mode(mode, planner):
    chosen = planner_for(mode)
    assert type(chosen) is planner and chosen.mode is mode


def test_whole_card_planner_defers_mig_pods_and_mix_plans_them():
    spec = _flow()
    pods = pod_requests(spec, gpu_mode=GpuMode.MIX)
    mig = {p.pod for p in pods if p.slice == "mig"}
    assert mig == {"det/0", "det/1"}
    planned, deferred = planner_for(GpuMode.EXCLUSIVE).split(pods)
    assert {p.pod for p in deferred} == mig and not mig & {p.pod for p in planned}
    planned, deferred = planner_for(GpuMode.MIX).split(pods)
    assert deferred == () and planned == pods
    with pytest.raises(ValueError):
        WholeCardPlanner(GpuMode.MIX)
    with pytest.raises(ValueError):
        WholeCardPlanner(GpuMode.DRA)
