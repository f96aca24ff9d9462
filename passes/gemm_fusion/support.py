"""What the Triton GEMM emitter supports (XLA's `legacy_triton` predicates in
`support_legacy.cc`) and when cuBLAS is left the dot (`cublas_padding_requirements`,
`matmul_utils`), for a CUDA device of compute capability `cc` (major, minor).
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape
from hlopass.kernel_structure.emitter import is_elementwise

AMPERE, HOPPER = (8, 0), (9, 0)
VOLTA = (7, 0)

_FLOATS = ("f32", "bf16", "f16", "f64")
_UNARY_FLOAT = frozenset(
    ("acos", "acosh", "asin", "asinh", "atanh", "cbrt", "ceil", "cosine", "cosh", "erf",
     "exponential", "exponential-minus-one", "floor", "log", "log-plus-one",
     "round-nearest-even", "rsqrt", "sine", "sinh", "sqrt", "tan", "tanh")
)  # fmt: skip
"""XLA's float unary list since it fuses every elementwise epilogue (openxla/xla acb7dbb,
2026-04: the inverse and hyperbolic functions and round-nearest-even joined)."""
_BINARY = frozenset(("add", "compare", "maximum", "minimum", "multiply", "subtract"))
_ALGORITHMS = frozenset(
    ("dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3", "dot_f32_f32_f32", "dot_bf16_bf16_f32",
     "dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6")
)  # fmt: skip
"""Algorithms XLA's IsDotAlgorithmSupportedByTriton accepts on CUDA."""

CUBLAS_PADDING = ((VOLTA, "s8", 4), (VOLTA, "f16", 8), (AMPERE, "bf16", 8))
"""XLA's CublasPaddingRequirements: (from compute capability, element type, multiple)."""


def arr(value: SSAValue) -> ArrayShape:
    return value.type.data  # type: ignore[attr-defined]


def unique_users(op: HloOp) -> list[Any]:
    """`op`'s users, each once (XLA's `users()`), the computation's return left out."""
    return [u for u in dict.fromkeys(x.operation for x in op.result.uses) if isinstance(u, HloOp)]


def elementwise_supported(opcode: str, element_type: str) -> bool:
    """XLA's IsTritonSupportedElementwiseUpToFloatNormalization."""
    if opcode in ("convert", "select", "clamp"):
        return True
    if element_type == "pred":
        return opcode in ("not", "and", "or", "xor", "compare")
    if opcode in ("abs", "negate") or opcode in _BINARY:
        return True
    if element_type not in _FLOATS:
        return False
    if opcode in _UNARY_FLOAT or opcode in ("atan2", "power"):
        return True
    return opcode == "divide" and element_type != "f16"


def dot_output_type_supported(t: str, cc: tuple[int, int]) -> bool:
    """XLA's IsTritonSupportedDotOutputType on CUDA."""
    if t in ("f16", "f32", "bf16", "s32"):
        return True
    if t == "f8e5m2":
        return cc >= AMPERE
    return t == "f8e4m3fn" and cc >= HOPPER


def type_supported(t: str, cc: tuple[int, int]) -> bool:
    """XLA's IsTritonSupportedDataType."""
    return dot_output_type_supported(t, cc) or t in ("pred", "s8", "s16", "s32")


def xla_elementwise(op: HloOp) -> bool:
    """XLA's IsElementwise (constants count: an elementwise op of no operands)."""
    return op.opcode == "constant" or is_elementwise(op)


def _elementwise_refusal(op: HloOp, cc: tuple[int, int]) -> str | None:
    if not type_supported(arr(op.result).element_type, cc):
        return "Unsupported output data type."
    for v in op.operands:
        t = arr(v).element_type
        if not (op.opcode == "convert" and t == "s4") and not type_supported(t, cc):
            return "Unsupported input data type."
    if op.opcode == "constant":
        return None
    if not elementwise_supported(op.opcode, arr(op.operands[0]).element_type):
        return "Unsupported elementwise operation."
    return None


def no_noncontracting_dim(dot: HloOp) -> bool:
    for side, key in ((0, "lhs"), (1, "rhs")):
        fixed = len(dot.attr(f"{key}_batch_dims") or ()) + len(
            dot.attr(f"{key}_contracting_dims") or ()
        )
        if fixed == arr(dot.operands[side]).rank:
            return True
    return False


