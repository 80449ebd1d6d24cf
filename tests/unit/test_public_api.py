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
