"""`algsimp` family: concatenate."""

from __future__ import annotations

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.ir import attrs as A
from hlopass.ir.shape import array as shape_array
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
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


class ConcatenateOfOnlyEmpty(Simplification):
    """`concatenate(e1, e2, ...) -> e1` when every operand is empty (e1 has the result's
    shape: the other dimensions agree and the concatenated one sums to 0)."""

    OPCODES = ("concatenate",)

    def rewrite(self, op: HloOp):
        if len(op.operands) < 2:
            return None
        for v in op.operands:
            s = array(value_shape(v))
            if s is None or s.is_dynamic or s.num_elements != 0:
                return None
        return op.operands[0]


class ConcatenateOfAdjacentSlices(Simplification):
    """`concatenate(slice(x)[a:b], slice(x)[b:c], ...) -> concatenate(slice(x)[a:c], ...)`
    (adjacent unstrided slices of one x along the concatenated dimension, with the same
    starts in every other dimension)."""

    OPCODES = ("concatenate",)
    OPERAND_FROM = frozenset({"slice"})
    LAYOUT_CHANGING = True  # XLA leaves concatenates alone when layouts are fixed

    def rewrite(self, op: HloOp):
        (dim,) = op.attr("dimensions")
        operands = list(op.operands)
        out: list[SSAValue] = []
        i = 0
        merged = False
        while i < len(operands):
            first = _unstrided_slice(operands[i])
            if first is None:
                out.append(operands[i])
                i += 1
                continue
            starts = [d.start for d in first.attr("slice")]
            end = first.attr("slice")[dim].limit
            j = i + 1
            while j < len(operands):
                nxt = _unstrided_slice(operands[j])
                if nxt is None or nxt.operands[0] is not first.operands[0]:
                    break
                sl = nxt.attr("slice")
                if sl[dim].start != end:
                    break
                if any(d.start != s for k, (d, s) in enumerate(zip(sl, starts, strict=True))
                       if k != dim):  # fmt: skip
                    break
                end = sl[dim].limit
                j += 1
            if j - i == 1:
                out.append(operands[i])
            else:
                fs = array(first.shape)
                assert fs is not None
                dims = list(fs.dims)
                dims[dim] = end - starts[dim]
                new_sl = list(first.attr("slice"))
                new_sl[dim] = A.SliceDim(starts[dim], end, 1)
                s = self.new("slice", [first.operands[0]], fs.with_dims(tuple(dims)),
                             {"slice": tuple(new_sl)}, like=first)  # fmt: skip
                out.append(s.result)
                merged = True
            i = j
        if not merged:
            return None
        if len(out) == 1:
            return out[0]
        return self.new("concatenate", out, op.shape, {"dimensions": (dim,)}, like=op)


def _unstrided_slice(value: SSAValue) -> HloOp | None:
    s = src(value, "slice")
    if s is None or any(d.stride != 1 for d in s.attr("slice")):
        return None
    return s


class ConcatenateOfBroadcastToPad(Simplification):
    """`concatenate(broadcast(s), x) -> pad(x, s)` padding low by the broadcast's size
    (and `concatenate(x, broadcast(s)) -> pad(x, s)` padding high; s a scalar, two
    operands)."""

    OPCODES = ("concatenate",)
    OPERAND_FROM = frozenset({"broadcast"})
    LAYOUT_CHANGING = True  # XLA leaves concatenates alone when layouts are fixed

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        (dim,) = op.attr("dimensions")
        first, second = op.operands
        low = is_scalar_broadcast(first)
        high = is_scalar_broadcast(second) if low is None else None
        if low is None and high is None:
            return None
        padded, fill = (second, low) if low is not None else (first, high)
        assert fill is not None
        sx = array(value_shape(padded))
        sf = array(fill.shape)
        if sx is None or sf is None:
            return None
        pads = [A.PadDim(0, 0, 0) for _ in sx.dims]
        n = sf.dims[dim]
        pads[dim] = A.PadDim(n, 0, 0) if low is not None else A.PadDim(0, n, 0)
        return self.new("pad", [padded, fill.operands[0]], op.shape, {"padding": tuple(pads)},
                        like=op)  # fmt: skip


class ConcatenateOfOneRowCopies(Simplification):
    """`concatenate(x, x, ..., x)` along a dim where x has size 1 ->
    `broadcast(reshape(x without that dim))` (every row is x)."""

    OPCODES = ("concatenate",)

    def rewrite(self, op: HloOp):
        if self.opts.is_layout_sensitive or len(op.operands) < 2:
            return None
        x = op.operands[0]
        s, shape = array(value_shape(x)), array(op.shape)
        if s is None or shape is None or s.is_dynamic or any(v is not x for v in op.operands):
            return None
        (k,) = op.attr("dimensions")
        if s.dims[k] != 1:
            return None
        keep = tuple(i for i in range(s.rank) if i != k)
        row = self.new("reshape", [x], shape_array(s.element_type, [s.dims[i] for i in keep]))
        return self.new("broadcast", [row.result], shape, {"dimensions": keep}, like=op)


PATTERNS: tuple[type[Simplification], ...] = (
    ConcatenateSingle, ConcatenateDropEmpty, ConcatenateFlatten,
    ConcatenateOfSameScalarBroadcast, ConcatenateOfOnlyEmpty, ConcatenateOfAdjacentSlices,
    ConcatenateOfBroadcastToPad, ConcatenateOfOneRowCopies,
)  # fmt: skip
"""This family's rewrites, in the order they fire."""
