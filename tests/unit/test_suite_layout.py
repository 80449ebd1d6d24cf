"""The test suite's own house rules (docs/testing.md, "Where tests and helpers live").

- no test module imports from another test module: a helper two modules share
  lives in a support module (``tests/support/``, ``tests/*_cases.py``,
  ``tests/property/*_strategies.py``, ``tests/integration/*_helpers.py``), so a
  test file can be renamed, split or deleted without breaking another;
- ``tools/mutation.py`` runs each module's mutants against test files that exist
  (it skips a missing one silently, so a renamed file would lower a score unseen).

The import check is shown to catch the mistake it exists for on a small synthetic tree.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"


def _is_test_module(module: str) -> bool:
    return module.rpartition(".")[2].startswith("test_")


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of_test_modules(root: Path) -> list[str]:
    """``importer -> imported`` for every import, at any level, of a test module by a
    module under ``root`` (absolute, relative, ``import x`` and ``from x import y``)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(root, path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [base]
                if (root.parent / base.replace(".", "/")).is_dir():  # from a package: modules
                    targets += [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                if _is_test_module(target) and target.split(".")[0] == root.name:
                    found.append(f"{module} -> {target}")
    return sorted(set(found))


def test_no_test_module_imports_from_another_test_module() -> None:
    assert imports_of_test_modules(TESTS) == []


def test_the_import_check_finds_every_form_of_importing_a_test_module(tmp_path: Path) -> None:
    root = tmp_path / "tests"
    (root / "unit").mkdir(parents=True)
    (root / "support").mkdir()
    for package in (root, root / "unit", root / "support"):
        (package / "__init__.py").write_text("")
    (root / "support" / "flows.py").write_text("def write_flow(): ...\n")
    (root / "unit" / "test_a.py").write_text("from tests.support.flows import write_flow\n")
    forms = {
        "test_b": "from tests.unit.test_a import write_flow\n",
        "test_c": "from .test_a import write_flow\n",
        "test_d": "from tests.unit import test_a\n",
        "test_e": "def test_x():\n    import tests.unit.test_a\n",
    }
    for name, text in forms.items():
        (root / "unit" / f"{name}.py").write_text(text)
    assert imports_of_test_modules(root) == [
        f"tests.unit.{name} -> tests.unit.test_a" for name in sorted(forms)
    ]
    for name in forms:
        (root / "unit" / f"{name}.py").write_text("from tests.support.flows import write_flow\n")
    assert imports_of_test_modules(root) == []


def test_the_mutation_tool_names_only_files_that_exist() -> None:
    spec = importlib.util.spec_from_file_location(
        "vf_mutation_tool", REPO / "tools" / "mutation.py"
    )
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    missing = [
        f"{name}: {path}"
        for name, (mutated, tests) in tool.MODULES.items()
        for path in (*mutated, *tests)
        if not (REPO / path).is_file()
    ]
    assert tool.MODULES and missing == []
