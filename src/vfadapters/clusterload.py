"""Read ``--cluster PATH``: the I/O side of :mod:`vfcore.cluster.kubeparse`.

PATH is either a directory holding ``nodes.json`` (``kubectl get nodes -o
json``), ``pods.json`` (``kubectl get pods -A -o json``) and optionally
``runtimeclasses.json`` (``kubectl get runtimeclasses -o json``), or one file
holding a ``List`` with both kinds (``kubectl get nodes,pods,runtimeclasses -A
-o json``). This module only reads bytes: a missing file is passed on as
``None`` and vfcore reports the matching facts as *unknown* with the reason
(``pods.json is missing``), never as an empty cluster.

Only a PATH that does not exist, a file that exists but cannot be read, or
one larger than 512 MiB (``input-too-large``; ``VF_MAX_INPUT_MIB`` raises the
limit) raises :class:`~vfcore.InvalidInputError`.
"""

from __future__ import annotations

import os
from pathlib import Path

from vfadapters.loading import MAX_CLUSTER_FILE_BYTES, read_bounded
from vfcore import InvalidInputError
from vfcore.cluster import ClusterSnapshot, snapshot_from_kubernetes, snapshot_from_list

__all__ = ["NODES_FILE", "PODS_FILE", "RUNTIME_CLASSES_FILE", "load_cluster"]

NODES_FILE = "nodes.json"
PODS_FILE = "pods.json"
RUNTIME_CLASSES_FILE = "runtimeclasses.json"

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
        )
    return snapshot_from_list(_read(where), source=where.name)
