"""`algsimp` family: compare."""

from __future__ import annotations

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import is_integral
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    CONSTANT_LIKE,
    array,
    commuted,
    et,
    highest,
    is_non_negative,
    lowest,
    splat_is,
    src,
)
from hlopass.rewriting import const_array, is_zero, same_shape, splat_value, value_shape


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
            low, high = lowest(t), highest(t)
            if low is None or high is None:
                return None  # (never: an integral type has both bounds)
            if splat_is(c, low) and d in ("GE", "LT"):
                return self.const(d == "GE", shape)
            if splat_is(c, high) and d in ("LE", "GT"):
                return self.const(d == "LE", shape)
        return None


class CompareAbsLessThanZero(Simplification):
    """`compare(x, 0, LT) -> false`, `compare(x, 0, GE) -> true` (and `0 GT x`, `0 LE x`)
    for an x known non-negative (`is_non_negative`: e.g. a float abs, an iota, max(_, 0);
    a nan compares as a non-negative value does; as XLA)."""

    OPCODES = ("compare",)

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        a, c = op.operands
        d = op.attr("direction")
        if shape is None or d not in ("LT", "GE", "GT", "LE"):
            return None
        if d in ("GT", "LE"):
            a, c = c, a
        if et(a) in ("c64", "c128") or not is_zero(c) or not is_non_negative(a):
            return None
        return self.const(d in ("GE", "LE"), shape)


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


class CompareGreaterOfMaxMin(Simplification):
    """`compare(max(a, b), a, GT) -> compare(b, a, GT)`, `compare(max(a, b), b, GT) ->
    compare(a, b, GT)`, `compare(a, min(a, b), GT) -> compare(a, b, GT)`,
    `compare(b, min(a, b), GT) -> compare(b, a, GT)` (exact: a nan in max/min makes both
    sides false)."""

    OPCODES = ("compare",)
    OPERAND_FROM = frozenset({"maximum", "minimum"})

    def rewrite(self, op: HloOp):
        if op.attr("direction") != "GT":
            return None
        lhs, rhs = op.operands
        mx, mn = src(lhs, "maximum"), src(rhs, "minimum")
        new = None
        if mx is not None:
            a, b = mx.operands
            new = (b, rhs) if rhs is a else (a, rhs) if rhs is b else None
        elif mn is not None:
            a, b = mn.operands
            new = (lhs, b) if lhs is a else (lhs, a) if lhs is b else None
        if new is None:
            return None
        attrs = {"direction": "GT", "type": op.attr("type")}
        return self.new("compare", list(new), op.shape, {k: v for k, v in attrs.items() if v},
                        like=op)  # fmt: skip


class CompareNeZeroOfSelectOfCompareGe(Simplification):
    """`compare(select(compare(a, b, GE), 1, 0), 0, NE) -> compare(a, b, GE)` (the select
    is 1 exactly where the inner compare holds)."""

    OPCODES = ("compare",)
    OPERAND_FROM = frozenset({"select"})

    def rewrite(self, op: HloOp):
        lhs, rhs = op.operands
        sel = src(lhs, "select")
        if op.attr("direction") != "NE" or sel is None or not splat_is(rhs, 0):
            return None
        inner = src(sel.operands[0], "compare")
        if inner is None or inner.attr("direction") != "GE":
            return None
        if not splat_is(sel.operands[1], 1) or not splat_is(sel.operands[2], 0):
            return None
        return inner.result if same_shape(inner.shape, op.shape) else None


class AndOfLessThans(Simplification):
    """`and(compare(x, c1, LT), compare(x, c2, LT)) -> compare(x, min(c1, c2), LT)` (s32
    scalar constants; `compare(c, x, GT)` is read as `x < c`)."""

    OPCODES = ("and",)
    OPERAND_FROM = frozenset({"compare"})

    def rewrite(self, op: HloOp):
        infos = [_less_than_constant(v) for v in op.operands]
        if infos[0] is None or infos[1] is None or infos[0][0] is not infos[1][0]:
            return None
        x = infos[0][0]
        shape = array(value_shape(op.operands[0]))
        sx = array(value_shape(x))
        if shape is None or sx is None:
            return None
        bound = self.const(min(infos[0][1], infos[1][1]), sx)
        return self.new("compare", [x, bound.result], shape, {"direction": "LT"}, like=op)


def _less_than_constant(value: SSAValue) -> tuple[SSAValue, int] | None:
    """(x, c) when `value` is `compare(x, c, LT)` or `compare(c, x, GT)`, c an s32 constant
    of one element."""
    cmp = src(value, "compare")
    if cmp is None:
        return None
    lhs, rhs = cmp.operands
    d = cmp.attr("direction")
    for x, c, want in ((lhs, rhs, "LT"), (rhs, lhs, "GT")):
        k = src(c, "constant")
        if d != want or k is None or et(k) != "s32":
            continue
        arr = const_array(c)
        if arr is not None and arr.size == 1:
            return x, int(arr.reshape(-1)[0])
    return None


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
CONSTANT_RESULTS: tuple[type[Simplification], ...] = (
    CompareSelf, CompareUnsignedZero, ComparePredicateConstant, CompareAgainstTypeBound,
    CompareAbsLessThanZero,
)  # fmt: skip
"""Compares whose result is known from their operands' types or identity."""

IOTA: tuple[type[Simplification], ...] = (CompareIotaAgainstBound,)
"""An iota compared against a bound (after the broadcast sinking of two broadcasts)."""

COMPOUND: tuple[type[Simplification], ...] = (
    CompareGreaterOfMaxMin, CompareNeZeroOfSelectOfCompareGe, AndOfLessThans,
)  # fmt: skip
"""Compares of max/min and selects, ands of less-thans (after the broadcast sinking
of a scalar operand)."""

PATTERNS: tuple[type[Simplification], ...] = (*CONSTANT_RESULTS, *IOTA, *COMPOUND)
"""This family's rewrites, in the order they fire."""
