"""`algsimp` family: dynamic-slice and dynamic-update-slice."""

from __future__ import annotations

from hlopass import attrs as A
from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, et, highest, is_scalar_broadcast, src
from hlopass.rewriting import const_array, is_zero, value_shape
from hlopass.shape import is_integral, scalar


class DynamicSliceFull(Simplification):
    """`dynamic-slice(x, i...)` of all of x -> x (offsets clamp to 0)."""

    OPCODES = ("dynamic-slice",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = array(value_shape(x))
        if s is None or s.is_dynamic or tuple(op.attr("dynamic_slice_sizes")) != s.dims:
            return None
        return x


class DynamicUpdateSliceFull(Simplification):
    """`dynamic-update-slice(x, u, i...)` with u as big as x -> u."""

    OPCODES = ("dynamic-update-slice",)

    def rewrite(self, op: HloOp):
        x, u = op.operands[0], op.operands[1]
        su, sx = array(value_shape(u)), array(value_shape(x))
        if su is None or sx is None or su.dims != sx.dims or su.is_dynamic:
            return None
        return u


class DynamicSliceConstantIndices(Simplification):
    """`dynamic-slice(x, c0, c1, ...)` with constant indices -> `slice(x)` at the indices
    clamped into `[0, dim - size]` (as dynamic-slice clamps them)."""

    OPCODES = ("dynamic-slice",)
    OPERAND_FROM = frozenset({"constant"})

    def rewrite(self, op: HloOp):
        x, *idx = op.operands
        s, shape = array(value_shape(x)), array(op.shape)
        if s is None or shape is None or s.is_dynamic or len(idx) != s.rank or not idx:
            return None
        starts = []
        for v in idx:
            c = const_array(v)
            if c is None or c.size != 1:
                return None
            starts.append(int(c.reshape(-1)[0]))
        sizes = op.attr("dynamic_slice_sizes")
        sl = []
        for start, size, dim in zip(starts, sizes, s.dims, strict=True):
            b = min(max(start, 0), dim - size)
            sl.append(A.SliceDim(b, b + size, 1))
        return self.new("slice", [x], shape, {"slice": tuple(sl)}, like=op)


class DynamicSliceOfScalarBroadcast(Simplification):
    """`dynamic-slice(broadcast(s), i...) -> broadcast(s)` of the slice's shape (s scalar)."""

    OPCODES = ("dynamic-slice",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        b = is_scalar_broadcast(op.operands[0])
        if b is None:
            return None
        return self.new("broadcast", [b.operands[0]], op.shape, {"dimensions": ()}, like=op)


class DynamicUpdateSliceEmptyUpdate(Simplification):
    """`dynamic-update-slice(x, u, i...) -> x` when u has no elements."""

    OPCODES = ("dynamic-update-slice",)

    def rewrite(self, op: HloOp):
        u = array(value_shape(op.operands[1]))
        return op.operands[0] if u is not None and u.num_elements == 0 else None


class DynamicUpdateSliceOfBroadcastToPad(Simplification):
    """`dynamic-update-slice(broadcast(s), u, c0, c1, ...) -> pad(u, s)` with constant
    indices (clamped as dynamic-update-slice clamps them) as the low edge padding."""

    OPCODES = ("dynamic-update-slice",)

    def rewrite(self, op: HloOp):
        b = is_scalar_broadcast(op.operands[0])
        u, *idx = op.operands[1:]
        su, shape = array(value_shape(u)), array(op.shape)
        if b is None or su is None or shape is None or shape.is_dynamic or su.is_dynamic:
            return None
        if len(idx) != shape.rank or not idx or su.element_type != shape.element_type:
            return None
        pads = []
        for v, size, dim in zip(idx, su.dims, shape.dims, strict=True):
            c = const_array(v)
            if c is None or c.size != 1:
                return None
            low = min(max(int(c.reshape(-1)[0]), 0), dim - size)
            pads.append(A.PadDim(low, dim - size - low, 0))
        return self.new("pad", [u, b.operands[0]], shape, {"padding": tuple(pads)}, like=op)


class DynamicSliceOfIota(Simplification):
    """`dynamic-slice(iota(d), i...) -> add(iota(d), broadcast(convert(clamp(0, i_d, n - s))))`
    of the slice's shape (integer iota: the slice counts on from the clamped start)."""

    OPCODES = ("dynamic-slice",)
    OPERAND_FROM = frozenset({"iota"})

    def rewrite(self, op: HloOp):
        x, *idx = op.operands
        iota = src(x, "iota")
        s, shape = array(value_shape(x)), array(op.shape)
        if iota is None or s is None or shape is None or s.is_dynamic or len(idx) != s.rank:
            return None
        t = shape.element_type
        if not is_integral(t):
            return None
        d = iota.attr("iota_dimension")
        i, it = idx[d], et(idx[d])
        n, size = s.dims[d], shape.dims[d]
        if n - size > highest(it):  # (the bound must fit the index type)
            return None
        lo = self.const(0, scalar(it))
        hi = self.const(n - size, scalar(it))
        start = self.new("clamp", [lo.result, i, hi.result], scalar(it), like=op).result
        if it != t:
            start = self.new("convert", [start], scalar(t), like=op).result
        small = self.new("iota", [], shape, {"iota_dimension": d}, like=iota)
        b = self.new("broadcast", [start], shape, {"dimensions": ()}, like=op)
        return self.new("add", [small.result, b.result], shape, like=op)


def _zero_index(self: Simplification, op: HloOp, first: int, sizes, dims):
    """The operands of `op` with the index of each fully covered dimension (slice as big
    as the operand: the start clamps to 0) replaced by a constant 0; None if none changes."""
    operands = list(op.operands)
    changed = False
    for k, (size, dim) in enumerate(zip(sizes, dims, strict=True)):
        v = operands[first + k]
        if size == dim and not is_zero(v):
            operands[first + k] = self.const(0, scalar(et(v))).result
            changed = True
    return operands if changed else None


class DynamicSliceTrivialIndex(Simplification):
    """`dynamic-slice(x, ..., i_k, ...)` with slice size = x's size on dim k ->
    the same with `i_k = 0` (the start clamps to 0 whatever i_k is)."""

    OPCODES = ("dynamic-slice",)

    def rewrite(self, op: HloOp):
        s = array(value_shape(op.operands[0]))
        if s is None or s.is_dynamic or len(op.operands) != s.rank + 1:
            return None
        sizes = op.attr("dynamic_slice_sizes")
        operands = _zero_index(self, op, 1, sizes, s.dims)
        if operands is None:
            return None
        return self.new("dynamic-slice", operands, op.shape,
                        {"dynamic_slice_sizes": tuple(sizes)}, like=op)  # fmt: skip


class DynamicUpdateSliceTrivialIndex(Simplification):
    """`dynamic-update-slice(x, u, ..., i_k, ...)` with u as big as x on dim k ->
    the same with `i_k = 0` (the start clamps to 0 whatever i_k is)."""

    OPCODES = ("dynamic-update-slice",)

    def rewrite(self, op: HloOp):
        s, su = array(value_shape(op.operands[0])), array(value_shape(op.operands[1]))
        if s is None or su is None or s.is_dynamic or su.is_dynamic:
            return None
        if len(op.operands) != s.rank + 2:
            return None
        operands = _zero_index(self, op, 2, su.dims, s.dims)
        if operands is None:
            return None
        return self.new("dynamic-update-slice", operands, op.shape, like=op)


class DynamicSliceOfTranspose(Simplification):
    """`dynamic-slice(transpose(x, perm), i...) -> transpose(dynamic-slice(x, i[perm^-1]...),
    perm)`: the slice moves to x (each index clamps in its own dimension, so the values are
    the same) and the transpose then moves fewer elements."""

    OPCODES = ("dynamic-slice",)
    OPERAND_FROM = frozenset({"transpose"})
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        t = src(op.operands[0], "transpose")
        if t is None or not op.operands[0].has_one_use():
            return None  # (another user would keep the big transpose: no gain)
        x, idx = t.operands[0], list(op.operands[1:])
        sx, shape = array(value_shape(x)), array(op.shape)
        perm = tuple(t.attr("dimensions") or ())
        if sx is None or shape is None or sx.is_dynamic or len(idx) != sx.rank:
            return None
        sizes = tuple(op.attr("dynamic_slice_sizes"))
        # output dim k of the transpose is x's dim perm[k]
        new_idx, new_sizes = [idx[0]] * sx.rank, [0] * sx.rank
        for k, d in enumerate(perm):
            new_idx[d], new_sizes[d] = idx[k], sizes[k]
        small = sx.with_dims(tuple(new_sizes))
        ds = self.new("dynamic-slice", [x, *new_idx], small,
                      {"dynamic_slice_sizes": tuple(new_sizes)}, like=op)  # fmt: skip
        return self.new("transpose", [ds.result], shape, {"dimensions": perm}, like=op)


class DynamicSliceOfBroadcast(Simplification):
    """`dynamic-slice(broadcast(x, dims), i...) -> broadcast(dynamic-slice(x, i[dims]...),
    dims)`: x's dim j is the broadcast's dim dims[j], of the same size, so its index clamps
    the same way; the other indices only pick among equal copies."""

    OPCODES = ("dynamic-slice",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        b = src(op.operands[0], "broadcast")
        if b is None or is_scalar_broadcast(op.operands[0]) is not None:
            return None  # (a scalar's broadcast: DynamicSliceOfScalarBroadcast)
        x, idx = b.operands[0], list(op.operands[1:])
        sx, shape = array(value_shape(x)), array(op.shape)
        if sx is None or shape is None or sx.is_dynamic or shape.is_dynamic:
            return None
        dims = tuple(b.attr("dimensions") or ())
        sizes = tuple(op.attr("dynamic_slice_sizes"))
        new_sizes = tuple(sizes[d] for d in dims)
        if new_sizes == sx.dims:
            inner = x  # the whole of x is kept: only the broadcast shrinks
        else:
            inner = self.new("dynamic-slice", [x, *(idx[d] for d in dims)],
                             sx.with_dims(new_sizes),
                             {"dynamic_slice_sizes": new_sizes}, like=op).result  # fmt: skip
        return self.new("broadcast", [inner], shape, {"dimensions": dims}, like=op)
