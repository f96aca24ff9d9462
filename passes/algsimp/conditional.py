"""`algsimp` family: conditional."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import et, src


class ConditionalOfConvertedPred(Simplification):
    """`conditional(convert(p: pred), a, b)` with branches {f, t} ->
    `conditional(p, b, a)` with true_computation=t, false_computation=f (the index is 0 or
    1; option `enable-conditional-simplification`; as XLA)."""

    OPCODES = ("conditional",)
    OPERAND_FROM = frozenset({"convert"})
    OPTION = "enable_conditional_simplification"

    def rewrite(self, op: HloOp):
        branches = op.attr("branch_computations")
        c = src(op.operands[0], "convert")
        if c is None or et(c.operands[0]) != "pred" or branches is None:
            return None
        branches = tuple(branches)
        if len(branches) != 2 or len(op.operands) != 3:
            return None
        attrs = {"true_computation": branches[1], "false_computation": branches[0]}
        return self.new("conditional", [c.operands[0], op.operands[2], op.operands[1]],
                        op.shape, attrs, like=op)  # fmt: skip


PATTERNS: tuple[type[Simplification], ...] = (ConditionalOfConvertedPred,)
"""This family's rewrites, in the order they fire."""
