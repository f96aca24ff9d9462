"""Elementwise ops: arithmetic with XLA's integer rules, compare, convert, bit ops."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from hlopass.dialects.opcodes import OPCODES
from hlopass.interpreter import xla_cpu_f32
from hlopass.interpreter.complex_math import (
    complex_cos,
    complex_divide,
    complex_exp,
    complex_expm1,
    complex_log,
    complex_log1p,
    complex_multiply,
    complex_power,
    complex_rsqrt,
    complex_sign,
    complex_sin,
    complex_sqrt,
    complex_tan,
    complex_tanh,
    compose,
    parts,
)
from hlopass.interpreter.core import dtype_of, handler, unsupported
from hlopass.interpreter.numeric import (
    as_dtype,
    daz,
    float_max_min,
    int_bits,
    int_range,
    is_float_dtype,
    is_int_dtype,
    is_signed_int,
    total_order_key,
    uint_view_dtype,
    widen,
)
from hlopass.ir import narrowing
from hlopass.ir.shape import ELEMENT_BITS

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _f32_libm(libm, f64_fn):
    """XLA-CPU calls the C library's f32 function on every element of f32 and of narrower
    floats (widened to f32), in either float mode: those functions underflow gradually on
    their own (sin(1e-45) = 1e-45), so the mode's flushing is applied around them as
    before. f64 uses `f64_fn`, the C library's f64 function (numpy's f64 sin and cos are
    its own SIMD versions on AVX-512 machines, so they are not used)."""

    def fn(w: np.ndarray) -> np.ndarray:
        return libm(w) if w.dtype == np.float32 else f64_fn(w)

    return fn


_FLOAT_UNARY = {
    "exponential": np.exp,
    "exponential-minus-one": np.expm1,
    "log": np.log,
    "log-plus-one": np.log1p,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "cbrt": np.cbrt,
    "sine": _f32_libm(xla_cpu_f32.sin, xla_cpu_f32.sin_f64),
    "cosine": _f32_libm(xla_cpu_f32.cos, xla_cpu_f32.cos_f64),
    "tan": _f32_libm(xla_cpu_f32.tan, xla_cpu_f32.tan_f64),
    "tanh": np.tanh,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "logistic": lambda x: 1 / (1 + np.exp(-x)),
    "erf": lambda x: _erf(x).astype(x.dtype),
    "ceil": np.ceil,
    "floor": np.floor,
    "round-nearest-even": np.rint,
    "round-nearest-afz": lambda x: np.where(
        np.abs(x - np.trunc(x)) == 0.5, np.trunc(x) + np.sign(x), np.rint(x)
    ),
    "is-finite": np.isfinite,
}


# XLA-CPU's complex formulas (hlopass/interpreter/complex_math.py)
_COMPLEX_UNARY = {"sqrt": complex_sqrt, "rsqrt": complex_rsqrt, "sine": complex_sin,
                  "cosine": complex_cos, "tan": complex_tan, "tanh": complex_tanh,
                  "exponential": complex_exp, "exponential-minus-one": complex_expm1}  # fmt: skip
# their angle is XLA-CPU's atan2 of the unflushed operand, itself unflushed
_COMPLEX_LOG = {"log": complex_log, "log-plus-one": complex_log1p}


def _complex_log(code: str, x: np.ndarray, out: np.dtype) -> np.ndarray:
    wide = widen(x)
    re, im = parts(_COMPLEX_LOG[code](daz(wide), raw=wide))
    return as_dtype(compose(daz(re), im, wide.dtype), out)


@handler(*_FLOAT_UNARY)
def _float_unary(interp, op, args):
    (x,) = args
    out = dtype_of(op.shape)
    fn = _FLOAT_UNARY[op.opcode]
    real = x.dtype.kind != "c"  # complex formulas flush like any arithmetic
    if op.opcode in _NO_FLUSH and real and not (op.opcode == "tanh" and x.dtype == np.float64):
        return as_dtype(fn(widen(x)), out)  # (f64 tanh flushes its result)
    if not real and op.opcode in _COMPLEX_LOG:
        return _complex_log(op.opcode, x, out)
    w = daz(widen(x))
    if not real and op.opcode in _COMPLEX_UNARY:
        return as_dtype(daz(_COMPLEX_UNARY[op.opcode](w)), out)
    if op.opcode == "logistic" and x.dtype.kind != "c":
        return as_dtype(
            daz(np.where(w >= 0, 1 / (1 + np.exp(-w)), np.exp(w) / (1 + np.exp(w)))), out
        )
    return as_dtype(daz(fn(w)), out)


# XLA-CPU evaluates these without flushing denormal operands: sin, tan, f32 tanh and expm1
# return a tiny argument itself; remainder, power and atan2 see `_binary`.
_NO_FLUSH = frozenset({"sine", "tan", "tanh", "exponential-minus-one", "remainder", "power",
                       "atan2"})  # fmt: skip


@handler("abs", "negate", "sign", "not", "real", "imag", "popcnt", "count-leading-zeros", "copy")
def _unary(interp, op, args):
    (x,) = args
    out = dtype_of(op.shape)
    code = op.opcode
    if code == "copy":
        return x.copy()
    if code == "real":
        return np.real(x).astype(out)
    if code == "imag":
        return np.imag(x).astype(out)
    w = widen(x)
    if code == "abs":
        if w.dtype.kind == "c":  # XLA: NaN when a part is NaN, even if the other is inf
            f = daz(w)
            mag = np.where(np.isnan(np.real(f)) | np.isnan(np.imag(f)), np.nan, np.abs(f))
            return as_dtype(daz(mag.astype(np.real(f).dtype)), out)
        return as_dtype(np.abs(w), out)
    if code == "negate":
        return as_dtype(-w if w.dtype.kind != "b" else w, out)
    if code == "sign":
        if x.dtype.kind == "c":  # x / |x|, and x itself (unflushed) where x reads as 0
            f = daz(w)
            return as_dtype(np.where(f == 0, w, daz(complex_sign(f))), out)
        w = daz(w)
        return as_dtype(np.where(w == 0, w, np.sign(w)), out)
    if code == "not":
        return np.logical_not(x) if x.dtype.kind == "b" else as_dtype(~w, out)
    bits = int_bits(x.dtype)
    if code == "popcnt" and bits == 4 and is_signed_int(x.dtype):
        bits = 8  # XLA-CPU counts the byte holding an s4 (sign-extended; not for s2)
    u = w.astype(np.uint64) & np.uint64((1 << bits) - 1)
    bit_set = [((u >> np.uint64(i)) & np.uint64(1)).astype(bool) for i in range(bits)]
    if code == "popcnt":
        return as_dtype(np.sum(bit_set, axis=0, dtype=np.int64), out)
    # count-leading-zeros
    clz = np.full(u.shape, bits, np.int64)
    for i in range(bits):
        clz = np.where(bit_set[i], bits - 1 - i, clz)
    return as_dtype(clz, out)


def _signed(x: np.ndarray, bits: int) -> np.ndarray:
    """Integer values (int64/uint64) as the int64 of their `bits`-wide two's-complement pattern."""
    v = x.astype(np.uint64).view(np.int64) if x.dtype == np.uint64 else x.astype(np.int64)
    if bits < 64:
        v = v & ((1 << bits) - 1)
        v = np.where(v >= (1 << (bits - 1)), v - (1 << bits), v)
    return v


