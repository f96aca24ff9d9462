"""What any model that rises with message size can reach on a measured table.

A *monotone model* is any prediction that, within each measured series (same opcode, group
size, pattern, dtype), never decreases as the message grows. Two figures bound it:

* `within_ceiling`: the largest share of entries any monotone model puts within a factor
  of the measured time -- exact, by a longest-chain dynamic programme per series.
* `spearman_bounds`: an upper bound on the Spearman correlation any monotone model reaches,
  and a monotone model that reaches the lower figure (so the optimum lies between); the
  lower figure is raised by `improve_spearman`, a local search over monotone rankings whose
  result is a witness (a monotone prediction per entry), not a bound.

The argument for the Spearman bound. Spearman's rho of predictions p against measurements m
is Pearson's correlation of their average ranks R(p), R(m). If p is monotone within each
series, so is R(p) (equal values share a rank, larger values get larger ranks). Let K be the
set of real vectors that are non-decreasing along every series: a closed convex cone that
holds the constant vectors, so centring a vector of K leaves it in K. With r = R(m) - mean,
for every non-zero y in K:

    <y, r> = <y, P(r)> + <y, r - P(r)> <= <y, P(r)> <= |y| |P(r)|

where P is the Euclidean projection onto K: r - P(r) lies in K's polar cone, so its inner
product with any y of K is <= 0, and then Cauchy-Schwarz. Hence rho <= |P(r)| / |r|, for
all monotone models at once. K's constraints never couple two series, so P is the
isotonic (least-squares non-decreasing) regression of r on each series alone, by pool
adjacent violators. The bound is attained by y = P(r) as a real vector, but P(r) need not
be a vector of ranks: used as a model, its own ranks give a Spearman that some monotone
model does reach -- the lower figure. Isotonic fitting on ranks is thus the optimum of the
relaxation, not (in general) of Spearman itself; the true optimum is between the two.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def isotonic(values: np.ndarray) -> np.ndarray:
    """The least-squares non-decreasing fit of `values` (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([float(v), 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (b, nb), (a, na) = blocks.pop(), blocks.pop()
            blocks.append([(a * na + b * nb) / (na + nb), na + nb])
    return np.array([mean for mean, n in blocks for _ in range(int(n))])


def per_series(values: np.ndarray, series: list[np.ndarray], fn) -> np.ndarray:
    """`fn` applied to each series' values (index arrays in message-size order)."""
    out = np.empty(len(values))
    for idx in series:
        out[idx] = fn(values[idx])
    return out


def spearman_bounds(measured: np.ndarray, series: list[np.ndarray]) -> tuple[float, float]:
    """(reached, upper): the Spearman of a monotone model (isotonic fit of the measured
    ranks) and the bound no monotone model passes (see the module docstring)."""
    r = rankdata(measured) - (len(measured) + 1) / 2
    fit = per_series(r, series, isotonic)
    upper = float(np.linalg.norm(fit) / np.linalg.norm(r))
    return _spearman(fit, r), upper


def _spearman(y: np.ndarray, centred_ranks: np.ndarray) -> float:
    p = rankdata(y)
    p -= p.mean()
    norm = np.linalg.norm(p) * np.linalg.norm(centred_ranks)
    return float(p @ centred_ranks / norm) if norm > 0 else -1.0  # all tied: no correlation


def improve_spearman(measured: np.ndarray, series: list[np.ndarray],
                     sweeps: int = 4) -> tuple[float, np.ndarray]:  # fmt: skip
    """Hill climbing from the isotonic fit of the ranks: a run of tied entries of one series
    (or part of it) takes another value between its series neighbours -- one already used
    (a tie with other series) or a midpoint between two used ones -- when that raises
    Spearman. Every step keeps each series non-decreasing, so the result (Spearman, values)
    is a monotone model: a witness of what monotone models reach."""
    r = rankdata(measured) - (len(measured) + 1) / 2
    y = per_series(r, series, isotonic)
    best = _spearman(y, r)
    for _ in range(sweeps):
        start = best
        used = np.unique(y)
        cands = np.concatenate([used, (used[1:] + used[:-1]) / 2])
        for idx in series:
            for a, b in _tied_spans(y[idx]):
                lo = y[idx[a - 1]] if a > 0 else -np.inf
                hi = y[idx[b + 1]] if b + 1 < len(idx) else np.inf
                span, keep = idx[a : b + 1], y[idx[a]]
                for v in cands[(cands >= lo) & (cands <= hi)]:
                    y[span] = v
                    s = _spearman(y, r)
                    if s > best + 1e-12:
                        best, keep = s, v
                y[span] = keep
        if best <= start + 1e-12:
            break
    return best, y


def _tied_spans(values: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) of every sub-run of a run of equal neighbouring values."""
    spans, k = [], 0
    while k < len(values):
        j = k
        while j + 1 < len(values) and values[j + 1] == values[k]:
            j += 1
        spans += [(a, b) for a in range(k, j + 1) for b in range(a, j + 1)]
        k = j + 1
    return spans


def longest_in_band(low: list[float], high: list[float]) -> int:
    """The most entries of one series a non-decreasing sequence can hit, entry i being hit
    when its value lies in [low[i], high[i]]. best[i][k]: the smallest last value of a
    monotone choice hitting k entries, the last one i (a smaller last value never hurts)."""
    n = len(low)
    best = [[np.inf] * (n + 1) for _ in range(n)]
    for i in range(n):
        best[i][1] = low[i]
        for j in range(i):
            for k in range(1, j + 2):
                if best[j][k] <= high[i]:
                    best[i][k + 1] = min(best[i][k + 1], max(low[i], best[j][k]))
    return max((k for row in best for k, v in enumerate(row) if v < np.inf), default=0)


def within_ceiling(measured: np.ndarray, series: list[np.ndarray], factor: float = 1.25) -> float:
    """The largest share of entries any monotone model predicts within `factor` of the
    measured time (exact: the per-series maxima add up, series being independent)."""
    hits = sum(
        longest_in_band([float(m) / factor for m in measured[idx]],
                        [float(m) * factor for m in measured[idx]])
        for idx in series
    )  # fmt: skip
    return hits / len(measured)


def table_series(rows: list[dict]) -> list[np.ndarray]:
    """Index arrays of the measured series of a collective table, each in size order."""
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(rows):
        key = (r["opcode"], r["group_size"], r["pattern"], r["dtype"], r.get("num_groups"))
        groups.setdefault(key, []).append(i)
    return [np.array(sorted(ix, key=lambda i: float(rows[i]["bytes"]))) for ix in groups.values()]
