"""`algsimp` family: dot."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
)
from hlopass.rewriting import (
    value_shape,
)


class DotOfEmpty(Simplification):
    """`dot(a, b)` contracting zero elements -> `broadcast(0)`."""

    OPCODES = ("dot",)

    def rewrite(self, op: HloOp):
        a = array(value_shape(op.operands[0]))
        shape = array(op.shape)
        if a is None or shape is None:
            return None
        contracting = op.attr("lhs_contracting_dims") or ()
        n = 1
        for d in contracting:
            n *= a.dims[d]
        if n != 0 and a.num_elements != 0:
            return None
        return self.const(0, shape)


class DotOfScalars(Simplification):
    """`dot(a, b)` of two scalars -> `multiply(a, b)`."""

    OPCODES = ("dot",)

    def rewrite(self, op: HloOp):
        a, b = op.operands
        sa, sb, shape = array(value_shape(a)), array(value_shape(b)), array(op.shape)
        if sa is None or sb is None or shape is None or sa.rank or sb.rank:
            return None
        if sa.element_type != shape.element_type or sb.element_type != shape.element_type:
            return None
        return self.new("multiply", [a, b], shape, like=op)
