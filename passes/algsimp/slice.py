"""`algsimp` family: slice."""

from __future__ import annotations

import math

from hlopass.dialects.hlo import HloOp
from hlopass.ir import attrs as A
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
    float_sum_reducer,
    reducer_opcode,
    single_use,
    src,
)
from hlopass.passes.algsimp.reduce_window import reduce_then_reshape, window_reduce_dims
from hlopass.rewriting import (
    same_shape,
    value_shape,
)


class SliceNoop(Simplification):
    """`slice(x, [0:n] per dim)` covering all of x -> x."""

    OPCODES = ("slice",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = array(value_shape(x))
        if s is None:
            return None
        sl = op.attr("slice")
        if all(
            d.start == 0 and d.limit == n and d.stride == 1
            for d, n in zip(sl, s.dims, strict=False)
        ):
            return x
        return None


class SliceOfSlice(Simplification):
    """`slice(slice(x, a), b) -> slice(x, a∘b)`."""

    OPCODES = ("slice",)
    OPERAND_FROM = frozenset({"slice"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "slice")
        shape = array(op.shape)
        if inner is None or shape is None:
            return None
        out = []
        for a, b, n in zip(inner.attr("slice"), op.attr("slice"), shape.dims, strict=False):
            start = a.start + b.start * a.stride
            stride = a.stride * b.stride
            limit = start + (n - 1) * stride + 1 if n > 0 else start
            out.append(A.SliceDim(start, limit, stride))
        return self.new("slice", [inner.operands[0]], shape, {"slice": tuple(out)}, like=op)


def _last(d: A.SliceDim, n: int) -> int:
    """The last index a slice dimension with `n` output elements reads."""
    return d.start + (n - 1) * d.stride


class SliceOfScalarBroadcast(Simplification):
    """`slice(broadcast(s)) -> broadcast(s)` of the slice's shape (s a scalar)."""

    OPCODES = ("slice",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        return self.rebroadcast_scalar(op)


class SliceOfConcatenate(Simplification):
    """`slice(concatenate(a, b, ...))` reading only from one operand -> `slice(that operand)`
    (offsets shifted; the operand itself when the slice covers it exactly)."""

    OPCODES = ("slice",)
    OPERAND_FROM = frozenset({"concatenate"})

    def rewrite(self, op: HloOp):
        cat = src(op.operands[0], "concatenate")
        shape = array(op.shape)
        if cat is None or shape is None or shape.num_elements == 0:
            return None
        (k,) = cat.attr("dimensions")
        sl = list(op.attr("slice"))
        first, last = sl[k].start, _last(sl[k], shape.dims[k])
        offset = 0
        for v in cat.operands:
            size = value_shape(v).dims[k]  # type: ignore[attr-defined]
            if offset <= first and last < offset + size:
                sl[k] = A.SliceDim(first - offset, last - offset + 1, sl[k].stride)
                whole = all(d.start == 0 and d.stride == 1 for d in sl)
                if whole and same_shape(value_shape(v), op.shape):
                    return v  # the slice covers exactly that operand
                return self.new("slice", [v], shape, {"slice": tuple(sl)}, like=op)
            offset += size
        return None


class SliceOfPad(Simplification):
    """`slice(pad(x, v))` reading only x's elements -> `slice(x)` (no interior padding,
    non-negative edge padding)."""

    OPCODES = ("slice",)
    OPERAND_FROM = frozenset({"pad"})

    def rewrite(self, op: HloOp):
        pad = src(op.operands[0], "pad")
        shape = array(op.shape)
        if pad is None or shape is None or shape.num_elements == 0:
            return None
        x = pad.operands[0]
        xs = array(value_shape(x))
        if xs is None:
            return None
        out = []
        for d, p, n, size in zip(op.attr("slice"), pad.attr("padding"), shape.dims, xs.dims,
                                 strict=True):  # fmt: skip
            if p.interior or p.low < 0 or p.high < 0:
                return None
            if d.start < p.low or _last(d, n) >= p.low + size:
                return None
            out.append(A.SliceDim(d.start - p.low, _last(d, n) - p.low + 1, d.stride))
        if shape.dims == xs.dims and same_shape(xs, op.shape):
            return x  # the slice reads every element of x, in order
        return self.new("slice", [x], shape, {"slice": tuple(out)}, like=op)


class SliceOfReverse(Simplification):
    """`slice(reverse(x, dims)) -> reverse(slice(x, mirrored), dims)`."""

    OPCODES = ("slice",)
    OPERAND_FROM = frozenset({"reverse"})

    def rewrite(self, op: HloOp):
        rev = src(op.operands[0], "reverse")
        shape = array(op.shape)
        if rev is None or shape is None or shape.num_elements == 0:
            return None
        if not single_use(op.operands[0]):
            return None  # the reverse stays for its other users: no gain
        x = rev.operands[0]
        xs = array(value_shape(x))
        if xs is None or xs.is_dynamic:
            return None
        rdims = set(rev.attr("dimensions") or ())
        out = []
        for i, (d, n) in enumerate(zip(op.attr("slice"), shape.dims, strict=True)):
            if i in rdims:
                start = xs.dims[i] - 1 - _last(d, n)
                out.append(A.SliceDim(start, start + (n - 1) * d.stride + 1, d.stride))
            else:
                out.append(d)
        s = self.new("slice", [x], shape, {"slice": tuple(out)}, like=op)
        return self.new("reverse", [s.result], shape, {"dimensions": tuple(sorted(rdims))},
                        like=rev)  # fmt: skip


class SliceOfBroadcast(Simplification):
    """`slice(broadcast(x, dims)) -> broadcast(slice(x), dims)` (x not a scalar; the slice
    of x keeps the slice's ranges on the dims x maps to; single use of the broadcast)."""

    OPCODES = ("slice",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        b = src(op.operands[0], "broadcast")
        shape = array(op.shape)
        if b is None or shape is None or not single_use(op.operands[0]):
            return None
        x = b.operands[0]
        sx = array(value_shape(x))
        if sx is None or sx.rank == 0 or sx.is_dynamic:
            return None
        dims = tuple(b.attr("dimensions") or ())
        sl = op.attr("slice")
        inner = tuple(sl[d] for d in dims)
        small = sx.with_dims(tuple(shape.dims[d] for d in dims))
        v = x
        if small.dims != sx.dims:
            v = self.new("slice", [x], small, {"slice": inner}, like=op).result
        return self.new("broadcast", [v], shape, {"dimensions": dims}, like=op)


class SliceRedundantStride(Simplification):
    """`slice(x, [s:l:k])` with a stride k > 1 on a dim that yields one element ->
    the same slice with `[s:s+1:1]` there (XLA's canonical form)."""

    OPCODES = ("slice",)

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        if shape is None:
            return None
        sl = list(op.attr("slice"))
        new = [
            A.SliceDim(d.start, d.start + 1, 1) if n == 1 and d.stride != 1 else d
            for d, n in zip(sl, shape.dims, strict=True)
        ]
        if new == sl:
            return None
        return self.new("slice", [op.operands[0]], shape, {"slice": tuple(new)}, like=op)


class SliceOfReduceWindow(Simplification):
    """`slice(reduce-window(x, init)) -> reshape(reduce(x, init))` when the slice keeps
    only the windows that span a whole dimension (reducing those dims; XLA's
    `enable_window_reduce_to_reduce_replacement`; single use of the reduce-window; a float
    add or multiply reducer sums in another order, so it needs `enable-floats-are-real`)."""

    OPCODES = ("slice",)
    OPERAND_FROM = frozenset({"reduce-window"})
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        rw, shape = src(op.operands[0], "reduce-window"), array(op.shape)
        if rw is None or shape is None or len(rw.operands) != 2 or not single_use(rw.result):
            return None
        if reducer_opcode(rw) is None:
            return None  # (an unknown reducer may depend on the order of its terms)
        if not self.opts.floats_are_real and float_sum_reducer(rw):
            return None
        dims = window_reduce_dims(rw, list(op.attr("slice")))
        if not dims:
            return None
        return reduce_then_reshape(self, rw, dims, shape, op)


class SliceOfPadPaddingOnly(Simplification):
    """`slice(pad(x, v))` lying wholly in the low or high edge padding along some dim ->
    `broadcast(v)` (every element it reads is the padding value)."""

    OPCODES = ("slice",)
    OPERAND_FROM = frozenset({"pad"})

    def rewrite(self, op: HloOp):
        pad, shape = src(op.operands[0], "pad"), array(op.shape)
        sp = array(value_shape(op.operands[0]))
        if pad is None or shape is None or sp is None:
            return None
        for d, p, size in zip(op.attr("slice"), pad.attr("padding"), sp.dims, strict=True):
            if d.limit <= p.low or d.start >= size - p.high:
                v = pad.operands[1]
                return self.new("broadcast", [v], shape, {"dimensions": ()}, like=op)
        return None


class SliceUndoesPad(Simplification):
    """`slice(pad(x, v, lo_hi_interior)) -> x` when the slice starts at each `lo` with
    stride `interior+1` and has x's shape (it reads exactly x's elements)."""

    OPCODES = ("slice",)
    OPERAND_FROM = frozenset({"pad"})

    def rewrite(self, op: HloOp):
        pad, shape = src(op.operands[0], "pad"), array(op.shape)
        if pad is None or shape is None:
            return None
        x = pad.operands[0]
        sx = array(value_shape(x))
        if sx is None or sx.dims != shape.dims or sx.element_type != shape.element_type:
            return None
        for d, p in zip(op.attr("slice"), pad.attr("padding"), strict=True):
            if d.start != p.low or d.stride != p.interior + 1:
                return None
        return x


class SliceOfConcatenateOperands(Simplification):
    """`slice(concatenate(x0, ..., xn)) -> slice(concatenate(xi, ..., xj))` when the slice
    reads from a run xi..xj of the operands, not all of them (offsets shifted; unstrided)."""

    OPCODES = ("slice",)
    OPERAND_FROM = frozenset({"concatenate"})

    def rewrite(self, op: HloOp):
        cat = src(op.operands[0], "concatenate")
        shape = array(op.shape)
        if cat is None or shape is None or shape.num_elements == 0:
            return None
        sl = list(op.attr("slice"))
        if any(d.stride != 1 for d in sl):
            return None
        (k,) = cat.attr("dimensions")
        start, limit = sl[k].start, sl[k].limit
        offset, first, base, last = 0, None, 0, None
        sizes = [value_shape(v).dims[k] for v in cat.operands]  # type: ignore[attr-defined]
        for i, size in enumerate(sizes):
            if first is None and offset <= start < offset + size:
                first, base = i, offset
            offset += size
            if first is not None and offset >= limit:
                last = i
                break
        if first is None or last is None or last == first or last - first + 1 == len(sizes):
            return None  # one operand (SliceOfConcatenate) or all of them
        parts = list(cat.operands)[first : last + 1]
        cs = array(cat.shape)
        assert cs is not None
        dims = list(cs.dims)
        dims[k] = sum(sizes[first : last + 1])
        inner = self.new("concatenate", parts, cs.with_dims(tuple(dims)).with_layout(cs.layout),
                         {"dimensions": (k,)}, like=cat)  # fmt: skip
        sl[k] = A.SliceDim(start - base, limit - base, 1)
        return self.new("slice", [inner.result], shape, {"slice": tuple(sl)}, like=op)


class SliceOfReshape(Simplification):
    """`slice(reshape(x))` cutting only dim 0 (no strides) -> `reshape(slice(x))` when the
    elements it keeps are one box of x (the cut falls on x's sub-dimension boundaries;
    XLA's `TryToReorderSliceAndReshape`)."""

    OPCODES = ("slice",)
    OPERAND_FROM = frozenset({"reshape"})
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        r = src(op.operands[0], "reshape")
        shape = array(op.shape)
        if r is None or shape is None or shape.is_dynamic:
            return None
        x = r.operands[0]
        sx, sr = array(value_shape(x)), array(r.shape)
        if sx is None or sr is None or sx.is_dynamic:
            return None
        sl = tuple(op.attr("slice"))
        if any(d.stride != 1 for d in sl):
            return None
        cut = [i for i, d in enumerate(sl) if d.start != 0 or d.limit != sr.dims[i]]
        if cut != [0]:
            return None
        start = sl[0].start * math.prod(sr.dims[1:])
        count = shape.num_elements
        inner = math.prod(sx.dims[1:])
        if inner == 0 or start % inner or count % inner:
            return None
        starts, limits = [0] * sx.rank, list(sx.dims)
        for i in range(sx.rank - 1, -1, -1):
            n = sx.dims[i]
            if count >= n:
                if count % n or start % n:
                    return None
                count //= n
                start //= n
            else:
                first = start % n
                if first + count > n:
                    return None
                starts[i], limits[i] = first, first + count
                start //= n
                count = 1
        if start != 0 or count != 1:
            return None
        dims = tuple(hi - lo for lo, hi in zip(starts, limits, strict=True))
        new = tuple(A.SliceDim(lo, hi, 1) for lo, hi in zip(starts, limits, strict=True))
        s = self.new("slice", [x], sx.with_dims(dims), {"slice": new}, like=op)
        return self.new("reshape", [s.result], shape, like=op)


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
SLICES: tuple[type[Simplification], ...] = (
    SliceNoop, SliceOfSlice, SliceOfScalarBroadcast, SliceOfConcatenate, SliceOfPad,
    SliceOfReverse, SliceOfBroadcast, SliceRedundantStride, SliceOfReduceWindow,
    SliceOfPadPaddingOnly, SliceUndoesPad, SliceOfReshape,
)  # fmt: skip
"""Slices of slices, broadcasts, pads, concatenates, reverses, reshapes."""

OF_CONCATENATE_OPERANDS: tuple[type[Simplification], ...] = (SliceOfConcatenateOperands,)
"""A slice inside one concatenate operand (after `dot.SliceOfDotToDotOfSlices`)."""

PATTERNS: tuple[type[Simplification], ...] = (*SLICES, *OF_CONCATENATE_OPERANDS)
"""This family's rewrites, in the order they fire."""
