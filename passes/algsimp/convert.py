"""`algsimp` family: convert and bitcast-convert."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ELEMENT_BITS, is_integral
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
    et,
    single_use,
    src,
    widens_exactly,
)
from hlopass.rewriting import (
    const_array,
    owner,
    same_shape,
    value_shape,
)


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


class ConvertOfConstant(Simplification):
    """`convert(constant)` -> a constant of the converted type (option
    `use-convert-constant-folding`; not to a wider type nor below 8 bits, the constant used
    only here: as XLA)."""

    OPCODES = ("convert",)
    OPERAND_FROM = frozenset({"constant"})
    OPTION = "use_convert_constant_folding"

    def rewrite(self, op: HloOp):
        c = src(op.operands[0], "constant")
        shape = array(op.shape)
        if c is None or shape is None or not single_use(c.result):
            return None
        to, frm = ELEMENT_BITS.get(shape.element_type), ELEMENT_BITS.get(et(c))
        if to is None or frm is None or to > frm or to < 8:
            return None
        arr = const_array(c.result)
        if arr is None:
            return None
        from hlopass.interpreter.elementwise import convert  # (what XLA-CPU's convert gives)
        from hlopass.ir.literal import numpy_dtype

        return self.array_const(convert(arr, numpy_dtype(shape.element_type)), shape)


class BitcastConvertToBitcast(Simplification):
    """`bitcast-convert(x) -> bitcast(x)` with fixed layouts when the bytes stay where
    they are: the shapes equal but for the element type, or the dim that splits/merges the
    elements is the most minor and densely packed (option
    `rewrite-no-op-bitcast-convert-to-bitcast`, layout-sensitive only: as XLA)."""

    OPCODES = ("bitcast-convert",)
    OPTION = "rewrite_no_op_bitcast_convert_to_bitcast"

    def rewrite(self, op: HloOp):
        if not self.opts.is_layout_sensitive:
            return None
        x = op.operands[0]
        sx, sy = array(value_shape(x)), array(op.shape)
        if sx is None or sy is None:
            return None
        if sx.with_element_type(sy.element_type) == sy:
            return self.new("bitcast", [x], op.shape, like=op)
        wide = sx if sx.rank > sy.rank else sy
        if wide.rank == 0 or wide.minor_to_major[0] != wide.rank - 1:
            return None
        bits = 8 if wide.element_type == "pred" else ELEMENT_BITS.get(wide.element_type)
        if bits is None:
            return None
        packed = wide.layout.element_size_bits if wide.layout is not None else 0
        if (packed == 0 and bits % 8 != 0) or (packed != 0 and packed != bits):
            return None
        return self.new("bitcast", [x], op.shape, like=op)


class ConvertNarrowingUnsignedDivide(Simplification):
    """`convert(op(convert(a), convert(b)))` back to a's unsigned type -> `op(a, b)` for
    divide and remainder through a wider unsigned type (the quotient and remainder fit a's
    type; x / 0 is all ones and x % 0 is x in either width)."""

    OPCODES = ("convert",)
    OPERAND_FROM = frozenset({"divide", "remainder"})

    def rewrite(self, op: HloOp):
        inner = owner(op.operands[0])
        shape = array(op.shape)
        if inner is None or shape is None or inner.OPCODE not in ("divide", "remainder"):
            return None
        t, wide = shape.element_type, et(inner)
        if not (t.startswith("u") and wide.startswith("u")) or t == wide:
            return None
        if ELEMENT_BITS[wide] < ELEMENT_BITS[t]:
            return None
        narrow = []
        for v in inner.operands:
            c = src(v, "convert")
            if c is None or et(c.operands[0]) != t:
                return None
            narrow.append(c.operands[0])
        if not all(same_shape(value_shape(v), shape) for v in narrow):
            return None
        return self.new(inner.OPCODE, narrow, shape, like=op)


class BitcastConvertOfConcatenate(Simplification):
    """`bitcast-convert(concatenate(bitcast-convert(a), ...)) -> concatenate(a, ...)` when
    the outer convert goes back to the type of a, b, ... (types of one width)."""

    OPCODES = ("bitcast-convert",)
    OPERAND_FROM = frozenset({"concatenate"})

    def rewrite(self, op: HloOp):
        cat = src(op.operands[0], "concatenate")
        if cat is None:
            return None
        ins = []
        for v in cat.operands:
            b = src(v, "bitcast-convert")
            if b is None or et(b.operands[0]) != et(op):
                return None
            sa, sv = array(value_shape(b.operands[0])), array(value_shape(v))
            if sa is None or sv is None or sa.dims != sv.dims:
                return None
            ins.append(b.operands[0])
        return self.new("concatenate", ins, op.shape,
                        {"dimensions": cat.attr("dimensions")}, like=cat)  # fmt: skip


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
CHAINS: tuple[type[Simplification], ...] = (
    ConvertNoop, ConvertRoundTrip, ConvertNarrowing, BitcastConvertChain,
    BitcastConvertToBitcast, BitcastConvertOfConcatenate,
)  # fmt: skip
"""No-op, round-trip and narrowing converts, bitcast-convert chains."""

FOLDING: tuple[type[Simplification], ...] = (ConvertOfConstant, ConvertNarrowingUnsignedDivide)
"""Converts of constants and of unsigned divides (after the broadcast sinking of convert)."""

PATTERNS: tuple[type[Simplification], ...] = (*CHAINS, *FOLDING)
"""This family's rewrites, in the order they fire."""
