"""The Kubernetes path without a cluster: the flagship's pods, run as local processes.

``vf deploy --render-only`` renders examples/traffic/flow.py; here every pod those
manifests would create runs as a local process with exactly its container's
command, arguments and environment, as the kubelet would start it:

* ``env`` values as written; ``fieldRef: metadata.name`` becomes a synthetic pod
  name (``<job>-<index>-x7k2p`` for a Job, ``<statefulset>-<ordinal>``, ``<deployment>-
  5d8f9c7b6d-qwxzt``); an Indexed Job's pods get ``JOB_COMPLETION_INDEX`` (the Job
  controller adds it); ``$(VAR)`` in the arguments is expanded from the container's
  environment;
* the in-cluster broker's StatefulSet is the session's real ``nats-server``: the
  ``VF_BROKER_URL`` the manifests give (its Service's DNS name) is replaced by the
  server's URL, as the cluster's DNS would resolve it;
* paths inside the image (``/app/...``) are the repository's ``examples/traffic/...``;
* the run's credentials are real (issue 24): the Secret ``vf deploy`` would apply is
  rendered with fresh keys, the broker is a ``nats-server`` of the test's own
  configured with the ``nats.conf`` from that Secret (the users, one per role; its
  ports and store are the test's), and each container's Secret volume is a folder
  holding exactly the items it mounts, at the path its ``VF_*_FILE`` variables name.
  So every worker runs on its own node's key and no other: the run completing
  proves the permissions each role is given are complete.

The setup Job runs first and must succeed; then every pod's init container (the
same idempotent topology setup, all at once), then every worker at once; every one
exits 0 and the events consumer writes 240 lines (4 cameras × 60 frames).
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tests.integration.cli_helpers import REPO
from tests.integration.conftest import _binary
from vfadapters.broker.server import NatsServer
from vfadapters.kubernetes.credentials import generate_run_secrets
from vfadapters.loading import load_runnable
from vfcore.runtime import broker_topology
from vfcore.runtime.manifests import RenderOptions, render

FLOW = REPO / "examples" / "traffic" / "flow.py"
IMAGE_DIR = "/app/"
POD_VARS = ("VF_REPLICA", "JOB_COMPLETION_INDEX", "POD_NAME", "HOSTNAME", "VF_DEBUG")
VF = Path(sys.executable).with_name("vf")


def pods_of(obj: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """``(pod name, variables the controller adds)`` for every pod of a workload."""
    name, spec = obj["metadata"]["name"], obj["spec"]
    if obj["kind"] == "Job":
        if spec.get("completionMode") == "Indexed":
            return [
                (f"{name}-{i}-x7k2p", {"JOB_COMPLETION_INDEX": str(i)})
                for i in range(spec["completions"])
            ]
        return [(f"{name}-x7k2p", {})]
    if obj["kind"] == "StatefulSet":
        return [(f"{name}-{i}", {}) for i in range(spec["replicas"])]
    assert obj["kind"] == "Deployment"
    return [(f"{name}-5d8f9c7b6d-q{'wxzt'[i % 4]}xz{i}", {}) for i in range(spec["replicas"])]


def mounts_of(
    pod_spec: dict[str, Any], container: dict[str, Any], secret: dict[str, Any], where: Path
) -> dict[str, str]:
    """Write the Secret items ``container`` mounts under ``where``: mount path → local folder."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes", []) if "secret" in v}
    out = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"])
        if volume is None:
            continue
        assert volume["secret"]["secretName"] == secret["metadata"]["name"]
        assert mount["readOnly"] is True
        folder = where / mount["name"]
        folder.mkdir(parents=True, exist_ok=True)
        for item in volume["secret"]["items"]:
            path = folder / item["path"]
            path.write_bytes(base64.b64decode(secret["data"][item["key"]]))
            path.chmod(0o400)
        out[mount["mountPath"]] = str(folder)
    return out


