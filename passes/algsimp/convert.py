"""`algsimp` family: convert and bitcast-convert."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
    et,
    src,
    widens_exactly,
)
from hlopass.rewriting import (
    owner,
    same_shape,
    value_shape,
)
from hlopass.shape import ELEMENT_BITS, is_integral


class ConvertNoop(Simplification):
    """`convert(x)` to x's own element type -> x (and the same for bitcast-convert)."""

    OPCODES = ("convert", "bitcast-convert")

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        return x if same_shape(value_shape(x), op.shape) else None


class ConvertRoundTrip(Simplification):
    """`convert(convert(x: T -> U) -> T)` -> x when U holds every T value."""

    OPCODES = ("convert",)
    OPERAND_FROM = frozenset({"convert"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "convert")
        if inner is None:
            return None
        x = inner.operands[0]
        if not same_shape(value_shape(x), op.shape):
            return None
        return x if widens_exactly(et(x), et(inner)) else None


_WRAPPING_OPS = ("add", "subtract", "multiply", "and", "or", "xor")
"""Integer ops whose low bits depend only on the operands' low bits (arithmetic wraps)."""
_ORDER_OPS = ("maximum", "minimum")
"""Integer ops that commute with a value-preserving widening."""


class ConvertNarrowing(Simplification):
    """`convert(op(convert(a), convert(b)))` back to a's integer type -> `op(a, b)`:
    add/subtract/multiply/and/or/xor in a wider integer type (wrapping arithmetic: the low
    bits are the same), maximum/minimum when the widening keeps every value."""

    OPCODES = ("convert",)
    OPERAND_FROM = frozenset(_WRAPPING_OPS + _ORDER_OPS)

    def rewrite(self, op: HloOp):
        inner = owner(op.operands[0])
        shape = array(op.shape)
        if inner is None or shape is None or len(inner.operands) != 2:
            return None
        if inner.OPCODE not in _WRAPPING_OPS + _ORDER_OPS:
            return None
        t, wide = shape.element_type, et(inner)
        if not (is_integral(t) and is_integral(wide)) or ELEMENT_BITS[wide] < ELEMENT_BITS[t]:
            return None
        narrow = []
        for v in inner.operands:
            c = src(v, "convert")
            if c is None or et(c.operands[0]) != t:
                return None
            if inner.OPCODE in _ORDER_OPS and not widens_exactly(t, wide):
                return None
            narrow.append(c.operands[0])
        if not all(same_shape(value_shape(v), shape) for v in narrow):
            return None
        return self.new(inner.OPCODE, narrow, shape, like=op)


class BitcastConvertChain(Simplification):
    """`bitcast-convert(bitcast-convert(x: T -> U) -> V)` -> `bitcast-convert(x -> V)`,
    or x when V is T (element types of one width, so no shape change)."""

    OPCODES = ("bitcast-convert",)
    OPERAND_FROM = frozenset({"bitcast-convert"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "bitcast-convert")
        if inner is None:
            return None
        x = inner.operands[0]
        bits = {ELEMENT_BITS.get(et(v), -1) for v in (x, inner.result, op.result)}
        if len(bits) != 1 or -1 in bits:
            return None
        if same_shape(value_shape(x), op.shape):
            return x
        return self.new("bitcast-convert", [x], op.shape, like=op)
