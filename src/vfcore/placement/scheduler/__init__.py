"""A model of kube-scheduler's greedy placement, and a remedy when it strands pods.

kube-scheduler places pods one at a time, in queue order, each on the
highest-scoring node that passes the filters (up to 1.35 a tie is a uniform
draw; 1.36 usually gives it to the node earliest in its list, so the model
explores every tie outcome and prints no odds for 1.36). It never looks
ahead, so it can strand a pod that an exact packing places. This package predicts whether that happens for the pods a flow creates,
in the order they are applied (``docs/scheduler-model.md`` has the full story).

**Filters** (NodeResourcesFit and friends, :mod:`vfcore.placement.fit`): the node is
Ready and schedulable, matches the pod's node selector (and, for a remedy, its
required node affinity), tolerates the node's ``NoSchedule``/``NoExecute``
taints, has one more pod slot, and for every resource the pod requests
``request <= allocatable - requested``.

**Scores** (NodeResourcesFit, NodeResourcesBalancedAllocation — 1.36's or the
older formula, by ``ScoringConfig.kube_version`` — TaintToleration and
NodeAffinity, in Go's integer arithmetic): :mod:`vfcore.placement.scheduler.scoring`;
PodTopologySpread (the system defaults over a Deployment's or StatefulSet's
pods, and constraints a pod sets), InterPodAffinity (existing pods' terms) and
ImageLocality: :mod:`vfcore.placement.scheduler.plugins`, fed by
:mod:`.workloads` (how ``vf deploy`` creates the pods) and :mod:`.cluster_facts`
(the cluster's pods, images, budgets, priority classes). A pod that fits no
node preempts lower-priority pods as DefaultPreemption does (:mod:`.preemption`).
From 100 nodes, kube-scheduler scores only a window of the feasible nodes
(:mod:`.window`); the prediction reports the stranded pods as a range.

Worked example (docs/scheduler-model.md): nodes ``a`` and ``b`` with
4 GPUs each, GPUs scored by LeastAllocated, pods of 2, 2 and 4 GPUs in that
order. P1 scores 50 on both: a tie, say ``a``. P2 scores ``(4-4)*100//4 = 0``
on ``a`` and ``(4-2)*100//4 = 50`` on ``b``: ``b``. P3 then finds 2 free GPUs
on each node and strands, in both tie-break outcomes — although {P1, P2} on
``a`` and P3 on ``b`` places all three. Applying the 4-GPU pod first (a wave
of its own, bound before the 2-GPU pods) lands every pod.

Ties: identical nodes with identical loads are interchangeable, so the model
keeps nodes in equivalence classes (same allocatable, labels, taints,
condition and load) and a tie between members of one class is no branch at all.

The package, one concept a module: :mod:`.scoring` (the resource, taint and
node-affinity plugins), :mod:`.plugins` (spread, inter-pod affinity, image
locality), :mod:`.workloads` and :mod:`.cluster_facts` (the model's inputs
besides pods and nodes), :mod:`.context` (those inputs compiled for a run),
:mod:`.results` (what a run and a prediction report), :mod:`.engine` (node
equivalence classes), :mod:`.preemption` (victims and the nominated node),
:mod:`.simulation` (one greedy run and its tie policies), :mod:`.window` (the
scan window), :mod:`.prediction` (every tie-break outcome), :mod:`.remedy`
(waves and affinities) and :mod:`.report` (the section of a plan).
"""

from vfcore.placement.scheduler.cluster_facts import (
    AffinityTerm,
    BoundPod,
    DisruptionBudget,
    SchedulingFacts,
    scheduling_facts,
)
from vfcore.placement.scheduler.prediction import (
    DEFAULT_MAX_BRANCHES,
    DEFAULT_SAMPLES,
    DEFAULT_WINDOW_RUNS,
    predict,
)
from vfcore.placement.scheduler.preemption import Preemption
from vfcore.placement.scheduler.remedy import (
    HOSTNAME_LABEL,
    Remedy,
    RemedyKind,
    claim_size,
    remedy,
    waves_of,
)
from vfcore.placement.scheduler.report import SchedulerReport, predict_for_plan
from vfcore.placement.scheduler.results import (
    SchedulerPrediction,
    Simulation,
    Step,
    StrandedPod,
    Verdict,
    WindowReport,
)
from vfcore.placement.scheduler.scoring import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    NodeScore,
    ScoringConfig,
    Strategy,
    node_score,
)
from vfcore.placement.scheduler.simulation import TieBreak, simulate
from vfcore.placement.scheduler.window import WindowRun, run_windowed, scheduler_node_order
from vfcore.placement.scheduler.workloads import (
    SYSTEM_DEFAULT_SPREAD,
    LabelSelector,
    SpreadConstraint,
    Workload,
    workloads_from_objects,
    workloads_from_spec,
)

__all__ = [
    "DEFAULT_MAX_BRANCHES",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "DEFAULT_SAMPLES",
    "DEFAULT_WINDOW_RUNS",
    "HOSTNAME_LABEL",
    "SYSTEM_DEFAULT_SPREAD",
    "AffinityTerm",
    "BoundPod",
    "DisruptionBudget",
    "LabelSelector",
    "NodeScore",
    "Preemption",
    "Remedy",
    "RemedyKind",
    "SchedulerPrediction",
    "SchedulerReport",
    "SchedulingFacts",
    "ScoringConfig",
    "Simulation",
    "SpreadConstraint",
    "Step",
    "StrandedPod",
    "Strategy",
    "TieBreak",
    "Verdict",
    "WindowReport",
    "WindowRun",
    "Workload",
    "claim_size",
    "node_score",
    "predict",
    "predict_for_plan",
    "remedy",
    "run_windowed",
    "scheduler_node_order",
    "scheduling_facts",
    "simulate",
    "waves_of",
    "workloads_from_objects",
    "workloads_from_spec",
]
