"""`algsimp` family: convert and bitcast-convert."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    et,
    src,
    widens_exactly,
)
from hlopass.rewriting import (
    same_shape,
    value_shape,
)


class ConvertNoop(Simplification):
    """`convert(x)` to x's own element type -> x (and the same for bitcast-convert)."""

    OPCODES = ("convert", "bitcast-convert")

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        return x if same_shape(value_shape(x), op.shape) else None


class ConvertRoundTrip(Simplification):
    """`convert(convert(x: T -> U) -> T)` -> x when U holds every T value."""

    OPCODES = ("convert",)

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "convert")
        if inner is None:
            return None
        x = inner.operands[0]
        if not same_shape(value_shape(x), op.shape):
            return None
        return x if widens_exactly(et(x), et(inner)) else None
