"""Who may do what on a run's broker: NATS permissions per role, and the server's ``authorization``.

A broker run (:func:`vfcore.broker_topology`) is used by three kinds of
clients, each a *role* with its own NATS user:

* ``node:<name>`` — every replica of one node (``vf worker``, a replica ``vf
  run --broker`` forks, one Kubernetes workload). It may **publish** only to
  the subjects of the edges out of its node (every partition's), its own
  dead-letter subject, its own ledger entries, its own keys of the run's
  control bucket (``stats``/``done``/``seg`` under its token, and ``server``,
  ``server.<name>`` on a cluster)
  and of the splits bucket (``split.<token>.…``), and the large-payload
  bucket; it may call the JetStream API only for the consumers it reads
  (``CONSUMER.MSG.NEXT``, ``CONSUMER.INFO``, ``$JS.ACK``), ``STREAM.INFO`` of the
  streams they live in, and reads of the control, splits and ledger streams
  (``STREAM.MSG.GET``, ``DIRECT.GET``); it may **subscribe** only to its own
  inbox prefix (:func:`inbox_prefix`, given to nats-py as ``inbox_prefix``).
  So it cannot publish to another node's edges, fetch from another node's
  consumers, or read another role's replies and deliveries;
* ``setup`` — ``vf broker-setup`` (a deploy's setup Job, a worker pod's init
  container): ``STREAM.INFO``/``STREAM.CREATE`` of the run's streams and
  buckets, ``CONSUMER.INFO``/``CONSUMER.CREATE`` of its consumers, by their
  exact names; nothing else (it neither reads nor deletes);
* ``admin`` — the run's coordinator (``vf run --broker``, ``vf dead-letters``,
  ``vf broker-teardown``, ``vf scale --broker``): every subject and every
  JetStream API call on the run's own streams, consumers and buckets, and every
  inbox of the run (so the admin's key works with any command); wildcards only
  below names that are the run's own (a stream name is one exact token).

Every list is computed from the topology and sorted: the same run gives the
same permissions, byte for byte. :func:`render_authorization` writes the
``authorization { users = [...] }`` block of a ``nats-server`` configuration
from ``(public nkey, permissions)`` pairs; the server then holds only public
keys, and a client proves itself by signing the server's nonce with its seed
(docs/security.md says why nkeys rather than passwords)::

    >>> from vfcore import FlowSpec, NodeSpec
    >>> from vfcore.runtime import broker_topology
    >>> spec = FlowSpec("demo", "batch", (
    ...     NodeSpec("cam", "producer"), NodeSpec("sink", "consumer", ("cam",))))
    >>> topo = broker_topology(spec, "r1")
    >>> cam = broker_permissions(topo, node_role("cam"))
    >>> cam.allows_publish(topo.edge("cam", "sink").subjects[0])
    True
    >>> broker_permissions(topo, node_role("sink")).allows_publish(topo.edge("cam", "sink").subjects[0])
    False
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from vfcore.errors import InvalidInputError, brief
from vfcore.runtime.topology import BrokerTopology, nats_subject_problem, subject_matches

__all__ = [
    "ADMIN_ROLE",
    "SETUP_ROLE",
    "BrokerPermissions",
    "BrokerUser",
    "broker_permissions",
    "check_role",
    "inbox_prefix",
    "is_user_nkey",
    "node_role",
    "render_authorization",
    "run_roles",
]

#: The coordinator's role: everything of the run.
ADMIN_ROLE: Final = "admin"
#: ``vf broker-setup``'s role: creates what the run lacks.
SETUP_ROLE: Final = "setup"
_NODE: Final = "node:"
#: The JetStream API prefix (nats-py's default; a domain or import changes it).
_API: Final = "$JS.API"
#: Every per-user inbox starts here (not ``_INBOX``: a default client's replies never land in one).
INBOX_ROOT: Final = "_vfinbox"
#: A NATS user public key: ``U`` then 55 base32 characters (nkeys' encoding of an ed25519 key).
_USER_NKEY = re.compile(r"U[A-Z2-7]{55}")


def node_role(node: str) -> str:
    """The role of every replica of ``node`` (``node:<name>``)."""
    return f"{_NODE}{node}"


def check_role(topo: BrokerTopology, role: object) -> str:
    """``role`` if it is ``admin``, ``setup`` or ``node:<a node of the run>``, else ``invalid-broker-role``."""
    if role in (ADMIN_ROLE, SETUP_ROLE):
        return str(role)
    if isinstance(role, str) and role.startswith(_NODE):
        node = role[len(_NODE) :]
        if node in dict(topo.control.node_tokens):
            return role
    nodes = ", ".join(repr(node_role(n)) for n, _ in topo.control.node_tokens)
    raise InvalidInputError(
        "invalid-broker-role",
        f"{brief(role)} is not a role of run {topo.run_id} of flow {topo.flow!r}",
        f"use 'admin', 'setup' or one of {nodes}",
    )


def is_user_nkey(text: object) -> bool:
    """Whether ``text`` has the shape of a NATS user public key (``U`` + 55 base32 characters)."""
    return isinstance(text, str) and _USER_NKEY.fullmatch(text) is not None


def _run_digest(topo: BrokerTopology) -> str:
    h = hashlib.sha256()
    for part in ("vf-inbox", topo.flow, topo.run_id):
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return base64.b32encode(h.digest()).decode("ascii").lower()[:16]


def _role_token(topo: BrokerTopology, role: str) -> str:
    if role.startswith(_NODE):
        return f"n.{topo.control.token_of(role[len(_NODE) :])}"
    return role


def inbox_prefix(topo: BrokerTopology, role: str) -> str:
    """The inbox prefix a client of ``role`` connects with (nats-py ``inbox_prefix``).

    ``_vfinbox.<digest of flow and run>.<role>`` (``n.<node token>`` for a node):
    unique per run and role, so one role's replies, pull deliveries and
    ordered-consumer messages never land where another may subscribe.

    >>> from vfcore import FlowSpec, NodeSpec
    >>> from vfcore.runtime import broker_topology
    >>> spec = FlowSpec("demo", "batch", (
    ...     NodeSpec("cam", "producer"), NodeSpec("sink", "consumer", ("cam",))))
    >>> inbox_prefix(broker_topology(spec, "r1"), "admin").split(".")[::2]
    ['_vfinbox', 'admin']
    """
    role = check_role(topo, role)
    return f"{INBOX_ROOT}.{_run_digest(topo)}.{_role_token(topo, role)}"


@dataclass(frozen=True, slots=True)
class BrokerPermissions:
    """What one role may publish and subscribe to (NATS subjects, ``*``/``>`` wildcards).

    ``publish``/``subscribe`` are sorted allow-lists; anything else is denied
    (NATS: an allow-list denies everything it does not list). ``inbox_prefix``:
    what the role's client connects with (a node's and the setup role's
    ``subscribe`` list holds exactly ``<inbox_prefix>.>``; the admin's, every
    inbox of the run).
    """

    role: str
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    inbox_prefix: str

    def allows_publish(self, subject: str) -> bool:
        """Whether a publish to the literal ``subject`` is allowed."""
        return any(subject_matches(p, subject) for p in self.publish)

    def allows_subscribe(self, subject: str) -> bool:
        """Whether subscribing to the literal ``subject`` is allowed (wildcard subscriptions:
        only where a listed pattern covers every subject they can match, as NATS checks)."""
        return any(_covers(p, subject) for p in self.subscribe)

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "publish": list(self.publish),
            "subscribe": list(self.subscribe),
            "inbox_prefix": self.inbox_prefix,
        }


def _covers(pattern: str, subject: str) -> bool:
    """Whether every subject ``subject`` (itself maybe a wildcard) matches is matched by ``pattern``."""
    pat, sub = pattern.split("."), subject.split(".")
    for i, token in enumerate(pat):
        if token == ">":
            return len(sub) > i
        if i >= len(sub):
            return False
        if sub[i] == ">":
            return False
        if token != "*" and (sub[i] == "*" or token != sub[i]):
            return False
    return len(pat) == len(sub)


def _finish(
    role: str, inbox: str, publish: Iterable[str], subscribe: Iterable[str]
) -> BrokerPermissions:
    pub = tuple(sorted(set(publish)))
    sub = tuple(sorted(set(subscribe)))
    for subject in (*pub, *sub):
        problem = nats_subject_problem(subject, wildcards=True)
        if problem is not None or any(ch in subject for ch in '"\\'):
            raise InvalidInputError(
                "invalid-broker-name",
                f"role {role}: the subject {brief(subject)} cannot be written into a server "
                f"configuration: {problem or 'it holds a quote or a backslash'}",
                "shorten or rename the flow (its name is part of every subject of the run)",
            )
    return BrokerPermissions(role, pub, sub, inbox)


def _kv_streams(topo: BrokerTopology) -> tuple[str, ...]:
    control = topo.control
    return tuple(f"KV_{b}" for b in (control.bucket, control.splits) if b)


def _node_permissions(topo: BrokerTopology, node: str, role: str, inbox: str) -> BrokerPermissions:
    control = topo.control
    token = control.token_of(node)
    publish: list[str] = []
    for edge in topo.outputs(node):
        publish.extend(edge.subjects)
    publish.append(topo.dead_letters.subject_of(node))
    for kind in ("stats", "done", "seg"):
        publish.append(f"$KV.{control.bucket}.{kind}.{token}.>")
    publish.append(f"$KV.{control.bucket}.server")
    publish.append(f"$KV.{control.bucket}.server.>")  # one per server of a cluster
    if control.splits:
        publish.append(f"$KV.{control.splits}.split.{token}.>")
    for kv in _kv_streams(topo):
        publish += [f"{_API}.STREAM.INFO.{kv}", f"{_API}.STREAM.MSG.GET.{kv}"]
        publish += [f"{_API}.DIRECT.GET.{kv}", f"{_API}.DIRECT.GET.{kv}.>"]
    if topo.ledger is not None:
        publish.append(f"{control.ledger_prefix}.{token}.>")
        ledger = topo.ledger.name
        publish += [f"{_API}.STREAM.MSG.GET.{ledger}", f"{_API}.DIRECT.GET.{ledger}"]
        publish.append(f"{_API}.DIRECT.GET.{ledger}.>")
    objects = control.objects  # records above the message limit (vfadapters.broker.payloads)
    publish.append(f"_vfobj.{objects}.>")
    for op in ("INFO", "CREATE", "PURGE"):
        publish.append(f"{_API}.STREAM.{op}.{objects}")
    publish += [f"{_API}.DIRECT.GET.{objects}", f"{_API}.DIRECT.GET.{objects}.>"]
    for edge in topo.edges:
        if edge.child != node:
            continue
        publish.append(f"{_API}.STREAM.INFO.{edge.stream}")
        for consumer in edge.consumers:
            stream, name = consumer.stream, consumer.name
            publish.append(f"{_API}.CONSUMER.MSG.NEXT.{stream}.{name}")
            publish.append(f"{_API}.CONSUMER.INFO.{stream}.{name}")
            publish.append(f"$JS.ACK.{stream}.{name}.>")
    return _finish(role, inbox, publish, (f"{inbox}.>",))


def _run_streams(topo: BrokerTopology) -> tuple[str, ...]:
    """Every stream of the run: outputs, dead letters, ledger, the buckets' streams."""
    names = [config.name for config in topo.all_streams()]
    names += [*_kv_streams(topo), topo.control.objects]
    return tuple(names)


