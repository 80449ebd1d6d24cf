"""``--cluster PATH`` read from real files: directories, single files, missing pieces."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from vfadapters.clusterload import load_cluster
from vfcore import InvalidInputError
from vfcore.cluster import Unknown

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"
GPU = "nvidia.com/gpu"


def test_a_directory_with_nodes_pods_and_runtime_classes() -> None:
    snap = load_cluster(str(EXAMPLES / "gpu-pool"))
    assert snap.is_fully_known and snap.unknowns == ()
    assert len(snap.nodes) == 6
    assert snap.node("gpu-a100-1").free_of(GPU) == 3
    assert snap.runtime_classes is not None and [r.name for r in snap.runtime_classes] == ["nvidia"]


def test_a_path_object_works_too() -> None:
    snap = load_cluster(EXAMPLES / "fragmented")
    assert [n.free_of(GPU) for n in snap.nodes] == [3, 3, 2, 1]
    assert snap.runtime_classes is None  # no runtimeclasses.json: unknown, not "none exist"


def test_a_single_file_list() -> None:
    snap = load_cluster(str(EXAMPLES / "single-file.json"))
    assert snap.is_fully_known
    assert [n.name for n in snap.nodes] == ["gpu-1", "worker-1"]


def test_refused_pods_are_unknown_with_the_apis_message() -> None:
    snap = load_cluster(str(EXAMPLES / "refused-pods"))
    assert all(n.requested is None for n in snap.nodes)
    [why] = snap.unknowns
    assert why.what == "pods" and why.reason.startswith(
        "the API refused the pod listing: Forbidden: pods is forbidden"
    )


def test_a_missing_pods_file_is_unknown_not_idle(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "gpu-pool" / "nodes.json", tmp_path / "nodes.json")
    snap = load_cluster(str(tmp_path))
    assert len(snap.nodes) == 6
    assert all(
        n.requested is None and n.unknown_reason == "pods.json is missing" for n in snap.nodes
    )
    assert snap.unknowns == (Unknown("pods", "pods.json is missing"),)


def test_an_empty_pods_file_as_left_by_a_failed_redirect(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "gpu-pool" / "nodes.json", tmp_path / "nodes.json")
    (tmp_path / "pods.json").write_text("")
    snap = load_cluster(str(tmp_path))
    assert snap.unknowns == (Unknown("pods", "pods.json is empty"),)


def test_an_empty_directory_makes_everything_unknown(tmp_path: Path) -> None:
    snap = load_cluster(str(tmp_path))
    assert snap.nodes == () and snap.nodes_unknown == "nodes.json is missing"
    assert {u.what for u in snap.unknowns} == {"nodes", "pods"}


def test_a_single_file_without_pods_is_unknown(tmp_path: Path) -> None:
    doc = json.loads((EXAMPLES / "single-file.json").read_text(encoding="utf-8"))
    doc["items"] = [i for i in doc["items"] if i["kind"] == "Node"]
    path = tmp_path / "nodes-only.json"
    path.write_text(json.dumps(doc))
    snap = load_cluster(str(path))
    [why] = snap.unknowns
    assert why.what == "pods" and why.reason.startswith("nodes-only.json holds no Pod items")


def test_a_path_that_does_not_exist_is_an_input_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(InvalidInputError) as info:
        load_cluster(str(missing))
    assert info.value.rule == "cluster-path-not-found"
    assert str(missing) in info.value.message
    assert "kubectl get nodes -o json" in info.value.hint


@pytest.mark.skipif(
    os.name != "posix" or (hasattr(os, "geteuid") and os.geteuid() == 0),
    reason="needs a non-root POSIX user for permission bits to bite",
)
def test_an_unreadable_file_is_an_input_error_not_missing(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "gpu-pool" / "nodes.json", tmp_path / "nodes.json")
    pods = tmp_path / "pods.json"
    pods.write_text("{}")
    pods.chmod(0)
    try:
        with pytest.raises(InvalidInputError) as info:
            load_cluster(str(tmp_path))
        assert info.value.rule == "cluster-file-unreadable"
    finally:
        pods.chmod(0o600)


def test_a_pods_path_that_is_a_directory_is_an_input_error(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "gpu-pool" / "nodes.json", tmp_path / "nodes.json")
    (tmp_path / "pods.json").mkdir()
    with pytest.raises(InvalidInputError) as info:
        load_cluster(str(tmp_path))
    assert info.value.rule == "cluster-file-unreadable"
    assert "pods.json" in info.value.message
