"""Fixtures of the control-plane suite (see tests/cluster/envtest.py); skipped without binaries."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.envtest import ControlPlane, skip_reason

pytest.importorskip("kubernetes")


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    plane = ControlPlane(tmp_path_factory.mktemp("envtest"))
    try:
        plane.start()
    except BaseException:
        plane.stop()
        raise
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def admin(control_plane: ControlPlane) -> Any:
    from vfadapters.kubernetes.client import connect

    return connect(kubeconfig=str(control_plane.admin_kubeconfig))


@pytest.fixture
def scheduler(control_plane: ControlPlane) -> ControlPlane:
    if not control_plane.has_scheduler:
        pytest.skip("kube-scheduler is not in KUBEBUILDER_ASSETS")
    return control_plane


@pytest.fixture
def gpu_nodes(admin: Any) -> Iterator[list[str]]:
    """Two Ready 4-GPU nodes with GPU Feature Discovery labels, and a CPU node; deleted after."""
    from tests.cluster.helpers import create, delete_quietly, node

    names = ["gpu-a", "gpu-b", "cpu-1"]
    for name, gpus in zip(names, (4, 4, 0), strict=True):
        create(admin, "/api/v1/nodes", node(name, gpus))
    try:
        yield names
    finally:
        for name in names:
            delete_quietly(admin, f"/api/v1/nodes/{name}")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path
