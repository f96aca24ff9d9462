"""`copy-elision`: remove copies that do nothing, cancel copy pairs, and move copies past
elementwise instructions toward their users where that saves copies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp, computations
from hlopass.ir.opcode_sets import with_trait
from hlopass.ir.shape import ArrayShape
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    fusion_computations,
    is_control_predecessor,
    new_op,
    replace_op,
    replace_with_new,
    run_patterns,
)

from .layouts import m2m_of, same_layout, value_shape, with_m2m


def _copy(op: Operation) -> HloOp | None:
    if (
        isinstance(op, HloOp)
        and op.opcode == "copy"
        and not is_control_predecessor(op)
        and not op.attr("control-predecessors")
    ):
        return op
    return None


@dataclass
class RemoveNoOpCopy(RewritePattern):
    """`copy(x)` with x's own layout -> `x`."""

    OPCODES: ClassVar[tuple[str, ...]] = ("copy",)

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        c = _copy(op)
        if c is None or value_shape(c.operands[0]) != c.shape:
            return
        replace_op(rewriter, c, c.operands[0])
        self.ctx.note(self, None, "copy between equal layouts removed")


@dataclass
class CancelCopyPair(RewritePattern):
    """`copy(copy(x))` -> `x` when the outer copy restores x's layout, else `copy(x)`."""

    OPCODES: ClassVar[tuple[str, ...]] = ("copy",)

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        outer = _copy(op)
        if outer is None:
            return
        inner = _copy(outer.operands[0].owner)  # type: ignore[arg-type]
        if inner is None:
            return
        x = inner.operands[0]
        if value_shape(x) == outer.shape:
            replace_op(rewriter, outer, x)
            self.ctx.note(self, None, "copy pair cancelled")
        else:
            new = replace_with_new(rewriter, self.ctx, outer, "copy", [x])
            self.ctx.note(self, new, "copy pair merged")


@dataclass
class SinkCopiesThroughElementwise(RewritePattern):
    """`op(copy(x){L}, copy(y){L})` with x, y in layout K -> `copy(op(x, y){K}){L}`: one copy
    instead of one per operand (or none once it meets a copy back to K).

    Guards: elementwise; every operand a copy used only here, all from one layout; at
    least two copies saved or the single user of `op` is a copy."""

    OPCODES: ClassVar[tuple[str, ...]] = with_trait("elementwise")

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        shape = op.shape
        if not isinstance(shape, ArrayShape) or shape.rank == 0:
            return
        sources = []
        for v in op.operands:
            c = _copy(v.owner)  # type: ignore[arg-type]
            if c is None or not c.result.has_one_use():
                return
            sources.append(c.operands[0])
        shapes = [value_shape(s) for s in sources]
        if not all(isinstance(s, ArrayShape) and s.dims == shape.dims for s in shapes):
            return
        layouts = {m2m_of(s) for s in shapes}  # type: ignore[arg-type]
        if len(layouts) != 1:
            return
        users = [u.operation for u in op.result.uses]
        if len(sources) < 2 and not (len(users) == 1 and _copy(users[0]) is not None):
            return
        (layout,) = layouts
        attrs = {s.name: val for s, val in op.hlo_attrs() if s.name != "name"}
        inner = new_op(rewriter, self.ctx, op.opcode, sources, with_m2m(shape, layout), attrs,
                       like=op, before=op)  # fmt: skip
        new = replace_with_new(rewriter, self.ctx, op, "copy", [inner.result], shape)
        self.ctx.note(self, new, f"copies moved after {inner.inst_name}")


@dataclass(frozen=True)
class CopyElisionPass(HloModulePass):
    """Remove copies between equal layouts, cancel copy pairs, sink copies to users."""

    name: ClassVar[str] = "copy-elision"

    sink: bool = True
    """Also move copies past elementwise instructions when that saves copies."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        patterns: list[RewritePattern] = [RemoveNoOpCopy(rctx), CancelCopyPair(rctx)]
        if self.sink:
            patterns.append(SinkCopiesThroughElementwise(rctx))
        fused = fusion_computations(module)
        comps = [c for c in computations(module) if c.comp_name not in fused]
        return run_patterns(module, patterns, comps)


__all__ = ["CopyElisionPass", "same_layout"]
