"""`algsimp` family: Constants: canonical forms of splat and iota constants."""

from __future__ import annotations

import numpy as np

from hlopass.dialects.hlo import HloOp
from hlopass.ir.attrs import ShapedLiteral
from hlopass.ir.shape import ArrayShape, TupleShape, is_integral
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
)
from hlopass.rewriting import (
    const_array,
)


class SplatConstantToBroadcast(Simplification):
    """`constant({c, c, ..., c}) -> broadcast(constant(c))` (non-scalar splat constants)."""

    OPCODES = ("constant",)

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        arr = const_array(op.result)
        if shape is None or arr is None or arr.size <= 1 or shape.is_dynamic:
            return None
        flat = arr.reshape(-1)
        first = flat[0]
        if arr.tobytes() != flat[:1].tobytes() * arr.size:  # bitwise: nan and -0.0 too
            return None
        return self.const(np.asarray(first), shape)


def _rank1_array(op: HloOp) -> tuple[ArrayShape, np.ndarray] | None:
    """The shape and value of a rank-1 constant of two or more elements (what may be an
    iota, plain or strided), else None."""
    shape = array(op.shape)
    arr = const_array(op.result)
    if shape is None or arr is None or shape.rank != 1 or arr.size <= 1:
        return None
    return shape, arr


class IotaConstantToIota(Simplification):
    """`constant({0, 1, ..., n-1}) -> iota()` (rank-1, integer or float)."""

    OPCODES = ("constant",)

    def rewrite(self, op: HloOp):
        found = _rank1_array(op)
        if found is None:
            return None
        shape, arr = found
        if not (
            is_integral(shape.element_type) or shape.element_type in ("f16", "f32", "f64", "bf16")
        ):
            return None
        if not np.array_equal(arr.astype(np.float64), np.arange(arr.size, dtype=np.float64)):
            return None
        if arr.dtype.kind == "f" and bool(np.signbit(arr).any()):
            return None  # a -0.0 element: iota's 0 is +0.0
        return self.new("iota", [], shape, {"iota_dimension": 0}, like=op)


class TupleConstantToTuple(Simplification):
    """`constant((a, b, ...))` of a tuple shape -> `tuple(constant(a), constant(b), ...)`
    (an array constant per element; nested tuples one level at a time)."""

    OPCODES = ("constant",)

    def rewrite(self, op: HloOp):
        shape, value = op.shape, op.attr("value")
        elements = getattr(getattr(value, "literal", None), "elements", None)
        if not isinstance(shape, TupleShape) or elements is None:
            return None
        if len(elements) != len(shape.elements):
            return None
        parts = [
            self.new("constant", [], s, {"value": ShapedLiteral(s, lit)}).result
            for s, lit in zip(shape.elements, elements, strict=True)
        ]
        return self.new("tuple", parts, shape, like=op)


class StridedIotaConstantToIota(Simplification):
    """`constant({0, k, 2k, ...}) -> iota() * broadcast(k)` (rank-1 integer, k not 0 or 1:
    as XLA; the products are the constant's elements, so nothing wraps differently)."""

    OPCODES = ("constant",)

    def rewrite(self, op: HloOp):
        found = _rank1_array(op)
        if found is None:
            return None
        shape, arr = found
        if not is_integral(shape.element_type) or shape.element_type == "pred":
            return None
        vals = [int(v) for v in arr.reshape(-1)]
        k = vals[1]
        if k in (0, 1) or any(v != i * k for i, v in enumerate(vals)):
            return None
        iota = self.new("iota", [], shape, {"iota_dimension": 0}, like=op)
        return self.new("multiply", [iota.result, self.const(k, shape).result], shape, like=op)


PATTERNS: tuple[type[Simplification], ...] = (
    SplatConstantToBroadcast, IotaConstantToIota, TupleConstantToTuple,
    StridedIotaConstantToIota,
)  # fmt: skip
"""This family's rewrites, in the order they fire."""
