"""What a production deploy sets on the pods (issue 26, items 5, 6 and 9): volumes, scratch,
image pull policy and secrets, an image per node, a PriorityClass — rendered, checked, and
the preflight's pure halves (claims' access modes, references that must exist)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.manifest_schemas import check_any
from tests.support.manifests import GPU, PIPE_BATCH, PIPE_RT, of_node, opts, pod_spec, worker
from vfcore import InvalidInputError
from vfcore.cluster.storage import storage_facts
from vfcore.placement.storage import check_claims, claim_uses
from vfcore.runtime.manifests import render
from vfcore.runtime.pod_options import WorkerVolume, parse_volume
from vfcore.runtime.references import check_references, pod_references

#: Volume types the restricted Pod Security Standard allows (pod-security-standards).
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip

WORKLOADS = ("Job", "Deployment", "StatefulSet")


def templates(objs: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    return [pod_spec(o) for o in objs if o["kind"] in WORKLOADS]


def mounts(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["mountPath"]: m for m in container["volumeMounts"]}


def volume_of(spec: dict[str, Any], mount: dict[str, Any]) -> dict[str, Any]:
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    return volume


# -- parsing ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        ("pvc", "videos:/data", WorkerVolume("pvc", "videos", "/data")),
        ("pvc", "videos:/data:ro", WorkerVolume("pvc", "videos", "/data", True)),
        ("pvc", "det=out:/out", WorkerVolume("pvc", "out", "/out", False, "det")),
        (
            "configmap",
            "models:/etc/models",
            WorkerVolume("configmap", "models", "/etc/models", True),
        ),
        ("secret", "det=keys:/keys:ro", WorkerVolume("secret", "keys", "/keys", True, "det")),
    ],
    ids=["claim read-write", "claim :ro", "one node's", "configmap read-only", "secret of a node"],
)
def test_volume_flags_parse(kind: str, text: str, expected: WorkerVolume) -> None:
    assert parse_volume(kind, text) == expected


@pytest.mark.parametrize(
    ("kind", "text", "said"),
    [
        ("pvc", "videos", "is not [NODE=]CLAIM:PATH[:ro]"),
        ("pvc", "=videos:/data", "is not [NODE=]CLAIM:PATH[:ro]"),
        ("pvc", "Videos:/data", "is not a Kubernetes object name"),
        ("pvc", "videos:data", "is not an absolute path"),
        ("pvc", "videos:/a/../etc", "is not an absolute path"),
        ("pvc", "videos:/etc/vf/credentials", "where vf mounts the run's credentials"),
        ("pvc", "videos:/etc", "where vf mounts the run's credentials"),  # /etc/vf is inside
        ("configmap", "models", "is not [NODE=]NAME:PATH"),
    ],
    ids=["no path", "empty node", "capitals", "relative", "dot-dot", "on vf's", "around vf's",
         "configmap without path"],
)  # fmt: skip
def test_bad_volume_flags_are_invalid_mount(kind: str, text: str, said: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        parse_volume(kind, text)
    assert err.value.rule == "invalid-mount" and said in str(err.value)


@pytest.mark.parametrize(
    ("options", "rule"),
    [
        ({"volumes": (parse_volume("pvc", "a:/data"), parse_volume("secret", "b:/data/x"))},
         "invalid-mount"),
        ({"volumes": (parse_volume("pvc", "a:/scratch"),), "scratch": "1Gi"}, "invalid-mount"),
        ({"scratch": "0"}, "invalid-scratch"),
        ({"scratch": "lots"}, "invalid-scratch"),
        ({"image_pull_policy": "always"}, "invalid-image-pull-policy"),
        ({"image_pull_secrets": ("Reg_Cred",)}, "invalid-image-pull-secret"),
        ({"image_overrides": {"det": "Reg/Img:1"}}, "invalid-image"),
        ({"priority_class": "High Priority"}, "invalid-priority-class"),
    ],
    ids=["two mounts nested in one pod", "a mount on /scratch", "zero scratch", "no quantity",
         "policy in lowercase", "secret not a name", "override not an image", "class not a name"],
)  # fmt: skip
def test_bad_pod_options_are_refused_with_their_rule(options: dict[str, Any], rule: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        opts(**options)
    assert err.value.rule == rule


def test_the_same_path_on_two_different_nodes_is_fine() -> None:
    options = opts(volumes=(parse_volume("pvc", "det=a:/data"), parse_volume("pvc", "out=b:/data")))
    assert len(options.volumes) == 2


@pytest.mark.parametrize("field", ["image_overrides", "volumes"])
def test_a_node_the_flow_does_not_have_is_unknown_node(field: str) -> None:
    value: Any = (
        {"nope": "reg.example/gpu:1"}
        if field == "image_overrides"
        else (parse_volume("pvc", "nope=a:/data"),)
    )
    with pytest.raises(InvalidInputError) as err:
        render(PIPE_BATCH, opts(**{field: value}))
    assert err.value.rule == "unknown-node" and "'nope'" in str(err.value)


# -- rendering ------------------------------------------------------------------------


def test_volumes_and_scratch_are_mounted_in_the_workers_they_name() -> None:
    volumes = (
        parse_volume("pvc", "videos:/data:ro"),
        parse_volume("configmap", "models:/models"),
        parse_volume("secret", "det=keys:/keys"),
    )
    objs = render(PIPE_BATCH, opts(volumes=volumes, scratch="20Gi"))
    det = pod_spec(of_node(objs, "det", "Job")[0])
    out = pod_spec(of_node(objs, "out", "Job")[0])
    for spec, has_keys in ((det, True), (out, False)):
        (container,) = spec["containers"]
        found = mounts(container)
        assert volume_of(spec, found["/data"])["persistentVolumeClaim"] == {
            "claimName": "videos", "readOnly": True}  # fmt: skip
        assert found["/data"]["readOnly"] is True
        assert volume_of(spec, found["/models"])["configMap"] == {"name": "models"}
        assert found["/models"]["readOnly"] is True
        assert volume_of(spec, found["/scratch"])["emptyDir"] == {"sizeLimit": "20Gi"}
        assert ("/keys" in found) is has_keys
        assert "/etc/vf/credentials" in found  # vf's own mount stays
        assert {k for v in spec["volumes"] for k in v if k != "name"} <= RESTRICTED_VOLUMES
        (init,) = spec["initContainers"]
        assert all(m["mountPath"].startswith("/etc/vf/") for m in init["volumeMounts"])
    for obj in objs:
        check_any(obj, "1.36")
    # the setup Job and the broker get none of them
    setup = [o for o in objs if o["kind"] == "Job" and "setup" in o["metadata"]["name"]]
    assert [m["mountPath"] for m in worker(setup[0])["volumeMounts"]] == ["/etc/vf/setup"]


def test_images_pull_policy_secrets_and_overrides() -> None:
    objs = render(
        GPU,
        opts(
            gpu_runtime_class="nvidia",
            image_pull_policy="IfNotPresent",
            image_pull_secrets=("regcred", "mirror", "regcred"),
            image_overrides={"det": "registry.example/demo-gpu:1@sha256:" + "a" * 64},
        ),
    )
    specs = templates(objs)
    assert len(specs) == 1 + 1 + 4  # broker, setup Job, four nodes
    for spec in specs:
        assert spec["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror"}]
    det = pod_spec(of_node(objs, "det", "Job")[0])
    (init,) = det["initContainers"]
    assert det["containers"][0]["image"].startswith("registry.example/demo-gpu:1@sha256:")
    assert init["image"] == det["containers"][0]["image"]  # its own image sets the topology up
    pose = pod_spec(of_node(objs, "pose", "Job")[0])
    assert pose["containers"][0]["image"] == "registry.example/demo:1"
    for spec in specs:
        for c in spec["containers"] + spec.get("initContainers", []):
            if c["image"].startswith("registry.example/"):
                assert c["imagePullPolicy"] == "IfNotPresent"
            else:  # the broker's nats image keeps Kubernetes' default
                assert "imagePullPolicy" not in c
    for obj in objs:
        check_any(obj, "1.36")


def test_without_the_options_nothing_changes() -> None:
    plain = render(PIPE_RT, opts())
    for spec in templates(plain):
        assert "priorityClassName" not in spec and "imagePullSecrets" not in spec
        for c in spec["containers"]:
            assert "imagePullPolicy" not in c
    assert render(PIPE_RT, opts(volumes=(), image_pull_secrets=())) == plain


def test_priority_class_is_on_every_pod_of_the_run() -> None:
    objs = render(PIPE_RT, opts(priority_class="video-high"))
    specs = templates(objs)
    assert len(specs) == 1 + 1 + 5
    assert {s.get("priorityClassName") for s in specs} == {"video-high"}


# -- the preflight's pure halves ------------------------------------------------------


def _claims(*claims: tuple[str, list[str], str]) -> Any:
    items = [
        {"metadata": {"name": name}, "spec": {"accessModes": modes,
         "resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": phase}}
        for name, modes, phase in claims
    ]  # fmt: skip
    return storage_facts(
        {"kind": "StorageClassList", "items": []},
        {"kind": "PersistentVolumeList", "items": []},
        {"kind": "PersistentVolumeClaimList", "items": items},
    )


#: det/0 on gpu-a, det/1 and det/2 on gpu-b; out/0 on cpu-1 (one pod per other node).
HOSTS = {"cam/0": "cpu-1", "det/0": "gpu-a", "det/1": "gpu-b", "det/2": "gpu-b",
         "one/0": "cpu-1", "trk/0": "cpu-1", "trk/1": "cpu-1", "out/0": "cpu-1"}  # fmt: skip


BROKER = "nats://nats.example:4222"  # no broker StatefulSet, so no claim of its own


def _problems(flag: str, text: str, facts: Any, hosts: dict[str, str] = HOSTS) -> list[str]:
    kind = {"--mount-pvc": "pvc"}[flag]
    objs = render(PIPE_BATCH, opts(volumes=(parse_volume(kind, text),), broker_url=BROKER))
    return sorted(f"{p.id}:{p.severity}" for p in check_claims(claim_uses(objs), facts, hosts))


@pytest.mark.parametrize(
    ("modes", "text", "expected"),
    [
        (["ReadWriteOnce"], "data:/d", ["claim-access-mode:error"]),  # every node: 3 hosts
        (["ReadWriteOnce"], "out=data:/d", []),  # one pod on one node
        (["ReadWriteOnce"], "trk=data:/d", []),  # two pods, one node: RWO allows it
        (["ReadWriteOnce"], "det=data:/d", ["claim-access-mode:error"]),  # 3 pods, 2 nodes
        (["ReadWriteMany"], "data:/d", []),
        (["ReadWriteOncePod"], "out=data:/d", []),
        (["ReadWriteOncePod"], "trk=data:/d", ["claim-access-mode:error"]),  # 2 pods
        (["ReadOnlyMany"], "data:/d", ["claim-read-only:error"]),
        (["ReadOnlyMany"], "data:/d:ro", []),
        (["ReadWriteOnce", "ReadOnlyMany"], "data:/d:ro", []),
    ],
    ids=["RWO on every node", "RWO one pod", "RWO two pods one host", "RWO two hosts", "RWX",
         "RWOP one pod", "RWOP two pods", "ROX read-write", "ROX read-only", "RWO+ROX read-only"],
)  # fmt: skip
def test_a_mounted_claims_access_modes_against_the_plan(
    modes: list[str], text: str, expected: list[str]
) -> None:
    assert _problems("--mount-pvc", text, _claims(("data", modes, "Bound"))) == expected


def test_a_claim_that_is_not_there_or_not_bound() -> None:
    facts = _claims(("data", ["ReadWriteMany"], "Pending"))
    assert _problems("--mount-pvc", "data:/d", facts) == ["claim-pending:warning"]
    assert _problems("--mount-pvc", "other:/d", facts) == ["claim-not-found:error"]
    refused = storage_facts(None, None, {"kind": "Status", "message": "forbidden"})
    assert _problems("--mount-pvc", "data:/d", refused) == ["storage-unknown:warning"]


def test_the_access_mode_message_counts_every_node_that_mounts_the_claim() -> None:
    objs = render(PIPE_BATCH, opts(volumes=(parse_volume("pvc", "data:/d"),), broker_url=BROKER))
    (problem,) = check_claims(
        claim_uses(objs), _claims(("data", ["ReadWriteOnce"], "Bound")), HOSTS
    )
    assert "8 pods of" in problem.message and "on 3 nodes (cpu-1, gpu-a, gpu-b)" in problem.message
    assert "--mount-pvc NODE=CLAIM:PATH" in problem.hint


def test_references_are_what_the_pods_name_and_the_render_does_not_hold() -> None:
    objs = render(
        PIPE_BATCH,
        opts(
            volumes=(parse_volume("configmap", "models:/m"), parse_volume("secret", "det=k:/k")),
            image_pull_secrets=("regcred",),
            priority_class="video-high",
        ),
    )
    from vfcore.runtime.manifests import credentials_secret_name

    own = credentials_secret_name(PIPE_BATCH.name, "r1")
    assert ("Secret", own) in {(r.kind, r.name) for r in pod_references(objs)}  # not rendered
    refs = pod_references(objs, own_secrets=[own])
    assert [(r.kind, r.name, r.how) for r in refs] == [
        ("ConfigMap", "models", "mounted"),
        ("PriorityClass", "video-high", "priority-class"),
        ("Secret", "k", "mounted"),
        ("Secret", "regcred", "image-pull-secret"),
    ]
    (det,) = of_node(objs, "det", "Job")
    assert refs[2].users == (f"job/{det['metadata']['name']}",)  # the one node that mounts it
    assert len(refs[0].users) == len(PIPE_BATCH.nodes)  # every node's workload mounts models
    assert len(refs[1].users) == len(PIPE_BATCH.nodes) + 2  # and the setup Job and the broker


@pytest.mark.parametrize(
    ("kind", "how", "state", "expected"),
    [
        ("ConfigMap", "mounted", False, "configmap-not-found:error"),
        ("Secret", "mounted", False, "secret-not-found:error"),
        ("PriorityClass", "priority-class", False, "priority-class-not-found:error"),
        ("Secret", "image-pull-secret", False, "image-pull-secret-not-found:warning"),
        ("ConfigMap", "mounted", "GET …: 403 Forbidden", "reference-unknown:warning"),
        ("ConfigMap", "mounted", True, None),
    ],
    ids=["configmap missing", "secret missing", "priority class missing", "pull secret missing",
         "unreadable is unknown", "there"],
)  # fmt: skip
def test_what_a_missing_reference_means(
    kind: str, how: str, state: bool | str, expected: str | None
) -> None:
    from vfcore.runtime.references import Reference

    ref = Reference(kind, "x", how, ("job/w",))  # type: ignore[arg-type]
    found = check_references((ref,), {(kind, "x"): state}, "video")
    assert [f"{p.id}:{p.severity}" for p in found] == ([expected] if expected else [])
    assert check_references((ref,), {}, "video")[0].id == "reference-unknown"  # never "exists"


@pytest.mark.parametrize(
    ("modes", "keda", "expected"),
    [
        (["ReadWriteOnce"], False, []),
        (["ReadWriteOnce"], True, ["claim-access-mode:warning"]),
        (["ReadWriteOncePod"], False, []),
        (["ReadWriteOncePod"], True, ["claim-access-mode:error"]),
        (["ReadWriteMany"], True, []),
    ],
    ids=["RWO fixed", "RWO scaled: may spread", "RWOP fixed", "RWOP scaled: a second pod",
         "RWX scaled"],
)  # fmt: skip
def test_a_node_keda_scales_may_outgrow_the_plans_hosts(
    modes: list[str], keda: bool, expected: list[str]
) -> None:
    objs = render(
        PIPE_RT, opts(keda=keda, broker_url=BROKER, volumes=(parse_volume("pvc", "one=data:/d"),))
    )
    assert any(o["kind"] == "ScaledObject" for o in objs) is keda
    found = check_claims(claim_uses(objs), _claims(("data", modes, "Bound")), HOSTS)
    assert [f"{p.id}:{p.severity}" for p in found] == expected
    if expected:
        assert "KEDA may add replicas of one" in found[0].message
