"""`algsimp` family: Reassociation and constant merging (float-unsafe for floats)."""

from __future__ import annotations

import math

import numpy as np

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    CONSTANT_LIKE,
    array,
    commuted,
    et,
    single_use,
    split_const,
    src,
)
from hlopass.rewriting import (
    is_constant_like,
    splat_value,
)
from hlopass.shape import is_float, is_integral


class AddConstantReassociation(Simplification):
    """`add(add(a, c1), add(b, c2)) -> add(add(a, b), add(c1, c2))` (c1, c2 constants)."""

    OPCODES = ("add",)
    OPERAND_FROM = frozenset({"add"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        lhs, rhs = (src(v, "add") for v in op.operands)
        if lhs is None or rhs is None or lhs is rhs:
            return None
        if not (single_use(lhs.result) and single_use(rhs.result)):
            return None
        lc = split_const(lhs)
        rc = split_const(rhs)
        if lc is None or rc is None:
            return None
        (a, c1), (b, c2) = lc, rc
        ab = self.new("add", [a, b], op.shape, like=op)
        cc = self.new("add", [c1, c2], op.shape, like=op)
        return self.new("add", [ab.result, cc.result], op.shape, like=op)


class AddFactorCommonMultiplicand(Simplification):
    """`add(multiply(a, c), multiply(b, c)) -> multiply(add(a, b), c)`."""

    OPCODES = ("add",)
    OPERAND_FROM = frozenset({"multiply"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        lhs, rhs = (src(v, "multiply") for v in op.operands)
        if lhs is None or rhs is None or lhs is rhs:
            return None
        if not (single_use(lhs.result) and single_use(rhs.result)):
            return None
        for a, c in commuted(lhs):
            for b, c2 in commuted(rhs):
                if c is c2:
                    s = self.new("add", [a, b], op.shape, like=op)
                    return self.new("multiply", [s.result, c], op.shape, like=op)
        return None


class MultiplyNegNeg(Simplification):
    """`multiply(negate(a), negate(b)) -> multiply(a, b)`."""

    OPCODES = ("multiply",)
    OPERAND_FROM = frozenset({"negate"})

    def rewrite(self, op: HloOp):
        na, nb = (src(v, "negate") for v in op.operands)
        if na is None or nb is None:
            return None
        return self.new("multiply", [na.operands[0], nb.operands[0]], op.shape, like=op)


class MultiplyConstantReassociation(Simplification):
    """`multiply(multiply(x, c1), c2) -> multiply(x, multiply(c1, c2))` (c1, c2 constants)."""

    OPCODES = ("multiply",)
    OPERAND_FROM = frozenset({"multiply"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        for inner_v, c2 in commuted(op):
            inner = src(inner_v, "multiply")
            if inner is None or not is_constant_like(c2) or not single_use(inner_v):
                continue
            split = split_const(inner)
            if split is None:
                continue
            x, c1 = split
            cc = self.new("multiply", [c1, c2], op.shape, like=op)
            return self.new("multiply", [x, cc.result], op.shape, like=op)
        return None


class DivideByConstant(Simplification):
    """`divide(x, c) -> multiply(x, 1/c)` (floats; exact when c is a power of two)."""

    OPCODES = ("divide",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        x, c = op.operands
        shape = array(op.shape)
        if shape is None or not is_float(shape.element_type):
            return None
        v = splat_value(c)
        if v is None:
            return None
        fv = float(v)
        if fv == 0 or not math.isfinite(fv):
            return None
        m, _e = math.frexp(abs(fv))
        exact = m == 0.5
        if not exact and not self.opts.floats_are_real:
            return None
        inv = np.asarray(1.0 / fv).astype(np.asarray(v).dtype if exact else np.float64)
        if not np.isfinite(float(inv)) or float(inv) == 0:
            return None
        if exact and float(inv) * fv != 1.0:  # 1/c not representable (subnormal range)
            return None
        return self.new("multiply", [x, self.const(inv, shape).result], shape, like=op)


class DivideOfDivide(Simplification):
    """`divide(divide(a, b), c) -> divide(a, multiply(b, c))`."""

    OPCODES = ("divide",)
    OPERAND_FROM = frozenset({"divide"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        inner_v, c = op.operands
        inner = src(inner_v, "divide")
        if inner is None or not single_use(inner_v) or is_integral(et(op)):
            return None
        a, b = inner.operands
        bc = self.new("multiply", [b, c], op.shape, like=op)
        return self.new("divide", [a, bc.result], op.shape, like=op)
