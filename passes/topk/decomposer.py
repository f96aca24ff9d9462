"""`topk-decomposer`: a TopK back into a sort and slices (XLA's TopkDecomposer).

`topk(x), k=K` -> `tuple(slice(gte(sort(x, iota), 0)), slice(gte(sort(x, iota), 1)))`: the
iota counts along the last dimension, the sort runs there with XLA's builder comparator
(GT for the largest, LT else; a total order on floats) and each slice keeps the first K. A
`TopK` custom call (what `topk-rewriter` makes, left by `topk-specializer`) decomposes the
same way with its own comparator and the stability its backend config gives. When the
only user reads the values alone (and the comparator looks at the values only) the iota
is left out: `slice(sort(x))`.

XLA's GPU compiler runs it twice: before SPMD partitioning on `topk` instructions only
(`topk-only=true`: the TopK instructions JAX emits become sort + slice, which
`topk-rewriter` then turns into `TopK` calls), and after `topk-specializer` on what is left.

Differs from XLA: a bf16 `topk` with `largest` is decomposed like any other, not into
XLA's packed sort of s32 keys (bf16 bits with the index in the low half); both give the
same values and indices. The `topk` instruction has no `is_stable` field in our grammar:
it counts as stable (XLA's parser default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape, TupleShape
from hlopass.passes.topk.common import (
    comparator,
    is_stable_call,
    is_topk_call,
    prefix_slice,
    values_shape,
)
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    comps_by_name,
    new_op,
    replace_op,
    run_patterns,
    unfused_computations,
)


def _values_only(op: HloOp) -> HloOp | None:
    """The one user of `op` when it is `get-tuple-element(op), index=0`, else None."""
    users = [u.operation for u in op.result.uses]
    if len(users) == 1 and isinstance(users[0], HloOp):
        user = users[0]
        if user.opcode == "get-tuple-element" and user.attr("index") == 0:
            return user
    return None


def decompose(rewriter: PatternRewriter, ctx: RewriteContext, op: HloOp, compare: str,
              stable: bool, compare_arity: int) -> None:  # fmt: skip
    """Replace the TopK `op` by a sort along the last dimension and prefix slices."""
    x = op.operands[0]
    xs = x.type.data  # type: ignore[attr-defined]
    assert isinstance(xs, ArrayShape)
    last = xs.rank - 1
    attrs = {"dimensions": (last,), "is_stable": stable, "to_apply": compare}
    reader = _values_only(op)
    if reader is not None and compare_arity == 2:
        sort = new_op(rewriter, ctx, "sort", [x], xs, attrs, like=op, before=op)
        replace_op(
            rewriter, reader, prefix_slice(rewriter, ctx, sort.result, values_shape(op), op).result
        )
        rewriter.erase(op)
        return
    iota_shape = xs.with_element_type("s32")  # the operand's layout, as XLA's iota
    iota = new_op(rewriter, ctx, "iota", [], iota_shape, {"iota_dimension": last}, like=op,
                  before=op)  # fmt: skip
    sort = new_op(rewriter, ctx, "sort", [x, iota.result], TupleShape((xs, iota_shape)), attrs,
                  like=op, before=op)  # fmt: skip
    parts = []
    for index, part in enumerate(op.shape.elements):  # type: ignore[attr-defined]
        gte = new_op(rewriter, ctx, "get-tuple-element", [sort.result],
                     TupleShape((xs, iota_shape)).elements[index], {"index": index}, like=op,
                     before=op)  # fmt: skip
        parts.append(prefix_slice(rewriter, ctx, gte.result, part, op).result)
    replace_op(rewriter, op, new_op(rewriter, ctx, "tuple", parts, op.shape, like=op,
                                    before=op).result)  # fmt: skip


@dataclass
class DecomposeTopK(RewritePattern):
    """`topk(x), k=K` -> prefix slices of `sort(x, iota)` along the last dimension (of
    `sort(x)` when only the values are read), with XLA's builder comparator.

    Guards: an array operand and a (values, indices) result."""

    OPCODES: ClassVar[tuple[str, ...]] = ("topk",)

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        if not isinstance(op.shape, TupleShape) or len(op.shape.elements) != 2:
            return
        largest = op.attr("largest")
        types = [values_shape(op).element_type]
        if _values_only(op) is None:
            types.append("s32")  # XLA compares (values, indices) when the indices are read
        name = comparator(self.ctx, op, types, True if largest is None else bool(largest))
        self.ctx.note(self, op, f"k={op.attr('k')}")
        decompose(rewriter, self.ctx, op, name, True, 2 * len(types))


@dataclass
class DecomposeTopKCall(RewritePattern):
    """`custom-call(x), custom_call_target="TopK"` -> prefix slices of `sort(x, iota)` with
    the call's comparator and stability.

    Guards: one operand, a (values, indices) result, exactly one comparator, of four
    parameters (or of two when only the values are read: the sort of `x` alone)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("custom-call",)

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES or not is_topk_call(op):
            return
        callees = op.callees()
        if len(callees) != 1:
            return
        comp = comps_by_name(self.ctx.module).get(callees[0])
        if comp is None:
            return
        arity = sum(1 for o in comp.instructions if o.opcode == "parameter")
        if arity != 4 and not (arity == 2 and _values_only(op) is not None):
            return  # a sort of (x, iota) needs a comparator of four parameters
        self.ctx.note(self, op, "TopK call")
        decompose(rewriter, self.ctx, op, callees[0], is_stable_call(op), arity)


@dataclass(frozen=True)
class TopkDecomposerPass(HloModulePass):
    """Decompose TopK instructions and `TopK` custom calls into sort + slice."""

    name: ClassVar[str] = "topk-decomposer"

    topk_only: bool = False
    """Decompose `topk` instructions only, not `TopK` custom calls (XLA's pre-SPMD run,
    whose predicate is `opcode == kTopK`)."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        patterns: list[RewritePattern] = [DecomposeTopK(rctx)]
        if not self.topk_only:
            patterns.append(DecomposeTopKCall(rctx))
        comps = unfused_computations(module)
        return run_patterns(module, patterns, comps)
