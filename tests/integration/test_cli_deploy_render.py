"""``vf deploy --render-only``, ``vf dockerfile`` and ``vf broker-setup`` as real processes."""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml

from tests.integration.cli_helpers import REPO, assert_bad_input, run_vf
from tests.manifest_schemas import check_any
from vfadapters.broker.server import NatsServer

FLOW = "examples/traffic/flow.py"


def test_render_only_writes_one_file_per_object_in_apply_order(tmp_path: Path) -> None:
    out = tmp_path / "manifests"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    args = (FLOW, "--image", "reg.example/traffic:1", "--run", "r1", "--render-only", "-o", out)
    result = run_vf("deploy", *args)
    assert result.returncode == 0, result.stderr
    assert "rendered 17 objects of run r1 of traffic" in result.stderr
    files = sorted(p.name for p in out.glob("*.yaml"))
    assert files[0] == "00-networkpolicy-traffic-r1-broker-n6yzdl6cidqh.yaml"
    assert files[1].startswith("01-networkpolicy-traffic-r1-workers-")
    assert files[2] == "02-service-traffic-r1-broker-n6yzdl6cidqh-hl.yaml"
    assert files[5].startswith("05-job-traffic-r1-setup-")
    assert len(files) == 17 and (out / "keep.txt").exists()
    assert not any("secret" in name for name in files)  # the run's keys are never in the render
    assert "--render-credentials | kubectl apply -f -" in result.stderr
    for name in files:
        (obj,) = yaml.safe_load_all((out / name).read_text())
        check_any(obj, "1.36")
        assert name.startswith(f"{files.index(name):02d}-{obj['kind'].lower()}-")
    first = {n: (out / n).read_bytes() for n in files}
    assert run_vf("deploy", *args).returncode == 0
    assert {n: (out / n).read_bytes() for n in files} == first  # the same bytes again
    # the same run with an existing broker: fewer objects; the render's own stale files go
    assert run_vf("deploy", *args, "--broker", "nats://nats:4222").returncode == 0
    now = sorted(p.name for p in out.glob("*.yaml"))
    assert len(now) == 13 and not any("broker" in n for n in now)
    assert (out / "keep.txt").read_text() == "mine"


def test_render_only_without_o_prints_a_multi_document_stream() -> None:
    result = run_vf(
        "deploy", FLOW, "--image", "x:1", "--run", "r2", "--render-only",
        "--broker", "nats://nats.messaging:4222", "--namespace", "video",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs].count("StatefulSet") == 0  # an existing broker
    assert {d["metadata"]["namespace"] for d in docs} == {"video"}
    worker = docs[2]["spec"]["template"]["spec"]["containers"][0]
    assert worker["args"][:2] == ["worker", "/app/flow.py"]


def test_deploy_bad_input_exits_2_with_the_rule() -> None:
    base = (FLOW, "--image", "x:1", "--render-only")
    assert_bad_input(run_vf("deploy", *base, "--gpu-mode", "shared"), "shared-needs-runtime-class")
    assert_bad_input(run_vf("deploy", *base, "--gpu-mode", "mix"), "missing-mig-choice")
    assert_bad_input(run_vf("deploy", *base, "--autoscaling"), "autoscaling-batch-flow")
    assert_bad_input(run_vf("deploy", *base, "--namespace", "Bad_NS"), "invalid-namespace")
    assert_bad_input(run_vf("deploy", *base, "--broker", "http://x"), "invalid-broker-url")
    assert_bad_input(run_vf("deploy", *base, "--mig", "pose"), "invalid-option")
    assert_bad_input(run_vf("deploy", FLOW, "--image", "x:1", "-o", "somewhere"), "invalid-option")


