"""The exact plan of DRA claims: which node, and which devices, for every pod.

The placement problem of DRA pods is the usual one (cpu, memory, pod slots,
selectors and taints on each node) plus **devices as capacity**: a pod's claim
needs ``count`` devices its request accepts, each device serves one claim, and
a partitionable device (a MIG placement) also consumes its GPU's shared
counters (memory slices, compute slices), which must not run out.

How (cheapest first, as :func:`vfcore.placement.packing.pack` does):

1. **Regions.** Per block type (:mod:`.inventory`) the *maximal* numbers of
   devices it can give each of the flow's requests at once (``(2, 1)``: two
   ``1g`` and one ``3g`` on one H100), each with a witness — the devices that
   do it. A node can serve a demand when its blocks, each taking one of its
   region's vectors, cover it (a small dynamic program).
2. **First-fit-decreasing**: pods with the largest claims first, each to the
   first node (by name) whose resources and devices still hold it. If every
   pod lands, that proves feasibility.
3. **CP-SAT** over node types (identical resources, eligibility and devices)
   and their maximal *packing patterns* (how many pods of each shape fit one
   node, devices included): how many nodes of each type use each pattern.
   Its infeasibility proves *does not fit*; a model too large to enumerate, or
   a solver out of time, answers *unknown* — never a guess.

Then each node's devices are *realised*: per block the region vector and its
witness, so the plan names the devices (``gpu-0-mig-3g40gb-9-4``) — a layout
that fragments no GPU. :func:`check_devices` re-checks every device assignment
without the solver: the device exists on the pod's node, is free, serves one
pod, the request's selectors accept it, and every counter holds.

Worked example (``tests/unit/test_dra_planning.py``): an H100 with DynamicMIG,
requests ``1g.10gb`` and ``3g.40gb``. Its region (``1g``, ``3g``) is ``(7, 0)``,
``(4, 1)`` and ``(0, 2)``: two ``3g`` take all 8 memory slices, one ``3g`` leaves 4
slices but only 4 compute slices for ``1g``s. Claims for one ``1g`` and two
``3g`` need ``(1, 2)``, which no vector covers: on one GPU it does not fit (a
proof), on two it does — ``(0, 2)`` on one and ``(4, 1)`` (using one of its ``1g``)
on the other.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vfcore.cluster import NodeState
from vfcore.placement.claims import PodRequest
from vfcore.placement.dra.inventory import ACCEPT, Amount, BlockType, DraInventory
from vfcore.placement.fit import free_units, static_reasons
from vfcore.placement.packing.cpsat import load_cp_model, run_solver
from vfcore.placement.packing.patterns import Countable, maximal_counts
from vfcore.placement.packing.report import PackingResult, SolverConfig, SolverReport
from vfcore.quantity import PODS

__all__ = [
    "DeviceAssignment",
    "DeviceRegions",
    "DraPlan",
    "NodeDevices",
    "check_devices",
    "pack_dra",
]

#: Steps one block's region, or one node type's patterns, may take before giving up.
REGION_LIMIT = 200_000
PATTERN_LIMIT = 200_000

Vector = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DeviceAssignment:
    """The devices the plan gives one pod: ``driver/pool/device`` names."""

    pod: str
    node: str
    devices: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "node": self.node, "devices": list(self.devices)}


@dataclass(frozen=True, slots=True)
class DraPlan:
    """The DRA part of a plan: devices per pod, and what the plan could not judge."""

    assignments: tuple[DeviceAssignment, ...] = ()
    notes: tuple[str, ...] = ()

    def devices_of(self, pod: str) -> tuple[str, ...]:
        for a in self.assignments:
            if a.pod == pod:
                return a.devices
        return ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "devices": {a.pod: list(a.devices) for a in self.assignments},
            "notes": list(self.notes),
        }


# -- what one block can give ---------------------------------------------------------------------


class DeviceRegions:
    """Per block type: the maximal vectors of devices it gives each request, with witnesses
    (``None`` for a block too large to enumerate within :data:`REGION_LIMIT` steps)."""

    def __init__(self, inventory: DraInventory, requests: Sequence[int]) -> None:
        self.inventory = inventory
        self.requests = tuple(requests)
        self._found: dict[int, tuple[tuple[Vector, tuple[tuple[int, int], ...]], ...] | None] = {}

    def of(self, tid: int) -> tuple[tuple[Vector, tuple[tuple[int, int], ...]], ...] | None:
        if tid not in self._found:
            self._found[tid] = self._compute(self.inventory.types[tid])
        return self._found[tid]

    def _compute(
        self, t: BlockType
    ) -> tuple[tuple[Vector, tuple[tuple[int, int], ...]], ...] | None:
        """Every maximal vector (count per request) and one device set that achieves it."""
        k = len(self.requests)
        free = t.free(0)
        candidates = [
            (d, tuple(j for j, r in enumerate(self.requests) if t.answers[r][d] == ACCEPT))
            for d in range(t.size)
            if free >> d & 1
        ]
        candidates = [(d, accepted) for d, accepted in candidates if accepted]
        found: dict[Vector, tuple[tuple[int, int], ...]] = {}
        used: list[Amount] = [0] * len(t.available)
        counts = [0] * k
        picked: list[tuple[int, int]] = []
        steps = 0

        def fits(d: int) -> bool:
            return all(used[c] + a <= t.available[c] for c, a in t.consumes[d])

        def take(d: int, sign: int) -> None:
            for c, a in t.consumes[d]:
                used[c] += sign * a

        def visit(i: int) -> bool:
            nonlocal steps
            steps += 1
            if steps > REGION_LIMIT:
                return False
            if i == len(candidates):
                vector = tuple(counts)
                found.setdefault(vector, tuple(picked))
                return True
            d, accepted = candidates[i]
            if fits(d):
                take(d, 1)
                for j in accepted:
                    counts[j] += 1
                    picked.append((d, self.requests[j]))
                    if not visit(i + 1):
                        return False
                    picked.pop()
                    counts[j] -= 1
                take(d, -1)
            return visit(i + 1)

        if not visit(0):
            return None
        maximal = [
            v
            for v in found
            if not any(w != v and all(a >= b for a, b in zip(w, v, strict=True)) for w in found)
        ]
        return tuple((v, found[v]) for v in sorted(maximal, reverse=True))


class NodeDevices:
    """One node's blocks and whether (and how) they serve a demand (devices per request)."""

    def __init__(self, regions: DeviceRegions, blocks: Sequence[int]) -> None:
        self.regions = regions
        self.blocks = tuple(blocks)
        self._memo: dict[tuple[int, Vector], bool] = {}
        self.unknown = any(regions.of(t) is None for t in self.blocks)

    def serves(self, demand: Vector) -> bool:
        if not any(demand):
            return True
        if self.unknown:
            return False
        return self._reach(0, demand)

    def _reach(self, i: int, demand: Vector) -> bool:
        if not any(demand):
            return True
        if i == len(self.blocks):
            return False
        key = (i, demand)
        found = self._memo.get(key)
        if found is None:
            found = False
            region = self.regions.of(self.blocks[i]) or ()
            for vector, _ in region:
                rest = tuple(max(0, a - b) for a, b in zip(demand, vector, strict=True))
                if rest != demand and self._reach(i + 1, rest):
                    found = True
                    break
            if not found:
                found = self._reach(i + 1, demand)
            self._memo[key] = found
        return found

    def realise(self, demand: Vector) -> list[list[tuple[int, int]]] | None:
        """Per block, the (device index, request) pairs that serve ``demand``."""
        out: list[list[tuple[int, int]]] = [[] for _ in self.blocks]
        left = demand
        for i, tid in enumerate(self.blocks):
            if not any(left):
                break
            choice = None
            for vector, witness in self.regions.of(tid) or ():
                rest = tuple(max(0, a - b) for a, b in zip(left, vector, strict=True))
                if rest != left and self._reach(i + 1, rest):
                    choice = (vector, witness)
                    break
            if choice is None:
                continue  # this block is not needed
            vector, witness = choice
            need = list(left)
            for d, r in witness:
                j = self.regions.requests.index(r)
                if need[j] > 0:
                    need[j] -= 1
                    out[i].append((d, r))
            left = tuple(need)
        return None if any(left) else out


