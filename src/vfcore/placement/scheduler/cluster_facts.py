"""What kube-scheduler reads from a cluster besides free capacity: :class:`SchedulingFacts`.

A :class:`~vfcore.cluster.ClusterSnapshot` sums what each node holds. Four
plugins need the pods themselves, and two more objects:

- PodTopologySpread counts the pods a workload's selector matches, per node
  and zone (:class:`BoundPod` labels and namespace);
- InterPodAffinity applies existing pods' affinity terms to an incoming pod:
  a *required* anti-affinity term that selects it filters every node in the
  same topology domain, preferred terms (and required affinity, at weight 1)
  score (:class:`AffinityTerm`);
- ImageLocality favours nodes that hold the pod's images (``status.images``
  of the nodes: :attr:`SchedulingFacts.images`);
- DefaultPreemption evicts lower-priority pods (:attr:`BoundPod.priority`,
  ``start_time``) and counts PodDisruptionBudget violations
  (:class:`DisruptionBudget`); a pod's ``priorityClassName`` gets its value
  from the PriorityClasses (:attr:`SchedulingFacts.priority_classes`).

:func:`scheduling_facts` reads them from the documents kubectl prints
(``kubectl get nodes -o json``, ``kubectl get pods -A -o json``, ``kubectl get
pdb -A -o json``, ``kubectl get priorityclasses -o json``). Unknown is its own
value: a missing or refused pod listing makes ``pods_unknown`` a reason (never
"no pods"); a missing PDB or PriorityClass listing leaves ``budgets`` /
``priority_classes`` ``None``. A pod or budget that cannot be read is listed
in ``unreadable`` and left out.

Worked example: an existing ``cache`` pod on node ``a`` (zone ``z1``) with a
required anti-affinity term ``{matchLabels: {app.kubernetes.io/managed-by:
vf}}`` on ``topology.kubernetes.io/zone`` keeps every pod ``vf deploy``
creates off every node in zone ``z1``: ``node(s) didn't satisfy existing pods
anti-affinity rules``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vfcore.cluster.kubeparse import pod_nonzero_requests, pod_requests
from vfcore.cluster.kubeparse.documents import parse_document, status_reason
from vfcore.errors import InvalidInputError
from vfcore.placement.scheduler.workloads import LabelSelector

__all__ = [
    "AffinityTerm",
    "BoundPod",
    "DisruptionBudget",
    "SchedulingFacts",
    "normalized_image_name",
    "scheduling_facts",
]

_TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One pod (anti-)affinity term of an existing pod, as it applies to incoming pods.

    ``selector`` ``None`` selects nothing (a nil ``labelSelector``).
    ``namespaces`` are the namespaces whose pods the term selects (the term's
    ``namespaces``, else the owning pod's own); ``all_namespaces`` is an empty
    ``namespaceSelector``; ``namespace_selector_unknown`` a non-empty one,
    which needs the Namespaces' labels vfcore does not read. ``weight`` is the
    preferred term's weight (``required`` terms carry 0).
    """

    kind: str  # "required-anti", "preferred-anti", "required-affinity", "preferred-affinity"
    topology_key: str
    selector: LabelSelector | None
    namespaces: tuple[str, ...]
    all_namespaces: bool = False
    namespace_selector_unknown: bool = False
    weight: int = 0

    def selects(self, labels: Mapping[str, str], namespace: str) -> bool | None:
        """Whether the term selects a pod with ``labels`` in ``namespace`` (``None``: unknown)."""
        if self.selector is None:
            return False
        if not self.selector.matches(labels):
            return False
        if self.all_namespaces or namespace in self.namespaces:
            return True
        return None if self.namespace_selector_unknown else False

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "topology_key": self.topology_key,
            "selector": None if self.selector is None else self.selector.to_dict(),
            "namespaces": list(self.namespaces),
            "all_namespaces": self.all_namespaces,
            "weight": self.weight,
        }