def command_of(
    container: dict[str, Any],
    pod: str,
    added: dict[str, str],
    broker: dict[str, str],
    mounts: dict[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    env: dict[str, str] = dict(added)
    for var in container.get("env", []):
        if "value" in var:
            value = broker.get(var["value"], var["value"])
            for inside, outside in (mounts or {}).items():
                if value.startswith(inside + "/"):
                    value = outside + value[len(inside) :]
            env[var["name"]] = value
        else:
            assert var["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}, var
            env[var["name"]] = pod

    def expand(arg: str) -> str:
        arg = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), arg)
        if arg.startswith(IMAGE_DIR):
            return str(FLOW.parent / arg[len(IMAGE_DIR) :])
        return arg

    argv = [*container["command"], *container["args"]]
    assert argv[0] == "vf"
    return [str(VF), *map(expand, argv[1:])], env


def start(argv: list[str], env: dict[str, str], base: dict[str, str], log: Path) -> Any:
    out = log.open("w")
    return subprocess.Popen(
        argv,
        cwd=REPO,
        env={**base, **env},
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_the_flagship_completes_as_its_rendered_pods(tmp_path: Path) -> None:
    _, spec = load_runnable(str(FLOW))
    run_id = f"k{uuid.uuid4().hex[:8]}"
    values = generate_run_secrets(broker_topology(spec, run_id))
    objects = render(
        spec,
        RenderOptions(image="registry.example/traffic:1", run_id=run_id, secret_values=values),
    )
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    broker_sets = [
        o for o in objects if o["metadata"]["labels"]["app.kubernetes.io/component"] == "broker"
    ]
    kinds = sorted(o["kind"] for o in broker_sets)
    assert kinds == ["Job", "NetworkPolicy", "Service", "Service", "StatefulSet"]
    (setup,) = [o for o in broker_sets if o["kind"] == "Job"]
    (client,) = [
        o for o in broker_sets if o["kind"] == "Service" and o["spec"].get("type") == "ClusterIP"
    ]
    (sts,) = [o for o in broker_sets if o["kind"] == "StatefulSet"]
    (nats,) = sts["spec"]["template"]["spec"]["containers"]
    config_dir = mounts_of(sts["spec"]["template"]["spec"], nats, secret, tmp_path / "broker")
    assert nats["args"] == ["-c", "/etc/nats/nats.conf"] and "/etc/nats" in config_dir
    config = (Path(config_dir["/etc/nats"]) / "nats.conf").read_text()
    # the whole file is what the pod's server reads (nats-server -t checks it); this
    # server keeps its own ports and store and takes the users from it
    checked = subprocess.run(
        [str(_binary()), "-t", "-c", str(Path(config_dir["/etc/nats"]) / "nats.conf")],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    users = config[config.index("authorization {") :]
    server = NatsServer(_binary(), tmp_path / "nats", authorization=users).start()
    in_cluster = f"nats://{client['metadata']['name']}.default.svc:4222"
    broker = {in_cluster: server.url}
    try:
        _run_the_pods(spec, run_id, objects, setup, broker, secret, server, tmp_path)
    finally:
        server.stop()


def _run_the_pods(
    spec: Any,
    run_id: str,
    objects: Any,
    setup: dict[str, Any],
    broker: dict[str, str],
    secret: dict[str, Any],
    nats_server: NatsServer,
    tmp_path: Path,
) -> None:
    broker_sets = [
        o for o in objects if o["metadata"]["labels"]["app.kubernetes.io/component"] == "broker"
    ]

    events = tmp_path / "events.jsonl"
    base = {k: v for k, v in os.environ.items() if k not in POD_VARS}
    base.update(TRAFFIC_EVENTS=str(events), TMPDIR=str(tmp_path))

    (container,) = setup["spec"]["template"]["spec"]["containers"]
    pod = f"{setup['metadata']['name']}-x7k2p"
    mounts = mounts_of(setup["spec"]["template"]["spec"], container, secret, tmp_path / pod)
    argv, env = command_of(container, pod, {}, broker, mounts)
    assert env["VF_BROKER_URL"] == nats_server.url
    done = subprocess.run(
        argv, cwd=REPO, env={**base, **env}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr

    workloads = [
        o
        for o in objects
        if o["kind"] in ("Job", "Deployment", "StatefulSet") and o not in broker_sets
    ]
    assert {o["metadata"]["annotations"]["vfcore.io/node-name"] for o in workloads} == set(
        spec.names
    )
    procs: list[tuple[str, Any, Path]] = []
    try:
        # each pod's init container (the topology, again: idempotent), all pods at once
        inits = []
        for obj in workloads:
            (init,) = obj["spec"]["template"]["spec"]["initContainers"]
            for pod, added in pods_of(obj):
                where = tmp_path / pod / "init"
                mounts = mounts_of(obj["spec"]["template"]["spec"], init, secret, where)
                argv, env = command_of(init, pod, added, broker, mounts)
                log = tmp_path / f"{pod}.init.log"
                inits.append((pod, start(argv, env, base, log), log))
        for pod, proc, log in inits:
            assert proc.wait(timeout=120) == 0, f"{pod} init:\n{log.read_text()[-3000:]}"
        for obj in workloads:
            (container,) = obj["spec"]["template"]["spec"]["containers"]
            for pod, added in pods_of(obj):
                where = tmp_path / pod / "worker"
                mounts = mounts_of(obj["spec"]["template"]["spec"], container, secret, where)
                argv, env = command_of(container, pod, added, broker, mounts)
                assert "--no-create" in argv and env["VF_RUN"] == run_id
                # its node's key and the run key only, from files
                assert sorted(p.name for p in (where / "vf-credentials").iterdir()) == [
                    "node.nk",
                    "run-key",
                ]
                log = tmp_path / f"{pod}.log"
                procs.append((pod, start(argv, env, base, log), log))
        assert len(procs) == sum(n.nb_tasks if n.is_processor else 1 for n in spec.nodes)
        deadline = time.monotonic() + 240
        for pod, proc, log in procs:
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            assert code == 0, f"{pod} exited {code}:\n{log.read_text()[-3000:]}"
    finally:
        for _, proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    lines = events.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 240
