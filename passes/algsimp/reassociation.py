"""`algsimp` family: Reassociation and constant merging (float-unsafe for floats)."""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import COMPLEX, FLOATS, INTEGRAL, is_float, is_integral
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    CONSTANT_LIKE,
    array,
    commuted,
    et,
    is_scalar_broadcast,
    single_use,
    split_const,
    src,
)
from hlopass.rewriting import (
    const_array,
    is_constant_like,
    owner,
    value_shape,
)


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
    """`add(multiply(a, c), multiply(b, c)) -> multiply(add(a, b), c)` (integers; floats
    when c is a scalar constant `+-2^k`, which only moves exponents, or with
    `enable-floats-are-real`)."""

    OPCODES = ("add",)
    OPERAND_FROM = frozenset({"multiply"})

    def rewrite(self, op: HloOp):
        lhs, rhs = (src(v, "multiply") for v in op.operands)
        if lhs is None or rhs is None or lhs is rhs:
            return None
        if not (single_use(lhs.result) and single_use(rhs.result)):
            return None
        exact = et(op) in INTEGRAL or self.opts.floats_are_real
        for a, c in commuted(lhs):
            for b, c2 in commuted(rhs):
                if c is c2 and (exact or _fp_power_of_two(c)):
                    s = self.new("add", [a, b], op.shape, like=op)
                    return self.new("multiply", [s.result, c], op.shape, like=op)
        return None


def _fp_power_of_two(c) -> bool:
    """`c` is a one-element float constant (or a broadcast of one) equal to `+-2^k`."""
    o = owner(c)
    if o is not None and o.OPCODE == "broadcast":
        c = o.operands[0]
    arr = const_array(c)
    if arr is None or arr.size != 1 or not is_float(et(c)):
        return False
    v = float(arr.reshape(()))
    return math.isfinite(v) and v != 0 and math.frexp(abs(v))[0] == 0.5


def _constant_pair(c1: SSAValue, c2: SSAValue) -> tuple[SSAValue, SSAValue, bool] | None:
    """The two constants to combine for `c1`, `c2` (XLA's two forms): both `constant`s, or
    both broadcasts of scalar constants, then their scalars (and True: broadcast the
    result)."""
    if src(c1, "constant") is not None and src(c2, "constant") is not None:
        return c1, c2, False
    b1, b2 = is_scalar_broadcast(c1), is_scalar_broadcast(c2)
    if b1 is None or b2 is None:
        return None
    s1, s2 = b1.operands[0], b2.operands[0]
    if src(s1, "constant") is None or src(s2, "constant") is None:
        return None
    return s1, s2, True


def _merged(p: Simplification, opcode: str, pair: tuple[SSAValue, SSAValue, bool], op: HloOp):
    """`opcode(k1, k2)` of a `_constant_pair`, broadcast to `op`'s shape when the pair is
    of scalars."""
    k1, k2, broadcast = pair
    shape = array(value_shape(k1))
    assert shape is not None
    merged = p.new(opcode, [k1, k2], shape, like=op).result
    if not broadcast:
        return merged
    return p.new("broadcast", [merged], op.shape, {"dimensions": ()}, like=op).result


