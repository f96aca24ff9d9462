"""`algsimp` family: dynamic-slice and dynamic-update-slice."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
)
from hlopass.rewriting import (
    value_shape,
)


class DynamicSliceFull(Simplification):
    """`dynamic-slice(x, i...)` of all of x -> x (offsets clamp to 0)."""

    OPCODES = ("dynamic-slice",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = array(value_shape(x))
        if s is None or s.is_dynamic or tuple(op.attr("dynamic_slice_sizes")) != s.dims:
            return None
        return x


class DynamicUpdateSliceFull(Simplification):
    """`dynamic-update-slice(x, u, i...)` with u as big as x -> u."""

    OPCODES = ("dynamic-update-slice",)

    def rewrite(self, op: HloOp):
        x, u = op.operands[0], op.operands[1]
        su, sx = array(value_shape(u)), array(value_shape(x))
        if su is None or sx is None or su.dims != sx.dims or su.is_dynamic:
            return None
        return u