def _safe_divisor(a, b, signed, lo):
    """(b == 0, INT_MIN / -1 (never unsigned), `b` with 1 at both): XLA defines the result
    there itself, and numpy would warn on x / 0 and overflow on INT_MIN / -1."""
    zero = b == 0
    safe_b = np.where(zero, 1, b)
    if not signed:
        return zero, np.False_, safe_b
    overflow = (a == lo) & (b == -1)
    return zero, overflow, np.where(overflow, 1, safe_b)


def _int_divide(a, b, signed, lo):
    """Truncating division; XLA: x / 0 = -1 (all ones), INT_MIN / -1 = INT_MIN."""
    zero, overflow, safe_b = _safe_divisor(a, b, signed, lo)
    if signed:
        # floor division never overflows here (np.abs(INT64_MIN) would); round toward zero
        q = a // safe_b
        q = q + ((a - q * safe_b != 0) & ((a < 0) != (safe_b < 0)))
        q = np.where(overflow, lo, q)
        return np.where(zero, -1, q)
    return np.where(zero, np.uint64(0xFFFFFFFFFFFFFFFF), a // safe_b)


def _int_remainder(a, b, signed, lo):
    """Remainder with the dividend's sign; XLA: x % 0 = x, INT_MIN % -1 = 0."""
    zero, overflow, safe_b = _safe_divisor(a, b, signed, lo)
    if signed:
        r = a % safe_b  # the divisor's sign: move it to the dividend's
        r = np.where((r != 0) & ((r < 0) != (a < 0)), r - safe_b, r)
        return np.where(zero, a, np.where(overflow, 0, r))
    return np.where(zero, a, a % safe_b)


def _int_power(a, b, bits):
    """XLA-CPU's integer power: both operands read as signed `bits`-wide values (an
    all-ones unsigned base is -1); a negative exponent gives 1 for base 1, +-1 for base -1
    and 0 otherwise; else squaring over the exponent's low 6 bits only (s32 3^100 = 3^36)."""
    sa = np.broadcast_to(_signed(a, bits), np.broadcast(a, b).shape)
    exp = np.broadcast_to(_signed(b, bits), sa.shape)
    base = sa
    neg = exp < 0
    e = np.where(neg, 0, exp) & 63
    result = np.ones(base.shape, np.int64)
    for _ in range(6):  # products wrap around in int64, as in the element type's width
        result = np.where(e & 1 == 1, result * base, result)
        base = base * base
        e = e >> 1
    odd = (exp & 1) == 1
    inv = np.where(sa == 1, 1, np.where(sa == -1, np.where(odd, -1, 1), 0))
    return np.where(neg, inv, result)


def _int_power_folded(a, b, signed):
    """XLA's HloEvaluator's integer power (what XLA-CPU's constant folding computes, so
    what it gives for a power of constants): squaring over the whole exponent, products
    wrapping in the type's width (u8 3^200 = 161, u32 3^200 = 2868424865); a negative
    exponent gives 1 for base 1 and 0 otherwise (-1^-1 = 0), 0^0 = 1. Checked against
    XLA-CPU on every integer width (tests/test_fidelity_round2.py)."""
    shape = np.broadcast(a, b).shape
    base = np.broadcast_to(a, shape).astype(np.uint64)  # (two's complement: wraps alike)
    exp = np.broadcast_to(b, shape)
    neg = exp < 0 if signed else np.zeros(shape, bool)
    e = np.where(neg, 0, exp).astype(np.uint64)
    result = np.ones(shape, np.uint64)
    one = np.uint64(1)
    with np.errstate(over="ignore"):
        while e.any():
            result = np.where(e & one == one, result * base, result)
            base = base * base
            e = e >> one
    if signed:
        result = np.where(neg, (np.asarray(a) == 1).astype(np.uint64), result)
        return result.view(np.int64)
    return result


# Opcodes through which an operand stays a compile-time constant for `_xla_folds`.
_PURE_ARRAY_TRAITS = frozenset(("elementwise", "shape_only"))


def _constant_expr(value) -> bool:
    """`value` is computed from constants only, by pure elementwise or data-moving
    instructions (broadcasts included): XLA-CPU's pipeline turns it into a constant. Not
    from an iota: XLA-CPU computes `power(c, add(iota, c))` with its compiled code (checked
    with jaxlib 0.10.2). One walk over its operand graph, ended by the first value that is
    not."""
    seen: set[int] = set()
    todo = [value]
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        op = getattr(v, "owner", None)
        code = getattr(op, "OPCODE", None)
        if code == "constant":
            continue
        spec = OPCODES.get(code) if op is not None and code is not None else None
        if spec is None or not op.operands or "pure" not in spec.traits:  # type: ignore[union-attr]
            return False
        if not _PURE_ARRAY_TRAITS & spec.traits:
            return False
        todo.extend(op.operands)  # type: ignore[union-attr]
    return True


def _xla_folds(interp, op) -> bool:
    """Whether XLA-CPU computes this power with its HloEvaluator (constant folding) rather
    than its compiled code: in our constant-folding pass, or on constant operands, which
    XLA's own folding replaces by their value before it compiles (the two differ)."""
    if getattr(interp, "xla_evaluator", False):
        return True
    return all(_constant_expr(v) for v in getattr(op, "operands", ()))


_NATIVE_UNSIGNED = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))


