"""The cluster's DRA devices compiled for planning and for the allocator model.

:class:`DraInventory` turns :class:`~vfcore.cluster.dra.DraFacts` and the
requests of a flow's pods (:class:`~vfcore.placement.claims.DraRequest`) into
what both :mod:`.allocator` (kube-scheduler's first-solution search) and
:mod:`.planning` (the exact plan) work on:

- **requests**: each distinct request with its class's selectors and its own,
  compiled (:mod:`.cel`); a missing class or a selector outside the subset
  makes the request unjudgeable, with the reason;
- **blocks**: per node, its devices in groups the allocator's order cannot
  split. kube-scheduler gathers a node's pools from a Go map and their slices
  from an informer's store — both in no fixed order, changing from one
  scheduling cycle to the next — and walks each slice's devices in published
  order. A *block* is one device slice (or slices tied by a shared counter
  set, taken by name); its devices keep their order. Which block comes first
  is a tie, explored like any other (:func:`.allocator.allocation_outcomes`);
- per block: which device each request accepts (1), rejects (0) or errors on
  (2: a CEL runtime error, which fails kube-scheduler's attempt), what each
  device consumes of the block's counters and what the counters have left
  after the cluster's allocated claims, and ``base``: the devices that are
  not free (allocated, tainted ``NoSchedule``/``NoExecute``, in an incomplete
  pool, or of unknown use while the bracket is ``full``).

Identical blocks (same answers, consumption, counters and base) share one
*block type*, whatever their devices' names, so identical nodes share states.

Unknown stays unknown: a node whose devices' use is unknown is bracketed
(``unknown_as``: ``full`` — those devices taken — or ``empty`` — free), and one
whose devices are unknown (a pool with a slice that cannot be read, an
incomplete pool, or no slice listing at all) is *unbounded*: any DRA pod might
fit there. :attr:`DraInventory.unknown_nodes` and :attr:`unbounded_nodes` name
them with their reason.

Worked example: a node publishing one slice of 8 GPUs (NVIDIA's driver
without DynamicMIG) has one block of 8 devices; with DynamicMIG each GPU is a
slice of its own — the full GPU and every MIG placement, consuming the GPU's
counter set (memory, compute and one counter per memory slice) — so 8 blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

from vfcore.cluster import ClusterSnapshot
from vfcore.cluster.dra import DraDevice, DraFacts, DraSlice
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import DraRequest
from vfcore.placement.dra.cel import CelError, DeviceView, Selector, Semver, compile_selector

__all__ = [
    "ACCEPT",
    "ERROR",
    "REJECT",
    "Amount",
    "Block",
    "BlockType",
    "DraInventory",
    "RequestInfo",
    "SelectorAnswers",
    "device_view",
]

#: What a request's selectors say of a device.
REJECT, ACCEPT, ERROR = 0, 1, 2
_NO_EXECUTE = ("NoSchedule", "NoExecute")
#: a request whose answers have missed the cache this often is evaluated without it (what
#: its selectors read is unique per device, like the uuid of a pin)
_CACHE_MISSES = 4096

Amount = int | Fraction


def _amount(value: Fraction) -> Amount:
    return value.numerator if value.denominator == 1 else value


def device_view(driver: str, device: DraDevice) -> DeviceView:
    """What a CEL selector sees of ``device``: names without a domain are the driver's."""
    attributes: dict[str, dict[str, object]] = {}
    for name, value in device.attributes:
        domain, _, short = name.rpartition("/")
        item: object = value.value
        if value.kind == "version":
            item = Semver.parse(str(value.value)) or CelError(f"{name}: not a semantic version")
        attributes.setdefault(domain or driver, {})[short] = item
    capacity: dict[str, dict[str, Fraction]] = {}
    for name, amount in device.capacity:
        domain, _, short = name.rpartition("/")
        capacity.setdefault(domain or driver, {})[short] = amount
    return DeviceView(driver, attributes, capacity)


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """A distinct request, its compiled selectors (class first), and why it cannot be judged."""

    index: int
    request: DraRequest
    selectors: tuple[Selector, ...] = ()
    problem: str | None = None  # the class is missing, unreadable, or outside the CEL subset
    missing_class: bool = False


