"""What a node method receives as ``ctx``: the item's trace id, time, metadata, and the replica."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from vfadapters.runtime.columns import Columns

__all__ = ["Context"]

_EMPTY: Mapping[str, Any] = {}


class Context:
    """What a node method receives as ``ctx`` (when it declares that parameter).

    ``trace_id`` and ``event_ts_ms`` describe the message being handled;
    ``metadata`` holds the fields set upstream; ``set_partition_key(field,
    value)`` sets a field on what this call emits. ``node``, ``replica``,
    ``replicas``, ``device`` ("cuda", "cpu", or None for CPU nodes) and
    ``logger`` describe the worker. ``redelivered``: the item comes from an
    input handed out before (its first claimant died or stalled past the ack
    wait), so this replica may be handling it a second time: a node with side
    effects of its own (a sink writing a file) can make them idempotent with it.
    """

    __slots__ = (
        "_cols",
        "_i",
        "_keys",
        "_meta",
        "_tid",
        "_ts",
        "device",
        "devices",
        "logger",
        "node",
        "redelivered",
        "replica",
        "replicas",
    )

    def __init__(
        self,
        node: str,
        replica: int,
        replicas: int,
        device: str | None,
        devices: tuple[int, ...],
        logger: logging.Logger,
    ) -> None:
        self.node = node
        self.replica = replica
        self.replicas = replicas
        self.device = device
        self.devices = devices
        self.logger = logger
        # the message being handled: given (_begin), or item _i of a batch's columns
        self._cols: Columns | None = None
        self._i = 0
        self._tid: Any = None
        self._ts: Any = None
        self._meta: Mapping[str, Any] = _EMPTY
        self._keys: dict[str, Any] | None = None
        self.redelivered = False

    @property
    def trace_id(self) -> Any:
        cols = self._cols
        return self._tid if cols is None else cols.trace_id(self._i)

    @property
    def event_ts_ms(self) -> Any:
        cols = self._cols
        return self._ts if cols is None else cols.event_ts(self._i)

    @event_ts_ms.setter
    def event_ts_ms(self, value: Any) -> None:
        self._fix()
        self._ts = value

    @property
    def metadata(self) -> Mapping[str, Any]:
        cols = self._cols
        if cols is None:
            return self._meta
        return cols.meta(self._i) or _EMPTY

    def _fix(self) -> None:
        """Copy the current item's fields out of the batch's columns."""
        cols = self._cols
        if cols is not None:
            i = self._i
            self._tid, self._ts = cols.trace_id(i), cols.event_ts(i)
            self._meta = cols.meta(i) or _EMPTY
            self._cols = None

    def _over(self, cols: Columns) -> None:
        """Describe the items of ``cols`` (then ``_i`` names the one being handled)."""
        self._cols = cols
        self._keys = None

    def set_partition_key(self, field: str, value: Any) -> None:
        """Set metadata ``field`` on this call's output (children partition by it)."""
        from vfcore.routing import encode_key

        if not isinstance(field, str) or not field:
            raise ValueError(f"set_partition_key needs a field name, got {field!r}")
        encode_key(value)  # an invalid key raises InvalidKeyError here, in the caller
        if self._keys is None:
            self._keys = {}
        self._keys[field] = value

    def _begin(self, trace_id: str, ts: float | None, metadata: Mapping[str, Any] | None) -> None:
        self._cols = None
        self._tid = trace_id
        self._ts = ts
        self._meta = metadata or _EMPTY
        self._keys = None

    def _out_metadata(self) -> dict[str, Any] | None:
        keys = self._keys
        if keys is None:
            return self.metadata or None  # type: ignore[return-value]
        merged = dict(self.metadata)
        merged.update(keys)
        return merged

    def __repr__(self) -> str:
        return f"Context(node={self.node!r}, replica={self.replica}, trace_id={self.trace_id!r})"
