"""`algsimp` family: concatenate."""

from __future__ import annotations

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    is_scalar_broadcast,
    single_use,
    src,
)
from hlopass.rewriting import (
    value_shape,
)


class ConcatenateSingle(Simplification):
    """`concatenate(x) -> x`."""

    OPCODES = ("concatenate",)

    def rewrite(self, op: HloOp):
        return op.operands[0] if len(op.operands) == 1 else None


class ConcatenateDropEmpty(Simplification):
    """`concatenate(x, empty, y) -> concatenate(x, y)` (operands of size 0 on the axis)."""

    OPCODES = ("concatenate",)

    def rewrite(self, op: HloOp):
        (dim,) = op.attr("dimensions")
        keep = [v for v in op.operands if value_shape(v).dims[dim] != 0]  # type: ignore[attr-defined]
        if len(keep) == len(op.operands) or not keep:
            return None
        if len(keep) == 1:
            return keep[0]
        return self.new("concatenate", keep, op.shape, {"dimensions": (dim,)}, like=op)


class ConcatenateFlatten(Simplification):
    """`concatenate(x, concatenate(y, z)) -> concatenate(x, y, z)` (same axis)."""

    OPCODES = ("concatenate",)

    def rewrite(self, op: HloOp):
        dims = op.attr("dimensions")
        flat: list[SSAValue] = []
        found = False
        for v in op.operands:
            inner = src(v, "concatenate")
            if inner is not None and inner.attr("dimensions") == dims and single_use(v):
                flat.extend(inner.operands)
                found = True
            else:
                flat.append(v)
        if not found:
            return None
        return self.new("concatenate", flat, op.shape, {"dimensions": dims}, like=op)


class ConcatenateOfSameScalarBroadcast(Simplification):
    """`concatenate(broadcast(s), broadcast(s), ...) -> broadcast(s)` (one scalar s)."""

    OPCODES = ("concatenate",)

    def rewrite(self, op: HloOp):
        scalars = set()
        for v in op.operands:
            b = is_scalar_broadcast(v)
            if b is None:
                return None
            scalars.add(b.operands[0])
        if len(scalars) != 1 or len(op.operands) < 2:
            return None
        return self.new("broadcast", [scalars.pop()], op.shape, {"dimensions": ()}, like=op)
