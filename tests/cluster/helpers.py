"""Objects and small API calls the control-plane tests share."""

from __future__ import annotations

import time
from typing import Any

from tests.support.kube import gpu_flow

H100 = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/gpu.count": "4",
}


def node(name: str, gpus: int) -> dict[str, Any]:
    """A Node as a kubelet would report it (the API server keeps the status sent)."""
    resources = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
        labels.update(H100)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status"}
            ],
        },
    }  # fmt: skip


def create(client: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = client.request("POST", path, body=body)
    assert answer.ok, f"POST {path}: {answer.status_line()}"
    result: dict[str, Any] = answer.body
    return result


def delete_quietly(client: Any, path: str) -> None:
    client.request("DELETE", path, body={"kind": "DeleteOptions", "apiVersion": "v1",
                                         "gracePeriodSeconds": 0})  # fmt: skip


def wait_until(check: Any, limit_s: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached within {limit_s:g} s")


def flow_file(directory: Any, name: str, gpus: int) -> Any:
    path = directory / f"{name}.py"
    path.write_text(gpu_flow(name, gpus=gpus), encoding="utf-8")
    return path
