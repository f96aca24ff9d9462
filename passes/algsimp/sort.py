"""`algsimp` family: sort."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array
from hlopass.rewriting import value_shape


class SortOfOneElementRows(Simplification):
    """`sort(x)` along a dim of size <= 1 (or of an empty x) -> x; a key/value sort ->
    `tuple(x, v1, ...)`: there is nothing to reorder."""

    OPCODES = ("sort",)

    def rewrite(self, op: HloOp):
        x = array(value_shape(op.operands[0]))
        if x is None or x.is_dynamic:
            return None
        (d,) = op.attr("dimensions")
        if x.num_elements != 0 and x.dims[d] > 1:
            return None
        if len(op.operands) == 1:
            return op.operands[0]
        return self.new("tuple", list(op.operands), op.shape, like=op)


PATTERNS: tuple[type[Simplification], ...] = (SortOfOneElementRows,)
"""This family's rewrites, in the order they fire."""
