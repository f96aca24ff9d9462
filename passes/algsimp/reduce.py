"""`algsimp` family: reduce."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, is_scalar_broadcast, reducer_opcode
from hlopass.rewriting import (
    value_shape,
)


class ReduceTrivial(Simplification):
    """`reduce(x, init)` removing no elements -> `reshape(x)`. XLA assumes `init` is the
    reducer's identity here, and XLA-CPU computes `x` for any init (its algsimp drops it):
    unlike reduce-window's, this rewrite keeps XLA-CPU's values."""

    OPCODES = ("reduce",)
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        x = op.operands[0]
        s, shape = array(value_shape(x)), array(op.shape)
        if s is None or shape is None or s.is_dynamic or s.num_elements != shape.num_elements:
            return None
        if s.num_elements == 0:
            return None
        if s.dims == shape.dims:
            return x
        return self.new("reshape", [x], shape, like=op)


class ReduceOfEmpty(Simplification):
    """`reduce(x, init)` of a zero-element x -> `broadcast(init)`."""

    OPCODES = ("reduce",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        x, init = op.operands
        s, shape = array(value_shape(x)), array(op.shape)
        if s is None or shape is None or s.num_elements != 0 or shape.num_elements == 0:
            return None
        return self.new("broadcast", [init], shape, {"dimensions": ()}, like=op)


_IDEMPOTENT = ("maximum", "minimum", "and", "or")


class ReduceOfScalarBroadcast(Simplification):
    """`reduce(broadcast(s), init) -> broadcast(f(init, s))` for an idempotent reducer f
    (maximum, minimum, and, or) over a non-empty set of elements."""

    OPCODES = ("reduce",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        b = is_scalar_broadcast(op.operands[0])
        s, shape = array(value_shape(op.operands[0])), array(op.shape)
        kind = reducer_opcode(op)
        if b is None or s is None or shape is None or kind not in _IDEMPOTENT:
            return None
        if s.num_elements == 0 or shape.num_elements == 0:
            return None
        init = op.operands[1]
        f = self.new(kind, [init, b.operands[0]], value_shape(init), like=op)  # type: ignore[arg-type]
        return self.new("broadcast", [f.result], shape, {"dimensions": ()}, like=op)
