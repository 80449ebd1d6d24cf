"""How a client proves itself to a run's NATS server, and the keys of a run.

:class:`BrokerCredentials` is what ``--broker`` comes with (docs/cli.md, "Broker
credentials"): one of a NATS creds file, an nkey seed (a file, or in memory for
a replica ``vf run --broker embedded`` forks), a user and a password, or a
token; optionally TLS (a CA file, a client certificate) and the inbox prefix of
the client's role (:func:`vfcore.runtime.inbox_prefix`). Secrets are read from
files or the environment, never from a flag's value; ``repr()`` and
:meth:`BrokerCredentials.describe` never show one, and no error names one.

:func:`generate_run_keys` makes one nkey seed per role of a run (``admin``,
``setup``, one per node) from ``os.urandom``; :func:`authorization_for` turns
their public keys into the server's ``authorization`` block
(:func:`vfcore.runtime.render_authorization`). Seeds start with ``SU``; only
public keys (``U…``) go into a server configuration.
"""

from __future__ import annotations

import os
import ssl
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vfcore import InvalidInputError
from vfcore.runtime import (
    BrokerTopology,
    BrokerUser,
    broker_permissions,
    inbox_prefix,
    render_authorization,
    run_roles,
)

__all__ = [
    "ENV",
    "BrokerCredentials",
    "authorization_for",
    "generate_run_keys",
    "generate_seed",
    "public_key",
    "read_secret_file",
]

#: The environment variables ``--broker``'s credentials may come from (flag → variable).
ENV: Mapping[str, str] = {
    "creds": "VF_BROKER_CREDS",
    "nkey_file": "VF_BROKER_NKEY_FILE",
    "user": "VF_BROKER_USER",
    "password_file": "VF_BROKER_PASSWORD_FILE",
    "password": "VF_BROKER_PASSWORD",
    "token_file": "VF_BROKER_TOKEN_FILE",
    "token": "VF_BROKER_TOKEN",
    "ca": "VF_BROKER_CA",
    "cert": "VF_BROKER_CERT",
    "key": "VF_BROKER_KEY",
    "inbox_prefix": "VF_BROKER_INBOX_PREFIX",
}
#: The largest credentials file read (a creds file is about 1 KiB).
MAX_SECRET_FILE = 64 << 10


def _error(rule: str, message: str, hint: str) -> InvalidInputError:
    return InvalidInputError(rule, message, hint)


def read_secret_file(path: str, what: str) -> str:
    """The text of a credentials file (stripped), or ``broker-credentials-unreadable``.

    Bounded (:data:`MAX_SECRET_FILE`), a regular file; the error names the path and
    why, never the content.
    """
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise _error(
                "broker-credentials-unreadable",
                f"{what} {path!r} is not a regular file",
                "point it at the file holding the secret",
            )
        if info.st_size > MAX_SECRET_FILE:
            raise _error(
                "broker-credentials-unreadable",
                f"{what} {path!r} holds {info.st_size} bytes; a secret is at most "
                f"{MAX_SECRET_FILE} bytes",
                "point it at the file holding the secret",
            )
        with open(path, encoding="utf-8") as handle:
            return handle.read(MAX_SECRET_FILE).strip()
    except OSError as exc:
        raise _error(
            "broker-credentials-unreadable",
            f"{what} {path!r} cannot be read: {exc.strerror or type(exc).__name__}",
            "check the path and that this user may read it",
        ) from None
    except UnicodeDecodeError:
        raise _error(
            "broker-credentials-unreadable",
            f"{what} {path!r} is not text",
            "point it at the file holding the secret",
        ) from None


def generate_seed() -> str:
    """A new NATS user seed (``SU…``) from 32 bytes of ``os.urandom``."""
    import nkeys

    return bytes(nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)).decode("ascii")


