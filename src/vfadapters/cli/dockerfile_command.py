"""``vf dockerfile FLOW``: print a Dockerfile for the image ``vf deploy --image`` names.

A slim Python base, vfcore installed with the extras the flow needs (``broker``
always: pods run ``vf worker``; ``torch`` when the flow imports torch), the flow
file copied to ``/app/<file name>`` (where ``vf deploy`` looks by default) and a
non-root numeric user (10001, the uid the rendered pods run as under the
restricted Pod Security Standard). Other third-party modules the flow imports
are listed in a comment: their pip names are the user's to add.
"""

from __future__ import annotations

import argparse
import ast
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


def _context_path(path: str) -> str:
    """``path`` as a COPY source: relative to the current directory (the build context)."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.name  # outside the context: build from the file's own directory


def dockerfile(
    flow_path: str,
    source: str,
    *,
    base: str = "python:3.11-slim",
    vfcore: str | None = None,
    uid: int = 10001,
) -> str:
    from vfcore import InvalidInputError, __version__

    if not 1 <= uid <= 2**31 - 1:
        raise InvalidInputError(
            "invalid-uid", f"--uid {uid} is root or out of range", "use a uid such as 10001"
        )
    modules = imported_modules(source)
    extras = ["broker"] + (["torch"] if "torch" in modules else [])
    others = sorted(m for m in modules - _KNOWN if m not in sys.stdlib_module_names)
    spec = vfcore or f"vfcore=={__version__}"
    copy_from = _context_path(flow_path)
    lines = [
        f"# The image of flow {Path(flow_path).name} for `vf deploy --image` (rendered by "
        "`vf dockerfile`).",
        f"FROM {base}",
        "ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 HOME=/tmp",
    ]
    wanted = f"[{','.join(extras)}]"
    if spec.endswith(".whl"):
        wheel = Path(spec).name
        lines.append(f"COPY {_context_path(spec)} /tmp/{wheel}")
        requirement = f"/tmp/{wheel}{wanted}"
    else:
        match = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(.*)", spec)
        requirement = f"{match[1]}{wanted}{match[2]}" if match else f"{spec}{wanted}"
    lines.append(f'RUN pip install "{requirement}"')
    if others:
        lines.append(
            f"# The flow also imports {', '.join(others)}: add their packages, e.g. "
            "RUN pip install <package>"
        )
    name = Path(flow_path).name
    lines += [
        f"RUN groupadd --gid {uid} vf && useradd --uid {uid} --gid {uid} --no-create-home "
        "--home-dir /tmp vf",
        "WORKDIR /app",
        f"COPY {copy_from} /app/{name}",
        "# numeric, so that Kubernetes can check runAsNonRoot",
        f"USER {uid}:{uid}",
        'CMD ["vf", "--help"]',
    ]
    return "\n".join(lines) + "\n"


def _cmd_dockerfile(args: argparse.Namespace) -> int:
    from vfadapters.loading import split_target
    from vfcore import InvalidInputError

    path, _ = split_target(args.flow)
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
