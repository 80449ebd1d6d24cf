"""How ``vf deploy`` creates a flow node's pods, as kube-scheduler sees them: :class:`Workload`.

kube-scheduler treats a bare pod and a pod of a ReplicaSet differently. A pod
that a ReplicaSet or StatefulSet owns, or that a Service selects, gets
PodTopologySpread's **system default constraints** (``maxSkew`` 3 per
``kubernetes.io/hostname``, 5 per ``topology.kubernetes.io/zone``, both
``ScheduleAnyway``) over the pods that the same owner and Services select
(``helper.DefaultSelector``); a Job's pods get none unless a Service selects
them. A pod's ``priorityClassName`` decides its priority, and with it whether
it may preempt; its labels decide whether existing pods' affinity terms apply
to it; its images decide ImageLocality.

A :class:`Workload` says all of that for the pods of one flow node (the
``node`` of :class:`~vfcore.placement.claims.PodRequest`), from the spec
(:func:`workloads_from_spec`: the workload kind only) or from the objects
``vf deploy`` renders (:func:`workloads_from_objects`: labels, namespace,
Services, images, priority class, constraints as rendered).

Worked example: a REALTIME flow's ``detector`` with ``nb_tasks=4`` is a
Deployment, so its 4 pods spread by hostname and zone (``default_spread``);
in a BATCH flow it is an Indexed Job and they do not (the issue 27
measurement: both Job-only flows matched the model, every Deployment and
StatefulSet did not until spreading was modelled).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from vfcore.errors import InvalidInputError
from vfcore.placement.demand import node_shapes

if TYPE_CHECKING:
    from vfcore.flow.authoring import Flow
    from vfcore.flow.spec import FlowSpec

__all__ = [
    "HOSTNAME_KEY",
    "SYSTEM_DEFAULT_SPREAD",
    "ZONE_KEY",
    "LabelSelector",
    "SpreadConstraint",
    "Workload",
    "WorkloadKind",
    "requirement_holds",
    "workloads_from_objects",
    "workloads_from_spec",
]

WorkloadKind = Literal["deployment", "statefulset", "job", "pod"]
HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"
#: The annotation ``vf deploy`` puts on a worker's pod template: the flow node it runs.
NODE_ANNOTATION = "vfcore.io/node-name"
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``: ``matchLabels`` and ``matchExpressions``, all of which must hold.

    An empty selector matches every pod (``{}``); where the API has a nil
    selector (matches nothing) vfcore passes ``None`` instead of a selector.

    >>> s = LabelSelector((("app", "web"),), (("tier", "In", ("a", "b")),))
    >>> s.matches({"app": "web", "tier": "b"}), s.matches({"app": "web"})
    (True, False)
    """

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "match_labels", tuple(sorted(self.match_labels)))
        object.__setattr__(
            self, "expressions", tuple(sorted((k, o, tuple(v)) for k, o, v in self.expressions))
        )
        for key, operator, _ in self.expressions:
            if operator not in _OPERATORS:
                raise InvalidInputError(
                    "invalid-label-selector",
                    f"label selector requirement on {key!r} has operator {operator!r}",
                    f"use one of {', '.join(_OPERATORS)}",
                )

    @property
    def is_empty(self) -> bool:
        return not self.match_labels and not self.expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(
            requirement_holds(labels.get(key), operator, values)
            for key, operator, values in self.expressions
        )

    def merged(self, other: LabelSelector) -> LabelSelector:
        """Both selectors' requirements (``selector.Add``): what ``DefaultSelector`` builds."""
        labels = dict(self.match_labels)
        labels.update(other.match_labels)
        return LabelSelector(tuple(labels.items()), self.expressions + other.expressions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "match_labels": dict(self.match_labels),
            "match_expressions": [
                {"key": k, "operator": o, "values": list(v)} for k, o, v in self.expressions
            ],
        }

    @classmethod
    def parse(cls, raw: object, where: str) -> LabelSelector | None:
        """A selector as the API writes it (``None`` for a missing one); bad input names ``where``."""
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            raise _invalid(where, f"is {type(raw).__name__}, not an object")
        labels = raw.get("matchLabels") or {}
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise _invalid(where, "matchLabels is not a map of strings")
        expressions: list[tuple[str, str, tuple[str, ...]]] = []
        for i, item in enumerate(raw.get("matchExpressions") or []):
            if not isinstance(item, Mapping):
                raise _invalid(where, f"matchExpressions[{i}] is not an object")
            key, operator, values = item.get("key"), item.get("operator"), item.get("values") or []
            if (
                not isinstance(key, str)
                or operator not in _OPERATORS
                or not isinstance(values, list)
                or not all(isinstance(v, str) for v in values)
            ):
                raise _invalid(where, f"matchExpressions[{i}] is not key/operator/values")
            expressions.append((key, str(operator), tuple(values)))
        return cls(tuple(labels.items()), tuple(expressions))


