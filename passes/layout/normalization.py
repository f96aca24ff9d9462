"""`layout-normalization`: data movement that only relabels memory becomes `bitcast`, and
elementwise instructions work on the physical shape (dims major to minor, size-1 dims
dropped, default layout), between bitcasts (as XLA's LayoutNormalization)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    fusion_computations,
    new_op,
    replace_op,
    replace_with_new,
    run_patterns,
)
from hlopass.shape import ArrayShape

from .layouts import (
    m2m_of,
    normalized,
    reshape_is_bitcast,
    same_layout,
    transpose_is_bitcast,
    value_shape,
)


def _arrays(op: HloOp) -> tuple[ArrayShape, ArrayShape] | None:
    src, dst = value_shape(op.operands[0]), op.shape
    if isinstance(src, ArrayShape) and isinstance(dst, ArrayShape) and not src.is_dynamic:
        return src, dst
    return None


@dataclass
class TransposeToBitcast(RewritePattern):
    """`transpose(x)` whose layouts keep the memory order -> `bitcast(x)`."""

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode != "transpose":
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

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in ("reshape", "copy"):
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

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode != "bitcast":
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


@dataclass
class CopyToPhysicalTranspose(RewritePattern):
    """`copy(x{L}){L'}` that moves elements -> `bitcast(transpose(bitcast(x)))`, the
    transpose on the physical shapes (as XLA's LayoutNormalization: it runs as a tiled
    transpose).

    Guards: array shapes of the same dims; the memory order changes."""

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode != "copy":
            return
        shapes = _arrays(op)
        if shapes is None:
            return
        src, dst = shapes
        if src.dims != dst.dims or reshape_is_bitcast(src, dst):
            return
        p_in = [d for d in reversed(m2m_of(src)) if src.dims[d] != 1]
        p_out = [d for d in reversed(m2m_of(dst)) if dst.dims[d] != 1]
        perm = tuple(p_in.index(d) for d in p_out)
        x = op.operands[0]
        flat = new_op(rewriter, self.ctx, "bitcast", [x], normalized(src), before=op)
        t = new_op(rewriter, self.ctx, "transpose", [flat.result], normalized(dst),
                   {"dimensions": perm}, like=op, before=op)  # fmt: skip
        replace_with_new(rewriter, self.ctx, op, "bitcast", [t.result])
        self.ctx.note(self, t, f"copy as transpose {perm}")


def needs_normalizing(shape: ArrayShape) -> bool:
    return shape.rank >= 1 and (
        any(d == 1 for d in shape.dims)
        and shape.rank > 1
        or list(m2m_of(shape)) != sorted(m2m_of(shape))[::-1]
    )


@dataclass
class NormalizeElementwise(RewritePattern):
    """`op{L}(x{L}, y{L})` -> `bitcast(op'(bitcast(x), bitcast(y)))` where op' works on the
    physical shape (dims major to minor, size-1 dims dropped, default layout).

    Guards: elementwise, every operand an array of the result's dims and layout, and the
    layout is not already normalized."""

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or "elementwise" not in op.spec.traits:
            return
        shape = op.shape
        if not isinstance(shape, ArrayShape) or shape.is_dynamic or not needs_normalizing(shape):
            return
        for v in op.operands:
            s = value_shape(v)
            if (
                not isinstance(s, ArrayShape)
                or s.dims != shape.dims
                or not same_layout(s.with_element_type(shape.element_type), shape)
            ):
                return
        phys = normalized(shape)
        if phys.rank == 0:
            return  # all dims of size 1: nothing to gain
        ins = []
        for v in op.operands:
            s = value_shape(v)
            assert isinstance(s, ArrayShape)
            ins.append(new_op(rewriter, self.ctx, "bitcast", [v], normalized(s), before=op).result)
        attrs = {s.name: val for s, val in op.hlo_attrs() if s.name not in ("name",)}
        inner = new_op(rewriter, self.ctx, op.opcode, ins, phys, attrs, like=op, before=op)
        replace_with_new(rewriter, self.ctx, op, "bitcast", [inner.result])
        self.ctx.note(self, inner, f"on {phys.text()}")


@dataclass(frozen=True)
class LayoutNormalizationPass(HloModulePass):
    """Turn layout-only data movement into bitcasts; elementwise ops on physical shapes."""

    name: ClassVar[str] = "layout-normalization"

    elementwise: bool = True
    """Also rewrite elementwise instructions onto their physical (normalized) shapes."""

    copies: bool = True
    """Also turn layout-changing copies into transposes of the physical shapes."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        patterns: list[RewritePattern] = [
            TransposeToBitcast(rctx), ReshapeToBitcast(rctx), FoldBitcastChain(rctx),
        ]  # fmt: skip
        if self.elementwise:
            patterns.append(NormalizeElementwise(rctx))
        if self.copies:
            patterns.append(CopyToPhysicalTranspose(rctx))
        fused = fusion_computations(module)
        from hlopass.dialects.hlo import computations

        comps = [c for c in computations(module) if c.comp_name not in fused]
        return run_patterns(module, patterns, comps)
