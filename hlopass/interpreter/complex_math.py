"""Complex ops with XLA-CPU's formulas, so that inf/NaN/overflow parts come out as XLA-CPU's
do, not as numpy's C99 Annex G functions give them. XLA-CPU lowers complex math through mlir's
ComplexToStandard expansions; LLVM then contracts multiply-adds into FMAs, and the CPU flushes
every denormal intermediate (FTZ/DAZ), which the formulas here repeat where it shows."""

from __future__ import annotations

import numpy as np

from hlopass.interpreter.numeric import daz


def parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.ascontiguousarray(np.real(x)), np.ascontiguousarray(np.imag(x))


def compose(re: np.ndarray, im: np.ndarray, dt: np.dtype) -> np.ndarray:
    """A complex array from its parts (`re + 1j * im` would turn -0.0 and inf parts)."""
    out = np.empty(np.broadcast_shapes(np.shape(re), np.shape(im)), dt)
    out.real, out.imag = re, im
    return out


def fma(x, y, z, neg_xy: bool = False, neg_z: bool = False) -> np.ndarray:
    """(-)x*y (-) z rounded once, as XLA-CPU's contracted multiply-adds (x86 vfmadd,
    vfmsub, vfnmadd) compute it; a NaN operand comes out as it is, its sign not negated."""
    x, y, z = np.broadcast_arrays(x, y, z)
    with np.errstate(all="ignore"):
        out = _fma(-x if neg_xy else x, y, -z if neg_z else z)
    nan_in = np.where(np.isnan(x), x, np.where(np.isnan(y), y, z))
    return np.where(np.isnan(out) & np.isnan(nan_in), nan_in, out)


