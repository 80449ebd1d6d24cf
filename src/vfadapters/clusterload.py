"""Read ``--cluster PATH``: the I/O side of :mod:`vfcore.cluster.kubeparse`.

PATH is either a directory holding ``nodes.json`` (``kubectl get nodes -o
json``), ``pods.json`` (``kubectl get pods -A -o json``) and optionally
``runtimeclasses.json`` (``kubectl get runtimeclasses -o json``) and the DRA
dumps ``resourceslices.json``, ``deviceclasses.json`` and ``resourceclaims.json``
(``kubectl get resourceslices -o json``, ``… deviceclasses …``, ``… resourceclaims
-A …``), or one file holding a ``List`` with those kinds (``kubectl get
nodes,pods,runtimeclasses,resourceslices,deviceclasses,resourceclaims -A -o
json``). This module only reads bytes: a missing file is passed on as
``None`` and vfcore reports the matching facts as *unknown* with the reason
(``pods.json is missing``), never as an empty cluster.

Only a PATH that does not exist, a file that exists but cannot be read, or
one larger than 512 MiB (``input-too-large``; ``VF_MAX_INPUT_MIB`` raises the
limit) raises :class:`~vfcore.InvalidInputError`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from vfadapters.loading import MAX_CLUSTER_FILE_BYTES, read_bounded
from vfcore import InvalidInputError
from vfcore.cluster import ClusterSnapshot, snapshot_from_kubernetes, snapshot_from_list

if TYPE_CHECKING:
    from vfcore.placement import SchedulingFacts

__all__ = [
    "DEVICE_CLASSES_FILE",
    "NODES_FILE",
    "PDBS_FILE",
    "PODS_FILE",
    "PRIORITY_CLASSES_FILE",
    "RESOURCE_CLAIMS_FILE",
    "RESOURCE_SLICES_FILE",
    "RUNTIME_CLASSES_FILE",
    "load_cluster",
    "load_scheduling_facts",
]

NODES_FILE = "nodes.json"
PODS_FILE = "pods.json"
RUNTIME_CLASSES_FILE = "runtimeclasses.json"
#: The DRA dumps (``--gpu-mode dra``): a missing one leaves those facts unknown.
RESOURCE_SLICES_FILE = "resourceslices.json"
DEVICE_CLASSES_FILE = "deviceclasses.json"
RESOURCE_CLAIMS_FILE = "resourceclaims.json"

_DUMP_HINT = (
    "dump the cluster with `kubectl get nodes -o json > DIR/nodes.json` and "
    "`kubectl get pods -A -o json > DIR/pods.json`, then pass --cluster DIR "
    "(see docs/cluster-snapshots.md)"
)


def _read(path: Path) -> bytes | None:
    """The file's bytes (at most 512 MiB, see :func:`read_bounded`); ``None`` when it does not exist."""
    try:
        return read_bounded(path, MAX_CLUSTER_FILE_BYTES, what="one cluster file")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidInputError(
            "cluster-file-unreadable",
            f"{path} exists but cannot be read: {exc.strerror or exc}",
            "check the file's permissions, or dump it again with kubectl",
        ) from None


def load_cluster(path: str | os.PathLike[str]) -> ClusterSnapshot:
    """The :class:`~vfcore.ClusterSnapshot` that ``--cluster PATH`` names.

    >>> load_cluster("examples/clusters/fragmented").node("frag-4").free_of("nvidia.com/gpu")
    1
    """
    where = Path(path)
    if not where.exists():
        raise InvalidInputError(
            "cluster-path-not-found",
            f"--cluster {os.fspath(path)} does not exist",
            _DUMP_HINT,
        )
    if where.is_dir():
        return snapshot_from_kubernetes(
            _read(where / NODES_FILE),
            _read(where / PODS_FILE),
            _read(where / RUNTIME_CLASSES_FILE),
            resourceslices_json=_read(where / RESOURCE_SLICES_FILE),
            deviceclasses_json=_read(where / DEVICE_CLASSES_FILE),
            resourceclaims_json=_read(where / RESOURCE_CLAIMS_FILE),
        )
    return snapshot_from_list(_read(where), source=where.name)


#: The optional dumps the kube-scheduler model reads beside nodes and pods (docs/scheduler-model.md).
PDBS_FILE = "pdbs.json"
PRIORITY_CLASSES_FILE = "priorityclasses.json"


def load_scheduling_facts(path: str | os.PathLike[str]) -> SchedulingFacts:
    """The kube-scheduler model's :class:`~vfcore.placement.scheduler.SchedulingFacts` of ``--cluster PATH``.

    From a directory: ``nodes.json`` (images), ``pods.json`` (bound pods),
    and when present ``pdbs.json`` (``kubectl get pdb -A -o json``) and
    ``priorityclasses.json`` (``kubectl get priorityclasses -o json``); a
    missing one leaves those facts unknown. From one ``List`` file: its items
    of each kind (no PodDisruptionBudget or PriorityClass item: unknown).
    """
    from vfcore.placement import scheduling_facts

    where = Path(path)
    if where.is_dir():
        return scheduling_facts(
            _read(where / NODES_FILE),
            _read(where / PODS_FILE),
            pdbs_json=_read(where / PDBS_FILE),
            priority_classes_json=_read(where / PRIORITY_CLASSES_FILE),
        )
    doc = _read(where)
    kinds = _item_kinds(doc)
    return scheduling_facts(
        doc,
        doc,
        pdbs_json=doc if "PodDisruptionBudget" in kinds else None,
        priority_classes_json=doc if "PriorityClass" in kinds else None,
    )


def _item_kinds(doc: bytes | None) -> set[str]:
    try:
        parsed = json.loads(doc or b"{}")
    except (ValueError, UnicodeDecodeError):
        return set()
    items = parsed.get("items") if isinstance(parsed, dict) else None
    return {str(i["kind"]) for i in items or [] if isinstance(i, dict) and i.get("kind")}
