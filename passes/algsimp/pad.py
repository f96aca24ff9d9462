"""`algsimp` family: pad."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, is_scalar_broadcast, src
from hlopass.rewriting import value_shape


class PadNoop(Simplification):
    """`pad(x, v), padding=0_0x0_0...` -> x."""

    OPCODES = ("pad",)

    def rewrite(self, op: HloOp):
        if all(p.low == 0 and p.high == 0 and p.interior == 0 for p in op.attr("padding")):
            return op.operands[0]
        return None


class PadOfEmpty(Simplification):
    """`pad(x, v) -> broadcast(v)` of the pad's shape when x has no elements (every output
    element is padding)."""

    OPCODES = ("pad",)

    def rewrite(self, op: HloOp):
        x, shape = array(value_shape(op.operands[0])), array(op.shape)
        if x is None or shape is None or x.is_dynamic or x.num_elements != 0:
            return None
        return self.new("broadcast", [op.operands[1]], shape, {"dimensions": ()}, like=op)


class PadOfScalarBroadcast(Simplification):
    """`pad(broadcast(s), s) -> broadcast(s)` of the pad's shape (s a scalar: the padded
    array and its padding hold the same value everywhere)."""

    OPCODES = ("pad",)

    def rewrite(self, op: HloOp):
        b = is_scalar_broadcast(op.operands[0])
        if b is None or b.operands[0] is not op.operands[1]:
            return None
        return self.new("broadcast", [op.operands[1]], op.shape, {"dimensions": ()}, like=op)


class PadOfBroadcast(Simplification):
    """`pad(broadcast(x, dims), v) -> broadcast(pad(x, v), dims)` when only dims that x maps
    to are padded: the pad then runs on the smaller x."""

    OPCODES = ("pad",)

    def rewrite(self, op: HloOp):
        b = src(op.operands[0], "broadcast")
        if b is None or is_scalar_broadcast(op.operands[0]) is not None:
            return None  # (a scalar's broadcast: PadOfScalarBroadcast or kept)
        x, sx, shape = b.operands[0], array(value_shape(b.operands[0])), array(op.shape)
        if sx is None or shape is None or sx.is_dynamic or shape.is_dynamic:
            return None
        dims = tuple(b.attr("dimensions") or ())
        pads = tuple(op.attr("padding"))
        if any((p.low, p.high, p.interior) != (0, 0, 0)
               for d, p in enumerate(pads) if d not in dims):  # fmt: skip
            return None  # a broadcast (non-mapped) dimension is padded
        small = sx.with_dims(tuple(shape.dims[d] for d in dims))
        p = self.new("pad", [x, op.operands[1]], small,
                     {"padding": tuple(pads[d] for d in dims)}, like=op)  # fmt: skip
        return self.new("broadcast", [p.result], shape, {"dimensions": dims}, like=op)