def _unsigned_shift(code, a, b):
    """A logical shift of a native unsigned type by amounts all below its width: numpy's
    own shift at that width (a hash over a 2048 x 2048 array shifts in milliseconds, not
    the seconds the widening to 64 bits and the masks of `_shift` take); else None."""
    if code not in ("shift-left", "shift-right-logical") or a.dtype not in _NATIVE_UNSIGNED:
        return None
    if b.dtype != a.dtype or int(b.max(initial=0)) >= int_bits(a.dtype):
        return None
    return a << b if code == "shift-left" else a >> b


def _shift(code, a, b, dt):
    bits = int_bits(dt)
    mask = np.uint64((1 << bits) - 1)
    ub = b.astype(np.uint64) & mask
    too_big = ub >= np.uint64(bits)
    amt = np.where(too_big, np.uint64(0), ub).astype(np.uint64)
    ua = a.astype(np.uint64) & mask
    if code == "shift-left":
        return np.where(too_big, np.uint64(0), ua << amt)
    if code == "shift-right-logical":
        return np.where(too_big, np.uint64(0), ua >> amt)
    if is_signed_int(dt):
        sa = a.astype(np.int64)
    elif bits == 64:
        sa = ua.view(np.int64)
    else:
        sa = ua.astype(np.int64)
        sa = np.where(sa >= (1 << (bits - 1)), sa - (1 << bits), sa)
    return np.where(too_big, np.where(sa < 0, -1, 0), sa >> amt.astype(np.int64))