@dataclass(frozen=True, slots=True)
class BoundPod:
    """One pod bound to a node, with what the scheduler's plugins read of it.

    ``start_time`` is ``status.startTime`` as written (``None`` when absent:
    the scheduler then takes the pod as started now, the least important);
    ``owner`` is the controller's ``(kind, name)``; ``requests`` and
    ``nonzero`` as :func:`vfcore.cluster.kubeparse.pod_requests` and
    :func:`~vfcore.cluster.kubeparse.pod_nonzero_requests` count them.
    """

    namespace: str
    name: str
    node: str
    labels: tuple[tuple[str, str], ...] = ()
    priority: int = 0
    start_time: str | None = None
    owner: tuple[str, str] | None = None
    terminating: bool = False
    requests: tuple[tuple[str, int], ...] = ()
    nonzero: tuple[int, int] = (0, 0)
    terms: tuple[AffinityTerm, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.id,
            "node": self.node,
            "priority": self.priority,
            "owner": None if self.owner is None else f"{self.owner[0]}/{self.owner[1]}",
            "start_time": self.start_time,
        }


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A PodDisruptionBudget: its selector and ``status.disruptionsAllowed``."""

    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int
    disrupted: tuple[str, ...] = ()

    def covers(self, pod: BoundPod) -> bool:
        """``filterPodsWithPDBViolation``'s match: same namespace, a non-empty selector matching."""
        return (
            pod.namespace == self.namespace
            and bool(pod.labels)
            and self.selector is not None
            and not self.selector.is_empty
            and self.selector.matches(pod.label_map)
            and pod.name not in self.disrupted
        )


@dataclass(frozen=True, slots=True)
class SchedulingFacts:
    """The pods, images, budgets and priority classes the scheduler model reads (see the module).

    ``pods_unknown`` is the reason the pod listing could not be read (then
    ``pods`` is empty and means nothing); ``budgets`` / ``priority_classes``
    ``None`` mean not read. ``images`` maps a node to ``(image name, size in
    bytes)`` for every name of every image its ``status.images`` lists.
    """

    pods: tuple[BoundPod, ...] = ()
    pods_unknown: str | None = None
    images: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
    budgets: tuple[DisruptionBudget, ...] | None = None
    priority_classes: tuple[tuple[str, int], ...] | None = None
    default_priority: int = 0
    unreadable: tuple[str, ...] = ()

    def pods_on(self) -> dict[str, list[BoundPod]]:
        out: dict[str, list[BoundPod]] = {}
        for pod in self.pods:
            out.setdefault(pod.node, []).append(pod)
        return out

    @property
    def image_map(self) -> dict[str, dict[str, int]]:
        return {node: dict(images) for node, images in self.images}

    def priority_of(self, class_name: str | None) -> int | None:
        """The value of PriorityClass ``class_name`` (the default without one; ``None``: unknown)."""
        if class_name is None:
            return self.default_priority
        if self.priority_classes is None:
            return None
        return dict(self.priority_classes).get(class_name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pods": len(self.pods),
            "pods_unknown": self.pods_unknown,
            "budgets": None if self.budgets is None else len(self.budgets),
            "priority_classes": None
            if self.priority_classes is None
            else dict(self.priority_classes),
            "unreadable": list(self.unreadable),
        }


def normalized_image_name(name: str) -> str:
    """An image name as the scheduler's image states key it: ``:latest`` added when untagged.

    >>> normalized_image_name("registry.example/vf"), normalized_image_name("nats:2.11")
    ('registry.example/vf:latest', 'nats:2.11')
    >>> normalized_image_name("localhost:5000/vf")
    'localhost:5000/vf:latest'
    """
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _labels(value: object) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in _mapping(value).items()))


def _items(doc: object, source: str, noun: str, kind: str) -> tuple[list[Any] | None, str | None]:
    parsed, reason = parse_document(doc, source, noun)
    if parsed is None:
        return None, reason
    if parsed.get("kind") == "Status":
        return None, status_reason(parsed, noun)
    items = parsed.get("items")
    if not isinstance(items, list):
        return None, f"{source} has no items list"
    return [i for i in items if isinstance(i, Mapping) and i.get("kind") in (kind, None)], None


