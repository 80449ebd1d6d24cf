"""docs/rules.md documents every rule id, with an example."""

from __future__ import annotations

import itertools
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


def _examples():
    """(python code, expected output) pairs from docs/rules.md, after its preamble."""
    text = DOCS.read_text(encoding="utf-8")
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)
    preamble = blocks[0][1]
    pairs = []
    for (lang, code), (next_lang, expected) in itertools.pairwise(blocks[1:]):
        if lang == "python" and next_lang == "text":
            pairs.append((preamble + "\n" + code, expected))
    return pairs


def test_every_example_in_rules_md_prints_what_the_docs_say(capsys):
    import contextlib
    import io

    pairs = _examples()
    assert len(pairs) >= len(RULES)
    mismatches = []
    for code, expected in pairs:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                exec(compile(code, "rules.md", "exec"), {"__name__": "rules_md_example"})
            except Exception as exc:  # the docs show uncaught errors as Python prints them
                print(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}")
        if out.getvalue().strip() != expected.strip():
            mismatches.append((code.splitlines()[-3:], out.getvalue(), expected))
    assert mismatches == []
