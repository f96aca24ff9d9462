"""The cost model against XLA's measured GPU tables ("measured truth").

* GEMMs: XLA's `default_matmul_perf_table.txtpb` (`benchmarks/data/matmul_perf_<gpu>.csv`):
  each entry is one `dot` compiled by XLA and timed with CUPTI; the figure is the *median
  kernel time* over 10 runs (xla/tools/matmul_perf_table_gen.cc). We price the same dot's
  kernel(s) with `hlopass.cost.model.kernel_time` (launch overhead excluded: the table
  times kernels on the GPU) and report predicted/measured: median, share within 1.25x,
  Spearman rank correlation. An fp8 dot on Hopper runs two kernels in XLA when the library
  GEMM wins the autotuning (the rhs layout copy and the GEMM, `gemm.fp8_aux_us`), so its
  median kernel time is the mean of the two; when Triton's GEMM wins, one kernel. Where the
  two GEMMs are within the autotuner's timing noise of each other, either may win: the
  figure is the two weighted by how often each does (`gemm.pick_share`).
  sm_90 (H100) is what `benchmarks/fit_gemm_sm90.py` fits; every other GPU (B200:
  `sm_100_B200`) is unseen, priced from its spec only. Beside each GPU: the Spearman a
  model exact up to the table's own noise would reach (`noise_ceiling`).
* Elementwise op costs: XLA's `hlo_op_profiles_data.h` (`benchmarks/data/hlo_op_profiles.csv`):
  `profiles.flops_per_element(opcode, type, device)` against the measured cycles, per GPU,
  for our device of that GPU (or the row `profiles.py` falls back to, said in the output).
  Every GPU of the table has a device now, priced with its own section, so this checks
  that `profiles.py`'s copy of the table and the extracted CSV agree (both are XLA's
  cycles; the cost model turns cycles into time with each device's own clock).

Usage: python benchmarks/cost_vs_measured.py [--gpu sm_90 ...]
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import statistics
from contextlib import contextmanager
from pathlib import Path

from hlopass.cost import gemm, profiles
from hlopass.cost.devices import DeviceSpec, get_device
from hlopass.cost.kernel_analysis import Read
from hlopass.cost.model import KernelWork, kernel_time

DATA = Path(__file__).resolve().parent / "data"
# matmul-table GPU key -> our DeviceSpec (None: no spec for that GPU)
MATMUL_DEVICES = {"sm_90": "h100_sxm", "sm_100_B200": "b200", "gfx950": None}
BYTES = {"f32": 4, "bf16": 2, "f16": 2}


def elem_bytes(t: str) -> int:
    return BYTES.get(t, 1 if t.startswith("f8") else 4)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def load_matmul(gpu: str) -> list[dict]:
    rows = []
    for r in read_csv(DATA / f"matmul_perf_{gpu}.csv"):
        d: dict = {k: int(r[k]) for k in ("b", "m", "n", "k", "time_ns")}
        d.update(lhs=r["lhs_type"], rhs=r["rhs_type"], out=r["out_type"])
        rows.append(d)
    return rows


def gemm_work(r: dict) -> KernelWork:
    """The KernelWork `model.kernel_work` finds for the table's dot (tests check they agree)."""
    b, m, n, k = r["b"], r["m"], r["n"], r["k"]
    lhs, rhs = b * m * k * elem_bytes(r["lhs"]), b * k * n * elem_bytes(r["rhs"])
    return KernelWork(
        flops=2.0 * b * m * n * k, tensor_flops=2.0 * b * m * n * k, tensor_dtype=r["lhs"],
        gemm_tiles=b * math.ceil(m / 128) * math.ceil(n / 128), gemm_shape=(b, m, n, k),
        reads=[Read(lhs, lhs, elem_bytes(r["lhs"]), True),
               Read(rhs, rhs, elem_bytes(r["rhs"]), True)],
        bytes_read=lhs + rhs, bytes_written=b * m * n * elem_bytes(r["out"]), kind="gemm",
        # kernel_analysis's launch grid for a dot: the loop emitter's, 128 threads a block
        blocks=math.ceil(b * m * n / 128), threads_per_block=128, threads=b * m * n,
    )  # fmt: skip


def table_figure(dev: DeviceSpec, r: dict, memory_us: float, c: gemm.GemmConstants) -> float:
    """The table's figure for entry `r` given its GEMM's memory time (µs, `kernel_time`'s):
    each kernel the autotuner may keep (`gemm.gemm_candidates`) priced as `kernel_time`
    prices a GEMM (compute + memory - overlap x the smaller), averaged with the layout copy
    where XLA runs one (an fp8 library GEMM on Hopper: the median of the two kernels'
    times), weighted by how often the autotuner keeps it (`gemm.pick_share`)."""
    cands = gemm.gemm_candidates(dev, r["b"], r["m"], r["n"], r["k"], r["lhs"], c=c)
    rho = gemm.overlap(r["lhs"], c)
    t = 0.0
    for g, share in zip(cands, gemm.pick_share(tuple(g.compute_us for g in cands)), strict=True):
        fig = g.compute_us + memory_us - rho * min(g.compute_us, memory_us)
        if gemm.has_fp8_copy(dev, g, r["lhs"]):
            fig = 0.5 * (fig + gemm.fp8_aux_us(dev, r["b"], r["n"], r["k"], c))
        t += share * fig
    return t