def _fma(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """x*y + z rounded once: f32 through f64 (the product is exact there); f64 by Dekker's
    exact product and sum."""
    if x.dtype == np.float32:
        return (x.astype(np.float64) * y + z).astype(np.float32)
    # Dekker's split overflows above 2^996: scale big factors down by exact powers of 2
    sx = np.where(np.abs(x) > 2.0**900, 2.0**-600, 1.0)
    sy = np.where(np.abs(y) > 2.0**900, 2.0**-600, 1.0)
    exact = _fma_f64(x * sx, y * sy, z * sx * sy) / (sx * sy)
    finite_xy = np.isfinite(x) & np.isfinite(y)  # an exact, finite product: z decides
    return np.where(finite_xy, np.where(np.isfinite(z), exact, z), x * y + z)


def _fma_f64(x, y, z):
    p = x * y
    split = 134217729.0  # 2^27 + 1
    xh = x * split - (x * split - x)
    yh = y * split - (y * split - y)
    xl, yl = x - xh, y - yh
    err = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl  # p + err == x * y exactly
    s = p + z
    bv = s - p
    s_err = (p - (s - bv)) + (z - bv)  # s + s_err == p + z exactly
    return s + (s_err + err)


def complex_abs(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    """|re + i im| as max * sqrt(1 + (min/max)^2); min where that is NaN (0/0, inf/inf)."""
    ar, ai = np.abs(re), np.abs(im)
    big, small = np.maximum(ar, ai), np.minimum(ar, ai)
    with np.errstate(all="ignore"):
        ratio = small / big
        out = big * np.sqrt(ratio * ratio + 1)
    return np.where(np.isnan(out), small, out)


def complex_power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(a+bi)^(c+di) = |x|^c * exp(-d*arg x) * (cos q + i sin q), q = c*arg x + d*ln|x|;
    then Kahan's cases in order: 0^(c+0i) is 1 for c == 0 and 0 for c > 0, x^0 = 1,
    1^y = 1, inf^(c+0i) is inf for c > 0 and 0 for c < 0."""
    a, b = parts(x)
    c, d = parts(y)
    dt = a.dtype
    with np.errstate(all="ignore"):
        mag = complex_abs(a, b)
        arg = daz(np.arctan2(b, a))
        coeff = np.power(mag, c) * np.exp(-d * arg)
        q = daz(fma(c, arg, d * np.log(mag)))
        re, im = coeff * np.cos(q), coeff * np.sin(q)
    one, zero, inf = dt.type(1), dt.type(0), dt.type(np.inf)
    d0 = d == 0
    cases = (
        ((mag == 0) & d0 & (c >= 0), np.where(c == 0, one, zero), zero),
        ((c == 0) & d0, one, zero),
        ((a == 1) & (b == 0), one, zero),
        ((a == inf) & (b == 0) & d0 & (c > 0), inf, zero),
        ((a == inf) & (b == 0) & d0 & (c < 0), zero, zero),
    )
    for cond, vr, vi in cases:
        re, im = np.where(cond, vr, re), np.where(cond, vi, im)
    return compose(re.astype(dt), im.astype(dt), x.dtype)


def complex_multiply(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(ac - bd) + (ad + bc)i with the multiply-adds contracted as XLA-CPU's LLVM does."""
    a, b = parts(x)
    c, d = parts(y)
    with np.errstate(all="ignore"):
        re = fma(a, c, b * d, neg_z=True)
        im = fma(b, c, a * d)
    return compose(re, im, x.dtype)


def complex_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(a+bi)/(c+di) as XLA-CPU computes it: Smith's range reduction (by c/d where
    |c| < |d|, else by d/c), multiply-adds contracted; where both parts are NaN, C99 Annex G's
    cases: x/0 = inf of the numerator's direction, inf/finite = inf, finite/inf = 0."""
    a, b = parts(x)
    c, d = parts(y)
    dt = a.dtype
    one, zero, inf = dt.type(1), dt.type(0), dt.type(np.inf)
    with np.errstate(all="ignore"):
        small_c = np.abs(c) < np.abs(d)
        # FTZ: every intermediate flushed (a ratio 1/FLT_MAX is 0, so inf * r is NaN)
        r1 = daz(c / d)
        den1 = daz(fma(r1, c, d))
        re1, im1 = daz(fma(a, r1, b)) / den1, daz(fma(b, r1, a, neg_z=True)) / den1
        r2 = daz(d / c)
        den2 = daz(fma(r2, d, c))
        re2, im2 = daz(fma(b, r2, a)) / den2, daz(fma(a, r2, b, neg_xy=True)) / den2
        re, im = np.where(small_c, re1, re2), np.where(small_c, im1, im2)
        zero_den = (c == 0) & (d == 0) & ~(np.isnan(a) & np.isnan(b))
        z_re, z_im = np.copysign(inf, c) * a, np.copysign(inf, c) * b
        a_inf, b_inf, c_inf, d_inf = (np.abs(v) == inf for v in (a, b, c, d))
        x_inf = (a_inf | b_inf) & np.isfinite(c) & np.isfinite(d)
        a1 = np.copysign(np.where(a_inf, one, zero), a)
        b1 = np.copysign(np.where(b_inf, one, zero), b)
        i_re, i_im = inf * (a1 * c + b1 * d), inf * (b1 * c - a1 * d)
        y_inf = (c_inf | d_inf) & np.isfinite(a) & np.isfinite(b)
        c1 = np.copysign(np.where(c_inf, one, zero), c)
        d1 = np.copysign(np.where(d_inf, one, zero), d)
        f_re, f_im = zero * (a * c1 + b * d1), zero * (b * c1 - a * d1)
    special_re, special_im = re, im
    for cond, vr, vi in ((y_inf, f_re, f_im), (x_inf, i_re, i_im), (zero_den, z_re, z_im)):
        special_re, special_im = np.where(cond, vr, special_re), np.where(cond, vi, special_im)
    nan_out = np.isnan(re) & np.isnan(im)
    re, im = np.where(nan_out, special_re, re), np.where(nan_out, special_im, im)
    return compose(re.astype(dt), im.astype(dt), x.dtype)


def _trig_parts(x):
    """sin x, cos x of the real part and 0.5*e^y, 0.5/e^y of the imaginary part."""
    re, im = parts(x)
    e = np.exp(im)
    return np.sin(re), np.cos(re), 0.5 * e, daz(0.5 / e)


def complex_sin(x: np.ndarray) -> np.ndarray:
    """sin(x+iy) = (e^y/2 + e^-y/2) sin x + i (e^y/2 - e^-y/2) cos x."""
    with np.errstate(all="ignore"):
        s, c, t, rt = _trig_parts(x)
        return compose((t + rt) * s, (t - rt) * c, x.dtype)


def complex_cos(x: np.ndarray) -> np.ndarray:
    """cos(x+iy) = (e^-y/2 + e^y/2) cos x + i (e^-y/2 - e^y/2) sin x."""
    with np.errstate(all="ignore"):
        s, c, t, rt = _trig_parts(x)
        return compose((rt + t) * c, (rt - t) * s, x.dtype)


def complex_sign(x: np.ndarray) -> np.ndarray:
    """x / |x| part by part (|x| scaled as in `complex_abs`); x itself where x == 0."""
    a, b = parts(x)
    with np.errstate(all="ignore"):
        mag = daz(complex_abs(a, b))
        out = compose(a / mag, b / mag, x.dtype)
    return np.where((a == 0) & (b == 0), x, out)


def _abs_root(re, im, inverse: bool):
    """sqrt|x| (max^0.5 * (1 + r^2)^0.25) or 1/sqrt|x| (rsqrt(max) * sqrt(rsqrt(1 + r^2))), r =
    min/max; rsqrt(min) / sqrt-free min where that is NaN, as mlir's computeAbs."""
    ar, ai = np.abs(re), np.abs(im)
    big, small = np.maximum(ar, ai), np.minimum(ar, ai)
    ratio = daz(small / big)
    one_r2 = ratio * ratio + 1
    if inverse:
        out = (1 / np.sqrt(big)) * np.sqrt(1 / np.sqrt(one_r2))
        small = 1 / np.sqrt(small)
    else:
        out = np.sqrt(big) * np.power(one_r2, big.dtype.type(0.25))
    return np.where(np.isnan(out), small, out)


def complex_sqrt(x: np.ndarray) -> np.ndarray:
    """numpy's (C99) sqrt, but with a zero imaginary part read as +0 (sqrt(-1.5 - 0j) =
    +1.22j) and NaN + NaN i wherever a part is NaN (C99: sqrt(NaN + inf i) = inf + inf i)."""
    a, b = parts(x)
    with np.errstate(all="ignore"):
        out = np.sqrt(compose(a, np.where(b == 0, 0, b).astype(b.dtype), x.dtype))
    return np.where(np.isnan(a) | np.isnan(b), x.dtype.type(complex(np.nan, np.nan)), out)


def complex_rsqrt(x: np.ndarray) -> np.ndarray:
    """1/sqrt|x| * (cos(-arg/2) + i sin(-arg/2)); (+-0, -+0) for an infinite part (or
    NaN real with infinite imaginary), inf + NaN i at 0."""
    a, b = parts(x)
    dt = a.dtype
    zero, inf = dt.type(0), dt.type(np.inf)
    with np.errstate(all="ignore"):
        root = _abs_root(a, b, inverse=True)
        neg_half_arg = np.arctan2(b, a) * dt.type(-0.5)
        re, im = root * np.cos(neg_half_arg), root * np.sin(neg_half_arg)
    to_zero = ((np.abs(b) == inf) & np.isnan(a)) | (np.abs(a) == inf)
    re = np.where(to_zero, np.copysign(zero, a), re)
    im = np.where(to_zero, -np.copysign(zero, b), im)
    is_zero = (a == 0) & (b == 0)
    re = np.where(is_zero, inf, re)
    im = np.where(is_zero, dt.type(np.nan), im)
    return compose(re, im, x.dtype)


def complex_exp(x: np.ndarray) -> np.ndarray:
    """e^x cos y + i e^x sin y; +0 for a NaN imaginary part of a zero y (e^x = inf or NaN)."""
    re, im = parts(x)
    with np.errstate(all="ignore"):
        e = np.exp(re)
        out_im = e * np.sin(im)
        out_im = np.where((im == 0) & np.isnan(out_im), im.dtype.type(0), out_im)
        return compose(e * np.cos(im), out_im, x.dtype)


def complex_expm1(x: np.ndarray) -> np.ndarray:
    """exp(x) - 1 + 0i, as mlir expands it."""
    e = complex_exp(x)
    re, im = parts(e)
    return compose(re - 1, im, x.dtype)


def complex_log(x: np.ndarray, raw: np.ndarray | None = None) -> np.ndarray:
    """ln max(|x|, |y|) + ln(1 + (min/max)^2) / 2 (no overflow of |x|; min where NaN) +
    i atan2(y, x), the angle of the unflushed operand `raw` (XLA-CPU's atan2 reads
    denormals)."""
    re, im = parts(x)
    dt = re.dtype
    raw_re, raw_im = parts(x if raw is None else raw)
    with np.errstate(all="ignore"):
        big, small = np.maximum(np.abs(re), np.abs(im)), np.minimum(np.abs(re), np.abs(im))
        ratio = daz(small / big)
        r = np.log(big) + dt.type(0.5) * np.log1p(daz(ratio * ratio))
        r = np.where(np.isnan(r), np.log(small), r)
        return compose(r, np.arctan2(raw_im, raw_re), x.dtype)


def complex_log1p(x: np.ndarray, raw: np.ndarray | None = None) -> np.ndarray:
    """log(1 + x) by mlir's expansion: log1p of max(|x+1|, |y|) - 1 (x where x+1 > |y|) plus
    half log1p((min/max)^2); min where that is NaN; atan2(y, x + 1) of the unflushed `raw`."""
    re, im = parts(x)
    raw_re, raw_im = parts(x if raw is None else raw)
    dt = re.dtype
    with np.errstate(all="ignore"):
        re1 = re + 1
        a_re1, a_im = np.abs(re1), np.abs(im)
        big, small = np.maximum(a_re1, a_im), np.minimum(a_re1, a_im)
        big_m1 = np.where(re1 > a_im, re, big - 1)
        ratio = daz(small / big)
        r = dt.type(0.5) * np.log1p(daz(ratio * ratio)) + np.log1p(big_m1)
        return compose(np.where(np.isnan(r), small, r), np.arctan2(raw_im, raw_re + 1), x.dtype)


def complex_tanh(x: np.ndarray, tan: bool = False) -> np.ndarray:
    """tanh(x+iy) = (e^2x - e^-2x + 4i cos y sin y) / (e^2x - 1 + e^-2x - 1 + 4 cos^2 y), the
    real part -+1 where the denominator overflows; tan(x+iy) = -i tanh(-y + ix)."""
    re, im = parts(x)
    dt = re.dtype
    if tan:
        re, im = -im, re
    zero, inf = dt.type(0), dt.type(np.inf)
    with np.errstate(all="ignore"):
        e_p, e_m = np.expm1(re + re), np.expm1(-(re + re))
        cos, sin = np.cos(im), np.sin(im)
        imag_num = dt.type(4) * (cos * sin)
        exp_sum = e_p + e_m
        den = exp_sum + (cos * cos) * dt.type(4)
        out_re = np.where(exp_sum == inf, np.copysign(dt.type(1), re), (e_p - e_m) / den)
        out_im = imag_num / den
    re_inf = np.abs(re) == inf
    out_re = np.where(np.isnan(imag_num) & ~re_inf, dt.type(np.nan), out_re)
    out_im = np.where((im == 0) | (re_inf & np.isnan(imag_num)), zero, out_im)
    if tan:
        out_re, out_im = out_im, -out_re
    return compose(out_re, out_im, x.dtype)


def complex_tan(x: np.ndarray) -> np.ndarray:
    return complex_tanh(x, tan=True)
