"""`algsimp` family: Integer identities: rewrites exact for integers (float-unsafe for floats)."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape, is_integral
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    CONSTANT_LIKE,
    array,
    commuted,
    highest,
    partner,
    power_of_two_exponent,
    src,
)
from hlopass.passes.algsimp.identities import AddZero
from hlopass.rewriting import (
    is_zero,
    owner,
    splat_value,
)


class SubtractSelf(Simplification):
    """`subtract(x, x) -> 0` (integers; for floats x may be inf or nan)."""

    OPCODES = ("subtract",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a, b = op.operands
        if a is not b or not isinstance(op.shape, ArrayShape):
            return None
        return self.const(0, op.shape)


class MultiplyZero(Simplification):
    """`multiply(x, 0) -> 0` (integers; for floats 0*inf is nan)."""

    OPCODES = ("multiply",)
    OPERAND_FROM = CONSTANT_LIKE
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        for _x, c in commuted(op):
            if is_zero(c):
                return c
        return None


def _unsigned_power_of_two(op: HloOp) -> tuple[ArrayShape, int] | None:
    """(op's shape, k) for `op(x, 2^k)` over unsigned integers (2^k a splat constant), else
    None: the divide and remainder of such an x are a shift and a mask."""
    shape = array(op.shape)
    if shape is None or not shape.element_type.startswith("u"):
        return None
    k = power_of_two_exponent(splat_value(op.operands[1]))
    return None if k is None else (shape, k)


class DivideUnsignedPowerOfTwo(Simplification):
    """`divide(x, 2^k) -> shift-right-logical(x, k)` (unsigned integers)."""

    OPCODES = ("divide",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        found = _unsigned_power_of_two(op)
        if found is None:
            return None
        shape, k = found
        x = op.operands[0]
        return self.new("shift-right-logical", [x, self.const(k, shape).result], shape, like=op)


class RemainderUnsignedPowerOfTwo(Simplification):
    """`remainder(x, 2^k) -> and(x, 2^k - 1)` (unsigned integers)."""

    OPCODES = ("remainder",)
    OPERAND_FROM = CONSTANT_LIKE

    def rewrite(self, op: HloOp):
        found = _unsigned_power_of_two(op)
        if found is None:
            return None
        shape, k = found
        x = op.operands[0]
        return self.new("and", [x, self.const((1 << k) - 1, shape).result], shape, like=op)


class XorSelf(Simplification):
    """`xor(x, x) -> 0` (integers and pred)."""

    OPCODES = ("xor",)

    def rewrite(self, op: HloOp):
        a, b = op.operands
        shape = array(op.shape)
        if a is not b or shape is None:
            return None
        return self.const(False if shape.element_type == "pred" else 0, shape)


class AddOfSubtractCancel(Simplification):
    """`add(subtract(y, x), x) -> y` (and `add(x, subtract(y, x))`; exact for integers, whose
    arithmetic wraps; for floats the subtraction rounds)."""

    OPCODES = ("add",)
    OPERAND_FROM = frozenset({"subtract"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        for s_v, x in commuted(op):
            s = src(s_v, "subtract")
            if s is not None and s.operands[1] is x:
                return s.operands[0]
        return None


class SubtractOfSubtractCancel(Simplification):
    """`subtract(x, subtract(x, y)) -> y` (exact for integers, which wrap; for floats the
    inner subtraction rounds)."""

    OPCODES = ("subtract",)
    OPERAND_FROM = frozenset({"subtract"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        x, s_v = op.operands
        s = src(s_v, "subtract")
        if s is None or s.operands[0] is not x:
            return None
        return s.operands[1]


class SubtractOfAddCancel(Simplification):
    """`subtract(x, add(x, y)) -> negate(y)` (and `add(y, x)`; exact for integers, which
    wrap; for floats the addition rounds)."""

    OPCODES = ("subtract",)
    OPERAND_FROM = frozenset({"add"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        x, a_v = op.operands
        a = src(a_v, "add")
        y = None if a is None else partner(a, x)
        return None if y is None else self.new("negate", [y], op.shape, like=op)


class AddMinusOperand(Simplification):
    """`subtract(add(x, y), x) -> y` (and `add(y, x)`; exact for integers, which wrap; for
    floats the addition rounds)."""

    OPCODES = ("subtract",)
    OPERAND_FROM = frozenset({"add"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        a_v, x = op.operands
        a = src(a_v, "add")
        return None if a is None else partner(a, x)


class RemainderOfIota(Simplification):
    """`remainder(iota, c) -> iota` when c is a constant larger than every iota value
    (integers: 0 <= i < n <= c)."""

    OPCODES = ("remainder",)
    OPERAND_FROM = frozenset({"iota"})

    def rewrite(self, op: HloOp):
        i_v, c = op.operands
        iota = src(i_v, "iota")
        shape = array(op.shape)
        if iota is None or shape is None or not is_integral(shape.element_type):
            return None
        n = shape.dims[iota.attr("iota_dimension")]
        v = splat_value(c)
        if v is None or shape.is_dynamic:
            return None
        return i_v if int(v) >= n else None


def _positive_power_of_two(op: HloOp) -> int | None:
    """k when `op`'s divisor is a splat constant 2^k > 0 of a signed integer type."""
    shape = array(op.shape)
    if shape is None or not shape.element_type.startswith("s") or shape.element_type == "s1":
        return None
    return power_of_two_exponent(splat_value(op.operands[1]))


class _SignedBySelect(Simplification):
    """Shared body: `select(x < 0, -f(|x|), f(|x|))` with `|x| = select(x < 0, -x, x)`
    (for INT_MIN, -x wraps to INT_MIN, whose bits read unsigned are |INT_MIN|)."""

    OPCODES = ("divide", "remainder")
    OPERAND_FROM = CONSTANT_LIKE  # (the divisor: `_positive_power_of_two`)

    def magnitude_op(self, ax, k: int, shape: ArrayShape) -> HloOp:
        raise NotImplementedError

    def rewrite(self, op: HloOp):
        k = _positive_power_of_two(op)
        if k is None:
            return None
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        x = op.operands[0]
        neg = self.new("compare", [x, self.const(0, shape).result],
                       shape.with_element_type("pred"), {"direction": "LT"}, like=op)  # fmt: skip
        minus_x = self.new("negate", [x], shape, like=op)
        ax = self.new("select", [neg.result, minus_x.result, x], shape, like=op)
        q = self.magnitude_op(ax.result, k, shape)
        minus_q = self.new("negate", [q.result], shape, like=op)
        return self.new("select", [neg.result, minus_q.result, q.result], shape, like=op)


class DivideSignedPowerOfTwo(_SignedBySelect):
    """`divide(x, 2^k) -> select(x < 0, -(|x| >>> k), |x| >>> k)` (signed integers, a
    constant divisor 2^k > 0; `>>>` the logical shift; division truncates toward 0)."""

    OPCODES = ("divide",)

    def magnitude_op(self, ax, k: int, shape: ArrayShape) -> HloOp:
        return self.new("shift-right-logical", [ax, self.const(k, shape).result], shape)


class RemainderSignedPowerOfTwo(_SignedBySelect):
    """`remainder(x, 2^k) -> select(x < 0, -(|x| & (2^k-1)), |x| & (2^k-1))` (signed
    integers, a constant divisor 2^k > 0; the remainder takes the dividend's sign)."""

    OPCODES = ("remainder",)

    def magnitude_op(self, ax, k: int, shape: ArrayShape) -> HloOp:
        mask = self.const((1 << k) - 1, shape)
        return self.new("and", [ax, mask.result], shape)


class RemainderOfRemainder(Simplification):
    """`remainder(remainder(a, b), b) -> remainder(a, b)` (|a % b| < |b| already, and a % 0
    is a for integers; for floats fmod is exact)."""

    OPCODES = ("remainder",)
    OPERAND_FROM = frozenset({"remainder"})

    def rewrite(self, op: HloOp):
        inner_v, b = op.operands
        inner = src(inner_v, "remainder")
        if inner is None or inner.operands[1] is not b:
            return None
        return inner_v


class RemainderOfIotaPlusDivisor(Simplification):
    """`remainder(add(iota, N), N) -> remainder(iota, N)` (N a constant scalar broadcast and
    iota + N not overflowing the integer type)."""

    OPCODES = ("remainder",)
    OPERAND_FROM = frozenset({"add"})

    def rewrite(self, op: HloOp):
        sum_v, n_v = op.operands
        s = src(sum_v, "add")
        shape = array(op.shape)
        n = splat_value(n_v)
        if s is None or shape is None or n is None or not is_integral(shape.element_type):
            return None
        if shape.is_dynamic:
            return None
        for i_v, c in commuted(s):
            iota = src(i_v, "iota")
            if iota is None or splat_value(c) != n:
                continue
            if int(n) + shape.dims[iota.attr("iota_dimension")] - 1 > highest(shape.element_type):
                return None  # iota + N would wrap
            return self.new("remainder", [i_v, n_v], shape, like=op)
        return None


class XorZero(AddZero):
    """`xor(x, 0) -> x` (and `xor(0, x)`; integers, and pred with false): add's rule."""

    OPCODES = ("xor",)


# Instructions whose every run gives the same value from the same operands (an rng, a
# custom-call, a collective or anything with an effect may not).
_REPEATABLE_EXCLUDED = frozenset({
    "rng", "rng-bit-generator", "rng-get-and-update-state", "custom-call", "infeed",
    "outfeed", "send", "recv", "send-done", "recv-done", "all-reduce", "all-gather",
    "all-to-all", "collective-permute", "reduce-scatter", "parameter", "call", "while",
    "conditional", "fusion", "after-all", "partition-id", "replica-id",
})  # fmt: skip
_NAME_KEYS = frozenset({"name", "metadata"})


def identical(a: HloOp, b: HloOp) -> bool:
    """Two instructions compute the same value: one opcode, shape, operands and attributes
    (names and metadata aside), and the opcode gives the same value at every run."""
    if a.OPCODE != b.OPCODE or a.OPCODE in _REPEATABLE_EXCLUDED or a.shape != b.shape:
        return False
    if tuple(a.operands) != tuple(b.operands) or a.regions or b.regions:
        return False
    pa = {k: v for k, v in a.properties.items() if k not in _NAME_KEYS}
    pb = {k: v for k, v in b.properties.items() if k not in _NAME_KEYS}
    return pa == pb and dict(a.attributes) == dict(b.attributes)


class XorOfIdentical(Simplification):
    """`xor(f(y), f(y)) -> 0` for two identical instructions (what CSE would merge, before
    CSE runs; an rng and other instructions that differ from run to run excluded)."""

    OPCODES = ("xor",)

    def rewrite(self, op: HloOp):
        a, b = (owner(v) for v in op.operands)
        shape = array(op.shape)
        if a is None or b is None or a is b or shape is None or not identical(a, b):
            return None
        return self.const(False if shape.element_type == "pred" else 0, shape)


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
CANCELLATIONS: tuple[type[Simplification], ...] = (
    SubtractSelf, MultiplyZero, DivideUnsignedPowerOfTwo, RemainderUnsignedPowerOfTwo, XorSelf,
    AddOfSubtractCancel, RemainderOfIota, SubtractOfSubtractCancel, SubtractOfAddCancel,
    AddMinusOperand,
)  # fmt: skip
"""Exact integer identities: self-cancellation, zero, unsigned powers of two."""

SIGNED_DIVISION: tuple[type[Simplification], ...] = (
    DivideSignedPowerOfTwo, RemainderSignedPowerOfTwo, RemainderOfRemainder,
    RemainderOfIotaPlusDivisor,
)  # fmt: skip
"""Signed powers of two and nested remainders (after broadcast sinking)."""

XOR_CONSTANTS: tuple[type[Simplification], ...] = (XorZero, XorOfIdentical)
"""Xor with zero or with an identical operand (after the broadcast sinking of xor)."""

PATTERNS: tuple[type[Simplification], ...] = (*CANCELLATIONS, *SIGNED_DIVISION, *XOR_CONSTANTS)
"""This family's rewrites, in the order they fire."""
