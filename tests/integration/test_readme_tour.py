"""The README's tour is real code: it runs as written, and its flow runs to the end.

The tour's producer once returned None forever (``def next(self, ctx): ...``), so a
user who saved it and typed ``vf run`` got a run that never ended.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.integration.cli_helpers import REPO, one_json_document, run_vf


def _tour() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## A tour", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's tour has a python block"
    return match.group(1)


def test_the_tour_runs_as_written_and_its_comments_are_true() -> None:
    namespace: dict[str, object] = {"__name__": "readme_tour"}
    exec(compile(_tour(), "README.md", "exec"), namespace)
    assert namespace["validate"](namespace["flow"]) == ()  # type: ignore[operator]
    report = namespace["report"]
    assert report.demand.total == (("nvidia.com/gpu", 4),)  # type: ignore[attr-defined]


def test_the_tour_flow_runs_to_completion_with_vf_run(tmp_path: Path) -> None:
    flow = tmp_path / "tour.py"
    flow.write_text(_tour(), encoding="utf-8")
    result = run_vf("run", flow, "--no-progress", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    assert doc["status"] == "completed"
    assert doc["nodes"]["sink"]["processed"] == 100
    assert not doc.get("stalls")
