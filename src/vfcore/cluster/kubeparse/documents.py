"""Documents: a kubectl dump (parsed, text, bytes or missing) → its items of one kind, or why not.

A missing, empty, non-JSON, ``Status``, kubectl-error, wrong-kind or partial
document has no items and a reason; see :mod:`vfcore.cluster.kubeparse`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vfcore.cluster.kubeparse.fields import (
    Malformed,
    clip,
    describe,
    read_mapping,
    read_string,
    short,
)
from vfcore.cluster.nodes import RuntimeClassInfo, Unknown

__all__ = [
    "NODE_LIST",
    "POD_LIST",
    "RUNTIME_CLASS_LIST",
    "Kind",
    "items_of",
    "parse_document",
    "read_runtime_classes",
    "status_reason",
]

_KUBECTL_REFUSAL = re.compile(r"^Error from server \((?P<reason>[^)]*)\):\s*(?P<message>.*)$")


@dataclass(frozen=True, slots=True)
class Kind:
    """What one document should hold: ``Node`` items in a ``NodeList``, …"""

    item: str  # Node
    noun: str  # node
    command: str  # kubectl get nodes -o json

    @property
    def list_kind(self) -> str:
        return f"{self.item}List"


NODE_LIST = Kind("Node", "node", "kubectl get nodes -o json")
POD_LIST = Kind("Pod", "pod", "kubectl get pods -A -o json")
RUNTIME_CLASS_LIST = Kind("RuntimeClass", "runtime class", "kubectl get runtimeclasses -o json")


def _decode(raw: bytes) -> str:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):  # PowerShell's `>` writes UTF-16
        return raw.decode("utf-16")
    return raw.decode("utf-8-sig")


def parse_document(
    doc: object, source: str, noun: str
) -> tuple[Mapping[str, Any] | None, str | None]:
    """The document as an object, or the reason it cannot be one."""
    if doc is None:
        return None, f"{source} is missing"
    if isinstance(doc, (bytes, bytearray, memoryview)):
        try:
            doc = _decode(bytes(doc))
        except UnicodeDecodeError as exc:
            return None, f"{source} is not text: {exc.reason} at byte {exc.start}"
    if isinstance(doc, str):
        text = doc.lstrip("\ufeff").strip()
        if not text:
            return None, f"{source} is empty"
        first_line = text.splitlines()[0].strip()
        refusal = _KUBECTL_REFUSAL.match(first_line)
        if refusal:
            return None, (
                f"the API refused the {noun} listing: {refusal['reason']}: {refusal['message']}"
            )
        if first_line.startswith("error:"):
            return None, f"{source} holds a kubectl error, not JSON: {clip(first_line, 300)}"
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, f"{source} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        except (ValueError, RecursionError) as exc:
            return None, f"{source} is not JSON: {exc}"
    if not isinstance(doc, Mapping):
        return None, f"{source} is not a Kubernetes object: it holds {describe(doc)}"
    return doc, None


def status_reason(doc: Mapping[str, Any], noun: str) -> str:
    reason = doc.get("reason") or doc.get("code") or doc.get("status") or "Failure"
    message = doc.get("message")
    detail = f"{reason}: {message}" if message else str(reason)
    return f"the API refused the {noun} listing: {detail}"


def items_of(
    doc: object, source: str, kind: Kind
) -> tuple[list[tuple[str, Any]] | None, str | None, list[Unknown]]:
    """The items of ``kind`` in one document: ``(items, None, unknowns)`` or ``(None, reason, [])``.

    The items include every one that may be of ``kind`` (see :func:`_kind_of_item`):
    the readers report what cannot be read, and the assembly decides what it
    makes unknown (a pod that may be bound anywhere makes every node unknown).
    """
    parsed, reason = parse_document(doc, source, kind.noun)
    if parsed is None:
        return None, reason, []
    doc_kind = parsed.get("kind")
    if doc_kind == "Status":
        return None, status_reason(parsed, kind.noun), []
    if doc_kind not in (kind.list_kind, "List", None):
        hint = f"dump it with `{kind.command}`"
        shown = doc_kind if isinstance(doc_kind, str) else short(doc_kind)
        what = f"one {shown}" if doc_kind == kind.item else f"a {shown}"
        return None, f"{source} holds {what}, not a {kind.list_kind} ({hint})", []
    raw_items = parsed.get("items")
    if not isinstance(raw_items, list):
        return None, f"{source} has no items list (dump it with `{kind.command}`)", []
    meta = parsed.get("metadata")
    if isinstance(meta, Mapping) and (meta.get("continue") or meta.get("remainingItemCount")):
        return (
            None,
            (
                f"{source} is one page of a longer list (metadata.continue is set); "
                f"dump every page with `{kind.command}`"
            ),
            [],
        )
    found: list[tuple[str, Any]] = []
    unknowns: list[Unknown] = []
    foreign: list[str] = []
    for i, item in enumerate(raw_items):
        where = f"{source} items[{i}]"
        item_kind = _kind_of_item(item, doc_kind, kind)
        if item_kind is None or item_kind == kind.item:
            # Ours, or of no kind that can be told (not an object, no readable kind, no
            # telling shape): it may be ours, so the reader sees it and reports it.
            found.append((where, item))
            if item_kind is None and isinstance(item, Mapping):
                unknowns.append(Unknown(where, "has no kind and is not recognisable"))
        else:
            foreign.append(item_kind)
    if doc_kind == "List" and foreign and not found:
        kinds = ", ".join(sorted(set(foreign)))
        return None, f"{source} holds a List of {kinds} with no {kind.item} items", []
    return found, None, unknowns


def _kind_of_item(item: object, doc_kind: object, kind: Kind) -> str | None:
    """An item's kind: its own ``kind``, else the list's, else its shape's; ``None``: unknown.

    In a ``<Kind>List`` every item is of that kind, whatever its ``kind`` field
    says when that is not a string; in a ``List`` an item that is not an
    object, or has no string ``kind`` and no telling shape, may be of any kind.
    """
    declared = item.get("kind") if isinstance(item, Mapping) else None
    if isinstance(declared, str) and declared:
        return declared
    if doc_kind == kind.list_kind:
        return kind.item
    return _guess_kind(item) if isinstance(item, Mapping) else None


def _guess_kind(item: Mapping[str, Any]) -> str | None:
    """The kind of a kind-less item in a ``List``, from its shape."""
    spec = item.get("spec")
    status = item.get("status")
    if isinstance(spec, Mapping) and "containers" in spec:
        return "Pod"
    if isinstance(status, Mapping) and ("allocatable" in status or "nodeInfo" in status):
        return "Node"
    if "handler" in item:
        return "RuntimeClass"
    return None


def read_runtime_classes(
    items: Iterable[tuple[str, Any]],
) -> tuple[tuple[RuntimeClassInfo, ...], list[Unknown]]:
    found: dict[str, RuntimeClassInfo] = {}
    unknowns: list[Unknown] = []
    for where, item in items:
        what = where
        if not isinstance(item, Mapping):
            unknowns.append(Unknown(where, f"is {describe(item)}, not a Kubernetes object"))
            continue
        try:
            meta = read_mapping(item.get("metadata"), "metadata", required=True)
            name = read_string(meta.get("name"), "metadata.name", required=True)
            what = f"runtimeclass/{name}"
            handler = read_string(item.get("handler"), "handler", required=True)
        except Malformed as bad:
            unknowns.append(Unknown(what, bad.reason))
            continue
        assert name is not None and handler is not None
        found[name] = RuntimeClassInfo(name, handler)
    return tuple(found[n] for n in sorted(found)), unknowns
