"""`algsimp` family: select."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import is_integral
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    CONSTANT_LIKE,
    array,
    et,
    splat_is,
    src,
)
from hlopass.rewriting import (
    same_shape,
    splat_value,
    value_shape,
)


class SelectSameBranches(Simplification):
    """`select(p, x, x) -> x`."""

    OPCODES = ("select",)

    def rewrite(self, op: HloOp):
        _p, a, b = op.operands
        return a if a is b else None


class SelectConstantPredicate(Simplification):
    """`select(true, a, b) -> a`; `select(false, a, b) -> b`."""

    OPCODES = ("select",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        p, a, b = op.operands
        v = splat_value(p)
        if v is None:
            return None
        return a if bool(v) else b


class SelectOfNot(Simplification):
    """`select(not(p), a, b) -> select(p, b, a)`."""

    OPCODES = ("select",)
    OPERAND_FROM = frozenset({"not"})

    def rewrite(self, op: HloOp):
        p, a, b = op.operands
        n = src(p, "not")
        if n is None:
            return None
        return self.new("select", [n.operands[0], b, a], op.shape, like=op)


def _is_pred_select(op: HloOp) -> bool:
    """A pred select whose predicate has the result's shape: only then may the predicate
    stand in for (or combine with) the selected values without a broadcast."""
    return et(op) == "pred" and same_shape(value_shape(op.operands[0]), op.shape)


class SelectBooleans(Simplification):
    """`select(p, true, false) -> p`; `select(p, false, true) -> not(p)`."""

    OPCODES = ("select",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        if not _is_pred_select(op):
            return None
        p, a, b = op.operands
        if splat_is(a, True) and splat_is(b, False):
            return p
        if splat_is(a, False) and splat_is(b, True):
            return self.new("not", [p], op.shape, like=op)
        return None


class SelectToOrAnd(Simplification):
    """`select(p, true, q) -> or(p, q)`; `select(p, q, false) -> and(p, q)` (pred;
    `select(p, false, q) -> and(not(p), q)`, `select(p, q, true) -> or(not(p), q)`)."""

    OPCODES = ("select",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        if not _is_pred_select(op):
            return None
        p, a, b = op.operands
        if splat_is(a, True):
            return self.new("or", [p, b], op.shape, like=op)
        if splat_is(b, False):
            return self.new("and", [p, a], op.shape, like=op)
        if splat_is(a, False):
            n = self.new("not", [p], op.shape, like=op)
            return self.new("and", [n.result, b], op.shape, like=op)
        if splat_is(b, True):
            n = self.new("not", [p], op.shape, like=op)
            return self.new("or", [n.result, a], op.shape, like=op)
        return None


class SelectNestedSamePredicate(Simplification):
    """`select(p, select(p, a, b), c) -> select(p, a, c)`;
    `select(p, a, select(p, b, c)) -> select(p, a, c)`."""

    OPCODES = ("select",)
    OPERAND_FROM = frozenset({"select"})

    def rewrite(self, op: HloOp):
        p, a, b = op.operands
        inner = src(a, "select")
        if inner is not None and inner.operands[0] is p:
            return self.new("select", [p, inner.operands[1], b], op.shape, like=op)
        inner = src(b, "select")
        if inner is not None and inner.operands[0] is p:
            return self.new("select", [p, a, inner.operands[2]], op.shape, like=op)
        return None


_TO_MINMAX = {"GT": "maximum", "GE": "maximum", "LT": "minimum", "LE": "minimum"}


class SelectOfCompareToMinMax(Simplification):
    """`select(compare(a, b, GT|GE), a, b) -> maximum(a, b)`,
    `select(compare(a, b, LT|LE), a, b) -> minimum(a, b)` (integers: floats differ on nan
    and on the sign of zero). hlopass's own, off by default: XLA's algsimp rewrites such a
    select of pred operands only (`SelectOfPredCompare`), so its fusions keep the select."""

    OPCODES = ("select",)
    OPERAND_FROM = frozenset({"compare"})
    OPTION = "enable_select_of_compare_to_min_max"

    def rewrite(self, op: HloOp):
        p, a, b = op.operands
        cmp = src(p, "compare")
        if cmp is None or not is_integral(et(op)):
            return None
        kind = _TO_MINMAX.get(cmp.attr("direction"))
        if kind is None or tuple(cmp.operands) != (a, b):
            return None
        return self.new(kind, [a, b], op.shape, like=op)


_PRED_SELECT_OF_COMPARE = {"GT": "or", "GE": "or", "LT": "and", "LE": "and", "EQ": 2, "NE": 1}
"""For pred `select(compare(a, b, dir), a, b)`: the opcode it becomes, or which select
operand it is (a == b picks b either way; a != b picks a either way)."""


class SelectOfPredCompare(Simplification):
    """`select(compare(a, b, GT|GE), a, b) -> or(a, b)`, `... LT|LE ... -> and(a, b)`,
    `... EQ ... -> b`, `... NE ... -> a` (pred a, b: the max, the min, and the two cases
    where both branches agree)."""

    OPCODES = ("select",)
    OPERAND_FROM = frozenset({"compare"})

    def rewrite(self, op: HloOp):
        p, a, b = op.operands
        cmp = src(p, "compare")
        if cmp is None or et(op) != "pred" or tuple(cmp.operands) != (a, b):
            return None
        to = _PRED_SELECT_OF_COMPARE.get(cmp.attr("direction"))
        if to is None:
            return None
        if isinstance(to, int):
            return op.operands[to]
        return self.new(to, [a, b], op.shape, like=op)


class MultiplyOfConvertedPred(Simplification):
    """`multiply(x, convert(p: pred)) -> select(p, x, 0)` (either operand order; for
    floats x * 0 may be -0, nan or inf where the select gives +0, so it needs
    `enable-floats-are-real`)."""

    OPCODES = ("multiply",)
    OPERAND_FROM = frozenset({"convert"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        if shape is None or et(op) in ("c64", "c128", "pred"):
            return None
        for x, c in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
            conv = src(c, "convert")
            if conv is None or et(conv.operands[0]) != "pred":
                continue
            p = conv.operands[0]
            zero = self.const(0, shape)
            return self.new("select", [p, x, zero.result], op.shape, like=op)
        return None


class SelectOfDynamicUpdateSlice(Simplification):
    """`select(p, dynamic-update-slice(xs, x, i), xs) -> dynamic-update-slice(xs,
    select(dynamic-slice(p, i), x, dynamic-slice(xs, i)), i)` (and with the branches
    swapped; the update used only here; a scalar p stays as it is): the select runs on the
    window only (both slices clamp i the same way)."""

    OPCODES = ("select",)
    OPERAND_FROM = frozenset({"dynamic-update-slice"})

    def rewrite(self, op: HloOp):
        p, on_true, on_false = op.operands
        for dus_v, xs, left in ((on_false, on_true, True), (on_true, on_false, False)):
            dus = src(dus_v, "dynamic-update-slice")
            if dus is None or dus.operands[0] is not xs or not dus_v.has_one_use():
                continue
            x = dus.operands[1]
            idx = list(dus.operands[2:])
            sx, sp = array(value_shape(x)), array(value_shape(p))
            if sx is None or sp is None or sx.is_dynamic:
                return None
            sizes = tuple(sx.dims)
            pred = p
            if sp.dims:
                pred = self.new("dynamic-slice", [p, *idx], sx.with_element_type(sp.element_type),
                                {"dynamic_slice_sizes": sizes}, like=op).result  # fmt: skip
            old = self.new("dynamic-slice", [xs, *idx], sx, {"dynamic_slice_sizes": sizes},
                           like=op).result  # fmt: skip
            branches = [old, x] if left else [x, old]
            sel = self.new("select", [pred, *branches], sx, like=op)
            return self.new("dynamic-update-slice", [xs, sel.result, *idx], op.shape, like=op)
        return None


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
PREDICATES: tuple[type[Simplification], ...] = (
    SelectSameBranches, SelectConstantPredicate, SelectOfNot, SelectBooleans, SelectToOrAnd,
    SelectNestedSamePredicate, SelectOfCompareToMinMax, SelectOfPredCompare,
)  # fmt: skip
"""Selects decided or simplified by their predicate or branches."""

OF_DYNAMIC_UPDATE_SLICE: tuple[type[Simplification], ...] = (SelectOfDynamicUpdateSlice,)
"""A select of a dynamic-update-slice (after the broadcast sinking of select)."""

MULTIPLY_OF_PRED: tuple[type[Simplification], ...] = (MultiplyOfConvertedPred,)
"""A multiply by a converted pred made a select (after every other multiply rewrite)."""

PATTERNS: tuple[type[Simplification], ...] = (
    *PREDICATES,
    *OF_DYNAMIC_UPDATE_SLICE,
    *MULTIPLY_OF_PRED,
)
"""This family's rewrites, in the order they fire."""
