"""Building and replacing instructions with a `PatternRewriter`: new instructions named
`opcode.N`, constants and splats, replacing an instruction and erasing what became dead."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import (
    ComputationOp,
    HloOp,
    computations,
    create_op,
    new_computation_op,
)
from hlopass.ir.attrs import ShapedLiteral
from hlopass.ir.literal import Literal, numpy_dtype
from hlopass.ir.shape import ArrayShape, Shape, scalar
from hlopass.rewriting.context import RewriteContext
from hlopass.rewriting.effects import is_removable
from hlopass.rewriting.lookup import is_hlo, module_of


def new_op(
    rewriter: PatternRewriter,
    ctx: RewriteContext,
    opcode: str,
    operands: Sequence[SSAValue],
    shape: Shape,
    attrs: dict[str, Any] | None = None,
    like: HloOp | None = None,
    before: Operation | None = None,
) -> HloOp:
    """Create and insert an instruction named `opcode.N` (metadata copied from `like`)."""
    a = dict(attrs or {})
    if like is not None:
        md = like.attr("metadata")
        if md is not None and "metadata" not in a:
            a["metadata"] = md
    op = create_op(opcode, list(operands), shape, ctx.names.fresh(opcode), a)
    rewriter.insert(op, InsertPoint.before(before) if before is not None else None)
    return op


def insert_computation(ctx: RewriteContext, near: HloOp, base: str, block: Block) -> str:
    """Make `block` (a fresh one, ending in its return) a new computation named `base` (or
    `base.N` where a computation has that name), inserted just before the computation
    holding `near`: a reducer or comparator is declared before its users, as XLA prints
    them. Returns its name."""
    module = module_of(near)
    host = near.parent_op()
    assert module is not None and isinstance(host, ComputationOp)
    mblock = host.parent_block()
    assert mblock is not None
    name = ctx.names.fresh_outside(base, {c.comp_name for c in computations(module)})
    mblock.insert_op_before(new_computation_op(name, block), host)
    return name


def constant_from_numpy(
    rewriter: PatternRewriter,
    ctx: RewriteContext,
    value: np.ndarray | float | int | bool,
    shape: ArrayShape,
    before: Operation | None = None,
    name: str = "constant",
) -> HloOp:
    """Insert `constant` of `shape` holding `value` (converted to the element type)."""
    arr = np.asarray(value).astype(numpy_dtype(shape.element_type))
    arr = np.broadcast_to(arr, shape.dims).copy() if arr.shape != shape.dims else arr
    op = create_op(
        "constant", [], shape, ctx.names.fresh(name),
        {"value": ShapedLiteral(shape, Literal(arr))},
    )  # fmt: skip
    rewriter.insert(op, InsertPoint.before(before) if before is not None else None)
    return op


def scalar_constant(
    rewriter: PatternRewriter, ctx: RewriteContext, value: object, element_type: str,
    before: Operation | None = None,
) -> HloOp:  # fmt: skip
    """Insert a scalar `constant` of `element_type` holding `value` (`constant`, or
    `constant.N` where that name is taken)."""
    return constant_from_numpy(rewriter, ctx, np.asarray(value), scalar(element_type), before)


def splat(
    rewriter: PatternRewriter, ctx: RewriteContext, value: object, shape: ArrayShape,
    like: HloOp | None = None,
) -> HloOp:  # fmt: skip
    """`broadcast(constant(value))` of `shape` (just the constant for a scalar shape)."""
    c = scalar_constant(rewriter, ctx, value, shape.element_type)
    if not shape.dims:
        return c
    return new_op(rewriter, ctx, "broadcast", [c.result], shape, {"dimensions": ()}, like)


def erase_dead(rewriter: PatternRewriter, values: Iterable[SSAValue]) -> None:
    """Erase the owners of `values` that became unused, and recursively their operands."""
    stack = [v.owner for v in values]
    while stack:
        op = stack.pop()
        if (
            is_hlo(op)
            and op.parent is not None
            and op.result.first_use is None
            and is_removable(op)
        ):
            operands = list(op.operands)
            rewriter.erase(op)
            stack.extend(v.owner for v in operands)


def replace_op(rewriter: PatternRewriter, op: HloOp, value: SSAValue) -> None:
    """Replace every use of `op` with `value`, erase it, then its operands left unused."""
    operands = list(op.operands)
    rewriter.replace_all_uses_with(op.result, value)
    rewriter.erase(op)
    erase_dead(rewriter, operands)


def replace_with_new(
    rewriter: PatternRewriter,
    ctx: RewriteContext,
    op: HloOp,
    opcode: str,
    operands: Sequence[SSAValue],
    shape: Shape | None = None,
    attrs: dict[str, Any] | None = None,
) -> HloOp:
    """XLA's `ReplaceWithNewInstruction`: a new `opcode.N` instruction takes `op`'s place."""
    new = new_op(rewriter, ctx, opcode, operands, shape or op.shape, attrs, like=op, before=op)
    replace_op(rewriter, op, new.result)
    return new
