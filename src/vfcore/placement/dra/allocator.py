"""kube-scheduler 1.36's structured allocator, for one pod's claim on one node.

``staging/src/k8s.io/dynamic-resource-allocation/structured`` (the *incubating*
allocator, which 1.36 runs with its beta features on) decides a node in
``Filter``: for each claim, each request, each device the request needs, it
walks the node's pools, their slices and each slice's devices **in order** and
takes the first device that is not in use, that the DeviceClass's and the
request's selectors accept, and — for a partitionable device — whose counters
are still available; then it looks for the next device *after* it (so it
tries combinations, not permutations), and backtracks when it runs short. It
**stops at the first solution**: no scoring, no look-ahead. So of the feasible
sets of devices it returns the first in its order: for one device, the
first free accepted device; for a MIG slice, the first placement whose memory
slices are still free — which may cut a GPU so that a later, larger slice
finds no run of free memory slices although enough are free (fragmentation).

The order is not fixed: the pools come from a Go map and the slices from an
informer's store, so which *block* (:mod:`.inventory`) is walked first changes
from one scheduling cycle to the next. :func:`allocation_outcomes` explores
every order that can matter — lazily: the search only branches on the next
block when the first-solution search reaches it — and returns the distinct
outcomes (as canonical node states), each a tie the scheduler model explores.

Worked example: an H100 whose counters say memory slices 0–3 are taken (a
``3g.40gb`` at 0) and a claim for one ``1g.10gb``: the first free placement
is ``1g.10gb`` at 4, so a later ``3g.40gb`` finds no 4 consecutive free slices
on this GPU — although slices 5–7 and 4 were free before. The exact plan puts
the ``1g`` elsewhere (:mod:`.planning`); the model says the allocator will not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from vfcore.placement.dra.inventory import ACCEPT, ERROR, Amount, BlockType, DraInventory

__all__ = ["FAILED_ERROR", "NO_FIT", "AllocationModel"]

#: :meth:`AllocationModel.outcomes` when no device set fits the node.
NO_FIT: tuple[int, ...] = ()
#: ... when a selector errs on a device the search reaches (kube-scheduler's attempt fails).
FAILED_ERROR = (-1,)
#: Distinct block orders explored for one (request, node state) before the search stops.
MAX_ORDERS = 256

NodeState = tuple[tuple[int, int], ...]


class _NeedMore(Exception):
    """The first-solution search reached the end of the blocks placed so far."""


class _Error(Exception):
    """A selector erred on a device the search reached."""


class AllocationModel:
    """Canonical node states (interned) and the allocator's outcomes on them, memoised."""

    def __init__(self, inventory: DraInventory) -> None:
        self.inventory = inventory
        self.types: list[BlockType] = inventory.types
        self.states: list[NodeState] = []
        self.state_ids: dict[NodeState, int] = {}
        self._outcomes: dict[tuple[int, int, int], tuple[int, ...]] = {}
        self._used: dict[tuple[int, int], tuple[object, ...]] = {}
        self.sampled = False  # some outcome set was cut at MAX_ORDERS

    def state_id(self, state: NodeState) -> int:
        found = self.state_ids.get(state)
        if found is None:
            found = self.state_ids[state] = len(self.states)
            self.states.append(state)
        return found

    def initial(self, node: str) -> int:
        return self.state_id(self.inventory.initial_state(node))

    # counters -------------------------------------------------------------------------------
    def _consumed(self, tid: int, taken: int) -> tuple[object, ...]:
        key = (tid, taken)
        found = self._used.get(key)
        if found is None:
            t = self.types[tid]
            used: list[Amount] = [0] * len(t.available)
            bits = taken
            i = 0
            while bits:
                if bits & 1:
                    for c, amount in t.consumes[i]:
                        used[c] += amount
                bits >>= 1
                i += 1
            found = self._used[key] = tuple(used)
        return found

    def counters_allow(self, tid: int, taken: int, device: int) -> bool:
        """Whether ``device`` of a block in state ``taken`` fits the counters left."""
        t = self.types[tid]
        row = t.consumes[device]
        if not row:
            return True
        used = self._consumed(tid, taken)
        return all(used[c] + amount <= t.available[c] for c, amount in row)  # type: ignore[operator]

    # the first-solution search -------------------------------------------------------------------
    def _first(
        self, order: Sequence[tuple[int, int]], request: int, count: int, more: bool
    ) -> list[int] | None:
        """Bits newly taken per block of ``order`` by the first solution; None: none exists.

        Raises ``_NeedMore`` when the search walks past ``order`` while ``more`` blocks
        exist, ``_Error`` when a selector errs on a device it reaches.
        """
        chosen = [0] * len(order)

        def search(k: int, b0: int, d0: int) -> bool:
            if k == count:
                return True
            for b in range(b0, len(order) + 1):
                if b == len(order):
                    if more:
                        raise _NeedMore
                    return False
                tid, taken = order[b]
                t = self.types[tid]
                answers = t.answers[request]
                for d in range(d0 if b == b0 else 0, t.size):
                    bit = 1 << d
                    if (t.base | taken | chosen[b]) & bit:
                        continue  # in use: checked first, as the allocator does
                    answer = answers[d]
                    if answer != ACCEPT:
                        if answer == ERROR:
                            raise _Error
                        continue
                    if not self.counters_allow(tid, taken | chosen[b], d):
                        continue
                    chosen[b] |= bit
                    if search(k + 1, b, d + 1):
                        return True
                    chosen[b] &= ~bit
            return False  # pragma: no cover - the loop returns at its end

        return chosen if search(0, 0, 0) else None

    def _usable(self, tid: int, taken: int, request: int) -> bool:
        t = self.types[tid]
        free = t.free(taken)
        answers = t.answers[request]
        return any(
            free >> d & 1 and answers[d] != 0 and self.counters_allow(tid, taken, d)
            for d in range(t.size)
        )

    def _candidates(self, blocks: Sequence[tuple[int, int]], request: int) -> int:
        """Free devices the request does not reject (a bound: counters not checked)."""
        total = 0
        for tid, taken in blocks:
            t = self.types[tid]
            free = t.free(taken)
            answers = t.answers[request]
            total += sum(1 for d in range(t.size) if free >> d & 1 and answers[d] != 0)
        return total

    def outcomes(self, request: int, count: int, sid: int) -> tuple[int, ...]:
        """Every node state a pod asking ``count`` devices of ``request`` can leave behind on a
        node in state ``sid``, over every block order: :data:`NO_FIT` when none fits,
        :data:`FAILED_ERROR` when a selector errs where the search looks."""
        key = (request, count, sid)
        found = self._outcomes.get(key)
        if found is not None:
            return found
        state = self.states[sid]
        usable = [blk for blk in state if self._usable(blk[0], blk[1], request)]
        rest = list(state)
        for blk in usable:
            rest.remove(blk)
        results: set[int] = set()
        error = False
        explored = 0

        def explore(prefix: list[tuple[int, int]], remaining: Counter[tuple[int, int]]) -> None:
            nonlocal error, explored
            if explored >= MAX_ORDERS:
                self.sampled = True
                return
            explored += 1
            try:
                chosen = self._first(prefix, request, count, more=sum(remaining.values()) > 0)
            except _NeedMore:
                for blk in sorted(remaining):
                    remaining[blk] -= 1
                    if not remaining[blk]:
                        del remaining[blk]
                    explore([*prefix, blk], remaining)
                    remaining[blk] += 1
                return
            except _Error:
                error = True
                return
            if chosen is None:
                return
            after = [(tid, taken | bits) for (tid, taken), bits in zip(prefix, chosen, strict=True)]
            leftover = [blk for blk, n in remaining.items() for _ in range(n)]
            results.add(self.state_id(tuple(sorted([*after, *leftover, *rest]))))

        if self._candidates(usable, request) >= count:
            explore([], Counter(usable))
        found = FAILED_ERROR if error else tuple(sorted(results))
        self._outcomes[key] = found
        return found

    def fits(self, request: int, count: int, sid: int) -> bool:
        got = self.outcomes(request, count, sid)
        return bool(got) and got != FAILED_ERROR
