"""The credentials options of every command that takes ``--broker`` (one place for all of them).

``add_broker_credential_options(p)`` adds them to a command's parser and
``broker_credentials(args)`` turns them into a
:class:`~vfadapters.broker.credentials.BrokerCredentials`. Each flag falls back
on its ``VF_BROKER_*`` variable (a pod gets them from its Secret's files); a
password or a token is read from a file, or from ``VF_BROKER_PASSWORD`` /
``VF_BROKER_TOKEN``, never from a flag's value (a command line is visible to
every user of the machine in ``ps``). docs/cli.md ("Broker credentials") lists
them.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_broker_credential_options", "broker_credentials"]


def add_broker_credential_options(p: Any) -> None:
    """``--broker-creds``, ``--broker-nkey-file``, ``--broker-user``, ``--broker-password-file``,
    ``--broker-token-file``, ``--broker-ca``, ``--broker-cert``, ``--broker-key``,
    ``--broker-inbox-prefix``."""
    g = p.add_argument_group(
        "broker credentials",
        "how to prove who this is to the NATS server (each also read from its VF_BROKER_* "
        "variable; docs/security.md)",
    )
    g.add_argument(
        "--broker-creds", metavar="PATH", help="a NATS creds file (JWT and seed; VF_BROKER_CREDS)"
    )
    g.add_argument(
        "--broker-nkey-file",
        metavar="PATH",
        help="a file holding an nkey user seed (SU…), e.g. the role's key from the run's "
        "Secret (VF_BROKER_NKEY_FILE)",
    )
    g.add_argument("--broker-user", metavar="NAME", help="a user name (VF_BROKER_USER)")
    g.add_argument(
        "--broker-password-file",
        metavar="PATH",
        help="a file holding the user's password (VF_BROKER_PASSWORD_FILE, or the password "
        "itself in VF_BROKER_PASSWORD)",
    )
    g.add_argument(
        "--broker-token-file",
        metavar="PATH",
        help="a file holding a token (VF_BROKER_TOKEN_FILE, or VF_BROKER_TOKEN)",
    )
    g.add_argument(
        "--broker-ca",
        metavar="PATH",
        help="the CA (PEM) of the server's TLS certificate; with it, or a tls:// URL, the "
        "connection is TLS (VF_BROKER_CA)",
    )
    g.add_argument(
        "--broker-cert", metavar="PATH", help="a TLS client certificate (PEM; VF_BROKER_CERT)"
    )
    g.add_argument("--broker-key", metavar="PATH", help="its private key (PEM; VF_BROKER_KEY)")
    g.add_argument(
        "--broker-inbox-prefix",
        metavar="PREFIX",
        help="the inbox prefix to connect with (default: the role's own, _vfinbox.<run>.<role>; "
        "_INBOX for a server whose permissions expect the default; VF_BROKER_INBOX_PREFIX)",
    )


def broker_credentials(args: argparse.Namespace) -> Any:
    """The :class:`BrokerCredentials` the options and ``VF_BROKER_*`` variables give."""
    from vfadapters.broker.credentials import BrokerCredentials

    return BrokerCredentials.from_values(
        creds=getattr(args, "broker_creds", None),
        nkey_file=getattr(args, "broker_nkey_file", None),
        user=getattr(args, "broker_user", None),
        password_file=getattr(args, "broker_password_file", None),
        token_file=getattr(args, "broker_token_file", None),
        ca=getattr(args, "broker_ca", None),
        cert=getattr(args, "broker_cert", None),
        key=getattr(args, "broker_key", None),
        inbox=getattr(args, "broker_inbox_prefix", None),
    )
