"""The DRA model against the fidelity table, offline (tests/data/dra_fidelity.json).

For every case the model's outcomes (every tie-break and every order of a
node's device slices) must be exactly the table's ``expected_any`` — derived
from the allocator's source, as the table's ``source`` says — and, once a
control plane has recorded one, the real outcome (``observed``) must be
among them. tests/cluster/test_dra_fidelity.py deploys the same cases.
"""

from __future__ import annotations

import json

import pytest

from tests.dra_fidelity import load_cases, model_outcomes

CASES = load_cases()


def _key(outcome):
    return json.dumps(outcome, sort_keys=True)


def test_the_table_covers_whole_gpus_dynamic_mig_scoring_and_slice_order() -> None:
    names = {c["name"] for c in CASES}
    assert len(CASES) >= 4
    assert any(len(c["expected_any"]) > 1 for c in CASES)  # a tie the model explores
    assert any(c["expected_any"][0]["stranded"] for c in CASES)  # a case that strands
    assert "mig-first-fit-fragments-one-h100" in names


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_model_gives_exactly_the_tables_outcomes(case) -> None:  # type: ignore[no-untyped-def]
    got = {_key(o) for o in model_outcomes(case)}
    assert got == {_key(o) for o in case["expected_any"]}
    if "observed" in case:  # recorded on a real control plane
        assert _key(case["observed"]) in got
