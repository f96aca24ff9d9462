"""Time of one GEMM kernel (cuBLAS / Triton gemm) on a GPU: fixed cost, tiles in waves,
split-K, per-dtype tensor rates and a memory term.

The kernel computes `b` independent `m x n` outputs, each a sum over `k`. It is cut into
`TILE x TILE` output tiles, one per thread block (CTA); with split-K each tile's `k` is cut
into `s` slices run by `s` CTAs whose partial sums (f32) are written and reduced after. The
CTAs run in waves of one CTA per SM:

    ctas    = b * ceil(m / TILE) * ceil(n / TILE) * s
    waves   = ceil(ctas / SMs)
    tile    = tile_us + 2 * TILE^2 * (k / s) / (per-SM tensor peak(dtype) * eff(dtype))
    compute = fixed_us + waves * tile              [+ split_us + partials / L2 BW if s > 1;
                                                     2 x partials / DRAM BW past L2]
    memory  = model.py's DRAM time of the kernel / mem_eff
    kernel  = compute + memory - overlap(dtype) * min(compute, memory)

`s` is the one of 1, 2, 4, ... (each slice at least `split_min_k` long, at most
`MAX_SPLIT`) that gives the least compute time: autotuning (XLA's gemm autotuner,
cuBLAS heuristics) keeps the fastest configuration, and split-K only pays when the tiles
leave SMs idle (long-K, small m x n).

`fixed_us` is what every GEMM kernel pays whatever its size: nothing measured in XLA's
matmul table is under ~5 us, however small. f32 operands run on the TF32 tensor cores at
default precision (`DeviceSpec.matrix_peak`).

fp8 on Hopper (`K_MAJOR_FP8`): the fp8 tensor-core instruction (wgmma) takes both operands
k-minor, and the table's rhs is `[b, k, n]`, n-minor. Two kernels can run such a dot, and
XLA's autotuner keeps the faster it times (`gemm_candidates`):
* the library GEMM (cuBLAS fp8, `eff_8`, fixed cost `fixed_8_us`) on a k-minor copy of the
  rhs that layout assignment puts before it: a second kernel, `fp8_aux_us`;
* Triton's fp8 GEMM, which reads the rhs as it is and transposes it inside the kernel: one
  kernel, cheaper to start (`fixed_8t_us`) but slow per tile (`eff_8t`, `tile_8t_us`), on
  `TRITON_TILE` x `TRITON_TILE` tiles and never splitting k (the table: at 2^16 outputs its
  time grows linearly in k, 5.6, 7.2, 10.6 us for k = 256, 512, 1024).
The autotuner times the GEMM kernels alone (the copy is an instruction of its own), so
Triton wins on small, short-k dots. The table's figure is the median kernel time over the
runs: for the library path the mean of the copy and the GEMM (which is why large fp8 GEMMs
"measure" above the fp8 peak), for Triton its one kernel (why small fp8 dots measure up to
1.9x slower than bf16). Near the crossing the two GEMMs are within the autotuner's timing
noise of each other and either may be kept: the table's boundary zig-zags there (the last k
Triton keeps alternates 512, 256, 512, 256 as the output doubles), which no hard choice
follows. `pick_share` gives how often each wins when every timing is off by the table's own
noise (`AUTOTUNE_SD`, measured, not fitted); `benchmarks/cost_vs_measured.py` weighs the two
figures by it, `gemm_compute` prices the faster. Blackwell's tcgen05 also takes 8-bit
operands mn-major: there an fp8 dot is one library kernel at `eff_8` and the common fixed
cost.

The constants (`SM90`) were fitted on XLA's measured sm_90 (H100 SXM) matmul table only, by
`benchmarks/fit_gemm_sm90.py`; other GPUs use the same constants with their own SM count,
tensor peaks and DRAM bandwidth (`devices.py`) -- no fit on them. The fixed cost is kept in
microseconds on every device (launch, prologue and epilogue latencies are similar across
recent NVIDIA GPUs). Against the table (`benchmarks/cost_vs_measured.py`): sm_90 median
predicted/measured 0.989, 93.0% within 1.25x, Spearman 0.9712 (with split-K's partials
counted twice, a write and a read back: 1.000, 93.7%, 0.9667; with one hard fp8 path
choice, 128 x 128 Triton tiles and split-K: 92.2%, 0.9535); B200, unseen, 91.9% within
1.25x, Spearman 0.9791 (partials counted twice: 95.1%, 0.9803; B200's split-K shapes
measure above the model either way, 4 to 35% by split). The constants were fitted with
the partials counted twice; refitted under one pass (all but the fp8-Triton ones, from
these) the loss moves 0.01335 -> 0.01305 with Spearman 0.9712 unchanged and the TF32 and
fp8 efficiencies at their bound 1.0, so they are kept. The table's own noise (its three fp8 type pairs run
the same kernels: log sd 0.054) caps a model at Spearman 0.994. Of the structures tried
for Triton's kernel (fp8 constants refitted each time), 128 x 128 tiles gave Spearman 0.960,
64 x 64 0.967, 32 x 32 0.945, and letting it split k 0.944. sm_90's rank error left: the
small fp8 dots (the kernels' times cross at a shape-dependent k the share only blurs) and
f32, whose autotuned configurations measure non-monotone in k (b1 256x256: 5.6, 7.4, 8.8,
6.5, 8.8 us for k = 256..4096).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hlopass.cost.devices import DeviceSpec

TILE = 128
# Triton's fp8 GEMM (below): 64 x 64 output tiles. Triton's autotuned block sizes include
# 64 and 128; of 128, 64 and 32 it is the one that ranks the sm_90 table best (module
# docstring), with the small dots it wins spread over 4x more SMs than 128 x 128 tiles
TRITON_TILE = 64
MAX_SPLIT = 16
PARTIAL_BYTES = 4  # split-K partial sums are f32


@dataclass(frozen=True)
class GemmConstants:
    """Constants of the GEMM time model (fitted on sm_90, see the module docstring)."""

    fixed_us: float  # per-kernel fixed cost (launch to first tile, epilogue, tail)
    tile_us: float  # per-wave cost of one tile beyond its flops (pipeline fill and drain)
    eff_16: float  # fraction of the bf16/f16 tensor peak a full tile's main loop reaches
    eff_tf32: float  # same for f32 operands on the TF32 path
    eff_8: float  # same for fp8 operands (the library GEMM)
    split_us: float  # extra cost of a split-K kernel (the partial-sum reduction)
    split_min_k: int  # shortest k slice worth a CTA
    aux_us: float  # fixed cost of the layout copy XLA runs beside an fp8 GEMM (fp8_aux_us)
    aux_bw: float  # fraction of DRAM bandwidth that copy (a 1-byte transpose) reaches
    mem_eff: float  # fraction of DRAM bandwidth a GEMM's operand and output traffic reaches
    rho_tf32: float  # memory/compute overlap of f32 (TF32) GEMMs (others: XLA's 0.95)
    fixed_8_us: float  # fixed cost of the fp8 library GEMM on a k-major-only GPU (Hopper)
    eff_8t: float  # fraction of the fp8 peak Triton's in-kernel-transposing fp8 GEMM reaches
    fixed_8t_us: float  # that kernel's fixed cost
    tile_8t_us: float  # and its per-wave tile cost


# Fitted by benchmarks/fit_gemm_sm90.py on XLA default_matmul_perf_table.txtpb, key sm_90
# (H100 SXM, 1,875 GEMMs) only. The library fp8 GEMM runs near the fp8 peak (0.96) but starts
# slower than bf16's (8.5 against 4.7 us); Triton's in-kernel transpose holds it to 7% of the
# fp8 peak on its 64 x 64 tiles (the table's 2^16-output dots: +1.6 us per 256 of k on 16
# tiles), with a cheaper start (5.9 us).
SM90 = GemmConstants(
    fixed_us=4.661,
    tile_us=0.7408,
    eff_16=0.8777,
    eff_tf32=0.8763,
    eff_8=0.9610,
    split_us=0.0,  # fitted to its bound: the partial sums' traffic prices split-K alone
    split_min_k=128,
    aux_us=1.679,
    aux_bw=0.6708,
    mem_eff=0.8090,
    rho_tf32=0.3064,
    fixed_8_us=8.512,
    eff_8t=0.07272,
    fixed_8t_us=5.885,
    tile_8t_us=0.0,  # fitted to its bound: its tiles' flops at eff_8t price it alone
)

# Our devices whose fp8 tensor-core instruction takes only k-major operands: Hopper's wgmma
# (PTX ISA, wgmma: for .e4m3/.e5m2 both A and B must be k-major in shared memory).
# Blackwell's tcgen05 takes them mn-major as well; Ampere and older have no fp8.
K_MAJOR_FP8 = frozenset({"h100_sxm", "h100_pcie"})


@dataclass(frozen=True)
class GemmTime:
    """The priced GEMM: compute time (µs, fixed cost included), the split-K factor, CTAs,
    and the kernel: "library" (cuBLAS) or "triton" (the fp8 GEMM transposing in-kernel)."""

    compute_us: float
    split: int
    ctas: int
    waves: int
    path: str = "library"


def is_fp8(dtype: str) -> bool:
    return dtype.startswith("f8") or dtype.startswith("f4")


def dtype_efficiency(dtype: str, c: GemmConstants) -> float:
    if is_fp8(dtype):
        return c.eff_8
    if dtype == "f32":
        return c.eff_tf32
    return c.eff_16


def _time(dev: DeviceSpec, shape: tuple[int, int, int, int], s: int, rate: float,
          fixed: float, tile_us: float, c: GemmConstants,
          size: int = TILE) -> tuple[float, int, int]:  # fmt: skip
    b, m, n, k = shape
    ctas = b * math.ceil(m / size) * math.ceil(n / size) * s
    waves = math.ceil(ctas / dev.sm_count)
    tile = tile_us + 2.0 * size * size * math.ceil(k / s) / rate * 1e6
    t = fixed + waves * tile
    if s > 1:
        # every slice adds its f32 partial tile into the output's accumulator; while the
        # partials fit in L2 that add is done there (an atomic reduction resolves in L2,
        # at XLA's L2 speedup): one pass over them, not a write and then a read back by
        # another pass. Past L2 they go out to DRAM and come back: two passes. Counting two
        # passes in L2 too put sm_90's split-K shapes 8% above their measured times (split
        # 2 and 4, bf16 and fp8 alike, where unsplit shapes sit within 2%), and the
        # table's Spearman at 0.9667 against 0.9712 (the module docstring for B200)
        partials = s * b * m * n * PARTIAL_BYTES
        in_l2 = partials < dev.l2_bytes
        bw = dev.hbm_bandwidth * (dev.l2_speedup if in_l2 else 1.0)
        t += c.split_us + (1.0 if in_l2 else 2.0) * partials / bw * 1e6
    return t, ctas, waves


def _best_split(dev: DeviceSpec, shape: tuple[int, int, int, int], rate: float, fixed: float,
                tile_us: float, c: GemmConstants, path: str, max_split: int = MAX_SPLIT,
                size: int = TILE) -> GemmTime:  # fmt: skip
    """The fastest of the split-K factors 1, 2, 4, ... (slices at least `split_min_k`,
    at most `max_split` of them) for `size` x `size` output tiles."""
    best = None
    s = 1
    while s <= max_split and (s == 1 or shape[3] / s >= c.split_min_k):
        t, ctas, waves = _time(dev, shape, s, rate, fixed, tile_us, c, size)
        if best is None or t < best.compute_us:
            best = GemmTime(t, s, ctas, waves, path)
        s *= 2
    assert best is not None
    return best


def gemm_candidates(dev: DeviceSpec, b: int, m: int, n: int, k: int, dtype: str,
                    precision: str = "default", c: GemmConstants = SM90) -> tuple[GemmTime, ...]:  # fmt: skip
    """The kernels XLA's autotuner chooses between for this dot, each at its best split-K:
    the library GEMM, and for fp8 on a k-major-only GPU also Triton's (which the table shows
    never splitting k: its time grows linearly in k at 4 output tiles, 5.6, 7.2, 10.6 us for
    k = 256, 512, 1024, where 128 idle SMs would make split-K pay)."""
    shape = (max(1, b), max(1, m), max(1, n), max(1, k))
    per_sm = dev.matrix_peak(dtype, precision) / dev.sm_count
    k_major = is_fp8(dtype) and dev.name in K_MAJOR_FP8
    fixed = c.fixed_8_us if k_major else c.fixed_us
    rate = per_sm * dtype_efficiency(dtype, c)
    lib = _best_split(dev, shape, rate, fixed, c.tile_us, c, "library")
    if not k_major:
        return (lib,)
    tri = _best_split(dev, shape, per_sm * c.eff_8t, c.fixed_8t_us, c.tile_8t_us, c, "triton",
                      1, TRITON_TILE)  # fmt: skip
    return (lib, tri)


def fixed_cost_us(dev: DeviceSpec, dtype: str, c: GemmConstants = SM90) -> float:
    """What a GEMM of `dtype` operands pays on `dev` whatever its size: the smallest fixed
    cost of the kernels `gemm_candidates` chooses between (the roofline fusion model's
    launch cost of a library GEMM)."""
    if is_fp8(dtype) and dev.name in K_MAJOR_FP8:
        return min(c.fixed_8_us, c.fixed_8t_us)
    return c.fixed_us


def gemm_compute(dev: DeviceSpec, b: int, m: int, n: int, k: int, dtype: str,
                 precision: str = "default", c: GemmConstants = SM90) -> GemmTime:  # fmt: skip
    """Compute time of `b` x (`m` x `k`) . (`k` x `n`) with `dtype` operands on `dev`,
    with the best split-K factor; fp8 on a k-major-only GPU: the faster of the library
    GEMM and Triton's (the module docstring)."""
    return min(gemm_candidates(dev, b, m, n, k, dtype, precision, c), key=lambda g: g.compute_us)


