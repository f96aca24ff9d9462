"""A GPU-optimized module as plain HLO XLA:CPU runs: the oracle side of the seed checks.

`plain_text(text)` replaces every `__cublas$gemm` and `__cublas$lt$matmul` custom-call by
what it computes written as ordinary instructions -- operands converted to f32, `dot`,
`alpha *`, `+ beta * c`, the epilogue (a vector bias broadcast along the output's most minor
physical dimension, `max(x, 0)` for RELU, the tanh form for GELU, the pre-activation value
as the second result of an *_AUX call), one convert back to the result type (cuBLAS
computes in f32 and rounds once) and a zero workspace -- and then applies
`tests.interp_util.xla_friendly` (fusions inlined, bitcasts lowered, layouts dropped, cuDNN
and TopK calls lowered).
Written independently of hlopass/interpreter/gpu_calls.py (which the check is about): the
semantics of the call come from XLA's GemmBackendConfig, the arithmetic from XLA:CPU.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from tests.interp_util import xla_friendly

_EPILOGUES = frozenset(("DEFAULT", "BIAS", "RELU", "BIAS_RELU", "GELU", "BIAS_GELU", "GELU_AUX",
                        "BIAS_GELU_AUX"))  # fmt: skip


_NUMPY = {"f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128,
          "s8": np.int8, "u8": np.uint8}  # fmt: skip


def _compute_type(types: list[str]) -> str:
    """cuBLAS's compute type for these A, B and output types: f32, or f64 / c64 / c128."""
    if "c128" in types or ("f64" in types and any(t.startswith("c") for t in types)):
        return "c128"
    if any(t.startswith("c") for t in types):
        return "c64"
    return "f64" if "f64" in types else "f32"


def plain_text(text: str) -> str:
    import hlopass
    from hlopass.dialects.hlo import computations

    module = hlopass.parse_hlo(text)
    for comp in computations(module):
        for op in list(comp.instructions):
            if op.opcode == "custom-call":
                target = op.attr("custom_call_target")
                # the other library calls (cuDNN, TopK) are xla_friendly's to lower; one
                # neither knows reaches XLA:CPU as it is, and XLA:CPU refuses it
                if target in ("__cublas$gemm", "__cublas$lt$matmul"):
                    _lower_gemm(op)
    return xla_friendly(hlopass.print_hlo(module))


def _config(op: Any) -> dict:
    raw = op.attr("backend_config")
    cfg = json.loads(raw if isinstance(raw, str) else raw.text)
    return cfg.get("gemm_backend_config", cfg)


