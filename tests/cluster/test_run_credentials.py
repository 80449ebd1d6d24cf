"""A run's Secret and NetworkPolicies on a real kube-apiserver (issue 24); skipped without one.

The objects ``vf deploy`` renders for a run's credentials and network — the
immutable Secret (the broker's configuration, one nkey seed per role, the run
key; fresh keys from :func:`generate_run_secrets`) and the NetworkPolicies (the
broker's ingress, the workers' default deny with ``--restrict-egress``) — are
server-side applied (field manager ``vf``, as ``vf deploy`` applies them) in a
namespace that enforces the *restricted* Pod Security Standard:

* the API server accepts them, and stores what was rendered;
* applying them again changes nothing; a Secret of the same name with other
  keys is refused (it is immutable: a run's keys never change under it);
* a redeploy reads the keys back (:func:`run_secrets_on_cluster`, what
  ``vf deploy`` calls) and renders the very same Secret;
* a pod made from each rendered pod template, mounting its items of the
  Secret, is admitted by PodSecurity ``restricted`` (``dryRun=All``), and the
  same pod without its security context is refused — the namespace does enforce.

No TriggerAuthentication is rendered: KEDA's nats-jetstream scaler sends no
credential (docs/security.md), so there is nothing to apply for it.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.envtest import ControlPlane
from tests.cluster.helpers import create, delete_quietly, flow_file

SECURITY_KINDS = ("Secret", "NetworkPolicy")


@pytest.fixture
def restricted_namespace(control_plane: ControlPlane, admin: Any) -> Iterator[str]:
    """A namespace of its own (no namespace controller runs: a deleted one stays
    Terminating), enforcing the restricted Pod Security Standard."""
    name = f"vf-secure-{uuid.uuid4().hex[:8]}"
    labels = {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }
    create(
        admin,
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
    )
    try:
        yield name
    finally:
        delete_quietly(admin, f"/api/v1/namespaces/{name}")


def _render(flow: Path, namespace: str, values: Any) -> tuple[dict[str, Any], ...]:
    from vfadapters.loading import load_runnable
    from vfcore.runtime.manifests import RenderOptions, render

    _, spec = load_runnable(str(flow))
    options = RenderOptions(
        image="registry.example/envsecure:1",
        run_id="r1",
        namespace=namespace,
        secret_values=values,
        restrict_egress=True,
    )
    return render(spec, options)


def _contains(stored: Any, sent: Any) -> bool:
    """Whether ``stored`` holds everything ``sent`` does (the server may add defaults)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            k in stored and _contains(stored[k], v) for k, v in sent.items()
        )
    if isinstance(sent, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(sent)
            and all(_contains(a, b) for a, b in zip(stored, sent, strict=True))
        )
    return bool(stored == sent)


def _pod_of(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The pod a controller would make from ``obj``'s template (a StatefulSet's claims
    as the volumes its controller adds)."""
    template = copy.deepcopy(obj["spec"]["template"])
    spec = template["spec"]
    for claim in obj["spec"].get("volumeClaimTemplates", []):
        name = claim["metadata"]["name"]
        spec.setdefault("volumes", []).append(
            {
                "name": name,
                "persistentVolumeClaim": {"claimName": f"{name}-{obj['metadata']['name']}-0"},
            }
        )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{obj['metadata']['name'][:50]}-0",
            "namespace": namespace,
            "labels": template["metadata"].get("labels", {}),
        },
        "spec": spec,
    }


def test_the_runs_secret_and_policies_are_accepted_and_the_secret_is_kept(
    control_plane: ControlPlane, admin: Any, restricted_namespace: str, workdir: Path
) -> None:
    from vfadapters.kubernetes.apply import apply_objects
    from vfadapters.kubernetes.client import KubeApiError, object_path
    from vfadapters.kubernetes.credentials import generate_run_secrets, run_secrets_on_cluster
    from vfadapters.loading import load_runnable
    from vfcore.runtime import broker_topology
    from vfcore.runtime.manifests import credentials_secret_name

    ns = restricted_namespace
    flow = flow_file(workdir, "envsecure", gpus=1)
    topo = broker_topology(load_runnable(str(flow))[1], "r1")
    values = generate_run_secrets(topo)
    objects = _render(flow, ns, values)
    security = [o for o in objects if o["kind"] in SECURITY_KINDS]
    assert [o["kind"] for o in security] == ["Secret", "NetworkPolicy", "NetworkPolicy"]

    report = apply_objects(admin, security)
    assert [a.outcome for a in report.applied] == ["created"] * 3
    name = credentials_secret_name("envsecure", "r1")
    stored = admin.get_json(object_path("v1", "secrets", ns, name))
    assert stored.ok, stored.status_line()
    assert stored.body["immutable"] is True and stored.body["data"] == security[0]["data"]
    for policy in security[1:]:
        path = object_path(
            "networking.k8s.io/v1", "networkpolicies", ns, policy["metadata"]["name"]
        )
        answer = admin.get_json(path)
        assert answer.ok and _contains(answer.body["spec"], policy["spec"]), answer.status_line()

    again = apply_objects(admin, security)
    assert [a.outcome for a in again.applied] == ["unchanged"] * 3

    # other keys under the run's Secret: the API server refuses to change an immutable Secret
    other = [o for o in _render(flow, ns, generate_run_secrets(topo)) if o["kind"] == "Secret"]
    with pytest.raises(KubeApiError) as refused:
        apply_objects(admin, other)
    assert refused.value.rule == "kube-apply-invalid"
    assert "immutable" in refused.value.message.lower()

    # a redeploy reads the run's keys back and renders the same Secret
    found, exists = run_secrets_on_cluster(admin, name, ns, topo, in_cluster_broker=True)
    assert exists
    assert found.seeds == values.seeds and found.run_key == values.run_key
    redeployed = [o for o in _render(flow, ns, found) if o["kind"] in SECURITY_KINDS]
    assert redeployed == security
    assert [a.outcome for a in apply_objects(admin, redeployed).applied] == ["unchanged"] * 3


def test_the_runs_pods_with_their_secret_volumes_pass_restricted_pod_security(
    control_plane: ControlPlane, admin: Any, restricted_namespace: str, workdir: Path
) -> None:
    from vfadapters.kubernetes.credentials import generate_run_secrets
    from vfadapters.loading import load_runnable
    from vfcore.runtime import broker_topology

    ns = restricted_namespace
    flow = flow_file(workdir, "envpss", gpus=1)
    values = generate_run_secrets(broker_topology(load_runnable(str(flow))[1], "r1"))
    workloads = [o for o in _render(flow, ns, values) if "template" in o.get("spec", {})]
    assert {o["kind"] for o in workloads} >= {"StatefulSet", "Job"}  # the broker, the workers
    pods_path = f"/api/v1/namespaces/{ns}/pods"
    for obj in workloads:
        pod = _pod_of(obj, ns)
        assert any("secret" in v for v in pod["spec"].get("volumes", []))
        answer = admin.request("POST", pods_path, query={"dryRun": "All"}, body=pod)
        assert answer.ok, f"{obj['kind']} {obj['metadata']['name']}: {answer.status_line()}"

    # the control: the same pod without its security context is refused by PodSecurity
    bare = _pod_of(workloads[0], ns)
    bare["spec"].pop("securityContext", None)
    for container in bare["spec"]["containers"]:
        container.pop("securityContext", None)
    answer = admin.request("POST", pods_path, query={"dryRun": "All"}, body=bare)
    assert answer.status == 403, answer.status_line()
    assert "restricted" in answer.status_line()