# The log standard deviation of one timing of a kernel: XLA's matmul table's own noise (its
# three fp8 type pairs run the same kernels; benchmarks/cost_vs_measured.py, noise_ceiling).
AUTOTUNE_SD = 0.054


def pick_share(times: tuple[float, ...]) -> tuple[float, ...]:
    """How often XLA's autotuner keeps each of two candidate kernels (of times `times`, µs):
    it times each once, each timing off by lognormal noise of `AUTOTUNE_SD`, and keeps the
    faster timing, so where two kernels are within the noise of each other either may win
    (the table's fp8 entries near the Triton/library crossing alternate between the two as
    the shape doubles). One candidate: always that one."""
    if len(times) == 1:
        return (1.0,)
    a, b = times
    z = math.log(b / a) / (AUTOTUNE_SD * math.sqrt(2.0))  # sd of the difference of two logs
    first = 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))
    return (first, 1.0 - first)


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


def has_fp8_copy(dev: DeviceSpec, g: GemmTime, dtype: str) -> bool:
    """Whether XLA runs the rhs layout copy (`fp8_aux_us`) beside this priced GEMM: an fp8
    library GEMM on a k-major-only GPU."""
    return is_fp8(dtype) and dev.name in K_MAJOR_FP8 and g.path == "library"


def fp8_aux_us(dev: DeviceSpec, b: int, n: int, k: int, c: GemmConstants = SM90) -> float:
    """The copy beside an fp8 library GEMM on Hopper: cuBLAS's fp8 GEMM wants the rhs
    k-minor, so XLA's layout assignment puts a copy (transpose) of the 1-byte rhs before
    the GEMM: read and write b*k*n bytes."""
    return c.aux_us + 2.0 * b * k * n / (dev.hbm_bandwidth * c.aux_bw) * 1e6
