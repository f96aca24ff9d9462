"""`algsimp` family: pad."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.ir import attrs as A
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, is_scalar_broadcast, single_use, src
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


class PadTrivialInterior(Simplification):
    """`pad(x, v)` with interior padding on a dim where x has size 1 -> the same pad without
    it (between one element there is nothing to pad)."""

    OPCODES = ("pad",)

    def rewrite(self, op: HloOp):
        x = array(value_shape(op.operands[0]))
        if x is None or x.is_dynamic:
            return None
        pads = tuple(op.attr("padding"))
        if not any(p.interior and n == 1 for p, n in zip(pads, x.dims, strict=True)):
            return None
        new = tuple(
            type(p)(p.low, p.high, 0) if n == 1 else p for p, n in zip(pads, x.dims, strict=True)
        )
        return self.new("pad", list(op.operands), op.shape, {"padding": new}, like=op)


class PadNegativeToSlice(Simplification):
    """`pad(x, v)` with negative edge padding -> `slice(pad(x, v))`: the pad keeps only the
    non-negative edges, the slice cuts what the negative ones remove
    (`enable-negative-padding-replacement`)."""

    OPCODES = ("pad",)
    OPTION = "enable_negative_padding_replacement"

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        if shape is None or shape.is_dynamic:
            return None
        pads = tuple(op.attr("padding"))
        if not any(p.low < 0 or p.high < 0 for p in pads):
            return None
        kept = tuple(type(p)(max(p.low, 0), max(p.high, 0), p.interior) for p in pads)
        wide = shape.with_dims(tuple(
            n - min(p.low, 0) - min(p.high, 0) for n, p in zip(shape.dims, pads, strict=True)
        ))  # fmt: skip
        padded = self.new("pad", list(op.operands), wide, {"padding": kept}, like=op)
        cut = tuple(
            A.SliceDim(-min(p.low, 0), w + min(p.high, 0), 1)
            for p, w in zip(pads, wide.dims, strict=True)
        )
        return self.new("slice", [padded.result], shape, {"slice": cut}, like=op)


class PadOfBroadcastReorder(Simplification):
    """`pad(broadcast(x), v) -> broadcast(pad(broadcast(x), v))` where every dim x maps to is
    padded and some dim is not: the inner broadcast and pad hold only the padded dims (the
    broadcast used only by the pad; as XLA)."""

    OPCODES = ("pad",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        b = src(op.operands[0], "broadcast")
        shape, sb = array(op.shape), array(value_shape(op.operands[0]))
        if b is None or shape is None or sb is None or not single_use(b.result):
            return None
        if shape.is_dynamic or sb.is_dynamic:
            return None
        pads = tuple(op.attr("padding"))
        padded = [d for d, p in enumerate(pads) if (p.low, p.high, p.interior) != (0, 0, 0)]
        bdims = tuple(b.attr("dimensions") or ())
        if len(padded) >= shape.rank or not padded or any(d not in padded for d in bdims):
            return None
        inner = self.new("broadcast", [b.operands[0]],
                         sb.with_dims(tuple(sb.dims[d] for d in padded)),
                         {"dimensions": tuple(padded.index(d) for d in bdims)}, like=b)  # fmt: skip
        p = self.new("pad", [inner.result, op.operands[1]],
                     shape.with_dims(tuple(shape.dims[d] for d in padded)),
                     {"padding": tuple(pads[d] for d in padded)}, like=op)  # fmt: skip
        return self.new("broadcast", [p.result], shape, {"dimensions": tuple(padded)}, like=op)


PATTERNS: tuple[type[Simplification], ...] = (
    PadNoop, PadOfEmpty, PadOfScalarBroadcast, PadOfBroadcast, PadTrivialInterior,
    PadNegativeToSlice, PadOfBroadcastReorder,
)  # fmt: skip
"""This family's rewrites, in the order they fire."""
