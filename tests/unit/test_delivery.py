"""Exactly once as data (vfcore.runtime.delivery): ids, chunk sizes, the books."""

from __future__ import annotations

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from vfcore import FlowSpec, NodeSpec
from vfcore.runtime.delivery import (
    SHARED_START_BATCH,
    EdgeTally,
    GroupOrigin,
    InputOrigin,
    NodeTally,
    SegmentOrigin,
    batch_limit,
    check_books,
    ledger_id,
    letter_id,
    output_id,
    trace_digest,
)

CHAIN = FlowSpec(
    "f",
    "batch",
    (
        NodeSpec("src", "producer"),
        NodeSpec("work", "processor", ("src",)),
        NodeSpec("sink", "consumer", ("work",)),
    ),
)


def balanced_chain(n: int = 10, filtered: int = 2, dead: int = 1) -> dict[str, NodeTally]:
    out = n - filtered - dead
    return {
        "src": NodeTally("src", "producer", produced=n, outputs=n, emitted={"work": n}),
        "work": NodeTally(
            "work",
            "processor",
            received={"src": n},
            outputs=out,
            filtered=filtered,
            dead_letters=dead,
            emitted={"sink": out},
        ),
        "sink": NodeTally("sink", "consumer", received={"work": out}, outputs=out),
    }


@pytest.mark.parametrize(
    ("origin", "text"),
    [
        (InputOrigin("src-abc", 42), "i.src-abc.42"),
        (SegmentOrigin(0, 1024), "s.0.1024"),
        (GroupOrigin("cam:7"), f"g.{trace_digest('cam:7')}"),
    ],
    ids=["an input message", "a producer's segment", "a join group"],
)
def test_every_kind_of_origin_names_its_outputs_ledger_entry_and_letters(
    origin: object, text: str
) -> None:
    assert output_id("n", "c", 1, origin, 2, 0) == f"o.n.c.1.{text}.2.0"  # type: ignore[arg-type]
    assert ledger_id("n", origin) == f"l.n.{text}"  # type: ignore[arg-type]
    assert letter_id("n", origin, 5, "unroutable to c") == f"d.n.{text}.5.unroutable_to_c"  # type: ignore[arg-type]


def test_a_trace_digest_is_stable_short_and_tells_traces_apart() -> None:
    assert trace_digest("a:1") == trace_digest("a:1")
    assert trace_digest("a:1") != trace_digest("a:2")
    assert len(trace_digest("x" * 10_000)) == 26
    assert trace_digest(("t", 1)) == trace_digest(("t", 1))  # any value, by its repr


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"shared": False, "cost_ns": 0}, 1024),
        ({"shared": False, "cost_ns": 10**9}, 5),
        ({"shared": False, "cost_ns": 100_000}, 1024),
        ({"shared": False, "cost_ns": 10_000_000}, 500),
        ({"shared": True, "cost_ns": 0}, SHARED_START_BATCH),
        ({"shared": True, "cost_ns": 100_000}, 20),
        ({"shared": True, "cost_ns": 2_000_000}, 1),
        ({"shared": True, "cost_ns": 50_000_000}, 1),
        ({"shared": True, "cost_ns": 1}, 1024),
        ({"shared": False, "cost_ns": 0, "keep": 40}, SHARED_START_BATCH),
        ({"shared": False, "cost_ns": 1, "keep": 40}, 40),
        ({"shared": False, "cost_ns": 0, "keep": 1}, 1),
    ],
    ids=[
        "toward one consumer: the whole batch",
        "toward one consumer, 1 s an item: 5 (5 s of its work)",
        "toward one consumer, 0.1 ms an item: the whole batch",
        "toward one consumer, 10 ms an item: 500 (5 s)",
        "shared, cost unknown: 8",
        "shared, 0.1 ms an item: 20 (2 ms)",
        "shared, exactly 2 ms an item: 1",
        "shared, slower than the target: 1",
        "shared, almost free: batch_max",
        "REALTIME, cost unknown: 8",
        "REALTIME, cheap: at most keep",
        "REALTIME keeping one: 1",
    ],
)
def test_batch_limit(kwargs: dict[str, object], expected: int) -> None:
    assert batch_limit(batch_max=1024, target_s=0.002, **kwargs) == expected  # type: ignore[arg-type]


