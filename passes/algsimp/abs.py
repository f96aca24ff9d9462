"""`algsimp` family: abs elimination by non-negativity."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import et, is_non_negative


class AbsOfNonNegative(Simplification):
    """`abs(x) -> x` when every element of x is known to be >= 0 (unsigned, `abs`, `exp`,
    `x * x`, non-negative constants without -0.0, and ops keeping non-negativity)."""

    OPCODES = ("abs",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        if et(x) in ("c64", "c128") or et(x) != et(op):
            return None
        return x if is_non_negative(x) else None
