"""`algsimp` family: maximum / minimum / clamp."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    commuted,
    et,
    highest,
    lowest,
    splat_is,
    src,
)


class MaxMinSelf(Simplification):
    """`maximum(x, x) -> x`; `minimum(x, x) -> x`."""

    OPCODES = ("maximum", "minimum")

    def rewrite(self, op: HloOp):
        a, b = op.operands
        return a if a is b else None


class MaxOfLowest(Simplification):
    """`maximum(x, -inf) -> x` (the lowest value of integer types too)."""

    OPCODES = ("maximum",)

    def rewrite(self, op: HloOp):
        low = lowest(et(op))
        if low is None:
            return None
        for x, c in commuted(op):
            if splat_is(c, low):
                return x
        return None


class MinOfHighest(Simplification):
    """`minimum(x, +inf) -> x` (the highest value of integer types too)."""

    OPCODES = ("minimum",)

    def rewrite(self, op: HloOp):
        high = highest(et(op))
        if high is None:
            return None
        for x, c in commuted(op):
            if splat_is(c, high):
                return x
        return None


class MaxMinAbsorb(Simplification):
    """`maximum(maximum(x, y), y) -> maximum(x, y)` (and the same for minimum)."""

    OPCODES = ("maximum", "minimum")

    def rewrite(self, op: HloOp):
        for inner_v, y in commuted(op):
            inner = src(inner_v, op.opcode)
            if inner is not None and y in tuple(inner.operands):
                return inner_v
        return None


class ClampOfClamp(Simplification):
    """`clamp(lo, clamp(lo, x, hi), hi) -> clamp(lo, x, hi)`."""

    OPCODES = ("clamp",)

    def rewrite(self, op: HloOp):
        lo, x, hi = op.operands
        inner = src(x, "clamp")
        if inner is None or inner.operands[0] is not lo or inner.operands[2] is not hi:
            return None
        return x
