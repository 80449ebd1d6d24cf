"""A real three-server JetStream cluster on loopback, configured as `vf deploy` configures one.

Each server's ``nats.conf`` is written by :func:`vfcore.runtime.run_security.server_config`
with a :class:`~vfcore.runtime.run_security.BrokerCluster` whose routes are loopback
ports instead of the StatefulSet's DNS names: the same ``server_name: $POD_NAME``
(each process gets its own ``POD_NAME``, as each pod does), the same route
authorization, each server its own store. No client authorization (the tests that
use it exercise the cluster, not the run's users: ``test_broker_auth.py`` does those).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from vfadapters.broker.server import free_port
from vfcore.runtime.run_security import BrokerCluster, cluster_block


class ClusterMember:
    """One server of the cluster: ``start()`` (again after ``kill()``: same ports, same store)."""

    def __init__(self, binary: Path, folder: Path, name: str, config: str) -> None:
        self.binary = binary
        self.folder = folder
        self.name = name
        self.port = free_port()
        self.monitor_port = free_port()
        self.config = config
        self.route_port = 0  # its route listener (set by NatsCluster)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def http(self, path: str) -> Any:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.monitor_port}{path}", timeout=2
        ) as resp:
            return json.loads(resp.read() or b"{}")

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "nats.conf"
        config.write_text(
            f"host: 127.0.0.1\nport: {self.port}\nhttp: 127.0.0.1:{self.monitor_port}\n"
            + self.config
        )
        config.chmod(0o600)
        with (self.folder / "nats-server.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [str(self.binary), "-c", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "POD_NAME": self.name},
            )

    def log(self) -> str:
        try:
            return (self.folder / "nats-server.log").read_text(errors="replace")[-3000:]
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


class NatsCluster:
    """``size`` clustered JetStream servers; ``with NatsCluster(...) as c:`` starts and stops them."""

    def __init__(self, binary: Path, folder: Path, *, size: int = 3, password: str) -> None:
        route_ports = [free_port() for _ in range(size)]
        routes = tuple(f"127.0.0.1:{p}" for p in route_ports)
        self.password = password
        self.members = []
        for i, port in enumerate(route_ports):
            cluster = BrokerCluster("vf-test", routes, port=port, host="127.0.0.1")
            store = folder / f"nats-{i}"
            config = f'jetstream {{\n  store_dir: "{store / "js"}"\n}}\n'
            config += cluster_block(cluster, password)
            member = ClusterMember(binary, store, f"nats-{i}", config)
            member.route_port = port
            self.members.append(member)

    @property
    def url(self) -> str:
        """Every server's URL, comma-separated (what ``--broker`` takes for a cluster)."""
        return ",".join(m.url for m in self.members)

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Until every running member answers /healthz (JetStream current: a meta leader)."""
        deadline = time.monotonic() + timeout_s
        for member in self.members:
            if member.proc is None:
                continue
            while True:
                try:
                    if member.http("/healthz").get("status") == "ok":
                        break
                except OSError:
                    pass
                if member.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{member.name} not ready:\n{member.log()}")
                time.sleep(0.1)

    def stream_leaders(self) -> dict[str, str]:
        """Stream name -> the name of the server leading it (as the running members see it)."""
        out: dict[str, str] = {}
        for member in self.members:
            if member.proc is None:
                continue
            try:
                doc = member.http("/jsz?accounts=true&streams=true")
            except OSError:
                continue
            for account in doc.get("account_details") or []:
                for stream in account.get("stream_detail") or []:
                    leader = (stream.get("cluster") or {}).get("leader")
                    if leader:
                        out[stream["name"]] = leader
        return out

    def member(self, name: str) -> ClusterMember:
        return next(m for m in self.members if m.name == name)

    def __enter__(self) -> NatsCluster:
        for member in self.members:
            member.start()
        try:
            self.wait_ready()
        except Exception:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for member in self.members:
            member.stop()
