"""Laws of vfcore.scaling that mutation testing showed unchecked (issue 18, docs/testing.md).

* A processor is known exactly when every one of its parents is observed; the
  parents missing from the observations document are its ``unknown_parents``
  (unknown propagation at flow level, not only in ``decide_replicas``).
* ``backed_up_parents`` is empty exactly when the join is not starved; when it
  is starved, the starved parents are those with lag 0 and the backed-up ones
  those with at least ``target`` waiting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from vfcore.scaling import Backlog, decide_flow, decide_replicas

REPO = Path(__file__).resolve().parents[2]
_SPEC: list[Any] = []


def _realtime_flow() -> Any:
    if not _SPEC:
        from vfadapters.loading import load_flow

        _SPEC.append(load_flow(str(REPO / "examples" / "realtime_scaling.py")).spec())
    return _SPEC[0]


PARENTS_OF = {"detector": ("frames",), "plates": ("frames",), "fuse": ("detector", "plates")}
lags = st.one_of(st.sampled_from([0, 1, 9, 10, 11, 100]), st.integers(0, 300))


@settings(max_examples=40)
@given(
    st.dictionaries(
        st.sampled_from(sorted(PARENTS_OF)),
        st.data(),
        max_size=3,
    ),
    st.sampled_from([1, 3, 10]),
)
def test_a_processor_is_known_iff_every_parent_is_observed(
    chosen: dict[str, st.DataObject], target: int
):
    doc: dict[str, Any] = {}
    for node, data in chosen.items():
        seen = data.draw(st.lists(st.sampled_from(PARENTS_OF[node]), unique=True))
        doc[node] = {
            "parents": {p: {"pending": data.draw(lags), "ack_pending": 0} for p in seen},
        }
    result = decide_flow(_realtime_flow(), doc, target=target)
    for node, parents in PARENTS_OF.items():
        decision = result.node(node).decision
        seen = set(doc.get(node, {}).get("parents", {}))
        missing = tuple(p for p in parents if p not in seen)
        event(f"{node}: {len(missing)} of {len(parents)} parent(s) missing")
        assert decision.unknown_parents == missing
        assert decision.is_known == (not missing)
        assert (decision.replicas is None) == bool(missing)
        assert decision.target == target
        assert [name for name, _ in decision.observed] == sorted(parents)


@settings(max_examples=200)
@given(
    st.dictionaries(st.sampled_from("abcdef"), lags, min_size=1, max_size=6),
    st.integers(1, 20),
)
def test_backed_up_parents_are_named_exactly_when_the_join_is_starved(
    obs: dict[str, int], target: int
):
    d = decide_replicas({p: Backlog(n, 0) for p, n in obs.items()}, target=target, max_replicas=50)
    empty = tuple(sorted(p for p, n in obs.items() if n == 0))
    full = tuple(sorted(p for p, n in obs.items() if n >= target))
    starved = len(obs) >= 2 and bool(empty) and bool(full)
    event("starved" if starved else "not starved")
    if starved:
        assert (d.starved_parents, d.backed_up_parents, d.diagnosis) == (empty, full, "starved")
    else:
        assert (d.starved_parents, d.backed_up_parents) == ((), ())
        assert d.diagnosis in ("idle", "backlog")
