"""Ops that apply a computation: reduce, reduce-window, select-and-scatter, map, sort,
scan, and topk."""

from __future__ import annotations

from collections.abc import Callable

from hlopass.ir.shape import ArrayShape, Shape, TupleShape
from hlopass.shape_inference.common import CannotInfer, Ctx, check_dims, fresh, tuple_of


def _halves(ctx: Ctx) -> tuple[list[ArrayShape], list[ArrayShape]]:
    n = len(ctx.operands)
    if n < 2 or n % 2:
        raise CannotInfer(f"{ctx.opcode} takes inputs and as many init values, got {n} operands")
    arrays = [ctx.array(i) for i in range(n)]
    inputs, inits = arrays[: n // 2], arrays[n // 2 :]
    for a in inputs[1:]:
        if a.dims != inputs[0].dims:
            raise CannotInfer(
                f"{ctx.opcode} inputs differ: {inputs[0].text(False)} and {a.text(False)}"
            )
    for v in inits:
        if v.rank:
            raise CannotInfer(f"{ctx.opcode} init value {v.text(False)} is not a scalar")
    return inputs, inits


def _reduce(ctx: Ctx) -> Shape:
    inputs, inits = _halves(ctx)
    dims = ctx.ints("dimensions")
    check_dims(ctx, dims, inputs[0].rank)
    kept = [d for i, d in enumerate(inputs[0].dims) if i not in dims]
    return tuple_of([fresh(v.element_type, kept) for v in inits])


def _window_dims(ctx: Ctx, a: ArrayShape) -> list[int]:
    window = ctx.attr("window")
    wdims = window.dims if window is not None else ()
    if len(wdims) != a.rank:
        raise CannotInfer(f"window has {len(wdims)} dimensions, operand has {a.rank}")
    out = []
    for d, w in zip(a.dims, wdims, strict=True):
        if w.size <= 0 or w.stride <= 0 or w.lhs_dilation <= 0 or w.rhs_dilation <= 0:
            raise CannotInfer("window sizes, strides and dilations must be positive")
        padded = w.pad_low + w.pad_high + (max(d - 1, 0) * w.lhs_dilation + 1 if d else 0)
        span = (w.size - 1) * w.rhs_dilation + 1
        out.append(0 if padded < span else (padded - span) // w.stride + 1)
    return out


def _reduce_window(ctx: Ctx) -> Shape:
    inputs, inits = _halves(ctx)
    dims = _window_dims(ctx, inputs[0])
    return tuple_of([fresh(v.element_type, dims) for v in inits])


def _select_and_scatter(ctx: Ctx) -> Shape:
    return ctx.array(0)


def _map(ctx: Ctx) -> Shape:
    arrays = [ctx.array(i) for i in range(len(ctx.operands))]
    if not arrays:
        raise CannotInfer("map needs operands")
    root = ctx.root()
    if not isinstance(root, ArrayShape) or root.rank:
        raise CannotInfer(f"map's computation must return a scalar, got {root.text(False)}")
    for a in arrays[1:]:
        if a.dims != arrays[0].dims:
            raise CannotInfer(f"map operands differ: {arrays[0].text(False)} and {a.text(False)}")
    return fresh(root.element_type, arrays[0].dims)


def _sort(ctx: Ctx) -> Shape:
    arrays = [ctx.array(i) for i in range(len(ctx.operands))]
    if not arrays:
        raise CannotInfer("sort needs operands")
    for a in arrays[1:]:
        if a.dims != arrays[0].dims:
            raise CannotInfer(f"sort operands differ: {arrays[0].text(False)} and {a.text(False)}")
    return tuple_of(list(arrays))


def _scan(ctx: Ctx) -> Shape:
    # Outputs: the computation's per-step outputs stacked along the scanned dimension;
    # carries: the computation's carry results.
    carries = ctx.attr("num_carries", 0)
    n = len(ctx.operands)
    if not 0 <= carries < n:
        raise CannotInfer(f"scan num_carries={carries} with {n} operands")
    lead = ctx.array(0)
    root = ctx.root()
    outs = root.elements if isinstance(root, TupleShape) else (root,)
    if len(outs) < carries:
        raise CannotInfer(f"scan's computation returns {len(outs)} values, fewer than its carries")
    (dim,) = ctx.ints("dimensions") or (None,)
    if dim is None or not 0 <= dim < lead.rank:
        raise CannotInfer(f"scan dimension {dim} out of range for {lead.text(False)}")
    results: list[Shape] = []
    for o in outs[: len(outs) - carries]:
        if not isinstance(o, ArrayShape):
            raise CannotInfer(f"scan outputs must be arrays, got {o.text(False)}")
        d = min(dim, o.rank)
        results.append(fresh(o.element_type, (*o.dims[:d], lead.dims[dim], *o.dims[d:])))
    return TupleShape((*results, *outs[len(outs) - carries :]))


def _topk(ctx: Ctx) -> Shape:
    a = ctx.array(0)
    k = ctx.attr("k")
    if not a.rank:
        raise CannotInfer("topk needs an operand of rank at least 1")
    if k is None or not 0 <= k <= a.dims[-1]:
        raise CannotInfer(f"topk k={k} out of range for {a.text(False)}")
    dims = (*a.dims[:-1], k)
    return TupleShape((fresh(a.element_type, dims), fresh("s32", dims)))


RULES: dict[str, Callable[[Ctx], Shape]] = {
    "reduce": _reduce,
    "reduce-window": _reduce_window,
    "select-and-scatter": _select_and_scatter,
    "map": _map,
    "sort": _sort,
    "scan": _scan,
    "topk": _topk,
}