@dataclass(frozen=True, slots=True)
class BlockType:
    """What the allocator needs of one block: per request, each device's answer; each
    device's counter consumption (counter index, amount); the counters left; the devices
    that are not free (``base``, a bitmask)."""

    answers: tuple[tuple[int, ...], ...]  # [request index][device]
    consumes: tuple[tuple[tuple[int, Amount], ...], ...]
    available: tuple[Amount, ...]
    base: int
    size: int

    def free(self, taken: int) -> int:
        """Bitmask of the devices free in state ``taken``."""
        return ((1 << self.size) - 1) & ~(self.base | taken)


@dataclass(frozen=True, slots=True)
class Block:
    """One block of a node: its type, its pool, and its devices' names in order."""

    type_id: int
    driver: str
    pool: str
    devices: tuple[str, ...]
    slices: tuple[str, ...]


@dataclass(slots=True)
class _Pool:
    driver: str
    name: str
    slices: list[DraSlice] = field(default_factory=list)
    complete: bool = True
    unreadable: bool = False


@dataclass(slots=True)
class SelectorAnswers:
    """What selectors answered, by (expression, driver, what the selector reads of the
    device); inventories of one cluster may share it (``answers=``)."""

    answers: dict[tuple[str, str, object], int] = field(default_factory=dict)
    misses: dict[str, int] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)


