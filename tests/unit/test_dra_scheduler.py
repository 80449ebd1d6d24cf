"""DynamicResources in the kube-scheduler model: lands, strands, at-risk, and the remedy."""

from __future__ import annotations

import importlib
from dataclasses import replace

from tests.dra_cases import allocated_claim, dra_cluster, gpu_pods, mig_pods, profile
from vfcore.cluster import Taint
from vfcore.placement.claims import DraRequest, PodRequest
from vfcore.placement.dra.inventory import DraInventory
from vfcore.placement.scheduler import predict, remedy, simulate
from vfcore.placement.scheduler.dynamic_resources import DynamicResources
from vfcore.placement.scheduler.remedy import device_pins

remedy_module = importlib.import_module("vfcore.placement.scheduler.remedy")


def test_a_node_whose_allocator_finds_no_devices_counts_as_cannot_allocate():
    cluster = dra_cluster({"a": ("whole", 1), "b": ("whole", 2)})
    sim = simulate(gpu_pods([2, 2]), cluster)
    assert dict(sim.placements) == {"w0/0": "b"}
    (stranded,) = sim.stranded
    assert stranded.reason == "0/2 nodes fit w1/0: 2 cannot allocate all claims"


def test_filters_before_it_count_first():
    cluster = dra_cluster({"a": ("whole", 1), "b": ("whole", 1)})
    tainted = cluster.node("a")
    cluster = replace(
        cluster,
        nodes=(replace(tainted, taints=(Taint("dedicated", "x"),)), cluster.node("b")),
    )
    sim = simulate(gpu_pods([1, 1]), cluster)
    assert sim.stranded[0].reason == (
        "0/2 nodes fit w1/0: 1 cannot allocate all claims, 1 node(s) had untolerated taint(s)"
    )


def test_least_allocated_spreads_dra_pods_and_strands_a_large_claim_waves_fix_it():
    """DRA's version of examples/stranding.py: 2, 2 and 4 GPUs on two 4-GPU nodes."""
    cluster = dra_cluster(
        {"a": ("whole", 4), "b": ("whole", 4)}, allocatable={"cpu": 8000, "memory": 2**36}
    )
    pods = gpu_pods([2, 2, 4], cpu=4000)
    before = predict(pods, cluster)
    assert before.verdict == "strands" and before.stranded_always == ("w2/0",)
    fix = remedy(pods, cluster, {"w0/0": "a", "w1/0": "a", "w2/0": "b"}, before=before)
    assert fix.kind == "waves" and fix.waves[0] == ("w2/0",) and fix.verdict_after == "lands"


def test_the_order_of_a_nodes_gpus_makes_a_first_fit_at_risk():
    """docs/dra.md: a 3g, then 1g.20gb slices, then a 3g on two H100s (DynamicMIG)."""
    cluster = dra_cluster({"a": ("mig:H100-80GB", 2)})
    three = DraRequest("mig.nvidia.com", 1, (profile("3g.40gb"),))
    small = DraRequest("mig.nvidia.com", 1, (profile("1g.20gb"),))
    seven = DraRequest("mig.nvidia.com", 1, (profile("7g.80gb"),))
    requests = [three, small, seven]
    pods = tuple(
        PodRequest(f"w{i}/0", f"w{i}", 0, (("cpu", 100),), slice="dra", dra=r)
        for i, r in enumerate(requests)
    )
    prediction = predict(pods, cluster)
    # the 1g.20gb lands beside the 3g (the 7g then fits the other GPU) or on the idle GPU
    assert prediction.verdict == "at-risk" and prediction.stranded_sometimes == ("w2/0",)
    assert prediction.outcomes_explored == 2


def test_devices_of_unknown_use_are_run_full_and_empty():
    bad = allocated_claim("odd", [("a", "gpu-0")])
    bad["status"]["allocation"]["devices"]["results"][0]["device"] = 3
    cluster = dra_cluster({"a": ("whole", 2)}, claims=[bad])
    prediction = predict(gpu_pods([2]), cluster)
    assert prediction.verdict == "unknown" and prediction.unknown_nodes == ("a",)
    assert dict(prediction.brackets) == {"unknown-full": "strands", "unknown-empty": "lands"}


def test_mig_slices_as_vf_deploy_claims_them_strand_where_first_fit_fragments():
    cluster = dra_cluster({"a": ("mig:H100-80GB", 1)})
    prediction = predict(mig_pods([39, 19, 9, 9]), cluster)
    assert prediction.verdict == "strands" and prediction.stranded_always == ("w3/0",)
    (stranded,) = prediction.example_stranding.stranded
    assert stranded.reason == "0/1 nodes fit w3/0: 1 cannot allocate all claims"


def test_pins_name_the_planned_gpus_by_uuid_and_parent_uuid():
    cluster = dra_cluster({"a": ("whole", 2), "b": ("mig:H100-80GB", 1)})
    pods = (*gpu_pods([1]), *mig_pods([9], cpu=500))
    pods = (pods[0], replace(pods[1], pod="m/0", node="m"))
    planned = {
        "w0/0": ("gpu.nvidia.com/a/gpu-1",),
        "m/0": ("gpu.nvidia.com/b/gpu-0-mig-1g10gb-19-0",),
    }
    pins = device_pins(pods, cluster, planned)
    assert pins == {
        "m": ('device.attributes["gpu.nvidia.com"].parentUUID in ["GPU-b-0"]',),
        "w0": ('device.attributes["gpu.nvidia.com"].uuid in ["GPU-a-1"]',),
    }


def test_a_pin_longer_than_the_apis_selector_limit_is_not_offered(monkeypatch):
    cluster = dra_cluster({"a": ("whole", 8)})
    pods = gpu_pods([8])
    planned = {"w0/0": tuple(f"gpu.nvidia.com/a/gpu-{k}" for k in range(8))}
    (pin,) = device_pins(pods, cluster, planned)["w0"]
    monkeypatch.setattr(remedy_module, "MAX_SELECTOR_LENGTH", len(pin) - 1)
    assert device_pins(pods, cluster, planned) == {}


def test_the_model_reuses_the_inventory_the_plan_compiled():
    cluster = dra_cluster({"a": ("whole", 2)})
    pods = gpu_pods([1, 1])
    inventory = DraInventory(cluster, [p.dra for p in pods if p.dra])
    memo: dict[tuple[object, ...], object] = {}
    DynamicResources.seed(memo, cluster, inventory)
    assert DynamicResources.of(pods[:1], cluster, "full", memo).inventory is inventory
    # no device of unknown use: the empty bracket compiles alike, so it is reused too
    assert DynamicResources.of(pods, cluster, "empty", memo).inventory is inventory
    other = gpu_pods([2])  # a request the inventory does not have: compiled anew, then kept
    made = DynamicResources.of(other, cluster, "full", memo)
    assert made.inventory is not inventory
    assert DynamicResources.of(other, cluster, "full", memo) is made


def test_with_devices_of_unknown_use_each_bracket_has_its_own_inventory():
    bad = allocated_claim("odd", [("a", "gpu-0")])
    bad["status"]["allocation"]["devices"]["results"][0]["device"] = 3
    cluster = dra_cluster({"a": ("whole", 2)}, claims=[bad])
    pods = gpu_pods([1])
    memo: dict[tuple[object, ...], object] = {}
    full = DynamicResources.of(pods, cluster, "full", memo)
    empty = DynamicResources.of(pods, cluster, "empty", memo)
    assert full.inventory.unknown_as == "full" and empty.inventory.unknown_as == "empty"
