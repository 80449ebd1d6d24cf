"""Findings and errors.

A finding is an :class:`Issue`: a stable kebab-case ``rule`` id (documented in
``docs/rules.md``), a severity, the node it concerns, a message that says what
is wrong with the numbers, and a hint that says what to do.

Validators *return* issues; only the API edge raises, and then it raises one
:class:`InvalidFlowError` that carries every issue at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ERROR",
    "WARNING",
    "InvalidFlowError",
    "Issue",
    "Severity",
    "VfError",
]

Severity = Literal["error", "warning"]
ERROR: Severity = "error"
WARNING: Severity = "warning"


@dataclass(frozen=True, slots=True, order=True)
class Issue:
    """One finding about a flow.

    >>> Issue("cycle", "error", "a", "a -> b -> a is a cycle", "remove one edge").severity
    'error'
    """

    rule: str
    severity: Severity
    node: str | None
    message: str
    hint: str

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "node": self.node,
            "message": self.message,
            "hint": self.hint,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Issue:
        severity = data["severity"]
        if severity not in (ERROR, WARNING):
            raise ValueError(f"unknown severity {severity!r}")
        return cls(
            rule=str(data["rule"]),
            severity=severity,
            node=None if data.get("node") is None else str(data["node"]),
            message=str(data["message"]),
            hint=str(data["hint"]),
        )

    def render(self) -> str:
        """The CLI's three-line form: ``error: <rule>`` / message / ``hint:``."""
        where = f" ({self.node})" if self.node is not None else ""
        return f"{self.severity}: {self.rule}{where}\n  {self.message}\n  hint: {self.hint}"


def sort_issues(issues: Iterable[Issue]) -> tuple[Issue, ...]:
    """Errors first, then by node, rule and message: one canonical order."""
    return tuple(
        sorted(
            issues,
            key=lambda i: (i.severity != ERROR, i.node or "", i.rule, i.message, i.hint),
        )
    )


class VfError(Exception):
    """The base of every error vfcore raises on purpose."""

    rule: str = "vf-error"


class InvalidFlowError(VfError, ValueError):
    """A flow, node parameter or spec is invalid; ``issues`` lists every problem.

    The message lists every error issue, each with its rule id and hint, so a
    traceback alone already tells the user what to fix.
    """

    rule = "invalid-flow"

    def __init__(self, issues: Iterable[Issue]) -> None:
        self.issues: tuple[Issue, ...] = sort_issues(issues)
        errors = [i for i in self.issues if i.is_error] or list(self.issues)
        if errors:
            self.rule = errors[0].rule
        lines = [f"{len(errors)} error(s) in the flow:"] if len(errors) > 1 else []
        for issue in errors:
            where = f" [{issue.node}]" if issue.node is not None else ""
            lines.append(f"{issue.rule}{where}: {issue.message} (hint: {issue.hint})")
        super().__init__("\n".join(lines))


class InvalidInputError(VfError, ValueError):
    """Bad input that is not a flow (an option, a file's contents) with a stable id."""

    def __init__(self, rule: str, message: str, hint: str) -> None:
        self.rule = rule
        self.message = message
        self.hint = hint
        super().__init__(f"{rule}: {message} (hint: {hint})")
