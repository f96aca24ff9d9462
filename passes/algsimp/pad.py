"""`algsimp` family: pad."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification


class PadNoop(Simplification):
    """`pad(x, v), padding=0_0x0_0...` -> x."""

    OPCODES = ("pad",)

    def rewrite(self, op: HloOp):
        if all(p.low == 0 and p.high == 0 and p.interior == 0 for p in op.attr("padding")):
            return op.operands[0]
        return None