@handler("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
         "atan2", "and", "or", "xor", "shift-left", "shift-right-logical",
         "shift-right-arithmetic", "complex")  # fmt: skip
def _binary(interp, op, args):
    a, b = args
    out = dtype_of(op.shape)
    code = op.opcode
    if code == "complex":  # parts as they are (w + 1j * v would lose -0.0 real parts)
        c = np.empty(np.broadcast_shapes(a.shape, b.shape), out)
        c.real, c.imag = a, b
        return c
    dt = a.dtype
    if dt.kind == "b":
        fn = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
              "maximum": np.logical_or, "minimum": np.logical_and, "add": np.logical_or,
              "multiply": np.logical_and, "subtract": np.logical_xor}.get(code)  # fmt: skip
        if fn is None:
            raise unsupported(op, "on pred")
        return fn(a, b)
    fast = _unsigned_shift(code, a, b)
    if fast is not None:
        return as_dtype(fast, out)
    wa, wb = widen(a), widen(b)
    if code in ("shift-left", "shift-right-logical", "shift-right-arithmetic"):
        return as_dtype(_shift(code, wa, wb, dt), out)
    if is_int_dtype(dt):
        signed = is_signed_int(dt)
        lo = int_range(dt)[0]
        if code == "divide":
            return as_dtype(_int_divide(wa, wb, signed, lo), out)
        if code == "remainder":
            return as_dtype(_int_remainder(wa, wb, signed, lo), out)
        if code == "power":
            if _xla_folds(interp, op):
                return as_dtype(_int_power_folded(wa, wb, signed), out)
            # sub-byte values are read at their byte's width (u4 14 is 14, not -2)
            return as_dtype(_int_power(wa, wb, max(8, int_bits(dt))), out)
    fn = _BINARY[code]
    if code == "remainder":  # libm's fmod with the divisor flushed
        return as_dtype(fn(wa, daz(wb)), out)
    if code == "power" and wa.dtype.kind == "c":
        return as_dtype(daz(complex_power(daz(wa), daz(wb))), out)
    if code in _NO_FLUSH:  # power, atan2: operands as they are, the result flushed
        return as_dtype(daz(fn(wa, wb)), out)
    wa, wb = daz(wa), daz(wb)
    if code == "multiply" and wa.dtype.kind == "c":
        return as_dtype(daz(complex_multiply(wa, wb)), out)
    if code == "divide" and wa.dtype.kind == "c":
        return as_dtype(daz(complex_divide(wa, wb)), out)
    if code in ("maximum", "minimum"):
        return as_dtype(float_max_min(code, wa, wb), out)
    return as_dtype(daz(fn(wa, wb)), out)


_BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "remainder": np.fmod, "maximum": np.maximum, "minimum": np.minimum, "power": np.power,
    "atan2": np.arctan2, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}  # fmt: skip


_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
            "GT": np.greater, "GE": np.greater_equal}  # fmt: skip


@handler("compare")
def _compare(interp, op, args):
    a, b = args
    direction = op.attr("direction")
    if op.attr("type") == "TOTALORDER" and is_float_dtype(a.dtype):
        a, b = total_order_key(a), total_order_key(b)
    elif a.dtype.kind != "b":
        a, b = daz(widen(a)), daz(widen(b))
        if a.dtype.kind == "c" and direction not in ("EQ", "NE"):
            return _complex_order(direction, a, b)
    return np.asarray(_COMPARE[direction](a, b))