def _setup_permissions(topo: BrokerTopology, role: str, inbox: str) -> BrokerPermissions:
    publish: list[str] = []
    for stream in _run_streams(topo):
        publish += [f"{_API}.STREAM.INFO.{stream}", f"{_API}.STREAM.CREATE.{stream}"]
    for consumer in topo.consumers:
        stream, name = consumer.stream, consumer.name
        publish.append(f"{_API}.CONSUMER.INFO.{stream}.{name}")
        publish.append(f"{_API}.CONSUMER.CREATE.{stream}.{name}")
        publish.append(f"{_API}.CONSUMER.DURABLE.CREATE.{stream}.{name}")
    return _finish(role, inbox, publish, (f"{inbox}.>",))


def _admin_permissions(topo: BrokerTopology, role: str, inbox: str) -> BrokerPermissions:
    control = topo.control
    publish: list[str] = []
    for stream in _run_streams(topo):
        # STREAM.<op>.<stream>, STREAM.MSG.<op>.<stream>, CONSUMER.<op>.<stream>[.<consumer>…],
        # CONSUMER.MSG.NEXT / DURABLE.CREATE, DIRECT.GET, acks and flow control of its consumers.
        # A `*` stands only for the operation: no stream of the run is named like one (they
        # start with VF_ or KV_VF_), so no pattern reaches another run's streams
        publish += [f"{_API}.STREAM.*.{stream}", f"{_API}.STREAM.MSG.*.{stream}"]
        publish += [f"{_API}.CONSUMER.*.{stream}", f"{_API}.CONSUMER.*.{stream}.>"]
        publish += [f"{_API}.CONSUMER.MSG.NEXT.{stream}.>"]
        publish += [f"{_API}.CONSUMER.DURABLE.CREATE.{stream}.>"]
        publish += [f"{_API}.DIRECT.GET.{stream}", f"{_API}.DIRECT.GET.{stream}.>"]
        publish += [f"$JS.ACK.{stream}.>", f"$JS.FC.{stream}.>"]
    for _, config in topo.streams:
        publish.extend(config.subjects)
    publish.extend(topo.dead_letters.config.subjects)
    if topo.ledger is not None:
        publish.extend(topo.ledger.subjects)
    publish += [f"$KV.{b}.>" for b in (control.bucket, control.splits) if b]
    publish.append(f"_vfobj.{control.objects}.>")
    # every inbox of the run: the admin's seed works with any command (vf broker-setup
    # connects with the setup role's inbox prefix, vf worker with its node's)
    return _finish(role, inbox, publish, (f"{INBOX_ROOT}.{_run_digest(topo)}.>",))


