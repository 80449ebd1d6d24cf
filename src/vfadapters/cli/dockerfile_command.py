"""``vf dockerfile FLOW``: print a Dockerfile for the image ``vf deploy --image`` names.

A slim Python base, vfcore installed with the extras the flow needs (``broker``
always: pods run ``vf worker``; ``torch`` when the flow imports torch), the flow
file copied to ``/app/<file name>`` (where ``vf deploy`` looks by default) and a
non-root numeric user (10001, the uid the rendered pods run as under the
restricted Pod Security Standard). Other third-party modules the flow imports
are listed in a comment: their pip names are the user's to add.

Every value is checked, then written in the Dockerfile's JSON (exec) form,
one word per value: ``COPY ["src", "dest"]``, ``RUN ["pip", "install", "..."]``
(no shell, so ``--vfcore 'x"; rm -rf / #'`` cannot reach one: it is refused
anyway, as no requirement on vfcore). The flow must import and validate (the
image runs it); COPY sources must lie inside the build context (the current
directory) and have names COPY reads as they are (no ``$``, ``\\``, quotes,
glob characters or control characters); ``--base`` must be an image
reference; a ``--vfcore`` wheel must exist. Anything else: exit 2 with its id.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

from vfadapters.cli.output import EXIT_OK

_KNOWN = {"vfcore", "vfadapters", "numpy", "yaml", "networkx", "rich", "nats", "torch"}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "dockerfile",
        help="print a Dockerfile for the image of a flow (vf deploy --image)",
        description="Print a Dockerfile that installs vfcore with the extras the flow needs, "
        "copies the flow file to /app and runs as a non-root numeric user. Build it from "
        "the directory you ran this in (the COPY path is the FLOW path as given).",
    )
    p.add_argument("flow", metavar="FLOW", help="flow.py or flow.py:factory")
    p.add_argument(
        "--base", default="python:3.11-slim", metavar="IMAGE", help="base image (python:3.11-slim)"
    )
    p.add_argument(
        "--vfcore",
        default=None,
        metavar="SPEC",
        help="what pip installs vfcore from (default: vfcore==<this version>); a wheel "
        "path is copied into the image first",
    )
    p.add_argument("--uid", type=int, default=10001, metavar="UID", help="the user id (10001)")
    p.set_defaults(handler=_cmd_dockerfile)


def imported_modules(source: str) -> set[str]:
    """Top-level names of every module ``source`` imports (absolute imports only)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


#: Characters a COPY source or destination may not hold: Dockerfile expands ``$``
#: variables and reads ``\\``, quotes and glob characters in COPY's arguments even
#: in the JSON form; control characters (a newline) would end the instruction.
_UNSAFE_IN_PATHS = frozenset("$\\\"'*?[]`")

#: A wheel's file name (PEP 427): name-version[-build]-python-abi-platform.whl.
_WHEEL = re.compile(
    r"(?P<name>[A-Za-z0-9_.]+)-[A-Za-z0-9_.!+]+(?:-\d[A-Za-z0-9_.]*)?-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+\.whl"
)
#: ``vfcore`` with optional extras and version specifiers, or ``vfcore @ URL`` (PEP 508,
#: without markers): what ``--vfcore`` may say besides a wheel path.
_VERSION = r"(?:===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
_REQUIREMENT = re.compile(
    rf"(?i)vfcore\s*(?:\[(?P<extras>[A-Za-z0-9_.,\s-]*)\])?\s*"
    rf"(?P<rest>(?:{_VERSION}(?:\s*,\s*{_VERSION})*)?|@\s*[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'$\\`]+)"
)


def _refuse(rule: str, message: str, hint: str) -> Exception:
    from vfcore import InvalidInputError

    return InvalidInputError(rule, message, hint)


def _checked_name(text: str, what: str) -> str:
    """``text`` when a Dockerfile can carry it as a path, else ``dockerfile-unsafe-path``."""
    bad = sorted({c for c in text if c in _UNSAFE_IN_PATHS or not c.isprintable()})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        raise _refuse(
            "dockerfile-unsafe-path",
            f"{what} {text!r} holds {shown}, which a Dockerfile's COPY would read as a "
            "variable, an escape, a quote, a pattern or the end of the instruction",
            "rename the file with letters, digits, spaces, '-', '_' and '.'",
        )
    return text


def context_source(path: Path, what: str, context: Path | None = None) -> str:
    """``path`` as a COPY source: relative to the build context (the current directory).

    The file itself, after symlinks (what the build can read); refused when it
    lies outside the context (``dockerfile-outside-context``: ``docker build``
    sends only the context) or its name cannot be carried (``dockerfile-unsafe-path``).
    """
    _checked_name(str(path), what)
    root = (context or Path.cwd()).resolve()
    real = path.resolve()
    try:
        relative = real.relative_to(root).as_posix()
    except ValueError:
        raise _refuse(
            "dockerfile-outside-context",
            f"{what} {str(path)!r} is {real}, outside the build context {root} (docker build "
            "sends only the directory it is given, and COPY cannot reach above it)",
            f"run vf dockerfile from a directory that holds {what}, and build from there "
            "(docker build -f Dockerfile .)",
        ) from None
    _checked_name(relative, what)
    return relative if not relative.startswith("-") else f"./{relative}"


def _json_args(*values: str) -> str:
    """Values as a Dockerfile JSON array (exec form): each one word, quoted as JSON."""
    return json.dumps(list(values), ensure_ascii=False)