def _complex_order(direction, a, b):
    """XLA-CPU's ordered complex compares: LT/GT by the real parts, then the imaginary
    parts on a tie; LE/GE by the real parts alone."""
    fn = _COMPARE[direction]
    if direction in ("LE", "GE"):
        return np.asarray(fn(a.real, b.real))
    return np.asarray(fn(a.real, b.real) | ((a.real == b.real) & fn(a.imag, b.imag)))


@handler("select")
def _select(interp, op, args):
    p, t, f = args
    return np.asarray(np.where(p, t, f)).astype(dtype_of(op.shape), copy=False)


@handler("clamp")
def _clamp(interp, op, args):
    lo, x, hi = args
    out = dtype_of(op.shape)
    if x.dtype.kind == "b":
        return np.logical_and(np.logical_or(x, lo), hi)
    wl, wx, wh = daz(widen(lo)), daz(widen(x)), daz(widen(hi))
    if is_float_dtype(x.dtype):
        return as_dtype(float_max_min("minimum", float_max_min("maximum", wx, wl), wh), out)
    return as_dtype(np.minimum(np.maximum(wx, wl), wh), out)


@handler("convert")
def _convert(interp, op, args):
    (x,) = args
    return convert(x, dtype_of(op.shape))


def convert(x: np.ndarray, out: np.dtype) -> np.ndarray:
    src = x.dtype
    if src == out:
        return x.copy()
    x = _convert_daz(x, out)
    src = x.dtype
    if out.kind == "b":
        return np.asarray(x != 0)
    if out == _F4 and is_float_dtype(src):  # no NaN in f4e2m1fn: XLA-CPU makes it -0
        r = _to_float(x, out)
        return np.where(np.isnan(x.astype(np.float32)), np.array(-0.0, out), r)
    if src.kind == "c":
        if out.kind == "c":
            return x.astype(out)
        x = np.real(x)
        src = x.dtype
    if is_int_dtype(out):
        if src == _F4:  # XLA-CPU saturates f4e2m1fn's largest value (+-6) as if infinite
            x = x.astype(np.float32)
            x = np.where(np.abs(x) == 6, np.copysign(np.float32(np.inf), x), x)
            src = x.dtype
        if is_float_dtype(src):
            lo, hi = int_range(out)
            w = x.astype(np.float64)
            w = np.trunc(np.where(np.isnan(w), 0, w))
            big, small = w >= float(hi), w <= float(lo)
            acc = np.uint64 if lo == 0 and hi >= 2**63 else np.int64
            mid = np.where(big | small, 0, w).astype(acc)
            r = np.where(big, acc(hi), np.where(small, acc(lo), mid))
            return as_dtype(r, out)
        return as_dtype(widen(x) if src.kind != "b" else x.astype(np.int64), out)
    # float or complex target
    if src.kind == "b":
        return x.astype(np.float32).astype(out)
    if is_int_dtype(src):
        if out.kind == "f" and out.itemsize >= 4 or out.kind == "c":
            return widen(x).astype(out)
        return _to_float(widen(x), out)
    return _to_float(x, out)


def _to_float(x: np.ndarray, out: np.dtype) -> np.ndarray:
    """`x` (a float, or integers widened to 64 bits) as the float `out`: a value wider than
    f32 narrows as XLA narrows it (`hlopass.ir.narrowing`), its f32 step flushed where XLA-CPU
    flushes; anything else in one rounding."""
    if x.dtype.itemsize < 8 or not is_float_dtype(out) or out.itemsize >= 4:
        return x.astype(out)
    if narrowing.through_f32(out):
        return daz(x.astype(np.float32)).astype(out)
    return narrowing.narrow(x, out)


_F4 = np.dtype(ml_dtypes.float4_e2m1fn)


def _convert_daz(x: np.ndarray, out: np.dtype) -> np.ndarray:
    """Flush what XLA-CPU's conversion instructions flush: an f32/f64 (c64/c128) source
    converted to anything but a complex of its own part width; a narrow float only on its
    way to f64/c128 (through f32); narrow floats otherwise convert by bit manipulation."""
    src = x.dtype
    wide_out = out in (np.dtype(np.float64), np.dtype(np.complex128))
    if src.kind == "f" and src.itemsize >= 4:
        same_part = out.kind == "c" and out.itemsize == 2 * src.itemsize
        return x if same_part else daz(x)
    if src.kind == "c":
        return daz(x) if out.kind == "c" and out.itemsize != src.itemsize else x
    if is_float_dtype(src) and wide_out:
        return daz(x.astype(np.float32))
    return x