def test_mix_mode_takes_the_mig_choice_from_the_flag() -> None:
    result = run_vf(
        "deploy", FLOW, "--image", "x:1", "--run", "r3", "--render-only", "--gpu-mode", "mix",
        "--mig", "pose=nvidia.com/mig-1g.10gb@NVIDIA-A100-SXM4-40GB",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (pose,) = [
        d
        for d in yaml.safe_load_all(result.stdout)
        if d["kind"] == "Job" and d["metadata"]["annotations"].get("vfcore.io/node-name") == "pose"
    ]
    spec = pose["spec"]["template"]["spec"]
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    assert spec["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"


def test_dockerfile_installs_the_extras_and_runs_as_the_pods_uid(tmp_path: Path) -> None:
    result = run_vf("dockerfile", FLOW)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.splitlines()[1] == "FROM python:3.11-slim"
    assert 'RUN ["pip", "install", "vfcore[broker,torch]==0.1.0"]' in text  # imports torch
    assert f'COPY ["{FLOW}", "/app/flow.py"]' in text
    assert "USER 10001:10001" in text
    wheel = Path("dist/vfcore-0.1.0-py3-none-any.whl")
    (tmp_path / "dist").mkdir()
    (tmp_path / wheel).write_bytes(b"PK")
    (tmp_path / "flow.py").write_text((REPO / FLOW).read_text())
    built = run_vf("dockerfile", "flow.py", "--vfcore", wheel, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert f'COPY ["{wheel}", "/tmp/{wheel.name}"]' in built.stdout
    assert f'RUN ["pip", "install", "/tmp/{wheel.name}[broker,torch]"]' in built.stdout
    assert_bad_input(run_vf("dockerfile", "no/such/flow.py"), "flow-unreadable")


def test_dockerfile_lists_other_imports(tmp_path: Path) -> None:
    flow = tmp_path / "f.py"
    flow.write_text(
        "import json\n"
        "try:\n    import cv2\n    from PIL import Image\nexcept ImportError:\n    pass\n"
        + (REPO / "examples" / "traffic.py").read_text().replace("from __future__", "# ")
    )
    result = run_vf("dockerfile", flow, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert 'RUN ["pip", "install", "vfcore[broker]==0.1.0"]' in result.stdout
    assert "# The flow also imports PIL, cv2" in result.stdout
    assert 'COPY ["f.py", "/app/f.py"]' in result.stdout


def test_broker_setup_creates_the_topology_once(nats_server: NatsServer) -> None:
    run_id = f"s{uuid.uuid4().hex[:8]}"
    args = ("broker-setup", FLOW, "--broker", nats_server.url, "--run", run_id)
    first = run_vf(*args)
    assert first.returncode == 0, first.stderr
    assert f"run {run_id} of traffic:" in first.stdout
    again = run_vf(*args)  # idempotent
    assert again.returncode == 0 and again.stdout == first.stdout


def test_broker_setup_without_a_broker_exits_2_after_waiting() -> None:
    result = run_vf(
        "broker-setup", FLOW, "--broker", "nats://127.0.0.1:1", "--run", "r1", "--wait", "1"
    )
    assert_bad_input(result, "broker-unreachable")


def test_render_credentials_prints_only_the_secret_with_fresh_keys(tmp_path: Path) -> None:
    import base64

    from vfadapters.broker.credentials import public_key

    base = (FLOW, "--image", "x:1", "--run", "r7", "--namespace", "video")
    first = run_vf("deploy", *base, "--render-credentials")
    assert first.returncode == 0, first.stderr
    (secret,) = yaml.safe_load_all(first.stdout)
    check_any(secret, "1.36")
    assert secret["kind"] == "Secret" and secret["metadata"]["namespace"] == "video"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert len(data["run-key"]) == 32
    seeds = {k: v.decode() for k, v in data.items() if k.endswith(".nk")}
    from vfadapters.loading import load_runnable

    nodes = load_runnable(FLOW)[1].nodes
    assert {"admin.nk", "setup.nk"} <= set(seeds) and len(seeds) == 2 + len(nodes)
    config = data["nats.conf"].decode()
    for seed in seeds.values():
        assert seed.startswith("SU") and seed not in config
        assert f'nkey: "{public_key(seed)}"' in config
        assert seed not in first.stderr
    # the objects rendered apart name that Secret, and hold none of its values
    objects = run_vf("deploy", *base, "--render-only")
    assert objects.returncode == 0, objects.stderr
    assert secret["metadata"]["name"] in objects.stdout
    for value in secret["data"].values():
        assert value not in objects.stdout
    again = run_vf("deploy", *base, "--render-credentials")
    assert yaml.safe_load(again.stdout)["data"]["run-key"] != secret["data"]["run-key"]  # fresh


def test_render_credentials_needs_a_run_and_never_writes_files(tmp_path: Path) -> None:
    assert_bad_input(
        run_vf("deploy", FLOW, "--image", "x:1", "--render-credentials"), "invalid-option"
    )
    refused = run_vf(
        "deploy", FLOW, "--image", "x:1", "--run", "r1", "--render-only", "--render-credentials",
        "-o", tmp_path / "out",
    )  # fmt: skip
    assert_bad_input(refused, "invalid-option")
    assert not (tmp_path / "out").exists()


def test_render_only_without_run_names_the_run_after_the_flow_so_renders_are_identical(
    tmp_path: Path,
) -> None:
    from vfadapters.loading import load_runnable
    from vfcore.runtime.render_options import render_run_id

    base = ("deploy", FLOW, "--image", "reg.example/traffic:1", "--render-only")
    first = run_vf(*base, "-o", tmp_path / "a")
    second = run_vf(*base, "-o", tmp_path / "b")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    run_id = render_run_id(load_runnable(str(REPO / FLOW))[1])
    assert f"of run {run_id} of traffic" in first.stderr
    assert f"run id {run_id}: from the flow's hash" in first.stderr
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "b").iterdir()) and len(files) > 10
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert run_vf(*base).stdout == run_vf(*base).stdout  # stdout too
    # another flow (one more replica of a node) is another run: no object overwrites another's
    changed = tmp_path / "flow.py"
    source = (REPO / FLOW).read_text(encoding="utf-8")
    assert 'name="decode", nb_tasks=2' in source
    changed.write_text(
        source.replace('name="decode", nb_tasks=2', 'name="decode", nb_tasks=3'), encoding="utf-8"
    )
    other = run_vf("deploy", changed, "--image", "reg.example/traffic:1", "--render-only")
    assert other.returncode == 0, other.stderr
    assert f"vfcore.io/run: {run_id}" in first_stdout(base)
    assert f"vfcore.io/run: {run_id}" not in other.stdout
    assert f"vfcore.io/run: {render_run_id(load_runnable(str(changed))[1])}" in other.stdout


def first_stdout(args: tuple[object, ...]) -> str:
    result = run_vf(*args)
    assert result.returncode == 0, result.stderr
    return str(result.stdout)
