"""Findings and errors.

A :class:`Finding` is one thing vfcore found that someone should read: a
stable kebab-case ``id`` (documented in ``docs/rules.md``), a severity, the
``subject`` it concerns (a flow node, a cluster node, or ``None`` for the whole
flow), a message that says what is wrong with the numbers, and a hint that
says what to do. Validation, planning, mix-mode planning and autoscaling
eligibility all report findings; each keeps the JSON shape its document has
always had, so the type has three documented views:

- :data:`Issue` (what :func:`vfcore.validate` returns) is ``Finding`` itself:
  ``{"rule", "severity", "node", "message", "hint"}``;
- :class:`Problem` (a plan's ``problems``; ``MigIssue`` in mix mode) drops
  the subject: ``{"code", "severity", "message", "hint"}``;
- :class:`Reason` (why a node stays at fixed scale) keeps
  ``{"code", "message"}``.

``rule``, ``node`` and ``code`` read ``id`` and ``subject`` under the names
those documents use.

Validators *return* findings; only the API edge raises, and then it raises one
:class:`InvalidFlowError` that carries every issue at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ERROR",
    "INFO",
    "WARNING",
    "Finding",
    "InvalidFlowError",
    "Issue",
    "Problem",
    "Reason",
    "Severity",
    "VfError",
    "brief",
    "sort_findings",
]

Severity = Literal["error", "warning", "info"]
ERROR: Severity = "error"
WARNING: Severity = "warning"
INFO: Severity = "info"  # a fact worth knowing that needs no action (e.g. a node at fixed scale)

#: Severities from the most to the least pressing.
SEVERITIES: tuple[Severity, ...] = (ERROR, WARNING, INFO)


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    """One finding: ``id``, ``severity``, ``subject``, ``message``, ``hint``.

    >>> f = Finding("cycle", "error", "a", "a -> b -> a is a cycle", "remove one edge")
    >>> f.is_error, f.rule, f.node
    (True, 'cycle', 'a')
    >>> f.to_dict()["rule"]
    'cycle'
    """

    id: str
    severity: Severity
    subject: str | None
    message: str
    hint: str

    @property
    def rule(self) -> str:
        """``id`` under the name validation documents use (``issues[].rule``)."""
        return self.id

    @property
    def code(self) -> str:
        """``id`` under the name plans and autoscaling use (``problems[].code``)."""
        return self.id

    @property
    def node(self) -> str | None:
        """``subject`` under the name validation documents use (``issues[].node``)."""
        return self.subject

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR

    @property
    def rank(self) -> tuple[int, str, str, str, str]:
        """The canonical order: errors, then warnings, then info; then subject, id, message, hint."""
        return (
            SEVERITIES.index(self.severity),
            self.subject or "",
            self.id,
            self.message,
            self.hint,
        )

    def to_dict(self) -> dict[str, Any]:
        """The validation shape: ``{"rule", "severity", "node", "message", "hint"}``."""
        return {
            "rule": self.id,
            "severity": self.severity,
            "node": self.subject,
            "message": self.message,
            "hint": self.hint,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        """Read :meth:`to_dict`'s shape back."""
        severity = data["severity"]
        if severity not in SEVERITIES:
            raise ValueError(f"unknown severity {severity!r}")
        return cls(
            str(data["rule"]),
            severity,
            None if data.get("node") is None else str(data["node"]),
            str(data["message"]),
            str(data["hint"]),
        )

    def render(self) -> str:
        """The CLI's three-line form: ``error: <id>`` / message / ``hint:``."""
        where = f" ({self.subject})" if self.subject is not None else ""
        return f"{self.severity}: {self.id}{where}\n  {self.message}\n  hint: {self.hint}"


#: What :func:`vfcore.validate` returns: a :class:`Finding` (``rule`` = ``id``, ``node`` = ``subject``).
Issue = Finding


@dataclass(frozen=True, slots=True)
class Problem(Finding):
    """A finding about a flow and a cluster together, in a plan's ``problems``.

    Its JSON (``vf plan --json``) names the id ``code`` and leaves the subject out:

    >>> Problem("runtime-class-missing", "error", None, "no RuntimeClass 'x'", "create it").to_dict()
    {'code': 'runtime-class-missing', 'severity': 'error', 'message': "no RuntimeClass 'x'", 'hint': 'create it'}
    """

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.id,
            "severity": self.severity,
            "message": self.message,
            "hint": self.hint,
        }


@dataclass(frozen=True, slots=True)
class Reason(Finding):
    """Why a node stays at fixed scale (:func:`vfcore.autoscaling_rejections`): severity ``info``.

    Its JSON keeps the stable ``code`` and the sentence:

    >>> Reason("one-task", "info", "tracker", "runs one worker", "use a ProcessorNode").to_dict()
    {'code': 'one-task', 'message': 'runs one worker'}
    """

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.id, "message": self.message}


def sort_findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Errors first, then warnings, then info; then by subject, id and message: one canonical order."""
    return tuple(sorted(findings, key=lambda f: f.rank))


def sort_issues(issues: Iterable[Issue]) -> tuple[Issue, ...]:
    """:func:`sort_findings` under validation's name."""
    return sort_findings(issues)


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


def brief(value: object, limit: int = 60) -> str:
    """``repr(value)``, short enough for a message, and safe for any value.

    An integer too long to print (Python refuses more than 4,300 digits) is
    described by its size; anything longer than ``limit`` is cut.

    >>> brief(10**5000)
    'an integer of 5001 digits'
    >>> brief("x" * 100, limit=10)
    "'xxxxx…(102 chars)"
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        magnitude = abs(value)
        digits = int(magnitude.bit_length() * 0.30102999566398) + 1
        if magnitude < 10 ** (digits - 1):
            digits -= 1
        sign = "a negative " if value < 0 else "an "
        return f"{sign}integer of {digits} digits"
    try:
        text = repr(value)
    except Exception:  # a user object whose repr fails: say what it is
        return f"<{type(value).__name__}>"
    if len(text) > limit:
        return f"{text[: limit - 4]}…({len(text)} chars)"
    return text
