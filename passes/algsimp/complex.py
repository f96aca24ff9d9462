"""`algsimp` family: real / imag / complex."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    src,
)


class RealOfComplex(Simplification):
    """`real(complex(r, i)) -> r`; `imag(complex(r, i)) -> i`."""

    OPCODES = ("real", "imag")

    def rewrite(self, op: HloOp):
        c = src(op.operands[0], "complex")
        if c is None:
            return None
        return c.operands[0 if op.opcode == "real" else 1]


class ComplexOfRealImag(Simplification):
    """`complex(real(c), imag(c)) -> c`."""

    OPCODES = ("complex",)

    def rewrite(self, op: HloOp):
        r, i = (src(v, k) for v, k in zip(op.operands, ("real", "imag"), strict=False))
        if r is None or i is None or r.operands[0] is not i.operands[0]:
            return None
        return r.operands[0]
