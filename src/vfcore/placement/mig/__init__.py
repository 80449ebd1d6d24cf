"""MIG: the profile catalogue, exact layouts, profile choice, and mix-mode planning.

A MIG-capable card (A100, H100, H200) has **8 memory slices** and **7 compute
slices**. A GPU instance of a profile takes a run of memory slices that must
start at one of the profile's valid start slots, plus some compute slices; the
two kinds run out separately. A ``3g.40gb`` takes 4 of the 8 memory slices but
only 3 of the 7 compute slices, so ``3g + 3g`` fills the memory while a compute
slice stays idle, and no ``1g`` fits beside them::

    >>> fit_layout("H100-80GB", ["3g.40gb", "3g.40gb"]).placements
    (Placement(start=0, profile='3g.40gb'), Placement(start=4, profile='3g.40gb'))
    >>> fit_layout("H100-80GB", ["3g.40gb", "3g.40gb", "1g.10gb"]).feasible
    False

Where an instance sits matters (fragmentation): three ``1g.10gb`` at starts 0,
1 and 5 leave 5 memory slices and 4 compute slices free, yet no ``3g`` fits (a
``3g`` needs slices 0–3 or 4–7); at 0, 1 and 2 they leave ``3g@4`` free. This
module is exact about it: :func:`fit_layout` decides whether a multiset of
profiles coexists on one card and returns a witness (a start slot per instance)
and a creation order; :func:`check_layout` re-checks any placed layout.

**Profile choice.** A pod declares ``gpu_memory_gib``; it gets the smallest
profile whose *usable* memory (what ``nvidia-smi mig -lgip`` reports) covers it:
9 GiB → ``1g.10gb`` on an H100-80GB (9.75 GiB usable), but 10 GiB does not fit
that and gets ``1g.20gb`` (19.62 GiB). See :func:`choose_profile`.

**Planning** (:func:`pack_mix`, used by ``plan(..., gpu_mode="mix")``): pods with
``gpu_memory_gib`` take one MIG instance (resource ``nvidia.com/mig-<profile>``
under the device plugin's *mixed* strategy), pods with ``gpu_count`` take whole
MIG-disabled cards (``nvidia.com/gpu``), all in one exact CP-SAT model with the
pods' cpu, memory, selectors and taints. Existing partitions are kept and their
free instances used as they are; idle cards may be (re)partitioned, and the plan
minimises the cards it reconfigures (a layout change wipes a whole card), then
the nodes it touches. See ``docs/mig.md`` for the attribution rules: what
kubectl shows, what it does not (which card a pod holds), and what follows.

**Applying** (:mod:`.apply`): one model of what ``nvidia-mig-parted apply``
does to a node's cards; every card action and every count of reconfigured
cards comes from it.

The package, one concept a module: :mod:`.catalogue` (profiles and families as
data), :mod:`.layouts` (exact layouts on one card), :mod:`.choice` (profile
choice by usable memory), :mod:`.config` (mig-parted configs), :mod:`.results`
(what a plan says), :mod:`.hosts` (what each node can do), :mod:`.model` (the
CP-SAT model), :mod:`.explain` (what did not fit, and why) and
:mod:`.planning` (:func:`pack_mix`).
"""

from vfcore.placement.mig.apply import (
    UNKNOWN_LAYOUT,
    ApplyOutcome,
    CardApply,
    apply_entries,
    config_problems,
    worst_over_orders,
)
from vfcore.placement.mig.catalogue import (
    MIG_FAMILIES,
    MIG_RESOURCE_PREFIX,
    MigFamily,
    MigProfile,
    mig_family,
)
from vfcore.placement.mig.choice import ProfileChoice, choose_profile
from vfcore.placement.mig.config import config_name, mig_parted_yaml
from vfcore.placement.mig.explain import advertisable, mix_issues
from vfcore.placement.mig.hosts import could_host, mix_reasons
from vfcore.placement.mig.layouts import (
    LayoutFit,
    Placement,
    check_layout,
    feasible_layouts,
    fit_layout,
    maximal_layouts,
)
from vfcore.placement.mig.planning import pack_mix
from vfcore.placement.mig.results import (
    MigCard,
    MigInstance,
    MigIssue,
    MigNodePlan,
    MigPlan,
    MigUnplaced,
    MixPacking,
)

__all__ = [
    "MIG_FAMILIES",
    "MIG_RESOURCE_PREFIX",
    "UNKNOWN_LAYOUT",
    "ApplyOutcome",
    "CardApply",
    "LayoutFit",
    "MigCard",
    "MigFamily",
    "MigInstance",
    "MigIssue",
    "MigNodePlan",
    "MigPlan",
    "MigProfile",
    "MigUnplaced",
    "MixPacking",
    "Placement",
    "ProfileChoice",
    "advertisable",
    "apply_entries",
    "check_layout",
    "choose_profile",
    "config_name",
    "config_problems",
    "could_host",
    "feasible_layouts",
    "fit_layout",
    "maximal_layouts",
    "mig_family",
    "mig_parted_yaml",
    "mix_issues",
    "mix_reasons",
    "pack_mix",
    "worst_over_orders",
]