# -- shapes, nodes, and the packing ------------------------------------------------------------------


@dataclass(slots=True)
class _Shape:
    index: int
    pods: list[PodRequest]
    requests: dict[str, int]
    claim: tuple[int, int] | None  # (position among the flow's requests, count)
    eligible: set[int] = field(default_factory=set)

    @property
    def count(self) -> int:
        return len(self.pods)

    @property
    def size(self) -> tuple[int, ...]:
        count = self.claim[1] if self.claim else 0
        return (count, self.requests.get("cpu", 0), self.requests.get("memory", 0))


@dataclass(slots=True)
class _Node:
    index: int
    state: NodeState
    free: dict[str, int]
    free_pods: int
    devices: NodeDevices


def _demand(shapes: Sequence[_Shape], counts: Sequence[int], k: int) -> Vector:
    out = [0] * k
    for shape, n in zip(shapes, counts, strict=True):
        if shape.claim is not None and n:
            out[shape.claim[0]] += n * shape.claim[1]
    return tuple(out)


def pack_dra(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeState],
    inventory: DraInventory,
    *,
    blocks_of: Callable[[str], tuple[int, ...]],
    config: SolverConfig | None = None,
) -> tuple[PackingResult, DraPlan]:
    """Place every pod (DRA claims included) on ``nodes``, exactly, or prove it cannot be done.

    ``blocks_of(node)`` gives a node's block type ids (the inventory's, or none).
    """
    cfg = config or SolverConfig()
    requests = sorted({inventory.request_index(p.dra) for p in pods if p.dra is not None})
    position = {r: j for j, r in enumerate(requests)}
    regions = DeviceRegions(inventory, requests)
    groups: dict[tuple[object, ...], list[PodRequest]] = {}
    for pod in pods:
        groups.setdefault(pod.shape, []).append(pod)
    shapes = []
    for i, members in enumerate(sorted(groups.values(), key=lambda g: g[0].pod)):
        members.sort(key=lambda p: (p.node, p.replica, p.pod))
        first = members[0]
        claim = (
            None
            if first.dra is None
            else (position[inventory.request_index(first.dra)], first.dra.count)
        )
        shapes.append(_Shape(i, members, dict(first.requests), claim))
    node_list = []
    for i, n in enumerate(sorted(nodes, key=lambda n: n.name)):
        node_list.append(
            _Node(
                i,
                n,
                {r: free_units(n, r) for r, _ in n.allocatable},
                free_units(n, PODS),
                NodeDevices(regions, blocks_of(n.name)),
            )
        )
    for shape in shapes:
        probe = shape.pods[0]
        shape.eligible = {n.index for n in node_list if not static_reasons(probe, n.state)}
    k = len(requests)
    if not pods:
        report = SolverReport("OPTIMAL", "bounds", objective=0.0)
        return PackingResult(True, (), (), report), DraPlan()

    placed = _ffd(shapes, node_list, k)
    if all(len(placed.get(s.index, ())) == s.count for s in shapes):
        report = SolverReport("FEASIBLE", "ffd", deterministic=True)
        return _result(True, shapes, node_list, placed, report, k, inventory, requests)
    status, solved, report = _patterns(shapes, node_list, k, cfg, require_all=True)
    if status in ("OPTIMAL", "FEASIBLE"):
        return _result(True, shapes, node_list, solved, report, k, inventory, requests)
    if status == "INFEASIBLE":
        status2, partial, report2 = _patterns(shapes, node_list, k, cfg, require_all=False)
        best = partial if status2 in ("OPTIMAL", "FEASIBLE") else placed
        if sum(map(len, best.values())) < sum(map(len, placed.values())):
            best = placed
        final = SolverReport(
            "INFEASIBLE",
            "cp-sat",
            wall_s=report.wall_s + report2.wall_s,
            deterministic=cfg.is_deterministic,
            variables=report.variables,
            notes=(
                *report.notes,
                "partial placement: as many pods as possible, to explain the rest",
            ),
        )
        result, plan = _result(False, shapes, node_list, best, final, k, inventory, requests)
        return (
            PackingResult(
                False,
                result.assignments,
                result.unplaced,
                final,
                proofs=("cp-sat proved the claims cannot all be allocated",),
            ),
            plan,
        )
    return _result(None, shapes, node_list, placed, report, k, inventory, requests)


