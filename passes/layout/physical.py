"""The physical form of an array shape and the plumbing the normalization patterns share:
reading an operand in its physical form and handing a physical result back to the users
of the logical one.

The physical form keeps every dim (size-1 dims too, as XLA's LayoutNormalization does) and
orders them major to minor, so its layout is the default one and a bitcast converts
between the two without moving a byte. `order(shape)` is that major-to-minor order: dim j
of the physical form is dim `order(shape)[j]` of the logical one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.ir import Block, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import HloOp, create_op
from hlopass.ir.shape import ArrayShape, Layout
from hlopass.rewriting import RewriteContext, owner, replace_op, replace_with_new

from .layouts import default_m2m, is_default, m2m_of, value_shape


def order(shape: ArrayShape) -> tuple[int, ...]:
    """The logical dims major to minor (XLA's layout read as a transpose)."""
    return tuple(reversed(m2m_of(shape)))


def inverse(perm: Sequence[int]) -> tuple[int, ...]:
    out = [0] * len(perm)
    for j, p in enumerate(perm):
        out[p] = j
    return tuple(out)


def physical(shape: ArrayShape) -> ArrayShape:
    """`shape`'s dims major to minor in the default layout; the element size in bits and
    the memory space are kept (they do not depend on the dims' order), tiles dropped."""
    dims = tuple(shape.dims[d] for d in order(shape))
    old = shape.layout
    layout = Layout(
        default_m2m(len(dims)),
        element_size_bits=old.element_size_bits if old else 0,
        memory_space=old.memory_space if old else 0,
    )
    return ArrayShape(shape.element_type, dims, (), layout)


def is_physical(shape: object) -> bool:
    """An array already in its physical form (default layout, static dims)."""
    return isinstance(shape, ArrayShape) and not shape.is_dynamic and is_default(shape)


def plain_array(shape: object) -> bool:
    """A static array without tiles: the only kind whose physical form is a bitcast away."""
    return (
        isinstance(shape, ArrayShape)
        and not shape.is_dynamic
        and shape.element_type not in ("token", "opaque")
        and (shape.layout is None or not shape.layout.tiles)
    )


def all_physical(op: HloOp) -> bool:
    """Result and every operand already physical: nothing for normalization to do."""
    return is_physical(op.shape) and all(is_physical(value_shape(v)) for v in op.operands)


def physical_input(rewriter: PatternRewriter, ctx: RewriteContext, v: SSAValue) -> SSAValue:
    """`v` read in its physical form: `v` itself when it already is, the source of a bitcast
    from that form, else a new `bitcast(v)` placed right after `v`'s definition (so every
    user can share it)."""
    s = value_shape(v)
    assert isinstance(s, ArrayShape)
    if is_physical(s):
        return v
    want = physical(s)
    o = owner(v)
    if o is not None and o.opcode == "bitcast" and value_shape(o.operands[0]) == want:
        return o.operands[0]
    new = create_op("bitcast", [v], want, ctx.names.fresh("bitcast"), {})
    definer = v.owner
    where = (
        InsertPoint.at_start(definer) if isinstance(definer, Block) else InsertPoint.after(definer)  # type: ignore[arg-type]
    )
    rewriter.insert(new, where)
    return new.result


def finish(rewriter: PatternRewriter, ctx: RewriteContext, op: HloOp, value: SSAValue) -> None:
    """`op`'s users read `value` (its physical twin) through a bitcast, or directly when
    the shapes agree."""
    if value_shape(value) == op.shape:
        replace_op(rewriter, op, value)
    else:
        replace_with_new(rewriter, ctx, op, "bitcast", [value])


def other_attrs(op: HloOp, *drop: str) -> dict[str, Any]:
    """`op`'s attributes but its name and those in `drop` (the ones a rewrite recomputes)."""
    return {s.name: val for s, val in op.hlo_attrs() if s.name != "name" and s.name not in drop}
