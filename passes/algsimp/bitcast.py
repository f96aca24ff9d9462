"""`algsimp` family: copy, bitcast and bitcast-convert chains."""

from __future__ import annotations

from hlopass.cost.layouts import reshape_is_bitcast
from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    src,
)
from hlopass.passes.layout.layouts import transpose_is_bitcast
from hlopass.rewriting import (
    same_shape,
    value_shape,
)
from hlopass.shape import ArrayShape


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


class MoveToBitcast(Simplification):
    """`transpose(x)` or `reshape(x)` that keeps every element at its memory offset ->
    `bitcast(x)`, with layouts fixed (after layout normalization such transposes are left
    between bitcasts, and the chains then fold).

    Guards: `is-layout-sensitive` (without fixed layouts there is no memory order); static
    array shapes."""

    OPCODES = ("transpose", "reshape")

    def rewrite(self, op: HloOp):
        if not self.opts.is_layout_sensitive:
            return None
        a, b = value_shape(op.operands[0]), op.shape
        if not isinstance(a, ArrayShape) or not isinstance(b, ArrayShape):
            return None
        if a.is_dynamic or b.is_dynamic:
            return None
        if op.OPCODE == "transpose":
            keeps = transpose_is_bitcast(a, b, op.attr("dimensions"))
        else:
            keeps = reshape_is_bitcast(a, b)
        return self.new("bitcast", [op.operands[0]], b, like=op) if keeps else None


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
