"""How many pieces XLA's SplitkRewriter splits a dot's contraction into: the candidate
(1, 2, 4, .. 2048) its analytic cost (`gemm_cost_after_split`: tile waves of the GEMM, its
DRAM traffic, and for a split the extra reduction kernel) makes cheapest, the first on a tie.
The weights are XLA's per-generation fits (Blackwell, Hopper, earlier)."""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ELEMENT_BITS, ArrayShape
from hlopass.kernel_structure.emitter import is_elementwise

CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
M_TILE = N_TILE = 128
"""XLA's kMTileSize, kNTileSize: the output tile the cost assumes."""

_WEIGHTS = {
    # (compute, memory, reduction memory, reduction launch overhead): XLA's fits
    "blackwell": (100.0, 0.0848863, 189.711, 1.21563e08),
    "hopper": (100.0, 0.194136, 193.1384, 4.36e07),
    "earlier": (100.0, 0.0666955, 467.815, 5.65307e07),
}
_FLOPS_PER_ELEMENT = {
    "dot_bf16_bf16_f32_x3": 12, "dot_tf32_tf32_f32_x3": 12, "dot_bf16_bf16_f32_x6": 20,
    "dot_bf16_bf16_f32_x9": 28,
}  # fmt: skip
"""Flops per multiply-add of the multi-pass algorithms (XLA's GetAlgoritmFlopsPerElement);
every other dot: 2."""


def accumulator_type(dot: HloOp) -> str:
    """XLA's GetGemmAccumulatorType: the algorithm's accumulator where one is named, else
    f32 for floats of at most 32 bits, else the result type."""
    algorithm = dot.attr("algorithm")
    if isinstance(algorithm, str) and algorithm.startswith("dot_"):
        parts = algorithm.split("_")
        last = parts[-1] if not parts[-1].startswith("x") else parts[-2]
        if last in ELEMENT_BITS:
            return last
    t = dot.shape.element_type  # type: ignore[attr-defined]
    return "f32" if t in ("f32", "bf16", "f16", "tf32") or t.startswith("f8") else t


@dataclass(frozen=True)
class DotDims:
    """XLA's DotDimensions: sizes b, m, n, k and the bits of each side (read through the
    unary elementwise chain above it, what fusion would pull in), accumulator and result."""

    b: int
    m: int
    n: int
    k: int
    lhs_bits: int
    rhs_bits: int
    acc_bits: int
    out_bits: int
    flops_per_element: int


def _side_bits(value) -> int:
    op = value.owner
    while isinstance(op, HloOp) and is_elementwise(op) and len(op.operands) == 1:
        op = op.operands[0].owner
    shape = value.type.data if not isinstance(op, HloOp) else op.shape
    return ELEMENT_BITS[shape.element_type]  # type: ignore[attr-defined]


def dot_dims(dot: HloOp) -> DotDims:
    lhs: ArrayShape = dot.operands[0].type.data  # type: ignore[attr-defined]
    rhs: ArrayShape = dot.operands[1].type.data  # type: ignore[attr-defined]

    def product(shape: ArrayShape, dims) -> int:
        out = 1
        for d in dims:
            out *= shape.dims[d]
        return out

    lb, lc = tuple(dot.attr("lhs_batch_dims") or ()), tuple(dot.attr("lhs_contracting_dims") or ())
    rb, rc = tuple(dot.attr("rhs_batch_dims") or ()), tuple(dot.attr("rhs_contracting_dims") or ())
    return DotDims(
        product(lhs, lb),
        product(lhs, [d for d in range(lhs.rank) if d not in lb and d not in lc]),
        product(rhs, [d for d in range(rhs.rank) if d not in rb and d not in rc]),
        product(lhs, lc),
        _side_bits(dot.operands[0]), _side_bits(dot.operands[1]),
        ELEMENT_BITS[accumulator_type(dot)], ELEMENT_BITS[dot.shape.element_type],  # type: ignore[attr-defined]
        _FLOPS_PER_ELEMENT.get(str(dot.attr("algorithm")), 2),
    )  # fmt: skip


def weights(cc: tuple[int, int]) -> tuple[float, float, float, float]:
    return _WEIGHTS["blackwell" if cc >= (10, 0) else "hopper" if cc >= (9, 0) else "earlier"]


def gemm_cost_after_split(g: DotDims, split: int, cores: int, cc: tuple[int, int]) -> float:
    """XLA's EstimateGemmCostAfterSplitK (arbitrary units: only compared)."""
    compute_w, memory_w, reduction_w, launch = weights(cc)
    k, batch = ceil(g.k / split), g.b * split
    m_tile, n_tile = min(g.m, M_TILE), min(g.n, N_TILE)
    tiles = batch * ceil(g.m / M_TILE) * ceil(g.n / N_TILE)
    slots = cores * (M_TILE * N_TILE) / (m_tile * n_tile)
    waves = max(1.0, tiles / slots)
    compute = g.flops_per_element * m_tile * n_tile * k * waves * compute_w
    reads = g.m * g.k * g.b * g.lhs_bits / 8.0 + g.n * g.k * g.b * g.rhs_bits / 8.0
    writes = g.m * g.n * batch * (g.acc_bits if split > 1 else g.out_bits) / 8.0
    cost = max(compute, (reads + writes) * memory_w)
    if split == 1:
        return cost
    reduction = batch * g.m * g.n * g.acc_bits / 8.0 + g.b * g.m * g.n * g.out_bits / 8.0
    return cost + launch + reduction * reduction_w


def choose_split(dot: HloOp, cores: int, cc: tuple[int, int]) -> int:
    """XLA's ChooseSplitK: the cheapest candidate, the smallest on a tie."""
    g = dot_dims(dot)
    costs = [gemm_cost_after_split(g, s, cores, cc) for s in CANDIDATES]
    return CANDIDATES[costs.index(min(costs))]


def padded_k(dot: HloOp, split: int) -> int:
    """XLA's GetPaddedK: K rounded up to a multiple of `split` pieces of 16 bytes each."""
    g = dot_dims(dot)
    smallest = min(128, g.lhs_bits, g.rhs_bits)
    step = split * 128 // smallest
    return -(-g.k // step) * step
