"""The DynamicResources filter of the model: kube-scheduler 1.36's allocator, node by node.

A pod with a ResourceClaim (DRA mode, :class:`~vfcore.placement.claims.DraRequest`)
passes ``DynamicResources.Filter`` on a node when the structured allocator
finds devices for its claim there (:mod:`vfcore.placement.dra.allocator`: the
first solution of a depth-first search, device by device, in slice order). The
filter runs after InterPodAffinity in the default profile; a node it rejects
counts under ``cannot allocate all claims``. It does not score (a claim with
``firstAvailable`` would; vfcore renders none), so the resource scores are
unchanged, and a DRA pod requests no extended resource.

The engine (:mod:`.engine`) keeps each node's devices as one more entry of its
load vector: the id of its *DRA state* (which devices of which blocks are
taken), interned by :class:`~vfcore.placement.dra.allocator.AllocationModel`.
Binding a DRA pod may leave a node in several states — the allocator walks
the node's slices in no fixed order — so :meth:`Engine.successors` can return
more than one, and the tie search explores each as a tie.

Worked example (``docs/dra.md``; ``tests/unit/test_dra_scheduler.py``): two H100s
with DynamicMIG, claims for a ``3g.40gb``, then a ``1g.20gb``, then a ``7g.80gb``.
The ``3g`` takes memory slices 0–3 of one GPU (call it GPU 0: which one is a tie too, and the two are alike). The ``1g.20gb`` takes the first
free placement of whichever GPU's slice the allocator walks first: beside the
``3g`` on GPU 0 (the ``7g`` then takes the idle GPU 1), or at 0 on GPU 1 (then
no GPU is whole for the ``7g``). Two outcomes, one of them stranding: ``at-risk``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from vfcore.cluster import ClusterSnapshot
from vfcore.placement.claims import PodRequest
from vfcore.placement.dra.allocator import FAILED_ERROR, AllocationModel
from vfcore.placement.dra.inventory import DraInventory, SelectorAnswers

__all__ = ["CANNOT_ALLOCATE", "DynamicResources"]

_GPU_NUMBER = re.compile(r"^gpu-\d+-(?=mig-)")

#: kube-scheduler's reason for a node where the allocator finds no devices.
CANNOT_ALLOCATE = "cannot allocate all claims"


class DynamicResources:
    """The filter's data for one model run: the inventory (one bracket) and the allocator."""

    def __init__(
        self,
        pods: Sequence[PodRequest],
        cluster: ClusterSnapshot,
        unknown_as: Literal["empty", "full"],
        answers: SelectorAnswers | None = None,
        *,
        inventory: DraInventory | None = None,
    ) -> None:
        requests = sorted({p.dra for p in pods if p.dra is not None})
        self.inventory = inventory or DraInventory(
            cluster, requests, unknown_as=unknown_as, answers=answers
        )
        self.model = AllocationModel(self.inventory)

    @classmethod
    def of(
        cls,
        pods: Sequence[PodRequest],
        cluster: ClusterSnapshot,
        unknown_as: Literal["empty", "full"],
        memo: dict[tuple[object, ...], object] | None = None,
    ) -> DynamicResources:
        """The filter for these pods, reused from ``memo``: the runs of one prediction and its
        remedy share one inventory (and the allocator's memo) per bracket and set of requests,
        and may reuse the one the plan compiled (:meth:`seed`)."""
        if memo is None:
            return cls(pods, cluster, unknown_as)
        requests = {p.dra for p in pods if p.dra}
        for key, found in sorted(memo.items(), key=lambda kv: str(kv[0])):
            if (
                key[:2] == ("dra", id(cluster))
                and isinstance(found, DynamicResources)
                # no device of unknown use: both brackets compile alike
                and (key[2] == unknown_as or not found.inventory.unknown_nodes)
                and requests <= found.inventory.request_ids.keys()
            ):
                return found
        answers = memo.setdefault(("dra-answers", id(cluster)), SelectorAnswers())
        assert isinstance(answers, SelectorAnswers)
        made = cls(pods, cluster, unknown_as, answers)
        memo["dra", id(cluster), unknown_as, len(memo)] = made
        return made

    @classmethod
    def seed(
        cls,
        memo: dict[tuple[object, ...], object],
        cluster: ClusterSnapshot,
        inventory: DraInventory,
    ) -> None:
        """Offer ``inventory`` (compiled on ``cluster``, e.g. by the plan) to :meth:`of`."""
        memo["dra", id(cluster), inventory.unknown_as, len(memo)] = cls(
            (), cluster, inventory.unknown_as, inventory=inventory
        )

    def request_of(self, pod: PodRequest) -> tuple[int, int] | None:
        """(request index, device count) of a DRA pod; None for any other pod."""
        if pod.dra is None:
            return None
        return self.inventory.request_index(pod.dra), pod.dra.count

    def initial(self, node: str) -> int:
        return self.model.initial(node)

    def outcomes(self, claim: tuple[int, int], state: int) -> tuple[int, ...]:
        """The node's possible DRA states once the claim is allocated (empty: it is not)."""
        found = self.model.outcomes(claim[0], claim[1], state)
        return () if found == FAILED_ERROR else found

    def errs(self, claim: tuple[int, int], state: int) -> bool:
        """Whether a selector errs where the allocator looks (the attempt fails)."""
        return self.model.outcomes(claim[0], claim[1], state) == FAILED_ERROR

    def layout(self, node: str, state: int) -> tuple[tuple[str, ...], ...]:
        """The devices taken by the run in each of ``node``'s blocks (state ``state``), blocks
        with none left out, sorted; a DynamicMIG GPU's devices without its number
        (``mig-3g40gb-9-4``: which GPU is the slice order's tie)."""
        blocks = self.inventory.blocks.get(node, ())
        names = {b.type_id: b.devices for b in reversed(blocks)}
        out = []
        for tid, taken in self.model.states[state]:
            if taken:
                devices = names.get(tid, ())
                out.append(
                    tuple(
                        sorted(
                            _GPU_NUMBER.sub("", devices[d]) if d < len(devices) else f"#{d}"
                            for d in range(self.inventory.types[tid].size)
                            if taken >> d & 1
                        )
                    )
                )
        return tuple(sorted(out))

    def notes(self) -> tuple[str, ...]:
        """What the filter could not model or decide, for the prediction's notes."""
        inv = self.inventory
        out = list(inv.notes)
        for info in inv.requests:
            if info.problem is not None:
                out.append(f"claims of {info.request.describe()} cannot be judged: {info.problem}")
        if inv.unbounded_nodes:
            names = sorted(inv.unbounded_nodes)
            out.append(
                f"{len(names)} node(s) publish devices kube-scheduler cannot use now "
                f"({', '.join(names[:3])}{'…' if len(names) > 3 else ''}: "
                f"{inv.unbounded_nodes[names[0]]}); the model gives them no devices"
            )
        if self.model.sampled:
            out.append(
                "a node has so many orders of its device slices that the allocator's outcomes "
                "were sampled, not all explored"
            )
        return tuple(out)