def _ffd(shapes: Sequence[_Shape], nodes: Sequence[_Node], k: int) -> dict[int, list[int]]:
    """Largest claims first, each pod to the first node (by name) that still holds it."""
    placed: dict[int, list[int]] = defaultdict(list)
    load: list[dict[str, int]] = [defaultdict(int) for _ in nodes]
    pods_on = [0] * len(nodes)
    demand: list[list[int]] = [[0] * k for _ in nodes]
    for shape in sorted(shapes, key=lambda s: (tuple(-v for v in s.size), s.index)):
        cursor = 0
        eligible = sorted(shape.eligible)
        for _ in shape.pods:
            while cursor < len(eligible):
                node = nodes[eligible[cursor]]
                i = node.index
                ok = pods_on[i] < node.free_pods and all(
                    load[i][r] + u <= node.free.get(r, 0) for r, u in shape.requests.items()
                )
                if ok and shape.claim is not None:
                    trial = list(demand[i])
                    trial[shape.claim[0]] += shape.claim[1]
                    ok = node.devices.serves(tuple(trial))
                if ok:
                    break
                cursor += 1  # capacity only shrinks: this node never holds this shape again
            if cursor == len(eligible):
                break
            i = nodes[eligible[cursor]].index
            placed[shape.index].append(i)
            pods_on[i] += 1
            for r, u in shape.requests.items():
                load[i][r] += u
            if shape.claim is not None:
                demand[i][shape.claim[0]] += shape.claim[1]
    return placed


