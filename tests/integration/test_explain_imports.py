"""`vf explain` stays light: it must not import the solver, the Kubernetes client or torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traffic.py"
HEAVY = {"ortools", "kubernetes", "torch"}


def test_explain_imports_no_heavy_library():
    code = (
        "import io, contextlib, json, sys\n"
        "from vfadapters.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['explain', {str(EXAMPLE)!r}, '--json'])\n"
        "print(json.dumps({'rc': rc, 'modules': sorted({m.split('.')[0] for m in sys.modules})}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    assert report["rc"] == 0
    assert "vfcore" in report["modules"]  # the probe really ran explain
    assert HEAVY.isdisjoint(report["modules"]), sorted(HEAVY & set(report["modules"]))
