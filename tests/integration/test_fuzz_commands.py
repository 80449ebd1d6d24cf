"""Fuzzing the commands added since the first fuzz suite (issue 23, item 2), in process.

``deploy`` (``--render-only`` and against a cluster), ``status``, ``teardown``,
``plan --kube``, ``dockerfile``, ``broker-setup``, ``dead-letters``, ``scale
--broker`` and ``vf worker``'s argument parsing, each given command lines drawn
from valid values and hostile ones (``nan``, ``inf``, ``1e300``, ports past
65535, empty strings, newlines, quotes, capitals, ``../``, ``/dev/null``,
``/dev/zero``, 400-digit numbers). The law, the same as for explain/plan/scale
(tests/property/test_fuzz_inputs.py): exit 0, 1, 2 or 3; 2 and 1 only with an
``error: <kebab-id>`` line, never ``internal-error``; never a traceback; ``--json``
prints one document; and every example ends within seconds (a wait that never
ends is refused, not waited out).

Real parts where a command talks to one: the session's nats-server (JetStream),
a fake Kubernetes API server (kmock); ``vf worker`` stops after its arguments:
its ``run_worker`` is replaced for the test (the worker itself is tested in
test_vf_worker.py), so that the law covers exactly the parsing.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.integration.cli_helpers import KEBAB, REPO
from vfadapters.broker.server import NatsServer

pytest.importorskip("kubernetes")

FLOW = str(REPO / "examples" / "traffic" / "flow.py")
SCALING = str(REPO / "examples" / "realtime_scaling.py")
FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

HOSTILE = (
    "", " ", "nan", "inf", "-inf", "-1", "0", "1e300", "1e12", "99999", "9" * 400, "a b",
    "x\ny", "Bad_NS", "détecteur", 'x"; rm -rf / #', "$HOME", "../x", "/dev/null", "/dev/zero",
    "Reg/Img:1", "http://x:1", "nats://127.0.0.1:99999", "ghost",
)  # fmt: skip
SECONDS = ("0", "0.5", "1", "30", "3600", "86400", "nan", "inf", "-1", "1e300", "1e12")
RUNS = ("r1", "r1", "fz-1", "fz-1", "", "Bad Run", "a" * 64, "r\n1")  # valid ones twice as often


def _values(*valid: str) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(valid), st.sampled_from(HOSTILE))


class Servers:
    """What the commands talk to: a JetStream server, a fake API server, kubeconfigs."""

    def __init__(self, nats: NatsServer, kube: Any, folder: Path) -> None:
        self.nats = nats
        self.kube = kube
        self.folder = folder
        self.kubeconfig = kube.kubeconfig(folder / "kubeconfig")
        broken = folder / "broken.yaml"
        broken.write_text("clusters: [\n  - {name: x\n")
        closed = folder / "closed"
        closed.write_text(
            self.kubeconfig.read_text().replace(kube.url, "http://127.0.0.1:9")
        )  # nothing listens there: every request is refused at once
        self.kubeconfigs = (str(self.kubeconfig), str(broken), str(closed), "/dev/null",
                            "/dev/zero", str(folder), str(folder / "missing"))  # fmt: skip


@pytest.fixture(scope="module")
def servers(nats_server: NatsServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    from tests.integration.kube_fake import FakeKube
    from tests.support.kube import H100, RESOURCES, gpu_node

    kube = FakeKube().start()
    try:
        kube.declare(*RESOURCES)
        for i in range(2):
            kube.put("v1/nodes", None, gpu_node(f"gpu-{i}", 4, H100))
        yield Servers(nats_server, kube, tmp_path_factory.mktemp("fuzz-servers"))
    finally:
        kube.stop()


def _options(draw: st.DrawFn, table: dict[str, st.SearchStrategy[str]]) -> list[str]:
    chosen = draw(st.lists(st.sampled_from(sorted(table)), unique=True, max_size=4))
    return [f"{flag}={draw(table[flag])}" for flag in chosen]


def _deploy(draw: st.DrawFn, s: Servers, out: Path) -> list[str]:
    argv = ["deploy", FLOW, f"--image={draw(_values('reg.example/traffic:1', 'x:1'))}"]
    if draw(st.booleans()):
        argv.append(f"--run={draw(st.sampled_from(RUNS))}")
    argv += _options(draw, {
        "--namespace": _values("default", "video"),
        "--flow-path": _values("/app/flow.py", "/app/fl\now.py", "rel.py", "/app/flow.py:build"),
        "--broker": _values("nats://nats:4222", "tls://[::1]:4222"),
        "--broker-monitoring": _values("nats:8222", "h:0"),
        "--broker-image": _values("nats:2.11", "NATS"),
        "--broker-storage": _values("10Gi", "-1Gi", "1e400"),
        "--gpu-mode": _values("exclusive", "shared", "mix"),
        "--gpu-runtime-class": _values("nvidia"),
        "--gpu-node-selector": _values("a=b", "=", "k="),
        "--env": _values("A=b", "VF_RUN=x", "1A=b"),
        "--resources": _values("detector=cpu:2", "detector=cpu:-1", "x"),
        "--max-replicas": _values("10", "10000", "10001", str(10**30)),
        "--lag-threshold": _values("10", str(2**63)),
        "--timeout": st.sampled_from(SECONDS),
        "--unschedulable-grace": st.sampled_from(SECONDS),
    })  # fmt: skip
    if draw(st.booleans()):
        argv += ["--autoscaling"]
    if draw(st.integers(0, 4)):
        argv.append("--render-only")
        if draw(st.booleans()):
            target = draw(st.sampled_from(["dir", "", "/dev/null", "file", "file/sub"]))
            where = {"dir": str(out / "render"), "file": str(s.folder / "kubeconfig"),
                     "file/sub": str(s.folder / "kubeconfig" / "sub")}.get(target, target)  # fmt: skip
            argv.append(f"-o={where}")
    else:  # against a cluster: one that refuses every request, or a kubeconfig that cannot be read
        argv.append(f"--kubeconfig={draw(st.sampled_from(s.kubeconfigs[1:]))}")
    return argv


def _kube(draw: st.DrawFn, s: Servers) -> list[str]:
    command = draw(st.sampled_from(["status", "teardown", "plan"]))
    argv = [command, FLOW, f"--kubeconfig={draw(st.sampled_from(s.kubeconfigs))}"]
    if command == "plan":
        argv.append("--kube")
        argv += _options(draw, {"--gpu-mode": st.sampled_from(["exclusive", "shared", "mix"]),
                               "--context": _values("fake")})  # fmt: skip
    else:
        argv += _options(draw, {
            "--run": st.sampled_from(RUNS),
            "--namespace": _values("default", "video"),
            **({"--timeout": st.sampled_from(SECONDS[:4] + SECONDS[6:])} if command == "teardown"
               else {"--broker": _values(s.nats.url), "--monitor": _values(s.nats.monitor_url)}),
        })  # fmt: skip
    if draw(st.booleans()):
        argv.append("--json")
    return argv


def _broker(draw: st.DrawFn, s: Servers) -> list[str]:
    command = draw(st.sampled_from(["broker-setup", "dead-letters", "scale", "worker"]))
    flow = SCALING if command == "scale" else FLOW
    argv = [command, flow, f"--broker={draw(_values(s.nats.url))}"]
    argv.append(f"--run={draw(st.sampled_from(RUNS))}")
    topology = {
        "--retries": _values("2", "1000", "1001"),
        "--ack-wait": st.sampled_from(SECONDS),
        "--max-ack-pending": _values("1024", "1", str(2**31)),
    }
    table: dict[str, st.SearchStrategy[str]] = {
        "broker-setup": {**topology, "--wait": st.sampled_from(SECONDS)},
        "dead-letters": {"--limit": _values("10", "1000000", "1000001")},
        "scale": {"--timeout": st.sampled_from(("0.5", "1", "600", "601", "nan", "inf", "0")),
                  "--target": _values("1", "10")},
        "worker": {**topology, "--node": _values("detector", "tracker"),
                   "--replica": _values("0", "1", "9999", "10000"),
                   "--scalable": _values("detector", "detector,tracker", "detector,,x")},
    }[command]  # fmt: skip
    argv += _options(draw, table)
    if command == "worker" and not any(a.startswith("--node=") for a in argv):
        argv.append("--node=detector")
    if command in ("dead-letters", "scale") and draw(st.booleans()):
        argv.append("--json")
    return argv


def _dockerfile(draw: st.DrawFn, ctx: Path) -> list[str]:
    flow = draw(st.sampled_from(["flow.py", "flow.py", "my flow.py", "my flow.py", "raises.py",
                                 "spec.json", "../out.py", "a$b.py", "missing.py", "quits.py"]))  # fmt: skip
    argv = ["dockerfile", flow]
    argv += _options(draw, {
        "--base": _values("python:3.11-slim", "registry.example:5000/py:3@sha256:" + "a" * 64),
        "--vfcore": _values("vfcore==0.1.0", "dist/vfcore-0.1.0-py3-none-any.whl",
                            "vfcore @ https://h/v.whl", "numpy"),
        "--uid": _values("10001", "0", str(2**31)),
    })  # fmt: skip
    return argv


def _dockerfile_context(folder: Path) -> Path:
    ctx = folder / "ctx"
    ctx.mkdir()
    source = (REPO / "examples" / "traffic.py").read_text()
    for name in ("flow.py", "my flow.py", "a$b.py"):
        (ctx / name).write_text(source)
    (folder / "out.py").write_text(source)
    (ctx / "raises.py").write_text("raise RuntimeError('no')\n")
    (ctx / "quits.py").write_text("import os\nos._exit(0)\n")
    (ctx / "spec.json").write_text("{}")
    (ctx / "dist").mkdir()
    (ctx / "dist" / "vfcore-0.1.0-py3-none-any.whl").write_bytes(b"PK")
    return ctx


@contextlib.contextmanager
def _worker_stops_after_parsing() -> Iterator[list[Any]]:
    """``vfadapters.broker.worker`` as the parser needs it: options recorded, nothing run."""
    calls: list[Any] = []
    fake = types.ModuleType("vfadapters.broker.worker")
    fake.WorkerOptions = lambda **kw: kw  # type: ignore[attr-defined]
    fake.replica_from_env = lambda: None  # type: ignore[attr-defined]
    fake.run_worker = lambda spec, node, name, opts: calls.append(opts) or 0  # type: ignore[attr-defined]
    real = sys.modules.get("vfadapters.broker.worker")
    sys.modules["vfadapters.broker.worker"] = fake
    try:
        yield calls
    finally:
        if real is None:
            sys.modules.pop("vfadapters.broker.worker", None)
        else:
            sys.modules["vfadapters.broker.worker"] = real


def _main(argv: list[str], cwd: Path) -> tuple[int, str, str, float]:
    from vfadapters.cli import main

    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue(), time.monotonic() - started


def _assert_contract(argv: list[str], code: int, out: str, err: str, took: float) -> None:
    where = f"vf {' '.join(map(repr, argv))}\nstdout:\n{out[-1500:]}\nstderr:\n{err[-1500:]}"
    assert code in (0, 1, 2, 3), where
    assert "internal-error" not in out + err, where
    assert "Traceback" not in out + err, where
    if code in (1, 2):
        assert KEBAB.search(err), where
    if "--json" in argv and out.strip():
        json.loads(out)  # exactly one document
    assert took < 45, f"{took:.0f} s: {where}"


@settings(FUZZ, max_examples=60)
@given(st.data())
def test_deploy_and_the_cluster_commands_answer_hostile_lines_by_the_law(servers, data):
    with tempfile.TemporaryDirectory(prefix="vf-fuzz-") as tmp:
        folder = Path(tmp)
        if data.draw(st.booleans()):
            argv = _deploy(data.draw, servers, folder)
        else:
            argv = _kube(data.draw, servers)
        code, out, err, took = _main(argv, folder)
        _assert_contract(argv, code, out, err, took)
        named = KEBAB.search(err)
        event(f"{argv[0]}: exit {code}" + (f" {named.group(2)}" if named else ""))


@settings(FUZZ, max_examples=50)
@given(st.data())
def test_the_broker_commands_and_worker_parsing_answer_hostile_lines_by_the_law(servers, data):
    argv = _broker(data.draw, servers)
    with tempfile.TemporaryDirectory(prefix="vf-fuzz-") as tmp, _worker_stops_after_parsing():
        code, out, err, took = _main(argv, Path(tmp))
    _assert_contract(argv, code, out, err, took)
    named = KEBAB.search(err)
    event(f"{argv[0]}: exit {code}" + (f" {named.group(2)}" if named else ""))


@settings(FUZZ, max_examples=60)
@given(st.data())
def test_dockerfile_answers_hostile_lines_by_the_law(data):
    with tempfile.TemporaryDirectory(prefix="vf-fuzz-") as tmp:
        ctx = _dockerfile_context(Path(tmp))
        argv = _dockerfile(data.draw, ctx)
        code, out, err, took = _main(argv, ctx)
        _assert_contract(argv, code, out, err, took)
        assert code in (0, 2), (argv, err)
        if code == 0:
            import dockerfile as parser

            for c in parser.parse_string(out):
                assert c.cmd in ("FROM", "ENV", "RUN", "WORKDIR", "COPY", "USER", "CMD")
                if c.cmd == "COPY":
                    assert c.json and len(c.value) == 2
        event(f"dockerfile: exit {code}")


def test_the_nats_server_and_the_fake_are_what_the_fuzz_talks_to(servers) -> None:
    """A valid line of each kind succeeds: the law is not met by refusing everything."""
    with tempfile.TemporaryDirectory(prefix="vf-fuzz-") as tmp:
        folder = Path(tmp)
        for argv in (
            ["broker-setup", FLOW, f"--broker={servers.nats.url}", "--run=fz-ok"],
            ["dead-letters", FLOW, f"--broker={servers.nats.url}", "--run=fz-ok", "--json"],
            ["scale", SCALING, f"--broker={servers.nats.url}", "--run=fz-ok", "--timeout=1"],
            # (no --run: a --run that no object carries is run-not-found, exit 2)
            ["status", FLOW, f"--kubeconfig={servers.kubeconfig}"],
            ["teardown", FLOW, f"--kubeconfig={servers.kubeconfig}", "--run=r1"],
            ["plan", FLOW, "--kube", f"--kubeconfig={servers.kubeconfig}"],
            ["deploy", FLOW, "--image=x:1", "--run=r1", "--render-only", f"-o={folder / 'o'}"],
        ):
            code, _out, err, _took = _main(argv, folder)
            assert code in (0, 3), (argv, err)
        with _worker_stops_after_parsing() as calls:
            argv = ["worker", FLOW, "--node=detector", f"--broker={servers.nats.url}", "--run=r1",
                    "--scalable=detector,tracker", "--replica=1"]  # fmt: skip
            code, _out, err, _took = _main(argv, folder)
        assert code == 0, err
        assert calls[0]["replica"] == 1 and calls[0]["scalable"] == ("detector", "tracker")
