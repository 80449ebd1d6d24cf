"""Physical names: Kubernetes object names and broker subject tokens for nodes.

A node name is free text; a Kubernetes object name must be a DNS-1123 label
(lowercase letters, digits and ``-``, starting and ending with an
alphanumeric, at most 63 characters) and a NATS subject token may not contain
``.``, ``*``, ``>`` or whitespace. Squeezing names into those alphabets merges
names (``a.b`` and ``a_b`` both become ``a-b``) and truncation merges long
names that differ only at the end. So every physical name ends in a short hash
of the *exact* flow, run and node names::

    physical_name("detector.v2", flow="traffic").k8s  == "traffic-detector-v2-<12 chars>"

The readable part helps people; the hash keeps distinct names distinct
(60 bits of SHA-256: a collision among 10,000 nodes has odds below 1e-10).
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vfcore.flow.spec import to_spec

if TYPE_CHECKING:
    from vfcore.flow.authoring import Flow
    from vfcore.flow.spec import FlowSpec

__all__ = ["K8S_NAME_MAX", "PhysicalName", "physical_name", "physical_names"]

K8S_NAME_MAX = 63
_HASH_CHARS = 12
_NON_DNS = re.compile(r"[^a-z0-9]+")
_NON_TOKEN = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True)
class PhysicalName:
    """``k8s``: a DNS-1123 label for the node's objects; ``subject``: its broker subject."""

    node: str
    k8s: str
    subject: str

    def to_dict(self) -> dict[str, str]:
        return {"node": self.node, "k8s": self.k8s, "subject": self.subject}


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return base64.b32encode(h.digest()).decode("ascii").lower()[:_HASH_CHARS]


def physical_name(node: str, *, flow: str, run: str | None = None) -> PhysicalName:
    """The physical names of one node of a flow (and, optionally, of one run).

    >>> physical_name("Detector.V2", flow="traffic").k8s.startswith("traffic-detector-v2-")
    True
    """
    digest = _digest(flow, run or "", node)
    readable = "-".join(p for p in (flow, run or "", node) if p)
    label = _NON_DNS.sub("-", readable.lower()).strip("-")
    room = K8S_NAME_MAX - _HASH_CHARS - 1
    label = label[:room].rstrip("-")
    k8s = f"{label}-{digest}" if label else f"n-{digest}"
    token = _NON_TOKEN.sub("_", node).strip("_")[:48] or "n"
    scope = ".".join(_NON_TOKEN.sub("_", p).strip("_") or "x" for p in (flow, run) if p is not None)
    subject = f"vf.{scope}.{token}-{digest}"
    return PhysicalName(node=node, k8s=k8s, subject=subject)


def physical_names(
    flow_or_spec: Flow | FlowSpec, *, run: str | None = None
) -> dict[str, PhysicalName]:
    """Physical names of every node of a flow, keyed by node name."""
    spec = to_spec(flow_or_spec)
    return {n.name: physical_name(n.name, flow=spec.name, run=run) for n in spec.nodes}