def broker_permissions(topo: BrokerTopology, role: str) -> BrokerPermissions:
    """The permissions of ``role`` (``admin``, ``setup`` or :func:`node_role`) in run ``topo``.

    See the module docstring for what each role may do. Raises
    ``invalid-broker-role`` for a role the run does not have.
    """
    role = check_role(topo, role)
    inbox = inbox_prefix(topo, role)
    if role == ADMIN_ROLE:
        return _admin_permissions(topo, role, inbox)
    if role == SETUP_ROLE:
        return _setup_permissions(topo, role, inbox)
    return _node_permissions(topo, role[len(_NODE) :], role, inbox)


def run_roles(topo: BrokerTopology) -> tuple[str, ...]:
    """Every role of the run: ``admin``, ``setup``, then one per node in flow order."""
    return (ADMIN_ROLE, SETUP_ROLE, *(node_role(n) for n, _ in topo.control.node_tokens))


@dataclass(frozen=True, slots=True)
class BrokerUser:
    """One user of the server's configuration: a public nkey and what it may do."""

    nkey: str
    permissions: BrokerPermissions

    def __post_init__(self) -> None:
        if not is_user_nkey(self.nkey):
            raise InvalidInputError(
                "invalid-nkey",
                f"{brief(self.nkey)} (role {self.permissions.role}) is not a NATS user public "
                "key ('U' and 55 base32 characters)",
                "give the public key of a user seed (nkeys: KeyPair.public_key), never the seed",
            )