def requirement_holds(have: str | None, operator: str, values: Sequence[str]) -> bool:
    """One ``In``/``NotIn``/``Exists``/``DoesNotExist`` requirement against a label's value
    (``None``: the label is absent); any other operator holds nowhere.

    >>> requirement_holds("a", "In", ["a", "b"]), requirement_holds(None, "NotIn", ["a"])
    (True, True)
    """
    if operator == "In":
        return have is not None and have in values
    if operator == "NotIn":
        return have is None or have not in values
    if operator == "Exists":
        return have is not None
    if operator == "DoesNotExist":
        return have is None
    return False


def _invalid(where: str, why: str) -> InvalidInputError:
    return InvalidInputError(
        "invalid-label-selector",
        f"{where}: the label selector {why}",
        "write it as the API does: {matchLabels: {...}, matchExpressions: [{key, operator, values}]}",
    )


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One ``topologySpreadConstraint``.

    ``selector`` ``None`` means *the workload's own pods* (what system defaults
    use: the owner's and Services' selectors, :attr:`Workload.spread_selector`).
    ``ScheduleAnyway`` constraints score; ``DoNotSchedule`` ones filter
    (``matchNum + 1 - minMatchNum <= maxSkew``).
    """

    max_skew: int
    topology_key: str
    when_unsatisfiable: Literal["ScheduleAnyway", "DoNotSchedule"] = "ScheduleAnyway"
    selector: LabelSelector | None = None

    def __post_init__(self) -> None:
        if (
            not isinstance(self.max_skew, int)
            or isinstance(self.max_skew, bool)
            or self.max_skew < 1
        ):
            raise InvalidInputError(
                "invalid-spread-constraint",
                f"maxSkew {self.max_skew!r} on {self.topology_key!r} is not an integer >= 1",
                "give maxSkew as an integer >= 1, e.g. 1",
            )
        if not self.topology_key:
            raise InvalidInputError(
                "invalid-spread-constraint",
                "a topology spread constraint has no topologyKey",
                f"name a node label, e.g. {ZONE_KEY}",
            )
        if self.when_unsatisfiable not in ("ScheduleAnyway", "DoNotSchedule"):
            raise InvalidInputError(
                "invalid-spread-constraint",
                f"whenUnsatisfiable {self.when_unsatisfiable!r} on {self.topology_key!r}",
                "use ScheduleAnyway (scores) or DoNotSchedule (filters)",
            )

    @property
    def is_hard(self) -> bool:
        return self.when_unsatisfiable == "DoNotSchedule"

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_skew": self.max_skew,
            "topology_key": self.topology_key,
            "when_unsatisfiable": self.when_unsatisfiable,
            "selector": None if self.selector is None else self.selector.to_dict(),
        }


#: PodTopologySpread's ``systemDefaultConstraints`` (``defaultingType: System``).
SYSTEM_DEFAULT_SPREAD: tuple[SpreadConstraint, ...] = (
    SpreadConstraint(3, HOSTNAME_KEY),
    SpreadConstraint(5, ZONE_KEY),
)


@dataclass(frozen=True, slots=True)
class Workload:
    """How the pods of one flow node are created: what kube-scheduler reads besides requests.

    - ``kind``: ``deployment`` (a ReplicaSet owns the pods), ``statefulset``,
      ``job`` or ``pod`` (bare);
    - ``default_spread``: whether the cluster's default topology spread
      constraints apply (a ReplicaSet or StatefulSet owns the pods, or a
      Service selects them) — only when the pods set no constraints of their
      own (``spread``), which replace the defaults;
    - ``spread_selector``: which pods count as the workload's own for spreading
      (the owner's and Services' selectors; ``None``: the workload's pods only);
    - ``labels``, ``namespace``: the pods' labels and namespace, for existing
      pods' affinity terms and PDBs (``labels=None``: not known);
    - ``images``: every container image, init containers included (ImageLocality);
    - ``priority``: the pods' priority (``None``: unknown, e.g. a
      ``priority_class`` the cluster dump does not list); ``preemption_policy``
      ``PreemptLowerPriority`` or ``Never``.
    """

    name: str
    kind: WorkloadKind = "pod"
    default_spread: bool = False
    spread: tuple[SpreadConstraint, ...] = ()
    spread_selector: LabelSelector | None = None
    labels: tuple[tuple[str, str], ...] | None = None
    namespace: str = "default"
    images: tuple[str, ...] = ()
    priority: int | None = 0
    priority_class: str | None = None
    preemption_policy: str = "PreemptLowerPriority"

    def __post_init__(self) -> None:
        if self.kind not in ("deployment", "statefulset", "job", "pod"):
            raise InvalidInputError(
                "invalid-workload",
                f"workload {self.name!r} has kind {self.kind!r}",
                "use deployment, statefulset, job or pod",
            )
        if self.preemption_policy not in ("PreemptLowerPriority", "Never"):
            raise InvalidInputError(
                "invalid-workload",
                f"workload {self.name!r} has preemptionPolicy {self.preemption_policy!r}",
                "use PreemptLowerPriority (the default) or Never",
            )
        if self.labels is not None:
            object.__setattr__(self, "labels", tuple(sorted(self.labels)))

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels or ())

    def constraints(self, defaults: Sequence[SpreadConstraint]) -> tuple[SpreadConstraint, ...]:
        """The constraints kube-scheduler applies: the pods' own, else the defaults where they apply."""
        if self.spread:
            return self.spread
        return tuple(defaults) if self.default_spread else ()

    def counts_as_own(self, labels: Mapping[str, str], namespace: str) -> bool:
        """Whether an existing pod with ``labels`` counts among this workload's pods for spreading."""
        if namespace != self.namespace or self.spread_selector is None:
            return False
        return not self.spread_selector.is_empty and self.spread_selector.matches(labels)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "default_spread": self.default_spread,
            "spread": [c.to_dict() for c in self.spread],
            "labels": None if self.labels is None else dict(self.labels),
            "namespace": self.namespace,
            "images": list(self.images),
            "priority": self.priority,
            "priority_class": self.priority_class,
            "preemption_policy": self.preemption_policy,
        }


