"""The tanh-approximated GELU that `gemm-rewriter` folds into a cublasLt call (XLA's
approximate-GELU match in HandleMultiply and FuseGeluActivation):
`x * (0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * (x * (x * x))))))` with x the call."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import HloOp, create_op
from hlopass.ir.shape import TupleShape
from hlopass.rewriting import RewriteContext, const_array, replace_op

from .calls import new_call, owner, users
from .config import LT, gemm_config, is_gemm
from .support import EPILOGUE_TYPES, arr

_EPS = {"f16": float(np.finfo(np.float16).eps), "f32": float(np.finfo(np.float32).eps),
        "f64": float(np.finfo(np.float64).eps), "bf16": 2.0**-7}  # fmt: skip
"""Machine epsilon per type: a constant within 128 of them (relative) counts as near."""


def _bcast_scalar(value: SSAValue, expected: float, near: bool) -> bool:
    """`value` is `broadcast(constant c)`, c == expected (or near it, XLA's
    BcastConstScalarNear)."""
    b = owner(value)
    if b is None or b.opcode != "broadcast":
        return False
    c = owner(b.operands[0])
    if c is None or c.opcode != "constant" or arr(c.result).dims:
        return False
    v = const_array(c.result)
    if v is None or v.dtype.kind not in "fiu":
        return False
    x = float(v.item())
    if not near:
        return x == expected
    eps = _EPS.get(arr(c.result).element_type)
    return eps is not None and abs(x - expected) < abs(x + expected) * 128 * eps


def _binary(value: SSAValue, opcode: str, one_user: bool = True) -> HloOp | None:
    op = owner(value)
    if op is None or op.opcode != opcode or (one_user and len(users(op)) != 1):
        return None
    return op


def _other(op: HloOp, match) -> SSAValue | None:
    """The operand of binary `op` left when the other satisfies `match` (either order)."""
    for i in (0, 1):
        if match(op.operands[i]):
            return op.operands[1 - i]
    return None


def is_gelu_cdf(cdf: SSAValue, x: SSAValue) -> bool:
    """`cdf` is `0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * (x * (x * x)))))`, every
    inner instruction used once (XLA's matcher, operands in any order)."""
    m = owner(cdf)
    if m is None or m.opcode != "multiply":
        return False
    s = _other(m, lambda v: _bcast_scalar(v, 0.5, False))
    a = _binary(s, "add") if s is not None else None
    t = _other(a, lambda v: _bcast_scalar(v, 1.0, False)) if a is not None else None
    tanh = _binary(t, "tanh") if t is not None else None
    m2 = _binary(tanh.operands[0], "multiply") if tanh is not None else None
    inner = _other(m2, lambda v: _bcast_scalar(v, math.sqrt(2 / math.pi), True)) if m2 else None
    a2 = _binary(inner, "add") if inner is not None else None
    cube_scaled = _other(a2, lambda v: v == x) if a2 is not None else None
    m3 = _binary(cube_scaled, "multiply") if cube_scaled is not None else None
    cube = _other(m3, lambda v: _bcast_scalar(v, 0.044715, True)) if m3 is not None else None
    m4 = _binary(cube, "multiply") if cube is not None else None
    square = _other(m4, lambda v: v == x) if m4 is not None else None
    m5 = _binary(square, "multiply") if square is not None else None
    return m5 is not None and m5.operands[0] == x and m5.operands[1] == x


@dataclass
class FuseGelu(RewritePattern):
    """`multiply(x, gelu_cdf(x))` with x = `lt_matmul(a, b)` -> `lt_matmul(a, b)`, epilogue
    GELU (BIAS -> BIAS_GELU); with users of x besides the GELU's four, the *_AUX form,
    whose second output is x.

    Guards: a cublasLt call with an output type with epilogues and a DEFAULT or BIAS
    epilogue; the cdf used once."""

    OPCODES: ClassVar[tuple[str, ...]] = ("multiply",)

    ctx: RewriteContext

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        for i in (0, 1):
            gemm, cdf = owner(op.operands[i]), op.operands[1 - i]
            cdf_op = owner(cdf)
            if not is_gemm(gemm, (LT,)) or cdf_op is None or len(users(cdf_op)) != 1:
                continue
            assert gemm is not None
            if is_gelu_cdf(cdf, gemm.result):
                self._fuse(op, gemm, rewriter)
                return

    def _fuse(self, mul: HloOp, gemm: HloOp, rewriter: PatternRewriter) -> None:
        if arr(gemm.result).element_type not in EPILOGUE_TYPES:
            return
        aux = len(users(gemm)) > 4
        g = gemm_config(gemm)
        epilogue = {"DEFAULT": "GELU", "BIAS": "BIAS_GELU"}.get(g["epilogue"])
        if epilogue is None:
            return
        g["epilogue"] = epilogue + ("_AUX" if aux else "")
        shape = TupleShape((gemm.shape, gemm.shape)) if aux else gemm.shape
        # before the old call: its other users (the aux output's) may come before `mul`
        new = new_call(rewriter, self.ctx, gemm, LT, list(gemm.operands), shape, g)
        self.ctx.note(self, mul, f"epilogue {g['epilogue']}")
        if not aux:
            replace_op(rewriter, mul, new.result)
            return
        parts = []
        for index, like in ((0, mul), (1, gemm)):
            gte = create_op("get-tuple-element", [new.result], gemm.shape,
                            self.ctx.names.fresh("get-tuple-element"), {"index": index})  # fmt: skip
            rewriter.insert(gte, InsertPoint.before(gemm))
            parts.append((like, gte))
        replace_op(rewriter, mul, parts[0][1].result)
        rewriter.replace_all_uses_with(gemm.result, parts[1][1].result)
        rewriter.erase(gemm)
