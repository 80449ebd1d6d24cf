"""Laws of vfcore.scaling: the replica rule, unknown propagation, and the KEDA/HPA model.

The rule: monotone in every parent's lag; independent of parent order; equal to
the max of single-parent decisions, clamped; unknown is absorbing and never
lowers a count; clamp laws; the floor is the decision of the known parents and
acting on it is idempotent. The cluster model: under ``fallback_for_unknown``
no evaluation ever scales down while a parent is unobservable; with tolerance
0 the HPA's per-trigger proposal is our per-parent ask; whatever the history,
the HPA stays within [max(min, 1), max]. Whole flows (issue 18): a processor is
known exactly when every one of its parents is observed, the missing ones being
its ``unknown_parents``; ``backed_up_parents`` is empty exactly when the join is
not starved, and when it is, the starved parents have lag 0 and the backed-up
ones at least ``target`` waiting.

Laws that need a known parent or a starved join draw them by construction;
laws with several outcomes assert in each and label it with ``hypothesis.event``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from vfcore.scaling import (
    Backlog,
    Fallback,
    HpaBehavior,
    HpaState,
    KedaScaler,
    Recommendation,
    ScaleEvent,
    ScalingPolicy,
    ScalingRules,
    Trigger,
    Unobserved,
    decide_flow,
    decide_replicas,
    fallback_for_unknown,
    predict_hpa,
)

PARENTS = ("a", "b", "c", "d", "e", "f")
# Hand-picked lags around the default target of 10 (the equality edges), plus large ones.
EDGE_LAGS = (0, 1, 9, 10, 11, 19, 20, 21, 99, 100, 101, 10_000)

counts = st.one_of(st.sampled_from(EDGE_LAGS), st.integers(0, 500))
backlogs = st.builds(Backlog, counts, st.one_of(st.just(0), st.integers(0, 50)))
unobserved = st.builds(Unobserved, st.sampled_from(["timeout", "stream not found", "refused"]))


@st.composite
def rules(draw: st.DrawFn) -> dict[str, int]:
    target = draw(st.one_of(st.sampled_from([1, 10]), st.integers(1, 50)))
    lo = draw(st.integers(1, 8))
    hi = draw(st.integers(lo, 30))
    return {"target": target, "min_replicas": lo, "max_replicas": hi}


@st.composite
def known_observations(draw: st.DrawFn, min_size: int = 1) -> dict[str, Backlog]:
    names = draw(st.lists(st.sampled_from(PARENTS), min_size=min_size, max_size=6, unique=True))
    return {n: draw(backlogs) for n in names}


@st.composite
def mixed_observations(draw: st.DrawFn, min_known: int = 0) -> dict[str, Backlog | Unobserved]:
    known = draw(known_observations(min_size=min_known))
    extra = draw(st.lists(st.sampled_from(["u1", "u2", "u3"]), min_size=1, max_size=3, unique=True))
    out: dict[str, Backlog | Unobserved] = dict(known)
    for name in extra:
        out[name] = draw(unobserved)
    return out


def decide(observations: dict[str, Any], **kw: Any) -> Any:
    """decide_replicas, checking that it mutates nothing and that to_dict is JSON-safe."""
    before = copy.deepcopy(observations)
    out = decide_replicas(observations, **kw)
    assert observations == before
    json.dumps(out.to_dict(), allow_nan=False)
    return out


# -- the rule ------------------------------------------------------------------------------------


@given(known_observations(), rules(), st.data())
@example({"a": Backlog(10, 0)}, {"target": 10, "min_replicas": 1, "max_replicas": 10}, None)
def test_more_lag_on_any_parent_never_lowers_the_decision(
    obs: dict[str, Backlog], rule: dict[str, int], data: st.DataObject | None
):
    parent = sorted(obs)[0] if data is None else data.draw(st.sampled_from(sorted(obs)))
    extra = 1 if data is None else data.draw(st.integers(0, 200))
    more = dict(obs)
    more[parent] = Backlog(obs[parent].pending + extra, obs[parent].ack_pending)
    assert decide(more, **rule).replicas >= decide(obs, **rule).replicas


@given(mixed_observations(min_known=1), rules(), st.data())
def test_more_lag_never_lowers_the_floor_of_an_unknown_decision(
    obs: dict[str, Any], rule: dict[str, int], data: st.DataObject
):
    known = sorted(k for k, v in obs.items() if isinstance(v, Backlog))
    assert known  # min_known=1
    parent = data.draw(st.sampled_from(known))
    more = dict(obs)
    extra = data.draw(st.integers(0, 200))
    more[parent] = Backlog(obs[parent].pending + extra, obs[parent].ack_pending)
    event(f"asserted: {'1' if len(known) == 1 else '2+'} known parent(s), some unobserved")
    assert decide(more, **rule).floor >= decide(obs, **rule).floor


@given(st.one_of(known_observations(), mixed_observations()), rules(), st.randoms())
def test_parent_order_never_changes_the_decision(
    obs: dict[str, Any], rule: dict[str, int], rnd: Any
):
    items = list(obs.items())
    rnd.shuffle(items)
    shuffled = dict(items)
    a, b = decide(obs, **rule), decide(shuffled, **rule)
    assert a == b
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())


@given(known_observations(), rules())
def test_the_decision_is_the_max_of_single_parent_decisions_clamped(
    obs: dict[str, Backlog], rule: dict[str, int]
):
    whole = decide(obs, **rule).replicas
    singles = [decide({p: o}, **rule).replicas for p, o in obs.items()]
    assert whole == max(singles)
    asks = [-(-o.lag // rule["target"]) for o in obs.values()]
    assert whole == min(max(max(asks), rule["min_replicas"]), rule["max_replicas"])


@given(st.one_of(known_observations(), mixed_observations()), rules(), unobserved)
def test_an_unobserved_parent_makes_any_decision_unknown(
    obs: dict[str, Any], rule: dict[str, int], missing: Unobserved
):
    worse = {**obs, "zz-unobserved": missing}
    d = decide(worse, **rule)
    assert (d.status, d.replicas, d.diagnosis) == ("unknown", None, "unknown")
    assert "zz-unobserved" in d.unknown_parents
    assert decide(obs, required=[*obs, "zz-required"], **rule).status == "unknown"


@given(mixed_observations(), known_observations(), rules())
def test_unknown_is_absorbing_whatever_else_is_observed(
    obs: dict[str, Any], more: dict[str, Backlog], rule: dict[str, int]
):
    combined = {**more, **obs}
    assert decide(combined, **rule).status == "unknown"


@given(mixed_observations(), rules(), st.integers(0, 40))
def test_an_unknown_decision_never_lowers_the_current_count(
    obs: dict[str, Any], rule: dict[str, int], current: int
):
    d = decide(obs, **rule)
    assert d.next_replicas(current) == current
    assert d.next_replicas(current, policy="up-only") >= current


@given(st.one_of(known_observations(), mixed_observations()), rules())
def test_a_decision_and_its_floor_stay_within_min_and_max(
    obs: dict[str, Any], rule: dict[str, int]
):
    d = decide(obs, **rule)
    assert rule["min_replicas"] <= d.floor <= rule["max_replicas"]
    if all(isinstance(v, Backlog) for v in obs.values()):
        event("asserted: known")
        assert d.replicas is not None
        assert rule["min_replicas"] <= d.replicas <= rule["max_replicas"]
        assert d.replicas == d.floor  # no capacity given: nothing caps it
    else:
        event("asserted: unknown (only the floor is bounded)")
        assert (d.status, d.replicas) == ("unknown", None)


@given(known_observations(), rules(), st.integers(0, 20))
def test_raising_max_never_lowers_and_raising_min_never_lowers(
    obs: dict[str, Backlog], rule: dict[str, int], more: int
):
    base = decide(obs, **rule).replicas
    higher_max = {**rule, "max_replicas": rule["max_replicas"] + more}
    assert decide(obs, **higher_max).replicas >= base
    higher_min = {**rule, "min_replicas": min(rule["min_replicas"] + more, rule["max_replicas"])}
    assert decide(obs, **higher_min).replicas >= base


@given(known_observations(), st.integers(1, 20), st.integers(1, 30))
def test_min_equal_to_max_pins_the_decision(obs: dict[str, Backlog], target: int, n: int):
    assert decide(obs, target=target, min_replicas=n, max_replicas=n).replicas == n


@given(mixed_observations(), rules(), st.integers(0, 40))
def test_the_floor_is_the_decision_of_the_known_parents_and_acting_on_it_is_idempotent(
    obs: dict[str, Any], rule: dict[str, int], current: int
):
    d = decide(obs, **rule)
    known = {k: v for k, v in obs.items() if isinstance(v, Backlog)}
    event(f"asserted: {'some' if known else 'no'} parent known")
    if known:
        assert d.floor == decide(known, **rule).replicas
    else:
        assert d.floor == rule["min_replicas"]
    once = d.next_replicas(current, policy="up-only")
    assert d.next_replicas(once, policy="up-only") == once
    assert d.next_replicas(d.next_replicas(current)) == d.next_replicas(current)


@given(known_observations(), rules(), st.integers(0, 40))
def test_a_capacity_cap_only_ever_lowers_and_never_below_min(
    obs: dict[str, Backlog], rule: dict[str, int], capacity: int
):
    free = decide(obs, **rule)
    capped = decide(obs, capacity=capacity, **rule)
    assert rule["min_replicas"] <= capped.replicas <= free.replicas
    assert capped.replicas == max(rule["min_replicas"], min(free.replicas, capacity))
    event(f"asserted: {capped.diagnosis}")
    if capped.diagnosis != "starved":
        assert (capped.diagnosis == "capacity-capped") == (capped.replicas < free.replicas)
    else:  # starvation is about the parents, not the capacity: it wins over the cap
        assert free.diagnosis == "starved"


@st.composite
def starved_joins(draw: st.DrawFn) -> tuple[dict[str, Backlog], dict[str, int]]:
    """A join with an empty parent and one with a replica's worth of lag, by construction."""
    rule = draw(rules())
    obs = draw(known_observations(min_size=2))
    empty, full = draw(st.permutations(sorted(obs)))[:2]
    obs[empty] = Backlog(0, 0)
    extra = draw(st.integers(0, 100))
    obs[full] = Backlog(rule["target"] + extra, draw(st.integers(0, 5)))
    return obs, rule