class AddConstantChain(Simplification):
    """`add(add(a, c1), c2) -> add(a, add(c1, c2))` (a not constant; c1, c2 constants, or
    broadcasts of scalar constants whose sum is then broadcast)."""

    OPCODES = ("add",)
    OPERAND_FROM = frozenset({"add"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        inner_v, c2 = op.operands
        inner = src(inner_v, "add")
        if inner is None or is_constant_like(inner.operands[0]):
            return None
        a, c1 = inner.operands
        pair = _constant_pair(c1, c2)
        if pair is None:
            return None
        return self.new("add", [a, _merged(self, "add", pair, op)], op.shape, like=op)


class SubtractConstantChain(Simplification):
    """`add(subtract(c1, a), c2) -> subtract(add(c1, c2), a)` (a not constant; c1, c2
    constants, or broadcasts of scalar constants whose sum is then broadcast)."""

    OPCODES = ("add",)
    OPERAND_FROM = frozenset({"subtract"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        sub_v, c2 = op.operands
        sub = src(sub_v, "subtract")
        if sub is None or is_constant_like(sub.operands[1]):
            return None
        c1, a = sub.operands
        pair = _constant_pair(c1, c2)
        if pair is None:
            return None
        return self.new("subtract", [_merged(self, "add", pair, op), a], op.shape, like=op)


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
    """`multiply(multiply(x, c1), c2) -> multiply(x, multiply(c1, c2))` (c1, c2 constants;
    of two broadcast scalars, the broadcast of their product)."""

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
            pair = _constant_pair(c1, c2)
            if pair is not None and pair[2]:  # broadcasts of scalars: multiply the scalars
                return self.new("multiply", [x, _merged(self, "multiply", pair, op)], op.shape,
                                like=op)  # fmt: skip
            cc = self.new("multiply", [c1, c2], op.shape, like=op)
            return self.new("multiply", [x, cc.result], op.shape, like=op)
        return None


class DivideByConstant(Simplification):
    """`divide(a, c) -> multiply(a, 1/c)` and `divide(a, broadcast(c)) -> multiply(a,
    broadcast(1/c))` (c a `constant`, any shape; a not a constant; floats and complex).

    XLA's algsimp does this for every such divisor on every backend, exact or not (1/c is
    rounded once in c's type, then the multiply rounds again): its GPU and CPU pipelines
    both leave a multiply, and the fusions they build read it."""

    OPCODES = ("divide",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        a, b = op.operands
        shape = array(op.shape)
        if shape is None or shape.element_type not in FLOATS | COMPLEX:
            return None
        if src(a, "constant") is not None:
            return None  # (XLA's NonConstant dividend: constant folding's)
        bc = src(b, "broadcast")
        c = bc.operands[0] if bc is not None else b
        arr = const_array(c) if src(c, "constant") is not None else None
        cshape = array(value_shape(c))
        if arr is None or cshape is None:
            return None
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            inv = (np.ones((), arr.dtype) / arr).astype(arr.dtype)  # in c's own type
        recip = self.array_const(inv, cshape).result
        if bc is not None:
            recip = self.new("broadcast", [recip], bc.shape,
                             {"dimensions": bc.attr("dimensions")}, like=bc).result  # fmt: skip
        return self.new("multiply", [a, recip], shape, like=op)


class DivideOfDivides(Simplification):
    """`divide(divide(a, b), divide(c, d)) -> divide(multiply(a, d), multiply(b, c))`
    (floats; both inner divides used only here)."""

    OPCODES = ("divide",)
    OPERAND_FROM = frozenset({"divide"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        n_v, d_v = op.operands
        n, d = src(n_v, "divide"), src(d_v, "divide")
        if n is None or d is None or is_integral(et(op)):
            return None
        if n is d or not (single_use(n_v) and single_use(d_v)):
            return None
        ad = self.new("multiply", [n.operands[0], d.operands[1]], op.shape, like=op)
        bc = self.new("multiply", [n.operands[1], d.operands[0]], op.shape, like=op)
        return self.new("divide", [ad.result, bc.result], op.shape, like=op)


class DivideByDivide(Simplification):
    """`divide(a, divide(b, c)) -> divide(multiply(a, c), b)` (floats; the inner divide
    used only here)."""

    OPCODES = ("divide",)
    OPERAND_FROM = frozenset({"divide"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a, d_v = op.operands
        d = src(d_v, "divide")
        if d is None or not single_use(d_v) or is_integral(et(op)):
            return None
        b, c = d.operands
        ac = self.new("multiply", [a, c], op.shape, like=op)
        return self.new("divide", [ac.result, b], op.shape, like=op)


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


class DivideByBroadcast(Simplification):
    """`divide(a, broadcast(b)) -> multiply(a, broadcast(divide(1, b)))` (real floats;
    one use of b; a * (1/b) rounds twice: it needs `enable-floats-are-real`)."""

    OPCODES = ("divide",)
    OPERAND_FROM = frozenset({"broadcast"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a, d = op.operands
        bc = src(d, "broadcast")
        shape = array(op.shape)
        if bc is None or shape is None or not is_float(shape.element_type):
            return None
        b = bc.operands[0]
        sb = array(value_shape(b))
        if sb is None or not single_use(b) or is_constant_like(b):
            return None  # (a constant divisor: DivideByConstant's)
        one = self.const(1, sb)
        recip = self.new("divide", [one.result, b], sb, like=bc)
        again = self.new("broadcast", [recip.result], shape,
                         {"dimensions": bc.attr("dimensions")}, like=bc)  # fmt: skip
        return self.new("multiply", [a, again.result], shape, like=op)


class MultiplyOfConstantProducts(Simplification):
    """`multiply(multiply(x, c1), multiply(y, c2)) -> multiply(multiply(x, y), c1 * c2)`
    (x, y not constants; c1, c2 `constant`s; a scalar product broadcast to the shape)."""

    OPCODES = ("multiply",)
    OPERAND_FROM = frozenset({"multiply"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        lhs, rhs = (src(v, "multiply") for v in op.operands)
        if lhs is None or rhs is None:
            return None
        xs = _nonconstant_and_constant(lhs)
        ys = _nonconstant_and_constant(rhs)
        if xs is None or ys is None:
            return None
        (x, c1), (y, c2) = xs, ys
        s1 = array(value_shape(c1))
        assert s1 is not None
        k = self.new("multiply", [c1, c2], s1, like=op).result
        shape = array(op.shape)
        assert shape is not None
        if not s1.dims and shape.dims:
            k = self.new("broadcast", [k], shape, {"dimensions": ()}, like=op).result
        xy = self.new("multiply", [x, y], shape, like=op)
        return self.new("multiply", [xy.result, k], shape, like=op)


def _nonconstant_and_constant(op: HloOp) -> tuple[SSAValue, SSAValue] | None:
    """(x, c) of a binary `op` one of whose operands is a `constant` c and the other, x,
    is not (XLA's `NonConstant`, `Constant` in either order)."""
    for x, c in commuted(op):
        if src(c, "constant") is not None and src(x, "constant") is None:
            return x, c
    return None


class MultiplyByBroadcastOfScalarProduct(Simplification):
    """`multiply(multiply(a, c), broadcast(b)) -> multiply(a, broadcast(multiply(b, c)))`
    (c a scalar constant or a broadcast of one, a not a constant, b not a constant: the
    constant moves to the smaller side)."""

    OPCODES = ("multiply",)
    OPERAND_FROM = frozenset({"multiply"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        for inner_v, other in commuted(op):
            inner = src(inner_v, "multiply")
            bc = src(other, "broadcast")
            if inner is None or bc is None or src(bc.operands[0], "constant") is not None:
                continue
            found = _nonconstant_and_scalar_constant(inner)
            if found is None:
                continue
            a, c = found
            b = bc.operands[0]
            sb = array(value_shape(b))
            assert sb is not None
            if sb.dims:
                c = self.new("broadcast", [c], sb, {"dimensions": ()}, like=op).result
            prod = self.new("multiply", [b, c], sb, like=op)
            again = self.new("broadcast", [prod.result], op.shape,
                             {"dimensions": bc.attr("dimensions")}, like=bc)  # fmt: skip
            return self.new("multiply", [a, again.result], op.shape, like=op)
        return None


def _nonconstant_and_scalar_constant(op: HloOp) -> tuple[SSAValue, SSAValue] | None:
    """(a, c) of a binary `op` of a non-constant a and a scalar `constant` c, or of a
    broadcast of one (then c is that scalar)."""
    for a, k in commuted(op):
        if src(a, "constant") is not None:
            continue
        bk = src(k, "broadcast")
        c = bk.operands[0] if bk is not None else k
        sc = array(value_shape(c))
        if src(c, "constant") is not None and sc is not None and not sc.dims:
            return a, c
    return None


class MultiplyOfBroadcastScalarChain(Simplification):
    """`multiply(multiply(a, broadcast(c1)), broadcast(c2)) -> multiply(a, broadcast(c1 *
    c2))` (c1, c2 scalar constants; a anything, a constant too: XLA's second form of the
    constant chain, operands in this order)."""

    OPCODES = ("multiply",)
    OPERAND_FROM = frozenset({"multiply"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        inner_v, b2 = op.operands
        inner = src(inner_v, "multiply")
        if inner is None:
            return None
        a, b1 = inner.operands
        pair = _constant_pair(b1, b2)
        if pair is None or not pair[2]:
            return None
        return self.new("multiply", [a, _merged(self, "multiply", pair, op)], op.shape, like=op)


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
ADD: tuple[type[Simplification], ...] = (
    AddConstantReassociation, AddConstantChain, SubtractConstantChain,
    AddFactorCommonMultiplicand,
)  # fmt: skip
"""Constant merging and factoring of adds (before `integer`'s add cancellations)."""

MULTIPLY: tuple[type[Simplification], ...] = (
    MultiplyNegNeg, MultiplyConstantReassociation, DivideByConstant,
)  # fmt: skip
"""Negations and constants of multiplies, and a divide by a constant made a multiply
(after `integer.MultiplyZero` and the power-of-two divides)."""

DIVIDES: tuple[type[Simplification], ...] = (DivideOfDivides, DivideOfDivide, DivideByDivide)
"""Divides of divides (after `power.DivideBySqrt`, before the other divides of exps)."""

CONSTANT_ARRAYS: tuple[type[Simplification], ...] = (
    MultiplyOfConstantProducts, MultiplyByBroadcastOfScalarProduct,
    MultiplyOfBroadcastScalarChain, DivideByBroadcast,
)  # fmt: skip
"""Constant arrays and broadcasts of scalars gathered (after broadcast sinking and the
later power and integer rewrites of multiply and divide)."""

PATTERNS: tuple[type[Simplification], ...] = (*ADD, *MULTIPLY, *DIVIDES, *CONSTANT_ARRAYS)
"""This family's rewrites, in the order they fire."""
