"""Sending a flow's node objects to the replica processes that run them.

A replica process rebuilds its node from :func:`node_blob` (the object pickled
without its graph links, so a node's models, files and clients are made in
``open()``, in the process that uses them) after importing the flow files that
:func:`preload_files` names (a node class defined in a flow file lives there).
"""

from __future__ import annotations

import copy
import pickle
import sys
from collections.abc import Iterable
from typing import Any

from vfcore import InvalidInputError

__all__ = ["node_blob", "preload_files"]


def node_blob(node: Any) -> bytes:
    clone = copy.copy(node)
    clone._parents = ()
    clone._children = []
    try:
        return pickle.dumps(clone, protocol=5)
    except Exception as exc:
        raise InvalidInputError(
            "node-not-picklable",
            f"node {node.name!r} ({type(node).__qualname__}) cannot be sent to its worker "
            f"process: {type(exc).__name__}: {exc}",
            "create models, files, locks and clients in open(), not in __init__; "
            "define node classes in a module or flow file, not interactively",
        ) from None


def preload_files(nodes: Iterable[Any]) -> tuple[str, ...]:
    files: list[str] = []
    for node in nodes:
        module = type(node).__module__
        if module.startswith("_vf_flow_"):
            path = getattr(sys.modules.get(module), "__file__", None)
            if path and path not in files:
                files.append(path)
    return tuple(files)
