"""`algsimp` family: sqrt / rsqrt / pow / exp / log identities."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, et, is_non_negative, splat_is, src
from hlopass.rewriting import (
    is_one,
    is_zero,
)
from hlopass.shape import is_float


class DivideBySqrt(Simplification):
    """`divide(a, sqrt(b)) -> multiply(a, rsqrt(b))`."""

    OPCODES = ("divide",)
    OPERAND_FROM = frozenset({"sqrt"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a, s = op.operands
        sq = src(s, "sqrt")
        if sq is None:
            return None
        r = self.new("rsqrt", [sq.operands[0]], sq.shape, like=sq)
        return self.new("multiply", [a, r.result], op.shape, like=op)


class LogOfExp(Simplification):
    """`log(exp(x)) -> x` (exp may overflow to inf, so float-unsafe)."""

    OPCODES = ("log",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "exponential")
        return inner.operands[0] if inner is not None else None


class PowerOne(Simplification):
    """`power(x, 1) -> x`."""

    OPCODES = ("power",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        return x if is_one(c) else None


class PowerZero(Simplification):
    """`power(x, 0) -> 1` (pow(x, 0) is 1 for every x, nan included)."""

    OPCODES = ("power",)

    def rewrite(self, op: HloOp):
        _x, c = op.operands
        shape = array(op.shape)
        if shape is None or not is_zero(c):
            return None
        return self.const(1, shape)


class PowerTwo(Simplification):
    """`power(x, 2) -> multiply(x, x)`."""

    OPCODES = ("power",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        if not splat_is(c, 2):
            return None
        return self.new("multiply", [x, x], op.shape, like=op)


class PowerThree(Simplification):
    """`power(x, 3) -> multiply(x, multiply(x, x))` (XLA's rewrite, for GELU's cube; XLA's
    algsimp has no cbrt identity, and cbrt of a constant is constant folding's)."""

    OPCODES = ("power",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        if not splat_is(c, 3):
            return None
        sq = self.new("multiply", [x, x], op.shape, like=op)
        return self.new("multiply", [x, sq.result], op.shape, like=op)


class PowerMinusOne(Simplification):
    """`power(x, -1) -> divide(1, x)` (floats)."""

    OPCODES = ("power",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        shape = array(op.shape)
        if shape is None or not is_float(shape.element_type) or not splat_is(c, -1):
            return None
        return self.new("divide", [self.const(1, shape).result, x], shape, like=op)


class PowerHalfToSqrt(Simplification):
    """`power(x, 0.5) -> sqrt(x)` for x known to be >= 0 (pow(-0, 0.5) is +0 and
    pow(-inf, 0.5) is inf, where sqrt gives -0 and nan)."""

    OPCODES = ("power",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        if not is_float(et(op)) or not splat_is(c, 0.5) or not is_non_negative(x):
            return None
        return self.new("sqrt", [x], op.shape, like=op)


class ExpOfZero(Simplification):
    """`exponential(0) -> 1` (a splat zero, either sign)."""

    OPCODES = ("exponential",)

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        if shape is None or not is_float(shape.element_type) or not is_zero(op.operands[0]):
            return None
        return self.const(1, shape)


class DivideByRsqrt(Simplification):
    """`divide(a, rsqrt(b)) -> multiply(a, sqrt(b))` (single use of the rsqrt; the rounding
    changes, so for floats it needs `enable-floats-are-real`)."""

    OPCODES = ("divide",)
    OPERAND_FROM = frozenset({"rsqrt"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a, r = op.operands
        rs = src(r, "rsqrt")
        if rs is None or not r.has_one_use():
            return None
        s = self.new("sqrt", [rs.operands[0]], rs.shape, like=rs)
        return self.new("multiply", [a, s.result], op.shape, like=op)


class RsqrtOfReciprocal(Simplification):
    """`rsqrt(divide(1, x)) -> sqrt(x)` for x known to be >= 0 (x = -0 gives nan against
    -0; for x > 0 the two roundings differ: it needs `enable-floats-are-real`)."""

    OPCODES = ("rsqrt",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        d = src(op.operands[0], "divide")
        if d is None or not is_float(et(op)) or not splat_is(d.operands[0], 1.0):
            return None
        x = d.operands[1]
        if not is_non_negative(x):
            return None
        return self.new("sqrt", [x], op.shape, like=op)


class RsqrtOfPowerMinusTwo(Simplification):
    """`rsqrt(power(x, -2)) -> abs(x)` (x^-2 rounds, and rsqrt rounds again: it needs
    `enable-floats-are-real`)."""

    OPCODES = ("rsqrt",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        p = src(op.operands[0], "power")
        if p is None or not is_float(et(op)) or not splat_is(p.operands[1], -2.0):
            return None
        return self.new("abs", [p.operands[0]], op.shape, like=op)
