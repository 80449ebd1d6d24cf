"""The NATS JetStream transport (docs/broker.md).

:mod:`~vfadapters.broker.worker` runs one replica of one node against the
broker (``vf worker``) with the local executor's node semantics;
:mod:`~vfadapters.broker.run` runs a whole flow that way on this machine
(``vf run --broker``); :mod:`~vfadapters.broker.client`, ``record``,
``payloads``, ``dead_letters``, ``monitor`` and ``server`` are its parts. The
topology a run creates is pure data in :func:`vfcore.runtime.broker_topology`.
"""

from vfadapters.broker.server import NatsServer, NatsServerError, find_nats_server

__all__ = ["NatsServer", "NatsServerError", "find_nats_server"]
