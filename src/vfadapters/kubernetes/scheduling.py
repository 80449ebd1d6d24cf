"""The kube-scheduler model's inputs beside the snapshot: ``vf plan`` and ``vf deploy``'s preflight.

- :func:`read_facts` lists PodDisruptionBudgets and PriorityClasses (every
  page) and builds :class:`vfcore.placement.scheduler.SchedulingFacts` from
  them and the node and pod listings
  :func:`vfadapters.kubernetes.snapshot.read_documents` returned; a refused
  or failed listing leaves those facts unknown (``None``), never empty.
  :func:`read_snapshot_and_facts` reads the snapshot and the facts from one
  node and pod listing.
- :func:`scheduler_workloads` says how ``vf deploy`` creates each node's pods
  (labels, owners, Services, priority, image), by rendering them.
"""

from __future__ import annotations

from typing import Any

from vfadapters.kubernetes.client import KubeApiError, KubeClient
from vfadapters.kubernetes.snapshot import (
    list_all,
    read_documents,
    read_dra_documents,
    snapshot_of,
)

__all__ = [
    "PDBS_PATH",
    "PLAN_IMAGE",
    "PRIORITY_CLASSES_PATH",
    "read_facts",
    "read_snapshot_and_facts",
    "read_without_run",
    "scheduler_workloads",
]

PDBS_PATH = "/apis/policy/v1/poddisruptionbudgets"
PRIORITY_CLASSES_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"


def _listed(client: KubeClient, path: str, kind: str) -> Any:
    try:
        doc, _ = list_all(client, path, kind)
    except KubeApiError:
        return None
    return doc


def read_facts(client: KubeClient, nodes: Any, pods: Any) -> Any:
    """The cluster's :class:`~vfcore.placement.scheduler.SchedulingFacts` (nodes and pods as
    already listed; budgets and priority classes listed here)."""
    from vfcore.placement import scheduling_facts

    return scheduling_facts(
        nodes,
        pods,
        pdbs_json=_listed(client, PDBS_PATH, "PodDisruptionBudgetList"),
        priority_classes_json=_listed(client, PRIORITY_CLASSES_PATH, "PriorityClassList"),
    )


def read_snapshot_and_facts(client: KubeClient) -> tuple[Any, Any]:
    """(:class:`~vfcore.ClusterSnapshot`, scheduling facts) from one listing of nodes and pods.

    Raises :class:`KubeApiError` as :func:`~vfadapters.kubernetes.snapshot.read_snapshot` does.
    """
    cluster, facts, _ = read_without_run(client, None)
    return cluster, facts


def read_without_run(client: KubeClient, run: tuple[str, str, str] | None) -> tuple[Any, Any, Any]:
    """``(snapshot, facts, RunPods or None)``; with ``run = (flow, run id, namespace)`` the
    run's own pods and DRA claims are left out of both (a redeploy: they are the pods the
    plan places; :func:`vfcore.runtime.redeploy.without_run_pods`)."""
    nodes, pods, runtime_classes = read_documents(client)
    dra = read_dra_documents(client)
    own = None
    if run is not None:
        from vfcore.runtime import without_run_pods

        flow, run_id, namespace = run
        pods, claims, own = without_run_pods(
            pods, dra[2], flow=flow, run_id=run_id, namespace=namespace
        )
        dra = (dra[0], dra[1], claims)
    cluster = snapshot_of(nodes, pods, runtime_classes, dra=dra)
    return cluster, read_facts(client, nodes, pods), own


#: The image ``vf plan`` renders with when not given one (ImageLocality then scores nothing).
PLAN_IMAGE = "vf-plan.invalid/flow:plan"


def scheduler_workloads(
    spec: Any,
    facts: Any,
    *,
    priority_class: str | None = None,
    image: str | None = None,
    namespace: str = "default",
    gpu_mode: str = "exclusive",
    gpu_resource_name: str | None = None,
    gpu_runtime_class: str | None = None,
    gpu_node_selector: tuple[str, str] | None = None,
    resources: dict[str, dict[str, str]] | None = None,
    dra: dict[str, Any] | None = None,
    image_overrides: dict[str, str] | None = None,
) -> Any:
    """How ``vf deploy`` would create each node's pods, for the scheduler model.

    Rendered as ``vf deploy`` renders them (run id ``plan``), so the pods'
    labels, Services and owners are the real ones; where rendering cannot
    (mix mode before MIG choices, a shared mode without a runtime class) the
    spec alone gives the workload kinds. ``dra`` holds the DRA classes
    (``dra_device_class``, ``dra_mig_device_class``) of ``--gpu-mode dra``. ``priority_class`` is valued from
    the cluster's PriorityClasses (unknown when not listed); ``image``, when
    given, is every container's (ImageLocality), but a node's in ``image_overrides``
    (``--image-override``).
    """
    from dataclasses import replace

    from vfcore import InvalidFlowError, InvalidInputError
    from vfcore.placement import workloads_from_objects, workloads_from_spec
    from vfcore.runtime import RenderOptions, render

    priority = facts.priority_of(priority_class)
    try:
        extra: dict[str, Any] = {}
        if gpu_node_selector is not None:
            extra["gpu_node_selector"] = gpu_node_selector
        objects = render(
            spec,
            RenderOptions(
                image=image or PLAN_IMAGE,
                run_id="plan",
                namespace=namespace,
                gpu_mode=gpu_mode,
                gpu_resource_name=gpu_resource_name,
                gpu_runtime_class=gpu_runtime_class,
                resources={n: dict(r) for n, r in (resources or {}).items()},
                dra_device_class=(dra or {}).get("dra_device_class", "gpu.nvidia.com"),
                dra_mig_device_class=(dra or {}).get("dra_mig_device_class", "mig.nvidia.com"),
                image_overrides=dict(image_overrides or {}) if image else {},
                **extra,
            ),
        )
        found = workloads_from_objects(objects, default_priority=facts.default_priority)
    except (InvalidInputError, InvalidFlowError):
        found = {}
    if not found:
        found = workloads_from_spec(spec, namespace=namespace)
    return {
        name: replace(
            w,
            priority=priority,
            priority_class=priority_class,
            images=w.images if image else (),
        )
        for name, w in found.items()
    }
