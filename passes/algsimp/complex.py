"""`algsimp` family: real / imag / complex."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, et, src


class RealOfComplex(Simplification):
    """`real(complex(r, i)) -> r`; `imag(complex(r, i)) -> i`."""

    OPCODES = ("real", "imag")

    def rewrite(self, op: HloOp):
        c = src(op.operands[0], "complex")
        if c is None:
            return None
        return c.operands[0 if op.OPCODE == "real" else 1]


class ComplexOfRealImag(Simplification):
    """`complex(real(c), imag(c)) -> c`."""

    OPCODES = ("complex",)

    def rewrite(self, op: HloOp):
        r, i = (src(v, k) for v, k in zip(op.operands, ("real", "imag"), strict=False))
        if r is None or i is None or r.operands[0] is not i.operands[0]:
            return None
        return r.operands[0]


class RealOfReal(Simplification):
    """`real(x) -> x` for a real (not complex) x."""

    OPCODES = ("real",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        return None if et(x) in ("c64", "c128") else x


class ImagOfReal(Simplification):
    """`imag(x) -> broadcast(0)` for a real (not complex) x."""

    OPCODES = ("imag",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        shape = array(op.shape)
        if et(x) in ("c64", "c128") or shape is None:
            return None
        return self.const(0, shape)


PATTERNS: tuple[type[Simplification], ...] = (
    RealOfComplex, ComplexOfRealImag, RealOfReal, ImagOfReal,
)  # fmt: skip
"""This family's rewrites, in the order they fire."""
