"""docs/rules.md documents every rule id, with an example."""

from __future__ import annotations

import pathlib
import re

from vfcore import RULES

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def test_every_rule_is_documented_with_a_heading_and_an_example():
    text = DOCS.read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.MULTILINE)
    headed = {s.split("\n", 1)[0].strip().strip("`"): s for s in sections[1:]}
    missing = sorted(set(RULES) - set(headed))
    assert missing == []
    without_example = sorted(r for r in RULES if "```" not in headed[r])
    assert without_example == []


def test_rules_are_kebab_case_and_severities_known():
    for rule, severity in RULES.items():
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", rule), rule
        assert severity in ("error", "warning")
