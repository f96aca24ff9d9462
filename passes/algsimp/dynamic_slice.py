"""`algsimp` family: dynamic-slice and dynamic-update-slice."""

from __future__ import annotations

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.ir import attrs as A
from hlopass.ir.shape import is_integral, scalar
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, et, highest, is_scalar_broadcast, src
from hlopass.rewriting import const_array, is_zero, owner, value_shape


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
        if src(x, "constant") is not None:
            return None  # (as XLA: a dynamic-slice of a constant stays, for dot-of-gather)
        if self.opts.disable_dynamic_slice_to_slice_conversion:
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
        return self.rebroadcast_scalar(op)


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
        if _moved_to_host(u):
            return None  # a host-offload buffer: HostOffloader expects the broadcast
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
        if s.rank == 1 and shape.dims == (1,) and {t, et(idx[0])} <= {"s32", "u32"}:
            return None  # XLA's one-element form: DynamicSliceOfScaledIota
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


def _moved_to_host(value: SSAValue) -> bool:
    """`value` is a `MoveToHost` custom-call, seen through reshapes, bitcasts and copies
    (the update of a dynamic-update-slice that offloads to host memory)."""
    o = owner(value)
    while o is not None and o.OPCODE in ("reshape", "bitcast", "copy"):
        o = owner(o.operands[0])
    return (
        o is not None
        and o.OPCODE == "custom-call"
        and (o.attr("custom_call_target") == "MoveToHost")
    )


class DynamicSliceOfScaledIota(Simplification):
    """`dynamic-slice(iota, i)` of one element -> `reshape(convert(clamp(0, i, n - 1)))`,
    and of `iota * broadcast(k)` -> `reshape(convert(clamp(0, i, n - 1)) * k)` (rank 1,
    s32/u32 result and index: as XLA)."""

    OPCODES = ("dynamic-slice",)
    OPERAND_FROM = frozenset({"iota", "multiply"})

    def rewrite(self, op: HloOp):
        x, *idx = op.operands
        s, shape = array(value_shape(x)), array(op.shape)
        if s is None or shape is None or s.rank != 1 or shape.dims != (1,) or len(idx) != 1:
            return None
        t, it = shape.element_type, et(idx[0])
        if t not in ("s32", "u32") or it not in ("s32", "u32") or s.is_dynamic:
            return None
        k = None
        mul = src(x, "multiply")
        if mul is not None:
            kb = is_scalar_broadcast(mul.operands[1])
            if kb is None:
                return None
            x, k = mul.operands[0], kb.operands[0]
        if src(x, "iota") is None or (k is not None and et(k) != t):
            return None
        lo = self.const(0, scalar(it))
        hi = self.const(s.dims[0] - 1, scalar(it))
        v = self.new("clamp", [lo.result, idx[0], hi.result], scalar(it), like=op).result
        if it != t:
            v = self.new("convert", [v], scalar(t), like=op).result
        if k is not None:
            v = self.new("multiply", [v, k], scalar(t), like=op).result
        return self.new("reshape", [v], shape, like=op)


class DynamicSliceOfDegenerateReshape(Simplification):
    """`dynamic-slice(reshape(x), i...) -> reshape(dynamic-slice(x, i'...))` where the
    reshape only inserts or deletes size-1 dims: each dim of x larger than 1 takes the index
    and size of the dim it becomes; x's size-1 dims start at 0."""

    OPCODES = ("dynamic-slice",)
    OPERAND_FROM = frozenset({"reshape"})
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        from hlopass.passes.algsimp.factors import only_size_one_changes, unmodified_dims

        r = src(op.operands[0], "reshape")
        if r is None:
            return None
        x = r.operands[0]
        sx, sr, shape = array(value_shape(x)), array(r.shape), array(op.shape)
        if sx is None or sr is None or shape is None or sx.is_dynamic or sr.is_dynamic:
            return None
        if not only_size_one_changes(sx.dims, sr.dims):
            return None
        idx, sizes = list(op.operands[1:]), tuple(op.attr("dynamic_slice_sizes"))
        starts: list = [None] * sx.rank
        new_sizes = [1] * sx.rank
        for i, o in unmodified_dims(sx.dims, sr.dims):
            if sx.dims[i] != 1:
                starts[i], new_sizes[i] = idx[o], sizes[o]
        if None in starts:  # x's size-1 dims start at 0
            zero = self.const(0, scalar(et(idx[0]))).result
            starts = [zero if v is None else v for v in starts]
        ds = self.new("dynamic-slice", [x, *starts], sx.with_dims(tuple(new_sizes)),
                      {"dynamic_slice_sizes": tuple(new_sizes)}, like=op)  # fmt: skip
        return self.new("reshape", [ds.result], shape, like=op)


