"""The remedy: apply waves (largest claims first), node affinities from the exact placement, and —
for DRA pods — claims pinned to the devices the exact plan chose.

A DRA claim cannot name a device (a CEL selector sees a device's driver,
attributes and capacity, not its name), so a *pin* selects the devices by the
attribute that identifies them: a whole GPU's ``uuid``, a MIG device's
``parentUUID`` (the GPU it is carved from). Replicas share one claim template,
so a workload is pinned to the set of devices (or GPUs) the plan gives its pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from vfcore.cluster import ClusterSnapshot
from vfcore.errors import InvalidInputError
from vfcore.placement.claims import PodRequest
from vfcore.placement.dra.cel import MAX_SELECTOR_LENGTH
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

__all__ = [
    "HOSTNAME_LABEL",
    "Remedy",
    "RemedyKind",
    "claim_size",
    "device_order_waves",
    "device_pins",
    "remedy",
    "waves_of",
]

RemedyKind = Literal["none", "waves", "affinity", "waves+affinity", "pins", "waves+pins"]
#: The label a remedy's required node affinity selects on.
HOSTNAME_LABEL = "kubernetes.io/hostname"

_DEVICE_ORDER = "in the order of the devices the exact plan gives them"

_VERDICT_RANK: dict[str, int] = {"lands": 0, "at-risk": 1, "unknown": 2, "strands": 3}

_NOT_EXTENDED = frozenset({CPU, MEMORY, PODS, EPHEMERAL_STORAGE})


def claim_size(pod: PodRequest) -> tuple[int, int, int]:
    """How big a pod's claim is, for ordering waves: (largest extended-resource units — or a DRA
    claim's device count —, cpu, memory).

    >>> claim_size(PodRequest("d/0", "d", 0, (("cpu", 2000), ("nvidia.com/gpu", 4))))
    (4, 2000, 0)
    """
    requests = dict(pod.requests)
    extended = max((u for r, u in requests.items() if r not in _NOT_EXTENDED), default=0)
    if pod.dra is not None:
        extended = max(extended, pod.dra.count)
    return extended, requests.get(CPU, 0), requests.get(MEMORY, 0)


def _wave_size(pod: PodRequest) -> tuple[int, ...]:
    """:func:`claim_size`, with a DRA pod's declared VRAM after the count: a ``3g`` slice's
    claim (30 GiB) goes before a ``1g``'s (9 GiB), so the allocator's first fit takes the
    large runs of memory slices first."""
    extended, cpu, memory = claim_size(pod)
    vram = (pod.gpu_memory_mib or 0) if pod.dra is not None else 0
    return extended, vram, cpu, memory


def waves_of(pods: Sequence[PodRequest]) -> tuple[tuple[str, ...], ...]:
    """Pods grouped into apply waves: largest claim first, one wave per claim size.

    Within a wave pods keep workload order and replica order. Applying wave
    by wave and waiting until each is bound before the next makes the apply
    order the wave order, whatever the controllers do within a wave.
    """
    by_size: dict[tuple[int, ...], list[PodRequest]] = {}
    for pod in pods:
        by_size.setdefault(_wave_size(pod), []).append(pod)
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
    pins: tuple[tuple[str, tuple[str, ...]], ...] = ()  # workload → CEL selectors (DRA)
    wave_order: str = "largest claims first"  # or "in the order of the planned devices"

    @property
    def affinity_map(self) -> dict[str, tuple[str, ...]]:
        """``{workload: (node, …)}``."""
        return dict(self.affinity)

    @property
    def pins_map(self) -> dict[str, tuple[str, ...]]:
        """``{workload: (CEL selector, …)}``: what each workload's claim template adds."""
        return dict(self.pins)

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
                f"Apply it in {len(self.waves)} waves, {self.wave_order}, "
                f"waiting until each wave is bound: {shown}."
            )
        if "affinity" in self.kind:
            shown = "; ".join(f"{w} → {', '.join(hosts)}" for w, hosts in self.affinity)
            parts.append(
                f"Give each workload a required node affinity ({HOSTNAME_LABEL} In [...]): {shown}."
            )
        if "pins" in self.kind:
            shown = "; ".join(f"{w}: {' && '.join(sel)}" for w, sel in self.pins)
            parts.append(
                "Pin each workload's claim to the devices the exact plan chose (a selector on "
                f"the attribute that identifies them): {shown}."
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
            "pins": {w: list(sel) for w, sel in self.pins},
            "wave_order": self.wave_order,
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
    devices: Mapping[str, tuple[str, ...]] | None = None,
) -> Remedy:
    """Find an apply order and/or node affinities under which the model lands every pod.

    ``devices`` (pod → ``driver/pool/device`` the exact plan gives it, DRA mode)
    adds tries: waves in the order of the planned devices
    (:func:`device_order_waves`: each first fit then takes its planned device —
    a small MIG slice before a large one, when the plan puts it first), and
    **pins** (each workload's claim pinned to its planned devices,
    :func:`device_pins`) and **waves+pins**.

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
    Waves = tuple[tuple[str, ...], ...]
    candidates: list[tuple[RemedyKind, SchedulerPrediction, Waves]] = [("none", before, ())]
    tries: list[tuple[RemedyKind, dict[str, Any], Waves]] = [
        ("waves", {"order": order}, waves),
        ("affinity", {"affinity": groups}, ()),
        ("waves+affinity", {"order": order, "affinity": groups}, waves),
    ]
    planned = device_order_waves(pods, cluster, devices or {})
    if planned and planned != waves:
        # the allocator walks devices in order: applying workloads in the order of the devices
        # the plan gives them lets each first fit take its planned device
        tries.insert(1, ("waves", {"order": [n for w in planned for n in w]}, planned))
    pins = device_pins(pods, cluster, devices or {})
    if pins:
        pinned = _pinned(pods, pins)
        tries += [
            ("pins", {"pods": pinned}, ()),
            ("waves+pins", {"pods": pinned, "order": order}, waves),
        ]
    for left, (kind, kwargs, used_waves) in zip(range(len(tries), 0, -1), tries, strict=True):
        if meter.out_of_time() or meter.used >= meter.work:
            if "remedy" not in meter.cut:  # the remedies not tried are not reported
                meter.cut.append("remedy")
            break
        share = meter.share((meter.work - meter.used) // left)
        prediction = predict(
            kwargs.get("pods", pods),
            cluster,
            config=cfg,
            max_branches=max_branches,
            samples=samples,
            budget=share,
            workloads=workloads,
            facts=facts,
            window_runs=window_runs,
            **{k: v for k, v in kwargs.items() if k != "pods"},
        )
        meter.used += share.used
        if share.cut and "remedy" not in meter.cut:
            meter.cut.append("remedy")
        candidates.append((kind, prediction, used_waves))
        if prediction.verdict == "lands":
            break
    simplicity = {
        "none": 0,
        "waves": 1,
        "affinity": 2,
        "waves+affinity": 3,
        "pins": 4,
        "waves+pins": 5,
    }
    kind, after, chosen_waves = min(
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
        waves=chosen_waves,
        affinity=affinity if "affinity" in kind else (),
        verdict_before=before.verdict,
        verdict_after=after.verdict,
        prediction=after,
        pins=tuple(sorted(pins.items())) if "pins" in kind else (),
        wave_order=_DEVICE_ORDER if chosen_waves is planned else "largest claims first",
    )


def device_pins(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    devices: Mapping[str, tuple[str, ...]],
) -> dict[str, tuple[str, ...]]:
    """Per DRA workload, the selector that pins its claim to the devices the plan chose.

    A whole GPU is named by its ``uuid`` attribute, a MIG device by its
    ``parentUUID`` (the GPU it is carved from): ``device.attributes["gpu.nvidia.com"].uuid
    in ["GPU-a", "GPU-b"]``. A workload some device of which has neither is not pinned.
    """
    facts = cluster.dra
    if facts is None or not devices:
        return {}
    ids: dict[str, tuple[str, str, str]] = {}
    for s in facts.slices:
        for d in s.devices:
            attrs = dict(d.attributes)
            for key in ("uuid", "parentUUID"):
                value = attrs.get(key)
                if value is not None and value.kind == "string":
                    ids[f"{s.driver}/{s.pool}/{d.name}"] = (s.driver, key, str(value.value))
                    break
    wanted: dict[str, set[tuple[str, str, str]]] = {}
    unpinned: set[str] = set()
    for pod in pods:
        if pod.dra is None:
            continue
        for device in devices.get(pod.pod, ()):
            found = ids.get(device)
            if found is None:
                unpinned.add(pod.node)
            else:
                wanted.setdefault(pod.node, set()).add(found)
    out: dict[str, tuple[str, ...]] = {}
    for workload, named in sorted(wanted.items()):
        if workload in unpinned or len({(d, k) for d, k, _ in named}) != 1:
            continue
        ((driver, key),) = {(d, k) for d, k, _ in named}
        values = ", ".join(f'"{v}"' for v in sorted(v for _, _, v in named))
        pin = f'device.attributes["{driver}"].{key} in [{values}]'
        if len(pin) <= MAX_SELECTOR_LENGTH:  # the API refuses a longer selector
            out[workload] = (pin,)
    return out


def device_order_waves(
    pods: Sequence[PodRequest],
    cluster: ClusterSnapshot,
    devices: Mapping[str, tuple[str, ...]],
) -> tuple[tuple[str, ...], ...]:
    """Apply waves in the order of the devices the plan gives each workload: by its first
    planned device's slice and place in that slice (the order the allocator walks a slice in),
    workloads without devices last. One wave per workload."""
    facts = cluster.dra
    if facts is None or not devices:
        return ()
    position: dict[str, tuple[str, int]] = {}
    for s in facts.slices:
        for i, d in enumerate(s.devices):
            position[f"{s.driver}/{s.pool}/{d.name}"] = (s.name, i)
    first: dict[str, tuple[int, str, int]] = {}
    for pod in pods:
        for device in devices.get(pod.pod, ()):
            at = position.get(device)
            if at is not None:
                key = (0, *at)
                first[pod.node] = min(first.get(pod.node, key), key)
    by_node: dict[str, list[PodRequest]] = {}
    for pod in pods:
        by_node.setdefault(pod.node, []).append(pod)
    ordered = sorted(by_node, key=lambda n: (first.get(n, (1, "", 0)), n))
    return tuple(
        tuple(p.pod for p in sorted(by_node[n], key=lambda p: (p.replica, p.pod))) for n in ordered
    )


def _pinned(
    pods: Sequence[PodRequest], pins: Mapping[str, tuple[str, ...]]
) -> tuple[PodRequest, ...]:
    return tuple(
        replace(p, dra=replace(p.dra, selectors=p.dra.selectors + pins[p.node]))
        if p.dra is not None and p.node in pins
        else p
        for p in pods
    )
