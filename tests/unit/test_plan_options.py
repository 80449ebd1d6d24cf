"""PlanOptions: how plan() plans, given as one object or field by field — the same plan."""

from __future__ import annotations

import dataclasses
import json
from typing import get_type_hints

import pytest

from vfcore import ClusterSnapshot, FlowSpec, GpuMode, NodeSpec, PlanOptions, plan, plan_pods
from vfcore.cluster import node
from vfcore.placement import PlanOptions as FacePlanOptions
from vfcore.placement.claims import pod_requests
from vfcore.placement.packing import SolverConfig
from vfcore.placement.plan import PlanSettings

CONFIG = SolverConfig.deterministic()


def _flow() -> FlowSpec:
    return FlowSpec(
        "f",
        "batch",
        (
            NodeSpec("src", "producer"),
            NodeSpec("det", "processor", ("src",), nb_tasks=2, device_type="gpu", gpu_count=1),
            NodeSpec("sink", "consumer", ("det",)),
        ),
    )


def _cluster() -> ClusterSnapshot:
    return ClusterSnapshot.of(
        [
            node(
                n,
                allocatable={"cpu": 8000, "memory": 2**34, "pods": 110, "nvidia.com/gpu": 1},
                labels={"nvidia.com/gpu.present": "true"},
            )
            for n in ("a", "b")
        ]
    )


def _doc(result: object) -> str:
    """The plan's document without wall-clock times (the one thing two runs may differ in)."""

    def timeless(value: object) -> object:
        if isinstance(value, dict):
            return {k: timeless(v) for k, v in value.items() if not k.startswith("wall")}
        if isinstance(value, list):
            return [timeless(v) for v in value]
        return value

    return json.dumps(timeless(result.to_dict()), sort_keys=True)  # type: ignore[attr-defined]


def test_the_settings_are_the_options_fields_one_to_one():
    assert FacePlanOptions is PlanOptions
    fields = {f.name for f in dataclasses.fields(PlanOptions)}
    assert set(get_type_hints(PlanSettings)) == fields


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"predict_scheduler": False, "solver": CONFIG},
        {"gpu_mode": "shared", "resources": {"det": {"cpu": "2"}}, "kube_version": "1.29"},
        {"gpu_mode": GpuMode.EXCLUSIVE, "gpu_node_selector": ("pool", "gpu")},
    ],
    ids=["defaults", "no-scheduler-model", "shared-with-overrides", "selector"],
)
def test_options_and_keywords_give_the_same_plan(settings):
    spec, cluster = _flow(), _cluster()
    by_keywords = plan(spec, cluster, **settings)
    by_options = plan(spec, cluster, PlanOptions(**settings))
    assert _doc(by_options) == _doc(by_keywords)
    pods = pod_requests(spec, gpu_mode=settings.get("gpu_mode", "exclusive"))
    assert _doc(plan_pods(pods, cluster, PlanOptions(**settings))) == _doc(
        plan_pods(pods, cluster, **settings)
    )


def test_a_keyword_replaces_that_field_of_the_options():
    spec, cluster = _flow(), _cluster()
    options = PlanOptions(gpu_mode="shared", predict_scheduler=False)
    result = plan(spec, cluster, options, gpu_mode="exclusive")
    assert result.gpu_mode is GpuMode.EXCLUSIVE and result.scheduler is None
    assert options.gpu_mode == "shared"  # the options are not changed


def test_an_unknown_keyword_is_refused():
    with pytest.raises(TypeError):
        plan(_flow(), _cluster(), gpu_modes="mix")  # type: ignore[call-arg]
