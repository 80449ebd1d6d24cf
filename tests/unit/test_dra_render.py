"""--gpu-mode dra renders a ResourceClaimTemplate per GPU node, valid for Kubernetes 1.34–1.36."""

from __future__ import annotations

import pytest

from tests.dra_cases import Sink, Src, Step
from tests.manifest_schemas import check_k8s
from vfadapters.kubernetes.apply import apply_order
from vfadapters.kubernetes.remedy import with_claim_selectors
from vfadapters.kubernetes.teardown import OPTIONAL_KINDS, TEARDOWN_KINDS
from vfcore import REALTIME, Flow
from vfcore.errors import InvalidInputError
from vfcore.placement.dra.cel import compile_selector
from vfcore.runtime.manifests import RenderOptions, render, run_selector


def _flow(name="video"):
    src = Src(name="src")
    det = Step(name="detect", nb_tasks=3, device_type="gpu", gpu_memory_gib=9)(src)
    emb = Step(name="embed", nb_tasks=2, device_type="gpu", gpu_count=2)(det)
    return Flow([Sink(name="sink")(emb)], flow_type=REALTIME, name=name)


def _objects(flow=None, **options):
    options = {"image": "reg.example/video:1", "run_id": "r1", "gpu_mode": "dra", **options}
    return render((flow or _flow()).spec(), RenderOptions(**options))


def _kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36"])
def test_every_rendered_object_is_valid_for_the_dra_releases(version):
    for obj in _objects():
        check_k8s(obj, version)


def test_each_gpu_node_gets_one_claim_template_its_pods_reference():
    objects = _objects()
    templates = {
        t["metadata"]["annotations"]["vfcore.io/node-name"]: t
        for t in _kind(objects, "ResourceClaimTemplate")
    }
    assert sorted(templates) == ["detect", "embed"]
    detect = templates["detect"]["spec"]["spec"]["devices"]["requests"]
    assert detect == [
        {
            "name": "gpu",
            "exactly": {
                "deviceClassName": "mig.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 1,
                "selectors": [
                    {
                        "cel": {
                            "expression": 'device.capacity["gpu.nvidia.com"].memory.compareTo('
                            'quantity("9Gi")) >= 0'
                        }
                    }
                ],
            },
        }
    ]
    embed = templates["embed"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert (embed["deviceClassName"], embed["count"], "selectors" in embed) == (
        "gpu.nvidia.com",
        2,
        False,
    )
    for workload in _kind(objects, "Deployment"):
        node = workload["metadata"]["annotations"]["vfcore.io/node-name"]
        pod = workload["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        if node in templates:
            assert pod["resourceClaims"] == [
                {"name": "gpu", "resourceClaimTemplateName": templates[node]["metadata"]["name"]}
            ]
            assert container["resources"]["claims"] == [{"name": "gpu"}]
            assert "limits" not in container["resources"]  # no extended resource in DRA mode
            assert "nodeSelector" not in pod  # the claim's node-local devices pick the node
            assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
        else:
            assert "resourceClaims" not in pod


def test_every_selector_rendered_is_in_the_evaluated_subset():
    for template in _kind(_objects(), "ResourceClaimTemplate"):
        for request in template["spec"]["spec"]["devices"]["requests"]:
            for selector in request["exactly"].get("selectors", []):
                compile_selector(selector["cel"]["expression"])


def test_names_are_scoped_by_flow_and_run_and_the_claims_carry_the_runs_labels():
    a = {t["metadata"]["name"] for t in _kind(_objects(), "ResourceClaimTemplate")}
    b = {t["metadata"]["name"] for t in _kind(_objects(run_id="r2"), "ResourceClaimTemplate")}
    c = {t["metadata"]["name"] for t in _kind(_objects(_flow("other")), "ResourceClaimTemplate")}
    assert not a & b and not a & c
    selector = dict(kv.split("=") for kv in run_selector("video", "r1").split(","))
    for template in _kind(_objects(), "ResourceClaimTemplate"):
        for labels in (template["metadata"]["labels"], template["spec"]["metadata"]["labels"]):
            assert selector.items() <= labels.items()


def test_teardown_deletes_templates_and_claims_and_apply_creates_templates_first():
    kinds = [k for k, _, _ in TEARDOWN_KINDS]
    assert kinds.index("ResourceClaimTemplate") > kinds.index("Deployment")
    assert "ResourceClaim" in kinds and {"ResourceClaimTemplate", "ResourceClaim"} <= OPTIONAL_KINDS
    ordered = [o["kind"] for o in apply_order(_objects())]
    assert ordered.index("ResourceClaimTemplate") < ordered.index("Deployment")


def test_classes_and_pins_are_options():
    objects = _objects(dra_device_class="gpu.example.com", dra_mig_device_class="gpu.example.com")
    classes = {
        t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"]
        for t in _kind(objects, "ResourceClaimTemplate")
    }
    assert classes == {"gpu.example.com"}
    pin = 'device.attributes["gpu.nvidia.com"].uuid in ["GPU-1"]'
    pinned = _objects(dra_selectors={"embed": (pin,)})
    (embed,) = [
        t for t in _kind(pinned, "ResourceClaimTemplate") if "embed" in t["metadata"]["name"]
    ]
    assert embed["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] == [
        {"cel": {"expression": pin}}
    ]
    assert with_claim_selectors(_objects(), {"embed": (pin,)}) == pinned
    with pytest.raises(InvalidInputError, match="invalid-device-class"):
        _objects(dra_device_class="GPU")
    with pytest.raises(InvalidInputError, match="dra-cel-unsupported"):
        _objects(dra_selectors={"embed": ("size(device.attributes) > 0",)})
    with pytest.raises(InvalidInputError, match="unknown-node"):
        _objects(dra_selectors={"nope": (pin,)})