def _lower_gemm(op: Any) -> None:
    from hlopass.dialects.hlo import create_op
    from hlopass.ir.attrs import ShapedLiteral
    from hlopass.ir.literal import Literal
    from hlopass.ir.shape import ArrayShape, TupleShape

    cfg = _config(op)
    epilogue = cfg.get("epilogue", "DEFAULT")
    if epilogue not in _EPILOGUES:
        raise NotImplementedError(f"epilogue {epilogue} ({op.inst_name})")
    block = op.parent_block()
    count = [0]

    def emit(opcode, operands, shape, attrs=None):
        count[0] += 1
        new = create_op(opcode, operands, shape, f"{op.inst_name}.plain{count[0]}", attrs or {})
        block.insert_op_before(new, op)
        return new.result

    shape = op.shape
    out = shape.elements[0] if isinstance(shape, TupleShape) else shape
    acc_t = _compute_type([v.type.data.element_type for v in op.operands[:2]] + [out.element_type])

    def f32(value):  # the operand in the compute type (f32 unless f64 or complex)
        shape = value.type.data
        if shape.element_type == acc_t:
            return value
        return emit("convert", [value], ArrayShape(acc_t, tuple(shape.dims)))

    def splat(x, dims, etype=acc_t):
        scalar = ArrayShape(etype, ())
        arr = np.asarray(x).astype(_NUMPY[etype])
        c = emit("constant", [], scalar, {"value": ShapedLiteral(scalar, Literal(arr))})
        return emit("broadcast", [c], ArrayShape(etype, dims), {"dimensions": ()})

    dims = tuple(out.dims)
    dn = cfg["dot_dimension_numbers"]

    def ints(key):
        return tuple(int(d) for d in dn.get(key, []))

    d = emit("dot", [f32(op.operands[0]), f32(op.operands[1])], ArrayShape(acc_t, dims),
             {"lhs_batch_dims": ints("lhs_batch_dimensions"),
              "rhs_batch_dims": ints("rhs_batch_dimensions"),
              "lhs_contracting_dims": ints("lhs_contracting_dimensions"),
              "rhs_contracting_dims": ints("rhs_contracting_dimensions")})  # fmt: skip
    f32_shape = ArrayShape(acc_t, dims)
    alpha = complex(float(cfg.get("alpha_real", 1)), float(cfg.get("alpha_imag", 0)))
    alpha = alpha if acc_t.startswith("c") else alpha.real
    if alpha != 1:
        d = emit("multiply", [d, splat(alpha, dims)], f32_shape)
    beta = float(cfg.get("beta", 0))
    if beta != 0:
        c = f32(op.operands[2])
        if beta != 1:
            c = emit("multiply", [c, splat(beta, dims)], f32_shape)
        d = emit("add", [d, c], f32_shape)
    if epilogue.startswith("BIAS"):
        bias = op.operands[len(op.operands) - 1]
        rank = len(bias.type.data.dims)
        if rank > 1:
            raise NotImplementedError(f"a rank-{rank} vector bias ({op.inst_name})")
        where = (out.minor_to_major[0],) if rank else ()
        d = emit("add", [d, emit("broadcast", [f32(bias)], f32_shape, {"dimensions": where})],
                 f32_shape)  # fmt: skip
    pre = d
    if "RELU" in epilogue:
        d = emit("maximum", [d, splat(0, dims)], f32_shape)
    if "GELU" in epilogue:
        cube = emit("multiply", [d, emit("multiply", [d, d], f32_shape)], f32_shape)
        inner = emit("add", [d, emit("multiply", [cube, splat(0.044715, dims)], f32_shape)],
                     f32_shape)  # fmt: skip
        scaled = emit("multiply", [inner, splat(float(np.sqrt(2 / np.pi)), dims)], f32_shape)
        cdf = emit("add", [emit("tanh", [scaled], f32_shape), splat(1, dims)], f32_shape)
        half = emit("multiply", [cdf, splat(0.5, dims)], f32_shape)
        d = emit("multiply", [d, half], f32_shape)

    def rounded(x):
        if out.element_type == acc_t:
            return x
        return emit("convert", [x], ArrayShape(out.element_type, dims))

    results = [rounded(d)] + ([rounded(pre)] if epilogue.endswith("_AUX") else [])
    if isinstance(shape, TupleShape):
        ws = shape.elements[len(results)]
        d = emit("tuple", [*results, splat(0, tuple(ws.dims), ws.element_type)], shape)
    else:
        d = results[0]
    op.result.replace_all_uses_with(d)
    op.detach()
    op.erase()


def seed_inputs(module: Any, seed: int = 0, scale: float = 1.0) -> list[np.ndarray]:
    """Seeded arguments for the seed training steps: `random_inputs` (index operands in
    range), then floats uniform in [0, scale) and integers reduced mod 2. The seeds are real
    training steps: Adam's beta powers and second moments need [0, 1) / non-negative values,
    class labels must be below the class count and BERT's attention masks 0 or 1
    (`-65504 * (1 - mask)` overflows f16 otherwise), else every output is NaN and the
    comparison checks nothing. Integers that were in range stay in range (0 <= a % 2 <= a).
    The f16 BERT seed needs a small `scale`: its f16 attention scores overflow (inf) when
    weights and activations are all near 1."""
    from tests.interp_util import random_inputs

    rng = np.random.default_rng(seed)
    out = []
    for a in random_inputs(module, seed):
        a = np.asarray(a)
        if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
            out.append(rng.uniform(0, scale, a.shape).astype(a.dtype))
        elif a.dtype.kind in "iu":
            out.append((a % 2).astype(a.dtype))
        else:
            out.append(a)
    return out
