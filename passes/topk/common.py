"""What the TopK passes share: the comparator XLA's builder makes for a sort that stands for
a TopK (`compare-greater-than` / `compare-less-than` of `xla/hlo/builder/lib/comparators`),
the stability XLA reads off a `TopK` custom call's backend config, and the shapes of a TopK
result."""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdsl.ir import Block, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from hlopass.dialects.hlo import (
    HloOp,
    create_op,
    new_return_op,
)
from hlopass.ir.attrs import SliceDim
from hlopass.ir.shape import ArrayShape, TupleShape, is_float, scalar
from hlopass.rewriting import RewriteContext, insert_computation, new_op

TOPK_TARGET = "TopK"
"""The custom call XLA's TopkRewriter makes of a sort + slice (the generic TopK)."""
GPU_TOPK_TARGET = "__gpu$TopK"
"""The custom call XLA's TopkSpecializer makes of a TopK its GPU kernel takes."""

# XLA's IsTopKStable: a TopK custom call is stable unless its backend config says otherwise.
_UNSTABLE = re.compile(r"is_stable\s*=\s*false", re.IGNORECASE)


def is_topk_call(op: HloOp, target: str = TOPK_TARGET) -> bool:
    """`op` is a custom call to `target` with one operand and a (values, indices) result."""
    if op.opcode != "custom-call" or op.attr("custom_call_target") != target:
        return False
    shape = op.shape
    return (
        len(op.operands) == 1
        and isinstance(shape, TupleShape)
        and len(shape.elements) == 2
        and all(isinstance(e, ArrayShape) for e in shape.elements)
    )


def is_stable_call(op: HloOp) -> bool:
    """XLA's IsTopKStable of a TopK custom call."""
    return not _UNSTABLE.search(str(op.attr("backend_config") or ""))


def values_shape(op: HloOp) -> ArrayShape:
    """The values part of a TopK result (instruction or custom call)."""
    shape = op.shape
    assert isinstance(shape, TupleShape) and isinstance(shape.elements[0], ArrayShape)
    return shape.elements[0]


def comparator(ctx: RewriteContext, near: HloOp, types: Sequence[str], largest: bool) -> str:
    """A new computation comparing the first two of its `2 * len(types)` scalar parameters
    (`compare(p.0.lhs, p.0.rhs)`, GT for `largest`, a total order on floats), inserted
    before `near`'s computation; XLA's CreateScalarGt/LtComputation. Returns its name."""
    block = Block()
    params: list[SSAValue] = []
    for i, t in enumerate(types):
        for j, side in enumerate(("lhs", "rhs")):
            p = create_op("parameter", [], scalar(t), ctx.names.fresh(f"p.{i}.{side}"),
                          {"number": 2 * i + j})  # fmt: skip
            block.add_op(p)
            params.append(p.results[0])
    attrs: dict[str, object] = {"direction": "GT" if largest else "LT"}
    if is_float(types[0]):
        attrs["type"] = "TOTALORDER"
    root = create_op("compare", params[:2], scalar("pred"), ctx.names.fresh("compare"), attrs)
    block.add_op(root)
    block.add_op(new_return_op(root.results[0]))
    base = "compare-greater-than" if largest else "compare-less-than"
    return insert_computation(ctx, near, base, block)


def prefix_slice(rewriter: PatternRewriter, ctx: RewriteContext, value: SSAValue,
                 shape: ArrayShape, like: HloOp) -> HloOp:  # fmt: skip
    """`slice(value)` of its first `shape.dims` elements in every dimension."""
    window = tuple(SliceDim(0, d, 1) for d in shape.dims)
    return new_op(rewriter, ctx, "slice", [value], shape, {"slice": window}, like=like,
                  before=like)  # fmt: skip
