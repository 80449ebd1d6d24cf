"""Exact placement of pods on nodes: arithmetic bounds, first-fit-decreasing, then CP-SAT.

The question is bin packing with many dimensions: can every pod go to a node
that is eligible for it (Ready, not cordoned, selector matched, taints
tolerated, GPU sharing compatible) such that, on every node and for every
resource, the pods' requests fit what is free — and, in shared mode, each
shared pod's VRAM fits a card of its node?

The solver answers in three steps, cheapest first:

1. **Bounds.** A pod shape with no node able to hold it, or a resource whose
   total demand exceeds what every eligible node has free together, is a proof
   of infeasibility with numbers. (CP-SAT needs seconds to prove what a sum
   proves at once.)
2. **First-fit-decreasing.** Pods, largest first, each to the first node (by
   name) with room. Success is a proof of feasibility.
3. **CP-SAT.** One integer per (pod shape, node): how many pods of that shape
   the node takes — identical pods are aggregated, and identical nodes are
   ordered to break symmetry. With every pod required it decides feasibility
   exactly (and, given time, minimises the nodes used, starting from the FFD
   packing, so it never uses more nodes than FFD); when infeasible, a second
   model places as many pods as possible so that the rest can be explained.

:func:`check_placement` re-checks any placement without OR-Tools.

One concept a module: :mod:`.report` (config, report, result), :mod:`.shapes`
(pods grouped by shape, nodes with their room, eligibility), :mod:`.bounds`,
:mod:`.ffd`, :mod:`.cpsat` (the per-node model), :mod:`.patterns` (the
aggregated model), :mod:`.solve` (:func:`pack`) and :mod:`.checker`.
"""

from vfcore.placement.packing.checker import check_placement
from vfcore.placement.packing.ffd import first_fit_decreasing
from vfcore.placement.packing.report import PackingResult, SolverConfig, SolverReport, Status
from vfcore.placement.packing.shapes import ExtraReasons
from vfcore.placement.packing.solve import pack

__all__ = [
    "ExtraReasons",
    "PackingResult",
    "SolverConfig",
    "SolverReport",
    "Status",
    "check_placement",
    "first_fit_decreasing",
    "pack",
]
