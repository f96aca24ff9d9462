"""`algsimp` family: sqrt / rsqrt / pow / exp / log identities."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import is_float, is_integral
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, et, is_non_negative, splat_is, src
from hlopass.rewriting import (
    is_one,
    is_zero,
    value_shape,
)


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


class DivideByExp(Simplification):
    """`divide(a, exp(b)) -> multiply(a, exp(negate(b)))` (floats: exp(b) may overflow
    where exp(-b) underflows)."""

    OPCODES = ("divide",)
    OPERAND_FROM = frozenset({"exponential"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a, e_v = op.operands
        e = src(e_v, "exponential")
        if e is None or is_integral(et(op)):
            return None
        n = self.new("negate", [e.operands[0]], e.shape, like=e)
        ne = self.new("exponential", [n.result], e.shape, like=e)
        return self.new("multiply", [a, ne.result], op.shape, like=op)


class DivideByPower(Simplification):
    """`divide(a, power(b, c)) -> multiply(a, power(b, negate(c)))` (not integers, whose
    negative powers truncate to 0; for floats the rounding differs)."""

    OPCODES = ("divide",)
    OPERAND_FROM = frozenset({"power"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a, p_v = op.operands
        pw = src(p_v, "power")
        if pw is None or is_integral(et(op)):
            return None
        b, c = pw.operands
        n = self.new("negate", [c], value_shape(c), like=pw)
        np_ = self.new("power", [b, n.result], pw.shape, like=pw)
        return self.new("multiply", [a, np_.result], op.shape, like=op)


class _OfTwoExps(Simplification):
    """`op(exp(a), exp(b)) -> exp(EXPONENTS(a, b))`: the guard and the build the two exp
    rules share (not a pattern itself: PATTERNS lists the subclasses)."""

    OPERAND_FROM = frozenset({"exponential"})
    FLOAT_UNSAFE = True
    EXPONENTS = ""

    def rewrite(self, op: HloOp):
        ea, eb = (src(v, "exponential") for v in op.operands)
        if ea is None or eb is None:
            return None
        x = self.new(self.EXPONENTS, [ea.operands[0], eb.operands[0]], op.shape, like=op)
        return self.new("exponential", [x.result], op.shape, like=op)


class ExpDivideExp(_OfTwoExps):
    """`divide(exp(a), exp(b)) -> exp(subtract(a, b))` (floats: the quotient of two
    overflowing exps is nan where exp(a - b) is finite)."""

    OPCODES = ("divide",)
    EXPONENTS = "subtract"


class ExpMultiplyExp(_OfTwoExps):
    """`multiply(exp(a), exp(b)) -> exp(add(a, b))` (floats: the rounding differs)."""

    OPCODES = ("multiply",)
    EXPONENTS = "add"


class PowerOfExp(Simplification):
    """`power(exp(a), b) -> exp(multiply(a, b))` (floats: exp(a) may overflow where
    exp(a * b) does not)."""

    OPCODES = ("power",)
    OPERAND_FROM = frozenset({"exponential"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        e_v, b = op.operands
        e = src(e_v, "exponential")
        if e is None:
            return None
        m = self.new("multiply", [e.operands[0], b], op.shape, like=op)
        return self.new("exponential", [m.result], op.shape, like=op)


class LogOfSqrt(Simplification):
    """`log(sqrt(a)) -> multiply(log(a), 0.5)`; `log(rsqrt(a)) -> multiply(log(a), -0.5)`
    (floats: the rounding differs)."""

    OPCODES = ("log",)
    OPERAND_FROM = frozenset({"sqrt", "rsqrt"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        for opcode, k in (("sqrt", 0.5), ("rsqrt", -0.5)):
            r = src(op.operands[0], opcode)
            if r is None or shape is None or not is_float(shape.element_type):
                continue
            lg = self.new("log", [r.operands[0]], op.shape, like=op)
            return self.new("multiply", [lg.result, self.const(k, shape).result], shape, like=op)
        return None


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
        if is_non_negative(p.operands[0]):
            return p.operands[0]  # (|x| is x: no abs, as XLA's x >= 0 form)
        return self.new("abs", [p.operands[0]], op.shape, like=op)


class MultiplySqrtSelf(Simplification):
    """`multiply(sqrt(x), sqrt(x)) -> x` for x known to be >= 0 (each sqrt rounds and the
    product rounds again: it needs `enable-floats-are-real`)."""

    OPCODES = ("multiply",)
    OPERAND_FROM = frozenset({"sqrt"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a, b = (src(v, "sqrt") for v in op.operands)
        if a is None or b is None or a.operands[0] is not b.operands[0]:
            return None
        x = a.operands[0]
        return x if is_non_negative(x) else None


class MultiplyRsqrtSelf(Simplification):
    """`multiply(rsqrt(x), rsqrt(x)) -> divide(1, x)` for x known to be >= 0 (the roundings
    differ: it needs `enable-floats-are-real`)."""

    OPCODES = ("multiply",)
    OPERAND_FROM = frozenset({"rsqrt"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a, b = (src(v, "rsqrt") for v in op.operands)
        shape = array(op.shape)
        if a is None or b is None or a.operands[0] is not b.operands[0] or shape is None:
            return None
        x = a.operands[0]
        if not is_non_negative(x):
            return None
        one = self.const(1, shape)
        return self.new("divide", [one.result, x], op.shape, like=op)


class SqrtOfSquare(Simplification):
    """`sqrt(multiply(a, a)) -> abs(a)` (real floats; a*a may overflow or round to 0, where
    abs does not: XLA gates it on fast math, here `enable-floats-are-real`)."""

    OPCODES = ("sqrt",)
    OPERAND_FROM = frozenset({"multiply"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        m = src(op.operands[0], "multiply")
        if m is None or m.operands[0] is not m.operands[1] or not is_float(et(op)):
            return None
        if not self.opts.floats_are_real:
            return None  # (XLA: only with fast math, also for integers it has no sqrt of)
        return self.new("abs", [m.operands[0]], op.shape, like=op)


class LogOfPower(Simplification):
    """`log(pow(a, b)) -> select(b == 0, 0, log(abs(a)) * b)` (`log(a) * b` for complex
    a; real floats: a negative a with a fractional b is nan before, finite after)."""

    OPCODES = ("log",)
    OPERAND_FROM = frozenset({"power"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        pw = src(op.operands[0], "power")
        shape = array(op.shape)
        if pw is None or shape is None:
            return None
        a, b = pw.operands
        complex_ = shape.element_type in ("c64", "c128")
        base = a if complex_ else self.new("abs", [a], shape, like=op).result
        lg = self.new("log", [base], shape, like=op)
        nonzero = self.new("multiply", [lg.result, b], shape, like=op)
        zero_b = self.const(0, shape)
        is_zero_b = self.new("compare", [b, zero_b.result], shape.with_element_type("pred"),
                             {"direction": "EQ"}, like=op)  # fmt: skip
        zero = self.const(0, shape)
        return self.new("select", [is_zero_b.result, zero.result, nonzero.result], shape,
                        like=op)  # fmt: skip


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
ROOTS_AND_EXPONENTS: tuple[type[Simplification], ...] = (
    DivideBySqrt, ExpMultiplyExp, PowerOfExp, LogOfSqrt, LogOfExp, PowerOne, PowerZero,
    PowerTwo, PowerMinusOne, PowerHalfToSqrt, ExpOfZero,
)  # fmt: skip
"""Exponents, logs, square roots and the small powers."""

DIVIDE_BY_EXP: tuple[type[Simplification], ...] = (ExpDivideExp, DivideByExp, DivideByPower)
"""Divides by exps and powers (after `reassociation.DIVIDES`)."""

RSQRT: tuple[type[Simplification], ...] = (
    DivideByRsqrt, RsqrtOfReciprocal, RsqrtOfPowerMinusTwo, LogOfPower, SqrtOfSquare,
)  # fmt: skip
"""Reciprocal square roots, log of a power, sqrt of a square (after broadcast sinking)."""

CUBE: tuple[type[Simplification], ...] = (PowerThree,)
"""`pow(x, 3)` (after the broadcast sinking of a scalar exponent)."""

ROOT_PRODUCTS: tuple[type[Simplification], ...] = (MultiplySqrtSelf, MultiplyRsqrtSelf)
"""`sqrt(x) * sqrt(x)`, `rsqrt(x) * rsqrt(x)` (after every other multiply rewrite)."""

PATTERNS: tuple[type[Simplification], ...] = (
    *ROOTS_AND_EXPONENTS,
    *DIVIDE_BY_EXP,
    *RSQRT,
    *CUBE,
    *ROOT_PRODUCTS,
)
"""This family's rewrites, in the order they fire."""
