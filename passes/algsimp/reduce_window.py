"""`algsimp` family: reduce-window.

XLA-CPU computes `init` into every window, so a trivial window yields `f(init, x)`, not `x`;
the identity patterns (`add(x, 0) -> x`, ...) then drop an init that is the identity.
"""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, reducer_opcode
from hlopass.rewriting import same_shape, value_shape


def _trivial_window(op: HloOp) -> bool:
    window = op.attr("window")
    return window is None or all(
        (w.size, w.stride, w.pad_low, w.pad_high, w.lhs_dilation, w.rhs_dilation)
        == (1, 1, 0, 0, 1, 1)
        for w in window.dims
    )


class ReduceWindowTrivial(Simplification):
    """`reduce-window(x, init)`, 1x..x1 window -> `f(broadcast(init), x)` for reducer `f`
    (one of add, multiply, maximum, minimum, and, or; stride 1, no padding or dilation)."""

    OPCODES = ("reduce-window",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2 or not _trivial_window(op):
            return None
        x, init = op.operands
        kind = reducer_opcode(op)
        shape = array(op.shape)
        if kind is None or shape is None or not same_shape(value_shape(x), shape):
            return None
        b = self.new("broadcast", [init], shape, {"dimensions": ()}, like=op)
        return self.new(kind, [b.result, x], shape, like=op)