def workloads_from_spec(
    flow_or_spec: Flow | FlowSpec,
    *,
    priority: int | None = 0,
    priority_class: str | None = None,
    images: Sequence[str] = (),
    namespace: str = "default",
) -> dict[str, Workload]:
    """Each flow node's workload as ``vf deploy`` renders it, from the spec alone.

    The kind follows :func:`vfcore.placement.demand.workload_of` (BATCH: Jobs;
    REALTIME: Deployments, StatefulSets for partitioned processors, Jobs for
    finite producers); Deployments and StatefulSets get the default spreading,
    Jobs do not (no Service selects a worker Job's pods). Labels are left
    unknown (they carry the run id): existing pods' affinity terms that select
    on labels are then reported as unknown rather than guessed.

    >>> from vfcore.flow.spec import FlowSpec, NodeSpec
    >>> spec = FlowSpec("f", "realtime", (NodeSpec("src", "producer"),
    ...     NodeSpec("det", "processor", ("src",), nb_tasks=4)))
    >>> {n: (w.kind, w.default_spread) for n, w in workloads_from_spec(spec).items()}
    {'src': ('deployment', True), 'det': ('deployment', True)}
    """
    out: dict[str, Workload] = {}
    for shape in node_shapes(flow_or_spec):
        kind: WorkloadKind = shape.workload
        out[shape.name] = Workload(
            name=shape.name,
            kind=kind,
            default_spread=kind in ("deployment", "statefulset"),
            namespace=namespace,
            images=tuple(images),
            priority=priority,
            priority_class=priority_class,
        )
    return out


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _string_map(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in _mapping(value).items()}


def _template_images(pod_spec: Mapping[str, Any]) -> tuple[str, ...]:
    images: list[str] = []
    for field in ("initContainers", "containers"):
        for container in pod_spec.get(field) or []:
            image = _mapping(container).get("image")
            if isinstance(image, str) and image:
                images.append(image)
    return tuple(images)


