"""dot (general), convolution (general) and fft."""

from __future__ import annotations

import numpy as np

from hlopass.interpreter.core import dtype_of, handler
from hlopass.interpreter.numeric import as_dtype, is_float_dtype, widen


def acc_dtype(*dts: np.dtype) -> np.dtype:
    if any(d.kind == "c" for d in dts):
        return (
            np.dtype(np.complex128)
            if any(d.itemsize == 16 for d in dts if d.kind == "c")
            else np.dtype(np.complex64)
        )
    if any(is_float_dtype(d) for d in dts):
        return np.dtype(np.float64) if any(d == np.float64 for d in dts) else np.dtype(np.float32)
    if all(d.kind == "b" for d in dts):
        return np.dtype(np.int64)
    return np.dtype(np.int64)


def dot_dimensions(op) -> tuple[list[int], ...]:
    """A dot's (lhs batch, rhs batch, lhs contracting, rhs contracting) dimensions."""
    names = ("lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims")
    return tuple(list(op.attr(n) or ()) for n in names)


@handler("dot")
def _dot(interp, op, args):
    lhs, rhs = args
    out = dtype_of(op.shape)
    acc = acc_dtype(lhs.dtype, rhs.dtype, out)
    lb, rb, lc, rc = dot_dimensions(op)
    lf = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
    batch = [lhs.shape[d] for d in lb]
    m = int(np.prod([lhs.shape[d] for d in lf], dtype=np.int64))
    n = int(np.prod([rhs.shape[d] for d in rf], dtype=np.int64))
    k = int(np.prod([lhs.shape[d] for d in lc], dtype=np.int64))
    b = int(np.prod(batch, dtype=np.int64))
    # C order: numpy's summation order then depends on the values only, not on how the
    # operands happen to lie in memory (layouts are physical only: same values under any)
    a = np.transpose(lhs, lb + lf + lc).astype(acc, order="C").reshape(b, m, k)
    c = np.transpose(rhs, rb + rc + rf).astype(acc, order="C").reshape(b, k, n)
    r = np.matmul(a, c)
    return as_dtype(r.reshape(op.shape.dims), out)


