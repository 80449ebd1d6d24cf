"""Laws of vfcore.routing.partition: owners are in range, stable, typed, uniform, and move as predicted.

The uniformity and movement checks use fixed seeds, so each gives the same
answer on every run; their bounds are statistical (documented on each test)
and loose enough that only a real defect (a biased hash, a broken jump step,
an identity mapping) can cross them.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from vfcore.routing.partition import (
    JUMP_MAX_REPLICAS,
    STRATEGIES,
    encode_key,
    expected_moved_fraction,
    jump_bucket,
    key_hash,
    moved_fraction,
    partition_of,
)

# -- strategies ----------------------------------------------------------------

#: Hand-picked keys: the same digits in every type, sign and width edges, -0.0, non-ASCII.
EDGE_KEYS: tuple[object, ...] = (
    7,
    "7",
    b"7",
    7.0,
    True,
    False,
    1,
    0,
    "1",
    "0",
    "True",
    b"True",
    1.0,
    0.0,
    -0.0,
    -1,
    127,
    128,
    -128,
    -129,
    2**63 - 1,
    -(2**63),
    2**64,
    10**100,
    " ",
    "\x00",
    b"\x00",
    "détecteur",
    "🎥",
    5e-324,
    1.7976931348623157e308,
)

finite_floats = st.floats(allow_nan=False, allow_infinity=False)
keys = st.one_of(
    st.sampled_from(EDGE_KEYS),
    st.text(min_size=1),  # st.text never draws lone surrogates
    st.binary(min_size=1),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.booleans(),
    finite_floats,
)
replica_counts = st.one_of(
    st.integers(1, 64),
    st.integers(1, JUMP_MAX_REPLICAS),
    st.sampled_from([1, 2, JUMP_MAX_REPLICAS]),
)
strategies = st.sampled_from(STRATEGIES)
hashes64 = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**63, 2**64 - 1]))


@st.composite
def key_pairs(draw: st.DrawFn) -> tuple[object, object]:
    """Two keys, often equal in value and sometimes equal only across types."""
    a = draw(keys)
    b = draw(
        st.one_of(
            keys,
            st.just(a),
            st.sampled_from([str(a), repr(a), bool(a)]),
        )
    )
    return a, b


def typed_value(key: object) -> tuple[str, object]:
    """What a key *is*: its type and value (-0.0 and 0.0 are one float)."""
    if isinstance(key, bool):
        return ("bool", key)
    if isinstance(key, int):
        return ("int", int(key))
    if isinstance(key, float):
        return ("float", key + 0.0)
    if isinstance(key, str):
        return ("str", str(key))
    assert isinstance(key, bytes)
    return ("bytes", bytes(key))


def fresh_copy(key: object) -> object:
    """An equal key built anew from its parts (bools are singletons: the same object)."""
    if isinstance(key, bool):
        return bool(key)
    if isinstance(key, str):
        return "".join(list(key))
    if isinstance(key, bytes):
        return bytes(bytearray(key))
    if isinstance(key, int):
        size = key.bit_length() // 8 + 2
        return int.from_bytes(key.to_bytes(size, "big", signed=True), "big", signed=True)
    assert isinstance(key, float)
    return float(repr(key))


# -- range and determinism -----------------------------------------------------


@given(keys, replica_counts, strategies)
@example(True, 1, "jump")
@example(2**64, JUMP_MAX_REPLICAS, "jump")
def test_the_owner_is_one_of_the_n_replicas(key: object, n: int, strategy: str) -> None:
    owner = partition_of(key, n, strategy)  # type: ignore[arg-type]
    assert type(owner) is int
    assert 0 <= owner < n


@given(keys, st.integers(JUMP_MAX_REPLICAS + 1, 2**80))
def test_modulo_takes_any_replica_count(key: object, n: int) -> None:
    assert 0 <= partition_of(key, n) < n  # type: ignore[arg-type]


@given(keys, strategies)
def test_one_replica_owns_every_key(key: object, strategy: str) -> None:
    assert partition_of(key, 1, strategy) == 0  # type: ignore[arg-type]


@given(keys, replica_counts, strategies)
def test_equal_keys_have_the_same_owner(key: object, n: int, strategy: str) -> None:
    owner = partition_of(key, n, strategy)  # type: ignore[arg-type]
    assert partition_of(key, n, strategy) == owner  # type: ignore[arg-type]
    assert partition_of(fresh_copy(key), n, strategy) == owner  # type: ignore[arg-type]


@given(keys, replica_counts)
def test_owners_are_the_documented_functions_of_the_64_bit_hash(key: object, n: int) -> None:
    h = key_hash(key)  # type: ignore[arg-type]
    assert 0 <= h < 2**64
    assert partition_of(key, n) == h % n  # type: ignore[arg-type]
    assert partition_of(key, n, "jump") == jump_bucket(h, n)  # type: ignore[arg-type]


# The PYTHONHASHSEED check: the same keys, owners computed in two fresh
# interpreters with different hash seeds and in this one, must agree.
_KEYGEN = """
import random