def gemm_refusal(dot: HloOp, cc: tuple[int, int]) -> str | None:
    """XLA's CanTritonHandleGEMM (TensorFloat-32 taken as enabled, XLA's default)."""
    algorithm = dot.attr("algorithm")
    if algorithm in (None, "unset", "alg_unset"):
        if any(p != "default" for p in dot.attr("operand_precision") or ()):
            return (
                "Having non-default operand precisions or TensorFloat-32 disabled for Dot op "
                "with unset algorithm."
            )
    elif algorithm not in _ALGORITHMS:
        return f"Unsupported algorithm on the current device(s): {algorithm}"
    out = arr(dot.result).element_type
    lhs, rhs = arr(dot.operands[0]).element_type, arr(dot.operands[1]).element_type
    if not dot_output_type_supported(out, cc):
        return "Unsupported output data type for Dot op."
    if not type_supported(lhs, cc) or not type_supported(rhs, cc):
        return "Unsupported input data type for Dot op."
    if out == "s32" and not (lhs in ("s8", "u8") and rhs in ("s8", "u8")):
        return "Currently, S32 output is only supported for 8-bit integral inputs."
    if len(dot.attr("lhs_batch_dims") or ()) > 1:
        return "Multiple batch dimensions."
    return None


def dynamic_slice_refusal(op: HloOp) -> str | None:
    """XLA's IsTritonSupportedDynamicSlice: s8/s16/s32 indices, only the major-most
    dimension sliced."""
    if any(arr(v).element_type not in ("s8", "s16", "s32") for v in op.operands[1:]):
        return "Dynamic slice is only supported with S8, S16, or S32 indices."
    src = arr(op.operands[0])
    major = src.minor_to_major[-1] if src.rank else -1
    sizes = op.attr("dynamic_slice_sizes")
    if any(d != major and src.dims[d] != sizes[d] for d in range(src.rank)):
        return "Unsupported dynamic slice on non-major-most dimension."
    return None


def triton_refusal(op: HloOp, cc: tuple[int, int]) -> str | None:
    """XLA's legacy IsTritonSupportedInstruction: None when supported, else why not."""
    if xla_elementwise(op):
        return _elementwise_refusal(op, cc)
    opc = op.opcode
    if opc == "dot":
        if no_noncontracting_dim(op):
            return "No non-contracting dimensions."
        return gemm_refusal(op, cc)
    if opc == "tuple":
        return "Only supports root tuples."  # (a fused tuple is never the root here)
    if opc == "dynamic-slice":
        return dynamic_slice_refusal(op)
    if opc in ("bitcast", "transpose", "slice", "reshape", "pad", "concatenate", "parameter",
               "broadcast"):  # fmt: skip
        return None
    return "Unsupported opcode."


def cublas_requires_padding(dot: HloOp, cc: tuple[int, int]) -> bool:
    """XLA's CublasRequiresPadding: an operand's last two dimensions not a multiple of
    what cuBLAS needs for its type."""
    for v in dot.operands[:2]:
        s = arr(v)
        for size in s.dims[-2:]:
            for since, t, multiple in CUBLAS_PADDING:
                if cc >= since and s.element_type == t and size % multiple:
                    return True
    return False


def matmul_too_small(dot: HloOp, threshold: int) -> bool:
    """XLA's IsMatrixMultiplicationTooSmallForRewriting: (lhs non-contracting + rhs
    non-contracting elements) x contracting elements below `threshold`."""
    sizes = []
    for side, key in ((0, "lhs"), (1, "rhs")):
        s = arr(dot.operands[side])
        fixed = set(dot.attr(f"{key}_batch_dims") or ()) | set(
            dot.attr(f"{key}_contracting_dims") or ()
        )
        n = 1
        for d in range(s.rank):
            if d not in fixed:
                n *= s.dims[d]
        sizes.append(n)
    k = 1
    for d in dot.attr("lhs_contracting_dims") or ():
        k *= arr(dot.operands[0]).dims[d]
    return (sizes[0] + sizes[1]) * k < threshold


def classical_emitters_support(dot: HloOp) -> bool:
    """XLA's IsDotSupportedByClassicalEmitters: float outputs only."""
    return arr(dot.result).element_type in ("f16", "f32", "bf16")
