"""`algsimp` family: pad."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import is_scalar_broadcast


class PadNoop(Simplification):
    """`pad(x, v), padding=0_0x0_0...` -> x."""

    OPCODES = ("pad",)

    def rewrite(self, op: HloOp):
        if all(p.low == 0 and p.high == 0 and p.interior == 0 for p in op.attr("padding")):
            return op.operands[0]
        return None


class PadOfScalarBroadcast(Simplification):
    """`pad(broadcast(s), s) -> broadcast(s)` of the pad's shape (s a scalar: the padded
    array and its padding hold the same value everywhere)."""

    OPCODES = ("pad",)

    def rewrite(self, op: HloOp):
        b = is_scalar_broadcast(op.operands[0])
        if b is None or b.operands[0] is not op.operands[1]:
            return None
        return self.new("broadcast", [op.operands[1]], op.shape, {"dimensions": ()}, like=op)
