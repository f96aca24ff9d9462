"""`algsimp` family: Identities: an operand that is the identity element of the op."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    CONSTANT_LIKE,
    commuted,
    et,
    splat_is,
    src,
)
from hlopass.rewriting import (
    is_one,
    is_zero,
)


class AddZero(Simplification):
    """`add(x, 0) -> x` (and `add(0, x)`)."""

    OPCODES = ("add",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        for x, c in commuted(op):
            if is_zero(c):
                return x
        return None


class SubtractZero(Simplification):
    """`subtract(x, 0) -> x`."""

    OPCODES = ("subtract",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        x, c = op.operands
        return x if is_zero(c) else None


class MultiplyOne(Simplification):
    """`multiply(x, 1) -> x` (and `multiply(1, x)`)."""

    OPCODES = ("multiply",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        for x, c in commuted(op):
            if is_one(c):
                return x
        return None


class DivideOne(Simplification):
    """`divide(x, 1) -> x`."""

    OPCODES = ("divide",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        x, c = op.operands
        return x if is_one(c) else None


class AndTrue(Simplification):
    """`and(a, true) -> a`; `and(a, false) -> false` (pred)."""

    OPCODES = ("and",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        if et(op) != "pred":
            return None
        for x, c in commuted(op):
            if splat_is(c, True):
                return x
            if splat_is(c, False):
                return c
        return None


class OrFalse(Simplification):
    """`or(a, false) -> a`; `or(a, true) -> true` (pred)."""

    OPCODES = ("or",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        if et(op) != "pred":
            return None
        for x, c in commuted(op):
            if splat_is(c, False):
                return x
            if splat_is(c, True):
                return c
        return None


class AndOrSelf(Simplification):
    """`and(a, a) -> a`; `or(a, a) -> a`."""

    OPCODES = ("and", "or")

    def rewrite(self, op: HloOp):
        a, b = op.operands
        return a if a is b else None


class NegateNegate(Simplification):
    """`negate(negate(x)) -> x`."""

    OPCODES = ("negate",)
    OPERAND_FROM = frozenset({"negate"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "negate")
        return inner.operands[0] if inner is not None else None


class NotNot(Simplification):
    """`not(not(x)) -> x`."""

    OPCODES = ("not",)
    OPERAND_FROM = frozenset({"not"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "not")
        return inner.operands[0] if inner is not None else None


class AddConstantToRight(Simplification):
    """`add(c, a) -> add(a, c)` (c a `constant`, a not one): XLA's canonical order, which
    its reassociations of constants expect (exact: add commutes)."""

    OPCODES = ("add",)
    OPERAND_FROM = frozenset({"constant"})

    def rewrite(self, op: HloOp):
        c, a = op.operands
        if src(c, "constant") is None or src(a, "constant") is not None:
            return None
        return self.new("add", [a, c], op.shape, like=op)


class SubtractConstantToAdd(Simplification):
    """`subtract(a, c) -> add(a, negate(c))`, `subtract(a, broadcast(c)) -> add(a,
    broadcast(negate(c)))` (c a `constant`, a not one): XLA's canonical form (exact:
    `a - c` is `a + (-c)` in IEEE arithmetic and in two's complement)."""

    OPCODES = ("subtract",)
    OPERAND_FROM = frozenset({"constant", "broadcast"})

    def rewrite(self, op: HloOp):
        a, rhs = op.operands
        if src(a, "constant") is not None:
            return None
        bc = src(rhs, "broadcast")
        c = bc.operands[0] if bc is not None else rhs
        c_op = src(c, "constant")
        if c_op is None:
            return None
        neg = self.new("negate", [c], c_op.shape, like=op).result
        if bc is not None:
            neg = self.new("broadcast", [neg], bc.shape, {"dimensions": bc.attr("dimensions")},
                           like=bc).result  # fmt: skip
        return self.new("add", [a, neg], op.shape, like=op)


class ReducePrecisionNoop(Simplification):
    """`reduce-precision(x)` to x's own exponent and mantissa widths -> x (option
    `enable-remove-no-op-reduce-precision`)."""

    OPCODES = ("reduce-precision",)
    OPTION = "enable_remove_no_op_reduce_precision"

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        widths = _FLOAT_WIDTHS.get(et(x))
        if widths is None or et(x) != et(op):
            return None
        if (op.attr("exponent_bits"), op.attr("mantissa_bits")) != widths:
            return None
        return x


_FLOAT_WIDTHS = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}
"""(exponent bits, explicit mantissa bits) of the float types a reduce-precision takes."""


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
IDENTITY_OPERANDS: tuple[type[Simplification], ...] = (
    AddZero, SubtractZero, MultiplyOne, DivideOne, AndTrue, OrFalse, AndOrSelf, NegateNegate,
    NotNot, ReducePrecisionNoop,
)  # fmt: skip
"""An operand that is the op's identity element (or the op undone by itself)."""

CONSTANT_TO_RIGHT: tuple[type[Simplification], ...] = (AddConstantToRight, SubtractConstantToAdd)
"""A constant moved to the right of an add, a subtract of one made an add (after every
other family's rewrites of add and subtract, which see the operands as written)."""

PATTERNS: tuple[type[Simplification], ...] = (*IDENTITY_OPERANDS, *CONSTANT_TO_RIGHT)
"""This family's rewrites, in the order they fire."""