def _terms(kind: str, raw: object, owner_namespace: str, where: str) -> list[AffinityTerm]:
    out: list[AffinityTerm] = []
    if not isinstance(raw, list):
        return out
    for i, item in enumerate(raw):
        entry = _mapping(item)
        weight = 0
        if kind.startswith("preferred"):
            raw_weight = entry.get("weight")
            weight = raw_weight if isinstance(raw_weight, int) else 0
            entry = _mapping(entry.get("podAffinityTerm"))
        selector = LabelSelector.parse(entry.get("labelSelector"), f"{where}[{i}]")
        namespaces = tuple(str(n) for n in entry.get("namespaces") or [] if isinstance(n, str))
        ns_selector = entry.get("namespaceSelector")
        all_namespaces = isinstance(ns_selector, Mapping) and not (
            ns_selector.get("matchLabels") or ns_selector.get("matchExpressions")
        )
        unknown = isinstance(ns_selector, Mapping) and not all_namespaces
        if not namespaces and ns_selector is None:
            namespaces = (owner_namespace,)
        out.append(
            AffinityTerm(
                kind=kind,
                topology_key=str(entry.get("topologyKey") or ""),
                selector=selector,
                namespaces=namespaces,
                all_namespaces=bool(all_namespaces),
                namespace_selector_unknown=bool(unknown),
                weight=int(weight),
            )
        )
    return out


def _pod_terms(spec: Mapping[str, Any], namespace: str, where: str) -> tuple[AffinityTerm, ...]:
    affinity = _mapping(spec.get("affinity"))
    anti = _mapping(affinity.get("podAntiAffinity"))
    pro = _mapping(affinity.get("podAffinity"))
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    return tuple(
        _terms("required-anti", anti.get(req), namespace, f"{where} podAntiAffinity.required")
        + _terms("preferred-anti", anti.get(pref), namespace, f"{where} podAntiAffinity.preferred")
        + _terms("required-affinity", pro.get(req), namespace, f"{where} podAffinity.required")
        + _terms("preferred-affinity", pro.get(pref), namespace, f"{where} podAffinity.preferred")
    )


def _read_pod(item: Mapping[str, Any]) -> BoundPod | None:
    meta = _mapping(item.get("metadata"))
    spec = _mapping(item.get("spec"))
    status = _mapping(item.get("status"))
    node = spec.get("nodeName")
    if not isinstance(node, str) or not node or status.get("phase") in _TERMINAL:
        return None
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    where = f"pod/{namespace}/{name}"
    priority = spec.get("priority")
    owner = None
    for ref in meta.get("ownerReferences") or []:
        ref = _mapping(ref)
        if ref.get("controller") is True:
            owner = (str(ref.get("kind") or ""), str(ref.get("name") or ""))
    start = status.get("startTime")
    requests = pod_requests(item)
    return BoundPod(
        namespace=namespace,
        name=name,
        node=node,
        labels=_labels(meta.get("labels")),
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        start_time=start if isinstance(start, str) else None,
        owner=owner,
        terminating=meta.get("deletionTimestamp") is not None,
        requests=tuple(sorted(requests.items())),
        nonzero=pod_nonzero_requests(item),
        terms=_pod_terms(spec, namespace, where),
    )


def _read_images(nodes_doc: object) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    items, _ = _items(nodes_doc, "nodes.json", "node", "Node")
    out: list[tuple[str, tuple[tuple[str, int], ...]]] = []
    for item in items or []:
        name = _mapping(item.get("metadata")).get("name")
        if not isinstance(name, str):
            continue
        images: dict[str, int] = {}
        for image in _mapping(item.get("status")).get("images") or []:
            image = _mapping(image)
            size = image.get("sizeBytes")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                continue
            for image_name in image.get("names") or []:
                if isinstance(image_name, str) and image_name:
                    images[normalized_image_name(image_name)] = size
        if images:
            out.append((name, tuple(sorted(images.items()))))
    return tuple(sorted(out))


