"""kube-scheduler 1.36's allocator on one node: first fit in slice order, counters, slice orders."""

from __future__ import annotations

from tests.dra_cases import allocated_claim, dra_cluster, profile
from vfcore.placement.claims import DraRequest
from vfcore.placement.dra.allocator import FAILED_ERROR, NO_FIT, AllocationModel
from vfcore.placement.dra.inventory import DraInventory

ONE_G = DraRequest("mig.nvidia.com", 1, (profile("1g.10gb"),))
ONE_G_20 = DraRequest("mig.nvidia.com", 1, (profile("1g.20gb"),))
THREE_G = DraRequest("mig.nvidia.com", 1, (profile("3g.40gb"),))
FOUR_G = DraRequest("mig.nvidia.com", 1, (profile("4g.40gb"),))
GPU = DraRequest("gpu.nvidia.com", 1)
TWO_GPUS = DraRequest("gpu.nvidia.com", 2)


def _model(cluster, requests):
    inv = DraInventory(cluster, requests)
    return inv, AllocationModel(inv)


def _taken(inv, model, sid, node):
    """The device names taken in state ``sid``, per block (sorted: blocks are a multiset)."""
    blocks = inv.blocks[node]
    names = blocks[0].devices
    return sorted(
        tuple(names[d] for d in range(inv.types[tid].size) if taken >> d & 1)
        for tid, taken in model.states[sid]
    )


def test_whole_gpus_are_taken_first_free_first_in_slice_order():
    cluster = dra_cluster({"a": ("whole", 4)}, claims=[allocated_claim("c", [("a", "gpu-0")])])
    inv, model = _model(cluster, [GPU, TWO_GPUS])
    start = model.initial("a")
    (one,) = model.outcomes(0, 1, start)
    assert _taken(inv, model, one, "a") == [("gpu-1",)]
    (two,) = model.outcomes(1, 2, one)
    assert _taken(inv, model, two, "a") == [("gpu-1", "gpu-2", "gpu-3")]
    assert model.outcomes(0, 1, two) == NO_FIT  # all four gone (one held by an existing claim)


def test_a_mig_placement_takes_the_first_free_start_and_can_fragment_the_gpu():
    cluster = dra_cluster({"a": ("mig:H100-80GB", 1)})
    inv, model = _model(cluster, [ONE_G, FOUR_G, THREE_G])
    (after_1g,) = model.outcomes(0, 1, model.initial("a"))
    assert _taken(inv, model, after_1g, "a") == [("gpu-0-mig-1g10gb-19-0",)]
    # a 4g.40gb starts only at slot 0, which the 1g now holds: the GPU is fragmented for it
    assert model.outcomes(1, 1, after_1g) == NO_FIT
    (after_3g,) = model.outcomes(2, 1, after_1g)
    assert _taken(inv, model, after_3g, "a") == [("gpu-0-mig-1g10gb-19-0", "gpu-0-mig-3g40gb-9-4")]
    # the full GPU and any MIG device exclude each other through the counters
    assert model.outcomes(2, 1, after_3g) == NO_FIT


def test_the_order_of_a_nodes_gpus_is_a_tie_explored_lazily():
    cluster = dra_cluster({"a": ("mig:H100-80GB", 2)})
    inv, model = _model(cluster, [THREE_G, ONE_G_20])
    (first,) = model.outcomes(0, 1, model.initial("a"))  # two idle GPUs: one outcome up to order
    outcomes = model.outcomes(1, 1, first)
    # the 1g.20gb lands beside the 3g (at 4) or on the idle GPU (at 0): two states
    assert sorted(_taken(inv, model, o, "a") for o in outcomes) == [
        [(), ("gpu-0-mig-1g20gb-15-4", "gpu-0-mig-3g40gb-9-0")],
        [("gpu-0-mig-1g20gb-15-0",), ("gpu-0-mig-3g40gb-9-0",)],
    ]


def test_a_selector_that_errs_where_the_search_looks_fails_the_attempt():
    cluster = dra_cluster({"a": ("whole", 2)})
    broken = DraRequest(
        "gpu.nvidia.com", 1, ('device.attributes["gpu.nvidia.com"].profile == "x"',)
    )
    _, model = _model(cluster, [broken])
    assert model.outcomes(0, 1, model.initial("a")) == FAILED_ERROR
    assert not model.fits(0, 1, model.initial("a"))


def test_identical_nodes_share_one_state():
    cluster = dra_cluster({"a": ("mig:H100-80GB", 2), "b": ("mig:H100-80GB", 2)})
    _, model = _model(cluster, [ONE_G])
    assert model.initial("a") == model.initial("b")