def public_key(seed: str) -> str:
    """The public key (``U…``) of a user seed; ``broker-credentials-invalid`` for anything else."""
    import nkeys

    try:
        kp = nkeys.from_seed(bytearray(seed.strip().encode("ascii")))
        key = bytes(kp.public_key).decode("ascii")
        kp.wipe()
    except Exception:
        raise _error(
            "broker-credentials-invalid",
            "the nkey seed is not a NATS seed (a line starting with 'SU', 58 characters)",
            "give the seed file nk or nsc made, or the one `vf deploy` put in the run's Secret",
        ) from None
    if not key.startswith("U"):
        raise _error(
            "broker-credentials-invalid",
            "the nkey seed is not a user seed (its public key does not start with 'U')",
            "give a user seed (starting with 'SU')",
        )
    return key


def generate_run_keys(topo: BrokerTopology) -> dict[str, str]:
    """A fresh seed per role of the run (``admin``, ``setup``, ``node:<name>`` …)."""
    return {role: generate_seed() for role in run_roles(topo)}


def authorization_for(topo: BrokerTopology, seeds: Mapping[str, str]) -> str:
    """The server's ``authorization`` block for ``seeds`` (role → seed): public keys only."""
    users = [BrokerUser(public_key(seeds[r]), broker_permissions(topo, r)) for r in run_roles(topo)]
    return render_authorization(users)


