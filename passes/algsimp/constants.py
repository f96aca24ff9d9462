"""`algsimp` family: Constants: canonical forms of splat and iota constants."""

from __future__ import annotations

import numpy as np

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
)
from hlopass.rewriting import (
    const_array,
)
from hlopass.shape import is_integral


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


class IotaConstantToIota(Simplification):
    """`constant({0, 1, ..., n-1}) -> iota()` (rank-1, integer or float)."""

    OPCODES = ("constant",)

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        arr = const_array(op.result)
        if shape is None or arr is None or shape.rank != 1 or arr.size <= 1:
            return None
        if not (
            is_integral(shape.element_type) or shape.element_type in ("f16", "f32", "f64", "bf16")
        ):
            return None
        if not np.array_equal(arr.astype(np.float64), np.arange(arr.size, dtype=np.float64)):
            return None
        if arr.dtype.kind == "f" and bool(np.signbit(arr).any()):
            return None  # a -0.0 element: iota's 0 is +0.0
        return self.new("iota", [], shape, {"iota_dimension": 0}, like=op)
