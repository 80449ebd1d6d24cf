"""vfcore is pure: no I/O, no hidden state, no heavy or adapter imports.

The one architectural rule (README, Layout), enforced by an AST scan of every module
under ``src/vfcore``. The scanner is tested too: each forbidden pattern is fed
to it as a small source string and must be flagged, and allowed look-alikes
(``random.Random(3)``, ``node.open()``) must not be.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
VFCORE = SRC / "vfcore"

#: Top-level modules vfcore must never import (any submodule, alias or relative form).
FORBIDDEN_MODULES = frozenset(
    {
        # the brief's list: I/O, processes, clocks, hidden state, heavy deps, the adapters
        "os",
        "sys",
        "subprocess",
        "socket",
        "multiprocessing",
        "threading",
        "asyncio",
        "time",
        "uuid",
        "kubernetes",
        "torch",
        "requests",
        "vfadapters",
        # the same reasons, by other doors: dynamic import, files, signals, native calls
        "importlib",
        "builtins",
        "pathlib",
        "shutil",
        "tempfile",
        "io",
        "urllib",
        "http",
        "signal",
        "ctypes",
        "concurrent",
    }
)

#: Builtins that do I/O or run code; calling them by name is forbidden.
FORBIDDEN_BUILTIN_CALLS = frozenset(
    {"open", "print", "input", "exec", "eval", "__import__", "breakpoint"}
)

#: Clock reads through ``datetime``: ``datetime.now()``, ``date.today()``, …
CLOCK_METHODS = frozenset({"now", "utcnow", "today"})
CLOCK_OWNERS = frozenset({"datetime", "date"})


@dataclass(frozen=True, order=True)
class Violation:
    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


def _resolve_relative(module: str | None, level: int, package: str) -> str:
    """``from ..x import y`` inside ``package`` → the absolute module it names.

    A relative import that climbs above the top-level package resolves against
    the root, so ``from .. import vfadapters`` in ``vfcore/x.py`` names ``vfadapters``.
    """
    if level == 0:
        return module or ""
    parts = package.split(".") if package else []
    base = parts[: max(len(parts) - (level - 1), 0)]
    return ".".join([*base, module] if module else base)


def _forbidden_root(dotted: str) -> str | None:
    root = dotted.split(".")[0]
    return root if root in FORBIDDEN_MODULES else None


def _last_name(node: ast.expr) -> str | None:
    """``a.b.c`` → ``'c'``; ``a`` → ``'a'``; anything else → None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class _PurityVisitor(ast.NodeVisitor):
    def __init__(self, filename: str, package: str) -> None:
        self.filename = filename
        self.package = package
        self.violations: list[Violation] = []
        # Names bound to the random module, per scope (a parameter can shadow it).
        self._random_aliases: list[set[str]] = [set()]
        # Names bound to random.Random by `from random import Random [as R]`.
        self._random_class_aliases: set[str] = set()

    def flag(self, node: ast.AST, what: str) -> None:
        self.violations.append(Violation(self.filename, getattr(node, "lineno", 0), what))

    # -- imports -------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            root = _forbidden_root(alias.name)
            if root is not None:
                shown = alias.name + (f" as {alias.asname}" if alias.asname else "")
                self.flag(node, f"import {shown} (vfcore must not import {root})")
            if alias.name == "random":
                bound = alias.asname or "random"
                self._random_aliases[0].add(bound)
                self._random_aliases[-1].add(bound)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        dots = "." * node.level
        source = f"{dots}{node.module or ''}"
        target = _resolve_relative(node.module, node.level, self.package)
        candidates = [target] if target else []
        candidates += [f"{target}.{a.name}" if target else a.name for a in node.names]
        if node.level:
            # A relative import that names a forbidden module anywhere is suspect too.
            candidates += (node.module or "").split(".") + [a.name for a in node.names]
        for dotted in candidates:
            root = _forbidden_root(dotted)
            if root is not None:
                names = ", ".join(a.name for a in node.names)
                self.flag(node, f"from {source} import {names} (vfcore must not import {root})")
                break
        if target == "random":
            for alias in node.names:
                if alias.name == "Random":
                    self._random_class_aliases.add(alias.asname or alias.name)
                else:
                    self.flag(
                        node,
                        f"from random import {alias.name} (module-level randomness; "
                        "take a seeded random.Random as an argument)",
                    )
        self.generic_visit(node)

    # -- scopes (a parameter named like the module shadows it) ---------------
    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        args = node.args
        params = {
            a.arg
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            if a is not None
        }
        self._random_aliases.append(self._current_random_aliases() - params)
        self.generic_visit(node)
        self._random_aliases.pop()

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function
    visit_Lambda = _visit_function

    def _current_random_aliases(self) -> set[str]:
        return self._random_aliases[-1]

    # -- random, clocks, builtins --------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        value = node.value
        if (
            isinstance(value, ast.Name)
            and value.id in self._current_random_aliases()
            and node.attr != "Random"
        ):
            self.flag(
                node,
                f"{value.id}.{node.attr} uses the module-level random generator; "
                "take a seeded random.Random as an argument",
            )
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            if func.id in FORBIDDEN_BUILTIN_CALLS:
                self.flag(node, f"call of builtin {func.id}() (no I/O in vfcore)")
            if func.id in self._random_class_aliases and not (node.args or node.keywords):
                self.flag(node, f"{func.id}() without a seed is nondeterministic")
        elif isinstance(func, ast.Attribute):
            owner = _last_name(func.value)
            is_module = isinstance(func.value, ast.Name) and owner in self._current_random_aliases()
            if is_module and func.attr == "Random" and not (node.args or node.keywords):
                self.flag(node, f"{owner}.Random() without a seed is nondeterministic")
            if owner in CLOCK_OWNERS and func.attr in CLOCK_METHODS:
                self.flag(
                    node, f"{owner}.{func.attr}() reads the clock; take the time as an argument"
                )
        self.generic_visit(node)


