"""`algsimp` family: maximum / minimum / clamp."""

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
from hlopass.rewriting import module_of, owner, splat_value, value_shape


class MaxMinSelf(Simplification):
    """`maximum(x, x) -> x`; `minimum(x, x) -> x`."""

    OPCODES = ("maximum", "minimum")

    def rewrite(self, op: HloOp):
        a, b = op.operands
        return a if a is b else None


class MaxOfLowest(Simplification):
    """`maximum(x, -inf) -> x` (the lowest value of integer types too)."""

    OPCODES = ("maximum",)
    OPERAND_FROM = CONSTANT_LIKE

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
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        high = highest(et(op))
        if high is None:
            return None
        for x, c in commuted(op):
            if splat_is(c, high):
                return x
        return None


class MaxMinAbsorb(Simplification):
    """`maximum(maximum(x, y), y) -> maximum(x, y)` (also `maximum(maximum(x, y), x)` and
    `maximum(x, maximum(x, y))`), `maximum(y, maximum(x, y)) -> maximum(y, x)`: there
    `maximum(x, y)` would differ for two nans of different signs (the same for minimum)."""

    OPCODES = ("maximum", "minimum")
    OPERAND_FROM = frozenset({"maximum", "minimum"})

    def rewrite(self, op: HloOp):
        lhs, rhs = op.operands
        inner = src(lhs, op.OPCODE)
        if inner is not None and rhs in tuple(inner.operands):
            return lhs
        inner = src(rhs, op.OPCODE)
        if inner is None:
            return None
        x, y = inner.operands
        if x is lhs:
            return rhs
        if y is lhs:
            return self.new(op.OPCODE, [lhs, x], op.shape, like=op)
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


class MinMaxToClamp(Simplification):
    """`maximum(minimum(x, hi), lo) -> clamp(lo, x, hi)` and
    `minimum(maximum(x, lo), hi) -> clamp(lo, x, hi)` (lo, hi broadcasts of one-element
    constants, lo < hi).

    As XLA's MinMaxToClamp: the clamp takes the broadcasts themselves (an elementwise clamp,
    which the fusion passes see as such), and only when the bounds are strictly ordered."""

    OPCODES = ("maximum", "minimum")
    OPERAND_FROM = frozenset({"maximum", "minimum"})

    def rewrite(self, op: HloOp):
        inner_opcode = "minimum" if op.OPCODE == "maximum" else "maximum"
        shape = array(op.shape)
        if shape is None or et(op) in ("c64", "c128", "pred"):
            return None
        for inner_v, outer_c in commuted(op):
            inner = src(inner_v, inner_opcode)
            if inner is None:
                continue
            for x, inner_c in commuted(inner):
                lo, hi = (outer_c, inner_c) if op.OPCODE == "maximum" else (inner_c, outer_c)
                if not (_broadcast_of_constant(lo) and _broadcast_of_constant(hi)):
                    continue
                lv, hv = splat_value(lo), splat_value(hi)
                try:
                    ordered = bool(lv < hv)
                except TypeError:
                    ordered = False
                if not ordered:
                    continue
                return self.new("clamp", [lo, x, hi], shape, like=op)
        return None


def _broadcast_of_constant(value) -> bool:
    """`broadcast(c)` of a one-element constant (XLA's `Broadcast(ConstantEffectiveScalar)`)."""
    o = owner(value)
    if o is None or o.OPCODE != "broadcast":
        return False
    c = owner(o.operands[0])
    s = array(value_shape(o.operands[0]))
    return c is not None and c.OPCODE == "constant" and s is not None and s.num_elements == 1


class ClampOfPartitionId(Simplification):
    """`clamp(0, partition-id, c) -> partition-id` when the module's num_partitions is at
    most c + 1 (and likewise replica-id with replica_count; a count of 1 is read as
    unknown: as XLA)."""

    OPCODES = ("clamp",)
    OPERAND_FROM = frozenset({"partition-id", "replica-id"})

    def rewrite(self, op: HloOp):
        lo, x, hi = op.operands
        xo = owner(x)
        if xo is None or xo.OPCODE not in ("partition-id", "replica-id"):
            return None
        if not splat_is(lo, 0) or src(hi, "constant") is None or splat_value(hi) is None:
            return None
        module = module_of(op)
        key = "hlo.num_partitions" if xo.OPCODE == "partition-id" else "hlo.replica_count"
        count = getattr(module.attributes.get(key), "data", 1) if module is not None else 1
        if not isinstance(count, int) or count == 1 or count > int(splat_value(hi)) + 1:
            return None
        return x


class MaxOfNondecreasing(Simplification):
    """`maximum(f(a), f(b)) -> f(maximum(a, b))` for f in cbrt, erf, logistic, tanh
    (nondecreasing; their float implementations are approximations, so it needs
    `enable-floats-are-real`)."""

    OPCODES = ("maximum",)
    OPERAND_FROM = frozenset({"cbrt", "erf", "logistic", "tanh"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        lhs, rhs = (owner(v) for v in op.operands)
        if lhs is None or rhs is None or lhs.OPCODE != rhs.OPCODE:
            return None
        if lhs.OPCODE not in ("cbrt", "erf", "logistic", "tanh"):
            return None
        a, b = lhs.operands[0], rhs.operands[0]
        sa = value_shape(a)
        if sa != value_shape(b):
            return None
        m = self.new("maximum", [a, b], sa, like=op)
        return self.new(lhs.OPCODE, [m.result], op.shape, like=op)


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
BOUNDS: tuple[type[Simplification], ...] = (
    MaxMinSelf, MaxOfLowest, MinOfHighest, MaxMinAbsorb, ClampOfClamp, MinMaxToClamp,
)  # fmt: skip
"""Maximum/minimum of itself, of the lowest/highest value, nested clamps."""

KNOWN_RANGES: tuple[type[Simplification], ...] = (ClampOfPartitionId, MaxOfNondecreasing)
"""Clamps and maxima decided by a known range (after broadcast sinking)."""

PATTERNS: tuple[type[Simplification], ...] = (*BOUNDS, *KNOWN_RANGES)
"""This family's rewrites, in the order they fire."""
