"""Contractions and factorizations: dot, ragged-dot, scaled-dot, convolution, fft,
triangular-solve, cholesky, batch-norm."""

from __future__ import annotations

from collections.abc import Callable

from hlopass.ir.shape import ELEMENT_BITS, ArrayShape, Shape, TupleShape
from hlopass.shape_inference.common import CannotInfer, Ctx, check_dims, fresh

_COMPLEX = {"f32": "c64", "f64": "c128"}
_REAL = {v: k for k, v in _COMPLEX.items()}


def _rank_of_type(t: str) -> tuple[int, int]:
    kind = 3 if t in _REAL else 2 if t.startswith(("f", "bf")) else 1 if t != "pred" else 0
    return kind, ELEMENT_BITS.get(t, 0)


def higher_precision(a: str, b: str) -> str:
    """XLA's HigherPrecisionElementType: complex over float over integer, then width."""
    if a == b:
        return a
    return a if _rank_of_type(a) >= _rank_of_type(b) else b


def _dot_dims(ctx: Ctx, lhs: ArrayShape, rhs: ArrayShape, skip_rhs: set[int]) -> list[int]:
    lb = tuple(ctx.attr("lhs_batch_dims", ()))
    rb = tuple(ctx.attr("rhs_batch_dims", ()))
    lc = tuple(ctx.attr("lhs_contracting_dims", ()))
    rc = tuple(ctx.attr("rhs_contracting_dims", ()))
    check_dims(ctx, lb + lc, lhs.rank, "lhs dimension")
    check_dims(ctx, rb + rc, rhs.rank, "rhs dimension")
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise CannotInfer("dot needs as many lhs as rhs batch and contracting dimensions")
    for x, y in (*zip(lb, rb, strict=True), *zip(lc, rc, strict=True)):
        if lhs.dims[x] != rhs.dims[y]:
            raise CannotInfer(
                f"dot dimension {x} of {lhs.text(False)} does not match dimension {y} of "
                f"{rhs.text(False)}"
            )
    dims = [lhs.dims[d] for d in lb]
    dims += [d for i, d in enumerate(lhs.dims) if i not in lb and i not in lc]
    dims += [d for i, d in enumerate(rhs.dims) if i not in rb and i not in rc and i not in skip_rhs]
    return dims


def _dot(ctx: Ctx) -> Shape:
    lhs, rhs = ctx.array(0), ctx.array(1)
    dims = _dot_dims(ctx, lhs, rhs, set())
    return fresh(higher_precision(lhs.element_type, rhs.element_type), dims)


def _scaled_dot(ctx: Ctx) -> Shape:
    # operands: lhs, lhs scale, rhs, rhs scale
    lhs, rhs = ctx.array(0), ctx.array(2)
    dims = _dot_dims(ctx, lhs, rhs, set())
    return fresh(higher_precision(lhs.element_type, rhs.element_type), dims)


def _ragged_dot(ctx: Ctx) -> Shape:
    lhs, rhs, groups = ctx.array(0), ctx.array(1), ctx.array(2)
    group_dims = set(ctx.attr("rhs_group_dims", ()))
    ragged = tuple(ctx.attr("lhs_ragged_dims", ()))
    dims = _dot_dims(ctx, lhs, rhs, group_dims)
    if ragged and ragged[0] in tuple(ctx.attr("lhs_contracting_dims", ())):
        dims = [groups.dims[-1] if groups.dims else 1, *dims]  # one result per group
    return fresh(higher_precision(lhs.element_type, rhs.element_type), dims)