def start_key(start_time: str | None) -> float:
    """A pod's start time as seconds for ordering (a missing or unreadable one: the latest)."""
    if start_time is None:
        return float("inf")
    try:
        return datetime.fromisoformat(start_time.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return float("inf")


def scheduling_facts(
    nodes_json: object,
    pods_json: object,
    *,
    pdbs_json: object = None,
    priority_classes_json: object = None,
) -> SchedulingFacts:
    """The :class:`SchedulingFacts` of a cluster from kubectl's JSON (parsed, text or ``None``).

    >>> pods = {"kind": "PodList", "items": [{"kind": "Pod",
    ...     "metadata": {"namespace": "ml", "name": "train", "labels": {"app": "t"}},
    ...     "spec": {"nodeName": "a", "priority": 100, "containers": [{}]},
    ...     "status": {"phase": "Running", "startTime": "2026-01-02T03:04:05Z"}}]}
    >>> facts = scheduling_facts(None, pods)
    >>> [(p.id, p.node, p.priority) for p in facts.pods], facts.budgets
    ([('ml/train', 'a', 100)], None)
    >>> scheduling_facts(None, None).pods_unknown
    'pods.json is missing'
    """
    unreadable: list[str] = []
    pods: list[BoundPod] = []
    items, pods_unknown = _items(pods_json, "pods.json", "pod", "Pod")
    for item in items or []:
        try:
            pod = _read_pod(item)
        except InvalidInputError as exc:
            meta = _mapping(item.get("metadata"))
            unreadable.append(f"pod/{meta.get('namespace')}/{meta.get('name')}: {exc.message}")
            continue
        if pod is not None:
            pods.append(pod)
    budgets: list[DisruptionBudget] | None = None
    if pdbs_json is not None:
        pdb_items, pdb_reason = _items(
            pdbs_json, "pdbs.json", "poddisruptionbudget", "PodDisruptionBudget"
        )
        if pdb_items is not None:
            budgets = []
            for item in pdb_items:
                budget = _read_budget(item, unreadable)
                if budget is not None:
                    budgets.append(budget)
        elif pdb_reason:
            unreadable.append(f"poddisruptionbudgets: {pdb_reason}")
    classes: tuple[tuple[str, int], ...] | None = None
    default_priority = 0
    if priority_classes_json is not None:
        class_items, class_reason = _items(
            priority_classes_json, "priorityclasses.json", "priorityclass", "PriorityClass"
        )
        if class_items is not None:
            found: dict[str, int] = {}
            for item in class_items:
                name = _mapping(item.get("metadata")).get("name")
                value = item.get("value")
                if isinstance(name, str) and isinstance(value, int) and not isinstance(value, bool):
                    found[name] = value
                    if item.get("globalDefault") is True:
                        default_priority = value
            classes = tuple(sorted(found.items()))
        elif class_reason:
            unreadable.append(f"priorityclasses: {class_reason}")
    return SchedulingFacts(
        pods=tuple(sorted(pods, key=lambda p: (p.node, p.namespace, p.name))),
        pods_unknown=pods_unknown,
        images=_read_images(nodes_json),
        budgets=None if budgets is None else tuple(budgets),
        priority_classes=classes,
        default_priority=default_priority,
        unreadable=tuple(unreadable),
    )


def _read_budget(item: Mapping[str, Any], unreadable: list[str]) -> DisruptionBudget | None:
    meta = _mapping(item.get("metadata"))
    where = f"poddisruptionbudget/{meta.get('namespace')}/{meta.get('name')}"
    status = _mapping(item.get("status"))
    allowed = status.get("disruptionsAllowed", 0)
    if not isinstance(allowed, int) or isinstance(allowed, bool):
        unreadable.append(f"{where}: status.disruptionsAllowed is not an integer")
        return None
    try:
        selector = LabelSelector.parse(_mapping(item.get("spec")).get("selector"), where)
    except InvalidInputError as exc:
        unreadable.append(f"{where}: {exc.message}")
        return None
    return DisruptionBudget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        selector=selector,
        disruptions_allowed=allowed,
        disrupted=tuple(sorted(str(k) for k in _mapping(status.get("disruptedPods")))),
    )


def merge_unreadable(*groups: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({item for group in groups for item in group}))