def _own_constraints(pod_spec: Mapping[str, Any], where: str) -> tuple[SpreadConstraint, ...]:
    out: list[SpreadConstraint] = []
    for i, raw in enumerate(pod_spec.get("topologySpreadConstraints") or []):
        item = _mapping(raw)
        out.append(
            SpreadConstraint(
                max_skew=item.get("maxSkew"),  # type: ignore[arg-type]  # checked by the dataclass
                topology_key=str(item.get("topologyKey") or ""),
                when_unsatisfiable=item.get("whenUnsatisfiable", "DoNotSchedule"),
                selector=LabelSelector.parse(
                    item.get("labelSelector"), f"{where} topologySpreadConstraints[{i}]"
                ),
            )
        )
    return tuple(out)


def workloads_from_objects(
    objects: Iterable[Mapping[str, Any]],
    *,
    priorities: Mapping[str, int] | None = None,
    default_priority: int = 0,
) -> dict[str, Workload]:
    """Each flow node's workload from the objects ``vf deploy`` renders (:func:`vfcore.render`).

    Reads every Deployment, StatefulSet and Job whose pod template carries
    the ``vfcore.io/node-name`` annotation, and the Services beside them: the
    template's labels and namespace, its images, its ``priorityClassName``
    (valued from ``priorities``, ``{name: value}`` as the cluster's
    PriorityClasses say; a class not listed there leaves the priority
    unknown; no class gives ``default_priority``, the cluster's
    ``globalDefault`` or 0), ``preemptionPolicy`` and
    ``topologySpreadConstraints``. Default spreading applies to Deployments
    and StatefulSets, and to a Job whose pods a Service selects; the spread
    selector merges the owner's and those Services' selectors
    (``helper.DefaultSelector``; a ReplicaSet's ``pod-template-hash`` is left
    out, as it is not known before the ReplicaSet exists).
    """
    items = [o for o in objects if isinstance(o, Mapping)]
    services: list[tuple[str, dict[str, str]]] = []
    for obj in items:
        if obj.get("kind") == "Service":
            meta = _mapping(obj.get("metadata"))
            chosen = _string_map(_mapping(obj.get("spec")).get("selector"))
            if chosen:  # a Service without a selector selects nothing
                services.append((str(meta.get("namespace") or "default"), chosen))
    out: dict[str, Workload] = {}
    for obj in items:
        kind = obj.get("kind")
        if kind not in ("Deployment", "StatefulSet", "Job"):
            continue
        meta = _mapping(obj.get("metadata"))
        spec = _mapping(obj.get("spec"))
        template = _mapping(spec.get("template"))
        template_meta = _mapping(template.get("metadata"))
        node = _string_map(template_meta.get("annotations")).get(NODE_ANNOTATION)
        if node is None:
            continue  # the broker and the setup Job: not pods of a flow node
        where = f"{kind} {meta.get('name')}"
        namespace = str(meta.get("namespace") or "default")
        labels = _string_map(template_meta.get("labels"))
        pod_spec = _mapping(template.get("spec"))
        selecting = [s for ns, s in services if ns == namespace and _selects(s, labels)]
        selector = LabelSelector()
        for service_selector in selecting:
            selector = selector.merged(LabelSelector(tuple(service_selector.items())))
        owned = kind in ("Deployment", "StatefulSet")
        if owned:
            own = LabelSelector.parse(spec.get("selector"), f"{where} selector")
            if own is not None:
                selector = selector.merged(own)
        class_name = pod_spec.get("priorityClassName")
        priority: int | None = default_priority
        if isinstance(class_name, str) and class_name:
            priority = None if priorities is None else priorities.get(class_name)
        else:
            class_name = None
        workload_kind: WorkloadKind = str(kind).lower()  # type: ignore[assignment]
        out[node] = Workload(
            name=node,
            kind=workload_kind,
            default_spread=owned or bool(selecting),
            spread=_own_constraints(pod_spec, where),
            spread_selector=None if selector.is_empty else selector,
            labels=tuple(labels.items()),
            namespace=namespace,
            images=_template_images(pod_spec),
            priority=priority,
            priority_class=class_name,
            preemption_policy=str(pod_spec.get("preemptionPolicy") or "PreemptLowerPriority"),
        )
    return out


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())