def _patterns(
    shapes: Sequence[_Shape],
    nodes: Sequence[_Node],
    k: int,
    cfg: SolverConfig,
    *,
    require_all: bool,
) -> tuple[str, dict[int, list[int]], SolverReport]:
    """The aggregated model: how many nodes of each type use each maximal pattern."""
    types: dict[tuple[object, ...], list[int]] = {}
    for node in nodes:
        eligible = tuple(s.index for s in shapes if node.index in s.eligible)
        if not eligible:
            continue
        key = (
            tuple(sorted(node.free.items())),
            node.free_pods,
            eligible,
            tuple(sorted(node.devices.blocks)),
        )
        types.setdefault(key, []).append(node.index)
    members_of = list(types.values())
    patterns: list[list[tuple[int, ...]]] = []
    budget = PATTERN_LIMIT
    for members in members_of:
        found = _maximal_patterns(shapes, nodes[members[0]], k, budget)
        if found is None:
            note = "the DRA model is too large to enumerate its packing patterns: unknown"
            return "UNKNOWN", {}, SolverReport("UNKNOWN", "cp-sat", notes=(note,))
        budget -= len(found)
        patterns.append(found)
    cp_model = load_cp_model()
    model = cp_model.CpModel()
    z: dict[tuple[int, int], Any] = {}
    for t, (members, pats) in enumerate(zip(members_of, patterns, strict=True)):
        for j, pattern in enumerate(pats):
            if any(pattern):
                z[t, j] = model.new_int_var(0, len(members), f"nodes[{t},{j}]")
        model.add(sum(z[t, j] for j in range(len(pats)) if (t, j) in z) <= len(members))
    placed_of = []
    for shape in shapes:
        slots = sum(
            patterns[t][j][shape.index] * var
            for (t, j), var in z.items()
            if patterns[t][j][shape.index]
        )
        if require_all:
            model.add(slots >= shape.count)
        else:
            got = model.new_int_var(0, shape.count, f"placed[{shape.index}]")
            placed_of.append(got)
            model.add(got <= slots)
    if not require_all:
        model.maximize(sum(placed_of))
    solver, code, status, report = run_solver(
        model, cfg, cfg.max_deterministic_time, has_objective=not require_all
    )
    placed: dict[int, list[int]] = defaultdict(list)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        left = {s.index: s.count for s in shapes}
        for t, members in enumerate(members_of):
            queue = sorted(members, key=lambda i: nodes[i].state.name)
            for j, pattern in enumerate(patterns[t]):
                if (t, j) not in z:
                    continue
                for _ in range(solver.value(z[t, j])):
                    i = queue.pop(0)
                    for s, c in enumerate(pattern):
                        take = min(c, left[s])
                        placed[s].extend([i] * take)
                        left[s] -= take
    note = (
        f"DRA model: {len(members_of)} node type(s), "
        f"{sum(len(p) for p in patterns)} packing pattern(s) with devices"
    )
    return status, placed, replace(report, variables=len(z), notes=(note,))


