"""Element-type helpers: integer wrap-around, float widening, total-order keys."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import ml_dtypes
import numpy as np
import numpy.typing as npt

_NARROW_FLOAT_KINDS = "V"  # ml_dtypes floats report kind 'V'


def is_float_dtype(dt: np.dtype) -> bool:
    return dt.kind == "f" or (dt.kind == "V" and _is_ml_float(dt))


def _is_ml_float(dt: np.dtype) -> bool:
    try:
        ml_dtypes.finfo(dt)
    except (ValueError, TypeError):
        return False
    return True


def is_int_dtype(dt: np.dtype) -> bool:
    return dt.kind in "iu" or (dt.kind == "V" and not _is_ml_float(dt))


def is_signed_int(dt: np.dtype) -> bool:
    if dt.kind == "i":
        return True
    if dt.kind == "V":
        return dt in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.int2))
    return False


def int_bits(dt: np.dtype) -> int:
    if dt.kind in "iu":
        return dt.itemsize * 8
    return int(ml_dtypes.iinfo(dt).bits)


def int_range(dt: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dt) if dt.kind in "iu" else ml_dtypes.iinfo(dt)
    return int(info.min), int(info.max)


def compute_float(dt: np.dtype) -> np.dtype:
    """The dtype XLA:CPU computes a float op in: f32 for narrow floats, else the type."""
    if dt.kind == "f" and dt.itemsize >= 4:
        return dt
    if dt.kind == "c":
        return dt
    return np.dtype(np.float32)


def widen(x: np.ndarray) -> np.ndarray:
    """Floats as f32/f64, integers as int64/uint64 (bools unchanged)."""
    dt = x.dtype
    if dt.kind == "b":
        return x
    if is_float_dtype(dt) or dt.kind == "c":
        return x.astype(compute_float(dt), copy=False)
    if is_signed_int(dt):
        return x.astype(np.int64)
    return x.astype(np.uint64)


def wrap(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Integer results cast to `dt` with two's-complement wrap-around (any width)."""
    x = np.asarray(x)
    if dt.kind in "iu":
        return x.astype(dt)
    bits = int_bits(dt)
    v = x.astype(np.int64) & ((1 << bits) - 1)
    if is_signed_int(dt):
        v = np.where(v >= (1 << (bits - 1)), v - (1 << bits), v)
    return v.astype(dt)


def as_dtype(x: npt.ArrayLike, dt: np.dtype) -> np.ndarray:
    """Cast a computed result back to the result element type."""
    x = np.asarray(x)
    if x.dtype == dt:
        return x
    if is_int_dtype(dt) and x.dtype.kind in "iub":
        return wrap(x, dt)
    if dt == _F4 and x.dtype.kind in "fc":  # no NaN in f4e2m1fn: XLA-CPU makes it -0
        return np.where(np.isnan(x), np.array(-0.0, dt), x.astype(dt))
    return x.astype(dt)


def uint_view_dtype(dt: np.dtype) -> np.dtype:
    return np.dtype(f"u{dt.itemsize}")


def total_order_key(x: np.ndarray) -> np.ndarray:
    """Signed integers ordering floats as XLA's TOTALORDER does (-NaN < -inf < -0 < +0 < NaN)."""
    dt = x.dtype
    if not is_float_dtype(dt):
        return widen(x)
    nbits = 4 if dt == _F4 else dt.itemsize * 8  # f4e2m1fn: 4 bits in a byte
    raw = np.ascontiguousarray(x).view(np.dtype(f"i{dt.itemsize}")).astype(np.int64)
    if nbits < 64:
        raw &= (1 << nbits) - 1
    bits = np.where(raw >= 1 << (nbits - 1), raw - (1 << nbits), raw) if nbits < 64 else raw
    mag = (1 << (nbits - 1)) - 1
    key = np.where(bits < 0, bits ^ mag, bits)
    if dt in _FNUZ:  # their one NaN is the -0 pattern; XLA orders it below everything
        key = np.where(raw == 1 << (nbits - 1), -(1 << (nbits - 1)) - 1, key)
    return key


_F4 = np.dtype(ml_dtypes.float4_e2m1fn)
_FNUZ = frozenset(np.dtype(t) for t in (ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz,
                                        ml_dtypes.float8_e4m3b11fnuz))  # fmt: skip


# --- XLA-CPU's float environment ---------------------------------------------------------
#
# XLA-CPU runs with the x86 FTZ and DAZ flags set: an f32/f64 denormal operand of an
# arithmetic instruction reads as zero of its sign, and a denormal result becomes zero of
# its sign. Narrow floats (bf16, f16, f8) compute in f32, so a bf16 denormal (an f32
# denormal) flushes while an f16 denormal (an f32 normal) does not. Bit operations (negate,
# abs, copy, select, bitcast-convert, TOTALORDER compares) never flush. `evaluate(...,
# float_mode="ieee")` turns this off (IEEE 754 gradual underflow, numpy's behaviour).

FLOAT_MODES = ("xla-cpu", "ieee")
_STATE = {"flush": True}


@contextlib.contextmanager
def float_mode(mode: str) -> Iterator[None]:
    """Evaluate with XLA-CPU's denormal flushing ("xla-cpu", the default) or IEEE's."""
    if mode not in FLOAT_MODES:
        raise ValueError(f"float_mode must be one of {', '.join(FLOAT_MODES)}, got {mode!r}")
    saved = _STATE["flush"]
    _STATE["flush"] = mode == "xla-cpu"
    try:
        yield
    finally:
        _STATE["flush"] = saved


def flushing() -> bool:
    return _STATE["flush"]


def daz(x: np.ndarray) -> np.ndarray:
    """`x` (an f32/f64/c64/c128 compute value) with denormals as zeros of their sign, when
    flushing; anything else unchanged."""
    if not _STATE["flush"]:
        return x
    dt = x.dtype
    tiny = _TINY.get(dt)
    if tiny is not None:
        small = np.abs(x) < tiny
        if not np.count_nonzero(small):
            return x
        return np.where(small, np.copysign(_ZERO[dt], x), x)
    if dt.kind == "c":
        part = daz(np.ascontiguousarray(np.real(x))), daz(np.ascontiguousarray(np.imag(x)))
        out = np.empty(x.shape, dt)
        out.real, out.imag = part
        return out
    return x


_TINY = {np.dtype(t): np.finfo(t).tiny for t in (np.float32, np.float64)}
_ZERO = {dt: np.zeros((), dt) for dt in _TINY}


def float_max_min(code, a, b):
    """XLA-CPU's float max/min (IEEE 754-2019 maximum/minimum): NaN if either is NaN, and
    -0 < +0 (max(-0, +0) = +0, min(+0, -0) = -0, in either order)."""
    r = np.maximum(a, b) if code == "maximum" else np.minimum(a, b)
    if a.dtype.kind == "c":  # complex max/min is rejected by XLA's verifier
        return r
    zeros = (a == 0) & (b == 0)
    if not zeros.any():
        return r
    a_neg = np.signbit(a)
    pick = np.where(a_neg, b, a) if code == "maximum" else np.where(a_neg, a, b)
    return np.where(zeros, pick, r)
