"""PodTopologySpread, InterPodAffinity and ImageLocality, in kube-scheduler 1.36's arithmetic.

Pure functions over plain numbers, one per plugin step, so that each can be
checked by hand (tests/unit/test_scheduler_plugins.py) and the engine
(:mod:`.engine`) can apply them to node *states* (each standing for
``multiplicity`` identical nodes). The three plugins score the same in every
Kubernetes version the model predicts (1.29–1.36).

**PodTopologySpread, score** (``ScheduleAnyway`` constraints; the system
defaults are two: hostname ``maxSkew`` 3, zone ``maxSkew`` 5):

- each constraint gets the weight ``ln(size + 2)``, ``size`` being the number
  of feasible nodes for a hostname constraint and of distinct values of the
  key among the feasible nodes otherwise;
- a node's raw score sums, over the constraints whose key it carries,
  ``count · weight + (maxSkew − 1)``, ``count`` the matching pods on the node
  (hostname) or in its domain (other keys; counted over every node that
  matches the pod's node selector and affinity, feasible or not), rounded
  half away from zero;
- normalised across the feasible nodes: ``100 · (max + min − s) // max`` (100
  everywhere when ``max`` is 0); with the pod's own constraints (not the
  system defaults) a node missing a key is *ignored* and scores 0.

Worked example (:func:`spread_scores`): three feasible nodes in one zone
holding 1, 0 and 0 replicas of a Deployment. Hostname weight ``ln 5 = 1.609``,
zone weight ``ln 3 = 1.099`` (one zone, one replica in it). Raw:
``1·1.609 + 2 + 1·1.099 + 4 = 8.708 → 9`` on the first node, ``0 + 2 + 1.099 +
4 = 7.099 → 7`` on the others; normalised ``100·(9+7−9)//9 = 77`` and
``100·(9+7−7)//9 = 100``: the empty nodes win by ``2 · 23 = 46`` points.

**PodTopologySpread, filter** (``DoNotSchedule``): ``count + self −
min_count ≤ maxSkew`` per constraint, ``min_count`` the smallest count over
the domains of the eligible nodes (:func:`spread_filter_fails`).

**InterPodAffinity, score**: existing pods' preferred affinity terms (+weight),
preferred anti-affinity terms (−weight) and required affinity terms (+1, the
``hardPodAffinityWeight``) that select the incoming pod add to every node
sharing the existing pod's topology value; normalised min–max across the
feasible nodes, ``int(100 · (s − min) / (max − min))`` (0 everywhere when they
are equal) (:func:`normalize_interpod`).

**ImageLocality**: each container image present on the node adds ``size ·
nodes_with_image / all_nodes`` (truncated); the sum, clamped to [23 MiB,
1000 MiB · containers], maps linearly to 0–100 (:func:`image_locality_score`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from vfcore.placement.scheduler.workloads import HOSTNAME_KEY, SpreadConstraint

__all__ = [
    "EXISTING_ANTI_AFFINITY",
    "IMAGE_MAX_PER_CONTAINER",
    "IMAGE_MIN_THRESHOLD",
    "SPREAD_MISMATCH",
    "SPREAD_MISSING_LABEL",
    "go_round",
    "image_locality_score",
    "normalize_interpod",
    "normalize_spread",
    "spread_filter_fails",
    "spread_raw_score",
    "spread_scores",
    "spread_scores_by_value",
    "topology_weight",
]

MAX_NODE_SCORE = 100
#: The filter reasons, worded as kube-scheduler 1.36 writes them.
SPREAD_MISMATCH = "node(s) didn't match pod topology spread constraints"
SPREAD_MISSING_LABEL = SPREAD_MISMATCH + " (missing required label)"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
MIB = 1024 * 1024
#: ImageLocality's ``minThreshold`` and ``maxContainerThreshold``.
IMAGE_MIN_THRESHOLD = 23 * MIB
IMAGE_MAX_PER_CONTAINER = 1000 * MIB


def go_round(value: float) -> int:
    """Go's ``math.Round`` for a non-negative float: half away from zero (``round`` is half-even).

    >>> go_round(2.5), round(2.5), go_round(8.708), go_round(0.49999999999999994)
    (3, 2, 9, 0)
    """
    floor = math.floor(value)
    return int(floor) + (1 if value - floor >= 0.5 else 0)


def topology_weight(size: int) -> float:
    """``topologyNormalizingWeight``: ``ln(size + 2)``."""
    return math.log(float(size + 2))


def spread_raw_score(
    constraints: Sequence[SpreadConstraint],
    weights: Sequence[float],
    labels: Mapping[str, str],
    counts: Sequence[int],
) -> int:
    """One node's raw PodTopologySpread score: ``Σ count·weight + (maxSkew − 1)``, rounded.

    ``counts[i]`` is the matching pods on the node (hostname) or in its domain
    for constraint ``i``; a constraint whose key the node lacks adds nothing.
    The sum runs in constraint order in doubles, as Go's does.
    """
    score = 0.0
    for constraint, weight, count in zip(constraints, weights, counts, strict=True):
        if constraint.topology_key in labels:
            score += float(count) * weight + float(constraint.max_skew - 1)
    return go_round(score)


def normalize_spread(raw: Sequence[int | None]) -> list[int]:
    """PodTopologySpread's ``NormalizeScore``: ``None`` (an ignored node) scores 0.

    >>> normalize_spread([9, 7, 7]), normalize_spread([0, 0]), normalize_spread([None, 4])
    ([77, 100, 100], [100, 100], [0, 100])
    """
    known = [s for s in raw if s is not None]
    if not known:
        return [0] * len(raw)
    low, high = min(known), max(known)
    out: list[int] = []
    for score in raw:
        if score is None:
            out.append(0)
        elif high == 0:
            out.append(MAX_NODE_SCORE)
        else:
            out.append(MAX_NODE_SCORE * (high + low - score) // high)
    return out


def spread_scores(
    constraints: Sequence[SpreadConstraint],
    *,
    require_all: bool,
    labels: Sequence[Mapping[str, str]],
    own_counts: Sequence[Sequence[int]],
    domain_counts: Sequence[Mapping[str, int]],
    multiplicity: Sequence[int] | None = None,
) -> list[int]:
    """The normalised PodTopologySpread scores of the feasible nodes (``ScheduleAnyway`` only).

    ``labels[j]`` are feasible node ``j``'s labels (a hostname label is taken
    to be there); ``own_counts[j][i]`` the pods matching constraint ``i`` on it;
    ``domain_counts[i]`` constraint ``i``'s matching pods per topology value
    (over every node matching the pod's node affinity); ``multiplicity[j]``
    how many identical nodes entry ``j`` stands for (1 each by default).
    ``require_all`` (the pod's own constraints) ignores nodes missing a key.

    >>> from vfcore.placement.scheduler.workloads import SYSTEM_DEFAULT_SPREAD as D
    >>> z = {"topology.kubernetes.io/zone": "z1"}
    >>> spread_scores(D, require_all=False, labels=[z, z, z],
    ...               own_counts=[[1, 1], [0, 1], [0, 1]], domain_counts=[{}, {"z1": 1}])
    [77, 100, 100]
    """
    values = [
        tuple(
            "" if c.topology_key == HOSTNAME_KEY else lab.get(c.topology_key) for c in constraints
        )
        for lab in labels
    ]
    return spread_scores_by_value(
        constraints,
        require_all=require_all,
        values=values,
        own_counts=own_counts,
        domain_counts=domain_counts,
        multiplicity=multiplicity,
    )


def spread_scores_by_value(
    constraints: Sequence[SpreadConstraint],
    *,
    require_all: bool,
    values: Sequence[Sequence[str | None]],
    own_counts: Sequence[Sequence[int]],
    domain_counts: Sequence[Mapping[str, int]],
    multiplicity: Sequence[int] | None = None,
) -> list[int]:
    """:func:`spread_scores` with each node's topology value per constraint already looked up
    (``values[j][i]``: ``None`` when node ``j`` lacks constraint ``i``'s key; the hostname
    key is always there)."""
    index = [i for i, c in enumerate(constraints) if not c.is_hard]
    if not index:
        return [0] * len(values)
    mult = list(multiplicity) if multiplicity is not None else [1] * len(values)
    ignored = [require_all and any(v[i] is None for i in index) for v in values]
    weights: dict[int, float] = {}
    for i in index:
        if constraints[i].topology_key == HOSTNAME_KEY:
            size = sum(m for m, skip in zip(mult, ignored, strict=True) if not skip)
        else:
            size = len({v[i] or "" for v, skip in zip(values, ignored, strict=True) if not skip})
        weights[i] = topology_weight(size)
    raw: list[int | None] = []
    for j, v in enumerate(values):
        if ignored[j]:
            raw.append(None)
            continue
        score = 0.0
        for i in index:
            value = v[i]
            if value is None:
                continue  # the node lacks the key: the constraint adds nothing
            constraint = constraints[i]
            if constraint.topology_key == HOSTNAME_KEY:
                count = own_counts[j][i]
            else:
                count = domain_counts[i].get(value, 0)
            score += float(count) * weights[i] + float(constraint.max_skew - 1)
        raw.append(go_round(score))
    return normalize_spread(raw)


def spread_filter_fails(
    constraints: Sequence[SpreadConstraint],
    labels: Mapping[str, str],
    counts: Sequence[int],
    min_counts: Sequence[int],
    self_match: Sequence[bool],
) -> str | None:
    """Why PodTopologySpread's filter rejects a node (``None``: it passes the hard constraints).

    For each ``DoNotSchedule`` constraint ``i``: a node missing the key is
    rejected (``... (missing required label)``); otherwise ``counts[i] + self
    − min_counts[i]`` must not exceed ``maxSkew``, ``counts[i]`` the matching
    pods in the node's domain (on the node, for hostname), ``min_counts[i]``
    the smallest such count over the domains of every eligible node and
    ``self`` 1 when the incoming pod matches the constraint's selector.

    >>> from vfcore.placement.scheduler.workloads import SpreadConstraint as C
    >>> z = C(1, "topology.kubernetes.io/zone", "DoNotSchedule")
    >>> spread_filter_fails([z], {"topology.kubernetes.io/zone": "a"}, [2], [1], [True])
    "node(s) didn't match pod topology spread constraints"
    >>> spread_filter_fails([z], {"topology.kubernetes.io/zone": "b"}, [1], [1], [True]) is None
    True
    """
    keyed = {HOSTNAME_KEY: "", **dict(labels)}
    for i, constraint in enumerate(constraints):
        if not constraint.is_hard:
            continue
        if constraint.topology_key not in keyed:
            return SPREAD_MISSING_LABEL
        if counts[i] + (1 if self_match[i] else 0) - min_counts[i] > constraint.max_skew:
            return SPREAD_MISMATCH
    return None


def normalize_interpod(raw: Sequence[int], *, active: bool) -> list[int]:
    """InterPodAffinity's ``NormalizeScore``: min–max over the feasible nodes.

    ``active`` is false when no existing pod's term touched the pod (the
    plugin then leaves every score 0).

    >>> normalize_interpod([-5, 0, 5], active=True), normalize_interpod([3, 3], active=True)
    ([0, 50, 100], [0, 0])
    """
    if not active or not raw:
        return [0] * len(raw)
    low, high = min(raw), max(raw)
    if high == low:
        return [0] * len(raw)
    return [int(float(MAX_NODE_SCORE) * (float(s - low) / float(high - low))) for s in raw]


def image_locality_score(
    images: Sequence[str],
    on_node: Mapping[str, int],
    nodes_with: Mapping[str, int],
    total_nodes: int,
) -> int:
    """ImageLocality's score of a node for a pod whose containers use ``images``.

    ``on_node`` maps the node's normalised image names to sizes;
    ``nodes_with`` counts the nodes holding each image; ``total_nodes`` all
    nodes. A 500 MiB image on 1 of 4 nodes, one container: ``500 MiB · 1/4 =
    125 MiB`` → ``100 · (125 − 23) MiB // (1000 − 23) MiB = 10``.

    >>> image_locality_score(["vf:1"], {"vf:1": 500 * MIB}, {"vf:1": 1}, 4)
    10
    >>> image_locality_score(["vf:1"], {}, {"vf:1": 1}, 4)
    0
    """
    if not images or total_nodes <= 0:
        return 0
    total = 0
    for image in images:
        size = on_node.get(image)
        if size is None:
            continue
        spread = float(nodes_with.get(image, 0)) / float(total_nodes)
        total += int(float(size) * spread)
    high = IMAGE_MAX_PER_CONTAINER * len(images)
    total = min(max(total, IMAGE_MIN_THRESHOLD), high)
    return MAX_NODE_SCORE * (total - IMAGE_MIN_THRESHOLD) // (high - IMAGE_MIN_THRESHOLD)
