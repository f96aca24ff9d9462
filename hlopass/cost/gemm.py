"""Time of one GEMM kernel (cuBLAS / Triton gemm) on a GPU: fixed cost, tiles in waves,
split-K, per-dtype tensor rates and a memory term.

The kernel computes `b` independent `m x n` outputs, each a sum over `k`. It is cut into
`TILE x TILE` output tiles, one per thread block (CTA); with split-K each tile's `k` is cut
into `s` slices run by `s` CTAs whose partial sums (f32) are written and reduced after. The
CTAs run in waves of one CTA per SM:

    ctas    = b * ceil(m / TILE) * ceil(n / TILE) * s
    waves   = ceil(ctas / SMs)
    tile    = tile_us + 2 * TILE^2 * (k / s) / (per-SM tensor peak(dtype) * eff(dtype))
    compute = fixed_us + waves * tile              [+ split_us + 2 x partials / (L2 or DRAM BW) if s > 1]
    memory  = model.py's DRAM time of the kernel / mem_eff
    kernel  = compute + memory - overlap(dtype) * min(compute, memory)

`s` is the one of 1, 2, 4, ... (each slice at least `split_min_k` long, at most
`MAX_SPLIT`) that gives the least compute time: autotuning (XLA's gemm autotuner,
cuBLAS heuristics) keeps the fastest configuration, and split-K only pays when the tiles
leave SMs idle (long-K, small m x n).

`fixed_us` is what every GEMM kernel pays whatever its size: nothing measured in XLA's
matmul table is under ~5 us, however small. f32 operands run on the TF32 tensor cores at
default precision (`DeviceSpec.matrix_peak`).

fp8 in XLA's table: an fp8 dot compiles to two kernels (a copy that puts the 1-byte rhs
k-minor, as cuBLAS's fp8 GEMM requires, then the GEMM), and the table's figure is the median
kernel time over the runs, i.e. the mean of the two: `fp8_aux_us` prices the copy. This is
why large fp8 GEMMs "measure" above the fp8 peak and small ones slower than bf16.

The constants (`SM90`) were fitted on XLA's measured sm_90 (H100 SXM) matmul table only, by
`benchmarks/fit_gemm_sm90.py`; other GPUs use the same constants with their own SM count,
tensor peaks and DRAM bandwidth (`devices.py`) -- no fit on them. The fixed cost is kept in
microseconds on every device (launch, prologue and epilogue latencies are similar across
recent NVIDIA GPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hlopass.cost.devices import DeviceSpec

TILE = 128
MAX_SPLIT = 16
PARTIAL_BYTES = 4  # split-K partial sums are f32


@dataclass(frozen=True)
class GemmConstants:
    """Constants of the GEMM time model (fitted on sm_90, see the module docstring)."""

    fixed_us: float  # per-kernel fixed cost (launch to first tile, epilogue, tail)
    tile_us: float  # per-wave cost of one tile beyond its flops (pipeline fill and drain)
    eff_16: float  # fraction of the bf16/f16 tensor peak a full tile's main loop reaches
    eff_tf32: float  # same for f32 operands on the TF32 path
    eff_8: float  # same for fp8 operands
    split_us: float  # extra cost of a split-K kernel (the partial-sum reduction)
    split_min_k: int  # shortest k slice worth a CTA
    aux_us: float  # fixed cost of the layout copy XLA runs beside an fp8 GEMM (fp8_aux_us)
    aux_bw: float  # fraction of DRAM bandwidth that copy (a 1-byte transpose) reaches
    mem_eff: float  # fraction of DRAM bandwidth a GEMM's operand and output traffic reaches
    rho_tf32: float  # memory/compute overlap of f32 (TF32) GEMMs (others: XLA's 0.95)


# Fitted by benchmarks/fit_gemm_sm90.py on XLA default_matmul_perf_table.txtpb, key sm_90
# (H100 SXM, 1,875 GEMMs) only. The fit puts the fp8 rate at the peak and the DRAM
# efficiency at 1 (their bounds), and leaves f32 little overlap.
SM90 = GemmConstants(
    fixed_us=4.673,
    tile_us=0.6985,
    eff_16=0.8601,
    eff_tf32=0.8899,
    eff_8=1.0,
    split_us=0.004696,
    split_min_k=128,
    aux_us=6.908,
    aux_bw=0.754,
    mem_eff=1.0,
    rho_tf32=0.1133,
)


@dataclass(frozen=True)
class GemmTime:
    """The priced GEMM: compute time (µs, fixed cost included), the split-K factor, CTAs."""

    compute_us: float
    split: int
    ctas: int
    waves: int


def dtype_efficiency(dtype: str, c: GemmConstants) -> float:
    if dtype.startswith("f8") or dtype.startswith("f4"):
        return c.eff_8
    if dtype == "f32":
        return c.eff_tf32
    return c.eff_16


def _time(dev: DeviceSpec, b: int, m: int, n: int, k: int, s: int, rate: float,
          c: GemmConstants) -> tuple[float, int, int]:  # fmt: skip
    ctas = b * math.ceil(m / TILE) * math.ceil(n / TILE) * s
    waves = math.ceil(ctas / dev.sm_count)
    tile = c.tile_us + 2.0 * TILE * TILE * math.ceil(k / s) / rate * 1e6
    t = c.fixed_us + waves * tile
    if s > 1:  # partial sums written by every slice, read once by the reduction; from L2
        partials = s * b * m * n * PARTIAL_BYTES  # when they fit there (XLA's L2 speedup)
        bw = dev.hbm_bandwidth * (dev.l2_speedup if partials < dev.l2_bytes else 1.0)
        t += c.split_us + 2.0 * partials / bw * 1e6
    return t, ctas, waves


def gemm_compute(dev: DeviceSpec, b: int, m: int, n: int, k: int, dtype: str,
                 precision: str = "default", c: GemmConstants = SM90) -> GemmTime:  # fmt: skip
    """Compute time of `b` x (`m` x `k`) . (`k` x `n`) with `dtype` operands on `dev`,
    with the best split-K factor."""
    b, m, n, k = max(1, b), max(1, m), max(1, n), max(1, k)
    rate = dev.matrix_peak(dtype, precision) / dev.sm_count * dtype_efficiency(dtype, c)
    best = None
    s = 1
    while s <= MAX_SPLIT and (s == 1 or k / s >= c.split_min_k):
        t, ctas, waves = _time(dev, b, m, n, k, s, rate, c)
        if best is None or t < best.compute_us:
            best = GemmTime(t, s, ctas, waves)
        s *= 2
    assert best is not None
    return best


def dims(out: object, k: int) -> tuple[int, int, int, int]:
    """(b, m, n, k) of a dot with result shape `out` (an ArrayShape) and contracting size `k`:
    the last two result dims are m x n (as `work.gemm_tiles` counts tiles), the rest batch."""
    d = tuple(getattr(out, "dims", ()) or ())
    if len(d) < 2:
        return (1, d[0] if d else 1, 1, max(1, k))
    return (max(1, math.prod(d[:-2])), d[-2], d[-1], max(1, k))


RHO = 0.95  # XLA kMemoryComputeParallelism, as model.py


def overlap(dtype: str, c: GemmConstants = SM90) -> float:
    """How much of a GEMM's memory time hides under its compute: XLA's 0.95, except for f32
    operands: Hopper's asynchronous TMA -> wgmma pipeline that hides the loads takes
    16- and 8-bit operands as they are, while f32 ones are rounded to TF32 on the way, so
    their loads overlap the math less (fitted, `rho_tf32`)."""
    return c.rho_tf32 if dtype == "f32" else RHO


def fp8_aux_us(dev: DeviceSpec, b: int, n: int, k: int, c: GemmConstants = SM90) -> float:
    """The second kernel of an fp8 dot in XLA's measurement: cuBLAS's fp8 GEMM wants the
    rhs k-minor, so XLA's layout assignment puts a copy (transpose) of the 1-byte rhs before
    the GEMM: read and write b*k*n bytes."""
    return c.aux_us + 2.0 * b * k * n / (dev.hbm_bandwidth * c.aux_bw) * 1e6
