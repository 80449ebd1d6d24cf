"""Offline validation of rendered Kubernetes objects (shared by the manifest tests).

``check_k8s(obj, version)``: the official OpenAPI schemas that ``kubernetes-validate``
bundles, in *strict* mode (unknown fields refused), for Kubernetes ``version``
(1.31 … 1.36). It is ``kubernetes_validate.validate(obj, version, strict=True)``
with the compiled validator kept per (version, kind) — the package re-reads its
multi-megabyte definitions file on every call. ``check_keda(obj)``: a
ScaledObject against KEDA's CRD schema (``tests/data/keda.sh_scaledobjects.yaml``,
a copy of kedacore/keda @8b4f083c), unknown fields refused as in strict mode.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import schema_contents
from referencing import Registry, Resource

KUBE_VERSIONS = ("1.31", "1.32", "1.33", "1.34", "1.35", "1.36")
KEDA_CRD = Path(__file__).resolve().parent / "data" / "keda.sh_scaledobjects.yaml"


def bundled_versions() -> set[str]:
    """The minor versions kubernetes-validate bundles schemas for."""
    return {".".join(v.split(".")[:2]) for v in kubernetes_validate.utils.all_versions()}


@functools.cache
def _k8s_validator(version: str, kind: str, api_version: str) -> Any:
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema_dir = f"v{version}.0-local-strict"
    schema = schema_contents(
        f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group}.json", version
    )
    definitions = schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", version)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def check_k8s(obj: dict[str, Any], version: str) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``obj`` is valid (strict) for ``version``."""
    _k8s_validator(version, obj["kind"], obj["apiVersion"]).validate(obj)


def _strict(schema: Any) -> Any:
    """The schema with unknown fields refused wherever it lists the known ones (the API
    server would prune them silently: a misspelt field would just vanish)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@functools.cache
def _keda_validator() -> Any:
    crd = yaml.safe_load(KEDA_CRD.read_text(encoding="utf-8"))
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return jsonschema.Draft202012Validator(_strict(version["schema"]["openAPIV3Schema"]))


def check_keda(obj: dict[str, Any]) -> None:
    assert obj["apiVersion"] == "keda.sh/v1alpha1" and obj["kind"] == "ScaledObject"
    _keda_validator().validate(obj)


def check_any(obj: dict[str, Any], version: str) -> None:
    if obj["kind"] == "ScaledObject":
        check_keda(obj)
    else:
        check_k8s(obj, version)
