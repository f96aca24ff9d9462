"""`algsimp` family: compare."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    CONSTANT_LIKE,
    array,
    commuted,
    et,
    highest,
    lowest,
    splat_is,
    src,
)
from hlopass.rewriting import is_zero, splat_value, value_shape
from hlopass.shape import is_float, is_integral


class CompareSelf(Simplification):
    """`compare(x, x, EQ|GE|LE) -> true`, `compare(x, x, NE|LT|GT) -> false` (integers)."""

    OPCODES = ("compare",)

    def rewrite(self, op: HloOp):
        a, b = op.operands
        shape = array(op.shape)
        if a is not b or shape is None:
            return None
        t = et(a)
        if not (is_integral(t) or t == "pred"):
            return None
        direction = op.attr("direction")
        if direction not in ("EQ", "GE", "LE", "NE", "LT", "GT"):
            return None
        return self.const(direction in ("EQ", "GE", "LE"), shape)


class CompareUnsignedZero(Simplification):
    """`compare(x, 0, LT) -> false`, `compare(x, 0, GE) -> true` (unsigned x)."""

    OPCODES = ("compare",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        x, c = op.operands
        shape = array(op.shape)
        if shape is None or not et(x).startswith("u") or not is_zero(c):
            return None
        direction = op.attr("direction")
        if direction == "LT":
            return self.const(False, shape)
        if direction == "GE":
            return self.const(True, shape)
        return None


class ComparePredicateConstant(Simplification):
    """`compare(a, true, EQ) -> a`; `compare(a, false, NE) -> a` (pred a)."""

    OPCODES = ("compare",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        if et(op.operands[0]) != "pred":
            return None
        direction = op.attr("direction")
        for a, c in commuted(op):
            if (direction == "EQ" and splat_is(c, True)) or (
                direction == "NE" and splat_is(c, False)
            ):
                return a
        return None


_FLIP = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "EQ": "EQ", "NE": "NE"}


class CompareAgainstTypeBound(Simplification):
    """`compare(x, MIN, GE) -> true`, `compare(x, MIN, LT) -> false`,
    `compare(x, MAX, LE) -> true`, `compare(x, MAX, GT) -> false` (integer x; the
    constant on either side)."""

    OPCODES = ("compare",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        direction = op.attr("direction")
        if shape is None or direction not in _FLIP:
            return None
        for (x, c), d in zip(commuted(op), (direction, _FLIP[direction]), strict=True):
            t = et(x)
            if not is_integral(t):
                return None
            if splat_is(c, lowest(t)) and d in ("GE", "LT"):
                return self.const(d == "GE", shape)
            if splat_is(c, highest(t)) and d in ("LE", "GT"):
                return self.const(d == "LE", shape)
        return None


class CompareAbsLessThanZero(Simplification):
    """`compare(abs(x), 0, LT) -> false` (floats: abs is never negative, nan compares false;
    not integers: abs(INT_MIN) is negative)."""

    OPCODES = ("compare",)
    OPERAND_FROM = frozenset({"abs"})

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        a, c = op.operands
        if shape is None or op.attr("direction") != "LT" or src(a, "abs") is None:
            return None
        if not is_float(et(a)) or not is_zero(c):
            return None
        return self.const(False, shape)


class CompareIotaAgainstBound(Simplification):
    """`compare(iota, c) -> true/false` when the iota's range [0, n) decides it: `LT c`,
    `NE c` with c >= n and `GE c` with c <= 0 are true; `GE c`, `EQ c` with c >= n and
    `LT c` with c <= 0 are false (integer iota whose n - 1 fits its type)."""

    OPCODES = ("compare",)
    OPERAND_FROM = frozenset({"iota"})

    def rewrite(self, op: HloOp):
        i_v, c = op.operands
        iota = src(i_v, "iota")
        shape, s = array(op.shape), array(value_shape(i_v))
        if iota is None or shape is None or s is None or not is_integral(s.element_type):
            return None
        v = splat_value(c)
        if v is None or s.is_dynamic:
            return None
        n, v, d = s.dims[iota.attr("iota_dimension")], int(v), op.attr("direction")
        if n == 0 or n - 1 > highest(s.element_type):
            return None  # (an iota longer than its type's range wraps)
        if (d in ("LT", "NE") and v >= n) or (d == "GE" and v <= 0):
            return self.const(True, shape)
        if (d in ("GE", "EQ") and v >= n) or (d == "LT" and v <= 0):
            return self.const(False, shape)
        return None
