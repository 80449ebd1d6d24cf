"""Load a flow from what a user names on the command line.

``path/to/flow.py`` (the module's ``flow`` variable), ``path/to/flow.py:factory``
(a function returning a :class:`~vfcore.Flow`), or ``path/to/spec.json`` (a
:class:`~vfcore.FlowSpec` as written by ``FlowSpec.to_json``). Every way this
can go wrong raises :class:`~vfcore.InvalidInputError` with a stable id, a
one-paragraph message and a hint; an invalid node parameter raised while the
file runs surfaces as the :class:`~vfcore.InvalidFlowError` it is; a flow file
or factory that calls ``sys.exit`` or ``os._exit`` is ``flow-file-exited``, not an
exit of vf.

Every input file vf reads (a spec, a cluster dump, observations) is read with
:func:`read_bounded`: at most a documented number of bytes (64 MiB for a spec
or observations, 512 MiB for one cluster file; ``VF_MAX_INPUT_MIB`` sets
another limit for all of them), so ``--cluster /dev/zero`` or a runaway pipe
ends in ``error: input-too-large`` instead of filling memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import stat
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from vfcore import Flow, FlowSpec, InvalidFlowError, InvalidInputError
from vfcore.errors import brief

__all__ = [
    "INPUT_LIMIT_ENV",
    "MAX_CLUSTER_FILE_BYTES",
    "MAX_OBSERVATIONS_BYTES",
    "MAX_SPEC_BYTES",
    "import_file",
    "input_limit",
    "load_flow",
    "load_runnable",
    "read_bounded",
    "split_target",
]

MiB = 1 << 20
#: The most bytes vf reads from one input file of each kind (see docs/cli.md).
MAX_SPEC_BYTES = 64 * MiB
MAX_OBSERVATIONS_BYTES = 64 * MiB
MAX_CLUSTER_FILE_BYTES = 512 * MiB
#: An environment variable that, when set, replaces every limit above (in MiB).
INPUT_LIMIT_ENV = "VF_MAX_INPUT_MIB"
_CHUNK = 1 * MiB


def input_limit(default: int) -> int:
    """``default`` bytes, or what ``VF_MAX_INPUT_MIB`` says (a positive whole number of MiB)."""
    text = os.environ.get(INPUT_LIMIT_ENV)
    if text is None or not text.strip():
        return default
    try:
        mib = int(text)
    except ValueError:
        mib = 0
    if mib < 1:
        raise InvalidInputError(
            "invalid-input-limit",
            f"{INPUT_LIMIT_ENV}={text[:40]!r} is not a positive whole number of MiB",
            f"unset {INPUT_LIMIT_ENV}, or set it like {INPUT_LIMIT_ENV}=2048",
        )
    return mib * MiB


def read_bounded(path: Path, limit: int, *, what: str) -> bytes:
    """The bytes of ``path``, or ``input-too-large`` when it holds more than ``limit``.

    Never reads more than ``limit + 1`` bytes, whatever the file is: a regular
    file larger than the limit is refused from its size alone; a device, pipe
    or FIFO (``/dev/zero`` has no size) is read in 1 MiB chunks until the
    limit is passed. ``OSError`` (a missing file, no permission) is the
    caller's to report. ``limit`` is replaced by ``VF_MAX_INPUT_MIB`` when set.
    """
    limit = input_limit(limit)

    def too_large(seen: str) -> InvalidInputError:
        return InvalidInputError(
            "input-too-large",
            f"{path} {seen}, more than the {_mib(limit)} vf reads from {what}",
            f"pass a smaller file, or raise the limit with {INPUT_LIMIT_ENV}=<MiB> "
            "(see docs/cli.md)",
        )

    with open(path, "rb") as handle:
        info = os.fstat(handle.fileno())
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:
            raise too_large(f"holds {_mib(info.st_size)}")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = handle.read(min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise too_large("goes on past the limit")
    return b"".join(chunks)


def _mib(size: int) -> str:
    return f"{size / MiB:.0f} MiB" if size >= MiB else f"{size} bytes"


def split_target(target: str) -> tuple[Path, str | None]:
    """``'a/flow.py:make'`` → ``(Path('a/flow.py'), 'make')``; no factory → ``None``."""
    path, sep, factory = target.rpartition(":")
    if sep and factory.isidentifier() and path:
        return Path(path), factory
    return Path(target), None


def _text(exc: BaseException) -> str:
    """``str(exc)``, cut to 500 characters; a user exception whose ``__str__`` fails says so."""
    try:
        text = str(exc)
    except Exception:
        return "<the exception cannot be printed>"
    return text if len(text) <= 500 else text[:500] + "…"


def _where(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f" (line {frames[-1].lineno})" if frames else ""


class _OsExitCalled(BaseException):
    """``os._exit(code)`` called by a flow file while vf loads it: raised instead of ending vf."""

    def __init__(self, code: object) -> None:
        super().__init__(code)
        self.code = code


#: How many flow files or factories are being loaded right now (``_os_exit_reported``).
_loading = [0]
_real_os_exit = os._exit


def _os_exit_while_loading(code: int = 0) -> NoReturn:
    """``os._exit`` while vf loads a flow: raise, so that vf reports it; else the real one.

    A flow file that bound it (``from os import _exit``) while loading and calls it
    later, outside a load, gets the real ``os._exit``.
    """
    if _loading[0]:
        raise _OsExitCalled(code)
    _real_os_exit(code)


@contextlib.contextmanager
def _os_exit_reported() -> Iterator[None]:
    """While a flow file or factory runs, ``os._exit`` raises instead of ending the process.

    ``os._exit`` skips every ``finally`` and flush: called by a flow file at import,
    it would end ``vf explain`` with the flow's code and no word. Here it becomes
    ``flow-file-exited``, like ``sys.exit``.
    """
    _loading[0] += 1
    os._exit = _os_exit_while_loading  # type: ignore[assignment]
    try:
        yield
    finally:
        _loading[0] -= 1
        if not _loading[0]:
            os._exit = _real_os_exit


def import_file(path: Path) -> ModuleType:
    """Import a flow file under a name unique to its absolute path (``_vf_flow_<stem>_<hash>``).

    The same file gets the same module name in every process, so the local
    executor's workers find the classes a flow file defines by importing it
    again. Errors are :class:`InvalidInputError` (``flow-file-raised``, ...).
    """
    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    module_name = f"_vf_flow_{resolved.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        raise InvalidInputError(
            "flow-file-not-python",
            f"{path} cannot be imported as Python",
            "name a .py file that defines `flow`, or a .json FlowSpec",
        )
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    folder = str(resolved.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        with contextlib.redirect_stdout(sys.stderr), _os_exit_reported():  # stdout: --json
            spec.loader.exec_module(module)
    except InvalidFlowError:
        sys.modules.pop(module_name, None)
        raise
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise InvalidInputError(
            "flow-file-raised",
            f"{path} has a syntax error at line {exc.lineno}: {exc.msg}",
            "fix the syntax error, then run the command again",
        ) from None
    except BaseException as exc:  # the user's module may raise anything
        sys.modules.pop(module_name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise  # Ctrl-C while the module loads: the CLI says "interrupted" (exit 130)
        if isinstance(exc, SystemExit | _OsExitCalled):
            raise _exited(f"importing {path}", exc, resolved) from None
        raise InvalidInputError(
            "flow-file-raised",
            f"importing {path} raised {type(exc).__name__}: {_text(exc)}{_where(exc, resolved)}",
            f"run `python {path}` to see the full traceback, and fix the error",
        ) from None
    return module


def _exited(what: str, exc: SystemExit | _OsExitCalled, path: Path) -> InvalidInputError:
    """A flow file or factory that called ``sys.exit`` or ``os._exit``: vf reports it."""
    code = exc.code
    said = "" if code is None or isinstance(code, int) else f" ({_text(SystemExit(code))})"
    status = brief(code) if isinstance(code, int) else (0 if code is None else 1)
    call = "os._exit" if isinstance(exc, _OsExitCalled) else "sys.exit"
    return InvalidInputError(
        "flow-file-exited",
        f"{what} called {call}({status}){said}{_where(exc, path)} while vf was loading the "
        "flow; a flow file must define the flow, not end the program",
        f'move the {call}() call under `if __name__ == "__main__":`, '
        "or raise an exception that says what is wrong",
    )


def load_flow(target: str) -> Flow | FlowSpec:
    """The flow named by ``target`` (see the module docstring)."""
    path, factory = split_target(target)
    if not path.exists():
        raise InvalidInputError(
            "flow-file-not-found",
            f"no such file: {path}",
            "pass the path of a flow module (flow.py, or flow.py:factory) or a FlowSpec .json",
        )
    if path.is_dir():
        raise InvalidInputError(
            "flow-file-not-found",
            f"{path} is a directory, not a flow file",
            "pass the path of a .py flow module or a .json FlowSpec",
        )
    if path.suffix == ".json":
        if factory is not None:
            raise InvalidInputError(
                "flow-factory-missing",
                f"{path} is a JSON spec; it has no factory {factory!r}",
                f"pass {path} alone",
            )
        try:
            text = read_bounded(path, MAX_SPEC_BYTES, what="a flow spec").decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInputError(
                "flow-file-unreadable", f"cannot read {path}: {exc}", "check the file"
            ) from None
        return FlowSpec.from_json(text)

    module = import_file(path)
    candidates = sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (isinstance(value, Flow) or (callable(value) and name in ("build", "make_flow")))
    )
    if factory is None:
        value = getattr(module, "flow", None)
        if value is None:
            hint = (
                f"found {candidates}: pass {path}:<factory> for a function"
                if candidates
                else "define `flow = Flow([...])` at module level"
            )
            raise InvalidInputError(
                "flow-variable-missing",
                f"{path} defines no `flow` variable",
                f"{hint}, or name a factory as {path}:make_flow",
            )
        if not isinstance(value, Flow):
            raise InvalidInputError(
                "flow-variable-invalid",
                f"`flow` in {path} is of type {type(value).__name__}, not a vfcore.Flow",
                "set flow = Flow([consumer, ...], flow_type=BATCH)",
            )
        return value

    func = getattr(module, factory, None)
    if func is None or not callable(func):
        raise InvalidInputError(
            "flow-factory-missing",
            f"{path} has no function {factory!r}"
            + ("" if func is None else f" ({factory} is of type {type(func).__name__})"),
            f"define `def {factory}() -> Flow` in {path}, or drop ':{factory}' to use `flow`",
        )
    try:
        with contextlib.redirect_stdout(sys.stderr), _os_exit_reported():
            value = func()
    except (InvalidFlowError, KeyboardInterrupt):
        raise
    except (SystemExit, _OsExitCalled) as exc:
        raise _exited(f"{path}:{factory}()", exc, path.resolve()) from None
    except BaseException as exc:  # the user's factory may raise anything
        raise InvalidInputError(
            "flow-factory-raised",
            f"{path}:{factory}() raised {type(exc).__name__}: {_text(exc)}"
            f"{_where(exc, path.resolve())}",
            "call the factory in Python to see the traceback, and fix the error",
        ) from None
    if not isinstance(value, Flow):
        raise InvalidInputError(
            "flow-factory-invalid",
            f"{path}:{factory}() returned an object of type {type(value).__name__}, not a vfcore.Flow",
            f"make {factory}() return Flow([consumer, ...])",
        )
    return value


def load_runnable(target: str) -> tuple[Flow, FlowSpec]:
    """``(flow, spec)`` of a flow file, named as ``vf run`` names it."""
    from dataclasses import replace

    from vfcore import validate

    loaded = load_flow(target)
    if isinstance(loaded, FlowSpec):
        raise InvalidInputError(
            "run-needs-code",
            f"{target} is a FlowSpec: it describes the flow but holds no node code to run",
            "pass the flow's .py file (flow.py or flow.py:factory)",
        )
    name = loaded.name or split_target(target)[0].stem
    spec = loaded.spec()
    if spec.name != name:
        spec = replace(spec, name=name)
    issues = validate(spec)
    if any(i.is_error for i in issues):
        raise InvalidFlowError(issues)
    return loaded, spec
