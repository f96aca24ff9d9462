"""`algsimp` family: copy, bitcast and bitcast-convert chains."""

from __future__ import annotations

from hlopass.cost.layouts import reshape_is_bitcast
from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    et,
    src,
)
from hlopass.passes.layout.layouts import transpose_is_bitcast
from hlopass.rewriting import (
    is_root,
    owner,
    same_shape,
    value_shape,
)


class CopyNoop(Simplification):
    """`copy(x)` with x's own shape and layout -> x."""

    OPCODES = ("copy",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        xo = owner(x)
        if op.attr("sharding") is not None and is_root(op) and xo is not None:
            comp = op.parent_op()
            if xo.OPCODE == "parameter" and getattr(comp, "is_entry", None) is not None:
                return None  # (XLA: the entry's sharded ROOT copy stays; here only where a
                # parameter would take its sharding, sharding.hlo moves it onto other ops)
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


_UNARY = frozenset({
    "abs", "negate", "exponential", "exponential-minus-one", "log", "log-plus-one", "sqrt",
    "rsqrt", "cbrt", "tanh", "logistic", "sine", "cosine", "tan", "ceil", "floor",
    "round-nearest-afz", "round-nearest-even", "sign", "not", "popcnt", "count-leading-zeros",
    "erf",
})  # fmt: skip
"""Elementwise ops of one operand that keep the element type and take no attributes (not
copy: with fixed layouts its layout change is what it does, and the rebuilt op takes x's)."""


class BitcastOfUnaryOfBitcast(Simplification):
    """`bitcast(u(bitcast(x))) -> bitcast(u(x))` for an elementwise unary u used only there
    (no element type changes, no tiled layout on x or the inner bitcast: as XLA)."""

    OPCODES = ("bitcast",)
    OPERAND_FROM = _UNARY

    def rewrite(self, op: HloOp):
        u = owner(op.operands[0])
        if u is None or u.OPCODE not in _UNARY or not u.result.has_one_use():
            return None
        if len(u.operands) != 1 or "control-predecessors" in u.properties:
            return None
        inner = src(u.operands[0], "bitcast")
        if inner is None:
            return None
        x = inner.operands[0]
        sx, si = value_shape(x), value_shape(inner.result)
        if not (isinstance(sx, ArrayShape) and isinstance(si, ArrayShape)):
            return None
        if len({sx.element_type, si.element_type, et(u), et(op)}) != 1:
            return None
        if any(s.layout is not None and s.layout.tiles for s in (sx, si)):
            return None
        nu = self.new(u.OPCODE, [x], sx, like=u)
        return self.new("bitcast", [nu.result], op.shape, like=op)


class ReshapeOrCopyChainToBitcast(Simplification):
    """`copy/reshape(... copy/reshape(x))` -> `bitcast(x)` when a reshape of x to the end's
    shape keeps every element's offset (layouts fixed; the first such x down the chain, as
    XLA's `BitcastingOperandOfReshapeOrCopyChain`; not across memory spaces or tiles)."""

    OPCODES = ("copy", "reshape")

    def rewrite(self, op: HloOp):
        shape = op.shape
        if not self.opts.is_layout_sensitive or not _plain(shape):
            return None
        v = op.operands[0]
        while True:
            sv = value_shape(v)
            if not _plain(sv):
                return None
            assert isinstance(sv, ArrayShape) and isinstance(shape, ArrayShape)
            if reshape_is_bitcast(sv, shape):
                if v is op.operands[0] and op.OPCODE == "reshape":
                    return None  # (a reshape of its own operand: MoveToBitcast)
                if same_shape(sv, shape):
                    return v
                return self.new("bitcast", [v], shape, like=op)
            o = owner(v)
            if o is None or o.OPCODE not in ("copy", "reshape"):
                return None
            v = o.operands[0]


def _plain(s: object) -> bool:
    """A static array shape whose layout holds nothing but the dims' order."""
    return (
        isinstance(s, ArrayShape)
        and not s.is_dynamic
        and not (s.layout is not None and s.layout.has_extras())
    )


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
COPIES: tuple[type[Simplification], ...] = (CopyNoop, CopyOfCopy, BitcastOfBitcast, MoveToBitcast)
"""No-op and nested copies and bitcasts, layout-preserving ops made bitcasts."""

CHAINS: tuple[type[Simplification], ...] = (ReshapeOrCopyChainToBitcast, BitcastOfUnaryOfBitcast)
"""Chains of reshapes, copies and unary ops made bitcasts (after
`transpose_reshape.OF_PRODUCERS`)."""

PATTERNS: tuple[type[Simplification], ...] = (*COPIES, *CHAINS)
"""This family's rewrites, in the order they fire."""