def _requirement(spec: str, extras: list[str], context: Path | None) -> tuple[str, str | None]:
    """What pip installs, and the wheel to COPY first (or ``None``)."""
    wanted = f"[{','.join(extras)}]"
    match = _REQUIREMENT.fullmatch(spec.strip())
    if match is None and spec.endswith(".whl"):
        wheel = Path(spec)
        if not wheel.is_file():
            raise _refuse(
                "vfcore-wheel-not-found",
                f"--vfcore {spec!r} names no wheel file",
                "build one (pip wheel --no-deps -w dist .) and pass its path, or leave "
                "--vfcore out to install vfcore from the package index",
            )
        match = _WHEEL.fullmatch(wheel.name)
        if match is None or match["name"].lower().replace(".", "_") != "vfcore":
            raise _refuse(
                "invalid-vfcore-spec",
                f"--vfcore {spec!r} is not a vfcore wheel (vfcore-<version>-<tags>.whl)",
                "pass the wheel `pip wheel --no-deps .` builds from this repository",
            )
        source = context_source(wheel, "--vfcore", context)
        return f"/tmp/{_checked_name(wheel.name, '--vfcore')}{wanted}", source
    if not spec.strip() or match is None:
        raise _refuse(
            "invalid-vfcore-spec",
            f"--vfcore {spec!r} is neither a vfcore wheel path nor a requirement on vfcore",
            "pass e.g. --vfcore 'vfcore==0.1.0', --vfcore 'vfcore @ https://host/vfcore.whl' "
            "or --vfcore dist/vfcore-0.1.0-py3-none-any.whl",
        )
    given = [e.strip().lower() for e in (match["extras"] or "").split(",") if e.strip()]
    merged = ",".join(dict.fromkeys([*extras, *given]))
    rest = match["rest"]
    return f"vfcore[{merged}]{' ' if rest.startswith('@') else ''}{rest}", None


def dockerfile(
    flow_path: str,
    source: str,
    *,
    base: str = "python:3.11-slim",
    vfcore: str | None = None,
    uid: int = 10001,
    context: Path | None = None,
) -> str:
    """The Dockerfile text; every value checked, and quoted as the Dockerfile's JSON form.

    Raises :class:`vfcore.InvalidInputError` (exit 2) for a value that cannot be
    carried: a base that is no image reference, a ``--vfcore`` that is no
    requirement on vfcore or names no wheel, a file outside the build context or
    with a name COPY would misread, a uid that is root or out of range.
    """
    from vfcore import InvalidInputError, __version__
    from vfcore.runtime import check_image_reference

    if not 1 <= uid <= 2**31 - 1:
        raise InvalidInputError(
            "invalid-uid", f"--uid {uid} is root or out of range", "use a uid such as 10001"
        )
    try:
        check_image_reference(base, "--base")
    except InvalidInputError as exc:
        raise InvalidInputError(
            "invalid-base-image", exc.message, "pass --base like python:3.11-slim"
        ) from None
    modules = imported_modules(source)
    extras = ["broker"] + (["torch"] if "torch" in modules else [])
    others = sorted(m for m in modules - _KNOWN if m not in sys.stdlib_module_names)
    requirement, wheel = _requirement(
        f"vfcore=={__version__}" if vfcore is None else vfcore, extras, context
    )
    copy_from = context_source(Path(flow_path), "the flow file", context)
    name = _checked_name(Path(flow_path).name, "the flow file")
    lines = [
        f"# The image of flow {name} for `vf deploy --image` (rendered by `vf dockerfile`).",
        f"FROM {base}",
        "ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 HOME=/tmp",
    ]
    if wheel is not None:
        lines.append(f"COPY {_json_args(wheel, requirement.rsplit('[', 1)[0])}")
    lines.append(f"RUN {_json_args('pip', 'install', requirement)}")
    if others:
        lines.append(
            f"# The flow also imports {', '.join(others)}: add their packages, e.g. "
            "RUN pip install <package>"
        )
    lines += [
        f"RUN groupadd --gid {uid} vf && useradd --uid {uid} --gid {uid} --no-create-home "
        "--home-dir /tmp vf",
        "WORKDIR /app",
        f"COPY {_json_args(copy_from, f'/app/{name}')}",
        "# numeric, so that Kubernetes can check runAsNonRoot",
        f"USER {uid}:{uid}",
        'CMD ["vf", "--help"]',
    ]
    return "\n".join(lines) + "\n"


def _cmd_dockerfile(args: argparse.Namespace) -> int:
    from vfadapters.loading import load_runnable, split_target
    from vfcore import InvalidInputError

    path, _ = split_target(args.flow)
    if path.suffix == ".json":
        raise InvalidInputError(
            "run-needs-code",
            f"{path} is a FlowSpec: it describes the flow but holds no node code for an image",
            "pass the flow's .py file (flow.py or flow.py:factory)",
        )
    if not path.is_file():
        raise InvalidInputError(
            "flow-unreadable",
            f"cannot read the flow file {str(path)!r}: no such file",
            "pass the flow's .py file",
        )
    load_runnable(args.flow)  # the image must run it: it imports and validates here first
    try:
        source = path.read_text(encoding="utf-8")
        ast.parse(source)
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise InvalidInputError(
            "flow-unreadable",
            f"cannot read the flow file {str(path)!r}: {exc}",
            "pass the flow's .py file",
        ) from None
    sys.stdout.write(
        dockerfile(str(path), source, base=args.base, vfcore=args.vfcore, uid=args.uid)
    )
    return EXIT_OK