def predict_us(dev: DeviceSpec, r: dict) -> float:
    """The table's figure for entry `r` as the model sees it (`table_figure`), from the GEMM
    kernel's `kernel_time` without launch overhead: with one candidate kernel, its
    `exec_us`."""
    return table_figure(dev, r, kernel_time(gemm_work(r), dev).memory_us, gemm.SM90)


@contextmanager
def gemm_constants(c: gemm.GemmConstants | None):
    """Price with constants `c` for a while (the fit's trial constants); None: as they are."""
    old = gemm.SM90
    gemm.SM90 = c or old
    try:
        yield
    finally:
        gemm.SM90 = old


def spearman(x: list[float], y: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=v.__getitem__)
        out = [0.0] * len(v)
        i = 0
        while i < len(order):  # ties share their mean rank
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for t in range(i, j + 1):
                out[order[t]] = (i + j) / 2
            i = j + 1
        return out

    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    var = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / var if var else 0.0


def gemm_stats(gpu: str, c: gemm.GemmConstants | None = None) -> dict[str, float]:
    """median ratio, share within 1.25x, Spearman of predicted vs measured for one GPU."""
    dev = get_device(MATMUL_DEVICES[gpu])
    rows = load_matmul(gpu)
    with gemm_constants(c):
        pred = [predict_us(dev, r) for r in rows]
    meas = [r["time_ns"] / 1e3 for r in rows]
    ratio = [p / q for p, q in zip(pred, meas, strict=True)]
    within = sum(1 for x in ratio if 1 / 1.25 <= x <= 1.25) / len(ratio)
    return {"n": len(rows), "median": statistics.median(ratio), "within_1.25": within,
            "spearman": spearman(pred, meas)}  # fmt: skip


FP8_PAIRS = (("f8e4m3fn", "f8e4m3fn"), ("f8e4m3fn", "f8e5m2"), ("f8e5m2", "f8e4m3fn"))


def noise_ceiling(gpu: str, draws: int = 20) -> dict[str, float]:
    """How far the table itself lets a model rank: its three fp8 type pairs run the same
    kernels (1-byte operands either way), so their spread per shape is measurement noise:
    `sd` (of log time, per entry). A model exact up to that noise reaches Spearman
    `spearman` (the mean over `draws` seeded draws of measured x lognormal(0, sd))."""
    rows = load_matmul(gpu)
    by: dict[tuple, dict] = {}
    for r in rows:
        by.setdefault((r["b"], r["m"], r["n"], r["k"]), {})[(r["lhs"], r["rhs"])] = r["time_ns"]
    dev2, n = 0.0, 0
    for times in by.values():
        logs = [math.log(times[p]) for p in FP8_PAIRS if p in times]
        if len(logs) == len(FP8_PAIRS):
            mean = statistics.fmean(logs)
            dev2 += sum((x - mean) ** 2 for x in logs)
            n += len(logs) - 1
    sd = math.sqrt(dev2 / n)
    meas = [r["time_ns"] / 1e3 for r in rows]
    rng = random.Random(0)
    sp = statistics.fmean(
        spearman([q * math.exp(rng.gauss(0.0, sd)) for q in meas], meas) for _ in range(draws)
    )
    return {"sd": sd, "spearman": sp}


def profile_stats() -> dict[str, dict]:
    """Per GPU of the op-profile table: share of (opcode, type) within 1.25x of measured."""
    by_gpu: dict[str, list[tuple[str, str, int]]] = {}
    for r in read_csv(DATA / "hlo_op_profiles.csv"):
        by_gpu.setdefault(r["gpu"], []).append((r["opcode"], r["type"], int(r["cycles"])))
    out = {}
    for gpu, rows in by_gpu.items():
        device, used = profiles.device_for_profile(gpu)
        ok = sum(1 for op, t, cyc in rows
                 if 1 / 1.25 <= profiles.section_cost(used, op, t) / cyc <= 1.25)  # fmt: skip
        out[gpu] = {"n": len(rows), "within_1.25": ok / len(rows), "device": device,
                    "row": used}  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--gpu", nargs="*", default=list(MATMUL_DEVICES))
    a = ap.parse_args()
    print("GEMMs (XLA default_matmul_perf_table), predicted/measured kernel time:")
    for gpu in a.gpu:
        if MATMUL_DEVICES.get(gpu) is None:
            print(f"  {gpu:12s} no DeviceSpec for this GPU: not priced")
            continue
        s = gemm_stats(gpu)
        tag = "fitted" if gpu == "sm_90" else "unseen"
        ceil = noise_ceiling(gpu)
        print(
            f"  {gpu:12s} ({tag}, {MATMUL_DEVICES[gpu]}): n={s['n']} median={s['median']:.3f} "
            f"within1.25x={100 * s['within_1.25']:.1f}% spearman={s['spearman']:.4f} "
            f"(noise ceiling {ceil['spearman']:.4f}: fp8 pairs' sd {ceil['sd']:.3f})"
        )
    print("Elementwise op profiles (XLA hlo_op_profiles_data.h), within 1.25x of measured:")
    for gpu, s in profile_stats().items():
        print(
            f"  {gpu:8s} n={s['n']:3d} within1.25x={100 * s['within_1.25']:.1f}% "
            f"(device {s['device'] or '-'}, row {s['row']})"
        )


if __name__ == "__main__":
    main()
