"""Which dots cuBLAS takes and with which types each library fuses a bias or an epilogue
(XLA's IsCublasSupportedMatMul, SupportsEpilogueFusion, TypesAreSupportedByLegacyCublas /
TypesAreSupportedByCublasLt, GemmIsSupportedByCublasLt)."""

from __future__ import annotations

from typing import Any

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape

_MATMUL_AND_VECTOR = frozenset(("f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64", "c64"))
"""Output types cuBLAS takes for matrix-matrix and matrix-vector products."""
_MATMUL_ONLY = frozenset(("f8e3m4", "f8e4m3", "f8e4m3fnuz", "f8e5m2fnuz", "c128"))
"""Output types cuBLAS takes for matrix-matrix products only."""
FP8 = frozenset(("f8e4m3fn", "f8e5m2", "f8e3m4", "f8e4m3", "f8e4m3fnuz", "f8e5m2fnuz"))

EPILOGUE_TYPES = frozenset(("f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64"))
"""Output types cublasLt fuses an epilogue for (XLA's SupportsEpilogueFusion)."""

_CUBLAS_TYPES = frozenset((
    ("f16", "f16", "f16"), ("s8", "s8", "s32"), ("bf16", "bf16", "bf16"), ("s8", "s8", "f32"),
    ("bf16", "bf16", "f32"), ("f16", "f16", "f32"), ("f32", "f32", "f32"),
    ("c64", "c64", "c64"), ("f64", "f64", "f64"), ("c128", "c128", "c128"),
))  # fmt: skip
"""(A, B, output) type combinations of cuBLAS's gemm (both libraries' tables, the compute
type left out: on CUDA it follows from these three)."""

MAX_LT_BATCH = 65535
"""cublasLt's largest batch count."""


def arr(value: SSAValue) -> ArrayShape:
    return value.type.data  # type: ignore[attr-defined]


def _operand_dims(dot: HloOp, side: int) -> tuple[list[int], list[int], list[int]]:
    """(batch, contracting, non-contracting) dimensions of one operand."""
    key = "lhs" if side == 0 else "rhs"
    batch: list[int] = list(dot.attr(f"{key}_batch_dims") or ())
    contracting: list[int] = list(dot.attr(f"{key}_contracting_dims") or ())
    rank = arr(dot.operands[side]).rank
    rest = [d for d in range(rank) if d not in batch and d not in contracting]
    return batch, contracting, rest


def cublas_supported_matmul(dot: HloOp) -> bool:
    """XLA's IsCublasSupportedMatMul (matrix-vector products allowed): one contracting
    dimension per operand, no batch dimension last, at most one non-contracting dimension,
    at least one operand a matrix, an output type cuBLAS computes."""
    matrices = 0
    for side in (0, 1):
        batch, contracting, rest = _operand_dims(dot, side)
        dims = arr(dot.operands[side]).dims
        if len(contracting) != 1 or len(rest) > 1:
            return False
        if any(d == len(dims) - 1 for d in batch):
            return False
        matrices += sum(1 for d in rest if dims[d] != 1)
    if matrices == 0:
        return False
    t = arr(dot.result).element_type
    if t in _MATMUL_AND_VECTOR:
        return True
    if t == "s32":
        return all(arr(v).element_type == "s8" for v in dot.operands)
    return t in _MATMUL_ONLY and matrices == 2


def types_supported(gemm: HloOp, out_type: str | None = None) -> bool:
    """The call's (A, B, output) types are in cuBLAS's table; `out_type`: the output type
    after fusing a bias of that type."""
    a, b = (arr(v).element_type for v in gemm.operands[:2])
    out = out_type or arr(gemm.result).element_type
    return (a, b, out) in _CUBLAS_TYPES


def lt_supported(dot: HloOp, gemm: dict[str, Any]) -> bool:
    """XLA's GemmIsSupportedByCublasLt on an H100: the types in cublasLt's table and a
    batch count below 2^16 (the c64 column limit does not apply from Ampere on)."""
    if not types_supported(dot):
        return False
    lhs = arr(dot.operands[0]).dims
    batch = [int(d) for d in gemm["dot_dimension_numbers"]["lhs_batch_dimensions"]]
    count = 1 if batch else 0
    for d in batch:
        count *= lhs[d]
    return count <= MAX_LT_BATCH