def _convolution(ctx: Ctx) -> Shape:
    lhs, rhs = ctx.array(0), ctx.array(1)
    labels = ctx.attr("dim_labels")
    if labels is None:
        raise CannotInfer("convolution needs dim_labels=")
    ib, if_, isp = labels.input
    ko, kf = labels.kernel[1], labels.kernel[0]
    ksp = labels.kernel[2]
    ob, of, osp = labels.output
    if not (len(isp) == len(ksp) == len(osp)) or lhs.rank != rhs.rank or lhs.rank != 2 + len(isp):
        raise CannotInfer("convolution operands and dim_labels disagree in rank")
    fgc = ctx.attr("feature_group_count", 1)
    bgc = ctx.attr("batch_group_count", 1)
    if lhs.dims[if_] != rhs.dims[kf] * fgc:
        raise CannotInfer(
            f"convolution input features ({lhs.dims[if_]}) must be kernel input features "
            f"({rhs.dims[kf]}) times feature_group_count ({fgc})"
        )
    if fgc > 1 and bgc > 1:
        raise CannotInfer(
            f"batch_group_count {bgc} and feature_group_count {fgc} cannot both exceed 1"
        )
    if bgc < 1 or lhs.dims[ib] % bgc:
        raise CannotInfer(f"batch_group_count {bgc} does not divide the batch {lhs.dims[ib]}")
    window = ctx.attr("window")
    wdims = window.dims if window is not None else ()
    if wdims and len(wdims) != len(isp):
        raise CannotInfer("convolution window and dim_labels disagree in rank")
    out = [0] * lhs.rank
    out[ob] = lhs.dims[ib] // bgc
    out[of] = rhs.dims[ko]
    for i, (a, k) in enumerate(zip(isp, ksp, strict=True)):
        d, size = lhs.dims[a], rhs.dims[k]
        if wdims:
            w = wdims[i]
            if w.size != size:
                raise CannotInfer(f"window size {w.size} differs from kernel size {size}")
            stride, lo, hi, ld, rd = w.stride, w.pad_low, w.pad_high, w.lhs_dilation, w.rhs_dilation
        else:
            stride, lo, hi, ld, rd = 1, 0, 0, 1, 1
        padded = lo + hi + ((d - 1) * ld + 1 if d else 0)
        span = (size - 1) * rd + 1 if size else 0
        out[osp[i]] = 0 if padded < span else (padded - span) // stride + 1
    return fresh(higher_precision(lhs.element_type, rhs.element_type), out)


def _fft(ctx: Ctx) -> Shape:
    a = ctx.array(0)
    kind = ctx.attr("fft_type")
    length = ctx.ints("fft_length")
    if not 1 <= len(length) <= 3 or len(length) > a.rank:
        raise CannotInfer(f"fft_length must give 1 to 3 of the operand's {a.rank} dimensions")
    dims = list(a.dims)
    if kind in ("FFT", "IFFT"):
        if a.element_type not in _REAL:
            raise CannotInfer(f"{kind} needs a complex operand, got {a.text(False)}")
        return a
    if kind == "RFFT":
        et = _COMPLEX.get(a.element_type)
        if et is None:
            raise CannotInfer(f"RFFT needs an f32 or f64 operand, got {a.text(False)}")
        dims[-1] = length[-1] // 2 + 1 if length[-1] else 0
    elif kind == "IRFFT":
        et = _REAL.get(a.element_type)
        if et is None:
            raise CannotInfer(f"IRFFT needs a complex operand, got {a.text(False)}")
        dims[-1] = length[-1]
    else:
        raise CannotInfer(f"unknown fft_type {kind}")
    return ArrayShape(et, tuple(dims), a.dynamic, a.layout)


def _square_minor(ctx: Ctx, a: ArrayShape, what: str) -> None:
    if a.rank < 2 or a.dims[-1] != a.dims[-2]:
        raise CannotInfer(f"the two minor dimensions of {what} must be equal, got {a.text(False)}")


def _cholesky(ctx: Ctx) -> Shape:
    a = ctx.array(0)
    _square_minor(ctx, a, "a")
    return a


def _triangular_solve(ctx: Ctx) -> Shape:
    a, b = ctx.array(0), ctx.array(1)
    _square_minor(ctx, a, "a")
    return b


def _feature(ctx: Ctx, a: ArrayShape) -> ArrayShape:
    fi = ctx.attr("feature_index")
    if fi is None or not 0 <= fi < a.rank:
        raise CannotInfer(f"feature_index {fi} out of range for {a.text(False)}")
    return fresh(a.element_type, (a.dims[fi],))


def _batch_norm_training(ctx: Ctx) -> Shape:
    a = ctx.array(0)
    f = _feature(ctx, a)
    return TupleShape((a, f, f))


def _batch_norm_inference(ctx: Ctx) -> Shape:
    a = ctx.array(0)
    _feature(ctx, a)
    return a


RULES: dict[str, Callable[[Ctx], Shape]] = {
    "dot": _dot,
    "scaled-dot": _scaled_dot,
    "ragged-dot": _ragged_dot,
    "convolution": _convolution,
    "fft": _fft,
    "cholesky": _cholesky,
    "triangular-solve": _triangular_solve,
    "batch-norm-training": _batch_norm_training,
    "batch-norm-grad": _batch_norm_training,
    "batch-norm-inference": _batch_norm_inference,
}
