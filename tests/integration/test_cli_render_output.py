"""``vf deploy --render-only -o DIR`` writes its own files and nothing else (issue 23), as real processes.

A user's ``00-namespace.yaml``, a symlink, the current directory (``-o ''``),
another run's or another flow's render: refused with ``invalid-output-dir``
(exit 2) and left byte for byte as they were. A render of the same run replaces
exactly the files its record lists, unchanged since. Bad targets (a file,
``/dev/null``, ``file/sub``, a directory named like a manifest, a record that
is not vf's) are named errors; a write cut short (a file-size limit standing in
for a full disk) is ``render-write-failed`` (exit 1), and the next render
recovers.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.cli_helpers import REPO, assert_bad_input, run_vf
from vfadapters.cli.render_output import RECORD_NAME

FLOW = str(REPO / "examples" / "traffic" / "flow.py")


def _render(out: object, *more: str, run: str = "r1", flow: str = FLOW, cwd: Path | None = None):
    return run_vf(
        "deploy", flow, "--image", "reg.example/traffic:1", "--run", run, "--render-only",
        "-o", out, *more, cwd=cwd,
    )  # fmt: skip


def _tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder``: a file's bytes, a link's target, ``dir`` for a directory."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            out[key] = f"-> {os.readlink(path)}"
        elif path.is_dir():
            out[key] = "dir"
        else:
            out[key] = path.read_bytes()
    return out


def test_files_vf_did_not_write_are_refused_and_left_as_they_were(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious")
    for name, make in (
        ("00-namespace.yaml", lambda p: p.write_text("kind: Namespace")),
        ("42-notes.yaml", lambda p: p.write_text("notes")),
        ("05-link.yaml", lambda p: p.symlink_to(target)),
        ("config.json", lambda p: p.write_text("{}")),
        ("02-service-traffic-r1-broker-n6yzdl6cidqh-hl.yaml", lambda p: p.mkdir()),
    ):
        out = tmp_path / name.replace(".", "_")
        out.mkdir()
        make(out / name)
        before = _tree(out)
        result = _render(out)
        assert_bad_input(result, "invalid-output-dir")
        assert f"holds {name}" in result.stderr and "which vf did not write here" in result.stderr
        assert _tree(out) == before, name
    assert target.read_text() == "precious"


def test_an_empty_o_is_refused_and_the_current_directory_untouched(tmp_path: Path) -> None:
    (tmp_path / "00-mine.yaml").write_text("mine")
    before = _tree(tmp_path)
    result = _render("", cwd=tmp_path)
    assert_bad_input(result, "invalid-output-dir")
    assert "-o '': is empty (it would be the current directory)" in result.stderr
    assert _tree(tmp_path) == before


def test_another_runs_or_flows_render_is_never_deleted(tmp_path: Path) -> None:
    out = tmp_path / "manifests"
    assert _render(out).returncode == 0
    first = _tree(out)
    other_run = _render(out, run="r2")
    assert_bad_input(other_run, "invalid-output-dir")
    assert "holds the render of run r1 of flow traffic (17 file(s)); rendering run r2 of " \
        "flow traffic there would delete them" in other_run.stderr  # fmt: skip
    assert "-o manifests/r2" in other_run.stderr
    other_flow = tmp_path / "other.py"
    source = (REPO / "examples" / "traffic" / "flow.py").read_text()
    other_flow.write_text(source.replace('name: str = "traffic"', 'name: str = "other"'))
    other = _render(out, flow=str(other_flow))
    assert_bad_input(other, "invalid-output-dir")
    assert "rendering run r1 of flow other there" in other.stderr
    assert _tree(out) == first
    # the same run again, in another namespace: its own files, replaced
    assert _render(out, "--namespace", "video").returncode == 0
    assert sorted(_tree(out)) == sorted(first) and _tree(out) != first
    # once the user removed r1's files, r2 may use the directory
    for name in list(first):
        (out / name).unlink()
    assert _render(out, run="r2").returncode == 0
    assert len([n for n in _tree(out) if n.endswith(".yaml")]) == 17


def test_a_file_changed_since_vf_wrote_it_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "manifests"
    assert _render(out).returncode == 0
    edited = sorted(out.glob("*.yaml"))[4]
    edited.write_text(edited.read_text() + "# my change\n")
    before = _tree(out)
    result = _render(out)
    assert_bad_input(result, "invalid-output-dir")
    assert f"changed since vf wrote them ({edited.name})" in result.stderr
    assert _tree(out) == before
    edited.unlink()
    edited.symlink_to(tmp_path)  # replaced by a link: not vf's either
    assert_bad_input(_render(out), "invalid-output-dir")


def _a_file(d: Path) -> Path:
    d.write_text("x")
    return d


def _record(content: str | None) -> object:
    def make(d: Path) -> Path:
        d.mkdir()
        if content is None:
            (d / RECORD_NAME).mkdir()
        else:
            (d / RECORD_NAME).write_text(content)
        return d

    return make


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (_a_file, "exists and is not a directory"),
        (lambda d: _a_file(d) / "sub", "cannot be read: Not a directory"),
        (lambda d: Path("/dev/null"), "exists and is not a directory"),
        (_record("{}"), "it is not the record vf writes"),
        (_record(None), "it is not a regular file"),
        (_record("[[["), f"{RECORD_NAME} cannot be read"),
    ],
    ids=["a file", "file/sub", "/dev/null", "a record not vf's", "a record a dir", "garbage"],
)
def test_bad_targets_are_named_errors(tmp_path: Path, make, said: str) -> None:
    result = _render(make(tmp_path / "out"), cwd=tmp_path)
    assert_bad_input(result, "invalid-output-dir")
    assert said in result.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_a_named_error(tmp_path: Path) -> None:
    out = tmp_path / "ro"
    out.mkdir(mode=0o555)
    assert_bad_input(_render(out), "invalid-output-dir")
    assert_bad_input(_render(out / "sub"), "invalid-output-dir")


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE as Linux has it")
def test_a_write_cut_short_is_render_write_failed_and_the_next_render_recovers(
    tmp_path: Path,
) -> None:
    out = tmp_path / "manifests"

    def small_files() -> None:  # the record fits, a Job's manifest does not: a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (2600, 2600))

    env = {k: v for k, v in os.environ.items() if k != "VF_DEBUG"}
    cut = subprocess.run(
        [sys.executable, "-m", "vfadapters.cli", "deploy", FLOW, "--image", "r/x:1", "--run",
         "r1", "--render-only", "-o", str(out)],
        env=env, capture_output=True, text=True, timeout=120, preexec_fn=small_files,
        check=False,
    )  # fmt: skip
    assert cut.returncode == 1, cut.stderr
    assert "error: render-write-failed" in cut.stderr and "File too large" in cut.stderr
    assert "Traceback" not in cut.stderr
    again = run_vf("deploy", FLOW, "--image", "r/x:1", "--run", "r1", "--render-only", "-o", out)
    assert again.returncode == 0, again.stderr
    assert len(list(out.glob("*.yaml"))) == 17
