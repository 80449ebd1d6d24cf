"""Connecting to a Kubernetes API server and sending one request, as raw JSON.

:func:`connect` builds an official ``kubernetes.client.ApiClient`` from, in
order: ``--kubeconfig PATH`` (or ``$KUBECONFIG``, or ``~/.kube/config`` when it
exists) with ``--context C``; else the in-cluster service account
(``KUBERNETES_SERVICE_HOST``). :class:`KubeClient` sends requests through that
client's REST layer (auth, TLS and proxies as the client configures them) and
returns the decoded JSON, so that the documents are exactly what the API
server sent — the same JSON ``kubectl get -o json`` prints, which
:mod:`vfcore.cluster.kubeparse` reads.

Errors: a request the server refuses returns its ``Status`` (the caller decides
whether that is *unknown* or fatal); a server that cannot be reached or does
not answer in time raises :class:`KubeApiError` (``kube-unreachable``,
``kube-timeout``). A kubeconfig that cannot be found or read is bad input
(:class:`vfcore.InvalidInputError`, ``kube-config-not-found`` /
``kube-config-invalid``).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from vfcore import InvalidInputError

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "KubeApiError",
    "KubeClient",
    "Response",
    "add_connection_options",
    "connect",
    "connect_from_args",
]

#: Seconds one request may take (connect + read); ``VF_KUBE_TIMEOUT_S`` changes it.
DEFAULT_TIMEOUT_S = 30.0


class KubeApiError(Exception):
    """The API server could not be used: a stable ``rule`` id, what happened, what to do."""

    def __init__(self, rule: str, message: str, hint: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.message = message
        self.hint = hint


@dataclass(frozen=True, slots=True)
class Response:
    """One answer: the HTTP status and the decoded JSON body (``None`` when it is not JSON)."""

    status: int
    body: Any
    text: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status <= 299

    def status_line(self) -> str:
        """``403 Forbidden: pods is forbidden: ...`` — the server's own words."""
        if isinstance(self.body, Mapping) and self.body.get("kind") == "Status":
            reason = self.body.get("reason") or "Failure"
            message = self.body.get("message") or ""
            return f"{self.status} {reason}: {message}".rstrip(": ")
        return f"HTTP {self.status}: {self.text[:300]}"

    def as_status(self) -> dict[str, Any]:
        """The body when it is a ``Status``; otherwise a ``Status`` that says what came back."""
        if isinstance(self.body, Mapping) and self.body.get("kind") == "Status":
            return dict(self.body)
        return {
            "kind": "Status",
            "status": "Failure",
            "code": self.status,
            "reason": f"HTTP{self.status}",
            "message": self.text[:300] or "no body",
        }


def _timeout_s() -> float:
    raw = os.environ.get("VF_KUBE_TIMEOUT_S")
    if raw is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise InvalidInputError(
            "invalid-kube-timeout",
            f"VF_KUBE_TIMEOUT_S={raw!r} is not a positive number of seconds",
            "unset it, or set e.g. VF_KUBE_TIMEOUT_S=30",
        )
    return value


class KubeClient:
    """Raw JSON requests through an official ``ApiClient``; see the module docstring."""

    def __init__(self, api_client: Any, *, where: str, timeout_s: float | None = None) -> None:
        self.api_client = api_client
        #: Where the client points: ``context kind-gpu (https://127.0.0.1:6443)``.
        self.where = where
        self.timeout_s = _timeout_s() if timeout_s is None else timeout_s

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout_s: float | None = None,
    ) -> Response:
        """``METHOD path?query`` with a JSON ``body``; the answer, whatever its status.

        Raises :class:`KubeApiError` only when no answer came back.
        """
        import urllib3
        from kubernetes.client.exceptions import ApiException

        headers: dict[str, str] = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = [
            (k, ("true" if v else "false") if isinstance(v, bool) else str(v))
            for k, v in (query or {}).items()
        ]
        method_, url, header_params, body_, post = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=params or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            raw = self.api_client.call_api(
                method_, url, header_params=header_params, body=body_,
                post_params=post, _request_timeout=limit,
            )  # fmt: skip
            data = raw.read()
        except urllib3.exceptions.NewConnectionError as exc:  # a TimeoutError subclass in urllib3
            raise KubeApiError(
                "kube-unreachable",
                f"{method} {path} on {self.where}: cannot connect: {exc}",
                "check the kubeconfig's server address and your network "
                "(`kubectl --context C cluster-info` should answer), or pick another cluster "
                "with --kubeconfig PATH / --context C",
            ) from None
        except (urllib3.exceptions.TimeoutError, TimeoutError) as exc:
            raise KubeApiError(
                "kube-timeout",
                f"{method} {path} on {self.where}: no answer within {limit:g} s ({exc})",
                "check that the API server is up and reachable, or raise VF_KUBE_TIMEOUT_S",
            ) from None
        except (urllib3.exceptions.HTTPError, OSError, ApiException) as exc:
            raise KubeApiError(
                "kube-unreachable",
                f"{method} {path} on {self.where}: {type(exc).__name__}: {exc}",
                "check the kubeconfig's server address and your network "
                "(`kubectl --context C cluster-info` should answer), or pick another cluster "
                "with --kubeconfig PATH / --context C",
            ) from None
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = None
        return Response(raw.status, parsed, text)

    def get_json(self, path: str, **kw: Any) -> Response:
        return self.request("GET", path, **kw)


