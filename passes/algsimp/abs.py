"""`algsimp` family: abs elimination by non-negativity."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import et, is_non_negative, src


class AbsOfNonNegative(Simplification):
    """`abs(x) -> x` when every element of x is known to be >= 0 (unsigned, `abs`, `exp`,
    `x * x`, non-negative constants without -0.0, and ops keeping non-negativity)."""

    OPCODES = ("abs",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        if et(x) in ("c64", "c128") or et(x) != et(op):
            return None
        return x if is_non_negative(x) else None


class SquareOfAbs(Simplification):
    """`multiply(abs(x), abs(x)) -> multiply(x, x)` (not complex: there `|x|^2` is real
    while `x * x` is not)."""

    OPCODES = ("multiply",)
    OPERAND_FROM = frozenset({"abs"})

    def rewrite(self, op: HloOp):
        a, b = op.operands
        abs_op = src(a, "abs")
        if a is not b or abs_op is None:
            return None
        x = abs_op.operands[0]
        if et(x) in ("c64", "c128"):
            return None
        return self.new("multiply", [x, x], op.shape, like=op)


class AbsOfBatchNormVariance(Simplification):
    """`abs(get-tuple-element(custom-call(...), index=2)) -> get-tuple-element(...)` for
    the batch-norm forward-training call named by `cudnn-batchnorm-forward-training-
    metadata` (its element 2 is a variance: never negative)."""

    OPCODES = ("abs",)
    OPERAND_FROM = frozenset({"get-tuple-element"})

    def rewrite(self, op: HloOp):
        target = self.opts.cudnn_batchnorm_forward_training_metadata
        gte = src(op.operands[0], "get-tuple-element")
        if not target or gte is None or gte.attr("index") != 2:
            return None
        call = src(gte.operands[0], "custom-call")
        if call is None or call.attr("custom_call_target") != target:
            return None
        return gte.result if et(gte) == et(op) else None


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
NON_NEGATIVE: tuple[type[Simplification], ...] = (AbsOfNonNegative, SquareOfAbs)
"""Abs of what is known non-negative, squares of abs."""

BATCH_NORM_VARIANCE: tuple[type[Simplification], ...] = (AbsOfBatchNormVariance,)
"""Abs of a batch-norm variance (after the broadcast sinking of abs)."""

PATTERNS: tuple[type[Simplification], ...] = (*NON_NEGATIVE, *BATCH_NORM_VARIANCE)
"""This family's rewrites, in the order they fire."""