@given(st.one_of(st.tuples(known_observations(min_size=2), rules()), starved_joins()))
def test_a_starved_join_has_an_empty_parent_and_one_with_a_replicas_worth(
    case: tuple[dict[str, Backlog], dict[str, int]],
):
    obs, rule = case
    d = decide(obs, **rule)
    empty = sorted(p for p, o in obs.items() if o.lag == 0)
    full = sorted(p for p, o in obs.items() if o.lag >= rule["target"])
    event(f"asserted: {'starved' if d.diagnosis == 'starved' else 'not starved'}")
    assert (d.diagnosis == "starved") == bool(empty and full)
    if d.diagnosis == "starved":
        assert list(d.starved_parents) == empty
        assert list(d.backed_up_parents) == full


# -- the KEDA/HPA model ------------------------------------------------------------------------


@st.composite
def behaviors(draw: st.DrawFn) -> HpaBehavior | None:
    if draw(st.booleans()):
        return None
    policy = st.builds(
        ScalingPolicy,
        st.sampled_from(["Pods", "Percent"]),
        st.integers(1, 200),
        st.sampled_from([15, 60, 120]),
    )
    rules_ = st.builds(
        ScalingRules,
        st.one_of(st.none(), st.sampled_from([0, 60, 300])),
        st.one_of(st.none(), st.sampled_from(["Max", "Min"])),
        st.one_of(st.none(), st.lists(policy, min_size=1, max_size=2).map(tuple)),
        st.one_of(st.none(), st.sampled_from([0.0, 0.05, 0.1, 0.3])),
    )
    return HpaBehavior(draw(st.one_of(st.none(), rules_)), draw(st.one_of(st.none(), rules_)))


