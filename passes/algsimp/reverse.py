"""`algsimp` family: reverse."""

from __future__ import annotations

import numpy as np

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, is_scalar_broadcast, src
from hlopass.rewriting import const_array, owner, value_shape


class ReverseOfReverse(Simplification):
    """`reverse(reverse(x, d1), d2) -> reverse(x, d1 xor d2)` (x itself when d1 == d2)."""

    OPCODES = ("reverse",)

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "reverse")
        if inner is None:
            return None
        dims = set(inner.attr("dimensions") or ()) ^ set(op.attr("dimensions") or ())
        if not dims:
            return inner.operands[0]
        return self.new("reverse", [inner.operands[0]], op.shape,
                        {"dimensions": tuple(sorted(dims))}, like=op)  # fmt: skip


class ReverseDegenerate(Simplification):
    """`reverse(x, dims) -> x` when every reversed dimension has at most one element."""

    OPCODES = ("reverse",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = array(value_shape(x))
        if s is None or s.is_dynamic:
            return None
        return x if all(s.dims[d] <= 1 for d in op.attr("dimensions") or ()) else None


class ReverseOfScalarBroadcast(Simplification):
    """`reverse(broadcast(s)) -> broadcast(s)` (s a scalar: every element is the same)."""

    OPCODES = ("reverse",)

    def rewrite(self, op: HloOp):
        return op.operands[0] if is_scalar_broadcast(op.operands[0]) is not None else None


class ReverseOfElementwiseWithConstant(Simplification):
    """`reverse(f(x, c)) -> f(reverse(x), reverse(c))` for an elementwise binary f and a
    constant (or scalar broadcast) c, reversed here: the reverse moves towards x, where it
    may meet another reverse or a slice (single-use f)."""

    OPCODES = ("reverse",)

    def rewrite(self, op: HloOp):
        f = owner(op.operands[0])
        if f is None or f.OPCODE not in _BINARY or not op.operands[0].has_one_use():
            return None
        k = next((k for k, v in enumerate(f.operands) if _constant_like(v)), None)
        if k is None or _constant_like(f.operands[1 - k]):
            return None  # both constant: constant folding's work
        dims = tuple(op.attr("dimensions") or ())
        x, c = f.operands[1 - k], f.operands[k]
        rx = self.new("reverse", [x], value_shape(x), {"dimensions": dims}, like=op).result
        if is_scalar_broadcast(c) is None:
            arr, sc = const_array(c), array(value_shape(c))
            assert arr is not None and sc is not None
            c = self.array_const(np.flip(arr, dims).copy(), sc).result
        args = [rx, c] if k == 1 else [c, rx]
        attrs = None
        if f.OPCODE == "compare":
            attrs = {"direction": f.attr("direction")}
            if f.attr("type") is not None:
                attrs["type"] = f.attr("type")
        return self.new(f.OPCODE, args, op.shape, attrs, like=f)


_BINARY = (
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
    "atan2", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "compare",
)  # fmt: skip


def _constant_like(v) -> bool:
    """A scalar broadcast or a constant whose elements are known (not elided)."""
    return is_scalar_broadcast(v) is not None or const_array(v) is not None


class ReverseOfDegenerateReshape(Simplification):
    """`reverse(reshape(x))` where the reshape only inserts size-1 dims ->
    `reshape(reverse(x))` over the dims of x the reversed ones come from (size-1 dims need
    no reversing)."""

    OPCODES = ("reverse",)
    OPERAND_FROM = frozenset({"reshape"})

    def rewrite(self, op: HloOp):
        r = src(op.operands[0], "reshape")
        shape = array(op.shape)
        if r is None or shape is None:
            return None
        x = r.operands[0]
        sx = array(value_shape(x))
        if sx is None or sx.is_dynamic or shape.is_dynamic or sx.rank >= shape.rank:
            return None
        where: list[int | None] = []  # the x dim each output dim is (None: inserted 1)
        i = 0
        for n in shape.dims:
            if i < sx.rank and sx.dims[i] == n:
                where.append(i)
                i += 1
            elif n == 1:
                where.append(None)
            else:
                return None
        if i != sx.rank:
            return None
        dims = [where[d] for d in op.attr("dimensions") or () if shape.dims[d] != 1]
        if any(d is None for d in dims):
            return None
        v = x
        if dims:
            v = self.new("reverse", [x], sx, {"dimensions": tuple(sorted(dims))}, like=op).result  # type: ignore[arg-type]
        return self.new("reshape", [v], op.shape, like=r)


PATTERNS: tuple[type[Simplification], ...] = (
    ReverseOfReverse, ReverseDegenerate, ReverseOfScalarBroadcast,
    ReverseOfElementwiseWithConstant, ReverseOfDegenerateReshape,
)  # fmt: skip
"""This family's rewrites, in the order they fire."""