def make_keys():
    rng = random.Random(20240611)
    alphabet = "abcxyz-_:/0123456789é🎥"
    out = []
    for i in range(300):
        kind = i % 6
        if kind == 0:
            out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))))
        elif kind == 1:
            out.append(rng.getrandbits(72) - 2**71)
        elif kind == 2:
            out.append(rng.randbytes(rng.randint(1, 16)))
        elif kind == 3:
            out.append(rng.uniform(-1e6, 1e6))
        elif kind == 4:
            out.append(rng.random() < 0.5)
        else:
            out.append(f"{rng.getrandbits(64):016x}")
    return out
"""
_SIZES = (2, 3, 7, 16, 1000, JUMP_MAX_REPLICAS)
_CHILD = (
    _KEYGEN
    + """
import json
from vfcore.routing.partition import partition_of
ks = make_keys()
print(json.dumps({
    "keys": [repr(k) for k in ks],
    "owners": [[partition_of(k, n, s) for n in SIZES for s in ("modulo", "jump")] for k in ks],
    "builtin_hash": [hash(k) for k in ks if isinstance(k, str)],
}))
"""
)


def _run_child(seed: str, cwd: Path) -> dict[str, list[object]]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    result = subprocess.run(
        [sys.executable, "-c", f"SIZES = {_SIZES!r}\n{_CHILD}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, list[object]] = json.loads(result.stdout)
    return data


def test_owners_do_not_depend_on_pythonhashseed_or_the_process(tmp_path: Path) -> None:
    first = _run_child("0", tmp_path)
    second = _run_child("4242", tmp_path)
    # The seeds took effect (else this test would prove nothing): hash() differs.
    assert first["builtin_hash"] != second["builtin_hash"]
    namespace: dict[str, object] = {}
    exec(_KEYGEN, namespace)
    here = namespace["make_keys"]()  # type: ignore[operator]
    assert first["keys"] == second["keys"] == [repr(k) for k in here]
    expected = [[partition_of(k, n, s) for n in _SIZES for s in STRATEGIES] for k in here]
    assert first["owners"] == expected
    assert second["owners"] == expected


# -- types ---------------------------------------------------------------------


@given(key_pairs())
@example((7, "7"))
@example((True, 1))
@example((False, 0))
@example((True, "True"))
@example((7, 7.0))
@example(("7", b"7"))
@example((0.0, -0.0))
@example((1, 1.0))
def test_two_keys_share_an_encoding_exactly_when_they_are_the_same_typed_value(
    pair: tuple[object, object],
) -> None:
    a, b = pair
    if not _is_key(b):
        return
    same = typed_value(a) == typed_value(b)
    assert (encode_key(a) == encode_key(b)) == same  # type: ignore[arg-type]
    if same:
        assert key_hash(a) == key_hash(b)  # type: ignore[arg-type]


def _is_key(value: object) -> bool:
    if isinstance(value, str | bytes):
        return len(value) > 0
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int)


@given(st.integers(-(10**30), 10**30))
@example(0)
@example(1)
@example(7)
def test_the_same_digits_as_int_str_bytes_float_and_bool_are_distinct_keys(i: int) -> None:
    variants: list[object] = [i, str(i), str(i).encode(), float(i)]
    if i in (0, 1):
        variants += [bool(i), str(bool(i)), str(bool(i)).encode()]
    encodings = {encode_key(v) for v in variants}  # type: ignore[arg-type]
    hashes = {key_hash(v) for v in variants}  # type: ignore[arg-type]
    assert len(encodings) == len(hashes) == len(variants)


# -- uniformity ----------------------------------------------------------------

#: Family-wise significance of each uniformity test below: over all n in 2..64
#: and both tails, the chance that uniform owners fail it is at most 0.001.
FAMILY_ALPHA = 0.001
N_RANGE = range(2, 65)
_PER_TEST_ALPHA = FAMILY_ALPHA / (2 * len(N_RANGE))  # Bonferroni: two tails per n
_Z = statistics.NormalDist().inv_cdf(1 - _PER_TEST_ALPHA)


def chi_square_quantile(df: int, z: float) -> float:
    """Wilson–Hilferty: the chi-square quantile with ``df`` degrees of freedom at normal score z."""
    c = 2.0 / (9.0 * df)
    return df * max(0.0, 1.0 - c + z * math.sqrt(c)) ** 3


def chi_square(counts: list[int], total: int) -> float:
    expected = total / len(counts)
    return sum((c - expected) ** 2 for c in counts) / expected


@pytest.mark.parametrize(
    ("df", "upper", "lower"),
    [
        (1, 10.828, None),
        (5, 20.515, None),
        (10, 29.588, 1.479),
        (30, 59.703, 11.588),
        (60, 99.607, 31.738),
        (100, 149.449, 61.918),
    ],
)
def test_the_chi_square_quantile_matches_published_tables(
    df: int, upper: float, lower: float | None
) -> None:
    # Tables at 0.001 in each tail (z = ±3.0902). Wilson–Hilferty is within 4 % in
    # the upper tail and 10 % in the lower one, where it errs low (a laxer bound).
    z = statistics.NormalDist().inv_cdf(0.999)
    assert math.isclose(chi_square_quantile(df, z), upper, rel_tol=0.04)
    if lower is not None:
        approx = chi_square_quantile(df, -z)
        assert approx <= lower and math.isclose(approx, lower, rel_tol=0.10)


def _random_str_keys(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(64):016x}" for _ in range(count)]


def uniformity_failures(owners: Callable[[int], Iterable[int]]) -> list[tuple[int, float]]:
    """Each n in 2..64 whose owner counts fail the two-sided chi-square test, with the statistic."""
    failures = []
    for n in N_RANGE:
        counts = [0] * n
        for owner in owners(n):
            counts[owner] += 1
        stat = chi_square(counts, sum(counts))
        if not chi_square_quantile(n - 1, -_Z) <= stat <= chi_square_quantile(n - 1, _Z):
            failures.append((n, round(stat, 1)))
    return failures


def test_the_uniformity_check_rejects_a_biased_and_a_patterned_mapping() -> None:
    sample = range(10_000)
    assert len(uniformity_failures(lambda n: (k % n for k in sample))) >= 50  # too even
    assert uniformity_failures(lambda n: (k % n if k % 10 else 0 for k in sample)) != []


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_owners_of_random_keys_are_uniform_for_every_n_from_2_to_64(strategy: str) -> None:
    """Chi-square, 10,000 random 16-char keys (seed 1), family-wise significance 0.001."""
    sample = _random_str_keys(10_000, seed=1)
    assert uniformity_failures(lambda n: (partition_of(k, n, strategy) for k in sample)) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_owners_of_sequential_int_keys_are_uniform_not_a_pattern(strategy: str) -> None:
    """Keys 0..9999 (what users really have): uniform, and not suspiciously so.

    ``key % n`` would be too even (below the lower bound, see the test above);
    a biased hash would exceed the upper one.
    """
    hashes = [key_hash(k) for k in range(10_000)]
    if strategy == "modulo":
        assert uniformity_failures(lambda n: (h % n for h in hashes)) == []
    else:
        assert uniformity_failures(lambda n: (jump_bucket(h, n) for h in hashes)) == []


# -- rescaling -----------------------------------------------------------------

_MOVE_SAMPLE = _random_str_keys(20_000, seed=2)


def _five_sigma(p: float, count: int) -> float:
    return 5 * math.sqrt(p * (1 - p) / count) + 1e-9


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 16, 31])
def test_jump_moves_about_one_in_n_plus_one_keys_when_a_replica_is_added(n: int) -> None:
    expected = 1 / (n + 1)
    assert math.isclose(expected_moved_fraction(n, n + 1, "jump"), expected)
    measured = moved_fraction(n, n + 1, "jump", keys=_MOVE_SAMPLE)
    assert abs(measured - expected) <= _five_sigma(expected, len(_MOVE_SAMPLE))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 16, 31])
def test_modulo_moves_about_n_in_n_plus_one_keys_when_a_replica_is_added(n: int) -> None:
    expected = n / (n + 1)
    assert math.isclose(expected_moved_fraction(n, n + 1, "modulo"), expected)
    measured = moved_fraction(n, n + 1, "modulo", keys=_MOVE_SAMPLE)
    assert abs(measured - expected) <= _five_sigma(expected, len(_MOVE_SAMPLE))


@pytest.mark.parametrize(("n_from", "n_to"), [(4, 8), (8, 4), (12, 16), (16, 12), (5, 4), (6, 9)])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_measured_movement_matches_the_expected_fraction(
    n_from: int, n_to: int, strategy: str
) -> None:
    expected = expected_moved_fraction(n_from, n_to, strategy)  # type: ignore[arg-type]
    measured = moved_fraction(n_from, n_to, strategy, keys=_MOVE_SAMPLE)  # type: ignore[arg-type]
    assert abs(measured - expected) <= _five_sigma(expected, len(_MOVE_SAMPLE))


@given(hashes64, st.integers(1, 100_000))
@example(0, 1)
@example(2**64 - 1, 1)
def test_growing_by_one_replica_moves_a_key_only_to_the_new_replica(h: int, n: int) -> None:
    before, after = jump_bucket(h, n), jump_bucket(h, n + 1)
    assert after in (before, n)


@given(hashes64, st.integers(1, 1000), st.integers(1, 1000))
def test_jump_keeps_a_key_whose_owner_exists_in_both_sizes_unless_it_moves_up(
    h: int, a: int, b: int
) -> None:
    # Between any two sizes, a key that moves goes to a replica the smaller size lacks.
    small, large = min(a, b), max(a, b)
    before, after = jump_bucket(h, small), jump_bucket(h, large)
    assert after == before or after >= small


@given(st.integers(1, 40), st.integers(1, 40))
def test_expected_modulo_movement_is_the_share_of_residues_that_differ(a: int, b: int) -> None:
    period = math.lcm(a, b)
    staying = sum(1 for r in range(period) if r % a == r % b)
    assert math.isclose(expected_moved_fraction(a, b, "modulo"), 1 - staying / period)


@given(st.lists(keys, min_size=1, max_size=40), st.integers(1, 20), st.integers(1, 20), strategies)
def test_moved_fraction_is_symmetric_and_ignores_order_and_duplicates(
    sample: list[object], a: int, b: int, strategy: str
) -> None:
    forward = moved_fraction(a, b, strategy, keys=sample)  # type: ignore[arg-type]
    assert 0.0 <= forward <= 1.0
    assert moved_fraction(b, a, strategy, keys=sample) == forward  # type: ignore[arg-type]
    shuffled = list(reversed(sample)) + sample
    assert moved_fraction(a, b, strategy, keys=shuffled) == forward  # type: ignore[arg-type]
    assert moved_fraction(a, a, strategy, keys=sample) == 0.0  # type: ignore[arg-type]