@handler("bitcast-convert")
def _bitcast_convert(interp, op, args):
    (x,) = args
    out = dtype_of(op.shape)
    in_bits = ELEMENT_BITS[op.operands[0].type.data.element_type]
    out_bits = ELEMENT_BITS[op.shape.element_type]
    x = np.ascontiguousarray(x)
    if in_bits % 8 == 0 and out_bits % 8 == 0:  # whole bytes: numpy's view is XLA's bitcast
        return x.view(out).reshape(op.shape.dims)
    return _bitcast_sub_byte(x, in_bits, out, out_bits).reshape(op.shape.dims)


def _bitcast_sub_byte(x: np.ndarray, in_bits: int, out: np.dtype, out_bits: int) -> np.ndarray:
    """Bitcast where a side is narrower than a byte (s4, u2, f4e2m1fn...; numpy keeps
    them one per byte): the narrow elements along the last dimension make up one wide
    element, the first in the lowest bits (XLA's little-endian packing)."""
    raw = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64) & np.uint64((1 << in_bits) - 1)
    if in_bits < out_bits:  # s4[..., 2] -> s8[...]
        shifts = np.arange(out_bits // in_bits, dtype=np.uint64) * np.uint64(in_bits)
        raw = np.bitwise_or.reduce(raw << shifts, axis=-1)
    elif in_bits > out_bits:  # s8[...] -> s4[..., 2]
        shifts = np.arange(in_bits // out_bits, dtype=np.uint64) * np.uint64(out_bits)
        raw = (raw[..., None] >> shifts) & np.uint64((1 << out_bits) - 1)
    if out.kind == "i":  # sign-extend the narrow value, then store it in numpy's type
        signed = raw.astype(np.int64)
        signed -= (signed >> (out_bits - 1) & 1) << out_bits
        return signed.astype(out)
    if out.kind in "ub":
        return raw.astype(out)
    return raw.astype(np.dtype(f"u{out.itemsize}")).view(out)  # sub-byte floats: low bits


_FLOAT_LAYOUT = {2: (5, 10), 4: (8, 23), 8: (11, 52)}


@handler("reduce-precision")
def _reduce_precision(interp, op, args):
    (x,) = args
    ebits, mbits = op.attr("exponent_bits"), op.attr("mantissa_bits")
    dt = x.dtype
    if dt.kind != "f":  # bf16/f8: work in f32, which holds them exactly
        return reduce_precision(x.astype(np.float32), ebits, mbits).astype(dt)
    return reduce_precision(x, ebits, mbits)


def reduce_precision(x: np.ndarray, ebits: int, mbits: int) -> np.ndarray:
    dt = x.dtype
    src_e, src_m = _FLOAT_LAYOUT[dt.itemsize]
    nbits = dt.itemsize * 8
    udt = uint_view_dtype(dt)
    v = np.ascontiguousarray(x).view(udt).astype(np.uint64)
    if mbits < src_m:
        shift = src_m - mbits
        last = np.uint64(1 << shift)
        bias = (last >> np.uint64(1)) - np.uint64(1)
        last_bit = (v & last) >> np.uint64(shift)
        trunc_mask = ~(last - np.uint64(1)) & np.uint64((1 << nbits) - 1)
        v = ((v + last_bit + bias) & trunc_mask) & np.uint64((1 << nbits) - 1)
    if ebits < src_e:
        exp_mask = np.uint64(((1 << src_e) - 1) << src_m)
        sign_mask = np.uint64(1 << (nbits - 1))
        bias = (1 << (src_e - 1)) - 1
        rbias = (1 << (ebits - 1)) - 1
        vexp = v & exp_mask
        overflow = vexp > np.uint64((bias + rbias) << src_m)
        underflow = vexp <= np.uint64((bias - rbias) << src_m)
        signed_zero = v & sign_mask
        v = np.where(overflow, signed_zero | exp_mask, np.where(underflow, signed_zero, v))
    r = v.astype(udt).view(dt).reshape(x.shape)
    if mbits > 0:
        r = np.where(np.isnan(x), x, r)
    return r
