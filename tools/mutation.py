"""Mutation testing of vfcore's decision modules (``make mutation``; docs/testing.md).

Each module is mutated by mutmut on a *copy* of the working tree (the checkout
itself is never touched) and its mutants run against that module's own tests
only, under the derandomized hypothesis profile (``HYPOTHESIS_PROFILE=ci``),
so a score does not depend on luck. Prints one line per module::

    quantity   killed 80 / 82 = 97.6 %  (survived 2, timeout 0, skipped 0)

Usage: ``python tools/mutation.py [MODULE ...] [--workdir DIR] [--children N] [--only FILE]``
(default: every module, ``/tmp/vf-mutation``, 1 child). Exit status 1 when a
module's run fails, 0 otherwise (the score is reported, not enforced).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: module -> (files mutated, tests run against them)
MODULES: dict[str, tuple[list[str], list[str]]] = {
    "quantity": (
        ["src/vfcore/quantity.py"],
        [
            "tests/unit/test_quantity_bounds.py",
            "tests/unit/test_quantity_semantics.py",
        ],
    ),
    "scaling": (
        ["src/vfcore/scaling/rule.py", "src/vfcore/scaling/flow_scaling.py"],
        [
            "tests/unit/test_scaling.py",
            "tests/property/test_scaling_laws.py",
        ],
    ),
    "packing": (
        [
            "src/vfcore/placement/packing/solve.py",
            "src/vfcore/placement/packing/ffd.py",
            "src/vfcore/placement/packing/checker.py",
        ],
        [
            "tests/unit/test_packing_cases.py",
            "tests/property/test_packing_laws.py",
            "tests/property/test_packing_oracle.py",
        ],
    ),
    "partition": (
        ["src/vfcore/routing/partition.py"],
        [
            "tests/unit/test_partition_vectors.py",
            "tests/property/test_partition_laws.py",
        ],
    ),
    "fit": (
        ["src/vfcore/placement/fit.py"],
        [
            "tests/unit/test_fit.py",
            "tests/unit/test_fit_messages.py",
            "tests/property/test_fit_laws.py",
        ],
    ),
    "scheduler": (
        [
            "src/vfcore/placement/scheduler/engine.py",
            "src/vfcore/placement/scheduler/scoring.py",
            "src/vfcore/placement/scheduler/simulation.py",
        ],
        [
            "tests/unit/test_scheduler.py",
            "tests/unit/test_scheduler_versions.py",
            "tests/property/test_scheduler_laws.py",
            "tests/property/test_scheduler_bounds_laws.py",
        ],
    ),
}


def _copy_tree(dest: Path) -> None:
    """The working tree's tracked and untracked-but-not-ignored files, into ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for raw in listed:
        if not raw:
            continue
        rel = raw.decode()
        src = REPO / rel
        if not src.is_file():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def _configure(dest: Path, files: list[str], tests: list[str]) -> None:
    """Append the [tool.mutmut] section for one module to the copy's pyproject.toml."""
    present = [t for t in tests if (dest / t).is_file()]
    quoted = ", ".join(f'"{x}"' for x in files)
    selected = ", ".join(f'"{x}"' for x in present)
    section = (
        "\n[tool.mutmut]\n"
        'source_paths = ["src"]\n'
        f"only_mutate = [{quoted}]\n"
        f"pytest_add_cli_args_test_selection = [{selected}]\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x"]\n'
        "use_git_change_detection = false\n"
        # tests read the examples and the docs' worked examples
        'also_copy = ["examples", "docs", "README.md"]\n'
    )
    with (dest / "pyproject.toml").open("a") as fh:
        fh.write(section)


def _score(dest: Path) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=dest,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    counts: dict[str, int] = {}
    for line in out.splitlines():
        if ":" not in line:
            continue
        status = line.rsplit(":", 1)[1].strip()
        counts[status] = counts.get(status, 0) + 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"any of {sorted(MODULES)}")
    parser.add_argument("--workdir", default="/tmp/vf-mutation")
    parser.add_argument("--children", type=int, default=1)
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="FILE",
        help="mutate only these of the module's files (a bounded run; repeatable)",
    )
    args = parser.parse_args(argv)
    env = dict(os.environ, HYPOTHESIS_PROFILE="ci", CI="true")
    unknown = sorted(set(args.modules) - set(MODULES))
    if unknown:
        parser.error(f"unknown module(s) {unknown}; choose from {sorted(MODULES)}")
    failed = False
    for name in args.modules or list(MODULES):
        files, tests = MODULES[name]
        if args.only:
            files = [f for f in files if f in args.only or Path(f).name in args.only]
            if not files:
                parser.error(f"--only {args.only} names none of {name}'s files")
        dest = Path(args.workdir) / name
        _copy_tree(dest)
        _configure(dest, files, tests)
        run = subprocess.run(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.children)],
            cwd=dest,
            env=env,
            check=False,
            stdout=subprocess.DEVNULL,
        )
        counts = _score(dest)
        killed = counts.get("killed", 0)
        total = sum(counts.values())
        survived = counts.get("survived", 0)
        pct = 100.0 * killed / total if total else 0.0
        print(
            f"{name:10} killed {killed} / {total} = {pct:.1f} %  (survived {survived}, "
            f"timeout {counts.get('timeout', 0)}, other {total - killed - survived - counts.get('timeout', 0)})"
            f"  survivors: {dest}/ `mutmut results`",
            flush=True,
        )
        failed = failed or run.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
