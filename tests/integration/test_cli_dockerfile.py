"""``vf dockerfile`` checks every input and quotes every value as the Dockerfile's own rules do
(issues 23 and 24 item 4).

The Dockerfiles it writes are parsed with BuildKit's own parser (the ``dockerfile``
package wraps it): every COPY and RUN is in JSON form, and carries exactly the
value given, one word each — a file name with spaces or accents, a requirement
with a URL. What cannot be carried is refused with exit 2 and its id, before
anything is printed: a flow that raises on import or is a ``.json`` spec, an
empty or malformed ``--base``, an empty, foreign or injected ``--vfcore``
(``x"; rm -rf / #``), a missing wheel, a file outside the build context (``../``,
an absolute path elsewhere, a symlink leading out), a name holding ``$``,
quotes, backslashes, glob characters or a newline.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.integration.cli_helpers import REPO, assert_bad_input, run_vf

dockerfile_parser = pytest.importorskip("dockerfile")

SOURCE = (REPO / "examples" / "traffic.py").read_text()


def _instructions(text: str) -> list[Any]:
    return list(dockerfile_parser.parse_string(text))


def _context(tmp_path: Path, name: str = "flow.py") -> Path:
    ctx = tmp_path / "ctx"
    ctx.mkdir(exist_ok=True)
    (ctx / name).write_text(SOURCE)
    return ctx


def test_every_value_reaches_the_parser_as_one_word(tmp_path: Path) -> None:
    name = "mon flux détecté.py"
    ctx = _context(tmp_path, name)
    (ctx / "dist").mkdir()
    wheel = "dist/vfcore-0.1.0-py3-none-any.whl"
    (ctx / wheel).write_bytes(b"PK")
    for vfcore, run, copies in (
        (None, ("pip", "install", "vfcore[broker]==0.1.0"), []),
        (wheel, ("pip", "install", "/tmp/vfcore-0.1.0-py3-none-any.whl[broker]"),
         [(wheel, "/tmp/vfcore-0.1.0-py3-none-any.whl")]),
        ("vfcore[gpu] @ https://pkgs.example/v/vfcore-0.1.0-py3-none-any.whl#sha256=ab",
         ("pip", "install",
          "vfcore[broker,gpu] @ https://pkgs.example/v/vfcore-0.1.0-py3-none-any.whl#sha256=ab"),
         []),
        ("vfcore >=0.1, <1", ("pip", "install", "vfcore[broker]>=0.1, <1"), []),
    ):  # fmt: skip
        args = [
            "dockerfile",
            name,
            "--base",
            "registry.example:5000/py/base:3.11@sha256:" + "a" * 64,
        ]
        result = run_vf(*args, *(["--vfcore", vfcore] if vfcore else []), cwd=ctx)
        assert result.returncode == 0, result.stderr
        parsed = _instructions(result.stdout)
        cmds = [c.cmd for c in parsed]
        assert cmds[0] == "FROM" and parsed[0].value == (args[-1],)
        runs = [c for c in parsed if c.cmd == "RUN" and c.json]
        assert [r.value for r in runs] == [run]
        copied = [c.value for c in parsed if c.cmd == "COPY"]
        assert all(c.json for c in parsed if c.cmd == "COPY")
        assert copied == [*copies, (name, f"/app/{name}")]
        assert parsed[-1].cmd == "CMD" and parsed[-1].value == ("vf", "--help")


@pytest.mark.parametrize(
    ("args", "rule", "said"),
    [
        (["--base", ""], "invalid-base-image", "--base '' is not a container image reference"),
        (["--base", "a b"], "invalid-base-image", "--base 'a b'"),
        (["--base", "Python:3.11"], "invalid-base-image", "the path in lowercase"),
        (["--base", "python:3.11\nRUN rm -rf /"], "invalid-base-image", "is not a container"),
        (["--vfcore", ""], "invalid-vfcore-spec", "--vfcore '' is neither"),
        (["--vfcore", 'x"; rm -rf / #'], "invalid-vfcore-spec", "is neither a vfcore wheel"),
        (["--vfcore", "vfcore==1; python_version>'3'"], "invalid-vfcore-spec", "is neither"),
        (["--vfcore", "numpy==1"], "invalid-vfcore-spec", "a requirement on vfcore"),
        (["--vfcore", "dist/missing.whl"], "vfcore-wheel-not-found", "names no wheel file"),
        (
            ["--vfcore", "other-1.0-py3-none-any.whl"],
            "invalid-vfcore-spec",
            "is not a vfcore wheel",
        ),
        (["--uid", "0"], "invalid-uid", "--uid 0 is root"),
    ],
)
def test_bad_options_are_refused_before_anything_is_printed(tmp_path, args, rule, said) -> None:
    ctx = _context(tmp_path)
    (ctx / "other-1.0-py3-none-any.whl").write_bytes(b"PK")
    result = run_vf("dockerfile", "flow.py", *args, cwd=ctx)
    assert_bad_input(result, rule)
    assert said in result.stderr and result.stdout == ""


def test_flows_that_cannot_be_built_are_refused(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    (ctx / "raises.py").write_text("raise RuntimeError('no cameras')\n")
    (ctx / "spec.json").write_text("{}")
    (ctx / "invalid.py").write_text(
        SOURCE.replace('name="detector", nb_tasks=4', 'name="detector", nb_tasks=0')
    )
    (tmp_path / "outside.py").write_text(SOURCE)
    (ctx / "link.py").symlink_to(tmp_path / "outside.py")
    for flow, rule, said in (
        ("raises.py", "flow-file-raised", "raised RuntimeError: no cameras"),
        ("spec.json", "run-needs-code", "holds no node code for an image"),
        ("invalid.py", "invalid-parameter (detector)", "nb_tasks=0"),
        ("../outside.py", "dockerfile-outside-context", "outside the build context"),
        (str(tmp_path / "outside.py"), "dockerfile-outside-context", "outside the build context"),
        ("link.py", "dockerfile-outside-context", f"is {tmp_path / 'outside.py'}, outside"),
        ("missing.py", "flow-unreadable", "no such file"),
    ):
        result = run_vf("dockerfile", flow, cwd=ctx)
        assert_bad_input(result, rule)
        assert said in result.stderr, (flow, result.stderr)
        assert result.stdout == ""


@pytest.mark.parametrize(
    "name",
    ["a$HOME.py", "it's.py", 'say "hi".py', "back\\slash.py", "glob*.py", "one[1].py",
     "new\nline.py", "tab\there.py", "tick`.py"],
)  # fmt: skip
def test_names_a_copy_would_misread_are_refused(tmp_path: Path, name: str) -> None:
    ctx = _context(tmp_path, name)
    result = run_vf("dockerfile", name, cwd=ctx)
    assert_bad_input(result, "dockerfile-unsafe-path")
    assert result.stdout == ""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1, max_size=30).filter(lambda t: "/" not in t and t not in (".", "..")))
@example("a b.py")
@example("-rf.py")
@example("# not a comment.py")
def test_a_flow_file_name_is_copied_exactly_or_refused(name: str) -> None:
    """The law, for any name: the parsed COPY holds the very name, or vf refuses it."""
    from vfadapters.cli.dockerfile_command import dockerfile
    from vfcore import InvalidInputError

    ctx = Path("/nonexistent/ctx")  # names only: nothing is read
    try:
        text = dockerfile(str(ctx / name), "", context=ctx)
    except InvalidInputError as exc:
        assert exc.rule == "dockerfile-unsafe-path", exc
        return
    (copy,) = [c for c in _instructions(text) if c.cmd == "COPY"]
    source, dest = copy.value
    assert os.path.normpath(source) == name and dest == f"/app/{name}"
    assert copy.json
