"""Fit the GEMM model's constants (`hlopass.cost.gemm.GemmConstants`) on XLA's measured
sm_90 (H100 SXM) matmul table only, and print them (paste into `gemm.SM90`).

Loss: mean over the 1,875 entries of min(log(predicted/measured)^2, log(2)^2) (a capped
squared log error: a few outliers the model cannot explain -- autotuner picks that measure
slower at larger k -- do not pull the fit), minimised by Nelder-Mead for each `split_min_k`
of a small grid, restarted from its end point. Never run it on another GPU's table: those
are the unseen check.

The fp8 figure weighs the two kernels XLA's autotuner chooses between by how often each
wins (`gemm.pick_share`, from the table's own timing noise, not fitted), so the loss is
smooth across their crossing. About 12 minutes on one core.

Usage: python benchmarks/fit_gemm_sm90.py
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost_vs_measured import (  # noqa: E402
    gemm_constants,
    gemm_stats,
    gemm_work,
    load_matmul,
    predict_us,
    table_figure,
)
from scipy.optimize import minimize  # noqa: E402

from hlopass.cost import gemm  # noqa: E402
from hlopass.cost.devices import get_device  # noqa: E402
from hlopass.cost.model import kernel_time  # noqa: E402

CONT = [f.name for f in fields(gemm.GemmConstants) if f.name != "split_min_k"]
CAP = math.log(2.0) ** 2
RESTARTS, MAXITER = 3, 3000


# fractions (efficiencies, overlap) stay in (0, 1): a logistic of the free parameter;
# times (µs) stay positive: an exponential
FRACTIONS = {"eff_16", "eff_tf32", "eff_8", "eff_8t", "aux_bw", "mem_eff", "rho_tf32"}


def to_free(name: str, v: float) -> float:
    if name in FRACTIONS:
        v = min(max(v, 1e-4), 1 - 1e-4)  # a fraction fitted to its bound: start just inside
        return math.log(v / (1 - v))
    return math.log(max(v, 1e-6))  # a time fitted to 0 (split_us): start just above it


def from_free(name: str, t: float) -> float:
    return 1 / (1 + math.exp(-t)) if name in FRACTIONS else math.exp(t)


def constants(x, split_min_k: int) -> gemm.GemmConstants:
    v = {n: from_free(n, t) for n, t in zip(CONT, x, strict=True)}
    return gemm.GemmConstants(split_min_k=split_min_k, **v)


def main() -> None:
    dev = get_device("h100_sxm")
    rows = load_matmul("sm_90")
    meas = [r["time_ns"] / 1e3 for r in rows]

    # the DRAM time kernel_time gives each entry before gemm.py's mem_eff: it does not
    # depend on the constants, so the loss re-prices only gemm.py's part (as kernel_time
    # does: compute + memory - overlap * min); the end checks it against kernel_time itself
    raw = [kernel_time(gemm_work(r), dev).memory_us * gemm.SM90.mem_eff for r in rows]

    def predict(r, mem, c):
        return table_figure(dev, r, mem / c.mem_eff, c)

    def loss(x, smk):
        c = constants(x, smk)
        return sum(min(math.log(predict(r, mem, c) / q) ** 2, CAP)
                   for r, mem, q in zip(rows, raw, meas, strict=True)) / len(rows)  # fmt: skip

    start = [to_free(n, getattr(gemm.SM90, n)) for n in CONT]
    best = None
    for smk in (128,):
        x = start
        for _ in range(RESTARTS):  # Nelder-Mead restarted from its own end point: the
            res = minimize(loss, x, args=(smk,), method="Nelder-Mead",  # simplex collapses
                           options={"maxiter": MAXITER, "xatol": 1e-5, "fatol": 1e-9})  # fmt: skip
            x = res.x
            print(f"split_min_k={smk}: loss {res.fun:.5f}", flush=True)
        if best is None or res.fun < best[0]:
            best = (res.fun, res.x, smk)
    c = constants(best[1], best[2])
    print("fitted constants (sm_90):")
    for k, v in asdict(c).items():
        print(f"    {k}={v:.6g}," if isinstance(v, float) else f"    {k}={v},")
    with gemm_constants(c):  # the fast loss must agree with kernel_time's prices
        gap = max(abs(predict(r, mem, c) / predict_us(dev, r) - 1)
                  for r, mem in zip(rows, raw, strict=True))  # fmt: skip
    print(f"largest gap between the fit's prices and kernel_time's: {gap:.2e}")
    s = gemm_stats("sm_90", c)
    print(
        f"sm_90 with them: median={s['median']:.3f} within1.25x={100 * s['within_1.25']:.1f}% "
        f"spearman={s['spearman']:.4f}"
    )


if __name__ == "__main__":
    main()
