"""The remedy: apply waves (largest claims first) and/or node affinities from the exact placement."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from vfcore.cluster import ClusterSnapshot
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import PodRequest
from vfcore.placement.scheduler.cluster_facts import SchedulingFacts
from vfcore.placement.scheduler.engine import Budget
from vfcore.placement.scheduler.prediction import (
    DEFAULT_MAX_BRANCHES,
    DEFAULT_MAX_WORK,
    DEFAULT_SAMPLES,
    predict,
)
from vfcore.placement.scheduler.results import SchedulerPrediction, Verdict
from vfcore.placement.scheduler.scoring import EPHEMERAL_STORAGE, ScoringConfig
from vfcore.placement.scheduler.workloads import Workload
from vfcore.quantity import CPU, MEMORY, PODS

__all__ = ["HOSTNAME_LABEL", "Remedy", "RemedyKind", "claim_size", "remedy", "waves_of"]

RemedyKind = Literal["none", "waves", "affinity", "waves+affinity"]
#: The label a remedy's required node affinity selects on.
HOSTNAME_LABEL = "kubernetes.io/hostname"

_VERDICT_RANK: dict[str, int] = {"lands": 0, "at-risk": 1, "unknown": 2, "strands": 3}

_NOT_EXTENDED = frozenset({CPU, MEMORY, PODS, EPHEMERAL_STORAGE})


def claim_size(pod: PodRequest) -> tuple[int, int, int]:
    """How big a pod's claim is, for ordering waves: (largest extended-resource units, cpu, memory).

    >>> claim_size(PodRequest("d/0", "d", 0, (("cpu", 2000), ("nvidia.com/gpu", 4))))
    (4, 2000, 0)
    """
    requests = dict(pod.requests)
    extended = max((u for r, u in requests.items() if r not in _NOT_EXTENDED), default=0)
    return extended, requests.get(CPU, 0), requests.get(MEMORY, 0)


def waves_of(pods: Sequence[PodRequest]) -> tuple[tuple[str, ...], ...]:
    """Pods grouped into apply waves: largest claim first, one wave per claim size.

    Within a wave pods keep workload order and replica order. Applying wave
    by wave and waiting until each is bound before the next makes the apply
    order the wave order, whatever the controllers do within a wave.
    """
    by_size: dict[tuple[int, int, int], list[PodRequest]] = {}
    for pod in pods:
        by_size.setdefault(claim_size(pod), []).append(pod)
    return tuple(
        tuple(p.pod for p in sorted(by_size[size], key=lambda p: (p.node, p.replica, p.pod)))
        for size in sorted(by_size, reverse=True)
    )


def _affinity_groups(
    pods: Sequence[PodRequest], placement: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    groups: dict[str, set[str]] = {}
    for pod in pods:
        groups.setdefault(pod.node, set()).add(placement[pod.pod])
    return {w: tuple(sorted(hosts)) for w, hosts in sorted(groups.items())}


@dataclass(frozen=True, slots=True)
class Remedy:
    """How to apply a flow so that the scheduler lands what the exact packing places.

    ``kind`` is ``none`` (nothing needed, or nothing found that helps),
    ``waves`` (apply ``waves`` in turn, each bound before the next),
    ``affinity`` (give each workload a required node affinity
    ``kubernetes.io/hostname In [nodes]``; ``affinity`` pairs workload and
    nodes, derived from the exact placement) or ``waves+affinity`` (both).
    ``prediction`` is the model's verdict under the remedy.
    """

    kind: RemedyKind
    waves: tuple[tuple[str, ...], ...]
    affinity: tuple[tuple[str, tuple[str, ...]], ...]
    verdict_before: Verdict
    verdict_after: Verdict
    prediction: SchedulerPrediction

    @property
    def affinity_map(self) -> dict[str, tuple[str, ...]]:
        """``{workload: (node, …)}``."""
        return dict(self.affinity)

    @property
    def order(self) -> tuple[str, ...]:
        """The apply order the remedy implies."""
        return self.prediction.order

    def describe(self) -> str:
        """One paragraph a person can act on.

        >>> r = Remedy("waves", (("big/0",), ("small/0", "small/1")), (), "strands", "lands",
        ...            SchedulerPrediction("lands", True, 2, 3, (), (), None, None,
        ...                                ("big/0", "small/0", "small/1"), ScoringConfig(), "-"))
        >>> print(r.describe())
        The scheduler model strands pods when the flow is applied as is. Apply it in 2 waves, largest claims first, waiting until each wave is bound: wave 1: big/0; wave 2: small/0, small/1. Under this remedy the model says: lands (every pod lands in all 2 tie-break outcome(s) explored).
        """
        before = {
            "lands": "lands every pod",
            "strands": "strands pods",
            "at-risk": "may strand pods, depending on tie-breaks,",
            "unknown": "cannot tell whether pods land",
        }[self.verdict_before]
        parts = [f"The scheduler model {before} when the flow is applied as is."]
        if self.kind == "none" and self.verdict_before == "lands":
            parts.append("No remedy is needed.")
        elif self.kind == "none":
            parts.append(
                "No wave order or node affinity derived from the exact placement does better."
            )
        if "waves" in self.kind:
            shown = "; ".join(
                f"wave {i}: {', '.join(w[:6])}" + (f" (+{len(w) - 6} more)" if len(w) > 6 else "")
                for i, w in enumerate(self.waves, 1)
            )
            parts.append(
                f"Apply it in {len(self.waves)} waves, largest claims first, "
                f"waiting until each wave is bound: {shown}."
            )
        if "affinity" in self.kind:
            shown = "; ".join(f"{w} → {', '.join(hosts)}" for w, hosts in self.affinity)
            parts.append(
                f"Give each workload a required node affinity ({HOSTNAME_LABEL} In [...]): {shown}."
            )
        p = self.prediction
        scope = "explored" if p.exhaustive else "sampled"
        parts.append(
            f"Under this remedy the model says: {self.verdict_after} "
            f"(every pod lands in all {p.outcomes_explored} tie-break outcome(s) {scope})."
            if self.verdict_after == "lands"
            else f"Under this remedy the model says: {self.verdict_after} ({p.reason})."
        )
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "waves": [list(w) for w in self.waves],
            "affinity": {w: list(hosts) for w, hosts in self.affinity},
            "verdict_before": self.verdict_before,
            "verdict_after": self.verdict_after,
            "description": self.describe(),
            "prediction": self.prediction.to_dict(),
        }


def _check_placement(
    pods: Sequence[PodRequest], cluster: ClusterSnapshot, placement: Mapping[str, str]
) -> None:
    names = {p.pod for p in pods}
    nodes = {n.name for n in cluster.nodes}
    unknown_pods = sorted(set(placement) - names)
    if unknown_pods:
        raise InvalidInputError(
            "placement-unknown-pod",
            f"the placement names pods {unknown_pods} that are not among the pods",
            "pass the placement computed for these pods",
        )
    missing = sorted(names - set(placement))
    if missing:
        raise InvalidInputError(
            "placement-incomplete",
            f"the placement leaves pods {missing[:10]} unplaced; a remedy needs an exact packing of every pod",
            "compute a remedy only when the exact packing places every pod",
        )
    bad_nodes = sorted({n for n in placement.values() if n not in nodes})
    if bad_nodes:
        raise InvalidInputError(
            "placement-unknown-node",
            f"the placement uses nodes {bad_nodes} that the cluster does not have",
            "pass the placement computed for this cluster snapshot",
        )


def remedy(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    placement: Mapping[str, str],
    *,
    config: ScoringConfig | None = None,
    max_branches: int = DEFAULT_MAX_BRANCHES,
    samples: int = DEFAULT_SAMPLES,
    budget: Budget | None = None,
    before: SchedulerPrediction | None = None,
    workloads: Mapping[str, Workload] | None = None,
    facts: SchedulingFacts | None = None,
    window_runs: int = 0,
) -> Remedy:
    """Find an apply order and/or node affinities under which the model lands every pod.

    ``placement`` (pod → node) is an exact packing of every pod. The steps,
    each re-checked with :func:`predict` over every tie outcome:

    1. **waves**: apply pods largest claim first (:func:`waves_of`), each wave
       bound before the next;
    2. **affinity**: restrict each workload to the nodes the exact placement
       gives its pods (replicas share one pod template, so the affinity is per
       workload), in the original order;
    3. **waves+affinity**: both.

    The first that lands wins; otherwise the best verdict found (lands, then
    at-risk, unknown, strands; then fewer pods always stranded; then the
    simpler remedy), which may be ``none``. The re-checks make
    ``window_runs`` scan-window runs (none by default: where the window
    matters no re-check can answer ``lands`` anyway, and the prediction
    before the remedy has made its own).
    """
    cfg = config or ScoringConfig()
    _check_placement(pods, cluster, placement)
    meter = budget if budget is not None else Budget(3 * DEFAULT_MAX_WORK)
    if before is None:
        before = predict(
            pods,
            cluster,
            config=cfg,
            max_branches=max_branches,
            samples=samples,
            workloads=workloads,
            facts=facts,
        )
    if before.verdict == "lands":
        return Remedy("none", (), (), before.verdict, before.verdict, before)
    waves = waves_of(pods)
    order = [name for wave in waves for name in wave]
    groups = _affinity_groups(pods, placement)
    affinity = tuple(groups.items())
    candidates: list[tuple[RemedyKind, SchedulerPrediction]] = [("none", before)]
    tries: tuple[tuple[str, dict[str, Any]], ...] = (
        ("waves", {"order": order}),
        ("affinity", {"affinity": groups}),
        ("waves+affinity", {"order": order, "affinity": groups}),
    )
    for left, (kind, kwargs) in zip(range(len(tries), 0, -1), tries, strict=True):
        if meter.out_of_time() or meter.used >= meter.work:
            if "remedy" not in meter.cut:  # the remedies not tried are not reported
                meter.cut.append("remedy")
            break
        share = meter.share((meter.work - meter.used) // left)
        prediction = predict(
            pods,
            cluster,
            config=cfg,
            max_branches=max_branches,
            samples=samples,
            budget=share,
            workloads=workloads,
            facts=facts,
            window_runs=window_runs,
            **kwargs,
        )
        meter.used += share.used
        if share.cut and "remedy" not in meter.cut:
            meter.cut.append("remedy")
        candidates.append((cast("RemedyKind", kind), prediction))
        if prediction.verdict == "lands":
            break
    simplicity = {"none": 0, "waves": 1, "affinity": 2, "waves+affinity": 3}
    kind, after = min(
        candidates,
        key=lambda c: (
            _VERDICT_RANK[c[1].verdict],
            len(c[1].stranded_always),
            len(c[1].stranded_sometimes),
            simplicity[c[0]],
        ),
    )
    return Remedy(
        kind=kind,
        waves=waves if "waves" in kind else (),
        affinity=affinity if "affinity" in kind else (),
        verdict_before=before.verdict,
        verdict_after=after.verdict,
        prediction=after,
    )