def scan_source(
    source: str, filename: str = "<string>", module: str = "vfcore.probe"
) -> list[Violation]:
    """Every purity violation in ``source`` (the module named ``module``), sorted by line."""
    tree = ast.parse(source, filename=filename)
    is_package = filename.endswith("__init__.py")
    package = module if is_package else module.rpartition(".")[0]
    visitor = _PurityVisitor(filename, package)
    visitor.visit(tree)
    return sorted(visitor.violations)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


VFCORE_FILES = sorted(VFCORE.rglob("*.py"))


def test_the_scan_covers_the_package() -> None:
    names = {p.relative_to(VFCORE).as_posix() for p in VFCORE_FILES}
    assert "__init__.py" in names
    assert {"flow/__init__.py", "flow/authoring.py", "flow/spec.py", "flow/validate.py"} <= names
    assert {"placement/demand.py", "placement/explain.py"} <= names


@pytest.mark.parametrize("path", VFCORE_FILES, ids=lambda p: p.relative_to(SRC).as_posix())
def test_vfcore_module_is_pure(path: Path) -> None:
    rel = path.relative_to(SRC.parent).as_posix()
    violations = scan_source(path.read_text(encoding="utf-8"), rel, _module_name(path))
    assert not violations, "vfcore must do no I/O (README, Layout):\n" + "\n".join(
        str(v) for v in violations
    )


# -- the scanner catches what it must -----------------------------------------

FORBIDDEN_SNIPPETS = {
    "import os": "import os",
    "from os import path": "from os import path",
    "import os.path as p": "import os.path as p",
    "import sys": "import sys",
    "aliased subprocess": "import subprocess as sp",
    "from socket import socket": "from socket import socket",
    "from multiprocessing import Queue": "from multiprocessing import Queue",
    "from multiprocessing.pool import Pool": "from multiprocessing.pool import Pool",
    "import threading": "import threading",
    "import asyncio": "import asyncio",
    "from time import time": "from time import time",
    "import time as clock": "import time as clock",
    "import uuid": "import uuid",
    "import kubernetes.client": "import kubernetes.client",
    "from torch import nn": "from torch import nn",
    "import requests": "import requests",
    "import vfadapters": "import vfadapters",
    "from vfadapters.cli import main": "from vfadapters.cli import main",
    "relative import of the adapters": "from .. import vfadapters",
    "relative import naming os": "from . import os",
    "lazy import inside a function": "def f():\n    import torch\n    return torch",
    "import under TYPE_CHECKING": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import kubernetes",
    "import importlib": "import importlib",
    "print('x')": "print('x')",
    "open('f')": "open('f')",
    "input()": "x = input()",
    "exec": "exec('x = 1')",
    "eval": "eval('1 + 1')",
    "__import__('os')": "__import__('os')",
    "breakpoint()": "breakpoint()",
    "random.random()": "import random\nrandom.random()",
    "random.shuffle(xs)": "import random\nrandom.shuffle([1, 2])",
    "random.seed(1)": "import random\nrandom.seed(1)",
    "aliased random module": "import random as rnd\nrnd.choice([1, 2])",
    "random function passed around": "import random\npick = random.choice",
    "from random import choice": "from random import choice",
    "random.Random() unseeded": "import random\nr = random.Random()",
    "Random() unseeded via from-import": "from random import Random\nr = Random()",
    "random.SystemRandom()": "import random\nr = random.SystemRandom(1)",
    "module random inside a function": "import random\ndef f(xs):\n    return random.choice(xs)",
    "datetime.now()": "from datetime import datetime\nnow = datetime.now()",
    "date.today()": "import datetime\nd = datetime.date.today()",
}


