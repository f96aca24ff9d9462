"""The bounds on size-monotone models (`benchmarks/monotone_bounds.py`), on tables small
enough to solve by hand or by enumerating every weak order of the entries."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import rankdata

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from monotone_bounds import (  # noqa: E402
    improve_spearman,
    isotonic,
    longest_in_band,
    spearman_bounds,
    within_ceiling,
)


def spearman(a, b) -> float:
    return float(np.corrcoef(rankdata(a), rankdata(b))[0, 1])


def weak_orders(n: int):
    """Every assignment of levels 0..k-1 to n items using all k levels (ordered partitions)."""
    for k in range(1, n + 1):
        for levels in itertools.product(range(k), repeat=n):
            if len(set(levels)) == k:
                yield np.array(levels, dtype=float)


def best_monotone_spearman(measured: np.ndarray, series: list[np.ndarray]) -> float:
    """The exact optimum: every weak order of the entries that is monotone in each series."""
    best = -1.0
    for y in weak_orders(len(measured)):
        if all(np.all(np.diff(y[idx]) >= 0) for idx in series) and len(set(y)) > 1:
            best = max(best, spearman(y, measured))
    return best


# two series of two sizes each; A falls with size (3 -> 1), B rises (2 -> 4), measured
# ranks A = (3, 1), B = (2, 4). Centred: A = (0.5, -1.5), B = (-0.5, 1.5), |r|^2 = 5.
# Isotonic on A pools it to (-0.5, -0.5); B stays: |P(r)|^2 = 3, bound sqrt(3/5) = 0.7746.
# Predicting A1 = A2 = B1 < B2 has midranks (2, 2, 2, 4), centred (-0.5, -0.5, -0.5, 1.5)
# = P(r) itself, so the bound is reached. The best strict ranking (no ties) reaches 2/5.
HAND = np.array([3.0, 1.0, 2.0, 4.0])
HAND_SERIES = [np.array([0, 1]), np.array([2, 3])]


def test_spearman_bound_on_a_table_solved_by_hand():
    reached, upper = spearman_bounds(HAND, HAND_SERIES)
    assert upper == pytest.approx(math.sqrt(3 / 5))
    assert reached == pytest.approx(math.sqrt(3 / 5))  # A1 = A2 = B1 < B2
    assert best_monotone_spearman(HAND, HAND_SERIES) == pytest.approx(math.sqrt(3 / 5))
    strict = max(
        spearman(p, HAND) for p in itertools.permutations(range(4)) if p[0] < p[1] and p[2] < p[3]
    )
    assert strict == pytest.approx(2 / 5)


@pytest.mark.parametrize("seed", range(12))
def test_spearman_bound_holds_against_every_weak_order(seed):
    # 6 entries in 2 or 3 series of random times: the exhaustive optimum over monotone weak
    # orders lies between the local search's witness and the projection bound
    rng = np.random.default_rng(seed)
    measured = rng.permutation(6).astype(float) + 1
    cuts = [[0, 3, 6], [0, 2, 4, 6]][seed % 2]
    series = [np.arange(a, b) for a, b in itertools.pairwise(cuts)]
    exact = best_monotone_spearman(measured, series)
    reached, upper = spearman_bounds(measured, series)
    found, values = improve_spearman(measured, series)
    assert reached <= found + 1e-12 <= exact + 2e-12
    assert exact <= upper + 1e-12
    assert all(np.all(np.diff(values[idx]) >= 0) for idx in series)


def test_isotonic_pools_violators():
    # (1, 3, 2, 4): the violating pair (3, 2) pools to 2.5
    assert isotonic(np.array([1.0, 3.0, 2.0, 4.0])) == pytest.approx([1, 2.5, 2.5, 4])


def test_within_ceiling_by_hand():
    # one series measured (10, 4, 9) at factor 1.25: bands [8, 12.5], [3.2, 5], [7.2, 11.25].
    # After a value >= 8 none is <= 5, so entries 1 and 2 never both hit; (1, 3) or (2, 3)
    # do: 2 of 3
    assert longest_in_band([8, 3.2, 7.2], [12.5, 5, 11.25]) == 2
    m = np.array([10.0, 4.0, 9.0, 1.0])  # a second series of one entry always hits
    assert within_ceiling(m, [np.array([0, 1, 2]), np.array([3])]) == pytest.approx(3 / 4)


def test_within_ceiling_matches_subsets():
    # the exact maximum against every subset, a subset being hit-able when the greedy
    # choice max(previous, low) stays under each high
    rng = np.random.default_rng(7)
    for _ in range(20):
        m = rng.uniform(1, 3, size=7)
        low, high = list(m / 1.25), list(m * 1.25)
        best = 0
        for mask in range(1 << 7):
            v, ok = -np.inf, True
            for i in range(7):
                if mask >> i & 1:
                    v = max(v, low[i])
                    ok &= v <= high[i]
            if ok:
                best = max(best, bin(mask).count("1"))
        assert longest_in_band(low, high) == best
