"""A matrix bias added after a bitcast of the call (batched dots between rank-2 and
higher-rank shapes): XLA's HandleAdd moves the add before the bitcast, so the bias folds in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.rewriting import RewriteContext, new_op, replace_op

from .calls import ALIAS_BIAS, new_call, owner, users
from .config import gemm_config, is_gemm
from .support import arr, types_supported


@dataclass
class FuseBitcastMatrixBias(RewritePattern):
    """`add(bitcast(gemm(a, b)), c)` -> `bitcast(gemm(a, b, bitcast(c)))`, beta 1.

    Guards: c not a broadcast, of the add's type (no mixed types through a bitcast); the
    call and the bitcast with one user each; the call's beta 0, a DEFAULT or BIAS epilogue,
    not s32, its types in cuBLAS's table. The bitcast of c is a new value, so legacy cuBLAS
    may write over it (as in XLA)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("add",)

    ctx: RewriteContext

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        for i in (0, 1):
            bc, bias = owner(op.operands[i]), op.operands[1 - i]
            gemm = owner(bc.operands[0]) if bc is not None and bc.opcode == "bitcast" else None
            b = owner(bias)
            if gemm is None or not is_gemm(gemm) or b is None or b.opcode == "broadcast":
                continue
            assert bc is not None
            if len(users(gemm)) != 1 or len(users(bc)) != 1:
                continue
            out = arr(gemm.result)
            g = gemm_config(gemm)
            if arr(bias).element_type != out.element_type or out.element_type == "s32":
                continue
            if float(g["beta"]) != 0 or g["epilogue"] not in ("DEFAULT", "BIAS"):
                continue
            if not types_supported(gemm):
                continue
            g["beta"] = 1
            c = new_op(rewriter, self.ctx, "bitcast", [bias], out, like=b, before=op)
            operands = list(gemm.operands)
            operands.insert(2, c.result)
            target = gemm.attr("custom_call_target")
            alias = ALIAS_BIAS  # the new bitcast has one user and is no parameter
            call = new_call(rewriter, self.ctx, gemm, target, operands, gemm.shape, g, alias, op)
            back = new_op(
                rewriter, self.ctx, "bitcast", [call.result], op.shape, like=op, before=op
            )
            self.ctx.note(self, op, "beta 1 through a bitcast")
            replace_op(rewriter, op, back.result)
            return
