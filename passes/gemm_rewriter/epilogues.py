"""What `gemm-rewriter` folds into a cuBLAS call after the dot became one: a constant scale
(alpha), a matrix bias (beta = 1), and for cublasLt a vector bias, ReLU and tanh-GELU
epilogues (XLA's HandleMultiply, HandleAdd, HandleMaximum and their Fuse* helpers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.rewriting import RewriteContext, const_array, replace_op

from .calls import ALIAS_BIAS, can_overwrite, new_call, owner, users
from .config import GEMM, LT, gemm_config, is_gemm, n_col_dims
from .support import EPILOGUE_TYPES, arr, types_supported


def _scalar_broadcast(value: SSAValue) -> HloOp | None:
    """The scalar constant `value` broadcasts (`broadcast(constant)`), else None."""
    b = owner(value)
    if b is None or b.opcode != "broadcast":
        return None
    c = owner(b.operands[0])
    if c is None or c.opcode != "constant" or arr(c.result).dims:
        return None
    return c


def _pair(op: HloOp, want) -> tuple[HloOp, SSAValue] | None:
    """(the operand `want` accepts, the other operand), either order (XLA's *AnyOrder)."""
    for i in (0, 1):
        x = owner(op.operands[i])
        if x is not None and want(x):
            return x, op.operands[1 - i]
    return None


def _replace(rewriter: PatternRewriter, gemm: HloOp, root: HloOp, new: HloOp) -> None:
    """`new` takes the place of `root` (the instruction the epilogue ended in); the old
    call goes with it."""
    replace_op(rewriter, root, new.result)
    if gemm.parent is not None and not users(gemm) and gemm.result.first_use is None:
        rewriter.erase(gemm)


@dataclass
class FoldAlpha(RewritePattern):
    """`multiply(gemm(a, b), broadcast(c))` -> `gemm(a, b)` with alpha *= c.

    Guards: c a scalar constant; gemm and broadcast with one user each; beta 0; not an
    s32 gemm (cuBLAS fixes its alpha)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("multiply",)

    ctx: RewriteContext

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        for i in (0, 1):
            gemm, scale = owner(op.operands[i]), op.operands[1 - i]
            c = _scalar_broadcast(scale)
            bcast = owner(scale)
            if not is_gemm(gemm) or c is None or bcast is None:
                continue
            assert gemm is not None
            if len(users(gemm)) != 1 or len(users(bcast)) != 1:
                continue
            g = gemm_config(gemm)
            value = const_array(c.result)
            if arr(gemm.result).element_type == "s32" or float(g["beta"]) != 0 or value is None:
                continue
            alpha = complex(float(g["alpha_real"]), float(g["alpha_imag"])) * complex(value.item())
            g["alpha_real"], g["alpha_imag"] = alpha.real, alpha.imag
            target = gemm.attr("custom_call_target")
            new = new_call(
                rewriter, self.ctx, gemm, target, list(gemm.operands), gemm.shape, g, before=op
            )
            self.ctx.note(self, op, f"alpha {alpha.real:g}")
            _replace(rewriter, gemm, op, new)
            return


@dataclass
class FuseMatrixBias(RewritePattern):
    """`add(gemm(a, b), c)` (or `add(convert(gemm(a, b)), c)`) -> `gemm(a, b, c)`, beta 1.

    Guards: c not a broadcast, of the call's shape; the call with one user, beta 0, a
    DEFAULT or BIAS epilogue, not s32; the types (c's as the output's) in cuBLAS's table; a
    mixed-type add only as the computation's result; legacy cuBLAS writes into c, so only
    where c can be overwritten (its only user the add, no parameter unless aliased)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("add",)

    ctx: RewriteContext

    def _gemm_side(self, x: HloOp) -> HloOp | None:
        if is_gemm(x) and len(users(x)) == 1:
            return x
        if x.opcode == "convert" and len(users(x)) == 1:
            g = owner(x.operands[0])
            if is_gemm(g) and len(users(g)) == 1:  # type: ignore[arg-type]
                return g
        return None

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        for i in (0, 1):
            x, bias = owner(op.operands[i]), op.operands[1 - i]
            gemm = self._gemm_side(x) if x is not None else None
            b = owner(bias)
            if gemm is None or b is None or b.opcode == "broadcast":
                continue
            if self._fuse(op, gemm, bias, rewriter):
                return

    def _fuse(self, add: HloOp, gemm: HloOp, bias: SSAValue, rewriter: PatternRewriter) -> bool:
        out_t, bias_t = arr(gemm.result).element_type, arr(bias).element_type
        if not types_supported(gemm, bias_t):
            return False
        root_like = not users(add) or (
            len(users(add)) == 1 and users(add)[0].opcode == "tuple" and not users(users(add)[0])
        )
        if bias_t != out_t and not root_like:
            return False
        if arr(bias).dims != arr(gemm.result).dims or out_t == "s32":
            return False
        overwrite = can_overwrite(bias)
        target = gemm.attr("custom_call_target")
        g = gemm_config(gemm)
        if float(g["beta"]) != 0 or g["epilogue"] not in ("DEFAULT", "BIAS"):
            return False
        if not (target == LT or overwrite):
            return False
        g["beta"] = 1
        operands = list(gemm.operands)
        operands.insert(2, bias)
        shape = arr(gemm.result).with_element_type(bias_t)
        alias = ALIAS_BIAS if target == GEMM or overwrite else None
        new = new_call(rewriter, self.ctx, gemm, target, operands, shape, g, alias, add)
        self.ctx.note(self, add, "beta 1")
        _replace(rewriter, gemm, add, new)
        return True


@dataclass
class FuseVectorBias(RewritePattern):
    """`add(lt_matmul(a, b), broadcast(v))` -> `lt_matmul(a, b, v)`, epilogue BIAS.

    Guards: a cublasLt call with one user and a DEFAULT epilogue, an output type with
    epilogues; v has the output's column dimensions (at most one), broadcast along the
    output's most minor physical dimension."""

    OPCODES: ClassVar[tuple[str, ...]] = ("add",)

    ctx: RewriteContext

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        for i in (0, 1):
            gemm, bcast = owner(op.operands[i]), owner(op.operands[1 - i])
            if not is_gemm(gemm, (LT,)) or bcast is None or bcast.opcode != "broadcast":
                continue
            assert gemm is not None
            if self._fuse(op, gemm, bcast, rewriter):
                return

    def _fuse(self, add: HloOp, gemm: HloOp, bcast: HloOp, rewriter: PatternRewriter) -> bool:
        out = arr(gemm.result)
        if out.element_type not in EPILOGUE_TYPES or len(users(gemm)) != 1:
            return False
        g = gemm_config(gemm)
        cols = n_col_dims(gemm, g)
        bias = bcast.operands[0]
        if g["epilogue"] != "DEFAULT" or cols > 1 or arr(bias).rank != cols:
            return False
        if cols == 1:
            minor = out.minor_to_major[0]
            # the broadcast must put v along that dimension (XLA checks the size only)
            if tuple(bcast.attr("dimensions") or ()) != (minor,):
                return False
            if arr(bias).dims[0] != out.dims[minor]:
                return False
        if arr(bias).element_type != out.element_type:
            return False
        g["epilogue"] = "BIAS"
        new = new_call(
            rewriter, self.ctx, gemm, LT, [*gemm.operands, bias], gemm.shape, g, before=add
        )
        self.ctx.note(self, add, "epilogue BIAS")
        _replace(rewriter, gemm, add, new)
        return True


@dataclass
class FuseRelu(RewritePattern):
    """`maximum(lt_matmul(a, b), broadcast(0))` -> `lt_matmul(a, b)`, epilogue RELU (BIAS
    -> BIAS_RELU).

    Guards: a cublasLt call with one user, an output type with epilogues, a DEFAULT or
    BIAS epilogue."""

    OPCODES: ClassVar[tuple[str, ...]] = ("maximum",)

    ctx: RewriteContext

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        for i in (0, 1):
            gemm = owner(op.operands[i])
            c = _scalar_broadcast(op.operands[1 - i])
            if not is_gemm(gemm, (LT,)) or c is None:
                continue
            assert gemm is not None
            value = const_array(c.result)
            if value is None or value.item() != 0 or len(users(gemm)) != 1:
                continue
            if arr(gemm.result).element_type not in EPILOGUE_TYPES:
                return
            g = gemm_config(gemm)
            epilogue = {"DEFAULT": "RELU", "BIAS": "BIAS_RELU"}.get(g["epilogue"])
            if epilogue is None:
                return
            g["epilogue"] = epilogue
            new = new_call(
                rewriter, self.ctx, gemm, LT, list(gemm.operands), gemm.shape, g, before=op
            )
            self.ctx.note(self, op, f"epilogue {epilogue}")
            _replace(rewriter, gemm, op, new)
            return
