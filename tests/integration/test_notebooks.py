"""Every notebook under notebooks/ (jupytext py:percent) executes top to bottom.

They run as a user opens them in Jupyter: the kernel's default (inline) matplotlib
backend, so figures come back as images, and from a working folder that is neither
the repository root nor notebooks/ (the notebook finds the checkout itself).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.py"))

jupytext = pytest.importorskip("jupytext", reason="install the notebooks extra")
nbclient = pytest.importorskip("nbclient", reason="install the notebooks extra")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.delenv("MPLBACKEND", raising=False)
    monkeypatch.setenv("JUPYTER_PATH", str(Path(sys.prefix) / "share" / "jupyter"))
    notebook = jupytext.read(path)
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(REPO / "examples" / "clusters")}},
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on failure
    outputs = "".join(
        out.get("text", "") for cell in notebook.cells for out in cell.get("outputs", [])
    )
    assert "verdict:" in outputs
    images = [
        out
        for cell in notebook.cells
        for out in cell.get("outputs", [])
        if "image/png" in out.get("data", {})
    ]
    assert len(images) == 2, "both figures should display inline, not be saved beside the notebook"
    assert not list((REPO / "notebooks").glob("*.png")), "the notebook must not write into the repo"
