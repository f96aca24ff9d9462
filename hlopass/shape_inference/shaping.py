"""Ops that move data between dimensions: broadcast, transpose, pad, concatenate, gather,
scatter, reverse, dynamic dimension sizes."""

from __future__ import annotations

from collections.abc import Callable

from hlopass.ir.shape import ArrayShape, Layout, Shape, is_float
from hlopass.shape_inference.common import CannotInfer, Ctx, check_dims, fresh, tuple_of
from hlopass.shape_inference.linalg import higher_precision


def _broadcast(ctx: Ctx) -> Shape:
    # XLA's parser hands `dimensions` to InferBroadcastShape as the sizes of new major
    # dimensions: the inferred shape is dimensions ++ operand dims (a shape its verifier
    # then rejects unless the two agree).
    a = ctx.array(0)
    sizes = ctx.ints("dimensions") if a.rank else tuple(ctx.attr("dimensions", ()))
    for s in sizes:
        if s < 0:
            raise CannotInfer(f"broadcast with negative dimension size {s}")
    out = sizes + a.dims
    if a.rank and any(out[d] != n for d, n in zip(sizes, a.dims, strict=False)):
        raise CannotInfer(
            f"XLA reads dimensions={{{','.join(map(str, sizes))}}} as the sizes of new leading "
            f"dimensions, giving {fresh(a.element_type, out).text(False)}, which does not "
            "broadcast the operand along those dimensions; write the result shape"
        )
    return fresh(a.element_type, out)


def _transpose(ctx: Ctx) -> Shape:
    a = ctx.array(0)
    perm = ctx.ints("dimensions")
    if len(perm) != a.rank or sorted(perm) != list(range(a.rank)):
        raise CannotInfer(
            f"transpose dimensions {{{','.join(map(str, perm))}}} are not a permutation of "
            f"the operand's {a.rank} dimensions"
        )
    # XLA keeps the data in place: the result's layout is the operand's, permuted (a
    # transpose of a row-major matrix infers a column-major one).
    out = fresh(a.element_type, tuple(a.dims[p] for p in perm))
    if a.layout is None or a.layout.has_extras():
        return out
    where = {p: i for i, p in enumerate(perm)}
    return out.with_layout(Layout(tuple(where[d] for d in a.layout.minor_to_major)))


def _reverse(ctx: Ctx) -> Shape:
    a = ctx.array(0)
    check_dims(ctx, ctx.ints("dimensions"), a.rank)
    return a


def _pad(ctx: Ctx) -> Shape:
    a, v = ctx.array(0), ctx.array(1)
    if v.rank:
        raise CannotInfer(f"pad value must be a scalar, got {v.text(False)}")
    pads = ctx.attr("padding")
    if pads is None or len(pads) != a.rank:
        raise CannotInfer(f"padding has {len(pads or ())} dimensions, operand has {a.rank}")
    dims = []
    for d, p in zip(a.dims, pads, strict=True):
        if p.interior < 0:
            raise CannotInfer("pad with negative interior padding")
        n = p.low + p.high + d + max(d - 1, 0) * p.interior
        if n < 0:
            raise CannotInfer(f"padding gives a negative dimension ({n})")
        dims.append(n)
    return fresh(a.element_type, dims)


def _concatenate(ctx: Ctx) -> Shape:
    dims = ctx.ints("dimensions")
    if len(dims) != 1:
        raise CannotInfer(f"concatenate takes exactly one dimension, got {len(dims)}")
    (dim,) = dims
    arrays = [ctx.array(i) for i in range(len(ctx.operands))]
    if not arrays:
        raise CannotInfer("concatenate needs operands")
    first = arrays[0]
    if not 0 <= dim < first.rank:
        raise CannotInfer(f"concatenate dimension {dim} out of range for rank {first.rank}")
    total = 0
    et = first.element_type
    for a in arrays:
        # XLA's InferConcatOpShape ignores the precision of floats (the result has the
        # highest one)
        if a.rank != first.rank or (
            a.element_type != first.element_type
            and not (is_float(a.element_type) and is_float(first.element_type))
        ):
            raise CannotInfer(f"cannot concatenate {first.text(False)} and {a.text(False)}")
        for i, (x, y) in enumerate(zip(a.dims, first.dims, strict=True)):
            if i != dim and x != y:
                raise CannotInfer(
                    f"cannot concatenate {first.text(False)} and {a.text(False)} along "
                    f"dimension {dim}: they differ in dimension {i}"
                )
        total += a.dims[dim]
        et = higher_precision(et, a.element_type)
    out = list(first.dims)
    out[dim] = total
    return fresh(et, out)


def _gather(ctx: Ctx) -> Shape:
    operand, indices = ctx.array(0), ctx.array(1)
    offset_dims = ctx.ints("offset_dims")
    collapsed = set(ctx.ints("collapsed_slice_dims"))
    batching = set(ctx.attr("operand_batching_dims", ()))
    sizes = ctx.ints("slice_sizes")
    ivd = ctx.attr("index_vector_dim")
    if len(sizes) != operand.rank:
        raise CannotInfer(
            f"gather slice_sizes has {len(sizes)} entries, operand rank is {operand.rank}"
        )
    idims = list(indices.dims)
    if ivd is None or not 0 <= ivd <= len(idims):
        raise CannotInfer(f"gather index_vector_dim {ivd} out of range")
    batch = [d for i, d in enumerate(idims) if i != ivd]
    offsets = [s for i, s in enumerate(sizes) if i not in collapsed and i not in batching]
    if len(offsets) != len(offset_dims):
        raise CannotInfer(
            f"gather offset_dims has {len(offset_dims)} entries, {len(offsets)} slice "
            "dimensions are not collapsed"
        )
    rank = len(batch) + len(offsets)
    check_dims(ctx, offset_dims, rank, "offset_dims")
    out: list[int] = []
    bi = oi = 0
    for i in range(rank):
        if i in offset_dims:
            out.append(offsets[oi])
            oi += 1
        else:
            out.append(batch[bi])
            bi += 1
    return fresh(operand.element_type, out)


def _scatter(ctx: Ctx) -> Shape:
    n = len(ctx.operands)
    if n < 3 or (n - 1) % 2:
        raise CannotInfer(f"scatter takes 2N+1 operands, got {n}")
    k = (n - 1) // 2
    return tuple_of([ctx.array(i) for i in range(k)])


def _get_dimension_size(ctx: Ctx) -> Shape:
    a = ctx.array(0)
    check_dims(ctx, ctx.ints("dimensions"), a.rank)
    return fresh("s32", ())


def _set_dimension_size(ctx: Ctx) -> Shape:
    a, size = ctx.array(0), ctx.array(1)
    if size.rank or size.element_type != "s32":
        raise CannotInfer(f"set-dimension-size needs an s32[] size, got {size.text(False)}")
    (dim,) = ctx.ints("dimensions") or (None,)
    if dim is None or not 0 <= dim < a.rank:
        raise CannotInfer(f"set-dimension-size dimension {dim} out of range")
    dynamic = list(a.dynamic or (False,) * a.rank)
    dynamic[dim] = True
    return ArrayShape(a.element_type, a.dims, tuple(dynamic), a.layout)


RULES: dict[str, Callable[[Ctx], Shape]] = {
    "broadcast": _broadcast,
    "transpose": _transpose,
    "reverse": _reverse,
    "pad": _pad,
    "concatenate": _concatenate,
    "gather": _gather,
    "scatter": _scatter,
    "get-dimension-size": _get_dimension_size,
    "set-dimension-size": _set_dimension_size,
}