def _maximal_patterns(
    shapes: Sequence[_Shape], node: _Node, k: int, limit: int
) -> list[tuple[int, ...]] | None:
    """Every maximal count per shape that fits one node, devices included; None past ``limit``."""

    def served(shape: Countable, counts: list[int]) -> bool:
        claim = shapes[shape.index].claim
        return claim is None or node.devices.serves(_demand(shapes, counts, k))

    eligible = [s for s in shapes if node.index in s.eligible]
    return maximal_counts(eligible, len(shapes), node.free, node.free_pods, limit, allows=served)


def _result(
    feasible: bool | None,
    shapes: Sequence[_Shape],
    nodes: Sequence[_Node],
    placed: Mapping[int, Sequence[int]],
    report: SolverReport,
    k: int,
    inventory: DraInventory,
    requests: Sequence[int],
) -> tuple[PackingResult, DraPlan]:
    assignments: list[tuple[str, str]] = []
    unplaced: list[str] = []
    by_node: dict[int, list[tuple[PodRequest, _Shape]]] = defaultdict(list)
    for shape in shapes:
        targets = sorted(placed.get(shape.index, ()), key=lambda i: nodes[i].state.name)
        for j, pod in enumerate(shape.pods):
            if j < len(targets):
                assignments.append((pod.pod, nodes[targets[j]].state.name))
                by_node[targets[j]].append((pod, shape))
            else:
                unplaced.append(pod.pod)
    devices: list[DeviceAssignment] = []
    notes: list[str] = []
    for i, members in sorted(by_node.items()):
        node = nodes[i]
        claims = [(p, s) for p, s in members if s.claim is not None]
        if not claims:
            continue
        demand = [0] * k
        for _, s in claims:
            assert s.claim is not None
            demand[s.claim[0]] += s.claim[1]
        realised = node.devices.realise(tuple(demand))
        if realised is None:  # pragma: no cover - the oracle said it serves
            notes.append(f"{node.state.name}: the devices could not be realised")
            continue
        names = inventory.blocks.get(node.state.name) or ()
        free: dict[int, list[str]] = defaultdict(list)
        for b, chosen in enumerate(realised):
            block = names[b] if b < len(names) else None
            for d, r in chosen:
                device = block.devices[d] if block is not None else f"block{b}/device{d}"
                where = f"{block.driver}/{block.pool}/" if block is not None else ""
                free[r].append(f"{where}{device}")
        for pod, s in sorted(claims, key=lambda c: c[0].pod):
            assert s.claim is not None and pod.dra is not None
            r = requests[s.claim[0]]
            taken = tuple(free[r][: s.claim[1]])
            del free[r][: s.claim[1]]
            devices.append(DeviceAssignment(pod.pod, node.state.name, taken))
    if feasible is True and unplaced:  # pragma: no cover - defensive
        feasible = None
    return (
        PackingResult(feasible, tuple(sorted(assignments)), tuple(sorted(unplaced)), report),
        DraPlan(tuple(sorted(devices, key=lambda a: a.pod)), tuple(notes)),
    )


