"""`algsimp` family: copy, bitcast and bitcast-convert chains."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    src,
)
from hlopass.rewriting import (
    same_shape,
    value_shape,
)


class CopyNoop(Simplification):
    """`copy(x)` with x's own shape and layout -> x."""

    OPCODES = ("copy",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        return x if same_shape(value_shape(x), op.shape) else None


class CopyOfCopy(Simplification):
    """`copy(copy(x)) -> copy(x)`."""

    OPCODES = ("copy",)
    OPERAND_FROM = frozenset({"copy"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "copy")
        if inner is None:
            return None
        return self.new("copy", [inner.operands[0]], op.shape, like=op)


class BitcastOfBitcast(Simplification):
    """`bitcast(bitcast(x)) -> bitcast(x)` (x itself when the shapes and layouts agree)."""

    OPCODES = ("bitcast",)
    OPERAND_FROM = frozenset({"bitcast"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "bitcast")
        if inner is None:
            return None
        x = inner.operands[0]
        if same_shape(value_shape(x), op.shape):
            return x
        return self.new("bitcast", [x], op.shape, like=op)
