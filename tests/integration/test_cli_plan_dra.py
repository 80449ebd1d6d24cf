"""``--gpu-mode dra`` end to end: vf explain, vf plan on DRA dumps, vf deploy --render-only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from tests.integration.cli_helpers import REPO, assert_bad_input, one_json_document, run_vf
from tests.manifest_schemas import check_any

FLOW = "examples/dra_flow.py"
CLUSTER = REPO / "examples" / "clusters" / "dra-h100"


def test_explain_counts_claims_per_device_class() -> None:
    doc = one_json_document(run_vf("explain", FLOW, "--gpu-mode", "dra", "--json"))
    assert doc["gpu_demand"]["mode"] == "dra"
    assert doc["gpu_demand"]["total"] == {"gpu.nvidia.com": 2, "mig.nvidia.com": 4}


def test_plan_places_every_claim_names_its_devices_and_remedies_first_fit() -> None:
    result = run_vf(
        "plan", FLOW, "--cluster", CLUSTER, "--gpu-mode", "dra", "--json", "--strict-preflight"
    )
    assert result.returncode == 0, result.stderr  # fits, and lands with the remedy
    doc = one_json_document(result)
    assert doc["verdict"] == "fits" and doc["gpu_mode"] == "dra"
    devices = doc["dra"]["devices"]
    assert devices["track/0"] == ["gpu.nvidia.com/gpu-b/gpu-0", "gpu.nvidia.com/gpu-b/gpu-2"]
    assert all(
        d[0].startswith("gpu.nvidia.com/mig-a/gpu-0-mig-")
        for p, d in devices.items()
        if p != "track/0"
    )
    sched = doc["scheduler"]
    assert sched["verdict"] == "strands" and sched["stranded"] == ["plate/0"]
    assert sched["remedy"]["kind"] == "waves" and sched["verdict_with_remedy"] == "lands"
    assert sched["remedy"]["wave_order"] == "in the order of the devices the exact plan gives them"


def test_plan_from_one_list_file_agrees_with_the_directory(tmp_path: Path) -> None:
    items = []
    for name in ("nodes", "pods", "resourceslices", "deviceclasses", "resourceclaims"):
        items += json.loads((CLUSTER / f"{name}.json").read_text())["items"]
    single = tmp_path / "cluster.json"
    single.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    listed = one_json_document(
        run_vf("plan", FLOW, "--cluster", single, "--gpu-mode", "dra", "--json")
    )
    direct = one_json_document(
        run_vf("plan", FLOW, "--cluster", CLUSTER, "--gpu-mode", "dra", "--json")
    )
    assert (listed["verdict"], listed["dra"]) == (direct["verdict"], direct["dra"])


def test_without_the_dra_dumps_the_plan_is_unknown_never_empty(tmp_path: Path) -> None:
    partial = tmp_path / "cluster"
    partial.mkdir()
    for name in ("nodes.json", "pods.json", "deviceclasses.json", "resourceclaims.json"):
        shutil.copy(CLUSTER / name, partial / name)
    result = run_vf(
        "plan", FLOW, "--cluster", partial, "--gpu-mode", "dra", "--json", "--strict-preflight"
    )
    assert result.returncode == 3
    doc = one_json_document(result)
    assert doc["verdict"] == "unknown"
    assert "dra-facts-unknown" in [p["code"] for p in doc["problems"]]
    assert any(u["what"] == "resourceslices" for u in doc["unknown"])


def test_a_bad_device_class_is_bad_input() -> None:
    result = run_vf(
        "plan", FLOW, "--cluster", CLUSTER, "--gpu-mode", "dra", "--dra-device-class", "GPU"
    )
    assert_bad_input(result, "invalid-device-class")


def test_render_only_writes_claim_templates_valid_for_1_36(tmp_path: Path) -> None:
    out = tmp_path / "manifests"
    out.mkdir()
    result = run_vf(
        "deploy", FLOW, "--image", "reg.example/dra:1", "--run", "r1", "--gpu-mode", "dra",
        "--render-only", "-o", out,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    objects = []
    for path in sorted(out.glob("*.yaml")):
        (obj,) = yaml.safe_load_all(path.read_text())
        check_any(obj, "1.36")
        objects.append((obj["kind"], obj["metadata"]["name"]))
    templates = [name for kind, name in objects if kind == "ResourceClaimTemplate"]
    assert len(templates) == 5
    for name in templates:  # each template comes before the Job whose pods claim from it
        assert objects.index(("ResourceClaimTemplate", name)) < objects.index(("Job", name))
