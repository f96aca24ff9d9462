"""`algsimp` family: reverse."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, is_scalar_broadcast, src
from hlopass.rewriting import value_shape


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
