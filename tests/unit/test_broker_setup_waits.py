"""What `vf broker-setup --wait` waits out, and what it says when it stops waiting.

The answers are JetStream's own (err_code and description as nats-server writes
them); the cluster scenarios that produce them run in tests/integration/test_broker_ha.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from vfadapters.broker import client
from vfadapters.broker.client import NO_PEERS_FOR_PLACEMENT, BrokerError, _create
from vfadapters.cli.broker_setup_command import _unavailable


def _refusal(code: int, description: str) -> BrokerError:
    async def answer(nc: Any, subject: str, payload: Any = None, **kw: Any) -> dict[str, Any]:
        return {"error": {"code": 500, "err_code": code, "description": description}}

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(client, "api_request", answer)
        with pytest.raises(BrokerError) as caught:
            asyncio.run(_create(None, "stream", "$JS.API.STREAM.CREATE.S", {"name": "S"}))
    return caught.value


def test_too_few_servers_online_is_waited_out_and_said_as_such() -> None:
    exc = _refusal(NO_PEERS_FOR_PLACEMENT, "no suitable peers for placement, peer offline")
    assert exc.rule == "broker-refused"
    assert "no suitable peers for placement" in exc.message
    assert "fewer servers of the cluster are online than --stream-replicas" in exc.hint
    assert _unavailable(exc)


def test_a_leader_election_is_waited_out() -> None:
    assert _unavailable(_refusal(10008, "JetStream system temporarily unavailable"))
    assert _unavailable(TimeoutError())


@pytest.mark.parametrize(
    ("code", "description"),
    [
        (10058, "stream name already in use with a different configuration"),
        (10065, "subjects overlap with an existing stream"),
        (10023, "insufficient resources"),
    ],
)
def test_a_refusal_that_waiting_does_not_change_is_not_waited_for(
    code: int, description: str
) -> None:
    exc = _refusal(code, description)
    assert not _unavailable(exc)
    assert "a run id is reused with other settings" in exc.hint
