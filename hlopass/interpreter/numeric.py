"""Element-type helpers: integer wrap-around, float widening, total-order keys."""

from __future__ import annotations

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
    return x.astype(dt)


def uint_view_dtype(dt: np.dtype) -> np.dtype:
    return np.dtype(f"u{dt.itemsize}")


def total_order_key(x: np.ndarray) -> np.ndarray:
    """Signed integers ordering floats as XLA's TOTALORDER does (-NaN < -inf < -0 < +0 < NaN)."""
    dt = x.dtype
    if not is_float_dtype(dt):
        return widen(x)
    bits = np.ascontiguousarray(x).view(np.dtype(f"i{dt.itemsize}")).astype(np.int64)
    nbits = dt.itemsize * 8
    mag = (1 << (nbits - 1)) - 1
    return np.where(bits < 0, bits ^ mag, bits)
