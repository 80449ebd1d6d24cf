"""The exact plan of DRA claims: devices and counters as capacity, three-valued, re-checked."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.dra_cases import Sink, Src, Step, allocated_claim, dra_cluster, gpu_pods, profile
from vfcore import REALTIME, Flow
from vfcore.placement.claims import DraRequest
from vfcore.placement.dra.inventory import DraInventory
from vfcore.placement.dra.planning import (
    DeviceAssignment,
    DeviceRegions,
    DraPlan,
    check_devices,
)
from vfcore.placement.packing import SolverConfig
from vfcore.placement.plan import plan, plan_pods

CONFIG = SolverConfig.deterministic()
ONE_G = DraRequest("mig.nvidia.com", 1, (profile("1g.10gb"),))
THREE_G = DraRequest("mig.nvidia.com", 1, (profile("3g.40gb"),))


def test_a_gpus_region_is_every_maximal_mix_of_slices_it_holds_at_once():
    cluster = dra_cluster({"a": ("mig:H100-80GB", 1)})
    inv = DraInventory(cluster, [ONE_G, THREE_G])
    (block,) = inv.blocks["a"]
    vectors = [v for v, _ in DeviceRegions(inv, [0, 1]).of(block.type_id) or ()]
    assert vectors == [(7, 0), (4, 1), (0, 2)]


def _pods(requests):
    from vfcore.placement.claims import PodRequest

    return tuple(
        PodRequest(f"w{i}/0", f"w{i}", 0, (("cpu", 100),), slice="dra", dra=r)
        for i, r in enumerate(requests)
    )


@pytest.mark.parametrize(
    ("gpus", "verdict"),
    [(1, "does-not-fit"), (2, "fits")],
    ids=["one-h100-cannot-hold-1g-and-two-3g", "two-h100s-can"],
)
def test_one_1g_and_two_3g_need_two_gpus(gpus, verdict):
    cluster = dra_cluster({"a": ("mig:H100-80GB", gpus)})
    result = plan_pods(_pods([ONE_G, THREE_G, THREE_G]), cluster, gpu_mode="dra", solver=CONFIG)
    assert result.verdict == verdict
    if verdict == "fits":
        assert result.dra is not None and len(result.dra.assignments) == 3
        assert (
            check_devices(
                result.pods, result.placement, result.dra, DraInventory(cluster, [ONE_G, THREE_G])
            )
            == ()
        )
    else:
        assert result.proofs and "cannot allocate all claims" in result.unplaced[0].summary


def _flow(*gibs, name="frag"):
    last = Src(name="src")
    for i, g in enumerate(gibs):
        last = Step(name=f"m{i}", device_type="gpu", gpu_memory_gib=g)(last)
    return Flow([Sink(name="sink")(last)], flow_type=REALTIME, name=name)


def test_the_plan_takes_placements_that_fragment_no_gpu_where_first_fit_does():
    """The worked example of docs/dra.md: 39, 19, 9 and 9 GiB slices on one H100."""
    cluster = dra_cluster({"a": ("mig:H100-80GB", 1)}, labels={"nvidia.com/gpu.present": "true"})
    result = plan(_flow(39, 19, 9, 9), cluster, gpu_mode="dra", solver=CONFIG)
    assert result.verdict == "fits"
    assert result.dra is not None
    devices = {a.pod: a.devices[0].rsplit("/", 1)[1] for a in result.dra.assignments}
    # 3g at 4, 1g.20gb at 2, the two 1g at 0 and 1: every memory slice used, none cut off
    assert devices == {
        "m0/0": "gpu-0-mig-3g40gb-9-4",
        "m1/0": "gpu-0-mig-1g20gb-15-2",
        "m2/0": "gpu-0-mig-1g10gb-19-0",
        "m3/0": "gpu-0-mig-1g10gb-19-1",
    }
    sched = result.scheduler
    assert sched is not None and sched.verdict == "strands"  # 1g.20gb@4 leaves 9 GiB nowhere
    assert sched.remedy is not None and sched.remedy.kind == "waves"
    assert sched.verdict_with_remedy == "lands"
    # in the order of the planned devices: each first fit takes the device the plan chose
    assert sched.remedy.waves[:4] == (("m2/0",), ("m3/0",), ("m1/0",), ("m0/0",))


def test_devices_of_unknown_use_bracket_the_verdict():
    # a claim holds some device of a's pool, which cannot be read: a's devices are of unknown use
    bad = allocated_claim("odd", [("a", "gpu-0")])
    bad["status"]["allocation"]["devices"]["results"][0]["device"] = 3
    cluster = dra_cluster({"a": ("whole", 2), "b": ("whole", 1)}, claims=[bad])
    assert plan_pods(gpu_pods([1]), cluster, gpu_mode="dra", solver=CONFIG).verdict == "fits"
    result = plan_pods(gpu_pods([2]), cluster, gpu_mode="dra", solver=CONFIG)
    assert result.verdict == "unknown"  # only a could hold it, and only if its GPUs are free
    assert any(u.what == "node/a" and "dra:" in u.reason for u in result.unknown)
    assert result.placement == {}  # never on a node of unknown use: fits rests on no guess
    three = gpu_pods([3])  # more than any node has even with every device free
    assert plan_pods(three, cluster, gpu_mode="dra", solver=CONFIG).verdict == "does-not-fit"


def test_unknown_devices_never_let_a_plan_conclude_does_not_fit():
    cluster = dra_cluster({"a": ("whole", 1)})
    cluster = replace(cluster, dra=replace(cluster.dra, slices=(), slices_unknown="refused"))
    result = plan_pods(gpu_pods([1]), cluster, gpu_mode="dra", solver=CONFIG)
    assert result.verdict == "unknown"
    assert "dra-facts-unknown" in [p.code for p in result.problems]


def test_a_claim_of_a_missing_device_class_is_an_error_and_never_fits():
    cluster = dra_cluster({"a": ("whole", 2)})
    pods = _pods([DraRequest("gpu.example.com", 1)])
    result = plan_pods(pods, cluster, gpu_mode="dra", solver=CONFIG)
    assert result.verdict == "does-not-fit"
    assert [p.code for p in result.problems if p.is_error] == ["dra-device-class-missing"]
    assert result.unplaced[0].kind == "unresolvable"


def test_the_checker_catches_every_broken_device_assignment():
    cluster = dra_cluster(
        {"a": ("mig:H100-80GB", 1), "b": ("whole", 1)},
        claims=[allocated_claim("c", [("b", "gpu-0")])],
    )
    pods = _pods([THREE_G, THREE_G, ONE_G])
    inv = DraInventory(cluster, [THREE_G, ONE_G])
    where = {"w0/0": "a", "w1/0": "a", "w2/0": "a"}
    a = "gpu.nvidia.com/a/"

    def check(*assigned):
        return check_devices(pods, where, DraPlan(tuple(assigned)), inv)

    ok = (
        DeviceAssignment("w0/0", "a", (a + "gpu-0-mig-3g40gb-9-0",)),
        DeviceAssignment("w1/0", "a", (a + "gpu-0-mig-3g40gb-9-4",)),
    )
    assert check(*ok) == ("w2/0 on a: no devices",)
    overlap = DeviceAssignment("w2/0", "a", (a + "gpu-0-mig-1g10gb-19-4",))
    assert any("counter" in p for p in check(*ok, overlap))
    twice = DeviceAssignment("w1/0", "a", (a + "gpu-0-mig-3g40gb-9-0",))
    assert any("serves w0/0 and w1/0" in p for p in check(ok[0], twice))
    wrong = DeviceAssignment("w2/0", "a", (a + "gpu-0-mig-3g40gb-9-4",))
    assert any("is not accepted" in p for p in check(ok[0], wrong))
    elsewhere = DeviceAssignment("w2/0", "a", ("gpu.nvidia.com/b/gpu-0",))
    assert any("is not a device of a" in p for p in check(*ok, elsewhere))


def test_many_identical_nodes_are_planned_by_type():
    layout = {f"n{i:02}": ("whole", 8) for i in range(40)}
    cluster = dra_cluster(layout, allocatable={"cpu": 16_000, "memory": 2**36})
    pods = gpu_pods([4] * 30 + [2] * 60 + [1] * 80)
    result = plan_pods(pods, cluster, gpu_mode="dra", solver=CONFIG, predict_scheduler=False)
    assert result.verdict == "fits" and len(result.placement) == 170
    more = gpu_pods([8] * 41)
    assert (
        plan_pods(more, cluster, gpu_mode="dra", solver=CONFIG, predict_scheduler=False).verdict
        == "does-not-fit"
    )
