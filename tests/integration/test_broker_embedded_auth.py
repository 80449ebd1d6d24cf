"""``vf run --broker embedded``'s own server refuses a stranger during a real run (issue 24).

A BATCH run with a slow producer runs as a real ``vf run`` process. While it
runs, the test finds the ``nats-server`` it started (the process whose store is
under the run's ``TMPDIR``: ``vf-nats-<pid>-…``), reads its ports from its
command line, and attacks it with plain nats-py, as another local user would:
no credentials, a seed the server does not list, a guessed user and password, a
token — each connection is refused, so nothing can be published or read. The
server's monitoring endpoint says authentication is required, its configuration
file is the owner's only (0600) and holds public keys, no seed. The run then
completes with every item exactly once, and prints no seed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.integration.cli_helpers import REPO
from tests.support.flows import read_lines, write_flow
from vfadapters.broker.credentials import generate_seed

SEED = re.compile(r"SU[A-Z2-7]{56}")
ITEMS = 60


def _server_of(store_root: Path, limit_s: float = 60.0) -> tuple[int, int, Path]:
    """(client port, monitoring port, store directory) of the nats-server whose store is
    under ``store_root``, from its command line in /proc."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue  # gone, or not ours
            if "-sd" not in args:
                continue
            store = Path(args[args.index("-sd") + 1]).parent
            if store.parent == store_root and store.name.startswith("vf-nats-"):
                return int(args[args.index("-p") + 1]), int(args[args.index("-m") + 1]), store
        time.sleep(0.05)
    raise AssertionError(f"no nats-server with a store under {store_root} within {limit_s:g} s")


async def _refused(url: str, options: dict[str, Any]) -> str:
    """Connect as a stranger; return what refused it (the test fails if it connects)."""
    try:
        nc = await nats.connect(
            url, allow_reconnect=False, connect_timeout=3, max_reconnect_attempts=0, **options
        )
    except Exception as exc:  # nats-py raises its own errors, or NoServersError around them
        return f"{type(exc).__name__}: {exc}"
    await nc.close()
    raise AssertionError(f"a client with {sorted(options)} connected to the run's server")


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_the_embedded_server_refuses_a_stranger_while_the_run_completes(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        src = Numbers({ITEMS}, name="src", sleep=0.05)
        work = Tag("w", name="work", nb_tasks=2)(src)
        sink = Record({str(out)!r}, name="sink")(work)
        flow = Flow([sink], flow_type=BATCH)
        """,
    )
    store_root = tmp_path / "tmp"
    store_root.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "VF_DEBUG"}
    env["TMPDIR"] = str(store_root)  # where the run's server keeps its store
    proc = subprocess.Popen(
        [sys.executable, "-m", "vfadapters.cli", "run", str(flow), "--broker", "embedded",
         "--json", "--no-progress"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        port, monitor, store = _server_of(store_root)
        url = f"nats://127.0.0.1:{port}"
        attempts = [
            {},
            {"nkeys_seed_str": generate_seed()},
            {"user": "admin", "password": "admin"},
            {"token": "s3cret"},
        ]
        said = [asyncio.run(_refused(url, options)) for options in attempts]
        assert proc.poll() is None, "the run ended before the stranger knocked"
        for reason in said:
            assert "authorization violation" in reason.lower(), reason
        with urllib.request.urlopen(f"http://127.0.0.1:{monitor}/varz", timeout=5) as answer:
            varz = json.load(answer)
        assert varz["auth_required"] is True
        config = store / "nats.conf"
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        text = config.read_text()
        assert "authorization" in text and re.search(r'nkey: "U[A-Z2-7]{55}"', text)
        assert not SEED.search(text)  # public keys only
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    doc = json.loads(stdout)
    assert doc["status"] == "completed" and doc["books"]["balanced"] is True
    assert sorted(item["x"] for item in read_lines(out)) == list(range(ITEMS))  # each once
    assert not SEED.search(stdout + stderr)
    assert not store.exists()  # the server's store, its configuration with it, is gone
