"""`algsimp` family: convolution."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
)
from hlopass.rewriting import (
    value_shape,
)


class ConvolutionOfEmpty(Simplification):
    """`convolution(x, k)` with a zero-element input or kernel -> `broadcast(0)`."""

    OPCODES = ("convolution",)

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        shapes = [array(value_shape(v)) for v in op.operands]
        if shape is None or any(s is None for s in shapes):
            return None
        if not any(s.num_elements == 0 for s in shapes):  # type: ignore[union-attr]
            return None
        return self.const(0, shape)
