"""Load a flow from what a user names on the command line.

``path/to/flow.py`` (the module's ``flow`` variable), ``path/to/flow.py:factory``
(a function returning a :class:`~vfcore.Flow`), or ``path/to/spec.json`` (a
:class:`~vfcore.FlowSpec` as written by ``FlowSpec.to_json``). Every way this
can go wrong raises :class:`~vfcore.InvalidInputError` with a stable id, a
one-paragraph message and a hint; an invalid node parameter raised while the
file runs surfaces as the :class:`~vfcore.InvalidFlowError` it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

from vfcore import Flow, FlowSpec, InvalidFlowError, InvalidInputError

__all__ = ["import_file", "load_flow", "split_target"]


def split_target(target: str) -> tuple[Path, str | None]:
    """``'a/flow.py:make'`` → ``(Path('a/flow.py'), 'make')``; no factory → ``None``."""
    path, sep, factory = target.rpartition(":")
    if sep and factory.isidentifier() and path:
        return Path(path), factory
    return Path(target), None


def _where(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f" (line {frames[-1].lineno})" if frames else ""


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
        with contextlib.redirect_stdout(sys.stderr):  # stdout is for --json alone
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
            raise
        raise InvalidInputError(
            "flow-file-raised",
            f"importing {path} raised {type(exc).__name__}: {exc}{_where(exc, resolved)}",
            f"run `python {path}` to see the full traceback, and fix the error",
        ) from None
    return module


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
            text = path.read_text(encoding="utf-8")
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
        with contextlib.redirect_stdout(sys.stderr):
            value = func()
    except InvalidFlowError:
        raise
    except Exception as exc:
        raise InvalidInputError(
            "flow-factory-raised",
            f"{path}:{factory}() raised {type(exc).__name__}: {exc}{_where(exc, path.resolve())}",
            "call the factory in Python to see the traceback, and fix the error",
        ) from None
    if not isinstance(value, Flow):
        raise InvalidInputError(
            "flow-factory-invalid",
            f"{path}:{factory}() returned an object of type {type(value).__name__}, not a vfcore.Flow",
            f"make {factory}() return Flow([consumer, ...])",
        )
    return value