def test_the_books_of_a_run_that_lost_nothing_balance() -> None:
    books = check_books(CHAIN, balanced_chain())
    assert books.balanced and books.problems == () and books.checked > 0
    from dataclasses import replace

    spanned = {**balanced_chain(), "src": replace(balanced_chain()["src"], span=10)}
    assert check_books(CHAIN, spanned).balanced  # the source went exactly as far as written


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (("sink", "received", {"work": 8}), "edge work → sink: 7 written, 8 delivered"),
        (("work", "received", {"src": 9}), "edge src → work: 10 written, 9 delivered"),
        (("work", "outputs", 8), "node work: 8 output(s) but 7 written to sink"),
        (("src", "produced", 11), "producer src: 11 produced but 10 output(s)"),
        (("work", "filtered", 3), "node work: 10 received but 7 output(s), 3 filtered"),
        (
            ("src", "span", 14),
            "producer src: its sources went through 14 item(s) but 10 were written (4 skipped)",
        ),
        (("src", "span", 9), "(1 written twice)"),
    ],
    ids=[
        "a duplicate at the sink",
        "an item lost on the way",
        "an output never written",
        "an item produced and never sent",
        "an item counted twice",
        "a restarted producer skipped a segment of its source",
        "a restarted producer wrote a segment again",
    ],
)
def test_one_count_off_unbalances_the_books_and_says_which(
    change: tuple[str, str, object], words: str
) -> None:
    from dataclasses import replace

    tallies = balanced_chain()
    node, field, value = change
    tallies[node] = replace(tallies[node], **{field: value})
    books = check_books(CHAIN, tallies)
    assert not books.balanced
    assert any(words in p.message for p in books.problems), books.summary
    assert all(p.id == "books-unbalanced" for p in books.problems)


def test_what_still_waits_at_the_end_of_a_drained_batch_run_is_a_problem() -> None:
    tallies = balanced_chain()
    from dataclasses import replace

    tallies["sink"] = replace(tallies["sink"], received={"work": 6}, outputs=6)
    books = check_books(CHAIN, tallies, [EdgeTally("work", "sink", pending=1)])
    assert not books.balanced
    assert "1 item(s) still pending" in books.summary


def test_a_pending_count_nobody_could_read_leaves_that_edge_unchecked() -> None:
    tallies = balanced_chain()
    books = check_books(CHAIN, tallies, [EdgeTally("work", "sink", pending=None)])
    assert books.balanced


def test_a_join_counts_each_half_once_and_each_group_once() -> None:
    spec = FlowSpec(
        "j",
        "batch",
        (
            NodeSpec("src", "producer"),
            NodeSpec("a", "processor", ("src",)),
            NodeSpec("b", "processor", ("src",)),
            NodeSpec("j", "consumer", ("a", "b")),
        ),
    )
    tallies = {
        "src": NodeTally("src", "producer", produced=4, outputs=4, emitted={"a": 4, "b": 4}),
        "a": NodeTally("a", "processor", received={"src": 4}, outputs=4, emitted={"j": 4}),
        "b": NodeTally("b", "processor", received={"src": 4}, outputs=4, emitted={"j": 4}),
        # 3 groups consumed, one group's two halves never met: 2 letters (join-incomplete)
        "j": NodeTally(
            "j",
            "consumer",
            received={"a": 4, "b": 4},
            grouped=6,
            groups=3,
            outputs=3,
            dead_letters=2,
            duplicates=1,  # a redelivered half whose group was out: for the record only
        ),
    }
    assert check_books(spec, tallies).balanced
    from dataclasses import replace

    tallies["j"] = replace(tallies["j"], dead_letters=1)
    assert not check_books(spec, tallies).balanced


def test_records_no_writer_made_are_letters_not_received_items() -> None:
    tallies = balanced_chain()
    from dataclasses import replace

    tallies["work"] = replace(tallies["work"], dead_letters=3, rejected=2)
    assert check_books(CHAIN, tallies).balanced


@given(
    n=st.integers(0, 500),
    filtered=st.integers(0, 50),
    dead=st.integers(0, 50),
    lost=st.integers(-3, 3),
)
def test_a_chain_balances_exactly_when_nothing_was_lost_or_doubled(
    n: int, filtered: int, dead: int, lost: int
) -> None:
    from hypothesis import assume

    assume(filtered + dead <= n)
    tallies = balanced_chain(n, filtered, dead)
    out = n - filtered - dead
    from dataclasses import replace

    tallies["sink"] = replace(tallies["sink"], received={"work": out + lost}, outputs=out + lost)
    event("books off" if lost else "books exact")
    assert check_books(CHAIN, tallies).balanced == (lost == 0)
