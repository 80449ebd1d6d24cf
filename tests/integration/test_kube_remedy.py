"""`vf deploy` applies the scheduler model's remedy: node-affinity pins, and waves bound in turn.

examples/stranding.py on examples/clusters/two-4gpu: the exact packing fits,
kube-scheduler's model strands the 4-GPU pod, and the remedy is three waves
(largest claims first). The fake API server plays the controllers and the
scheduler (a workload applied gets its pods, bound).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_helpers import REPO, run_vf
from tests.integration.kube_fake import FakeKube
from tests.support.kube import RESOURCES
from vfadapters.kubernetes.remedy import with_affinity

pytest.importorskip("kubernetes")

STRANDING = REPO / "examples" / "stranding.py"
TWO_4GPU = REPO / "examples" / "clusters" / "two-4gpu"


def rendered(run_id: str = "r1") -> tuple[dict[str, Any], ...]:
    from vfadapters.cli.inputs import load_spec
    from vfcore.runtime.manifests import RenderOptions, render

    return render(load_spec(str(STRANDING)), RenderOptions(image="x:1", run_id=run_id))


def _workload(objects: tuple[dict[str, Any], ...], node: str) -> dict[str, Any]:
    return next(
        o
        for o in objects
        if o["kind"] in ("Job", "Deployment", "StatefulSet")
        and o["metadata"].get("annotations", {}).get("vfcore.io/node-name") == node
    )


def test_with_affinity_pins_exactly_the_named_workloads() -> None:
    objects = rendered()
    pinned = with_affinity(objects, {"segment": ("gpu-b",)}, {"gpu-b": "host-b"})
    spec = _workload(pinned, "segment")["spec"]["template"]["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["host-b"]}
            ]
        }
    ]
    assert "affinity" not in _workload(pinned, "encode")["spec"]["template"]["spec"]
    assert "affinity" not in _workload(objects, "segment")["spec"]["template"]["spec"]  # a copy
    # an existing term keeps its expressions and gains the pin (ANDed)
    objects2 = list(objects)
    i = objects2.index(_workload(objects, "segment"))
    own = json.loads(json.dumps(objects2[i]))
    own["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}  # fmt: skip
    objects2[i] = own
    again = with_affinity(objects2, {"segment": ("gpu-b",)})
    term = _workload(tuple(again), "segment")["spec"]["template"]["spec"]["affinity"][
        "nodeAffinity"
    ]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert [e["key"] for e in term["matchExpressions"]] == ["zone", "kubernetes.io/hostname"]


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    server = FakeKube().start()
    try:
        server.declare(*RESOURCES)
        for node in json.loads((TWO_4GPU / "nodes.json").read_text())["items"]:
            server.put("v1/nodes", None, node)
        server.call(lambda h: setattr(h, "complete_jobs", True))
        server.call(lambda h: setattr(h, "spawn_bound_pods_on", "gpu-b"))
        yield server
    finally:
        server.stop()


def test_deploy_applies_the_waves_each_bound_before_the_next(
    fake: FakeKube, tmp_path: Path
) -> None:
    from vfcore.flow.names import physical_name

    result = run_vf(
        "deploy", STRANDING, "--image", "x:1", "--run", "r1",
        "--kubeconfig", fake.kubeconfig(tmp_path / "kubeconfig"), "--timeout", "30",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "remedy: The scheduler model strands pods" in result.stderr
    assert "vf deploy applies it (waves)" in result.stderr
    assert "wave 1/3 bound: segment" in result.stderr
    assert "wave 2/3 bound: encode" in result.stderr

    def trace(h: Any) -> list[str]:
        out = []
        for r in h._requests:
            if r.method.value.upper() == "PATCH" and r.resource and r.resource.plural == "jobs":
                out.append(f"apply {r.name}")
            elif r.resource and r.resource.plural == "pods" and r.params.get("labelSelector"):
                out.append(f"pods {r.params['labelSelector'].rsplit('=', 1)[-1]}")
        return out

    events = fake.call(trace)
    token = {n: physical_name(n, flow="stranding", run="r1").k8s for n in ("segment", "encode")}
    names = {n: _workload(rendered(), n)["metadata"]["name"] for n in ("segment", "encode")}
    seg_apply = events.index(f"apply {names['segment']}")
    enc_apply = events.index(f"apply {names['encode']}")
    seg_check = events.index(f"pods {token['segment']}")
    assert seg_apply < seg_check < enc_apply  # segment bound before encode is applied
    setup_apply = next(i for i, e in enumerate(events) if e.startswith("apply") and "setup" in e)
    assert setup_apply < seg_apply  # the broker's setup Job still goes first


def test_dry_run_applies_in_wave_order_without_waiting(fake: FakeKube, tmp_path: Path) -> None:
    fake.call(lambda h: setattr(h, "spawn_bound_pods_on", None))  # no pods would ever come
    result = run_vf(
        "deploy", STRANDING, "--image", "x:1", "--run", "r1", "--dry-run", "server",
        "--kubeconfig", fake.kubeconfig(tmp_path / "kubeconfig"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "(server dry run: nothing stored)" in result.stdout
    assert "wave 1/3 bound" not in result.stderr
    sent = [a["name"] for a in fake.call(lambda h: list(h.applies)) if a["plural"] == "jobs"]
    names = {n: _workload(rendered(), n)["metadata"]["name"] for n in ("segment", "encode")}
    assert sent.index(names["segment"]) < sent.index(names["encode"])


def test_a_wave_that_never_binds_is_an_error(fake: FakeKube, tmp_path: Path) -> None:
    fake.call(lambda h: setattr(h, "spawn_bound_pods_on", None))
    result = run_vf(
        "deploy", STRANDING, "--image", "x:1", "--run", "r1", "--timeout", "1",
        "--kubeconfig", fake.kubeconfig(tmp_path / "kubeconfig"),
    )  # fmt: skip
    assert result.returncode == 1
    assert "error: kube-wave-not-bound" in result.stderr and "wave 1 (segment)" in result.stderr
