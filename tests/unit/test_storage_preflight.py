"""Will the in-cluster broker's claim bind? (vfcore.placement.storage, issue 26 item 2).

The claim comes from the real render (the broker StatefulSet's volumeClaimTemplate), the
facts from StorageClass / PersistentVolume / PersistentVolumeClaim listings as the API
serves them.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.manifests import PIPE_BATCH, opts
from vfcore.cluster.storage import storage_facts
from vfcore.placement.storage import check_claims, claim_uses
from vfcore.runtime.manifests import render


def _class(name: str, *, default: bool = False, provisioner: str = "csi.example",
           created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "creationTimestamp": created}
    if default:
        meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return {"metadata": meta, "provisioner": provisioner}


def _volume(name: str, size: str, cls: str = "", phase: str = "Available") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": phase},
            "spec": {"storageClassName": cls, "capacity": {"storage": size},
                     "accessModes": ["ReadWriteOnce"]}}  # fmt: skip


def _facts(classes: Any = (), volumes: Any = (), claims: Any = ()) -> Any:
    def listing(kind: str, items: Any) -> Any:
        return items if isinstance(items, dict) else {"kind": kind, "items": list(items)}

    return storage_facts(
        listing("StorageClassList", classes),
        listing("PersistentVolumeList", volumes),
        listing("PersistentVolumeClaimList", claims),
    )


def _problems(facts: Any, **options: Any) -> list[str]:
    uses = claim_uses(render(PIPE_BATCH, opts(**options)))
    assert [u.created for u in uses] == [True]  # the broker's one claim
    return [f"{p.id}:{p.severity}" for p in check_claims(uses, facts, {})]


REFUSED = {"kind": "Status", "message": "storageclasses is forbidden"}


@pytest.mark.parametrize(
    ("facts", "options", "expected"),
    [
        (_facts(), {}, ["storage-no-default-class:error"]),
        (_facts([_class("slow")]), {}, ["storage-no-default-class:error"]),
        (_facts([_class("std", default=True)]), {}, []),
        (_facts([_class("slow")]), {"broker_storage_class": "slow"}, []),
        (_facts([_class("slow")]), {"broker_storage_class": "fast"}, ["storage-class-missing:error"]),
        (_facts([], [_volume("pv-big", "20Gi")]), {}, []),  # a class-less volume that holds 10Gi
        (_facts([], [_volume("pv-small", "5Gi")]), {}, ["storage-no-default-class:error"]),
        (_facts([_class("local", provisioner="kubernetes.io/no-provisioner")]),
         {"broker_storage_class": "local"}, ["storage-class-no-volume:error"]),
        (_facts([_class("local", provisioner="kubernetes.io/no-provisioner")],
                [_volume("pv-l", "10Gi", "local")]), {"broker_storage_class": "local"}, []),
        (_facts([_class("local", provisioner="kubernetes.io/no-provisioner")],
                [_volume("pv-l", "10Gi", "local", phase="Bound")]),
         {"broker_storage_class": "local"}, ["storage-class-no-volume:error"]),
        (_facts(REFUSED), {}, ["storage-unknown:warning"]),
        (_facts([], REFUSED), {}, ["storage-no-default-class:warning"]),  # volumes unknown
    ],
    ids=["nothing", "no default", "a default", "named", "named, missing", "a class-less PV",
         "a PV too small", "no-provisioner, no PV", "no-provisioner with its PV",
         "its PV already bound", "classes refused: unknown", "volumes refused: only a warning"],
)  # fmt: skip
def test_the_brokers_claim_binds_or_is_refused_with_the_fix(
    facts: Any, options: dict[str, Any], expected: list[str]
) -> None:
    assert _problems(facts, **options) == expected


def test_the_refusal_says_how_to_fix_it() -> None:
    uses = claim_uses(render(PIPE_BATCH, opts()))
    (problem,) = check_claims(uses, _facts([_class("slow"), _class("fast")]), {})
    assert "--broker-storage-class NAME (this cluster's classes: fast, slow)" in problem.hint
    assert "--broker nats://HOST:4222" in problem.hint
    assert "unbound immediate PersistentVolumeClaims" in problem.message


def test_a_redeploy_whose_claim_is_bound_needs_nothing() -> None:
    (use,) = claim_uses(render(PIPE_BATCH, opts()))
    bound = {"metadata": {"name": use.claim}, "spec": {"accessModes": ["ReadWriteOnce"]},
             "status": {"phase": "Bound"}}  # fmt: skip
    assert _problems(_facts([], [], [bound])) == []
    pending = {**bound, "status": {"phase": "Pending"}}
    assert _problems(_facts([], [], [pending])) == [
        "claim-pending:warning", "storage-no-default-class:error"]  # fmt: skip


def test_of_several_default_classes_the_newest_is_the_default() -> None:
    facts = _facts([_class("old", default=True, created="2025-01-01T00:00:00Z"),
                    _class("new", default=True, created="2026-06-01T00:00:00Z")])  # fmt: skip
    assert facts.default_class == "new"
