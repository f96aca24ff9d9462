"""Element counts of shapes and the physical order of transposes: shape facts that both the
fusion rules and the cost model read."""

from __future__ import annotations

from typing import Any

from hlopass.ir.shape import UNBOUNDED, ArrayShape, Shape, TupleShape


def _num_elements(shape: ArrayShape) -> int:
    """Elements as XLA computes them: an unbounded dim (`?`) is kUnboundedSize = INT64_MIN and
    the product wraps in int64 (f32[?,784] -> 0, f32[?,3] -> INT64_MIN); a negative result is
    taken as 0 here (XLA then reports -9.2e18 flops) so that time estimates stay finite."""
    if UNBOUNDED not in shape.dims or not any(shape.dynamic):
        return shape.num_elements
    n = 1
    for d, dyn in zip(shape.dims, shape.dynamic, strict=False):
        n = (n * (-(1 << 63) if dyn and d == UNBOUNDED else d)) & ((1 << 64) - 1)
    if n >= 1 << 63:
        n -= 1 << 64
    return max(n, 0)


def elements(shape: Shape) -> int:
    if isinstance(shape, ArrayShape):
        return _num_elements(shape)
    if isinstance(shape, TupleShape):
        return elements(shape.elements[0]) if shape.elements else 0
    return 0


def elements_recursive(shape: Shape) -> int:
    if isinstance(shape, TupleShape):
        return sum(elements_recursive(e) for e in shape.elements)
    return elements(shape)


def first_array(shape: Shape) -> Shape:
    while isinstance(shape, TupleShape) and shape.elements:
        shape = shape.elements[0]
    return shape


def operand_ops(op: Any) -> list[Any]:
    return [v.owner for v in op.operands]


def operand_shapes(op: Any) -> list[Shape]:
    return [v.type.data for v in op.operands]


def array_operand_shapes(op: Any) -> list[ArrayShape]:
    """`operand_shapes` of an op whose operands are all arrays (dot, convolution: the verifier
    rejects a tuple there), typed as such."""
    return [v.type.data for v in op.operands]


def users(op: Any) -> list[Any]:
    return [u.operation for u in op.result.uses]


def transpose_orders(op: Any) -> tuple[list[int], list[int]] | None:
    """Major-to-minor physical order of a transpose's (or a copy's) non-degenerate dims, as
    input dims: (output order, input order); None when either side is not an array."""
    src = operand_shapes(op)[0]
    dst = op.shape
    if not isinstance(src, ArrayShape) or not isinstance(dst, ArrayShape):
        return None
    # a copy is a transpose by the identity: only its layout moves data
    perm = op.attr("dimensions") or tuple(range(len(dst.dims)))
    out_order = [perm[d] for d in reversed(dst.minor_to_major) if dst.dims[d] != 1]
    in_order = [d for d in reversed(src.minor_to_major) if src.dims[d] != 1]
    return out_order, in_order


def transpose_is_bitcast(op: Any) -> bool:
    """XLA's `IsEffectiveBitcast`: the physical order of the non-degenerate dims is kept."""
    orders = transpose_orders(op)
    return orders is not None and orders[0] == orders[1]
