"""Laws of kubectl JSON → ClusterSnapshot, on random well-formed dumps.

Each dump is drawn as plain integers (canonical units) first, then written as
Kubernetes would print it, in a randomly chosen but exactly equivalent
quantity spelling (``1536Mi``, ``1.5Gi``, ``1610612736``…). The oracle works on
the integers, with the sidecar rule stated as the KEP states it (the peak over
the pod's phases), not as vfcore computes it.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from vfcore.cluster import snapshot_from_kubernetes

CPU, MEMORY, PODS, GPU = "cpu", "memory", "pods", "nvidia.com/gpu"
RESOURCES = (CPU, MEMORY, GPU)
PHASES = ("Running", "Pending", "Unknown", "Succeeded", "Failed")
COUNTED = ("Running", "Pending", "Unknown")


# -- spelling integers as Kubernetes quantities ------------------------------------


@st.composite
def spelled(draw: st.DrawFn, resource: str, units: int) -> object:
    """``units`` (canonical) written in one of the exactly equivalent quantity forms."""
    forms: list[object] = [str(units)] if resource != CPU else [f"{units}m"]
    if resource == CPU:
        if units % 1000 == 0:
            forms += [str(units // 1000), units // 1000]
        else:
            forms.append(f"{units // 1000}.{units % 1000:03d}".rstrip("0"))
    elif resource == MEMORY:
        for suffix, size in (
            ("Ki", 2**10),
            ("Mi", 2**20),
            ("Gi", 2**30),
            ("k", 10**3),
            ("M", 10**6),
        ):
            if units % size == 0:
                forms.append(f"{units // size}{suffix}")
        if units % 2**29 == 0:
            forms.append(f"{units // 2**30}.5Gi" if units % 2**30 else f"{units // 2**30}Gi")
        if units % 1000 == 0:
            forms.append(f"{units // 1000}e3")
    else:
        forms.append(units)
    return draw(st.sampled_from(forms))


def cpu_units() -> st.SearchStrategy[int]:
    return st.integers(0, 64).map(lambda k: k * 250) | st.integers(0, 4000)


def memory_units() -> st.SearchStrategy[int]:
    return st.builds(
        lambda k, unit: k * unit,
        st.integers(0, 512),
        st.sampled_from([1, 2**10, 2**20, 2**29, 2**30, 10**3, 10**6]),
    )


def units_for(resource: str) -> st.SearchStrategy[int]:
    if resource == CPU:
        return cpu_units()
    if resource == MEMORY:
        return memory_units()
    return st.integers(0, 8)


@st.composite
def resource_values(draw: st.DrawFn) -> dict[str, int]:
    chosen = draw(st.lists(st.sampled_from(RESOURCES), unique=True, max_size=3))
    return {r: draw(units_for(r)) for r in sorted(chosen)}


# -- a drawn dump: integers plus the JSON that spells them -----------------------


@dataclass(frozen=True)
class Container:
    requests: dict[str, int]
    sidecar: bool = False


@dataclass(frozen=True)
class Pod:
    name: str
    node: str | None
    phase: str
    containers: tuple[Container, ...]
    init: tuple[Container, ...]
    overhead: dict[str, int]


@st.composite
def container_json(draw: st.DrawFn, c: Container) -> dict[str, Any]:
    """Each resource lands in requests, in limits only (defaulting), or in both (equal)."""
    requests: dict[str, object] = {}
    limits: dict[str, object] = {}
    for resource, units in sorted(c.requests.items()):
        where = draw(st.sampled_from(["requests", "limits", "both"]))
        if where in ("requests", "both"):
            requests[resource] = draw(spelled(resource, units))
        if where in ("limits", "both"):
            limits[resource] = draw(spelled(resource, units))
    body: dict[str, Any] = {"name": "c", "image": "busybox", "resources": {}}
    if requests:
        body["resources"]["requests"] = requests
    if limits:
        body["resources"]["limits"] = limits
    if c.sidecar:
        body["restartPolicy"] = "Always"
    return body


@st.composite
def pods(draw: st.DrawFn, node_names: list[str]) -> Pod:
    containers = tuple(Container(draw(resource_values())) for _ in range(draw(st.integers(1, 3))))
    init = tuple(
        Container(draw(resource_values()), sidecar=draw(st.booleans()))
        for _ in range(draw(st.integers(0, 3)))
    )
    overhead = draw(resource_values()) if draw(st.booleans()) else {}
    node = draw(st.sampled_from([*node_names, None, "not-in-the-list"]))
    return Pod("", node, draw(st.sampled_from(PHASES)), containers, init, overhead)


@st.composite
def pod_json(draw: st.DrawFn, pod: Pod) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [draw(container_json(c)) for c in pod.containers]}
    if pod.init:
        spec["initContainers"] = [draw(container_json(c)) for c in pod.init]
    if pod.overhead:
        spec["overhead"] = {r: draw(spelled(r, u)) for r, u in sorted(pod.overhead.items())}
    if pod.node is not None:
        spec["nodeName"] = pod.node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": "ns"},
        "spec": spec,
        "status": {"phase": pod.phase},
    }


@dataclass(frozen=True)
class Dump:
    allocatable: dict[str, dict[str, int]]
    pods: tuple[Pod, ...]
    nodes_json: dict[str, Any]
    pods_json: dict[str, Any]


@st.composite
def dumps(draw: st.DrawFn) -> Dump:
    names = draw(
        st.lists(
            st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True),
            min_size=1,
            max_size=5,
            unique=True,
        )
    )
    allocatable: dict[str, dict[str, int]] = {}
    node_items = []
    for name in names:
        alloc = {
            CPU: draw(cpu_units()),
            MEMORY: draw(memory_units()),
            PODS: draw(st.integers(0, 110)),
        }
        if draw(st.booleans()):
            alloc[GPU] = draw(st.integers(0, 8))
        allocatable[name] = alloc
        node_items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "spec": {},
                "status": {
                    "allocatable": {r: draw(spelled(r, u)) for r, u in sorted(alloc.items())},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    drawn = draw(st.lists(pods(names), max_size=10))
    named = tuple(
        Pod(f"p{i}", p.node, p.phase, p.containers, p.init, p.overhead) for i, p in enumerate(drawn)
    )
    pod_items = [draw(pod_json(p)) for p in named]
    return Dump(
        allocatable,
        named,
        {"apiVersion": "v1", "kind": "List", "items": node_items},
        {"apiVersion": "v1", "kind": "List", "items": pod_items},
    )


# -- the oracle: the pod's peak over its phases (KEP-753), from integers ----------


def _sum(*parts: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in parts:
        for r, u in part.items():
            out[r] = out.get(r, 0) + u
    return out


def expected_request(pod: Pod) -> dict[str, int]:
    sidecars = [c.requests for c in pod.init if c.sidecar]
    running = _sum(*(c.requests for c in pod.containers), *sidecars)
    phases = [running]
    started: list[dict[str, int]] = []
    for c in pod.init:
        if c.sidecar:
            started.append(c.requests)
            phases.append(_sum(*started))
        else:
            phases.append(_sum(c.requests, *started))
    peak = {r: max(p.get(r, 0) for p in phases) for r in RESOURCES}
    return _sum(peak, pod.overhead)


def expected_requested(dump: Dump) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {n: {PODS: 0} for n in dump.allocatable}
    for pod in dump.pods:
        if pod.node in out and pod.phase in COUNTED:
            out[pod.node] = _sum(out[pod.node], expected_request(pod), {PODS: 1})
    return out


# -- laws -------------------------------------------------------------------------


@given(dumps())
def test_free_is_allocatable_minus_the_requests_of_bound_running_pods(dump: Dump) -> None:
    snap = snapshot_from_kubernetes(dump.nodes_json, dump.pods_json)
    # a counted pod bound to a node missing from the list names that node: it exists, unread
    orphans = sorted(
        {
            p.node
            for p in dump.pods
            if p.phase in COUNTED and p.node not in (*dump.allocatable, None)
        }
    )
    assert [u.name for u in snap.unreadable_nodes] == orphans
    assert all(u.bound is None for u in snap.unreadable_nodes)
    assert [u.what for u in snap.unknowns] == [f"node/{n}" for n in orphans]
    assert snap.is_fully_known == (not orphans)
    expected = expected_requested(dump)
    assert [n.name for n in snap.nodes] == sorted(dump.allocatable)
    for node in snap.nodes:
        for resource in (*RESOURCES, PODS):
            alloc = dump.allocatable[node.name].get(resource, 0)
            used = expected[node.name].get(resource, 0)
            assert node.allocatable_of(resource) == alloc
            assert node.requested_of(resource) == used
            assert node.free_of(resource) == alloc - used


@given(dumps())
def test_allocatable_is_exactly_what_the_node_advertises_and_never_negative(dump: Dump) -> None:
    snap = snapshot_from_kubernetes(dump.nodes_json, dump.pods_json)
    for node in snap.nodes:
        assert dict(node.allocatable) == dump.allocatable[node.name]
        assert all(units >= 0 for _, units in node.allocatable)
        assert node.requested is not None
        assert all(units >= 0 for _, units in node.requested)


REFUSED = {
    "apiVersion": "v1",
    "kind": "Status",
    "status": "Failure",
    "reason": "Forbidden",
    "message": "pods is forbidden",
    "code": 403,
}


@given(
    dumps(),
    st.sampled_from([None, "", "   ", b"", "{", "[]", REFUSED, {"kind": "NodeList", "items": []}]),
)
def test_dropping_the_pod_list_makes_every_node_unknown_never_idle(
    dump: Dump, lost: object
) -> None:
    snap = snapshot_from_kubernetes(dump.nodes_json, lost)
    assert [n.name for n in snap.nodes] == sorted(dump.allocatable)
    assert not snap.is_fully_known
    assert any(u.what == "pods" for u in snap.unknowns)
    for node in snap.nodes:
        assert node.requested is None and node.unknown_reason
        assert all(node.free_of(r) is None for r in (*RESOURCES, PODS))


@given(dumps(), st.randoms(use_true_random=False))
def test_item_order_and_text_form_change_nothing(dump: Dump, rng: Any) -> None:
    base = snapshot_from_kubernetes(dump.nodes_json, dump.pods_json)
    nodes, pods_doc = copy.deepcopy(dump.nodes_json), copy.deepcopy(dump.pods_json)
    rng.shuffle(nodes["items"])
    rng.shuffle(pods_doc["items"])
    assert snapshot_from_kubernetes(json.dumps(nodes), json.dumps(pods_doc).encode()) == base


@given(dumps())
def test_parsing_never_mutates_its_input(dump: Dump) -> None:
    before = copy.deepcopy((dump.nodes_json, dump.pods_json))
    snapshot_from_kubernetes(dump.nodes_json, dump.pods_json)
    assert (dump.nodes_json, dump.pods_json) == before


@given(dumps())
def test_finished_and_unbound_pods_never_change_the_snapshot(dump: Dump) -> None:
    kept = [
        item
        for item, pod in zip(dump.pods_json["items"], dump.pods, strict=True)
        if pod.phase in COUNTED and pod.node is not None  # bound elsewhere: names that node
    ]
    only_counted = {**dump.pods_json, "items": kept}
    assert snapshot_from_kubernetes(dump.nodes_json, only_counted) == snapshot_from_kubernetes(
        dump.nodes_json, dump.pods_json
    )


@given(dumps())
def test_removing_a_bound_pod_never_decreases_free(dump: Dump) -> None:
    full = snapshot_from_kubernetes(dump.nodes_json, dump.pods_json)
    for i in range(len(dump.pods)):
        items = dump.pods_json["items"][:i] + dump.pods_json["items"][i + 1 :]
        fewer = snapshot_from_kubernetes(dump.nodes_json, {**dump.pods_json, "items": items})
        for before, after in zip(full.nodes, fewer.nodes, strict=True):
            for resource in (*RESOURCES, PODS):
                assert (after.free_of(resource) or 0) >= (before.free_of(resource) or 0)


# -- GPU memory facts: never beyond the catalogue -----------------------------------------


@given(
    st.integers(0, 10**13).map(str)
    | st.sampled_from(["9728", "4864", "15360", "16106127360", "0", "294913"]),
    st.sampled_from([None, "single", "mixed", "none"]),
)
def test_no_gpu_memory_fact_is_beyond_the_largest_catalogued_gpu(
    value: str, strategy: str | None
) -> None:
    from vfcore.cluster.kubeparse.gpu_labels import GPU_MEMORY_MIB_BOUNDS, gpu_info

    labels = {"nvidia.com/gpu.memory": value, "nvidia.com/gpu.count": "1"}
    if strategy is not None:
        labels["nvidia.com/mig.strategy"] = strategy
    info, problems = gpu_info(labels, {})
    assert info is not None
    low, high = GPU_MEMORY_MIB_BOUNDS
    if low <= int(value) <= high:
        assert info.memory_mib == int(value)  # MiB as written, whatever the MIG strategy
        assert problems == []
    else:
        assert info.memory_mib is None  # unknown, never a guessed unit
        assert any(p.startswith("gpu-memory-implausible: ") and value in p for p in problems)
