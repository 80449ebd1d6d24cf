"""The public API: every name in vfcore.__all__ resolves, and the lazy ones stay lazy."""

from __future__ import annotations

import json
import subprocess
import sys

import vfcore


def test_every_public_name_resolves():
    missing = [name for name in vfcore.__all__ if getattr(vfcore, name, None) is None]
    assert missing == []
    assert callable(vfcore.plan)  # the function, not the vfcore.placement.plan module
    assert sorted(dir(vfcore)) == sorted(vfcore.__all__)


def test_importing_vfcore_leaves_the_scheduler_and_scaling_unloaded():
    code = (
        "import json, sys, vfcore\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('vfcore.'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert {"vfcore.flow.authoring", "vfcore.flow.validate"} <= loaded
    assert loaded.isdisjoint(
        {
            "vfcore.placement.scheduler",
            "vfcore.scaling",
            "vfcore.runtime.devices",
            "vfcore.runtime.layout",
            "vfcore.placement.mig",
        }
    )


def test_every_public_name_is_documented_in_the_api_reference_with_its_home():
    """docs/api.md lists every name of ``vfcore.__all__`` once, with the module defining it."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([^`]+)` \| \w+ \| `([^`]+)` \|", text, re.M))
    assert sorted(rows) == sorted(vfcore.__all__), "docs/api.md and vfcore.__all__ differ"
    wrong = {}
    for name, home in rows.items():
        defined = getattr(getattr(vfcore, name), "__module__", None)
        if isinstance(defined, str) and defined.startswith("vfcore") and defined != home:
            wrong[name] = (home, defined)
    assert wrong == {}, "docs/api.md names the wrong home module"


def test_a_lazy_name_loads_only_the_module_that_defines_it():
    code = (
        "import json, sys, vfcore\n"
        "vfcore.assign_devices\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('vfcore.'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert "vfcore.runtime.devices" in loaded
    assert loaded.isdisjoint(
        {"vfcore.placement.scheduler", "vfcore.scaling", "vfcore.placement.mig"}
    )


#: The faces adapters import vfcore from (docs/api.md, "Faces"): the root, each package,
#: and the two top-level modules.
FACES = (
    "vfcore",
    "vfcore.cluster",
    "vfcore.errors",
    "vfcore.flow",
    "vfcore.placement",
    "vfcore.quantity",
    "vfcore.routing",
    "vfcore.runtime",
    "vfcore.scaling",
)


def _vfcore_imports(root: str) -> list[tuple[str, int, str, str]]:
    """``(file, line, module, name)`` of every ``from vfcore… import name`` under ``root``."""
    import ast
    from pathlib import Path

    base = Path(__file__).resolve().parents[2] / root
    found = []
    for path in sorted(base.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [
                    (str(path.relative_to(base)), node.lineno, a.name, "")
                    for a in node.names
                    if a.name.startswith("vfcore.")
                ]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vfcore"):
                found += [
                    (str(path.relative_to(base)), node.lineno, node.module or "", a.name)
                    for a in node.names
                ]
    return found


def test_adapters_import_vfcore_only_from_its_faces():
    """Every name vfadapters takes from vfcore comes from a face and is in its ``__all__``,
    so vfcore's modules can be reorganised without breaking an adapter."""
    import importlib

    imports = _vfcore_imports("src/vfadapters")
    assert len(imports) > 100  # the walk found the adapters' imports
    wrong = []
    for file, line, module, name in imports:
        if module not in FACES:
            wrong.append(f"{file}:{line}: {module} is not a face ({name})")
        elif name not in importlib.import_module(module).__all__:
            wrong.append(f"{file}:{line}: {module} does not export {name}")
    assert wrong == []


def test_every_name_of_every_face_resolves():
    import importlib

    missing = {
        face: [
            n
            for n in importlib.import_module(face).__all__
            if not hasattr(importlib.import_module(face), n)
        ]
        for face in FACES
    }
    assert {face: names for face, names in missing.items() if names} == {}


def test_a_face_gives_the_function_not_the_module_of_the_same_name():
    """``vfcore.placement.plan`` is the function, even after its module is imported."""
    import importlib

    import vfcore.placement

    importlib.import_module("vfcore.placement.plan")
    importlib.import_module("vfcore.placement.explain")
    assert callable(vfcore.placement.plan) and callable(vfcore.placement.explain)


def test_importing_the_placement_face_loads_neither_the_scheduler_nor_mig():
    code = (
        "import json, sys, vfcore.placement\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('vfcore.'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert "vfcore.placement.plan" in loaded
    assert loaded.isdisjoint({"vfcore.placement.scheduler", "vfcore.placement.mig"})


def test_importing_the_runtime_face_leaves_rendering_and_scaling_unloaded():
    """``vf run`` and ``vf worker`` import vfcore.runtime: the rendering modules (and the
    scaling rules they need) load only when one of their names is used."""
    code = (
        "import json, sys, vfcore.runtime as r\n"
        "before = sorted(m for m in sys.modules if m.startswith('vfcore.'))\n"
        "r.render\n"
        "after = sorted(m for m in sys.modules if m.startswith('vfcore.'))\n"
        "print(json.dumps([before, after]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = (set(x) for x in json.loads(done.stdout))
    assert before.isdisjoint(
        {"vfcore.scaling", "vfcore.runtime.manifests", "vfcore.runtime.render_options"}
    )
    assert {"vfcore.runtime.manifests", "vfcore.scaling"} <= after
