"""The NATS JetStream transport (docs/broker.md).

:mod:`~vfadapters.broker.worker` runs one replica of one node against the
broker (``vf worker``) with the local executor's node semantics;
:mod:`~vfadapters.broker.run` runs a whole flow that way on this machine
(``vf run --broker``); :mod:`~vfadapters.broker.client`, ``record``,
``payloads``, ``dead_letters``, ``monitor`` and ``server`` are its parts. The
topology a run creates is pure data in :func:`vfcore.runtime.broker_topology`.
"""

import sys


def _import_nats_without_websockets() -> None:
    """Import nats-py with aiohttp hidden from it.

    nats-py imports aiohttp, when it is installed (the kubernetes client brings
    it), for WebSocket URLs alone: 0.2 s at the start of every ``vf`` process
    and fork server that talks to a broker. Ours are ``nats://`` or ``tls://``
    (``check_broker_url``), so nats-py goes without; aiohttp itself stays
    importable for everyone else afterwards.
    """
    if "nats" in sys.modules or "aiohttp" in sys.modules:
        return
    sys.modules["aiohttp"] = None  # type: ignore[assignment]  # "import aiohttp" fails
    try:
        import nats.aio.transport  # noqa: F401
    except ImportError:
        pass  # nats-py is not installed: where it is needed, the broker extra is named
    finally:
        if "aiohttp" in sys.modules and sys.modules["aiohttp"] is None:
            del sys.modules["aiohttp"]


_import_nats_without_websockets()

from vfadapters.broker.server import NatsServer, NatsServerError, find_nats_server  # noqa: E402

__all__ = ["NatsServer", "NatsServerError", "find_nats_server"]
