"""A real Kubernetes control plane for tests, envtest-style: etcd, kube-apiserver, kube-scheduler.

The binaries come from the directory named by ``KUBEBUILDER_ASSETS``
(controller-runtime's envtest convention: ``setup-envtest use -p path`` prints
one; ``kube-scheduler`` is not in envtest's archive: put the release binary of
the same version beside the others). Without ``etcd`` and ``kube-apiserver``
there the suite is skipped; without ``kube-scheduler`` only the tests that need
scheduling are.

What a control plane without kubelets and without kube-controller-manager does
(and what the tests rely on):

- created Nodes keep the ``status`` sent with them (allocatable incl.
  ``nvidia.com/gpu``, the ``Ready`` condition); the ``TaintNodesByCondition``
  admission plugin would taint them ``node.kubernetes.io/not-ready``, so it is
  disabled;
- there are no controllers: no ReplicaSets, no Job pods, no ``default``
  ServiceAccount (so the ``ServiceAccount`` admission plugin is disabled, as
  envtest does) and no garbage collector;
- kube-scheduler binds pods it can place and marks the others
  ``PodScheduled=False``, reason ``Unschedulable``, with its message
  (``0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: …``).

Authentication is a static token file: ``admin`` (group ``system:masters``)
and ``limited`` (no group, so RBAC grants it nothing until a test binds a
role). The API server's certificate is the self-signed one it generates, so
the kubeconfigs skip TLS verification (tests only).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ADMIN_TOKEN = "vf-envtest-admin"
LIMITED_TOKEN = "vf-envtest-limited"


def assets() -> Path | None:
    raw = os.environ.get("KUBEBUILDER_ASSETS")
    return Path(raw) if raw else None


def missing_binaries(*names: str) -> list[str]:
    where = assets()
    if where is None:
        return list(names)
    return [n for n in names if not os.access(where / n, os.X_OK)]


def skip_reason() -> str | None:
    """Why the control-plane suite cannot run here, or None when it can."""
    if assets() is None:
        return "KUBEBUILDER_ASSETS is unset (no etcd/kube-apiserver binaries)"
    missing = missing_binaries("etcd", "kube-apiserver")
    if missing:
        return f"{', '.join(missing)} missing from KUBEBUILDER_ASSETS={assets()}"
    if shutil.which("openssl") is None:
        return "openssl is needed to make the service-account key"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _unverified() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _get(url: str, token: str | None = None, timeout: float = 2.0) -> int:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=_unverified()) as answer:
            status: int = answer.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return 0


@dataclass
class ControlPlane:
    """A running control plane: its URL, kubeconfigs, and the processes to stop."""

    root: Path
    url: str = ""
    admin_kubeconfig: Path = Path()
    limited_kubeconfig: Path = Path()
    has_scheduler: bool = False
    processes: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    def _start(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        where = assets()
        assert where is not None
        log = (self.root / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [str(where / name), *args], stdout=log, stderr=subprocess.STDOUT, cwd=self.root
        )
        self.processes.append((name, proc))
        return proc

    def _wait(self, name: str, url: str, token: str | None, limit_s: float = 60.0) -> None:
        deadline = time.monotonic() + limit_s
        proc = self.processes[-1][1]
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited {proc.returncode}:\n{self.log_tail(name)}")
            if _get(url, token) == 200:
                return
            time.sleep(0.25)
        raise RuntimeError(f"{name} not ready after {limit_s:g} s:\n{self.log_tail(name)}")

    @contextmanager
    def controller_manager(self, controllers: str) -> Iterator[ControlPlane]:
        """kube-controller-manager beside this control plane, running ``controllers`` (a
        ``--controllers`` list) while the block runs; skips the test when it is missing."""
        if missing_binaries("kube-controller-manager"):
            pytest.skip("kube-controller-manager is not in KUBEBUILDER_ASSETS")
        kubeconfig = str(self.admin_kubeconfig)
        process = self._start(
            "kube-controller-manager",
            [
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--controllers={controllers}",
                "--use-service-account-credentials=false",
            ],
        )
        try:
            yield self
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.root / f"{name}.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def kubeconfig(self, path: Path, token: str) -> Path:
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "envtest",
                    "cluster": {"server": self.url, "insecure-skip-tls-verify": True},
                }
            ],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "u"}}],
            "current-context": "envtest",
        }
        path.write_text(json.dumps(doc), encoding="utf-8")
        return path

    def start(self) -> ControlPlane:
        root = self.root
        # etcd
        etcd_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._start(
            "etcd",
            [
                f"--data-dir={root / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",
            ],
        )
        self._wait("etcd", f"{etcd_url}/health", None)
        # service-account key pair and static tokens
        key, pub = root / "sa.key", root / "sa.pub"
        subprocess.run(
            ["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True
        )
        subprocess.run(
            ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
            check=True,
            capture_output=True,
        )
        tokens = root / "tokens.csv"
        tokens.write_text(
            f'{ADMIN_TOKEN},admin,1,"system:masters"\n{LIMITED_TOKEN},limited,2\n', encoding="utf-8"
        )
        # kube-apiserver
        api_port = free_port()
        self.url = f"https://127.0.0.1:{api_port}"
        (root / "certs").mkdir(exist_ok=True)
        self._start(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                f"--cert-dir={root / 'certs'}",
                "--bind-address=127.0.0.1",
                f"--secure-port={api_port}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--service-account-issuer=https://localhost",
                f"--service-account-key-file={pub}",
                f"--service-account-signing-key-file={key}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                "--allow-privileged=true",
            ],
        )
        self._wait("kube-apiserver", f"{self.url}/readyz", ADMIN_TOKEN, limit_s=90.0)
        self.admin_kubeconfig = self.kubeconfig(root / "admin.kubeconfig", ADMIN_TOKEN)
        self.limited_kubeconfig = self.kubeconfig(root / "limited.kubeconfig", LIMITED_TOKEN)
        # kube-scheduler, when its binary is there
        if not missing_binaries("kube-scheduler"):
            sched_port = free_port()
            self._start(
                "kube-scheduler",
                [
                    f"--kubeconfig={self.admin_kubeconfig}",
                    f"--authentication-kubeconfig={self.admin_kubeconfig}",
                    f"--authorization-kubeconfig={self.admin_kubeconfig}",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={sched_port}",
                ],
            )
            self._wait("kube-scheduler", f"https://127.0.0.1:{sched_port}/healthz", None)
            self.has_scheduler = True
        return self

    def stop(self) -> None:
        for _name, proc in reversed(self.processes):
            if proc.poll() is None:
                proc.terminate()
        for _name, proc in reversed(self.processes):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.processes.clear()
