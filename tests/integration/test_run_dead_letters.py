"""Dead letters are the user's data: `vf run` appends them, never deletes or truncates a file.

Real `vf run` processes. A flow whose processor raises on every third item
writes dead letters; the tests check where they go (a new file per run by
default, the named file appended to otherwise, through a symbolic link too),
that the summary says where and how many, and that a path that cannot hold
them is refused before anything starts.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.cli_helpers import REPO, assert_bad_input, one_json_document, run_vf
from tests.support.flows import write_flow

FAILING = 30  # items 0, 3, 6, … 87 of 90 raise


def failing_flow(tmp_path: Path) -> Path:
    return write_flow(
        tmp_path,
        """
        class Picky(ProcessorNode):
            def process(self, x):
                if x % 3 == 0:
                    raise ValueError(f"no multiples of 3: {x}")
                return x

        src = Numbers(90, name="src")
        flow = Flow([Record(os.devnull, name="sink")(Picky(name="picky")(src))],
                    flow_type=BATCH, name="picky-flow")
        """,
    )


def letters(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_issue_repro_keeps_an_existing_file_when_no_letter_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`echo keep > r.jsonl; vf run examples/traffic/flow.py --dead-letters r.jsonl` keeps it."""
    kept = tmp_path / "r.jsonl"
    kept.write_text("keep\n")
    env_events = tmp_path / "events.jsonl"
    monkeypatch.setenv("TRAFFIC_EVENTS", str(env_events))
    flow = REPO / "examples" / "traffic" / "flow.py"
    done = run_vf("run", flow, "--no-progress", "--dead-letters", "r.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert kept.read_text() == "keep\n"
    assert env_events.exists()  # the example's sink wrote where it was told, not in cwd
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl", "r.jsonl"]


def test_two_runs_in_one_folder_keep_both_runs_letters(tmp_path: Path) -> None:
    flow = failing_flow(tmp_path)
    docs = []
    for _ in range(2):
        done = run_vf("run", flow, "--json", "--retries", "0", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        docs.append(one_json_document(done))
    paths = [Path(str(doc["dead_letter_path"])) for doc in docs]
    assert paths[0] != paths[1]  # a new file per run, named after the run
    for doc, path in zip(docs, paths, strict=True):
        assert doc["dead_letters"] == FAILING
        assert path.parent == tmp_path
        assert path.name.startswith("picky-flow.") and path.name.endswith(".dead-letters.jsonl")
        entries = letters(path)
        assert len(entries) == FAILING
        assert {e["node"] for e in entries} == {"picky"}
    files = sorted(tmp_path.glob("*.dead-letters.jsonl"))
    assert len(files) == 2 and sum(len(letters(f)) for f in files) == 2 * FAILING


def test_a_named_file_is_appended_to_and_the_summary_says_where(tmp_path: Path) -> None:
    flow = failing_flow(tmp_path)
    target = tmp_path / "kept" / "letters.jsonl"
    target.parent.mkdir()
    target.write_text("keep\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    first = run_vf("run", flow, "--retries", "0", "--dead-letters", target, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert f"dead letters: {FAILING} appended to {target}" in first.stdout
    second = run_vf("run", flow, "--json", "--retries", "1", "--dead-letters", link, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    doc = one_json_document(second)
    assert doc["dead_letters"] == FAILING and doc["dead_letter_path"] == str(link)
    assert link.is_symlink()  # the link is written through, never replaced
    lines = target.read_text().splitlines()
    assert lines[0] == "keep" and len(lines) == 1 + 2 * FAILING
    assert [json.loads(line)["attempts"] for line in lines[1:]] == [1] * FAILING + [2] * FAILING
    assert not list(tmp_path.glob("*.dead-letters.jsonl"))  # no default file besides


@pytest.mark.parametrize(
    ("where", "rule"),
    [
        ("a-folder", "dead-letters-is-a-directory"),
        ("missing/letters.jsonl", "dead-letters-folder-missing"),
    ],
    ids=["a directory", "a missing folder"],
)
def test_a_dead_letter_path_that_cannot_hold_letters_is_refused_before_anything_starts(
    tmp_path: Path, where: str, rule: str
) -> None:
    flow = failing_flow(tmp_path)
    (tmp_path / "a-folder").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    done = run_vf("run", flow, "--dead-letters", where, cwd=tmp_path)
    assert_bad_input(done, rule)
    assert where.split("/")[0] in done.stderr
    assert "picky" not in done.stderr  # no node ran, none is blamed
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("mib", ["1e9", "inf", "nan", "0", "-4", "2049"])
def test_a_buffer_size_out_of_range_is_a_named_error(tmp_path: Path, mib: str) -> None:
    done = run_vf("run", failing_flow(tmp_path), "--buffer-mib", mib, cwd=tmp_path)
    assert_bad_input(done, "buffer-size-out-of-range")
    assert "2048 MiB" in done.stderr  # the documented limit


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_a_device_is_refused_without_waiting_for_a_reader(
    tmp_path: Path, kind: str
) -> None:
    """`--dead-letters FIFO` blocked for ever on the first letter; `/dev/full` lost it."""
    flow = failing_flow(tmp_path)
    if kind == "fifo":
        where = tmp_path / "pipe"
        os.mkfifo(where)
    else:
        where = Path("/dev/full")
        if not where.exists():
            pytest.skip("no /dev/full here")
    done = run_vf("run", flow, "--dead-letters", where, cwd=tmp_path)
    assert_bad_input(done, "dead-letters-not-a-file")
    assert ("a FIFO" if kind == "fifo" else "a device") in done.stderr
    assert "picky" not in done.stderr


def _run_with_file_size_limit(limit: int, *args: object, cwd: Path) -> subprocess.CompletedProcess:
    """`vf run` under RLIMIT_FSIZE: a write past ``limit`` bytes fails (EFBIG), as a full
    disk fails a write, without filling one (Python ignores SIGXFSZ)."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {k: v for k, v in os.environ.items() if k != "VF_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "vfadapters", *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
        preexec_fn=limited,
    )  # fmt: skip


def test_a_letter_that_cannot_be_written_fails_the_run_by_name_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """The first letter cannot be stored: the replica fails naming the file and the
    reason, without a traceback; the item is not settled (pending, not lost), the
    file is as it was, and the books hold (the run ended early: pending is no fault)."""
    full = tmp_path / "full.jsonl"
    size = 1 << 32  # sparse: 4 GiB of nothing, so a write past it is refused
    with open(full, "wb") as f:
        f.truncate(size)
    done = _run_with_file_size_limit(
        size, "run", failing_flow(tmp_path), "--dead-letters", full, "--json", cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr
    assert "could not store a dead letter" in done.stderr and "File too large" in done.stderr
    assert "Traceback" not in done.stderr
    assert "make room where the dead letters go" in done.stderr  # the hint fits the failure
    doc = one_json_document(done)
    assert doc["status"] == "failed" and "could not store a dead letter" in doc["error"]
    assert doc["books"]["balanced"] is True, doc["books"]
    assert doc["nodes"]["picky"]["dead_letters"] == 0
    assert full.stat().st_size == size


def test_a_large_file_that_is_not_ours_is_appended_to_and_not_read(tmp_path: Path) -> None:
    """A run reads its letters from where the file ended when it began: 4 GiB of
    something else before them (no newline at its end) cost nothing and count nothing;
    the first letter starts on a line of its own."""
    big = tmp_path / "big.jsonl"
    size = 1 << 32
    with open(big, "wb") as f:
        f.truncate(size)
    done = run_vf("run", failing_flow(tmp_path), "--dead-letters", big, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = one_json_document(done)
    assert doc["dead_letters"] == FAILING and doc["books"]["balanced"] is True
    with open(big, "rb") as f:
        f.seek(size)
        tail = f.read()
    assert tail.startswith(b"\n")  # the torn last line is closed first
    lines = tail[1:].decode().splitlines()
    assert len(lines) == FAILING and {json.loads(line)["node"] for line in lines} == {"picky"}
