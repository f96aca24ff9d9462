"""Fit the collective model's constants on XLA's measured 8xH100 table (sm_90 only).

    python benchmarks/fit_collectives_sm90.py

Reads `benchmarks/data/collective_perf_sm_90.csv`, fits `collectives.CollectiveFit` by
robust least squares on log(predicted / measured) (soft-L1: the small-message entries are
noisy, 11-130 µs for the same 1 KiB all-reduce), prints the constants to paste into
`SM90_FIT` and the agreement they give. Other GPUs' tables are never read here.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares, minimize

from hlopass.cost.collectives import SM90_FIT, CollectiveFit, CollectiveShape, collective_time_us
from hlopass.cost.topology import Interconnect, interconnect

DATA = Path(__file__).resolve().parent / "data"


def load(key: str) -> list[dict]:
    """Rows of `collective_perf_<key>.csv` (the header comment skipped)."""
    with (DATA / f"collective_perf_{key}.csv").open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def shape_of(row: dict, links: Interconnect) -> CollectiveShape:
    n = int(row["group_size"])
    hosts = (
        max(1, -(-int(row["devices"]) // links.gpus_per_domain)) if n > links.gpus_per_domain else 1
    )
    pattern = {"two_way_mutual": "mutual", "ring": "non_mutual"}.get(row["pattern"], row["pattern"])
    return CollectiveShape(row["opcode"], float(row["bytes"]), n, hosts, pattern)


def predict(rows: list[dict], links: Interconnect, fit: CollectiveFit) -> np.ndarray:
    return np.array([collective_time_us(shape_of(r, links), links, fit) for r in rows])


def measured(rows: list[dict]) -> np.ndarray:
    return np.array([float(r["time_us"]) for r in rows])


def agreement(pred: np.ndarray, meas: np.ndarray) -> tuple[float, float, float]:
    """(share within 1.25x, Spearman rank correlation, median predicted/measured)."""
    from scipy.stats import spearmanr

    r = pred / meas
    within = float(np.mean((r <= 1.25) & (r >= 1 / 1.25)))
    return within, float(spearmanr(pred, meas).statistic), float(np.median(r))


BOUNDS = (
    [1.0, 0.1, 0.1, 0.1, 0.2, 0.0, 0.0, 1.0, 0.02, 0.1, 0.0, 0.1, 0.0, 0.1, 0.2, 0.0],
    [60.0, 100.0, 100.0, 200.0, 1.0, 1.9, 100.0, 60.0, 1.0, 1.0, 1000.0, 1.0, 20.0, 1.0, 2.0, 20.0],
)


RESTARTS, SEED = 6, 1


def fit_sm90() -> CollectiveFit:
    """Least squares on log(predicted/measured) (soft-L1), then Nelder-Mead on a smoothed
    count of entries outside 1.25x (the figure the model is judged by; the smoothing
    narrowed in three rounds), within BOUNDS; then RESTARTS seeded restarts from the best
    constants scaled at random by ~25% each, keeping whichever puts most entries within."""
    rows = load("sm_90")
    links = interconnect("sm_90")
    meas = np.log(measured(rows))
    lo, hi = np.array(BOUNDS[0]), np.array(BOUNDS[1])

    def logratio(x: np.ndarray) -> np.ndarray:
        return np.log(predict(rows, links, CollectiveFit(*np.clip(x, lo, hi)))) - meas

    def outside(x: np.ndarray, width: float) -> float:
        r = np.abs(logratio(x))
        soft = 1 / (1 + np.exp(-(r - np.log(1.25)) / width))
        return float(np.mean(soft) + 0.05 * np.mean(r * r))

    def descend(x: np.ndarray) -> tuple[float, np.ndarray]:
        for width in (0.05, 0.02, 0.01):
            opts = {"maxiter": 2500, "xatol": 1e-3}
            x = minimize(outside, x, args=(width,), method="Nelder-Mead", options=opts).x
        x = np.clip(x, lo, hi)
        return float(np.mean(np.abs(logratio(x)) <= np.log(1.25))), x

    x0 = np.clip(np.array(SM90_FIT.as_tuple()), lo, hi)
    x = least_squares(logratio, x0, bounds=BOUNDS, loss="soft_l1", f_scale=0.1).x
    best = max(descend(x), descend(x0), key=lambda t: t[0])
    rng = np.random.default_rng(SEED)
    for _ in range(RESTARTS):
        tried = descend(np.clip(best[1] * np.exp(rng.normal(0, 0.25, len(x0))), lo, hi))
        best = max(best, tried, key=lambda t: t[0])
    return CollectiveFit(*(float(round(v, 3)) for v in best[1]))


def main() -> int:
    fit = fit_sm90()
    rows = load("sm_90")
    pred = predict(rows, interconnect("sm_90"), fit)
    within, rho, med = agreement(pred, measured(rows))
    print(f"SM90_FIT = CollectiveFit{fit.as_tuple()}")
    print(
        f"sm_90: {len(rows)} entries, within 1.25x {within:.1%}, Spearman {rho:.3f}, "
        f"median predicted/measured {med:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
