"""A run's credentials and network policy as Kubernetes data: what :func:`vfcore.render` adds.

One **Secret** per run (:func:`vfcore.runtime.manifests.credentials_secret_name`) holds everything secret
of the run, each under its own key (:data:`CONFIG_KEY`, :data:`RUN_KEY`,
:func:`seed_key`): the NATS server's configuration (``nats.conf``: ports, the
JetStream store and the ``authorization`` block of
:func:`vfcore.runtime.render_authorization`, public keys only), one nkey seed
per role (``admin.nk``, ``setup.nk``, ``<node object name>.nk``) and the run's
MAC key (``run-key``, 32 random bytes). Every pod mounts only the keys its
role needs (a projected list of ``items``), never the whole Secret, and finds
them through ``VF_BROKER_NKEY_FILE`` / ``VF_RUN_KEY_FILE``; no value is ever a
literal in a pod spec.

The values come from outside (:class:`RunSecrets`: randomness is I/O, so
``vf deploy`` generates them); :func:`vfcore.render` renders the Secret only
when given them, and otherwise only refers to it by name — the way a GitOps
render keeps secrets out of its files (docs/security.md).

**NetworkPolicies** (:func:`network_policies`): the broker accepts its client
port only from the run's own pods and its monitoring port only from the
namespace KEDA runs in; nothing may connect to a worker (they only pull), and
with ``restrict_egress`` a worker may reach only the broker and DNS.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from vfcore.errors import InvalidInputError, brief
from vfcore.flow.names import physical_name
from vfcore.runtime.broker_auth import (
    ADMIN_ROLE,
    SETUP_ROLE,
    BrokerUser,
    broker_permissions,
    is_user_nkey,
    node_role,
    render_authorization,
    run_roles,
)
from vfcore.runtime.topology import BrokerTopology

__all__ = [
    "BROKER_ROUTE_PORT",
    "CONFIG_KEY",
    "CREDENTIALS_DIR",
    "NATS_CONFIG_DIR",
    "ROUTE_PASSWORD_KEY",
    "ROUTE_USER",
    "RUN_KEY",
    "RUN_KEY_BYTES",
    "SETUP_DIR",
    "BrokerCluster",
    "RunSecrets",
    "cluster_block",
    "seed_key",
    "server_config",
]

#: The Secret's key holding the NATS server's configuration file.
CONFIG_KEY: Final = "nats.conf"
#: The Secret's key holding the run's MAC key (the lead's records are signed with it).
RUN_KEY: Final = "run-key"
#: How long a run key is, in bytes.
RUN_KEY_BYTES: Final = 32
#: Where a worker container finds its node's seed (``node.nk``) and the run key.
CREDENTIALS_DIR: Final = "/etc/vf/credentials"
#: Where the setup container (the setup Job, a worker's init container) finds its own.
SETUP_DIR: Final = "/etc/vf/setup"
#: Where the broker finds its configuration.
NATS_CONFIG_DIR: Final = "/etc/nats"
#: The Secret's key holding the password of the broker cluster's routes.
ROUTE_PASSWORD_KEY: Final = "route-password"
#: The shortest route password :class:`RunSecrets` takes.
ROUTE_PASSWORD_MIN: Final = 32
#: The user name every route of the run's broker cluster presents.
ROUTE_USER: Final = "vf-route"
#: The port the broker's servers route to each other on (NATS' default).
BROKER_ROUTE_PORT: Final = 6222


@dataclass(frozen=True, slots=True)
class BrokerCluster:
    """The JetStream cluster block of the broker's ``nats.conf`` (``--broker-replicas 3``).

    ``name``: the cluster's name (every server the same); ``routes``: ``host:port`` of
    every server's route listener, itself included (a server ignores its own);
    ``server_name``: this server's name, unique in the cluster — ``$POD_NAME``, which
    nats-server reads from the environment when the file does not define it (each
    pod of the StatefulSet has its own). Routes authenticate with
    :data:`ROUTE_USER` and the run's route password: a server that does not know
    it cannot join the cluster (and so cannot read a stream).

    >>> print(cluster_block(BrokerCluster("vf-b", ("b-0.b-hl:6222", "b-1.b-hl:6222")), "x" * 32))
    server_name: $POD_NAME
    cluster {
      name: "vf-b"
      port: 6222
      authorization {
        user: "vf-route"
        password: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        timeout: 2
      }
      routes: [
        "nats://vf-route:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx@b-0.b-hl:6222"
        "nats://vf-route:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx@b-1.b-hl:6222"
      ]
    }
    <BLANKLINE>
    """

    name: str
    routes: tuple[str, ...]
    port: int = BROKER_ROUTE_PORT
    server_name: str = "$POD_NAME"
    host: str | None = None  # the route listener's address (None: every interface)


def cluster_block(cluster: BrokerCluster, password: str) -> str:
    """The ``server_name`` line and ``cluster { … }`` block for ``cluster`` (see there)."""
    routes = "".join(f'    "nats://{ROUTE_USER}:{password}@{r}"\n' for r in cluster.routes)
    return (
        f"server_name: {cluster.server_name}\n"
        "cluster {\n"
        f'  name: "{cluster.name}"\n'
        + (f'  host: "{cluster.host}"\n' if cluster.host is not None else "")
        + f"  port: {int(cluster.port)}\n"
        "  authorization {\n"
        f'    user: "{ROUTE_USER}"\n'
        f'    password: "{password}"\n'
        "    timeout: 2\n"
        "  }\n"
        "  routes: [\n"
        f"{routes}"
        "  ]\n"
        "}\n"
    )


def seed_key(role: str, *, flow: str, run_id: str) -> str:
    """The Secret's key holding ``role``'s nkey seed: ``admin.nk``, ``setup.nk``, ``<node>.nk``.

    A node's key is its physical Kubernetes name (a DNS label: a valid Secret key,
    distinct for distinct nodes, whatever their names).
    """
    if role in (ADMIN_ROLE, SETUP_ROLE):
        return f"{role}.nk"
    node = role.split(":", 1)[1]
    return f"{physical_name(node, flow=flow, run=run_id).k8s}.nk"


@dataclass(frozen=True, slots=True)
class RunSecrets:
    """The secret values of one run, as ``vf deploy`` generated (or found) them.

    ``seeds``: role → nkey seed (``SU…``), ``public_keys``: role → its public key
    (``U…``), for every role of the run (:func:`vfcore.runtime.run_roles`);
    ``run_key``: :data:`RUN_KEY_BYTES` random bytes. Secrets are left out of
    ``repr()``; there is no ``to_dict()``.
    """

    seeds: Any = field(repr=False)
    public_keys: Any
    run_key: bytes = field(repr=False)
    #: the password of the broker cluster's routes (``--broker-replicas 3``): random
    #: letters and digits, at least 32; ``None`` for a single server
    route_password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        s = object.__setattr__
        for name in ("seeds", "public_keys"):
            value = getattr(self, name)
            if isinstance(value, Mapping):
                value = tuple(sorted(value.items()))
            if not isinstance(value, tuple) or not all(
                isinstance(p, tuple) and len(p) == 2 and all(isinstance(x, str) for x in p)
                for p in value
            ):
                raise InvalidInputError(
                    "invalid-run-secrets",
                    f"RunSecrets.{name} is not a mapping of role to text",
                    "pass {'admin': ..., 'setup': ..., 'node:<name>': ...}",
                )
            s(self, name, value)
        if set(dict(self.seeds)) != set(dict(self.public_keys)):
            raise InvalidInputError(
                "invalid-run-secrets",
                "RunSecrets: the roles with a seed and the roles with a public key differ",
                "give each role's seed and its public key",
            )
        for role, key in self.public_keys:
            if not is_user_nkey(key):
                raise InvalidInputError(
                    "invalid-run-secrets",
                    f"the public key of role {role} is {brief(key)}, not a NATS user key",
                    "give nkeys' KeyPair.public_key of the role's seed",
                )
        for role, seed in self.seeds:
            # the shape only (vfcore cannot check a signature): never echo the value
            if not (seed.startswith("SU") and len(seed) == 58 and seed.isalnum()):
                raise InvalidInputError(
                    "invalid-run-secrets",
                    f"the seed of role {role} is not a NATS user seed ('SU' and 56 more)",
                    "generate it with nkeys.encode_seed(os.urandom(32), PREFIX_BYTE_USER)",
                )
        if self.route_password is not None and not (
            isinstance(self.route_password, str)
            and len(self.route_password) >= ROUTE_PASSWORD_MIN
            and self.route_password.isascii()
            and self.route_password.isalnum()
        ):
            raise InvalidInputError(
                "invalid-run-secrets",
                f"the route password must be at least {ROUTE_PASSWORD_MIN} ASCII letters "
                "and digits (it is written into route URLs)",
                "use secrets.token_hex(32)",
            )
        if not isinstance(self.run_key, bytes) or len(self.run_key) != RUN_KEY_BYTES:
            raise InvalidInputError(
                "invalid-run-secrets",
                f"the run key must be {RUN_KEY_BYTES} bytes",
                f"use os.urandom({RUN_KEY_BYTES})",
            )

    def check_roles(self, topo: BrokerTopology) -> None:
        """Raise ``invalid-run-secrets`` unless there is a key for every role of ``topo``."""
        missing = [r for r in run_roles(topo) if r not in dict(self.seeds)]
        if missing:
            raise InvalidInputError(
                "invalid-run-secrets",
                f"no key for roles {missing} of run {topo.run_id}",
                "generate one seed per role of the run (vfcore.runtime.run_roles)",
            )


def server_config(
    topo: BrokerTopology,
    public_keys: Mapping[str, str],
    *,
    port: int,
    http_port: int,
    cluster: BrokerCluster | None = None,
    route_password: str | None = None,
    store_dir: str = "/data",
) -> str:
    """The in-cluster server's ``nats.conf``: ports, JetStream in ``/data``, the users,
    and with ``cluster`` its routes (:func:`cluster_block`, ``route_password`` needed).

    Public keys only (the server checks signatures against them); the text is
    kept in the run's Secret with the seeds, because it is generated with them.
    """
    users = [BrokerUser(public_keys[r], broker_permissions(topo, r)) for r in run_roles(topo)]
    head = (
        "# vf: the run's NATS server (docs/security.md)\n"
        f"port: {int(port)}\n"
        f"http_port: {int(http_port)}\n"
        f'jetstream {{\n  store_dir: "{store_dir}"\n}}\n'
    )
    if cluster is not None:
        if route_password is None:
            raise InvalidInputError(
                "invalid-run-secrets",
                f"the broker of run {topo.run_id} is a cluster of {len(cluster.routes)} "
                "servers, but the run's secrets hold no route password (the run was "
                "deployed with a single server: a run's broker keeps its size)",
                "deploy the clustered broker as a new run (--run ID), or tear this run down "
                "first (vf teardown FLOW --run ID)",
            )
        head += cluster_block(cluster, route_password)
    return head + render_authorization(users)


def secret_data(
    topo: BrokerTopology,
    secrets: RunSecrets,
    *,
    in_cluster_broker: bool,
    port: int,
    http_port: int,
    cluster: BrokerCluster | None = None,
) -> dict[str, str]:
    """The Secret's ``data`` (base64): the run key, and with an in-cluster broker its
    configuration and every role's seed (and with ``cluster``, the route password)."""
    data = {RUN_KEY: base64.b64encode(secrets.run_key).decode("ascii")}
    if in_cluster_broker:
        secrets.check_roles(topo)
        keys = dict(secrets.public_keys)
        config = server_config(
            topo,
            keys,
            port=port,
            http_port=http_port,
            cluster=cluster,
            route_password=secrets.route_password,
        )
        data[CONFIG_KEY] = base64.b64encode(config.encode("utf-8")).decode("ascii")
        if cluster is not None and secrets.route_password is not None:
            password = secrets.route_password.encode("ascii")
            data[ROUTE_PASSWORD_KEY] = base64.b64encode(password).decode("ascii")
        for role, seed in secrets.seeds:
            if role in keys:
                key = seed_key(role, flow=topo.flow, run_id=topo.run_id)
                data[key] = base64.b64encode(seed.encode("ascii")).decode("ascii")
    return dict(sorted(data.items()))


def secret_volume(
    name: str, secret: str, items: Mapping[str, str], *, mode: int = 0o440
) -> dict[str, Any]:
    """A volume of ``secret`` holding only ``items`` (key → file name), read-only files."""
    return {
        "name": name,
        "secret": {
            "secretName": secret,
            "defaultMode": mode,
            "items": [{"key": k, "path": p} for k, p in items.items()],
        },
    }


def node_items(node: str, *, flow: str, run_id: str, with_seed: bool) -> dict[str, str]:
    """A worker's items: its node's seed as ``node.nk`` (an in-cluster broker), the run key."""
    items = {}
    if with_seed:
        items[seed_key(node_role(node), flow=flow, run_id=run_id)] = "node.nk"
    items[RUN_KEY] = RUN_KEY
    return items


def setup_items(*, with_seed: bool) -> dict[str, str]:
    items = {}
    if with_seed:
        items[f"{SETUP_ROLE}.nk"] = "setup.nk"
    items[RUN_KEY] = RUN_KEY
    return items
