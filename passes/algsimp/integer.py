"""`algsimp` family: Integer identities: rewrites exact for integers (float-unsafe for floats)."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
    commuted,
    power_of_two_exponent,
    src,
)
from hlopass.rewriting import (
    is_zero,
    splat_value,
)
from hlopass.shape import ArrayShape, is_integral


class SubtractSelf(Simplification):
    """`subtract(x, x) -> 0` (integers; for floats x may be inf or nan)."""

    OPCODES = ("subtract",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a, b = op.operands
        if a is not b or not isinstance(op.shape, ArrayShape):
            return None
        return self.const(0, op.shape)


class MultiplyZero(Simplification):
    """`multiply(x, 0) -> 0` (integers; for floats 0*inf is nan)."""

    OPCODES = ("multiply",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        for _x, c in commuted(op):
            if is_zero(c):
                return c
        return None


class DivideUnsignedPowerOfTwo(Simplification):
    """`divide(x, 2^k) -> shift-right-logical(x, k)` (unsigned integers)."""

    OPCODES = ("divide",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        shape = array(op.shape)
        if shape is None or not shape.element_type.startswith("u"):
            return None
        k = power_of_two_exponent(splat_value(c))
        if k is None:
            return None
        return self.new("shift-right-logical", [x, self.const(k, shape).result], shape, like=op)


class RemainderUnsignedPowerOfTwo(Simplification):
    """`remainder(x, 2^k) -> and(x, 2^k - 1)` (unsigned integers)."""

    OPCODES = ("remainder",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        shape = array(op.shape)
        if shape is None or not shape.element_type.startswith("u"):
            return None
        v = splat_value(c)
        k = power_of_two_exponent(v)
        if k is None:
            return None
        return self.new("and", [x, self.const((1 << k) - 1, shape).result], shape, like=op)


class XorSelf(Simplification):
    """`xor(x, x) -> 0` (integers and pred)."""

    OPCODES = ("xor",)

    def rewrite(self, op: HloOp):
        a, b = op.operands
        shape = array(op.shape)
        if a is not b or shape is None:
            return None
        return self.const(False if shape.element_type == "pred" else 0, shape)


class AddOfSubtractCancel(Simplification):
    """`add(subtract(y, x), x) -> y` (and `add(x, subtract(y, x))`; exact for integers, whose
    arithmetic wraps; for floats the subtraction rounds)."""

    OPCODES = ("add",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        for s_v, x in commuted(op):
            s = src(s_v, "subtract")
            if s is not None and s.operands[1] is x:
                return s.operands[0]
        return None


class RemainderOfIota(Simplification):
    """`remainder(iota, c) -> iota` when c is a constant larger than every iota value
    (integers: 0 <= i < n <= c)."""

    OPCODES = ("remainder",)

    def rewrite(self, op: HloOp):
        i_v, c = op.operands
        iota = src(i_v, "iota")
        shape = array(op.shape)
        if iota is None or shape is None or not is_integral(shape.element_type):
            return None
        n = shape.dims[iota.attr("iota_dimension")]
        v = splat_value(c)
        if v is None or shape.is_dynamic:
            return None
        return i_v if int(v) >= n else None
