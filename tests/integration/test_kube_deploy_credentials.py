"""The run's keys through a real ``vf deploy`` (subprocess, kmock API server): issue 24.

What the deploy sends is read back from the fake: exactly one Secret holds the
run's keys (one nkey seed per role, the run key, the broker's configuration of
public keys); no other object sent, and nothing ``vf deploy``, ``vf deploy
--render-only``, ``vf status`` or ``vf teardown`` prints on stdout or stderr,
holds a seed (``SU`` and 56 base32 letters), a seed's base64, or the run key
(base64 or hex). A second deploy of the run sends the same Secret (the keys a
running run holds never change); teardown removes it with the NetworkPolicies.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.cli_helpers import run_vf
from tests.integration.kube_fake import FakeKube
from tests.manifest_schemas import check_any
from tests.support.kube import applies, deploy, fake, flow_file, stored

pytest.importorskip("kubernetes")

__all__ = ["fake"]  # the fixture, shared with test_kube_deploy

#: What an nkey user seed looks like anywhere in text.
SEED = re.compile(r"SU[A-Z2-7]{56}")


def _secret_of(sent: list[dict[str, Any]]) -> dict[str, Any]:
    (secret,) = [s["body"] for s in sent if s["plural"] == "secrets"]
    body: dict[str, Any] = secret
    return body


def _forbidden_texts(secret: dict[str, Any]) -> list[str]:
    """Every form in which the Secret's values could leak: each seed, its base64, the
    run key in base64 and hex."""
    data = secret["data"]
    texts = []
    for key, value in data.items():
        raw = base64.b64decode(value)
        if key.endswith(".nk"):
            texts += [raw.decode("ascii"), value]
        elif key == "run-key":
            texts += [value, raw.hex()]
    return texts


def _assert_clean(text: str, forbidden: list[str], what: str) -> None:
    assert not SEED.search(text), f"{what} holds an nkey seed"
    for value in forbidden:
        assert value not in text, f"{what} holds a secret value"


def test_deploy_sends_the_keys_in_one_secret_and_prints_none(
    fake: FakeKube, tmp_path: Path
) -> None:
    flow = flow_file(tmp_path, gpus=1)
    kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
    first = deploy(flow, kubeconfig)
    assert first.returncode == 0, first.stderr
    sent = applies(fake)
    secret = _secret_of(sent)
    check_any(secret, "1.36")
    assert secret["immutable"] is True
    kinds = [s["plural"] for s in sent]
    # the Secret and the policies go before any pod that mounts it
    assert kinds.index("secrets") < kinds.index("networkpolicies") < kinds.index("statefulsets")
    seeds = {
        k: base64.b64decode(v).decode() for k, v in secret["data"].items() if k.endswith(".nk")
    }
    assert {"admin.nk", "setup.nk"} <= set(seeds) and len(seeds) == 2 + 3  # src, infer, sink
    assert all(SEED.fullmatch(s) for s in seeds.values())  # the pattern the checks rely on
    forbidden = _forbidden_texts(secret)
    config = base64.b64decode(secret["data"]["nats.conf"]).decode()
    _assert_clean(config, forbidden, "the server's configuration")  # public keys only
    for s in sent:
        if s["plural"] != "secrets":
            _assert_clean(json.dumps(s["body"]), forbidden, f"{s['plural']}/{s['name']}")
    _assert_clean(first.stdout + first.stderr, forbidden, "vf deploy's output")

    # a second deploy of the run sends the very same Secret: its keys are reused
    fake.call(lambda h: h.applies.clear())
    second = deploy(flow, kubeconfig)
    assert second.returncode == 0, second.stderr
    assert _secret_of(applies(fake))["data"] == secret["data"]
    _assert_clean(second.stdout + second.stderr, forbidden, "the second deploy's output")

    for command in (
        ("status", flow, "--kubeconfig", kubeconfig),
        ("status", flow, "--kubeconfig", kubeconfig, "--json"),
        ("deploy", flow, "--image", "registry.example/kdemo:1", "--run", "r1", "--render-only"),
    ):
        result = run_vf(*command)
        assert result.returncode == 0, result.stderr
        _assert_clean(result.stdout + result.stderr, forbidden, f"vf {command[0]}")
        if "--render-only" in command:
            rendered = list(yaml.safe_load_all(result.stdout))
            assert "Secret" not in {o["kind"] for o in rendered}

    down = run_vf("teardown", flow, "--kubeconfig", kubeconfig, "--json")
    assert down.returncode == 0, down.stderr
    _assert_clean(down.stdout + down.stderr, forbidden, "vf teardown")
    left = {kind for kind, _, _ in stored(fake)}
    assert "secrets" not in left and "networkpolicies" not in left


def test_render_only_and_render_credentials_print_no_seed_on_stderr(tmp_path: Path) -> None:
    flow = flow_file(tmp_path, gpus=1)
    base = (flow, "--image", "x:1", "--run", "r9")
    creds = run_vf("deploy", *base, "--render-credentials")
    assert creds.returncode == 0, creds.stderr
    secret = yaml.safe_load(creds.stdout)
    forbidden = _forbidden_texts(secret)
    # stdout is where the keys go, on request (base64, as a Secret's data holds them)
    assert forbidden and all(v in creds.stdout for v in secret["data"].values())
    _assert_clean(creds.stderr, forbidden, "--render-credentials' stderr")
    out = tmp_path / "manifests"
    out.mkdir()
    rendered = run_vf("deploy", *base, "--render-only", "-o", out)
    assert rendered.returncode == 0, rendered.stderr
    _assert_clean(rendered.stdout + rendered.stderr, forbidden, "--render-only's output")
    for path in sorted(out.glob("*.yaml")):
        _assert_clean(path.read_text(), forbidden, path.name)
