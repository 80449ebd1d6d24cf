"""``vf deploy --render-only -o DIR``: write a run's objects as files, and touch nothing else.

One file per object, ``NN-<kind>-<name>.yaml`` with ``NN`` the apply order (so
``kubectl apply -f DIR`` applies them in that order), and a record of what was
written, ``DIR/.vf-rendered`` (JSON; no ``.yaml``/``.yml``/``.json`` extension,
so ``kubectl apply -f DIR`` never reads it): the flow, the run, and each file's
name and the SHA-256 of its bytes. What the record lists, unchanged since, is
provably vf's own: a later render of the same run of the same flow into DIR
replaces and removes exactly those files, and nothing else. Everything else is
refused before a byte is written (exit 2, ``invalid-output-dir``):

- ``-o ''``; a path that exists and is not a directory (a file, ``/dev/null``);
  one that cannot be created (``file/sub``, a read-only parent) or written into;
- DIR holding the files of another run or another flow's render (each run
  renders into its own directory: a render never deletes another's);
- a ``.yaml``, ``.yml`` or ``.json`` file in DIR that the record does not list
  (a user's ``00-namespace.yaml``, another flow's or another run's manifests, a
  symlink): ``kubectl apply -f DIR`` would apply it along with the run's;
- a file the record lists that was changed or replaced since (by content, or a
  symlink now): it is no longer provably vf's to replace;
- a name the render needs that is taken by a directory or anything else;
- a record that is not vf's (not the JSON it writes).

A write that fails midway (a full disk) is ``render-write-failed`` (exit 1); the
record is written first, listing old and new files with their hashes, so the
next render can still tell every one of them as its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vfcore import InvalidInputError

__all__ = ["RECORD_NAME", "RenderWriteError", "file_name", "write_render"]

#: The record of what a render wrote, in the output directory.
RECORD_NAME = ".vf-rendered"
#: The largest record vf reads back (a render of 100,000 pods lists far fewer files).
_RECORD_LIMIT = 16 << 20
#: Extensions ``kubectl apply -f DIR`` reads.
_APPLIED = (".yaml", ".yml", ".json")
_HINT = "render into a new or empty directory (-o manifests/<run>), or into one vf rendered before"


class RenderWriteError(Exception):
    """Writing the files failed midway (the disk, not the input): ``render-write-failed``."""


def file_name(index: int, obj: Mapping[str, Any]) -> str:
    return f"{index:02d}-{str(obj['kind']).lower()}-{obj['metadata']['name']}.yaml"


def _refuse(out: Path, why: str, hint: str = _HINT) -> InvalidInputError:
    shown = "" if out == Path() else str(out)
    return InvalidInputError("invalid-output-dir", f"-o {shown!r}: {why}", hint)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _prepare(out: Path) -> None:
    """``out`` as an existing, writable directory, or the reason it cannot be one."""
    try:
        info = out.stat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _refuse(out, f"cannot be read: {exc.strerror or exc}") from None
    if info is not None and not stat.S_ISDIR(info.st_mode):
        raise _refuse(out, "exists and is not a directory", "name a directory: -o manifests/")
    if info is None:
        try:
            out.mkdir(parents=True)
        except OSError as exc:
            raise _refuse(
                out, f"cannot be created: {exc.strerror or exc}", "name a directory you can write"
            ) from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise _refuse(out, "is not writable", "name a directory you can write")


def _read_record(out: Path) -> tuple[str | None, dict[str, set[str]]]:
    """The record of an earlier render: whose (``flow/run``), and file name → its hashes."""
    path = out / RECORD_NAME
    try:
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise ValueError("it is not a regular file")
        if not path.exists():
            return None, {}
        if path.stat().st_size > _RECORD_LIMIT:
            raise ValueError(f"it holds more than {_RECORD_LIMIT >> 20} MiB")
        doc = json.loads(path.read_text(encoding="utf-8"))
        files = doc["files"] if isinstance(doc, dict) and doc.get("written_by") == "vf" else None
        owner = doc.get("render") if isinstance(doc, dict) else None
        if (
            not isinstance(owner, str)
            or not isinstance(files, dict)
            or not all(
                isinstance(k, str) and isinstance(v, list) and all(isinstance(h, str) for h in v)
                for k, v in files.items()
            )
        ):
            raise ValueError("it is not the record vf writes")
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise _refuse(
            out,
            f"{RECORD_NAME} cannot be read ({exc}); what DIR holds cannot be told as vf's",
            f"render into a new directory, or remove {out / RECORD_NAME} and every file of "
            "the earlier render",
        ) from None
    return owner, {name: set(hashes) for name, hashes in files.items()}


def _owned(out: Path, record: Mapping[str, set[str]]) -> set[str]:
    """The recorded files still as vf wrote them; a changed one is refused."""
    owned: set[str] = set()
    changed: list[str] = []
    for name, hashes in sorted(record.items()):
        path = out / name
        if "/" in name or name in ("", ".", "..", RECORD_NAME):
            changed.append(name)
            continue
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue  # removed since: nothing to clean
        if not stat.S_ISREG(info.st_mode) or _digest(path.read_bytes()) not in hashes:
            changed.append(name)
        else:
            owned.add(name)
    if changed:
        raise _refuse(
            out,
            f"{len(changed)} file(s) of an earlier render changed since vf wrote them "
            f"({', '.join(changed[:5])}): they are no longer provably vf's to replace",
            "move your changes elsewhere (or render into a new directory), then render again",
        )
    return owned


def _foreign(out: Path, owned: set[str], wanted: Sequence[str]) -> None:
    """Refuse a directory holding what ``kubectl apply -f DIR`` would apply besides the run."""
    strangers: list[str] = []
    for entry in sorted(os.listdir(out)):
        if entry in owned or entry == RECORD_NAME:
            continue
        path = out / entry
        is_dir = path.is_dir() and not path.is_symlink()
        if entry in wanted or (entry.endswith(_APPLIED) and not is_dir):
            strangers.append(entry + ("/" if is_dir else ""))
    if strangers:
        shown = ", ".join(strangers[:5]) + (
            f" and {len(strangers) - 5} more" if len(strangers) > 5 else ""
        )
        raise _refuse(
            out,
            f"holds {shown}, which vf did not write here (no {RECORD_NAME} lists it): "
            "rendering there would overwrite it, or `kubectl apply -f DIR` would apply it "
            "along with the run",
        )


def _write_record(out: Path, render: str, files: Mapping[str, set[str]]) -> None:
    doc = {
        "written_by": "vf",
        "render": render,
        "what": "the files `vf deploy --render-only -o` wrote here; it replaces only these",
        "files": {name: sorted(hashes) for name, hashes in sorted(files.items())},
    }
    temporary = out / f"{RECORD_NAME}.tmp"
    temporary.unlink(missing_ok=True)
    with open(temporary, "x", encoding="utf-8") as handle:
        handle.write(json.dumps(doc, indent=2) + "\n")
    os.replace(temporary, out / RECORD_NAME)


def write_render(
    texts: Sequence[tuple[str, str]], output: str, *, flow: str, run: str
) -> list[Path]:
    """Write ``(file name, YAML text)`` pairs of run ``run`` of ``flow`` into ``output``.

    See the module docstring. Raises :class:`vfcore.InvalidInputError`
    (``invalid-output-dir``) before writing anything when ``output`` is not
    vf's to write, and :class:`RenderWriteError` when a write fails midway.
    """
    if output == "":
        raise _refuse(
            Path(), "is empty (it would be the current directory)", "name it: -o manifests/"
        )
    out = Path(output)
    render = f"run {run} of flow {flow}"
    _prepare(out)
    owner, record = _read_record(out)
    owned = _owned(out, record)
    if owned and owner != render:
        raise _refuse(
            out,
            f"holds the render of {owner} ({len(owned)} file(s)); rendering {render} there "
            "would delete them",
            f"render each run into its own directory (-o manifests/{run}), or delete the "
            "earlier render's files first",
        )
    names = [name for name, _ in texts]
    _foreign(out, owned, names)
    new = {name: _digest(text.encode("utf-8")) for name, text in texts}
    current = out / RECORD_NAME
    paths: list[Path] = []
    try:
        # First the record of old and new files together: a render cut short leaves
        # nothing that the next render cannot tell as its own.
        both = {name: set(record.get(name, set())) for name in owned}
        for name, digest in new.items():
            both.setdefault(name, set()).add(digest)
        _write_record(out, render, both)
        for name, text in texts:
            current = out / name
            current.unlink(missing_ok=True)  # owned, checked above: a regular file of vf's
            try:
                with open(current, "x", encoding="utf-8") as handle:  # never through a symlink
                    handle.write(text)
            except BaseException:  # a full disk, Ctrl-C, SIGTERM: no half file is left
                current.unlink(missing_ok=True)
                raise
            paths.append(current)
        current = out
        for stale in sorted(owned - set(names)):
            (out / stale).unlink(missing_ok=True)
        current = out / RECORD_NAME
        _write_record(out, render, {name: {digest} for name, digest in new.items()})
    except OSError as exc:
        raise RenderWriteError(
            f"writing {current} failed: {exc.strerror or exc}, after {len(paths)} of "
            f"{len(texts)} file(s)"
        ) from None
    return paths