def check_devices(
    pods: Sequence[PodRequest],
    assignments: Mapping[str, str],
    plan: DraPlan,
    inventory: DraInventory,
) -> tuple[str, ...]:
    """Every way ``plan``'s devices break the rules (empty: valid). Uses no solver.

    Each DRA pod placed on a node has exactly ``count`` devices of that node's
    pools, each accepted by its request (class and own selectors, evaluated
    again here), free (not allocated, not tainted) and given to one pod only;
    the counters every device consumes fit what each counter set has left.
    """
    problems: list[str] = []
    by_pod = {p.pod: p for p in pods}
    owner: dict[str, str] = {}
    index: dict[str, dict[str, tuple[int, int]]] = {}
    for node, blocks in inventory.blocks.items():
        where: dict[str, tuple[int, int]] = {}
        for b, block in enumerate(blocks):
            for d, name in enumerate(block.devices):
                where[f"{block.driver}/{block.pool}/{name}"] = (b, d)
        index[node] = where
    taken: dict[tuple[str, int], int] = defaultdict(int)
    for a in plan.assignments:
        pod = by_pod.get(a.pod)
        if pod is None or pod.dra is None:
            problems.append(f"{a.pod}: not a DRA pod of the flow")
            continue
        if assignments.get(a.pod) != a.node:
            problems.append(f"{a.pod}: devices on {a.node}, pod placed on {assignments.get(a.pod)}")
        if len(a.devices) != pod.dra.count:
            problems.append(f"{a.pod}: {len(a.devices)} device(s), its claim asks {pod.dra.count}")
        r = inventory.request_index(pod.dra)
        for device in a.devices:
            if device in owner:
                problems.append(f"{device} serves {owner[device]} and {a.pod}")
                continue
            owner[device] = a.pod
            found = index.get(a.node, {}).get(device)
            if found is None:
                problems.append(f"{a.pod}: {device} is not a device of {a.node}")
                continue
            b, d = found
            t = inventory.types[inventory.blocks[a.node][b].type_id]
            if t.base >> d & 1:
                problems.append(f"{a.pod}: {device} is not free")
            if t.answers[r][d] != ACCEPT:
                problems.append(f"{a.pod}: {device} is not accepted by {pod.dra.describe()}")
            taken[a.node, b] |= 1 << d
    for (node, b), bits in sorted(taken.items()):
        t = inventory.types[inventory.blocks[node][b].type_id]
        totals: list[Amount] = [0] * len(t.available)
        for d in range(t.size):
            if bits >> d & 1:
                for c, amount in t.consumes[d]:
                    totals[c] += amount
        for c, total in enumerate(totals):
            if total > t.available[c]:
                problems.append(
                    f"{node} block {b}: counter {c} over what is left ({total} > {t.available[c]})"
                )
    for pod_name, node in sorted(assignments.items()):
        pod = by_pod.get(pod_name)
        if pod is not None and pod.dra is not None and not plan.devices_of(pod_name):
            problems.append(f"{pod_name} on {node}: no devices")
    return tuple(problems)
