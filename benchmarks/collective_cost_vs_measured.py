"""The collective model against XLA's measured tables, per GPU key.

    python benchmarks/collective_cost_vs_measured.py

For each `benchmarks/data/collective_perf_<key>.csv` (XLA's default_collective_perf_table):
the share of entries predicted within 1.25x of the measured time, the Spearman rank
correlation and the median predicted/measured. Only sm_90 was fitted
(`fit_collectives_sm90.py` -> `collectives.SM90_FIT`); the others are unseen, priced with
the same constants on their own links (`topology.TABLE_KEYS`). `--legacy` adds the old
local-copy view (bytes / HBM bandwidth + 1 µs launch) for comparison.

The "(monotone)" lines bound every model whose time never falls as the message grows within
a measured series (opcode, group size, pattern): the table's noise (a 1 KiB all-reduce:
123 µs, 2 KiB: 17 µs) caps them all. Within 1.25x: the exact maximum over such models.
Spearman: an upper bound no such model passes, and the best such model found (a witness:
per-entry values, monotone in each series); the argument is in `monotone_bounds.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_collectives_sm90 import DATA, agreement, load, measured, predict  # noqa: E402
from monotone_bounds import (  # noqa: E402
    improve_spearman,
    spearman_bounds,
    table_series,
    within_ceiling,
)

from hlopass.cost.collectives import SM90_FIT  # noqa: E402
from hlopass.cost.topology import interconnect  # noqa: E402

TARGETS = {"within_1.25x": 0.80, "spearman": 0.95}


def print_monotone(rows: list[dict], meas: np.ndarray) -> None:
    """The bounds on models monotone in message size (see the module docstring)."""
    series = table_series(rows)
    _, upper = spearman_bounds(meas, series)
    found, values = improve_spearman(meas, series)
    assert all(np.all(np.diff(values[idx]) >= 0) for idx in series), "witness not monotone"
    within = within_ceiling(meas, series)
    print(
        f"{'  (monotone)':14} {len(rows):7d} {within:11.1%} {upper:8.3f} {'':10}  "
        "most any monotone model reaches (within: exact; Spearman: upper bound)"
    )
    print(
        f"{'  (monotone)':14} {len(rows):7d} {'':11} {found:8.4f} {'':10}  "
        "Spearman of a monotone model found (local search from isotonic ranks)"
    )


def keys() -> list[str]:
    found = sorted(
        p.stem.removeprefix("collective_perf_") for p in DATA.glob("collective_perf_*.csv")
    )
    return ["sm_90"] + [k for k in found if k != "sm_90"]


def main(argv: list[str]) -> int:
    print(
        f"{'gpu key':14} {'entries':>7} {'within1.25x':>11} {'spearman':>8} {'median p/m':>10}  fitted"
    )
    for key in keys():
        rows = load(key)
        meas = measured(rows)
        within, rho, med = agreement(predict(rows, interconnect(key), SM90_FIT), meas)
        tag = "yes" if key == "sm_90" else "no (unseen)"
        print(f"{key:14} {len(rows):7d} {within:11.1%} {rho:8.3f} {med:10.2f}  {tag}")
        if key == "sm_90":
            print_monotone(rows, meas)
        if "--legacy" in argv and key == "sm_90":
            legacy = np.array([1.0 + float(r["bytes"]) * 2 / 3.35e12 * 1e6 for r in rows])
            w, r, m = agreement(legacy, meas)
            print(f"{'  (local copy)':14} {len(rows):7d} {w:11.1%} {r:8.3f} {m:10.2f}")
    print(
        f"targets on sm_90: within 1.25x >= {TARGETS['within_1.25x']:.0%}, "
        f"Spearman >= {TARGETS['spearman']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
