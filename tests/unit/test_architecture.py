"""The house rules of docs/architecture.md, checked on the source itself.

- no import circle among the modules under ``src/`` (module-level imports);
- no module imports a private name (``_x``) from another module, at any level;
- vfcore's layers import downwards only: a module never imports, at module
  level, a module of a higher layer (flow → routing → cluster → placement →
  scaling → runtime; ``errors`` and ``quantity`` are the foundations).

Each check is a function of parsed source, and each is shown to catch the
mistake it exists for on a small synthetic tree.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

#: vfcore's layers, lowest first. A module may import its own layer and lower ones.
LAYERS = ("foundation", "flow", "routing", "cluster", "placement", "scaling", "runtime")
#: Where each top-level vfcore name lives (a package, or a module at the root).
LAYER_OF = {
    "errors": "foundation",
    "quantity": "foundation",
    "flow": "flow",
    "routing": "routing",
    "cluster": "cluster",
    "placement": "placement",
    "scaling": "scaling",
    "runtime": "runtime",
}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the module imported from (resolved to a module of the tree if possible)
    name: str | None  # the name imported (from-imports)
    module_level: bool  # runs when the module is imported
    in_function: bool  # runs when a function is called (not under `if TYPE_CHECKING:`)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_only(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def imports_of(root: Path) -> tuple[set[str], list[Import]]:
    """Every import in every module under ``root``, resolved against the tree."""
    files = {module_name(root, p): p for p in sorted(root.rglob("*.py"))}
    found: list[Import] = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        top_level = {
            id(n) for stmt in tree.body if not _type_checking_only(stmt) for n in ast.walk(stmt)
        }
        typing_only = {
            id(n) for stmt in tree.body if _type_checking_only(stmt) for n in ast.walk(stmt)
        }
        # statements inside functions are not module level even under a top-level statement
        nested = {
            id(n)
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            for n in ast.walk(fn)
            if n is not fn
        }
        for node in ast.walk(tree):
            at_module_level = id(node) in top_level and id(node) not in nested
            in_function = id(node) in nested and id(node) not in typing_only
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    target = candidate if candidate in files else base
                    found.append(Import(module, target, alias.name, at_module_level, in_function))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    found.append(Import(module, alias.name, None, at_module_level, in_function))
    return set(files), found


def import_cycles(root: Path) -> list[list[str]]:
    modules, found = imports_of(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for imp in found:
        if imp.module_level and imp.target in modules and imp.target != imp.source:
            graph.add_edge(imp.source, imp.target)
    return sorted(sorted(c) for c in nx.simple_cycles(graph))


def private_imports(root: Path) -> list[str]:
    modules, found = imports_of(root)
    return sorted(
        f"{imp.source} imports {imp.name} from {imp.target}"
        for imp in found
        if imp.name
        and imp.name.startswith("_")
        and not imp.name.startswith("__")
        and (
            imp.target in modules or imp.target.split(".")[0] in {m.split(".")[0] for m in modules}
        )
        and imp.target != imp.source
    )


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "vfcore" or len(parts) < 2:
        return None
    return LAYER_OF.get(parts[1])


def upward_imports(root: Path) -> list[str]:
    _, found = imports_of(root)
    bad = []
    for imp in found:
        src, dst = layer_of(imp.source), layer_of(imp.target)
        if imp.module_level and src and dst and LAYERS.index(dst) > LAYERS.index(src):
            bad.append(f"{imp.source} ({src}) imports {imp.target} ({dst})")
    return sorted(bad)


# -- the rules, on the real tree -------------------------------------------------


def test_every_vfcore_package_and_root_module_has_a_layer() -> None:
    tops = {
        p.stem
        for p in (SRC / "vfcore").iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").is_file()) and not p.name.startswith("_")
    }
    unplaced = sorted(tops - set(LAYER_OF))
    assert unplaced == [], "give each new package a layer here and in docs/architecture.md"


def test_no_import_circle_inside_src() -> None:
    assert import_cycles(SRC) == []


def test_no_module_imports_a_private_name_from_another_module() -> None:
    assert private_imports(SRC) == []


def test_vfcore_layers_import_downwards_only() -> None:
    assert upward_imports(SRC) == []


#: Function-level imports vfcore keeps, all for laziness (docs/architecture.md).
LAZY_IMPORTS = {
    "ortools.sat.python",  # the solver, on the first solve
    "vfcore.placement.scheduler",  # the scheduler model, when a plan predicts it
    "vfcore.placement.mig",  # the MIG planner, in mix mode only
    "vfcore.placement.dra.planner",  # the DRA planner, in dra mode only
    "networkx",  # the flow's graph, when it is validated (not in workers: their start)
}


def function_level_imports(root: Path, package: str) -> list[str]:
    _, found = imports_of(root)
    return sorted(
        f"{imp.source} imports {imp.target} inside a function"
        for imp in found
        if imp.source.split(".")[0] == package and imp.in_function
    )


def test_function_level_imports_in_vfcore_are_only_the_documented_lazy_ones() -> None:
    def documented(line: str) -> bool:
        source, target = line.removesuffix(" inside a function").split(" imports ")
        if source in ("vfcore", "vfcore.placement", "vfcore.runtime"):  # __getattr__ resolves
            return True  # lazily exported names (docs/api.md, "Faces")
        return any(target == lazy or target.startswith(lazy + ".") for lazy in LAZY_IMPORTS)

    assert [line for line in function_level_imports(SRC, "vfcore") if not documented(line)] == []


#: The modules that may read ``nb_tasks`` itself: the spec that holds it and derives
#: ``NodeSpec.replicas`` from it, the node classes that take it, and the checks of the
#: parameter. Everything else counts replicas with ``NodeSpec.replicas``.
NB_TASKS_READERS = {
    "vfcore/flow/spec.py",
    "vfcore/flow/authoring.py",
    "vfcore/flow/params.py",
    "vfcore/flow/validate.py",
}


def nb_tasks_reads(root: Path) -> list[str]:
    """``file:line`` of every ``x.nb_tasks`` read outside :data:`NB_TASKS_READERS`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = str(path.relative_to(root))
        if name in NB_TASKS_READERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "nb_tasks":
                found.append(f"{name}:{node.lineno}")
    return found


