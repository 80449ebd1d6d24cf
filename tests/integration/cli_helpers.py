"""Shared helpers for tests that run the real `vf` command as a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
VF_SCRIPT = Path(sys.executable).with_name("vf")
#: The line a refusal starts with: ``error: <rule-in-kebab-case>`` (or ``warning:``).
KEBAB = re.compile(r"^(error|warning): ([a-z0-9]+(?:-[a-z0-9]+)*)", re.MULTILINE)


def run_vf(
    *args: object, cwd: Path | None = None, script: bool = False
) -> subprocess.CompletedProcess[str]:
    """``python -m vfadapters.cli ARGS`` (or the installed ``vf`` script) as a real process."""
    command = [str(VF_SCRIPT)] if script else [sys.executable, "-m", "vfadapters.cli"]
    env = {k: v for k, v in os.environ.items() if k != "VF_DEBUG"}
    return subprocess.run(
        [*command, *map(str, args)],
        cwd=cwd or REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def one_json_document(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """stdout parsed as exactly one JSON document (json.loads rejects trailing data)."""
    assert result.stdout.strip(), f"no JSON on stdout; stderr:\n{result.stderr}"
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


def assert_bad_input(result: subprocess.CompletedProcess[str], rule: str) -> None:
    """Exit 2, ``error: <rule>`` and a hint on stderr, and no traceback anywhere."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert f"error: {rule}" in result.stderr, result.stderr
    assert "hint:" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert "Traceback" not in result.stdout
