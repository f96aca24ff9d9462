"""`algsimp` family: transpose and reshape."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
    src,
)
from hlopass.rewriting import (
    value_shape,
)


class ReshapeNoop(Simplification):
    """`reshape(x)` to x's own dims -> x."""

    OPCODES = ("reshape",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = array(value_shape(x))
        return x if s is not None and not s.is_dynamic and s.dims == op.shape.dims else None  # type: ignore[attr-defined]


class ReshapeOfReshape(Simplification):
    """`reshape(reshape(x)) -> reshape(x)`."""

    OPCODES = ("reshape",)
    OPERAND_FROM = frozenset({"reshape"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "reshape")
        if inner is None or array(op.shape) is None or op.shape.is_dynamic:  # type: ignore[union-attr]
            return None
        return self.new("reshape", [inner.operands[0]], op.shape, like=op)


class ReshapeOfScalarBroadcast(Simplification):
    """`reshape(broadcast(scalar)) -> broadcast(scalar)`."""

    OPCODES = ("reshape",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        b = src(op.operands[0], "broadcast")
        if b is None or array(value_shape(b.operands[0])) is None:
            return None
        if value_shape(b.operands[0]).rank != 0:  # type: ignore[attr-defined]
            return None
        return self.new("broadcast", [b.operands[0]], op.shape, {"dimensions": ()}, like=op)


class TransposeIdentity(Simplification):
    """`transpose(x, dimensions={0,1,..})` -> x."""

    OPCODES = ("transpose",)

    def rewrite(self, op: HloOp):
        perm = tuple(op.attr("dimensions") or ())
        return op.operands[0] if perm == tuple(range(len(perm))) else None


class TransposeOfTranspose(Simplification):
    """`transpose(transpose(x, p1), p2) -> transpose(x, p1[p2])`."""

    OPCODES = ("transpose",)
    OPERAND_FROM = frozenset({"transpose"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "transpose")
        if inner is None:
            return None
        p1 = inner.attr("dimensions")
        p2 = op.attr("dimensions")
        perm = tuple(p1[i] for i in p2)
        return self.new("transpose", [inner.operands[0]], op.shape, {"dimensions": perm}, like=op)


class TransposeIsReshape(Simplification):
    """`transpose(x, perm) -> reshape(x)` when perm moves only size-1 dimensions (the other
    dimensions keep their order, so the elements keep theirs)."""

    OPCODES = ("transpose",)
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = array(value_shape(x))
        if s is None or s.is_dynamic:
            return None
        perm = tuple(op.attr("dimensions") or ())
        if perm == tuple(range(len(perm))):
            return None  # TransposeIdentity
        big = [p for p in perm if s.dims[p] != 1]
        if big != sorted(big):
            return None
        return self.new("reshape", [x], op.shape, like=op)


class ReshapeOfIota(Simplification):
    """`reshape(iota(d))` that only adds or removes size-1 dimensions -> `iota(d')` of the
    reshape's shape (d' the position dimension d moves to)."""

    OPCODES = ("reshape",)
    OPERAND_FROM = frozenset({"iota"})

    def rewrite(self, op: HloOp):
        iota = src(op.operands[0], "iota")
        shape = array(op.shape)
        if iota is None or shape is None or shape.is_dynamic:
            return None
        s = array(value_shape(op.operands[0]))
        d = iota.attr("iota_dimension")
        big_in = [(i, n) for i, n in enumerate(s.dims) if n != 1]  # type: ignore[union-attr]
        big_out = [(i, n) for i, n in enumerate(shape.dims) if n != 1]
        if [n for _, n in big_in] != [n for _, n in big_out]:
            return None  # the reshape regroups elements
        if s.dims[d] == 1:  # type: ignore[union-attr]
            return self.const(0, shape)  # every element of a size-1 iota dimension is 0
        new_d = big_out[[i for i, _ in big_in].index(d)][0]
        return self.new("iota", [], shape, {"iota_dimension": new_d}, like=iota)
