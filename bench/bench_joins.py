"""Offers per second of a two-parent trace join at 1,000 pending groups
(target: >= 200,000 offers/s), and memory per pending group.

Setup: a REALTIME-style policy (timeout 10 s → drop, so the timeout check runs
on every offer), 1,000 half groups pre-filled; then each step offers the first
half of a new trace and the second half of the oldest waiting one, so ~1,000
groups stay pending and every second offer emits a group. The clock advances
by 1 µs per offer (nothing times out). Messages are built before timing.

Baselines, in the same process: the same number of plain dict operations (one
insert and one pop per pair of offers) — the least any keyed join must do — and
a minimal pairing loop (dict + tuple, no timeouts, bound, duplicates or
records), the floor for a Python join.
A time-mode figure (nearest-group search over the pending groups) follows for
information; it has no target.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
import tracemalloc

from vfcore.flow.join_policy import JoinPolicy
from vfcore.routing import JoinAssembler, Message

TARGET_OFFERS_PER_S = 200_000
PENDING = 1_000


def trace_messages(steps: int) -> tuple[list[Message], list[Message]]:
    lefts = [Message(f"trace-{i:08d}", {"frame": i}) for i in range(steps + PENDING)]
    rights = [Message(f"trace-{i:08d}", {"boxes": i}) for i in range(steps)]
    return lefts, rights


def run_trace(lefts: list[Message], rights: list[Message], steps: int) -> tuple[float, int]:
    """Seconds for 2 * steps offers at PENDING pending groups; groups emitted."""
    policy = JoinPolicy(timeout_ms=10_000, missing="drop", max_pending=4 * PENDING)
    join = JoinAssembler(("left", "right"), policy)
    offer = join.offer
    for i in range(PENDING):
        offer("left", lefts[i], now_ms=0.0)
    emitted = 0
    gc.disable()
    start = time.perf_counter()
    for i in range(steps):
        now = i * 0.002
        offer("left", lefts[i + PENDING], now_ms=now)
        emitted += len(offer("right", rights[i], now_ms=now + 0.001).groups)
    elapsed = time.perf_counter() - start
    gc.enable()
    assert join.pending_group_count == PENDING, join.pending_group_count
    return elapsed, emitted


def run_baseline(steps: int) -> float:
    keys = [f"trace-{i:08d}" for i in range(steps + PENDING)]
    d: dict[str, list[object]] = {keys[i]: [0.0, 1, None, None] for i in range(PENDING)}
    gc.disable()
    start = time.perf_counter()
    for i in range(steps):
        d[keys[i + PENDING]] = [0.0, 1, None, None]
        d.pop(keys[i])
    elapsed = time.perf_counter() - start
    gc.enable()
    return elapsed


def run_minimal_pairing(lefts: list[Message], rights: list[Message], steps: int) -> float:
    """A bare two-parent pairing (no timeouts, bound, duplicates or records): a floor."""
    waiting: dict[str, Message] = {m.trace_id: m for m in lefts[:PENDING]}
    gc.disable()
    start = time.perf_counter()
    out = []
    for i in range(steps):
        left = lefts[i + PENDING]
        waiting[left.trace_id] = left
        right = rights[i]
        half = waiting.pop(right.trace_id, None)
        if half is not None:
            out.append((half.payload, right.payload))
    elapsed = time.perf_counter() - start
    gc.enable()
    assert len(out) == steps
    return elapsed


def run_time(steps: int, pending: int) -> float:
    """Seconds for 2 * steps time-mode offers with ~`pending` groups waiting."""
    policy = JoinPolicy(mode="time", tolerance_ms=10, timeout_ms=1e9, max_pending=4 * pending)
    join = JoinAssembler(("left", "right"), policy)
    # left frames every 33 ms; right frames lag `pending` frames behind
    lefts = [Message(f"l{i}", i, i * 33.0) for i in range(steps + pending)]
    rights = [Message(f"r{i}", i, i * 33.0 + 1) for i in range(steps)]
    for i in range(pending):
        join.offer("left", lefts[i], now_ms=0.0)
    start = time.perf_counter()
    for i in range(steps):
        join.offer("left", lefts[i + pending], now_ms=float(i))
        join.offer("right", rights[i], now_ms=float(i))
    elapsed = time.perf_counter() - start
    assert join.pending_group_count == pending, join.pending_group_count
    return elapsed


def memory_per_pending_group(groups: int = 10_000) -> tuple[float, float]:
    """Bytes per pending half group: the assembler's own, and with the Message held."""
    policy = JoinPolicy(timeout_ms=10_000, missing="drop", max_pending=2 * groups)
    join = JoinAssembler(("left", "right"), policy)
    ids = [f"trace-{i:08d}" for i in range(groups)]
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    messages = [Message(t, None) for t in ids]
    middle = tracemalloc.take_snapshot()
    for i, m in enumerate(messages):
        join.offer("left", m, now_ms=float(i))
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    msg_bytes = sum(s.size_diff for s in middle.compare_to(before, "filename"))
    own_bytes = sum(s.size_diff for s in after.compare_to(middle, "filename"))
    assert join.pending_group_count == groups
    return own_bytes / groups, (own_bytes + msg_bytes) / groups


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    lefts, rights = trace_messages(steps)
    offers = 2 * steps
    runs = [run_trace(lefts, rights, steps) for _ in range(repeats)]
    assert all(emitted == steps for _, emitted in runs)
    join_s = statistics.median(t for t, _ in runs)
    base_s = statistics.median(run_baseline(steps) for _ in range(repeats))
    rate = offers / join_s
    print(
        f"trace join, 2 parents, {PENDING} pending: {offers} offers ({steps} groups) "
        f"median {join_s * 1000:.1f} ms over {repeats} runs = {rate:,.0f} offers/s "
        f"({join_s / offers * 1e6:.2f} µs/offer)"
    )
    print(
        f"baseline dict insert + pop per offer pair: median {base_s * 1000:.1f} ms "
        f"({base_s / offers * 1e6:.2f} µs/offer)"
    )
    print(f"ratio join / baseline: {join_s / base_s:.1f}x")
    floor_s = statistics.median(run_minimal_pairing(lefts, rights, steps) for _ in range(repeats))
    print(
        f"minimal pairing (dict + tuple, no policy): median {floor_s * 1000:.1f} ms "
        f"({floor_s / offers * 1e6:.2f} µs/offer); ratio join / minimal: {join_s / floor_s:.1f}x"
    )
    verdict = "meets" if rate >= TARGET_OFFERS_PER_S else "MISSES"
    print(f"target >= {TARGET_OFFERS_PER_S:,} offers/s: {verdict}")
    own, with_message = memory_per_pending_group()
    print(
        f"memory per pending half group: {own:.0f} B in the assembler, "
        f"{with_message:.0f} B with its Message and trace id string"
    )
    for pending in (10, 100, PENDING):
        time_steps = max(2_000, steps // 20 if pending < PENDING else steps // 100)
        t = statistics.median(run_time(time_steps, pending) for _ in range(3))
        print(
            f"time join (information), 2 parents, {pending} pending: "
            f"{2 * time_steps / t:,.0f} offers/s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