def test_a_replica_count_is_read_from_node_spec_replicas_only() -> None:
    """One meaning of a node's replica count (issue 28): nothing outside the flow package
    reads ``nb_tasks`` (a one-task node without ``partition_by`` runs one worker whatever
    ``nb_tasks`` says)."""
    assert nb_tasks_reads(SRC) == []


# -- the checks catch what they exist for ---------------------------------------


@pytest.fixture
def tree(tmp_path: Path):
    def write(files: dict[str, str]) -> Path:
        for name, text in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return tmp_path

    return write


def test_the_cycle_check_finds_a_module_level_circle_and_ignores_function_level(tree) -> None:
    root = tree(
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import x\n",
            "pkg/b.py": "from pkg import a\nx = 1\n",
            "pkg/c.py": "def f():\n    from pkg.d import y\n",
            "pkg/d.py": "from pkg.c import f\ny = 2\n",
        }
    )
    assert import_cycles(root) == [["pkg.a", "pkg.b"]]


def test_the_private_check_finds_relative_and_absolute_private_imports(tree) -> None:
    root = tree(
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "_secret = 1\ndef __dunder__(): pass\n",
            "pkg/b.py": "from pkg.a import _secret\n",
            "pkg/c.py": "def f():\n    from .a import _secret\n",
            "pkg/d.py": "from pkg.a import __dunder__\n",
        }
    )
    assert private_imports(root) == [
        "pkg.b imports _secret from pkg.a",
        "pkg.c imports _secret from pkg.a",
    ]


def test_the_layer_check_finds_an_upward_import_but_allows_it_inside_a_function(tree) -> None:
    root = tree(
        {
            "vfcore/__init__.py": "",
            "vfcore/flow/__init__.py": "from vfcore.placement import plan\n",
            "vfcore/routing/__init__.py": "def f():\n    from vfcore.placement import plan\n",
            "vfcore/placement/__init__.py": "from vfcore.flow import x\n",
        }
    )
    assert upward_imports(root) == ["vfcore.flow (flow) imports vfcore.placement (placement)"]


def test_the_function_level_check_sees_imports_inside_methods_but_not_at_module_level(tree) -> None:
    root = tree(
        {
            "vfcore/__init__.py": "",
            "vfcore/a.py": "import json\nclass A:\n    def f(self):\n        import math\n",
        }
    )
    assert function_level_imports(root, "vfcore") == ["vfcore.a imports math inside a function"]


def test_the_nb_tasks_check_finds_a_read_outside_the_flow_package(tree) -> None:
    root = tree(
        {
            "vfcore/flow/spec.py": "def f(n):\n    return n.nb_tasks\n",
            "vfadapters/x.py": "def g(n):\n    return n.replicas + n.nb_tasks\n",
        }
    )
    assert nb_tasks_reads(root) == ["vfadapters/x.py:2"]


def gpu_mode_parsers(root: Path) -> list[str]:
    """``module.function`` of every call of ``parse_gpu_mode`` in vfcore (the function that
    contains it: a method is ``Class.method``), outside the module that defines it."""
    found = []
    for path in sorted((root / "vfcore").rglob("*.py")):
        if path.name == "gpu_mode.py":
            continue
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))

        def visit(node: ast.AST, owner: str, module: str = module) -> None:
            for child in ast.iter_child_nodes(node):
                name = owner
                if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    name = f"{owner}.{child.name}" if owner else child.name
                if (
                    isinstance(child, ast.Call)
                    and isinstance(child.func, ast.Name)
                    and child.func.id == "parse_gpu_mode"
                ):
                    found.append(f"{module}.{owner}")
                visit(child, name)

        visit(tree, "")
    return sorted(found)


def test_the_gpu_mode_is_parsed_only_where_a_public_function_takes_it() -> None:
    """docs/architecture.md: a public function that takes the GPU mode as text parses it
    on entry (nine of them) and passes the parsed GpuMode below; nothing else parses it."""
    assert gpu_mode_parsers(SRC) == [
        "vfcore.flow.validate.validate",
        "vfcore.placement.claims.pod_requests",
        "vfcore.placement.demand.gpu_demand",
        "vfcore.placement.explain.explain",
        "vfcore.placement.plan.plan",
        "vfcore.placement.plan.plan_pods",
        "vfcore.runtime.render_options.RenderOptions.__post_init__",
        "vfcore.scaling.capacity.capacity_cap",
        "vfcore.scaling.flow_scaling.decide_flow",
    ]
