"""DRA facts from dumps: ResourceSlices, DeviceClasses, allocated ResourceClaims; unknown never idle."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from tests.dra_cases import allocated_claim, listing
from vfcore.cluster import snapshot_from_kubernetes, snapshot_from_list
from vfcore.cluster.dra import DeviceValue
from vfcore.cluster.kubeparse.dra_objects import parse_dra, parse_dra_list
from vfcore.placement.claims import DraRequest
from vfcore.placement.dra.inventory import DraInventory
from vfcore.placement.dra.nvidia import dynamic_mig_slices, nvidia_device_classes, whole_gpu_slices

NODES = {
    "kind": "NodeList",
    "items": [
        {
            "kind": "Node",
            "metadata": {"name": n},
            "status": {
                "allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for n in ("a", "b")
    ],
}
PODS = {"kind": "PodList", "items": []}
SLICES = listing(
    "ResourceSlice", [*whole_gpu_slices("a", 2), *dynamic_mig_slices("b", "H100-80GB", 1)]
)
CLASSES = listing("DeviceClass", nvidia_device_classes())
CLAIMS = listing("ResourceClaim", [allocated_claim("train", [("a", "gpu-1")])])
GPU = DraRequest("gpu.nvidia.com", 1)


def test_a_dump_becomes_slices_classes_and_allocations():
    facts = parse_dra(SLICES, CLASSES, CLAIMS)
    assert facts.unknowns == () and facts.slices_unknown is None
    whole = next(s for s in facts.slices if s.pool == "a")
    assert (whole.driver, whole.node, whole.scope, whole.slice_count) == (
        "gpu.nvidia.com",
        "a",
        "node",
        1,
    )
    gpu0 = whole.devices[0]
    assert dict(gpu0.attributes)["type"] == DeviceValue("string", "gpu")
    assert dict(gpu0.capacity)["memory"] == Fraction(81559 * 2**20)
    split = [s for s in facts.slices if s.pool == "b"]
    assert len(split) == 2 and split[0].counter_sets and not split[0].devices
    mig = next(d for d in split[1].devices if d.name == "gpu-0-mig-3g40gb-9-4")
    (use,) = mig.consumes
    assert use.counter_set == "gpu-0-counter-set"
    assert {n for n, _ in use.counters} == {
        "compute-slices",
        *(f"memory-slice-{k}" for k in range(4, 8)),
    }
    assert [a.device for a in facts.allocated] == ["gpu-1"]
    assert [c.name for c in facts.classes or ()] == ["gpu.nvidia.com", "mig.nvidia.com"]


def test_the_snapshot_carries_them_from_a_directory_and_from_one_list():
    cluster = snapshot_from_kubernetes(
        NODES,
        PODS,
        resourceslices_json=SLICES,
        deviceclasses_json=CLASSES,
        resourceclaims_json=CLAIMS,
    )
    assert cluster.dra is not None and len(cluster.dra.slices) == 3
    assert "dra" in cluster.to_dict()
    one = {
        "kind": "List",
        "items": [*NODES["items"], *SLICES["items"], *CLASSES["items"], *CLAIMS["items"]],
    }
    one["items"].append(
        {
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "x"},
            "spec": {"containers": []},
            "status": {"phase": "Succeeded"},
        }
    )
    listed = snapshot_from_list(json.dumps(one))
    assert listed.dra is not None and listed.dra.slices == cluster.dra.slices
    assert listed.dra.allocated == cluster.dra.allocated
    # given no DRA document at all, there are no DRA facts (not "no devices")
    assert snapshot_from_kubernetes(NODES, PODS).dra is None


@pytest.mark.parametrize(
    ("slices", "classes", "claims", "field", "reason"),
    [
        (None, CLASSES, CLAIMS, "slices_unknown", "resourceslices.json is missing"),
        (SLICES, None, CLAIMS, "classes_unknown", "deviceclasses.json is missing"),
        (SLICES, CLASSES, None, "claims_unknown", "resourceclaims.json is missing"),
        (
            SLICES,
            CLASSES,
            {"kind": "Status", "status": "Failure", "reason": "Forbidden", "message": "no"},
            "claims_unknown",
            "the API refused the resource claim listing: Forbidden: no",
        ),
        (
            {**SLICES, "metadata": {"continue": "abc"}},
            CLASSES,
            CLAIMS,
            "slices_unknown",
            "one page of a longer list",
        ),
    ],
    ids=["slices-missing", "classes-missing", "claims-missing", "claims-refused", "slices-partial"],
)
def test_a_missing_or_refused_listing_is_unknown_never_empty(
    slices, classes, claims, field, reason
):
    facts = parse_dra(slices, classes, claims)
    assert reason in getattr(facts, field)


def test_an_empty_but_valid_claim_list_means_nothing_is_allocated():
    facts = parse_dra(SLICES, CLASSES, listing("ResourceClaim", []))
    assert facts.claims_unknown is None and facts.allocated == ()


def test_an_unreadable_slice_makes_its_pool_unknown_and_one_without_a_pool_makes_all():
    broken = json.loads(json.dumps(SLICES))
    broken["items"][0]["spec"]["devices"][0]["capacity"]["memory"]["value"] = "lots"
    facts = parse_dra(broken, CLASSES, CLAIMS)
    assert facts.bad_pools == (("gpu.nvidia.com", "a"),) and facts.slices_unknown is None
    assert any("is not a Kubernetes quantity" in u.reason for u in facts.unknowns)
    broken["items"][0]["spec"].pop("pool")
    facts = parse_dra(broken, CLASSES, CLAIMS)
    assert "names no pool" in (facts.slices_unknown or "")


def test_a_claim_whose_allocation_cannot_be_read_makes_its_pools_uncertain():
    bad = allocated_claim("odd", [("a", "gpu-0")])
    bad["status"]["allocation"]["devices"]["results"][0]["device"] = 7
    facts = parse_dra(SLICES, CLASSES, listing("ResourceClaim", [bad]))
    assert facts.uncertain_pools == (("gpu.nvidia.com", "a"),) and facts.claims_unknown is None
    lost = {"kind": "ResourceClaim", "metadata": {"name": "x", "namespace": "y"}, "status": []}
    facts = parse_dra(SLICES, CLASSES, listing("ResourceClaim", [lost]))
    assert facts.claims_unknown is not None


def test_admin_access_results_take_nothing_and_shared_ones_are_marked():
    claim = allocated_claim("mon", [("a", "gpu-0"), ("a", "gpu-1")])
    results = claim["status"]["allocation"]["devices"]["results"]
    results[0]["adminAccess"] = True
    results[1]["shareID"] = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
    facts = parse_dra(SLICES, CLASSES, listing("ResourceClaim", [claim]))
    assert [(a.device, a.shared) for a in facts.allocated] == [("gpu-1", True)]


def _inventory(slices=SLICES, classes=CLASSES, claims=CLAIMS, unknown_as="full"):
    cluster = snapshot_from_kubernetes(
        NODES,
        PODS,
        resourceslices_json=slices,
        deviceclasses_json=classes,
        resourceclaims_json=claims,
    )
    return DraInventory(cluster, [GPU], unknown_as=unknown_as)


def test_the_inventory_brackets_what_is_unknown():
    inv = _inventory()
    assert inv.unknown_nodes == {} and inv.unbounded_nodes == {}
    (block,) = inv.blocks["a"]
    assert inv.types[block.type_id].base == 0b10  # gpu-1 is allocated
    assert len(inv.blocks["b"]) == 1  # DynamicMIG: one block per GPU
    doubtful = _inventory(claims=None)
    assert set(doubtful.unknown_nodes) == {"a", "b"}
    (block,) = doubtful.blocks["a"]
    assert doubtful.types[block.type_id].base == 0b11  # full: every device of unknown use taken
    (block,) = _inventory(claims=None, unknown_as="empty").blocks["a"]
    assert _inventory(claims=None, unknown_as="empty").types[block.type_id].base == 0
    assert set(_inventory(slices=None).unbounded_nodes) == {"a", "b"}


def test_an_incomplete_pool_is_unbounded_and_gives_no_device():
    items = [s for s in SLICES["items"] if s["metadata"]["name"] != "b-gpu.nvidia.com-gpu-0"]
    inv = _inventory(slices=listing("ResourceSlice", items))
    assert "incomplete" in inv.unbounded_nodes["b"] and inv.blocks["b"] == ()


def test_a_tainted_device_is_not_free():
    tainted = json.loads(json.dumps(SLICES))
    tainted["items"][0]["spec"]["devices"][0]["taints"] = [
        {"key": "gpu.nvidia.com/xid", "effect": "NoSchedule"}
    ]
    (block,) = _inventory(slices=tainted).blocks["a"]
    assert _inventory(slices=tainted).types[block.type_id].base == 0b11


def test_a_request_of_a_missing_class_or_outside_the_subset_cannot_be_judged():
    odd = listing(
        "DeviceClass",
        [
            {
                "kind": "DeviceClass",
                "metadata": {"name": "gpu.nvidia.com"},
                "spec": {"selectors": [{"cel": {"expression": "size(device.attributes) > 0"}}]},
            }
        ],
    )
    inv = _inventory(classes=odd)
    assert "dra-cel-unsupported" in (inv.requests[0].problem or "")
    inv = _inventory(classes=listing("DeviceClass", []))
    assert inv.requests[0].missing_class


def test_devices_of_a_list_without_resourceslice_items_are_unknown():
    facts = parse_dra_list({"kind": "List", "items": NODES["items"]})
    assert "no ResourceSlice items" in (facts.slices_unknown or "")
