"""`algsimp` family: reshapes that leave some dimensions as they are, worked out from the
common factors of two shapes (XLA's `CommonFactors`): a reshape of a broadcast or of an
iota, a broadcast of a reshape that only inserts size-1 dimensions, a broadcast of an iota,
an iota along a size-1 dimension."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import FLOATS, ArrayShape, common_factors
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, src
from hlopass.rewriting import value_shape

# Mantissa bits (with the implicit one) of the float types: integers up to 2**bits are exact.
_EXACT_INTEGER_BITS = {"f64": 53, "f32": 24, "f16": 11, "bf16": 8}


def unmodified_dims(a: tuple[int, ...], b: tuple[int, ...]) -> list[tuple[int, int]]:
    """(input dim, output dim) of the dims a reshape from `a` to `b` keeps as they are: the
    common-factor groups of one dim on each side (XLA's `DimensionsUnmodifiedByReshape`)."""
    cf = common_factors(a, b)
    return [
        cf[k] for k in range(len(cf) - 1)
        if cf[k + 1][0] - cf[k][0] == 1 and cf[k + 1][1] - cf[k][1] == 1
    ]  # fmt: skip


def inserted_ones(a: tuple[int, ...], b: tuple[int, ...]) -> list[int] | None:
    """The output dims a reshape from `a` to `b` inserts when all it does is insert size-1
    dims (None when it deletes or regroups any)."""
    inserted, i = [], 0
    for j, n in enumerate(b):
        if i < len(a) and a[i] == n:
            i += 1
        elif n == 1:
            inserted.append(j)
        else:
            return None
    return inserted if i == len(a) else None


class ReshapeOfBroadcastKeepingDims(Simplification):
    """`reshape(broadcast(x, dims)) -> broadcast(x, dims')` when the reshape leaves each
    dim of x as it is (dims' where they land; XLA's `ReshapeLeavesDimensionsUnmodified`)."""

    OPCODES = ("reshape",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        b = src(op.operands[0], "broadcast")
        shape = array(op.shape)
        if b is None or shape is None or shape.is_dynamic or shape.num_elements == 0:
            return None  # (no elements: XLA makes the reshape an empty constant first)
        s = array(b.shape)
        if s is None or s.is_dynamic:
            return None
        dims = tuple(b.attr("dimensions") or ())
        if list(dims) != sorted(dims):
            return None
        kept = dict(unmodified_dims(s.dims, shape.dims))
        if any(d not in kept for d in dims):
            return None
        return self.new("broadcast", [b.operands[0]], shape,
                        {"dimensions": tuple(kept[d] for d in dims)}, like=op)  # fmt: skip


class ReshapeOfIotaToIotas(Simplification):
    """`reshape(iota(d))` where the iota dim d is one common-factor group of the reshape ->
    an iota of the result along the dim d becomes, or when d splits into several dims
    d0..dk, `iota(dk) + iota(dk-1) * n_k + ...` (mixed radix; XLA's rewrite). Float iotas
    only while every index is an exact integer of the type."""

    OPCODES = ("reshape",)
    OPERAND_FROM = frozenset({"iota"})

    def rewrite(self, op: HloOp):
        iota = src(op.operands[0], "iota")
        shape = array(op.shape)
        if iota is None or shape is None or shape.is_dynamic:
            return None
        s = array(iota.shape)
        if s is None or s.is_dynamic:
            return None
        d = iota.attr("iota_dimension")
        cf = common_factors(s.dims, shape.dims)
        at = next((k for k, (i, j) in enumerate(cf) if i == d and j < shape.rank
                   and shape.dims[j] > 1), None)  # fmt: skip
        if at is None or at + 1 >= len(cf) or not any(i == d + 1 for i, _ in cf):
            return None
        t = shape.element_type
        if cf[at + 1][1] - cf[at][1] > 1:  # a sum of products: exact integers only
            if t in ("pred", "c64", "c128"):
                return None
            bits = _EXACT_INTEGER_BITS.get(t)
            if t in FLOATS and (bits is None or s.dims[d] > 2**bits):
                return None
        result = None
        multiplier = 1
        for dim in range(cf[at + 1][1] - 1, cf[at][1] - 1, -1):
            part = self.new("iota", [], shape, {"iota_dimension": dim}, like=iota)
            if result is None:
                result = part
            else:
                scaled = self.new("multiply", [part.result, self.const(multiplier, shape).result],
                                  shape)  # fmt: skip
                result = self.new("add", [result.result, scaled.result], shape)
            multiplier *= shape.dims[dim]
        return result


class BroadcastOfDegenerateReshape(Simplification):
    """`broadcast(reshape(x), dims)` where the reshape only inserts size-1 dims ->
    `broadcast(x, dims without those)`."""

    OPCODES = ("broadcast",)
    OPERAND_FROM = frozenset({"reshape"})

    def rewrite(self, op: HloOp):
        r = src(op.operands[0], "reshape")
        if r is None:
            return None
        s_in, s_out = array(value_shape(r.operands[0])), array(r.shape)
        if s_in is None or s_out is None or s_in.is_dynamic or s_out.is_dynamic:
            return None
        inserted = inserted_ones(s_in.dims, s_out.dims)
        if inserted is None:
            return None
        dims = [d for k, d in enumerate(op.attr("dimensions") or ()) if k not in inserted]
        return self.new("broadcast", [r.operands[0]], op.shape, {"dimensions": tuple(dims)},
                        like=op)  # fmt: skip


class BroadcastOfIota(Simplification):
    """`broadcast(iota(d), dims) -> iota(dims[d])` of the broadcast's shape."""

    OPCODES = ("broadcast",)
    OPERAND_FROM = frozenset({"iota"})

    def rewrite(self, op: HloOp):
        iota = src(op.operands[0], "iota")
        if iota is None or not isinstance(op.shape, ArrayShape) or op.shape.is_dynamic:
            return None
        dims = tuple(op.attr("dimensions") or ())
        return self.new("iota", [], op.shape, {"iota_dimension": dims[iota.attr("iota_dimension")]},
                        like=op)  # fmt: skip


class IotaOfSizeOne(Simplification):
    """`iota(d)` whose dim d has size 1 (or 0) -> `broadcast(0)`: every index is 0."""

    OPCODES = ("iota",)

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        if shape is None or shape.is_dynamic or shape.dims[op.attr("iota_dimension")] > 1:
            return None
        return self.const(False if shape.element_type == "pred" else 0, shape)


def only_size_one_changes(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """A reshape from `a` to `b` only inserts or deletes size-1 dims."""
    return [n for n in a if n != 1] == [n for n in b if n != 1]


PATTERNS: tuple[type[Simplification], ...] = (
    ReshapeOfBroadcastKeepingDims, ReshapeOfIotaToIotas, BroadcastOfDegenerateReshape,
    BroadcastOfIota, IotaOfSizeOne,
)  # fmt: skip
"""This family's rewrites, in the order they fire."""
