"""`algsimp` family: compare."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
    commuted,
    et,
    splat_is,
)
from hlopass.rewriting import (
    is_zero,
)
from hlopass.shape import is_integral


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