class DraInventory:
    """The DRA facts of a cluster compiled for a set of requests, one bracket of the unknowns.

    ``unknown_as`` decides devices of unknown use: ``full`` (taken: what "fits" and
    the scheduler model's pessimistic run assume) or ``empty`` (free). ``answers``:
    selector answers shared with other inventories of the same cluster.
    """

    def __init__(
        self,
        cluster: ClusterSnapshot,
        requests: Iterable[DraRequest],
        *,
        unknown_as: Literal["full", "empty"] = "full",
        answers: SelectorAnswers | None = None,
    ) -> None:
        self.unknown_as = unknown_as
        self._node_pools: dict[str, list[_Pool]] = {}
        self.facts: DraFacts = (
            cluster.dra
            if cluster.dra is not None
            else DraFacts(
                slices_unknown="no ResourceSlices were read (dump them with `kubectl get "
                "resourceslices -o json` beside nodes.json)",
                classes=None,
                classes_unknown="no DeviceClasses were read",
                claims_unknown="no ResourceClaims were read",
            )
        )
        self.request_ids: dict[DraRequest, int] = {}
        self.requests: list[RequestInfo] = []
        for request in requests:
            if request not in self.request_ids:
                self.request_ids[request] = len(self.requests)
                self.requests.append(self._compile(len(self.requests), request))
        self.types: list[BlockType] = []
        self._type_ids: dict[tuple[object, ...], int] = {}
        self.blocks: dict[str, tuple[Block, ...]] = {}
        self.unknown_nodes: dict[str, str] = {}
        self.unbounded_nodes: dict[str, str] = {}
        self.notes: list[str] = []
        self._answers = answers if answers is not None else SelectorAnswers()
        self._reads = self._selector_reads()
        self._by_signature: dict[tuple[object, ...], tuple[int, ...]] = {}
        self._read_names: dict[str, tuple[frozenset[str], frozenset[str], bool]] = {}
        self._build(cluster)

    # requests ---------------------------------------------------------------------------------
    def _compile(self, index: int, request: DraRequest) -> RequestInfo:
        facts = self.facts
        expressions: list[str] = []
        if facts.classes is None:
            return RequestInfo(
                index, request, problem=f"the DeviceClasses are unknown ({facts.classes_unknown})"
            )
        info = facts.device_class(request.device_class)
        if info is None:
            if request.device_class in facts.bad_classes:
                return RequestInfo(
                    index,
                    request,
                    problem=f"DeviceClass {request.device_class} cannot be read",
                )
            return RequestInfo(
                index,
                request,
                problem=f"DeviceClass {request.device_class} does not exist",
                missing_class=True,
            )
        expressions = [*info.selectors, *request.selectors]
        try:
            selectors = tuple(compile_selector(e) for e in expressions)
        except InvalidInputError as exc:
            return RequestInfo(index, request, problem=f"{exc.rule}: {exc.message}")
        return RequestInfo(index, request, selectors)

    def request_index(self, request: DraRequest) -> int:
        return self.request_ids[request]

    def answer(
        self, request: int, driver: str, device: DraDevice, view: DeviceView | None = None
    ) -> int:
        """ACCEPT, REJECT or ERROR: every selector of the request on the device (``view``:
        the device as :func:`device_view` gives it, when the caller has it already)."""
        info = self.requests[request]
        if info.problem is not None:
            return REJECT
        view = view or device_view(driver, device)
        for selector in info.selectors:  # in order: the first that errs or says no decides
            got = self._selector_answer(selector, driver, view)
            if got != ACCEPT:
                return got
        return ACCEPT

    def _selector_answer(self, selector: Selector, driver: str, view: DeviceView) -> int:
        """One selector on one device, shared by every request (and inventory) that has it:
        devices equal on what it reads get the same answer."""
        key = selector.key_of(view)
        cache = self._answers
        misses = cache.misses.get(selector.expression, 0)
        # past _CACHE_MISSES, kept only while it hits as often as it misses (a MIG pin's
        # parentUUID repeats on every device of its GPU; a whole GPU's uuid never repeats)
        cached = key is not None and (
            misses <= _CACHE_MISSES or cache.hits.get(selector.expression, 0) >= misses
        )
        if cached:
            found = cache.answers.get((selector.expression, driver, key))
            if found is not None:
                cache.hits[selector.expression] = cache.hits.get(selector.expression, 0) + 1
                return found
        got = selector.evaluate(view)
        verdict = ERROR if isinstance(got, CelError) else ACCEPT if got is True else REJECT
        if cached:
            cache.answers[selector.expression, driver, key] = verdict
            cache.misses[selector.expression] = misses + 1
        return verdict

    def _device_answers(self, driver: str, device: DraDevice) -> tuple[int, ...]:
        """Every request's answer on ``device``; devices alike in all the selectors read share
        them (a cluster's devices are mostly alike but for names and uuids)."""
        sig = self._signature(driver, device)
        if sig is not None:
            found = self._by_signature.get(sig)
            if found is not None:
                return found
        view = device_view(driver, device)
        got = tuple(self.answer(r.index, driver, device, view) for r in self.requests)
        if sig is not None:
            self._by_signature[sig] = got
        return got

    def _signature(self, driver: str, device: DraDevice) -> tuple[object, ...] | None:
        """What any request's selectors read of ``device``, in published order (None: some
        selector reads the device as a whole)."""
        if self._reads is None:
            return None
        names = self._read_names.get(driver)
        if names is None:
            names = self._read_names[driver] = self._names_read(driver)
        attributes, capacity, whole = names
        if whole:  # a selector asks whether a domain is there: every name counts
            return (driver, device.attributes, device.capacity)
        return (
            driver,
            tuple(a for a in device.attributes if a[0] in attributes),
            tuple(c for c in device.capacity if c[0] in capacity),
        )

    def _names_read(self, driver: str) -> tuple[frozenset[str], frozenset[str], bool]:
        """The published names of the attributes and capacities the selectors read (a name
        without a domain is the driver's), and whether they test a domain's presence."""
        assert self._reads is not None
        attributes, capacity, domains = self._reads

        def published(read: frozenset[tuple[str, str]]) -> frozenset[str]:
            out = {f"{domain}/{name}" for domain, name in read}
            out |= {name for domain, name in read if domain == driver}
            return frozenset(out)

        return published(attributes), published(capacity), bool(domains)

    def _selector_reads(
        self,
    ) -> (
        tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]], frozenset[tuple[str, str]]]
        | None
    ):
        """The attributes, capacities and domains any selector reads; None when one cannot tell."""
        attributes: set[tuple[str, str]] = set()
        capacity: set[tuple[str, str]] = set()
        domains: set[tuple[str, str]] = set()
        for info in self.requests:
            for selector in info.selectors:
                if selector.references is None:
                    return None
                for kind, domain, name in selector.references:
                    if kind == "attributes":
                        attributes.add((domain, name))
                    elif kind == "capacity":
                        capacity.add((domain, name))
                    elif kind == "domain":
                        domains.add((domain, name))
        return frozenset(attributes), frozenset(capacity), frozenset(domains)

    # blocks -----------------------------------------------------------------------------------
    def _build(self, cluster: ClusterSnapshot) -> None:
        facts = self.facts
        names = [n.name for n in cluster.nodes]
        if facts.slices_unknown is not None:
            for name in names:
                self.unbounded_nodes[name] = f"its devices are unknown: {facts.slices_unknown}"
            return
        pools = self._pools()
        by_node: dict[str, list[_Pool]] = {}
        shared_devices: list[tuple[DraSlice, DraDevice]] = []
        for pool in pools.values():
            for s in pool.slices:
                if s.scope == "node" and s.node is not None:
                    if pool not in by_node.setdefault(s.node, []):
                        by_node[s.node].append(pool)
                elif s.scope != "node":
                    shared_devices.extend((s, d) for d in s.devices)
        self._note_shared(shared_devices)
        taken = self._taken()
        uncertain = set(facts.uncertain_pools)
        for name in names:
            blocks: list[Block] = []
            for pool in sorted(by_node.get(name, []), key=lambda p: (p.driver, p.name)):
                pool_id = (pool.driver, pool.name)
                if pool.unreadable:
                    self.unbounded_nodes.setdefault(
                        name, f"pool {pool.driver}/{pool.name} has a slice that cannot be read"
                    )
                    continue
                if not pool.complete:
                    self.unbounded_nodes.setdefault(
                        name,
                        f"pool {pool.driver}/{pool.name} is incomplete (not every one of its "
                        "resourceSliceCount slices is listed): kube-scheduler allocates nothing "
                        "from it until it is",
                    )
                    continue
                doubtful = facts.claims_unknown is not None or pool_id in uncertain
                if doubtful:
                    self.unknown_nodes.setdefault(
                        name,
                        f"which devices of pool {pool.driver}/{pool.name} are allocated is "
                        f"unknown ({facts.claims_unknown or 'a claim that may hold them cannot be read'})",
                    )
                blocks.extend(self._blocks_of(name, pool, taken, doubtful))
            self.blocks[name] = tuple(blocks)
            self._node_pools[name] = [
                p
                for p in sorted(by_node.get(name, []), key=lambda p: (p.driver, p.name))
                if p.complete and not p.unreadable
            ]

    def fresh_blocks(self, node: str) -> tuple[Block, ...]:
        """``node``'s blocks as they would be with none of its devices allocated (a new node
        shaped like it, or "could it ever hold this?")."""
        out: list[Block] = []
        for pool in self._node_pools.get(node, []):
            out.extend(self._blocks_of(node, pool, {}, False))
        return tuple(out)

    def _pools(self) -> dict[tuple[str, str], _Pool]:
        """Every pool at its newest generation, with whether all its slices are listed."""
        newest: dict[tuple[str, str], int] = {}
        for s in self.facts.slices:
            newest[s.pool_id] = max(newest.get(s.pool_id, -1), s.generation)
        pools: dict[tuple[str, str], _Pool] = {}
        for s in self.facts.slices:
            if s.generation != newest[s.pool_id]:
                continue
            pool = pools.setdefault(s.pool_id, _Pool(s.driver, s.pool))
            pool.slices.append(s)
        for pool_id, pool in pools.items():
            counts = {s.slice_count for s in pool.slices}
            pool.complete = len(counts) == 1 and len(pool.slices) == counts.pop()
            pool.unreadable = pool_id in self.facts.bad_pools
            pool.slices.sort(key=lambda s: s.name)
        for pool_id in self.facts.bad_pools:
            if pool_id not in pools:
                pools[pool_id] = _Pool(pool_id[0], pool_id[1], unreadable=True)
        return pools

    def _taken(self) -> dict[tuple[str, str, str], bool]:
        """Devices allocated claims hold → whether that use is certain (False: shared use)."""
        out: dict[tuple[str, str, str], bool] = {}
        for a in self.facts.allocated:
            key = (a.driver, a.pool, a.device)
            out[key] = out.get(key, False) or not a.shared
        return out

    def _note_shared(self, devices: Sequence[tuple[DraSlice, DraDevice]]) -> None:
        matching = sorted(
            {
                s.pool_id
                for s, d in devices
                if any(self.answer(r.index, s.driver, d) != REJECT for r in self.requests)
            }
        )
        if matching:
            shown = ", ".join(f"{d}/{p}" for d, p in matching[:3])
            self.notes.append(
                f"pool(s) {shown} publish devices for several nodes (allNodes, a node selector or "
                "per-device node selection) that the flow's claims could take: vfcore does not "
                "model them, so they count for no node"
            )

    def _blocks_of(
        self,
        node: str,
        pool: _Pool,
        taken: Mapping[tuple[str, str, str], bool],
        doubtful: bool,
    ) -> list[Block]:
        counter_sets: dict[str, dict[str, Fraction]] = {}
        for s in pool.slices:
            for cs in s.counter_sets:
                counter_sets[cs.name] = dict(cs.counters)
        # what allocated devices of the whole pool consume, before this node's pods
        used: dict[tuple[str, str], Fraction] = {}
        for s in pool.slices:
            for d in s.devices:
                if (pool.driver, pool.name, d.name) in taken:
                    for use in d.consumes:
                        for counter, amount in use.counters:
                            key = (use.counter_set, counter)
                            used[key] = used.get(key, Fraction(0)) + amount
        device_slices = [s for s in pool.slices if s.devices and s.node == node]
        groups = _tie_slices(device_slices)
        out: list[Block] = []
        for group in groups:
            devices = [(s, d) for s in group for d in s.devices]
            sets = sorted({u.counter_set for _, d in devices for u in d.consumes})
            counters = [(cs, name) for cs in sets for name in sorted(counter_sets.get(cs, {}))]
            index = {c: i for i, c in enumerate(counters)}
            available = tuple(
                _amount(counter_sets[cs][name] - used.get((cs, name), Fraction(0)))
                for cs, name in counters
            )
            consumes = []
            base = 0
            for i, (_, d) in enumerate(devices):
                row = []
                for use in d.consumes:
                    for name, amount in use.counters:
                        if (use.counter_set, name) in index:
                            row.append((index[use.counter_set, name], _amount(amount)))
                        else:  # a counter the pool does not define: the API would refuse it
                            base |= 1 << i
                consumes.append(tuple(row))
                certain = taken.get((pool.driver, pool.name, d.name))
                unmodelled = d.multi_allocatable or d.binding_conditions
                if (
                    certain is True
                    or any(t.effect in _NO_EXECUTE for t in d.taints)
                    or any(u.counter_set not in counter_sets for u in d.consumes)
                ) or ((certain is False or unmodelled or doubtful) and self.unknown_as == "full"):
                    base |= 1 << i
                if certain is False or unmodelled:
                    self.unknown_nodes.setdefault(
                        node,
                        f"device {pool.driver}/{pool.name}/{d.name} is shared (consumable "
                        "capacity) or has binding conditions, which vfcore does not model",
                    )
            per_device = [self._device_answers(pool.driver, d) for _, d in devices]
            answers = tuple(tuple(a[r] for a in per_device) for r in range(len(self.requests)))
            type_key = (answers, tuple(consumes), available, base, len(devices))
            tid = self._type_ids.get(type_key)
            if tid is None:
                tid = self._type_ids[type_key] = len(self.types)
                self.types.append(
                    BlockType(answers, tuple(consumes), available, base, len(devices))
                )
            out.append(
                Block(
                    tid,
                    pool.driver,
                    pool.name,
                    tuple(d.name for _, d in devices),
                    tuple(s.name for s in group),
                )
            )
        return out

    # states -----------------------------------------------------------------------------------
    def initial_state(self, node: str) -> tuple[tuple[int, int], ...]:
        """A node's blocks as the allocator sees them: ``(type id, taken)`` sorted (its
        blocks come in no fixed order, so the multiset is the state)."""
        return tuple(sorted((b.type_id, 0) for b in self.blocks.get(node, ())))

    def free_matching(self, request: int, state: Iterable[tuple[int, int]]) -> int:
        """Devices free in ``state`` that the request accepts (counters not checked)."""
        total = 0
        for tid, taken in state:
            t = self.types[tid]
            free = t.free(taken)
            row = t.answers[request]
            total += sum(1 for i in range(t.size) if free >> i & 1 and row[i] == ACCEPT)
        return total


def _tie_slices(slices: Sequence[DraSlice]) -> list[list[DraSlice]]:
    """Slices grouped when their devices share a counter set (union-find), by name."""
    parent = list(range(len(slices)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, s in enumerate(slices):
        for d in s.devices:
            for use in d.consumes:
                j = owner.setdefault(use.counter_set, i)
                parent[find(i)] = find(j)
    groups: dict[int, list[DraSlice]] = {}
    for i, s in enumerate(slices):
        groups.setdefault(find(i), []).append(s)
    return sorted(groups.values(), key=lambda g: g[0].name)