@handler("convolution")
def _convolution(interp, op, args):
    lhs, rhs = args[:2]
    out = dtype_of(op.shape)
    if 0 in op.shape.dims:  # no window fits (or nothing to compute): an empty result
        return np.zeros(op.shape.dims, out)
    acc = acc_dtype(lhs.dtype, rhs.dtype, out)
    labels = op.attr("dim_labels")
    ib, if_, isp = labels.input
    ki, ko, ksp = labels.kernel
    ob, of, osp = labels.output
    nsp = len(isp)
    window = op.attr("window")
    wdims = window.dims if window is not None else ()
    wdims = list(wdims) + [None] * (nsp - len(wdims))
    x = np.transpose(lhs, [ib, if_, *isp]).astype(acc, order="C")  # memory-order independent
    w = np.transpose(rhs, [ko, ki, *ksp]).astype(acc, order="C")
    fgc = op.attr("feature_group_count") or 1
    bgc = op.attr("batch_group_count") or 1
    # base (lhs) dilation and padding
    for s, wd in enumerate(wdims):
        if wd is None:
            continue
        axis = 2 + s
        if wd.lhs_dilation > 1:
            x = dilate(x, axis, wd.lhs_dilation)
        x = pad_axis(x, axis, wd.pad_low, wd.pad_high)
        if wd.rhs_dilation > 1:
            w = dilate(w, axis, wd.rhs_dilation)
        if wd.reversal:
            w = np.flip(w, axis)
    strides = [wd.stride if wd is not None else 1 for wd in wdims]
    ksizes = w.shape[2:]
    # windows: (N, C, *out_full, *K) -> strided
    view = np.lib.stride_tricks.sliding_window_view(x, ksizes, axis=tuple(range(2, 2 + nsp)))
    view = view[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)]
    N, C = x.shape[:2]
    n_out, _n_in = w.shape[:2]
    sp = "".join(chr(ord("p") + i) for i in range(nsp))
    kk = "".join(chr(ord("h") + i) for i in range(nsp))
    if bgc > 1:
        nb = N // bgc
        v = view.reshape((bgc, nb) + view.shape[1:])  # g n c sp k
        wg = w.reshape((bgc, n_out // bgc) + w.shape[1:])  # g o c k
        r = np.einsum(f"gnc{sp}{kk},goc{kk}->ngo{sp}", v, wg, optimize=True)
        r = r.reshape((nb, n_out) + r.shape[3:])
    else:
        g = fgc
        v = view.reshape((N, g, C // g) + view.shape[2:])  # n g c sp k
        wg = w.reshape((g, n_out // g) + w.shape[1:])  # g o c k
        r = np.einsum(f"ngc{sp}{kk},goc{kk}->ngo{sp}", v, wg, optimize=True)
        r = r.reshape((N, n_out) + r.shape[3:])
    # r is (N, n_out, *spatial); place into output layout
    perm = [0] * (2 + nsp)
    perm[ob], perm[of] = 0, 1
    for s, d in enumerate(osp):
        perm[d] = 2 + s
    r = np.transpose(r, perm)
    return as_dtype(r, out).reshape(op.shape.dims)


def dilate(x: np.ndarray, axis: int, factor: int) -> np.ndarray:
    n = x.shape[axis]
    shape = list(x.shape)
    shape[axis] = max(0, (n - 1) * factor + 1)
    out = np.zeros(shape, x.dtype)
    index = [slice(None)] * x.ndim
    index[axis] = slice(None, None, factor)
    out[tuple(index)] = x
    return out


def pad_axis(x: np.ndarray, axis: int, low: int, high: int) -> np.ndarray:
    widths = [(0, 0)] * x.ndim
    widths[axis] = (max(low, 0), max(high, 0))
    x = np.pad(x, widths)
    index = [slice(None)] * x.ndim
    index[axis] = slice(-min(low, 0), x.shape[axis] + min(high, 0))
    return x[tuple(index)]


@handler("fft")
def _fft(interp, op, args):
    (x,) = args
    kind = op.attr("fft_type")
    lengths = list(op.attr("fft_length"))
    axes = list(range(x.ndim - len(lengths), x.ndim))
    out = dtype_of(op.shape)
    if kind == "FFT":
        r = np.fft.fftn(x, s=lengths, axes=axes)
    elif kind == "IFFT":
        r = np.fft.ifftn(x, s=lengths, axes=axes)
    elif kind == "RFFT":
        r = np.fft.rfftn(x, s=lengths, axes=axes)
    else:
        r = np.fft.irfftn(x, s=lengths, axes=axes)
    return r.astype(out)


# --- cholesky, triangular-solve, batch norm -----------------------------------------------


@handler("cholesky")
def _cholesky(interp, op, args):
    """Per matrix of the batch: L (lower) or U = L^H; the other triangle zero; a matrix that
    is not positive definite gives NaNs (XLA-CPU: implementation-defined values)."""
    (a,) = args
    out = dtype_of(op.shape)
    w = widen(a)
    lower = op.attr("lower") is not False and op.attr("lower") is not None
    n = w.shape[-1]
    flat = w.reshape(-1, n, n)
    res = np.empty_like(flat)
    for i, m in enumerate(flat):
        sym = np.tril(m) + np.tril(m, -1).conj().swapaxes(-1, -2) if lower else (
            np.triu(m) + np.triu(m, 1).conj().swapaxes(-1, -2))  # fmt: skip
        try:
            low = np.linalg.cholesky(sym)
        except np.linalg.LinAlgError:
            low = np.full_like(m, np.nan)
        res[i] = low if lower else low.conj().swapaxes(-1, -2)
    return as_dtype(res.reshape(w.shape), out)


@handler("triangular-solve")
def _triangular_solve(interp, op, args):
    """op(A) X = B (left_side) or X op(A) = B, A's `lower`/upper triangle, optionally with a
    unit diagonal; op is none, transpose or adjoint."""
    a, b = args
    out = dtype_of(op.shape)
    wa, wb = widen(a), widen(b)
    n = wa.shape[-1]
    tri = np.tril(wa) if op.attr("lower") else np.triu(wa)
    if op.attr("unit_diagonal"):
        tri = tri * (1 - np.eye(n, dtype=tri.dtype)) + np.eye(n, dtype=tri.dtype)
    mode = op.attr("transpose_a") or "NO_TRANSPOSE"
    if mode in ("TRANSPOSE", "ADJOINT"):
        tri = tri.swapaxes(-1, -2)
        if mode == "ADJOINT":
            tri = tri.conj()
    if op.attr("left_side"):
        x = np.linalg.solve(tri, wb)
    else:  # X A = B  <=>  A^T X^T = B^T
        x = np.linalg.solve(tri.swapaxes(-1, -2), wb.swapaxes(-1, -2)).swapaxes(-1, -2)
    return as_dtype(x, out)


def _feature_view(x, feature: int):
    """(reduction axes, shape that broadcasts a per-feature vector against x)."""
    axes = tuple(d for d in range(x.ndim) if d != feature)
    shape = [1] * x.ndim
    shape[feature] = x.shape[feature]
    return axes, shape


@handler("batch-norm-inference")
def _batch_norm_inference(interp, op, args):
    x, scale, offset, mean, var = (widen(a) for a in args)
    _, shape = _feature_view(x, op.attr("feature_index"))
    eps = x.dtype.type(op.attr("epsilon"))
    r = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    return as_dtype(r * scale.reshape(shape) + offset.reshape(shape), dtype_of(op.shape))


@handler("batch-norm-training")
def _batch_norm_training(interp, op, args):
    x, scale, offset = (widen(a) for a in args)
    axes, shape = _feature_view(x, op.attr("feature_index"))
    eps = x.dtype.type(op.attr("epsilon"))
    mean = x.mean(axis=axes)
    var = ((x - mean.reshape(shape)) ** 2).mean(axis=axes)
    r = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    r = r * scale.reshape(shape) + offset.reshape(shape)
    dts = [dtype_of(s) for s in op.shape.elements]
    return (as_dtype(r, dts[0]), as_dtype(mean, dts[1]), as_dtype(var, dts[2]))


@handler("batch-norm-grad")
def _batch_norm_grad(interp, op, args):
    x, scale, mean, var, dy = (widen(a) for a in args)
    axes, shape = _feature_view(x, op.attr("feature_index"))
    eps = x.dtype.type(op.attr("epsilon"))
    count = x.size // x.shape[op.attr("feature_index")]
    inv = 1 / np.sqrt(var.reshape(shape) + eps)
    x_hat = (x - mean.reshape(shape)) * inv
    d_offset = dy.sum(axis=axes)
    d_scale = (dy * x_hat).sum(axis=axes)
    dx = (
        scale.reshape(shape)
        * inv
        * (dy - d_offset.reshape(shape) / count - x_hat * d_scale.reshape(shape) / count)
    )
    dts = [dtype_of(s) for s in op.shape.elements]
    return (as_dtype(dx, dts[0]), as_dtype(d_scale, dts[1]), as_dtype(d_offset, dts[2]))


@handler("ragged-dot")
def _ragged_dot(interp, op, args):
    """dot whose lhs ragged dimension is cut into groups by `group_sizes` (consecutive runs
    of its positions; positions past the last group belong to none). The ragged dimension
    is one of three kinds (operation semantics of RaggedDot):
    - free (m): row r of group g multiplies rhs[g] (rhs's group dimension);
    - contracting (k): each group contracts only its own positions, and the result gains
      a leading group dimension;
    - batch: the groups only partition the batch: a plain dot (JAX's ragged_dot_general
      on XLA-CPU masks nothing in this mode either).
    group_sizes is [outer..., g], `outer` being the batch dims and the lhs dims of the same
    kind outside the ragged one (batch dims only for the batch kind), or just [g]."""
    lhs, rhs, sizes = args
    out = dtype_of(op.shape)
    acc = acc_dtype(lhs.dtype, rhs.dtype, out)
    lb, rb, lc, rc = dot_dimensions(op)
    (ragged,) = op.attr("lhs_ragged_dims")
    rg = list(op.attr("rhs_group_dims") or ())
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFHIJKLMNOPQRSTUVWXYZ")
    lhs_l = [next(letters) for _ in range(lhs.ndim)]
    rhs_l = [next(letters) for _ in range(rhs.ndim)]
    for a, b in zip(lb + lc, rb + rc, strict=True):
        rhs_l[b] = lhs_l[a]
    group = "G"
    for d in rg:
        rhs_l[d] = group
    lf = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.ndim) if d not in rb and d not in rc and d not in rg]
    kind = lf if ragged in lf else lc if ragged in lc else lb
    outer = [d for d in kind if d < ragged]
    if kind is not lb:
        outer = lb + outer
    ends = np.cumsum(sizes.astype(np.int64), axis=-1)
    pos = np.arange(lhs.shape[ragged]).reshape((1,) * (sizes.ndim - 1) + (-1, 1))
    mask = (pos < ends[..., None, :]) & (pos >= (ends - sizes)[..., None, :])
    mask_l = ([lhs_l[d] for d in outer] if sizes.ndim > 1 else []) + [lhs_l[ragged], group]
    result_l = [lhs_l[d] for d in lb + lf] + [rhs_l[d] for d in rf]
    if kind is lc:
        result_l = [group] + result_l
    if kind is lb:
        mask, mask_l = np.ones(1, bool), [group]
        rhs_l = [group if x == group else x for x in rhs_l]
    spec = f"{''.join(lhs_l)},{''.join(mask_l)},{''.join(rhs_l)}->{''.join(result_l)}"
    r = np.einsum(spec, lhs.astype(acc), mask.astype(acc), rhs.astype(acc))
    return as_dtype(r, out)