def _strings(items: Sequence[str], indent: str) -> str:
    return "[\n" + "".join(f'{indent}  "{s}"\n' for s in items) + f"{indent}]"


def render_authorization(users: Sequence[BrokerUser]) -> str:
    """The ``authorization { users = [...] }`` block of a nats-server configuration.

    One entry per user, in the order given: its public ``nkey`` and its
    ``permissions`` (``publish``/``subscribe`` allow-lists; NATS denies the rest).
    Every string is double-quoted, so ``$JS.API…`` is a subject, never a
    configuration variable. Public keys only: the text is no secret.

    >>> from vfcore import FlowSpec, NodeSpec
    >>> from vfcore.runtime import broker_topology
    >>> spec = FlowSpec("demo", "batch", (
    ...     NodeSpec("cam", "producer"), NodeSpec("sink", "consumer", ("cam",))))
    >>> perms = broker_permissions(broker_topology(spec, "r1"), "setup")
    >>> text = render_authorization([BrokerUser("U" + "A" * 55, perms)])
    >>> text.splitlines()[:4]
    ['authorization {', '  users = [', '    {', '      nkey: "UAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"']
    """
    keys = [u.nkey for u in users]
    if len(set(keys)) != len(keys):
        raise InvalidInputError(
            "invalid-nkey",
            "two roles share one public key: the server could not tell them apart",
            "generate one seed per role",
        )
    lines = ["authorization {", "  users = ["]
    for user in users:
        perms = user.permissions
        lines += [
            "    {",
            f'      nkey: "{user.nkey}"',
            "      permissions: {",
            f"        publish: {{ allow: {_strings(perms.publish, '        ')} }}",
            f"        subscribe: {{ allow: {_strings(perms.subscribe, '        ')} }}",
            "      }",
            "    }",
        ]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"
