"""`algsimp` family: gather and scatter."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array
from hlopass.rewriting import value_shape
from hlopass.shape import scalar


class GatherOfEffectiveScalar(Simplification):
    """`gather(x, i) -> broadcast(reshape(x))` when x has exactly one element (every index
    clamps to it)."""

    OPCODES = ("gather",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s, shape = array(value_shape(x)), array(op.shape)
        if s is None or shape is None or s.is_dynamic or s.num_elements != 1:
            return None
        v = x
        if s.rank:
            v = self.new("reshape", [x], scalar(s.element_type), like=op).result
        return self.new("broadcast", [v], shape, {"dimensions": ()}, like=op)


class ScatterEmptyUpdates(Simplification):
    """`scatter(x, i, u) -> x` when the updates have no elements (single operand)."""

    OPCODES = ("scatter",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 3:
            return None
        u = array(value_shape(op.operands[2]))
        return op.operands[0] if u is not None and u.num_elements == 0 else None
