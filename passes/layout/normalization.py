"""`layout-normalization`: every instruction XLA's LayoutNormalization handles (elementwise,
broadcast, iota, concatenate, reverse, pad, slice, reduce-window, dynamic-(update-)slice,
constant, bitcast-convert, reshape, transpose, copy, convolution) works on the physical
shapes (dims major to minor, size-1 dims kept, default layout), between bitcasts
(`normalize_ops`), visited in the order of XLA's rewrite visitor (`xla_walk`) so the module
is XLA's, bitcast pairs included. `elementwise=false` only relabels (see the option)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp, computations
from hlopass.ir.shape import ArrayShape
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    fusion_computations,
    replace_op,
    replace_with_new,
    run_patterns,
)

from .layouts import (
    reshape_is_bitcast,
    same_layout,
    transpose_is_bitcast,
    value_shape,
)
from .normalize_ops import COPY_PATTERNS, NormalizeCopy, instruction_patterns
from .xla_walk import XlaWalk


def _arrays(op: HloOp) -> tuple[ArrayShape, ArrayShape] | None:
    src, dst = value_shape(op.operands[0]), op.shape
    if isinstance(src, ArrayShape) and isinstance(dst, ArrayShape) and not src.is_dynamic:
        return src, dst
    return None


@dataclass
class TransposeToBitcast(RewritePattern):
    """`transpose(x)` whose layouts keep the memory order -> `bitcast(x)`."""

    OPCODES: ClassVar[tuple[str, ...]] = ("transpose",)

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        shapes = _arrays(op)
        if shapes is None or not transpose_is_bitcast(*shapes, op.attr("dimensions")):
            return
        new = replace_with_new(rewriter, self.ctx, op, "bitcast", [op.operands[0]])
        self.ctx.note(self, new, "transpose is a bitcast")


@dataclass
class ReshapeToBitcast(RewritePattern):
    """`reshape(x)` or `copy(x)` that keeps every element at its offset -> `bitcast(x)`.

    Guards: a copy between identical shapes is left to copy-elision."""

    OPCODES: ClassVar[tuple[str, ...]] = ("reshape", "copy")

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        shapes = _arrays(op)
        if shapes is None or shapes[0].element_type != shapes[1].element_type:
            return
        if op.opcode == "copy" and same_layout(*shapes):
            return
        if not reshape_is_bitcast(*shapes):
            return
        new = replace_with_new(rewriter, self.ctx, op, "bitcast", [op.operands[0]])
        self.ctx.note(self, new, f"{op.opcode} is a bitcast")


@dataclass
class FoldBitcastChain(RewritePattern):
    """`bitcast(bitcast(x))` -> `bitcast(x)`, and `bitcast(x)` of x's own shape -> `x`."""

    OPCODES: ClassVar[tuple[str, ...]] = ("bitcast",)

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        src = op.operands[0]
        if same_layout(value_shape(src), op.shape) and value_shape(src) == op.shape:
            replace_op(rewriter, op, src)
            self.ctx.note(self, None, "identity bitcast removed")
            return
        inner = src.owner
        if isinstance(inner, HloOp) and inner.opcode == "bitcast":
            x = inner.operands[0]
            if value_shape(x) == op.shape:
                replace_op(rewriter, op, x)
            else:
                replace_with_new(rewriter, self.ctx, op, "bitcast", [x])
            self.ctx.note(self, None, "bitcast chain folded")


LEFT_WHEN_DECLINED = frozenset({"constant", "reduce-window", "scatter"})
"""Opcodes XLA's handler leaves as they are where ours declines (a tuple or empty literal,
a variadic reduce-window; scatter, whose XLA handler needs a ScatterSimplifier after it);
any other declined instruction gets XLA's default action (`xla_walk`)."""


@dataclass(frozen=True)
class LayoutNormalizationPass(HloModulePass):
    """Instructions onto their physical shapes between bitcasts, visited in XLA's order so
    the module is the one XLA's LayoutNormalization builds (bitcast pairs are left for
    `algsimp{is-layout-sensitive=true}`, which follows it in XLA's pipelines)."""

    name: ClassVar[str] = "layout-normalization"

    elementwise: bool = True
    """Rewrite every instruction XLA's pass handles onto its physical shape. False: only
    relabel, the quick form layout assignment prices its plans with: transposes and
    reshapes that keep every offset become bitcasts, bitcast chains fold, and (with
    `copies`) layout-changing copies become transposes of the physical shapes."""

    copies: bool = True
    """Also turn layout-changing copies into transposes of the physical shapes."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        fused = fusion_computations(module)
        comps = [c for c in computations(module) if c.comp_name not in fused]
        if not self.elementwise:
            relabel: list[RewritePattern] = [
                TransposeToBitcast(rctx), ReshapeToBitcast(rctx), FoldBitcastChain(rctx),
            ]  # fmt: skip
            if self.copies:
                relabel.append(NormalizeCopy(rctx))
            return run_patterns(module, relabel, comps)
        handlers = [p for p in instruction_patterns(rctx)
                    if self.copies or not isinstance(p, COPY_PATTERNS)]  # fmt: skip

        def handle(op: HloOp, rewriter: PatternRewriter) -> bool:
            for p in handlers:
                p.match_and_rewrite(op, rewriter)
                if rewriter.has_done_action:
                    return True
            return False

        changed = False
        for comp in comps:
            changed |= XlaWalk(rctx, handle, LEFT_WHEN_DECLINED).run(comp)
        return changed
