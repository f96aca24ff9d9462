"""`algsimp`: algebraic simplification (XLA's AlgebraicSimplifier), one pattern per rewrite.

Each pattern's docstring starts with its rewrite. The families follow XLA's
`algebraic_simplifier.cc` (numbered as in the reference notes, section 2.2). Rewrites that
can change floating-point results (reassociation, `x * 0 -> 0`, `a / c -> a * (1/c)` for
a `c` that is not a power of two, `log(exp(x)) -> x`, ...) run only with
`algsimp{float-unsafe=true}`; for integers they always run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass import attrs as A
from hlopass.dialects.hlo import HloOp, computations
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    const_array,
    constant_from_numpy,
    erase_dead,
    fusion_computations,
    is_constant_like,
    is_control_predecessor,
    is_one,
    is_zero,
    new_op,
    owner,
    replace_op,
    run_patterns,
    same_shape,
    scalar_constant,
    splat_value,
    value_shape,
)
from hlopass.shape import ArrayShape, Shape, is_float, is_integral

# --- framework ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AlgebraicSimplifierPass(HloModulePass):
    """Algebraic simplifications (XLA's algsimp), run to a fixed point per computation."""

    name: ClassVar[str] = "algsimp"

    float_unsafe: bool = False
    """Also apply rewrites that may change floating-point results (reassociation, x*0->0, ...)."""

    include_fusions: bool = False
    """Also simplify fused computations (XLA skips them)."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        patterns = [cls(rctx, self) for cls in PATTERNS]
        fused = set() if self.include_fusions else fusion_computations(module)
        comps = [c for c in computations(module) if c.comp_name not in fused]
        return run_patterns(module, patterns, comps)


@dataclass
class Simplification(RewritePattern):
    """Base: match `OPCODES`, call `rewrite`, replace the op with the value it returns."""

    ctx: RewriteContext
    opts: AlgebraicSimplifierPass
    OPCODES: ClassVar[tuple[str, ...]] = ()
    FLOAT_UNSAFE: ClassVar[bool] = False
    """The rewrite may change float results: for floats it needs `float-unsafe`."""
    _rw: PatternRewriter | None = field(default=None, init=False, repr=False)
    _created: list[HloOp] = field(default_factory=list, init=False, repr=False)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        if self.FLOAT_UNSAFE and not self.opts.float_unsafe and _is_float_op(op):
            return
        if is_control_predecessor(op):
            return  # another instruction names it in control-predecessors: it must stay
        self._rw = rewriter
        self._created = []
        result = self.rewrite(op)
        if result is None:
            assert not self._created, f"{type(self).__name__} created ops without rewriting"
            return
        value = result.result if isinstance(result, HloOp) else result
        if value is op.result:
            return
        if not same_shape(value_shape(value), op.shape):
            # e.g. a layout differs: undo what this rewrite built and keep the op
            erase_dead(rewriter, [value])
            return
        self.ctx.note(self, op, "-> " + (owner(value).inst_name if owner(value) else "?"))  # type: ignore[union-attr]
        replace_op(rewriter, op, value)

    def rewrite(self, op: HloOp) -> HloOp | SSAValue | None:
        raise NotImplementedError

    # builders (insert before the matched op)
    def new(self, opcode: str, operands: Sequence[SSAValue], shape: Shape,
            attrs: dict[str, Any] | None = None, like: HloOp | None = None) -> HloOp:  # fmt: skip
        assert self._rw is not None
        op = new_op(self._rw, self.ctx, opcode, operands, shape, attrs, like)
        self._created.append(op)
        return op

    def const(self, value: object, shape: ArrayShape) -> HloOp:
        """A scalar constant, broadcast to `shape` when `shape` is not a scalar."""
        assert self._rw is not None
        c = scalar_constant(self._rw, self.ctx, value, shape.element_type)
        self._created.append(c)
        if not shape.dims:
            return c
        return self.new("broadcast", [c.result], shape, {"dimensions": ()})

    def array_const(self, arr: np.ndarray, shape: ArrayShape) -> HloOp:
        assert self._rw is not None
        c = constant_from_numpy(self._rw, self.ctx, arr, shape)
        self._created.append(c)
        return c


def _et(op_or_value: HloOp | SSAValue) -> str:
    s = op_or_value.shape if isinstance(op_or_value, HloOp) else value_shape(op_or_value)
    return s.element_type if isinstance(s, ArrayShape) else ""


def _is_float_op(op: HloOp) -> bool:
    ets = {_et(op)} | {_et(v) for v in op.operands}
    return any(is_float(t) or t in ("c64", "c128") for t in ets)


def _src(value: SSAValue, opcode: str) -> HloOp | None:
    """The defining op of `value` when it is an `opcode` instruction."""
    o = owner(value)
    return o if o is not None and o.opcode == opcode else None


def _single_use(value: SSAValue) -> bool:
    return value.has_one_use()


def _array(s: Shape) -> ArrayShape | None:
    return s if isinstance(s, ArrayShape) else None


def _commuted(op: HloOp) -> list[tuple[SSAValue, SSAValue]]:
    a, b = op.operands
    return [(a, b), (b, a)]


def _splat_is(value: SSAValue, target: float) -> bool:
    v = splat_value(value)
    if v is None:
        return False
    try:
        return bool(v == target)
    except (TypeError, ValueError):
        return False


# --- 1-3. add -----------------------------------------------------------------------------


class AddZero(Simplification):
    """`add(x, 0) -> x` (and `add(0, x)`)."""

    OPCODES = ("add",)

    def rewrite(self, op: HloOp):
        for x, c in _commuted(op):
            if is_zero(c):
                return x
        return None


class AddConstantReassociation(Simplification):
    """`add(add(a, c1), add(b, c2)) -> add(add(a, b), add(c1, c2))` (c1, c2 constants)."""

    OPCODES = ("add",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        lhs, rhs = (_src(v, "add") for v in op.operands)
        if lhs is None or rhs is None or lhs is rhs:
            return None
        if not (_single_use(lhs.result) and _single_use(rhs.result)):
            return None
        lc = _split_const(lhs)
        rc = _split_const(rhs)
        if lc is None or rc is None:
            return None
        (a, c1), (b, c2) = lc, rc
        ab = self.new("add", [a, b], op.shape, like=op)
        cc = self.new("add", [c1, c2], op.shape, like=op)
        return self.new("add", [ab.result, cc.result], op.shape, like=op)


def _split_const(op: HloOp) -> tuple[SSAValue, SSAValue] | None:
    """(non-constant operand, constant operand) of a binary op with one constant side."""
    a, b = op.operands
    if is_constant_like(b) and not is_constant_like(a):
        return a, b
    if is_constant_like(a) and not is_constant_like(b):
        return b, a
    return None


class AddFactorCommonMultiplicand(Simplification):
    """`add(multiply(a, c), multiply(b, c)) -> multiply(add(a, b), c)`."""

    OPCODES = ("add",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        lhs, rhs = (_src(v, "multiply") for v in op.operands)
        if lhs is None or rhs is None or lhs is rhs:
            return None
        if not (_single_use(lhs.result) and _single_use(rhs.result)):
            return None
        for a, c in _commuted(lhs):
            for b, c2 in _commuted(rhs):
                if c is c2:
                    s = self.new("add", [a, b], op.shape, like=op)
                    return self.new("multiply", [s.result, c], op.shape, like=op)
        return None


# --- 4. subtract --------------------------------------------------------------------------


class SubtractZero(Simplification):
    """`subtract(x, 0) -> x`."""

    OPCODES = ("subtract",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        return x if is_zero(c) else None


class SubtractSelf(Simplification):
    """`subtract(x, x) -> 0` (integers; for floats x may be inf or nan)."""

    OPCODES = ("subtract",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a, b = op.operands
        if a is not b or not isinstance(op.shape, ArrayShape):
            return None
        return self.const(0, op.shape)


# --- 5-7. multiply ------------------------------------------------------------------------


class MultiplyOne(Simplification):
    """`multiply(x, 1) -> x` (and `multiply(1, x)`)."""

    OPCODES = ("multiply",)

    def rewrite(self, op: HloOp):
        for x, c in _commuted(op):
            if is_one(c):
                return x
        return None


class MultiplyZero(Simplification):
    """`multiply(x, 0) -> 0` (integers; for floats 0*inf is nan)."""

    OPCODES = ("multiply",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        for _x, c in _commuted(op):
            if is_zero(c):
                return c
        return None


class MultiplyNegNeg(Simplification):
    """`multiply(negate(a), negate(b)) -> multiply(a, b)`."""

    OPCODES = ("multiply",)

    def rewrite(self, op: HloOp):
        na, nb = (_src(v, "negate") for v in op.operands)
        if na is None or nb is None:
            return None
        return self.new("multiply", [na.operands[0], nb.operands[0]], op.shape, like=op)


class MultiplyConstantReassociation(Simplification):
    """`multiply(multiply(x, c1), c2) -> multiply(x, multiply(c1, c2))` (c1, c2 constants)."""

    OPCODES = ("multiply",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        for inner_v, c2 in _commuted(op):
            inner = _src(inner_v, "multiply")
            if inner is None or not is_constant_like(c2) or not _single_use(inner_v):
                continue
            split = _split_const(inner)
            if split is None:
                continue
            x, c1 = split
            cc = self.new("multiply", [c1, c2], op.shape, like=op)
            return self.new("multiply", [x, cc.result], op.shape, like=op)
        return None


# --- 8. divide ----------------------------------------------------------------------------


class DivideOne(Simplification):
    """`divide(x, 1) -> x`."""

    OPCODES = ("divide",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        return x if is_one(c) else None


def _power_of_two_exponent(v: Any) -> int | None:
    try:
        iv = int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    if iv != v or iv <= 0 or iv & (iv - 1):
        return None
    return iv.bit_length() - 1


class DivideUnsignedPowerOfTwo(Simplification):
    """`divide(x, 2^k) -> shift-right-logical(x, k)` (unsigned integers)."""

    OPCODES = ("divide",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        shape = _array(op.shape)
        if shape is None or not shape.element_type.startswith("u"):
            return None
        k = _power_of_two_exponent(splat_value(c))
        if k is None:
            return None
        return self.new("shift-right-logical", [x, self.const(k, shape).result], shape, like=op)


class DivideByConstant(Simplification):
    """`divide(x, c) -> multiply(x, 1/c)` (floats; exact when c is a power of two)."""

    OPCODES = ("divide",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        shape = _array(op.shape)
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
        if not exact and not self.opts.float_unsafe:
            return None
        inv = np.asarray(1.0 / fv).astype(np.asarray(v).dtype if exact else np.float64)
        if not np.isfinite(float(inv)) or float(inv) == 0:
            return None
        if exact and float(inv) * fv != 1.0:  # 1/c not representable (subnormal range)
            return None
        return self.new("multiply", [x, self.const(inv, shape).result], shape, like=op)


class DivideBySqrt(Simplification):
    """`divide(a, sqrt(b)) -> multiply(a, rsqrt(b))`."""

    OPCODES = ("divide",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a, s = op.operands
        sq = _src(s, "sqrt")
        if sq is None:
            return None
        r = self.new("rsqrt", [sq.operands[0]], sq.shape, like=sq)
        return self.new("multiply", [a, r.result], op.shape, like=op)


class DivideOfDivide(Simplification):
    """`divide(divide(a, b), c) -> divide(a, multiply(b, c))`."""

    OPCODES = ("divide",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        inner_v, c = op.operands
        inner = _src(inner_v, "divide")
        if inner is None or not _single_use(inner_v) or is_integral(_et(op)):
            return None
        a, b = inner.operands
        bc = self.new("multiply", [b, c], op.shape, like=op)
        return self.new("divide", [a, bc.result], op.shape, like=op)


# --- 9. remainder -------------------------------------------------------------------------


class RemainderUnsignedPowerOfTwo(Simplification):
    """`remainder(x, 2^k) -> and(x, 2^k - 1)` (unsigned integers)."""

    OPCODES = ("remainder",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        shape = _array(op.shape)
        if shape is None or not shape.element_type.startswith("u"):
            return None
        v = splat_value(c)
        k = _power_of_two_exponent(v)
        if k is None:
            return None
        return self.new("and", [x, self.const((1 << k) - 1, shape).result], shape, like=op)


# --- 10. and / or -------------------------------------------------------------------------


class AndTrue(Simplification):
    """`and(a, true) -> a`; `and(a, false) -> false` (pred)."""

    OPCODES = ("and",)

    def rewrite(self, op: HloOp):
        if _et(op) != "pred":
            return None
        for x, c in _commuted(op):
            if _splat_is(c, True):
                return x
            if _splat_is(c, False):
                return c
        return None


class OrFalse(Simplification):
    """`or(a, false) -> a`; `or(a, true) -> true` (pred)."""

    OPCODES = ("or",)

    def rewrite(self, op: HloOp):
        if _et(op) != "pred":
            return None
        for x, c in _commuted(op):
            if _splat_is(c, False):
                return x
            if _splat_is(c, True):
                return c
        return None


class AndOrSelf(Simplification):
    """`and(a, a) -> a`; `or(a, a) -> a`."""

    OPCODES = ("and", "or")

    def rewrite(self, op: HloOp):
        a, b = op.operands
        return a if a is b else None


# --- 11. involutions ----------------------------------------------------------------------


class NegateNegate(Simplification):
    """`negate(negate(x)) -> x`."""

    OPCODES = ("negate",)

    def rewrite(self, op: HloOp):
        inner = _src(op.operands[0], "negate")
        return inner.operands[0] if inner is not None else None


class NotNot(Simplification):
    """`not(not(x)) -> x`."""

    OPCODES = ("not",)

    def rewrite(self, op: HloOp):
        inner = _src(op.operands[0], "not")
        return inner.operands[0] if inner is not None else None


# --- 12. log / exp / power ----------------------------------------------------------------


class LogOfExp(Simplification):
    """`log(exp(x)) -> x` (exp may overflow to inf, so float-unsafe)."""

    OPCODES = ("log",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        inner = _src(op.operands[0], "exponential")
        return inner.operands[0] if inner is not None else None


class PowerOne(Simplification):
    """`power(x, 1) -> x`."""

    OPCODES = ("power",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        return x if is_one(c) else None


class PowerZero(Simplification):
    """`power(x, 0) -> 1` (pow(x, 0) is 1 for every x, nan included)."""

    OPCODES = ("power",)

    def rewrite(self, op: HloOp):
        _x, c = op.operands
        shape = _array(op.shape)
        if shape is None or not is_zero(c):
            return None
        return self.const(1, shape)


class PowerTwo(Simplification):
    """`power(x, 2) -> multiply(x, x)`."""

    OPCODES = ("power",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        if not _splat_is(c, 2):
            return None
        return self.new("multiply", [x, x], op.shape, like=op)


class PowerMinusOne(Simplification):
    """`power(x, -1) -> divide(1, x)` (floats)."""

    OPCODES = ("power",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        shape = _array(op.shape)
        if shape is None or not is_float(shape.element_type) or not _splat_is(c, -1):
            return None
        return self.new("divide", [self.const(1, shape).result, x], shape, like=op)


# --- 13. max / min / clamp ----------------------------------------------------------------


class MaxMinSelf(Simplification):
    """`maximum(x, x) -> x`; `minimum(x, x) -> x`."""

    OPCODES = ("maximum", "minimum")

    def rewrite(self, op: HloOp):
        a, b = op.operands
        return a if a is b else None


def _lowest(et: str) -> float | int | None:
    if is_float(et):
        return -math.inf
    if is_integral(et):
        from hlopass.literal import numpy_dtype

        return int(np.iinfo(numpy_dtype(et)).min)
    return None


def _highest(et: str) -> float | int | None:
    if is_float(et):
        return math.inf
    if is_integral(et):
        from hlopass.literal import numpy_dtype

        return int(np.iinfo(numpy_dtype(et)).max)
    return None


class MaxOfLowest(Simplification):
    """`maximum(x, -inf) -> x` (the lowest value of integer types too)."""

    OPCODES = ("maximum",)

    def rewrite(self, op: HloOp):
        low = _lowest(_et(op))
        if low is None:
            return None
        for x, c in _commuted(op):
            if _splat_is(c, low):
                return x
        return None


class MinOfHighest(Simplification):
    """`minimum(x, +inf) -> x` (the highest value of integer types too)."""

    OPCODES = ("minimum",)

    def rewrite(self, op: HloOp):
        high = _highest(_et(op))
        if high is None:
            return None
        for x, c in _commuted(op):
            if _splat_is(c, high):
                return x
        return None


class MaxMinAbsorb(Simplification):
    """`maximum(maximum(x, y), y) -> maximum(x, y)` (and the same for minimum)."""

    OPCODES = ("maximum", "minimum")

    def rewrite(self, op: HloOp):
        for inner_v, y in _commuted(op):
            inner = _src(inner_v, op.opcode)
            if inner is not None and y in tuple(inner.operands):
                return inner_v
        return None


class ClampOfClamp(Simplification):
    """`clamp(lo, clamp(lo, x, hi), hi) -> clamp(lo, x, hi)`."""

    OPCODES = ("clamp",)

    def rewrite(self, op: HloOp):
        lo, x, hi = op.operands
        inner = _src(x, "clamp")
        if inner is None or inner.operands[0] is not lo or inner.operands[2] is not hi:
            return None
        return x


# --- 14. compare --------------------------------------------------------------------------


class CompareSelf(Simplification):
    """`compare(x, x, EQ|GE|LE) -> true`, `compare(x, x, NE|LT|GT) -> false` (integers)."""

    OPCODES = ("compare",)

    def rewrite(self, op: HloOp):
        a, b = op.operands
        shape = _array(op.shape)
        if a is not b or shape is None:
            return None
        et = _et(a)
        if not (is_integral(et) or et == "pred"):
            return None
        direction = op.attr("direction")
        if direction not in ("EQ", "GE", "LE", "NE", "LT", "GT"):
            return None
        return self.const(direction in ("EQ", "GE", "LE"), shape)


class CompareUnsignedZero(Simplification):
    """`compare(x, 0, LT) -> false`, `compare(x, 0, GE) -> true` (unsigned x)."""

    OPCODES = ("compare",)

    def rewrite(self, op: HloOp):
        x, c = op.operands
        shape = _array(op.shape)
        if shape is None or not _et(x).startswith("u") or not is_zero(c):
            return None
        direction = op.attr("direction")
        if direction == "LT":
            return self.const(False, shape)
        if direction == "GE":
            return self.const(True, shape)
        return None


class ComparePredicateConstant(Simplification):
    """`compare(a, true, EQ) -> a`; `compare(a, false, NE) -> a` (pred a)."""

    OPCODES = ("compare",)

    def rewrite(self, op: HloOp):
        if _et(op.operands[0]) != "pred":
            return None
        direction = op.attr("direction")
        for a, c in _commuted(op):
            if (direction == "EQ" and _splat_is(c, True)) or (
                direction == "NE" and _splat_is(c, False)
            ):
                return a
        return None


# --- 15. select ---------------------------------------------------------------------------


class SelectSameBranches(Simplification):
    """`select(p, x, x) -> x`."""

    OPCODES = ("select",)

    def rewrite(self, op: HloOp):
        _p, a, b = op.operands
        return a if a is b else None


class SelectConstantPredicate(Simplification):
    """`select(true, a, b) -> a`; `select(false, a, b) -> b`."""

    OPCODES = ("select",)

    def rewrite(self, op: HloOp):
        p, a, b = op.operands
        v = splat_value(p)
        if v is None:
            return None
        return a if bool(v) else b


class SelectOfNot(Simplification):
    """`select(not(p), a, b) -> select(p, b, a)`."""

    OPCODES = ("select",)

    def rewrite(self, op: HloOp):
        p, a, b = op.operands
        n = _src(p, "not")
        if n is None:
            return None
        return self.new("select", [n.operands[0], b, a], op.shape, like=op)


class SelectBooleans(Simplification):
    """`select(p, true, false) -> p`; `select(p, false, true) -> not(p)`."""

    OPCODES = ("select",)

    def rewrite(self, op: HloOp):
        p, a, b = op.operands
        if _et(op) != "pred" or not same_shape(value_shape(p), op.shape):
            return None
        if _splat_is(a, True) and _splat_is(b, False):
            return p
        if _splat_is(a, False) and _splat_is(b, True):
            return self.new("not", [p], op.shape, like=op)
        return None


# --- 16. tuples ---------------------------------------------------------------------------


class GetTupleElementOfTuple(Simplification):
    """`get-tuple-element(tuple(a0, ..., an), i) -> ai`."""

    OPCODES = ("get-tuple-element",)

    def rewrite(self, op: HloOp):
        t = _src(op.operands[0], "tuple")
        if t is None:
            return None
        return t.operands[op.attr("index")]


# --- 17. constants ------------------------------------------------------------------------


class SplatConstantToBroadcast(Simplification):
    """`constant({c, c, ..., c}) -> broadcast(constant(c))` (non-scalar splat constants)."""

    OPCODES = ("constant",)

    def rewrite(self, op: HloOp):
        shape = _array(op.shape)
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
        shape = _array(op.shape)
        arr = const_array(op.result)
        if shape is None or arr is None or shape.rank != 1 or arr.size <= 1:
            return None
        if not (
            is_integral(shape.element_type) or shape.element_type in ("f16", "f32", "f64", "bf16")
        ):
            return None
        if not np.array_equal(arr.astype(np.float64), np.arange(arr.size, dtype=np.float64)):
            return None
        return self.new("iota", [], shape, {"iota_dimension": 0}, like=op)


# --- 18. broadcast ------------------------------------------------------------------------


class BroadcastOfBroadcast(Simplification):
    """`broadcast(broadcast(x, dims=d1), dims=d2) -> broadcast(x, dims=d2[d1])`."""

    OPCODES = ("broadcast",)

    def rewrite(self, op: HloOp):
        inner = _src(op.operands[0], "broadcast")
        if inner is None:
            return None
        d1 = inner.attr("dimensions") or ()
        d2 = op.attr("dimensions") or ()
        dims = tuple(d2[i] for i in d1)
        return self.new("broadcast", [inner.operands[0]], op.shape, {"dimensions": dims}, like=op)


class BroadcastNoop(Simplification):
    """`broadcast(x, dims={0,..,n-1})` of x's own shape -> x."""

    OPCODES = ("broadcast",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = _array(value_shape(x))
        shape = _array(op.shape)
        if s is None or shape is None or s.dims != shape.dims:
            return None
        if tuple(op.attr("dimensions") or ()) != tuple(range(s.rank)):
            return None
        return x


class BroadcastToReshape(Simplification):
    """`broadcast(x)` adding only size-1 dims, order kept -> `reshape(x)`."""

    OPCODES = ("broadcast",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = _array(value_shape(x))
        shape = _array(op.shape)
        dims = tuple(op.attr("dimensions") or ())
        if s is None or shape is None or s.dims == shape.dims or s.is_dynamic or shape.is_dynamic:
            return None
        if s.num_elements != shape.num_elements or list(dims) != sorted(dims):
            return None
        if s.rank == 0:
            return None  # a scalar broadcast is already canonical
        return self.new("reshape", [x], shape, like=op)


# --- 19. reshape --------------------------------------------------------------------------


class ReshapeNoop(Simplification):
    """`reshape(x)` to x's own dims -> x."""

    OPCODES = ("reshape",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = _array(value_shape(x))
        return x if s is not None and not s.is_dynamic and s.dims == op.shape.dims else None  # type: ignore[attr-defined]


class ReshapeOfReshape(Simplification):
    """`reshape(reshape(x)) -> reshape(x)`."""

    OPCODES = ("reshape",)

    def rewrite(self, op: HloOp):
        inner = _src(op.operands[0], "reshape")
        if inner is None or _array(op.shape) is None or op.shape.is_dynamic:  # type: ignore[union-attr]
            return None
        return self.new("reshape", [inner.operands[0]], op.shape, like=op)


class ReshapeOfScalarBroadcast(Simplification):
    """`reshape(broadcast(scalar)) -> broadcast(scalar)`."""

    OPCODES = ("reshape",)

    def rewrite(self, op: HloOp):
        b = _src(op.operands[0], "broadcast")
        if b is None or _array(value_shape(b.operands[0])) is None:
            return None
        if value_shape(b.operands[0]).rank != 0:  # type: ignore[attr-defined]
            return None
        return self.new("broadcast", [b.operands[0]], op.shape, {"dimensions": ()}, like=op)


# --- 20. transpose ------------------------------------------------------------------------


class TransposeIdentity(Simplification):
    """`transpose(x, dimensions={0,1,..})` -> x."""

    OPCODES = ("transpose",)

    def rewrite(self, op: HloOp):
        perm = tuple(op.attr("dimensions") or ())
        return op.operands[0] if perm == tuple(range(len(perm))) else None


class TransposeOfTranspose(Simplification):
    """`transpose(transpose(x, p1), p2) -> transpose(x, p1[p2])`."""

    OPCODES = ("transpose",)

    def rewrite(self, op: HloOp):
        inner = _src(op.operands[0], "transpose")
        if inner is None:
            return None
        p1 = inner.attr("dimensions")
        p2 = op.attr("dimensions")
        perm = tuple(p1[i] for i in p2)
        return self.new("transpose", [inner.operands[0]], op.shape, {"dimensions": perm}, like=op)


# --- 21. copy -----------------------------------------------------------------------------


class CopyNoop(Simplification):
    """`copy(x)` with x's own shape and layout -> x."""

    OPCODES = ("copy",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        return x if same_shape(value_shape(x), op.shape) else None


class CopyOfCopy(Simplification):
    """`copy(copy(x)) -> copy(x)`."""

    OPCODES = ("copy",)

    def rewrite(self, op: HloOp):
        inner = _src(op.operands[0], "copy")
        if inner is None:
            return None
        return self.new("copy", [inner.operands[0]], op.shape, like=op)


# --- 22. slice ----------------------------------------------------------------------------


class SliceNoop(Simplification):
    """`slice(x, [0:n] per dim)` covering all of x -> x."""

    OPCODES = ("slice",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = _array(value_shape(x))
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
        inner = _src(op.operands[0], "slice")
        shape = _array(op.shape)
        if inner is None or shape is None:
            return None
        out = []
        for a, b, n in zip(inner.attr("slice"), op.attr("slice"), shape.dims, strict=False):
            start = a.start + b.start * a.stride
            stride = a.stride * b.stride
            limit = start + (n - 1) * stride + 1 if n > 0 else start
            out.append(A.SliceDim(start, limit, stride))
        return self.new("slice", [inner.operands[0]], shape, {"slice": tuple(out)}, like=op)


# --- 23. concatenate ----------------------------------------------------------------------


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
            inner = _src(v, "concatenate")
            if inner is not None and inner.attr("dimensions") == dims and _single_use(v):
                flat.extend(inner.operands)
                found = True
            else:
                flat.append(v)
        if not found:
            return None
        return self.new("concatenate", flat, op.shape, {"dimensions": dims}, like=op)


# --- 24. pad ------------------------------------------------------------------------------


class PadNoop(Simplification):
    """`pad(x, v), padding=0_0x0_0...` -> x."""

    OPCODES = ("pad",)

    def rewrite(self, op: HloOp):
        if all(p.low == 0 and p.high == 0 and p.interior == 0 for p in op.attr("padding")):
            return op.operands[0]
        return None


# --- 25. dynamic slices -------------------------------------------------------------------


class DynamicSliceFull(Simplification):
    """`dynamic-slice(x, i...)` of all of x -> x (offsets clamp to 0)."""

    OPCODES = ("dynamic-slice",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = _array(value_shape(x))
        if s is None or s.is_dynamic or tuple(op.attr("dynamic_slice_sizes")) != s.dims:
            return None
        return x


class DynamicUpdateSliceFull(Simplification):
    """`dynamic-update-slice(x, u, i...)` with u as big as x -> u."""

    OPCODES = ("dynamic-update-slice",)

    def rewrite(self, op: HloOp):
        x, u = op.operands[0], op.operands[1]
        su, sx = _array(value_shape(u)), _array(value_shape(x))
        if su is None or sx is None or su.dims != sx.dims or su.is_dynamic:
            return None
        return u


# --- 26-27. reduce, reduce-window ---------------------------------------------------------


class ReduceTrivial(Simplification):
    """`reduce(x, init)` removing no elements -> `reshape(x)` (init is the identity, as XLA assumes)."""

    OPCODES = ("reduce",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        x = op.operands[0]
        s, shape = _array(value_shape(x)), _array(op.shape)
        if s is None or shape is None or s.is_dynamic or s.num_elements != shape.num_elements:
            return None
        if s.num_elements == 0:
            return None
        if s.dims == shape.dims:
            return x
        return self.new("reshape", [x], shape, like=op)


class ReduceOfEmpty(Simplification):
    """`reduce(x, init)` of a zero-element x -> `broadcast(init)`."""

    OPCODES = ("reduce",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        x, init = op.operands
        s, shape = _array(value_shape(x)), _array(op.shape)
        if s is None or shape is None or s.num_elements != 0 or shape.num_elements == 0:
            return None
        return self.new("broadcast", [init], shape, {"dimensions": ()}, like=op)


class ReduceWindowTrivial(Simplification):
    """`reduce-window(x, init)` with a 1x..x1 window, stride 1, no padding -> x."""

    OPCODES = ("reduce-window",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        x = op.operands[0]
        window = op.attr("window")
        if window is not None and any(
            (w.size, w.stride, w.pad_low, w.pad_high, w.lhs_dilation, w.rhs_dilation)
            != (1, 1, 0, 0, 1, 1)
            for w in window.dims
        ):
            return None
        return x if same_shape(value_shape(x), op.shape) else None


# --- 28-29. dot, convolution --------------------------------------------------------------


class DotOfEmpty(Simplification):
    """`dot(a, b)` contracting zero elements -> `broadcast(0)`."""

    OPCODES = ("dot",)

    def rewrite(self, op: HloOp):
        a = _array(value_shape(op.operands[0]))
        shape = _array(op.shape)
        if a is None or shape is None:
            return None
        contracting = op.attr("lhs_contracting_dims") or ()
        n = 1
        for d in contracting:
            n *= a.dims[d]
        if n != 0 and a.num_elements != 0:
            return None
        return self.const(0, shape)


class DotOfScalars(Simplification):
    """`dot(a, b)` of two scalars -> `multiply(a, b)`."""

    OPCODES = ("dot",)

    def rewrite(self, op: HloOp):
        a, b = op.operands
        sa, sb, shape = _array(value_shape(a)), _array(value_shape(b)), _array(op.shape)
        if sa is None or sb is None or shape is None or sa.rank or sb.rank:
            return None
        if sa.element_type != shape.element_type or sb.element_type != shape.element_type:
            return None
        return self.new("multiply", [a, b], shape, like=op)


class ConvolutionOfEmpty(Simplification):
    """`convolution(x, k)` with a zero-element input or kernel -> `broadcast(0)`."""

    OPCODES = ("convolution",)

    def rewrite(self, op: HloOp):
        shape = _array(op.shape)
        shapes = [_array(value_shape(v)) for v in op.operands]
        if shape is None or any(s is None for s in shapes):
            return None
        if not any(s.num_elements == 0 for s in shapes):  # type: ignore[union-attr]
            return None
        return self.const(0, shape)


# --- 30. convert and friends --------------------------------------------------------------


class ConvertNoop(Simplification):
    """`convert(x)` to x's own element type -> x (and the same for bitcast-convert)."""

    OPCODES = ("convert", "bitcast-convert")

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        return x if same_shape(value_shape(x), op.shape) else None


def _widens_exactly(src: str, dst: str) -> bool:
    """Every `src` value is exactly representable in `dst`."""
    from hlopass.shape import ELEMENT_BITS

    if is_float(src) and is_float(dst):
        order = {"f16": 1, "bf16": 1, "f32": 2, "f64": 3}
        if src in order and dst in order:
            return order[dst] > order[src] or src == dst
        return False
    if src == "pred":
        return is_integral(dst) or is_float(dst)
    if is_integral(src) and is_integral(dst):
        if src[0] == dst[0]:
            return ELEMENT_BITS[dst] >= ELEMENT_BITS[src]
        return src[0] == "u" and dst[0] == "s" and ELEMENT_BITS[dst] > ELEMENT_BITS[src]
    return False


class ConvertRoundTrip(Simplification):
    """`convert(convert(x: T -> U) -> T)` -> x when U holds every T value."""

    OPCODES = ("convert",)

    def rewrite(self, op: HloOp):
        inner = _src(op.operands[0], "convert")
        if inner is None:
            return None
        x = inner.operands[0]
        if not same_shape(value_shape(x), op.shape):
            return None
        return x if _widens_exactly(_et(x), _et(inner)) else None


class RealOfComplex(Simplification):
    """`real(complex(r, i)) -> r`; `imag(complex(r, i)) -> i`."""

    OPCODES = ("real", "imag")

    def rewrite(self, op: HloOp):
        c = _src(op.operands[0], "complex")
        if c is None:
            return None
        return c.operands[0 if op.opcode == "real" else 1]


class ComplexOfRealImag(Simplification):
    """`complex(real(c), imag(c)) -> c`."""

    OPCODES = ("complex",)

    def rewrite(self, op: HloOp):
        r, i = (_src(v, k) for v, k in zip(op.operands, ("real", "imag"), strict=False))
        if r is None or i is None or r.operands[0] is not i.operands[0]:
            return None
        return r.operands[0]


PATTERNS: tuple[type[Simplification], ...] = (
    AddZero, AddConstantReassociation, AddFactorCommonMultiplicand,
    SubtractZero, SubtractSelf,
    MultiplyOne, MultiplyZero, MultiplyNegNeg, MultiplyConstantReassociation,
    DivideOne, DivideUnsignedPowerOfTwo, DivideByConstant, DivideBySqrt, DivideOfDivide,
    RemainderUnsignedPowerOfTwo,
    AndTrue, OrFalse, AndOrSelf,
    NegateNegate, NotNot,
    LogOfExp, PowerOne, PowerZero, PowerTwo, PowerMinusOne,
    MaxMinSelf, MaxOfLowest, MinOfHighest, MaxMinAbsorb, ClampOfClamp,
    CompareSelf, CompareUnsignedZero, ComparePredicateConstant,
    SelectSameBranches, SelectConstantPredicate, SelectOfNot, SelectBooleans,
    GetTupleElementOfTuple,
    SplatConstantToBroadcast, IotaConstantToIota,
    BroadcastOfBroadcast, BroadcastNoop, BroadcastToReshape,
    ReshapeNoop, ReshapeOfReshape, ReshapeOfScalarBroadcast,
    TransposeIdentity, TransposeOfTranspose,
    CopyNoop, CopyOfCopy,
    SliceNoop, SliceOfSlice,
    ConcatenateSingle, ConcatenateDropEmpty, ConcatenateFlatten,
    PadNoop,
    DynamicSliceFull, DynamicUpdateSliceFull,
    ReduceTrivial, ReduceOfEmpty, ReduceWindowTrivial,
    DotOfEmpty, DotOfScalars, ConvolutionOfEmpty,
    ConvertNoop, ConvertRoundTrip, RealOfComplex, ComplexOfRealImag,
)  # fmt: skip