class AddOfDynamicUpdateSliceOfZeros(Simplification):
    """`add(x, dynamic-update-slice(broadcast(0), u, i...)) -> dynamic-update-slice(x,
    add(dynamic-slice(x, i...), u), i...)` (either operand order; outside the update x + 0
    is x, except that a float -0 + 0 is +0: for floats it needs `enable-floats-are-real`)."""

    OPCODES = ("add",)
    OPERAND_FROM = frozenset({"dynamic-update-slice"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        for x, d in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
            dus = src(d, "dynamic-update-slice")
            if dus is None:
                continue
            b = is_scalar_broadcast(dus.operands[0])
            if b is None or not is_zero(b.operands[0]):
                continue
            u, *idx = dus.operands[1:]
            su = array(value_shape(u))
            if su is None or su.is_dynamic or et(u) != et(op):
                continue
            part = self.new("dynamic-slice", [x, *idx], su,
                            {"dynamic_slice_sizes": su.dims}, like=op)  # fmt: skip
            added = self.new("add", [part.result, u], su, like=op)
            return self.new("dynamic-update-slice", [x, added.result, *idx], op.shape, like=op)
        return None


class ReshapeOfDynamicUpdateSlice(Simplification):
    """`reshape(dynamic-update-slice(a, u, i...)) -> dynamic-update-slice(reshape(a),
    reshape(u), i'...)` when the reshape only inserts or deletes size-1 dims (i' drops their
    indices, 0 for the new ones; the dynamic-update-slice has one use and no sharding)."""

    OPCODES = ("reshape",)
    OPERAND_FROM = frozenset({"dynamic-update-slice"})

    def rewrite(self, op: HloOp):
        dus = src(op.operands[0], "dynamic-update-slice")
        shape = array(op.shape)
        if dus is None or shape is None or self.opts.is_layout_sensitive:
            return None
        if not dus.result.has_one_use() or dus.attr("sharding") is not None:
            return None
        a, u, *idx = dus.operands
        if owner(a) is not None and owner(a).attr("sharding") is not None:  # type: ignore[union-attr]
            return None
        sa, su = array(value_shape(a)), array(value_shape(u))
        if sa is None or su is None or sa.is_dynamic or shape.is_dynamic or not idx:
            return None
        kept_in = [d for d, n in enumerate(sa.dims) if n != 1]
        if [sa.dims[d] for d in kept_in] != [n for n in shape.dims if n != 1]:
            return None  # (the reshape moves elements across dims)
        zero = self.const(0, scalar(et(idx[0])))
        new_idx, new_u, k = [], [], 0
        for n in shape.dims:
            if n == 1:
                new_idx.append(zero.result)
                new_u.append(1)
            else:
                d = kept_in[k]
                k += 1
                new_idx.append(idx[d])
                new_u.append(su.dims[d])
        ra = self.new("reshape", [a], shape, like=op)
        ru = self.new("reshape", [u], su.with_dims(tuple(new_u)), like=op)
        return self.new("dynamic-update-slice", [ra.result, ru.result, *new_idx], shape,
                        like=dus)  # fmt: skip


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
DYNAMIC_SLICES: tuple[type[Simplification], ...] = (
    DynamicSliceFull, DynamicUpdateSliceFull, DynamicSliceConstantIndices,
    DynamicSliceOfScalarBroadcast, DynamicUpdateSliceEmptyUpdate,
    DynamicUpdateSliceOfBroadcastToPad, DynamicSliceOfIota, DynamicSliceTrivialIndex,
    DynamicUpdateSliceTrivialIndex, DynamicSliceOfTranspose, DynamicSliceOfBroadcast,
    DynamicSliceOfDegenerateReshape, DynamicSliceOfScaledIota,
)  # fmt: skip
"""Full, constant-index and trivial dynamic slices and updates, of iotas and broadcasts."""

OF_UPDATES: tuple[type[Simplification], ...] = (
    AddOfDynamicUpdateSliceOfZeros, ReshapeOfDynamicUpdateSlice,
)  # fmt: skip
"""Adds and reshapes of dynamic-update-slices (after the add and reshape families)."""

PATTERNS: tuple[type[Simplification], ...] = (*DYNAMIC_SLICES, *OF_UPDATES)
"""This family's rewrites, in the order they fire."""
