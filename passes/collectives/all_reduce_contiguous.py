"""`all-reduce-contiguous` (XLA's AllReduceContiguous): an all-reduce of several arrays
becomes one all-reduce of a single contiguous buffer.

Each operand is bitcast to 1-D and the pieces concatenated; one all-reduce runs over the
concatenation, and each result is its slice, bitcast back to the operand's shape (what
TensorFlow's `pack_range` / `unpack_grad_tuple` did by hand). The reduction is elementwise,
so every element is reduced with the same partners in the same order: outputs are the same
bits. Nothing changes in a module holding any layout-constrained all-reduce.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp, computations
from hlopass.ir.attrs import SliceDim
from hlopass.ir.shape import ArrayShape, array
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    fusion_computations,
    new_op,
    replace_op,
    run_patterns,
)

_KEPT = ("channel_id", "replica_groups", "use_global_device_ids", "to_apply",
         "frontend_attributes", "backend_config", "statistics")  # fmt: skip
"""What the new all-reduce takes over (XLA: the collective's fields, and what
`SetupDerivedInstruction` copies); constrain_layout is dropped (it is false here)."""


@dataclass
class ContiguousAllReduce(RewritePattern):
    """`all-reduce(a, b, ...)` -> `tuple(bitcast(slice(all-reduce(concatenate(bitcast(a),
    bitcast(b), ...)))), ...)`: one all-reduce over the operands packed into 1-D.

    Guards: more than one operand, every operand an array of one element type (XLA packs
    into the first operand's type), no sharding (XLA refuses one)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("all-reduce",)

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.OPCODE not in self.OPCODES or len(op.operands) < 2:
            return
        shapes = [v.type.data for v in op.operands]  # type: ignore[attr-defined]
        if not all(isinstance(s, ArrayShape) for s in shapes) or op.attr("sharding"):
            return
        et = shapes[0].element_type
        if any(s.element_type != et for s in shapes):
            return
        flat = [
            new_op(
                rewriter, self.ctx, "bitcast", [v], array(et, (s.num_elements,)), None, op
            ).result
            for v, s in zip(op.operands, shapes, strict=True)
        ]
        total = sum(s.num_elements for s in shapes)
        whole = array(et, (total,))
        concat = new_op(rewriter, self.ctx, "concatenate", flat, whole, {"dimensions": (0,)}, op)
        attrs = {k: op.attr(k) for k in _KEPT if op.attr(k) is not None}
        reduced = new_op(rewriter, self.ctx, "all-reduce", [concat.result], whole, attrs, op)
        outs, offset = [], 0
        for s in shapes:
            end = offset + s.num_elements
            piece = new_op(rewriter, self.ctx, "slice", [reduced.result], array(et, (s.num_elements,)),
                           {"slice": (SliceDim(offset, end, 1),)}, op)  # fmt: skip
            outs.append(new_op(rewriter, self.ctx, "bitcast", [piece.result], s, None, op).result)
            offset = end
        tup = new_op(rewriter, self.ctx, "tuple", outs, op.shape)
        self.ctx.note(self, op, f"{len(shapes)} operands packed into {whole}")
        replace_op(rewriter, op, tup.result)


def has_constrained_all_reduce(module: ModuleOp) -> bool:
    """XLA's `ContainsLayoutConstrainedAllReduce`."""
    return any(
        op.OPCODE == "all-reduce" and op.attr("constrain_layout")
        for comp in computations(module)
        for op in comp.instructions
    )


@dataclass(frozen=True)
class AllReduceContiguousPass(HloModulePass):
    """Replace each all-reduce of several arrays with one all-reduce of their 1-D
    concatenation, sliced and bitcast back."""

    name: ClassVar[str] = "all-reduce-contiguous"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        if has_constrained_all_reduce(module):
            return False
        rctx = RewriteContext.of(module, trace)
        fused = fusion_computations(module)
        comps = [c for c in computations(module) if c.comp_name not in fused]
        return run_patterns(module, [ContiguousAllReduce(rctx)], comps)
