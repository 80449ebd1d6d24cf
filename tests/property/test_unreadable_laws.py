"""Laws of unreadable nodes: bracketing only ever moves a verdict toward unknown."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.property.cluster_strategies import node_lists, pod_lists
from vfcore.cluster import NodeState, snapshot_from_kubernetes
from vfcore.placement.packing import SolverConfig
from vfcore.placement.plan import plan_pods

CONFIG = SolverConfig.deterministic(max_deterministic_time=10.0)
NO_PODS = {"kind": "PodList", "items": []}


def node_json(node: NodeState, extra: dict[str, int] | None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "allocatable": {r: str(u) for r, u in node.allocatable},
        "conditions": [{"type": "Ready", "status": "True" if node.ready else "False"}],
    }
    if extra is not None:  # kubelet: capacity >= allocatable, resource by resource
        status["capacity"] = {r: str(u + extra.get(r, 0)) for r, u in node.allocatable}
    return {
        "kind": "Node",
        "metadata": {"name": node.name, "labels": dict(node.labels)},
        "spec": {
            "unschedulable": node.unschedulable,
            "taints": [t.to_dict() for t in node.taints],
        },
        "status": status,
    }


Mutation = Callable[[list[Any], int], None]


def _drop_allocatable(items: list[Any], i: int) -> None:
    # a missing allocatable is read as capacity (as the API server defaults it); one that is
    # not an object cannot be read at all
    items[i]["status"]["allocatable"] = ["unreadable"]


def _entry(value: object) -> Mutation:
    def mutate(items: list[Any], i: int) -> None:
        alloc = items[i]["status"]["allocatable"]
        alloc[sorted(alloc)[0]] = value

    return mutate


def _drop_pods(items: list[Any], i: int) -> None:
    items[i]["status"]["allocatable"].pop("pods", None)


def _duplicate(items: list[Any], i: int) -> None:
    twin = copy.deepcopy(items[i])
    twin["status"]["allocatable"]["pods"] = "1"
    items.append(twin)


def _garbage(items: list[Any], i: int) -> None:
    items[i] = 7


MUTATIONS: dict[str, Mutation] = {
    "allocatable not an object": _drop_allocatable,
    "absurd quantity": _entry("9999999999999999999Ei"),
    "5001 digits": _entry("9" * 5001),
    "unparsable": _entry("abc"),
    "negative": _entry("-1"),
    "no pods entry": _drop_pods,
    "listed twice": _duplicate,
    "not an object": _garbage,
}


@settings(max_examples=150, deadline=None)
@given(
    pod_lists(max_pods=5),
    node_lists(max_nodes=3),
    st.data(),
    st.sampled_from(sorted(MUTATIONS)),
)
def test_making_a_node_unreadable_only_moves_the_verdict_towards_unknown(
    pods, nodes, data, mutation
):
    extras = [
        data.draw(
            st.none()
            | st.dictionaries(st.sampled_from([r for r, _ in n.allocatable]), st.integers(0, 8))
        )
        for n in nodes
    ]
    items = [node_json(n, e) for n, e in zip(nodes, extras, strict=True)]
    known = plan_pods(
        pods, snapshot_from_kubernetes({"kind": "NodeList", "items": items}, NO_PODS), solver=CONFIG
    )
    i = data.draw(st.integers(0, len(nodes) - 1))
    broken = copy.deepcopy(items)
    MUTATIONS[mutation](broken, i)
    snap = snapshot_from_kubernetes({"kind": "NodeList", "items": broken}, NO_PODS)
    assert len(snap.unreadable_nodes) == 1 and len(snap.nodes) == len(nodes) - 1
    after = plan_pods(pods, snap, solver=CONFIG)
    event(f"{mutation}: {known.verdict} -> {after.verdict}")
    assert after.verdict in (known.verdict, "unknown")
    if snap.unreadable_nodes[0].bound is None:
        assert after.verdict != "does-not-fit"  # nothing bounds it: nothing is proven
    assert after.fix is None  # no fix rests on a guess of the unreadable node's size
    name = snap.unreadable_nodes[0].name
    assert any(u.what in (f"node/{name}", name) for u in after.unknown)
    if after.verdict != "fits":
        assert after.scheduler.verdict == "unknown"
