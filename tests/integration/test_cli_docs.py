"""Every sample output in docs/cli.md is what the real `vf` prints today.

A sample is a paragraph that names a command in backticks and ends with a colon
(`` `vf explain examples/traffic.py`: ``), followed by a ```text block. The
command runs as a real subprocess from the repository root; wall-clock figures
(``in 0.003 s``) are the only thing normalised. Lines a sample shows from stderr
(warnings, ``[pod] ...`` worker logs) are compared only when stderr is included.
"""

from __future__ import annotations

import re
import shlex

import pytest

from tests.integration.cli_helpers import REPO, run_vf

DOC = REPO / "docs" / "cli.md"
SAMPLE = re.compile(r"`(vf [^`]+)`(?: \([^)]*\))?:\n\n```text\n(.*?)```", re.S)
TIMING = re.compile(r"\b\d+\.\d+ s\b")


def _samples() -> list[tuple[str, str]]:
    return SAMPLE.findall(DOC.read_text(encoding="utf-8"))


def _normalise(text: str) -> str:
    lines = [TIMING.sub("N s", line.rstrip()) for line in text.strip().splitlines()]
    return "\n".join(lines)


def test_the_reference_has_samples_for_explain_plan_scale_and_run() -> None:
    commands = {command.split()[1] for command, _ in _samples()}
    assert {"explain", "plan", "scale", "run"} <= commands


@pytest.mark.parametrize(("command", "expected"), _samples(), ids=[c for c, _ in _samples()])
def test_sample_output_matches_the_real_command(command: str, expected: str) -> None:
    args = shlex.split(command)[1:]
    result = run_vf(*args)
    assert result.returncode in (0, 3), result.stderr
    shown = result.stdout
    if args[0] == "run":
        # The run sample shows its stderr lines too (the CPU fallback warning, worker logs);
        # those depend on the host, so compare the summary that stdout carries.
        expected = "\n".join(
            line for line in expected.splitlines() if not line.startswith(("warning:", "["))
        )
    assert _normalise(shown) == _normalise(expected)
