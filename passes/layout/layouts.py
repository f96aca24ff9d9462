"""Layout arithmetic shared by the layout passes: physical orders, the layouts that make a
transpose, reshape or broadcast free (the physical form itself is `physical.py`'s).

A layout is handled as its `minor_to_major` tuple; `major_to_minor` is its reverse.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from hlopass.cost.layouts import physical_offsets, reshape_is_bitcast
from hlopass.dialects.hlo import HloOp, retype_result, shape_type
from hlopass.ir.shape import ArrayShape, Layout, Shape, TupleShape

M2M = tuple[int, ...]


def m2m_of(shape: ArrayShape) -> M2M:
    return tuple(shape.minor_to_major)


def default_m2m(rank: int) -> M2M:
    return tuple(range(rank - 1, -1, -1))


def from_major_to_minor(order: Sequence[int]) -> M2M:
    return tuple(reversed(tuple(order)))


def with_m2m(shape: ArrayShape, m2m: Sequence[int]) -> ArrayShape:
    """`shape` with layout `m2m` (other layout fields, tiles etc., dropped)."""
    m2m = tuple(m2m)
    if (
        shape.layout is not None
        and shape.layout.minor_to_major == m2m
        and not shape.layout.has_extras()
    ):
        return shape
    return shape.with_layout(Layout(m2m))


def with_default(shape: Shape) -> Shape:
    """Every array leaf of `shape` with the default layout."""
    if isinstance(shape, ArrayShape):
        if shape.element_type in ("token", "opaque"):
            return shape
        return with_m2m(shape, default_m2m(shape.rank))
    if isinstance(shape, TupleShape):
        return TupleShape(tuple(with_default(e) for e in shape.elements))
    return shape


def is_default(shape: ArrayShape) -> bool:
    return m2m_of(shape) == default_m2m(shape.rank)


def nondegenerate_m2m(shape: ArrayShape) -> M2M:
    """The layout without dims of size 1 (they do not change the memory order)."""
    return tuple(d for d in m2m_of(shape) if shape.dims[d] != 1)


def same_layout(a: Shape, b: Shape) -> bool:
    """Same dims and the same minor-to-major order in every array leaf."""
    if isinstance(a, ArrayShape) and isinstance(b, ArrayShape):
        return a.without_layout() == b.without_layout() and (a.rank == 0 or m2m_of(a) == m2m_of(b))
    if isinstance(a, TupleShape) and isinstance(b, TupleShape):
        return len(a.elements) == len(b.elements) and all(
            same_layout(x, y) for x, y in zip(a.elements, b.elements, strict=True)
        )
    return a == b


def value_shape(v: SSAValue) -> Shape:
    return v.type.data  # type: ignore[attr-defined]


def set_shape(op: HloOp, shape: Shape) -> None:
    """Give `op`'s result a new shape (same dims, another layout) in place."""
    retype_result(op, shape_type(shape))


# --- layouts that make data movement free --------------------------------------------------


def transpose_result_for_bitcast(operand_m2m: M2M, perm: Sequence[int]) -> M2M:
    """Result layout of `transpose(x), dimensions=perm` that keeps x's memory order."""
    inverse = {p: j for j, p in enumerate(perm)}
    return tuple(inverse[d] for d in operand_m2m)


def transpose_operand_for_bitcast(result_m2m: M2M, perm: Sequence[int]) -> M2M:
    """Operand layout that makes `transpose(x), dimensions=perm` with `result_m2m` free."""
    return tuple(perm[d] for d in result_m2m)


def transpose_is_bitcast(src: ArrayShape, dst: ArrayShape, perm: Sequence[int]) -> bool:
    """Same memory order, ignoring size-1 dims (XLA's IsEffectiveBitcast)."""
    mapped = tuple(perm[d] for d in m2m_of(dst) if dst.dims[d] != 1)
    return mapped == nondegenerate_m2m(src)


def reduce_result_layout(operand_m2m: M2M, reduced: Sequence[int]) -> M2M:
    """The kept dims in the operand's relative order, renumbered (XLA's reduce layout)."""
    gone = set(reduced)
    kept = [d for d in sorted(set(operand_m2m) - gone)]
    index = {d: i for i, d in enumerate(kept)}
    return tuple(index[d] for d in operand_m2m if d not in gone)


def row_reduction_operand_layout(result_m2m: M2M, rank: int, reduced: Sequence[int]) -> M2M:
    """Operand layout with the reduced dims minor (a row reduction), the kept dims major in
    the result's order."""
    gone = set(reduced)
    kept = [d for d in range(rank) if d not in gone]
    kept_m2m = [kept[i] for i in result_m2m]
    return tuple(sorted(gone, reverse=True)) + tuple(kept_m2m)


def broadcast_operand_layout(result_m2m: M2M, dims: Sequence[int]) -> M2M:
    """Operand layout in the same relative order as the result's (a free broadcast read)."""
    where = {out: i for i, out in enumerate(dims)}
    return tuple(where[d] for d in result_m2m if d in where)


__all__ = ["physical_offsets", "reshape_is_bitcast"]
