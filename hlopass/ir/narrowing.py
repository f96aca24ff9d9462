"""How XLA rounds a wide value into a narrow float type: the one place that knows it.

XLA does not round every narrowing once. Measured on XLA-CPU (jaxlib 0.10.2) over the
values next to every rounding boundary of each type, and read off XLA's sources:

- f64 or an integer to bf16: first to f32, then f32 to bf16, each to nearest even (XLA's
  elemental emitter converts to f32 before its f32-to-bf16 rounding; XLA's parser builds a
  bf16 from a double through float). Two roundings: 1 + 2^-8 + 2^-30 becomes 1, not 1 + 2^-7.
- f64 to f16: also through f32 (XLA-CPU's runtime conversion routine and XLA's parser
  both go through float).
- f64 to the f8 and f4 types: one rounding.
- f32 to anything: one rounding.

numpy and ml_dtypes do not promise either behaviour (ml_dtypes rounds f64 to bf16 twice
up to 0.6 and once from 0.7), so nothing here leans on their f64 casts: the two-step
types go through f32 explicitly, and the one-step types through f32 rounded to odd, which
keeps one rounding exact for any target with at most 22 significand bits.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

_TWO_STEP = frozenset(np.dtype(t) for t in (ml_dtypes.bfloat16, np.float16))
_ONE_STEP = frozenset(
    np.dtype(t)
    for t in (
        ml_dtypes.float8_e5m2,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e4m3b11fnuz,
        ml_dtypes.float8_e5m2fnuz,
        ml_dtypes.float8_e4m3fnuz,
        ml_dtypes.float8_e4m3,
        ml_dtypes.float8_e3m4,
        ml_dtypes.float4_e2m1fn,
    )
)


def through_f32(out: np.dtype) -> bool:
    """Whether XLA narrows an f64 or integer to `out` by rounding to f32 first."""
    return np.dtype(out) in _TWO_STEP


def narrow(x: np.ndarray, out: np.dtype) -> np.ndarray:
    """`x` (f64 or integers) in the float type `out`, rounded as XLA rounds it.

    A denormal f32 step is kept: the caller flushes where XLA-CPU flushes."""
    out = np.dtype(out)
    with np.errstate(over="ignore", invalid="ignore"):
        if out in _TWO_STEP:
            return np.asarray(x).astype(np.float32).astype(out)
        if out in _ONE_STEP:
            return f32_round_to_odd(np.asarray(x, np.float64)).astype(out)
        return np.asarray(x).astype(out)


def f32_round_to_odd(x: np.ndarray) -> np.ndarray:
    """`x` (f64) in f32, truncated toward zero with the last bit set when inexact (round
    to odd): a later nearest-even rounding to a type of p <= 22 significand bits then
    equals one rounding of `x`, since an odd f32 never lies on that type's ties."""
    f = x.astype(np.float32)
    back = f.astype(np.float64)
    inexact = (back != x) & np.isfinite(back)
    if not inexact.any():
        return f
    bits = f.view(np.uint32).copy()
    bits -= (inexact & (np.abs(back) > np.abs(x))).astype(np.uint32)  # one step toward 0
    bits |= inexact.astype(np.uint32)
    return bits.view(np.float32)