@st.composite
def histories(draw: st.DrawFn, now: float, lo: int, hi: int) -> HpaState:
    """A state within [lo, hi] with an arbitrary past: recommendations, events, failures."""
    current = draw(st.integers(lo, hi))
    recs = draw(
        st.lists(
            st.builds(Recommendation, st.floats(now - 900, now), st.integers(0, 60)), max_size=6
        )
    )
    ups = draw(
        st.lists(st.builds(ScaleEvent, st.floats(now - 300, now), st.integers(1, 10)), max_size=3)
    )
    downs = draw(
        st.lists(st.builds(ScaleEvent, st.floats(now - 300, now), st.integers(1, 10)), max_size=3)
    )
    failures = draw(
        st.dictionaries(st.sampled_from([*PARENTS, "u1", "u2"]), st.integers(0, 6), max_size=4)
    )
    return HpaState(
        current,
        recommendations=tuple(recs),
        scale_up_events=tuple(ups),
        scale_down_events=tuple(downs),
        failures=tuple(failures.items()),
        last_active_s=draw(st.one_of(st.none(), st.floats(now - 900, now))),
    )


@st.composite
def cluster_cases(draw: st.DrawFn, unknown: bool) -> tuple[KedaScaler, HpaState, dict[str, Any]]:
    now = 1000.0
    obs: dict[str, Any] = draw(mixed_observations() if unknown else known_observations())
    lo = draw(st.integers(1, 5))
    hi = draw(st.integers(lo, 40))
    fallback = fallback_for_unknown(min_replicas=lo, failure_threshold=draw(st.integers(0, 4)))
    triggers = tuple(Trigger(p, draw(st.integers(1, 30))) for p in sorted(obs))
    scaler = KedaScaler(
        triggers,
        min_replica_count=lo,
        max_replica_count=hi,
        fallback=fallback,
        behavior=draw(behaviors()),
        tolerance=draw(st.sampled_from([0.0, 0.1, 0.2])),
    )
    return scaler, draw(histories(now, lo, hi)), obs