def object_path(api_version: str, plural: str, namespace: str | None, name: str | None) -> str:
    """``/api/v1/namespaces/ns/pods/name`` or ``/apis/apps/v1/deployments`` (names quoted)."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{plural}"
    if name:
        base += f"/{quote(name, safe='')}"
    return base


#: The most bytes vf reads from one kubeconfig file (they embed certificates, yet
#: stay far below this; ``/dev/zero`` stops here).
MAX_KUBECONFIG_BYTES = 16 << 20


def read_kubeconfig(path: Path) -> dict[str, Any]:
    """One kubeconfig file parsed, or ``kube-config-invalid`` saying why it cannot be.

    Bounded (:data:`MAX_KUBECONFIG_BYTES`, ``input-too-large`` past it), YAML (or
    JSON), and a mapping: a file that is none of these is bad input (exit 2),
    never an internal error. An empty file is an empty configuration.
    """
    import yaml

    from vfadapters.loading import read_bounded

    try:
        raw = read_bounded(path, MAX_KUBECONFIG_BYTES, what="a kubeconfig")
    except OSError as exc:
        raise InvalidInputError(
            "kube-config-invalid",
            f"kubeconfig {path} cannot be read: {exc.strerror or exc}",
            "pass --kubeconfig PATH to a readable file",
        ) from None
    try:
        doc = yaml.safe_load(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        reason = getattr(exc, "problem", None) or getattr(exc, "reason", None) or exc
        raise InvalidInputError(
            "kube-config-invalid",
            f"kubeconfig {path} is not YAML{at}: {reason}",
            "pass the file `kubectl config view --raw` prints, or fix its syntax",
        ) from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InvalidInputError(
            "kube-config-invalid",
            f"kubeconfig {path} holds a {type(doc).__name__}, not a kubeconfig (a mapping "
            "with clusters, users and contexts)",
            "pass the file `kubectl config view --raw` prints",
        )
    return doc


def add_connection_options(p: argparse.ArgumentParser) -> None:
    """``--context C`` and ``--kubeconfig PATH`` (the cluster to talk to)."""
    p.add_argument(
        "--context",
        metavar="C",
        default=None,
        help="kubeconfig context to use (default: the current context)",
    )
    p.add_argument(
        "--kubeconfig",
        metavar="PATH",
        default=None,
        help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)",
    )


def connect_from_args(args: argparse.Namespace) -> KubeClient:
    return connect(
        context=getattr(args, "context", None), kubeconfig=getattr(args, "kubeconfig", None)
    )


def connect(*, context: str | None = None, kubeconfig: str | None = None) -> KubeClient:
    """A :class:`KubeClient` for ``context`` in ``kubeconfig`` (see the module docstring)."""
    try:
        from kubernetes import client as kclient
        from kubernetes import config as kconfig
    except ImportError:  # pragma: no cover - the extra is part of dev installs
        raise InvalidInputError(
            "kubernetes-client-missing",
            "the official `kubernetes` Python client is not installed",
            "install it with `pip install 'vfcore[kubernetes]'`",
        ) from None
    timeout = _timeout_s()
    config_file = kubeconfig or os.environ.get("KUBECONFIG") or None
    default_file = Path("~/.kube/config").expanduser()
    if config_file is None and default_file.exists():
        config_file = str(default_file)
    configuration = kclient.Configuration()
    if config_file is None:
        if context is not None or not os.environ.get("KUBERNETES_SERVICE_HOST"):
            raise InvalidInputError(
                "kube-config-not-found",
                "no kubeconfig: --kubeconfig not given, $KUBECONFIG unset, "
                f"{default_file} missing, and not running inside a pod",
                "pass --kubeconfig PATH (and --context C), or set KUBECONFIG",
            )
        try:
            kconfig.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except kconfig.ConfigException as exc:
            raise InvalidInputError(
                "kube-config-invalid",
                f"in-cluster configuration cannot be loaded: {exc}",
                "mount the service account token, or pass --kubeconfig PATH",
            ) from None
        where = f"in-cluster ({configuration.host})"
    else:
        files = [one for one in config_file.split(os.pathsep) if one]
        for one in files:
            if not Path(one).expanduser().exists():
                raise InvalidInputError(
                    "kube-config-not-found",
                    f"kubeconfig {one} does not exist",
                    "pass --kubeconfig PATH to an existing file, or fix $KUBECONFIG",
                )
        documents = {one: read_kubeconfig(Path(one).expanduser()) for one in files}
        piped = [one for one in files if not Path(one).expanduser().is_file()]
        try:
            if piped and len(files) == 1:  # --kubeconfig <(kubectl config view --raw): read once
                kconfig.load_kube_config_from_dict(  # type: ignore[no-untyped-call]
                    documents[piped[0]],
                    context=context,
                    client_configuration=configuration,
                    persist_config=False,
                )
            elif piped:
                raise InvalidInputError(
                    "kube-config-invalid",
                    f"kubeconfig {piped[0]} is not a regular file, and a pipe or device can "
                    "only be the one kubeconfig, not one of several",
                    "write it to a file, or pass it alone as --kubeconfig",
                )
            else:
                kconfig.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=config_file,
                    context=context,
                    client_configuration=configuration,
                    persist_config=False,
                )
        except (kconfig.ConfigException, ValueError, TypeError, OSError) as exc:
            if isinstance(exc, InvalidInputError):
                raise
            which = f"context {context!r}" if context else "the current context"
            raise InvalidInputError(
                "kube-config-invalid",
                f"kubeconfig {config_file}: {which} cannot be used: {exc}",
                "list the contexts with `kubectl config get-contexts` and pass --context C",
            ) from None
        if context is None:  # name the context the kubeconfig's current-context picked
            current = next(
                (d.get("current-context") for d in documents.values() if d.get("current-context")),
                None,
            )
            shown = f"{current} (current)" if isinstance(current, str) else "(current)"
        else:
            shown = context
        where = f"context {shown} ({configuration.host})"
    configuration.retries = False  # one try per request; the wait loop retries itself
    return KubeClient(kclient.ApiClient(configuration), where=where, timeout_s=timeout)
