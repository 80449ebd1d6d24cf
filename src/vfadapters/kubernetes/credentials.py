"""A deployed run's secret values: made here (randomness is I/O), rendered by vfcore.

:func:`generate_run_secrets` makes one nkey seed per role of the run (``admin``,
``setup``, one per node) and a 32-byte run key, all from ``os.urandom``, as a
:class:`vfcore.runtime.run_security.RunSecrets`; :func:`vfcore.render` puts them
into the run's Secret. :func:`run_secrets_on_cluster` reads the Secret a
previous ``vf deploy`` of the same run applied and gives its values back (a run's
keys never change under it: the broker and the running pods hold them), or
generates new ones when there is none. Nothing here prints a value; errors name
the Secret, never its content.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from typing import Any

from vfadapters.kubernetes.client import KubeApiError, object_path
from vfcore.runtime import (
    ROUTE_PASSWORD_KEY,
    RUN_KEY,
    RUN_KEY_BYTES,
    BrokerTopology,
    RunSecrets,
    run_roles,
    seed_key,
)

__all__ = ["generate_run_secrets", "run_secrets_on_cluster"]


def generate_run_secrets(topo: BrokerTopology) -> RunSecrets:
    """Fresh keys for every role of ``topo`` and a fresh run key."""
    from vfadapters.broker.credentials import generate_run_keys, public_key

    seeds = generate_run_keys(topo)
    return RunSecrets(
        seeds=seeds,
        public_keys={role: public_key(seed) for role, seed in seeds.items()},
        run_key=os.urandom(RUN_KEY_BYTES),
        # rendered only for a clustered broker (--broker-replicas 3): its routes' password
        route_password=secrets.token_hex(32),
    )


def _from_secret(topo: BrokerTopology, data: dict[str, Any], *, with_seeds: bool) -> RunSecrets:
    from vfadapters.broker.credentials import public_key

    def value(key: str) -> bytes:
        raw = data.get(key)
        if not isinstance(raw, str):
            raise KeyError(key)
        return base64.b64decode(raw, validate=True)

    seeds: dict[str, str] = {}
    if with_seeds:
        for role in run_roles(topo):
            seeds[role] = value(seed_key(role, flow=topo.flow, run_id=topo.run_id)).decode("ascii")
    route = data.get(ROUTE_PASSWORD_KEY)  # a clustered broker's; absent for one server
    return RunSecrets(
        seeds=seeds,
        public_keys={role: public_key(seed) for role, seed in seeds.items()},
        run_key=value(RUN_KEY),
        route_password=value(ROUTE_PASSWORD_KEY).decode("ascii") if route else None,
    )


def run_secrets_on_cluster(
    client: Any, name: str, namespace: str, topo: BrokerTopology, *, in_cluster_broker: bool
) -> tuple[RunSecrets, bool]:
    """``(values, found)``: the values of Secret ``name`` when it exists (``found``), else new ones.

    A Secret that exists but lacks a role's key (the flow gained a node since) or
    holds something unreadable is ``run-secret-mismatch``: its run's keys cannot
    change under it (the Secret is immutable), so the run must be torn down first.
    """
    answer = client.get_json(object_path("v1", "secrets", namespace, name))
    if answer.status == 404:
        return generate_run_secrets(topo), False
    if not answer.ok:
        raise KubeApiError(
            "kube-secret-unreadable",
            f"reading Secret {name} in {namespace} (the run's credentials) failed: "
            f"{answer.status_line()}",
            "vf deploy needs get and create on secrets in the namespace (docs/kubernetes.md, RBAC)",
        )
    data = (answer.body or {}).get("data") or {}
    try:
        values = _from_secret(topo, dict(data), with_seeds=in_cluster_broker)
    except (KeyError, ValueError, binascii.Error, UnicodeDecodeError) as exc:
        missing = f" (no key {exc.args[0]!r})" if isinstance(exc, KeyError) else ""
        raise KubeApiError(
            "run-secret-mismatch",
            f"Secret {name} in {namespace} holds other credentials than run {topo.run_id} of "
            f"flow {topo.flow!r} needs{missing}: the flow changed since it was deployed, or "
            "the Secret was made by hand",
            f"tear the run down first (vf teardown FLOW --run {topo.run_id}), or deploy "
            "under a new --run",
        ) from None
    except Exception as exc:  # a seed that is none (vf's own check, named)
        raise KubeApiError(
            "run-secret-mismatch",
            f"Secret {name} in {namespace} holds a value that is not a NATS seed "
            f"({getattr(exc, 'rule', type(exc).__name__)})",
            f"tear the run down first (vf teardown FLOW --run {topo.run_id}), or deploy "
            "under a new --run",
        ) from None
    return values, True
