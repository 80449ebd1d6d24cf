"""Validating a generated 10,000-node flow (target: <= 0.3 s median).

Baseline, in the same process: building a networkx DiGraph of the same flow and
sorting it topologically — the least any graph validation must do.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import networkx as nx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from flows import layered_spec
from vfcore import validate

TARGET_S = 0.3


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def baseline(spec) -> None:
    g = nx.DiGraph()
    g.add_nodes_from(spec.names)
    g.add_edges_from((p, n.name) for n in spec.nodes for p in n.parents)
    list(nx.topological_sort(g))


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    spec = layered_spec(n)
    issues = validate(spec)
    errors = [i for i in issues if i.is_error]
    assert not errors, errors[:3]
    validate_s = statistics.median(timed(lambda: validate(spec), repeats))
    base_s = statistics.median(timed(lambda: baseline(spec), repeats))
    print(
        f"validate({n} nodes, {sum(len(x.parents) for x in spec.nodes)} edges): "
        f"median {validate_s * 1000:.1f} ms over {repeats} runs "
        f"({len(issues)} warnings found)"
    )
    print(f"baseline nx DiGraph + topological sort: median {base_s * 1000:.1f} ms")
    print(f"ratio validate / baseline: {validate_s / base_s:.2f}x")
    verdict = "meets" if validate_s <= TARGET_S else "MISSES"
    print(f"target <= {TARGET_S * 1000:.0f} ms: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