@dataclass(frozen=True, slots=True)
class BrokerCredentials:
    """How to authenticate to the server (see the module docstring). All fields optional.

    ``nkey_seed`` is a seed held in memory (a forked replica's); the other
    secret-bearing fields are read when connecting. Secret fields are left out
    of ``repr()``.
    """

    creds_file: str | None = None
    nkey_file: str | None = None
    nkey_seed: str | None = field(default=None, repr=False)
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    inbox_prefix: str | None = None

    def __post_init__(self) -> None:
        ways = [
            name
            for name, value in (
                ("a creds file", self.creds_file),
                ("an nkey seed", self.nkey_file or self.nkey_seed),
                ("a user and password", self.user or self.password),
                ("a token", self.token),
            )
            if value
        ]
        if len(ways) > 1:
            raise _error(
                "broker-credentials-conflict",
                f"the broker credentials give {' and '.join(ways)}: a connection proves itself "
                "one way",
                "keep one of --broker-creds, --broker-nkey-file, --broker-user with its "
                "password, --broker-token-file (and their VF_BROKER_* variables)",
            )
        if self.password and not self.user:
            raise _error(
                "broker-credentials-conflict",
                "a broker password was given without a user",
                "add --broker-user NAME (or VF_BROKER_USER)",
            )
        if self.user and not self.password:
            raise _error(
                "broker-credentials-conflict",
                f"broker user {self.user!r} was given without a password",
                "add --broker-password-file PATH (or VF_BROKER_PASSWORD_FILE / VF_BROKER_PASSWORD)",
            )
        if bool(self.cert_file) != bool(self.key_file):
            raise _error(
                "broker-credentials-conflict",
                "a TLS client certificate needs both --broker-cert and --broker-key",
                "give both files, or neither",
            )

    @property
    def is_empty(self) -> bool:
        """No authentication and no TLS settings (an open server, as before)."""
        return not any(
            (
                self.creds_file,
                self.nkey_file,
                self.nkey_seed,
                self.user,
                self.token,
                self.ca_file,
                self.cert_file,
            )
        )

    def for_role(self, topo: BrokerTopology, role: str) -> BrokerCredentials:
        """These credentials with ``role``'s inbox prefix (unless one was set explicitly)."""
        if self.inbox_prefix:
            return self
        return replace(self, inbox_prefix=inbox_prefix(topo, role))

    def describe(self) -> str:
        """How the client authenticates, for a message: paths and names, never a secret."""
        if self.creds_file:
            how = f"creds file {self.creds_file}"
        elif self.nkey_file:
            how = f"nkey seed file {self.nkey_file}"
        elif self.nkey_seed:
            how = "the run's nkey"
        elif self.user:
            how = f"user {self.user!r} with a password"
        elif self.token:
            how = "a token"
        else:
            how = "no credentials"
        if self.ca_file:
            how += f", TLS with CA {self.ca_file}"
        return how

    def tls_context(self, url: str) -> ssl.SSLContext | None:
        """The TLS context to connect with: a CA or a client certificate given, or a ``tls://`` URL."""
        if not (self.ca_file or self.cert_file or url.strip().lower().startswith("tls://")):
            return None
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file)
            if self.cert_file and self.key_file:
                ctx.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            what = self.ca_file or self.cert_file
            raise _error(
                "broker-credentials-unreadable",
                f"TLS file {what!r} cannot be loaded: "
                f"{getattr(exc, 'strerror', None) or type(exc).__name__}",
                "give PEM files: --broker-ca for the server's CA, --broker-cert/--broker-key for "
                "a client certificate",
            ) from None
        return ctx

    def connect_options(self, url: str) -> dict[str, Any]:
        """Keyword arguments for ``nats.connect`` (secrets read now, from their files)."""
        out: dict[str, Any] = {}
        if self.creds_file:
            read_secret_file(self.creds_file, "creds file")  # readable, bounded: a clear error
            out["user_credentials"] = self.creds_file
        elif self.nkey_file or self.nkey_seed:
            seed = self.nkey_seed or read_secret_file(str(self.nkey_file), "nkey seed file")
            public_key(seed)  # a clear error for a file that holds no seed
            out["nkeys_seed_str"] = seed
        elif self.user:
            out["user"] = self.user
            out["password"] = self.password
        elif self.token:
            out["token"] = self.token
        ctx = self.tls_context(url)
        if ctx is not None:
            out["tls"] = ctx
            host = url.split("://", 1)[-1].split("@")[-1].split(":")[0].split("/")[0].strip("[]")
            if host:
                out["tls_hostname"] = host
        if self.inbox_prefix:
            out["inbox_prefix"] = self.inbox_prefix
        return out

    @staticmethod
    def from_values(
        *,
        creds: str | None = None,
        nkey_file: str | None = None,
        user: str | None = None,
        password_file: str | None = None,
        token_file: str | None = None,
        ca: str | None = None,
        cert: str | None = None,
        key: str | None = None,
        inbox: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> BrokerCredentials:
        """Credentials from flag values, each falling back on its ``VF_BROKER_*`` variable.

        A password or token comes from a file (``--broker-password-file``,
        ``--broker-token-file`` or their variables) or from ``VF_BROKER_PASSWORD`` /
        ``VF_BROKER_TOKEN`` themselves; never from a flag's value.
        """
        env = os.environ if env is None else env

        def pick(value: str | None, name: str) -> str | None:
            got = value if value else env.get(ENV[name], "")
            return got or None

        password_path = pick(password_file, "password_file")
        token_path = pick(token_file, "token_file")
        password = (
            read_secret_file(password_path, "password file")
            if password_path
            else env.get(ENV["password"]) or None
        )
        token = (
            read_secret_file(token_path, "token file")
            if token_path
            else env.get(ENV["token"]) or None
        )
        for path, what in ((pick(ca, "ca"), "CA file"), (pick(cert, "cert"), "certificate")):
            if path and not Path(path).is_file():
                raise _error(
                    "broker-credentials-unreadable",
                    f"{what} {path!r} is not a file",
                    "check the path",
                )
        return BrokerCredentials(
            creds_file=pick(creds, "creds"),
            nkey_file=pick(nkey_file, "nkey_file"),
            user=pick(user, "user"),
            password=password,
            token=token,
            ca_file=pick(ca, "ca"),
            cert_file=pick(cert, "cert"),
            key_file=pick(key, "key"),
            inbox_prefix=pick(inbox, "inbox_prefix"),
        )
