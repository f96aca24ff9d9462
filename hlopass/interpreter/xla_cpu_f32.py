"""f32 transcendental functions as XLA-CPU (jaxlib 0.10.2, x86 with FMA) computes them in
vectorised loops, where they differ from numpy's own SIMD versions:

- `log`: XLA's own Cephes-style polynomial (`__xla_cpu_LogV8F32`) on full vector lanes,
  its multiply-adds contracted to FMAs; scalar remainders of a loop call the C library's
  `logf` instead. `log_vector_lanes` is the lane formula (bit for bit on 300,000 inputs).
- `sin`, `cos`, `tan`: the C library's `sinf`/`cosf`/`tanf`, which XLA-CPU calls on every
  element, vector lane or not (f16, bf16 and f8 too, on the value widened to f32); these
  call the same library through ctypes (numpy's f32 sin/cos/tan differ in 5-17% of
  inputs), falling back to numpy where no C math library can be loaded.

`log_vector_lanes` is used where every lane is known to take the vector path (rng's
Box-Muller, tests/test_rng.py); `sin`/`cos`/`tan` by the interpreter's f32 sine, cosine
and tan as well (hlopass/interpreter/elementwise.py), `tan_f64` by its f64 tan.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache

import numpy as np

F32 = np.float32
# Cephes' log(1 + x) polynomial on [sqrt(1/2) - 1, sqrt(2) - 1], highest degree first
_P = tuple(F32(c) for c in (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                            -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                            2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1))  # fmt: skip
# ln 2 split so that e * _LN2_HI is exact
_LN2_LO, _LN2_HI = F32(-2.12194440e-4), F32(0.693359375)
_MIN_NORMAL = np.array(0x00800000, np.uint32).view(F32)


def _fma(x, y, z) -> np.ndarray:
    """x*y + z rounded once to f32 (the f64 product of two f32 is exact)."""
    return (np.asarray(x, np.float64) * np.asarray(y, np.float64) + z).astype(F32)


def log_vector_lanes(x: np.ndarray) -> np.ndarray:
    """XLA-CPU's vectorised f32 log: exponent and mantissa in [sqrt(1/2), sqrt(2)), a
    degree-8 polynomial in three Horner chains, then the exponent's ln 2 in two parts."""
    x = np.asarray(x, F32)
    bits = np.maximum(x, _MIN_NORMAL).view(np.uint32)  # denormals read as the smallest normal
    e = ((bits >> np.uint32(23)).astype(np.int32) - 126).astype(F32)
    m = ((bits & np.uint32(0x807FFFFF)) | np.uint32(0x3F000000)).view(F32)  # in [0.5, 1)
    low = m < F32(0.707106781186547524)
    t = (m - F32(1)) + np.where(low, m, F32(0))
    e = e - np.where(low, F32(1), F32(0))
    t2 = t * t
    t3 = t2 * t
    y = _fma(_fma(t, _P[0], _P[1]), t, _P[2])
    y1 = _fma(_fma(t, _P[3], _P[4]), t, _P[5])
    y2 = _fma(_fma(t, _P[6], _P[7]), t, _P[8])
    y = _fma(_fma(y, t3, y1), t3, y2)
    y = _fma(y, t3, _LN2_LO * e)
    t = _fma(-t2, F32(0.5), t)
    t = _fma(_LN2_HI, e, t + y)
    zero = np.abs(x) < _MIN_NORMAL  # +-0 and denormals (flushed to zero): -inf
    out = np.where(zero, F32(-np.inf), np.where(x == np.inf, F32(np.inf), t))
    return np.where(((x < 0) & ~zero) | np.isnan(x), F32(np.nan), out).astype(F32)


@cache
def _libm() -> dict | None:
    name = ctypes.util.find_library("m")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    fns = {}
    for fn, c_type in (("sinf", ctypes.c_float), ("cosf", ctypes.c_float),
                       ("tanf", ctypes.c_float), ("tan", ctypes.c_double),
                       ("sin", ctypes.c_double), ("cos", ctypes.c_double)):  # fmt: skip
        f = getattr(lib, fn)
        f.restype, f.argtypes = c_type, [c_type]
        fns[fn] = f
    return fns


def _libm_or(fn: str, fallback, x: np.ndarray, dtype: type[np.floating] = F32) -> np.ndarray:
    x = np.asarray(x, dtype)
    lib = _libm()
    if lib is None or x.size == 0:
        return fallback(x)
    # one ctypes call per element (about 0.3 us; np.vectorize costs half as much again):
    # the C library has no portable array entry point with sinf's bits
    out = np.fromiter(map(lib[fn], x.ravel().tolist()), dtype, count=x.size)
    return out.reshape(x.shape)


def sin(x: np.ndarray) -> np.ndarray:
    """f32 sine as XLA-CPU computes it: the C library's sinf."""
    return _libm_or("sinf", np.sin, x)


def cos(x: np.ndarray) -> np.ndarray:
    """f32 cosine as XLA-CPU computes it: the C library's cosf."""
    return _libm_or("cosf", np.cos, x)


def tan(x: np.ndarray) -> np.ndarray:
    """f32 tangent as XLA-CPU computes it: the C library's tanf (not sinf / cosf)."""
    return _libm_or("tanf", np.tan, x)


def tan_f64(x: np.ndarray) -> np.ndarray:
    """f64 tangent as XLA-CPU computes it: the C library's tan (numpy's differs in about
    0.4% of inputs)."""
    return _libm_or("tan", np.tan, x, np.float64)


def sin_f64(x: np.ndarray) -> np.ndarray:
    """f64 sine as XLA-CPU computes it: the C library's sin. (numpy's agrees on an AVX2
    machine, where it calls the same library, but uses its own SIMD version where AVX-512
    is present.)"""
    return _libm_or("sin", np.sin, x, np.float64)


def cos_f64(x: np.ndarray) -> np.ndarray:
    """f64 cosine as XLA-CPU computes it: the C library's cos (see `sin_f64`)."""
    return _libm_or("cos", np.cos, x, np.float64)
