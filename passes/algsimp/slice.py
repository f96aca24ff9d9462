"""`algsimp` family: slice."""

from __future__ import annotations

from hlopass import attrs as A
from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
    src,
)
from hlopass.rewriting import (
    value_shape,
)


class SliceNoop(Simplification):
    """`slice(x, [0:n] per dim)` covering all of x -> x."""

    OPCODES = ("slice",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = array(value_shape(x))
        if s is None:
            return None
        sl = op.attr("slice")
        if all(
            d.start == 0 and d.limit == n and d.stride == 1
            for d, n in zip(sl, s.dims, strict=False)
        ):
            return x
        return None


class SliceOfSlice(Simplification):
    """`slice(slice(x, a), b) -> slice(x, a∘b)`."""

    OPCODES = ("slice",)

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "slice")
        shape = array(op.shape)
        if inner is None or shape is None:
            return None
        out = []
        for a, b, n in zip(inner.attr("slice"), op.attr("slice"), shape.dims, strict=False):
            start = a.start + b.start * a.stride
            stride = a.stride * b.stride
            limit = start + (n - 1) * stride + 1 if n > 0 else start
            out.append(A.SliceDim(start, limit, stride))
        return self.new("slice", [inner.operands[0]], shape, {"slice": tuple(out)}, like=op)
