"""What every ``vf`` command shares on the way out: exit codes, JSON, errors, tables.

Exit codes: 0 ok; 1 runtime error; 2 usage error or invalid input (the flow has
errors, a file does not load); 3 a strict verdict failed; 130 stopped by
SIGINT/SIGTERM. ``--json`` prints exactly one JSON document on stdout;
diagnostics go to stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

EXIT_OK, EXIT_RUNTIME, EXIT_INVALID, EXIT_STRICT = 0, 1, 2, 3
#: Stopped by SIGINT or SIGTERM (128 + SIGINT, as shells report it).
EXIT_STOPPED = 130

#: How many items a text listing shows before it says how many more there are.
TEXT_LIST_LIMIT = 20


def emit_json(document: dict[str, Any]) -> None:
    """``document`` as the one JSON document on stdout (no NaN, two-space indent)."""
    sys.stdout.write(json.dumps(document, indent=2, allow_nan=False) + "\n")


def report_error(rule: str, message: str, hint: str, *, as_json: bool) -> None:
    """An error on stderr (rule, message, hint); with ``--json`` also as the JSON document."""
    sys.stderr.write(f"error: {rule}\n  {message}\n  hint: {hint}\n")
    if as_json:
        emit_json({"error": {"rule": rule, "message": message, "hint": hint}})


def report_issues(issues: Sequence[Any], *, as_json: bool) -> None:
    """Validation issues on stderr; with ``--json`` the first error leads the document."""
    for issue in issues:
        sys.stderr.write(issue.render() + "\n")
    if as_json:
        first = next((i for i in issues if i.is_error), issues[0])
        emit_json(
            {
                "error": {"rule": first.rule, "message": first.message, "hint": first.hint},
                "valid": False,
                "issues": [i.to_dict() for i in issues],
            }
        )


def table(rows: list[list[str]], out: TextIO, indent: str = "  ") -> None:
    """Rows as left-aligned columns, the first row being the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        out.write(indent + line.rstrip() + "\n")


def first_few(names: Sequence[str], limit: int = TEXT_LIST_LIMIT) -> str:
    """``a, b, c`` — or the first ``limit`` names and how many more (``--json`` has them all)."""
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])} and {len(names) - limit:,} more"