@pytest.mark.parametrize("source", FORBIDDEN_SNIPPETS.values(), ids=FORBIDDEN_SNIPPETS.keys())
def test_scanner_flags_forbidden_pattern(source: str) -> None:
    violations = scan_source(source, "probe.py")
    assert violations, f"not flagged:\n{source}"
    last_line = source.count("\n") + 1
    assert all(v.file == "probe.py" and 1 <= v.line <= last_line for v in violations)


ALLOWED_SNIPPETS = {
    "seeded Random": "import random\nr = random.Random(3)",
    "seeded Random by keyword": "import random\nr = random.Random(x=3)",
    "Random in an annotation": "import random\ndef f(rng: random.Random) -> int:\n    return rng.randint(0, 9)",
    "seeded Random via from-import": "from random import Random\nr = Random(7)\nr.shuffle([1, 2])",
    "a seeded instance passed in": "def pick(xs, rng):\n    return rng.choice(xs)",
    "a parameter shadowing the module": "import random\ndef f(random):\n    return random.random()",
    "import json": "import json\njson.dumps({})",
    "method named open": "node.open()\nnode.close()",
    "method named print": "report.print()",
    "defining open()": "class Node:\n    def open(self):\n        pass",
    "keyword named input": "f(input=1, open=2)",
    "stdlib pure modules": "import math, heapq, hashlib, inspect, re\nfrom collections import deque",
    "vfcore relative imports": "from . import spec\nfrom .flow import Flow",
    "a name that only contains os": "import osmosis_helpers",
    "time as a variable": "time = 3\nx = time + 1",
    "lazy ortools import": "def solve():\n    from ortools.sat.python import cp_model\n    return cp_model",
}


@pytest.mark.parametrize("source", ALLOWED_SNIPPETS.values(), ids=ALLOWED_SNIPPETS.keys())
def test_scanner_allows_pure_code(source: str) -> None:
    assert scan_source(source, "probe.py") == []


def test_scanner_reports_file_and_line_of_each_violation() -> None:
    source = "import json\nimport os\n\n\ndef f():\n    print('x')\n    return open('f')\n"
    violations = scan_source(source, "src/vfcore/bad.py", "vfcore.bad")
    assert [(v.file, v.line) for v in violations] == [
        ("src/vfcore/bad.py", 2),
        ("src/vfcore/bad.py", 6),
        ("src/vfcore/bad.py", 7),
    ]
    assert str(violations[0]).startswith("src/vfcore/bad.py:2: import os")


def test_relative_import_escaping_the_package_is_resolved() -> None:
    # Inside vfcore/sub/mod.py, `from ... import vfadapters` names the top-level package.
    [violation] = scan_source("from ... import vfadapters", "m.py", "vfcore.sub.mod")
    assert "vfadapters" in violation.what


# -- importing vfcore stays light ---------------------------------------------


def test_importing_vfcore_pulls_in_no_heavy_or_adapter_module(tmp_path: Path) -> None:
    code = (
        "import vfcore, sys; "
        "print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in {'ortools','kubernetes','torch','numpy','vfadapters'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    loaded = ast.literal_eval(result.stdout.strip())
    roots = {m.split(".")[0] for m in loaded}
    assert roots.isdisjoint({"ortools", "kubernetes", "torch", "vfadapters"}), loaded