@settings(max_examples=300)
@given(cluster_cases(unknown=True))
def test_under_fallback_for_unknown_the_cluster_never_scales_down_while_a_parent_is_unobservable(
    case: tuple[KedaScaler, HpaState, dict[str, Any]],
):
    scaler, state, obs = case
    p = predict_hpa(obs, scaler=scaler, state=state, now_s=1000.0)
    assert p.replicas >= state.replicas
    json.dumps(p.to_dict(), allow_nan=False)


@given(cluster_cases(unknown=False))
def test_the_hpa_stays_within_its_min_and_max(case: tuple[KedaScaler, HpaState, dict[str, Any]]):
    scaler, state, obs = case
    p = predict_hpa(obs, scaler=scaler, state=state, now_s=1000.0)
    assert scaler.hpa_min_replicas <= p.replicas <= scaler.max_replica_count


@given(known_observations(), st.integers(1, 30), st.integers(1, 40))
def test_with_tolerance_zero_each_trigger_proposes_our_per_parent_ask(
    obs: dict[str, Backlog], target: int, current: int
):
    scaler = KedaScaler(
        tuple(Trigger(p, target) for p in obs),
        min_replica_count=1,
        max_replica_count=1000,
        tolerance=0.0,
    )
    p = predict_hpa(obs, scaler=scaler, state=HpaState(current), now_s=0.0)
    for reading in p.readings:
        assert reading.proposal == reading.raw == -(-obs[reading.parent].lag // target)
    assert p.raw == max(-(-o.lag // target) for o in obs.values())


@given(known_observations(), st.integers(1, 30))
def test_the_hpa_is_canonical_in_trigger_order(obs: dict[str, Backlog], target: int):
    names = sorted(obs)
    a = KedaScaler(tuple(Trigger(n, target) for n in names), min_replica_count=1)
    b = KedaScaler(tuple(Trigger(n, target) for n in reversed(names)), min_replica_count=1)
    state = HpaState(3)
    assert predict_hpa(obs, scaler=a, state=state, now_s=0.0) == predict_hpa(
        obs, scaler=b, state=state, now_s=0.0
    )


@given(cluster_cases(unknown=False), st.floats(0, 50))
def test_the_hpa_never_reads_a_clock_the_same_inputs_give_the_same_answer(
    case: tuple[KedaScaler, HpaState, dict[str, Any]], later: float
):
    scaler, state, obs = case
    before = copy.deepcopy((scaler, state, obs))
    one = predict_hpa(obs, scaler=scaler, state=state, now_s=1000.0 + later)
    two = predict_hpa(obs, scaler=scaler, state=state, now_s=1000.0 + later)
    assert one == two
    assert (scaler, state, obs) == before


def test_fallback_static_below_the_current_count_can_scale_down_unlike_fallback_for_unknown():
    """The law above needs currentReplicas: a static fallback is a set-point, not a hold."""
    scaler = KedaScaler(
        (Trigger("a"),), min_replica_count=1, max_replica_count=20, fallback=Fallback(0, 2)
    )
    p = predict_hpa({"a": Unobserved("x")}, scaler=scaler, state=HpaState(9), now_s=1000.0)
    assert p.metric_replicas == 2  # the 300 s window still holds 9 from a fresh controller
    later = predict_hpa({"a": Unobserved("x")}, scaler=scaler, state=p.state, now_s=1400.0)
    assert later.replicas < 9


# -- whole flows: unknown propagation and backed-up parents ----------------------------------------

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
