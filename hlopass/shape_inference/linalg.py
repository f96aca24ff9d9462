"""Contractions and factorizations: dot, ragged-dot, scaled-dot, convolution, fft,
triangular-solve, cholesky, batch-norm."""

from __future__ import annotations

from collections.abc import Callable

from hlopass.ir.shape import ELEMENT_BITS, ArrayShape, Shape, TupleShape
from hlopass.shape_inference.common import CannotInfer, Ctx, fresh

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
    """XLA's InferDotOpShape: batch and contracting dimensions in range, distinct, paired
    with equal sizes; the result is batch, then lhs free, then rhs free dimensions."""
    op = ctx.opcode
    lb = tuple(ctx.attr("lhs_batch_dims", ()))
    rb = tuple(ctx.attr("rhs_batch_dims", ()))
    lc = tuple(ctx.attr("lhs_contracting_dims", ()))
    rc = tuple(ctx.attr("rhs_contracting_dims", ()))
    for side, s, used in (("lhs", lhs, lb + lc), ("rhs", rhs, rb + rc)):
        for d in used:
            if not 0 <= d < s.rank:
                raise CannotInfer(f"{op} {side} dimension {d} is out of range for {s.text(False)}")
        if len(set(used)) != len(used):
            raise CannotInfer(f"{op} {side} batch and contracting dimensions repeat")
    for kind, a, b in (("batch", lb, rb), ("contracting", lc, rc)):
        if len(a) != len(b):
            raise CannotInfer(f"{op} has {len(a)} lhs but {len(b)} rhs {kind} dimensions")
        for x, y in zip(a, b, strict=True):
            if lhs.dims[x] != rhs.dims[y]:
                raise CannotInfer(
                    f"{op} {kind} dimension {x} of {lhs.text(False)} and {y} of "
                    f"{rhs.text(False)} differ in size"
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
    """XLA's InferConvolveShape: feature counts agree (with the group counts), the window
    matches the kernel, and each output spatial size is that of the strided windows over
    the dilated, padded input."""
    lhs, rhs = ctx.array(0), ctx.array(1)
    labels = ctx.attr("dim_labels")
    if labels is None:
        raise CannotInfer("convolution needs dim_labels=")
    if "?" in str(labels):
        raise CannotInfer(f"convolution dim_labels={labels} leave a dimension unknown")
    (ib, if_, isp), (kf, ko, ksp), (ob, of, osp) = labels.input, labels.kernel, labels.output
    if not (len(isp) == len(ksp) == len(osp)) or not (lhs.rank == rhs.rank == len(isp) + 2):
        raise CannotInfer(
            f"convolution dim_labels={labels} need rank {len(isp) + 2}, operands are "
            f"{lhs.text(False)} and {rhs.text(False)}"
        )
    window = ctx.attr("window")
    wdims = window.dims if window is not None else ()
    if len(wdims) != len(isp):
        raise CannotInfer(f"window has {len(wdims)} dimensions, the convolution {len(isp)}")
    fgc = ctx.attr("feature_group_count", 1)
    bgc = ctx.attr("batch_group_count", 1)
    if fgc < 1 or bgc < 1 or lhs.dims[if_] != rhs.dims[kf] * fgc or lhs.dims[ib] % bgc:
        raise CannotInfer(
            f"convolution input {lhs.text(False)} and kernel {rhs.text(False)} disagree in "
            f"features (feature_group_count={fgc}, batch_group_count={bgc})"
        )
    if fgc > 1 and bgc > 1:
        raise CannotInfer(
            f"batch_group_count {bgc} and feature_group_count {fgc} cannot both exceed 1"
        )
    out = [0] * lhs.rank
    out[ob] = lhs.dims[ib] // bgc
    out[of] = rhs.dims[ko]
    for i, w in enumerate(wdims):
        d, size = lhs.dims[isp[i]], rhs.dims[ksp[i]]
        # XLA's rule is equality: each window size is the kernel's spatial size (a window
        # smaller or larger than the kernel is refused, whatever the stride and dilation)
        if w.size != size:
            raise CannotInfer(
                f"window size {w.size} in spatial dimension {i} differs from the kernel's "
                f"size {size} there (kernel {rhs.text(False)}, window "
                f"size={'x'.join(str(x.size) for x in wdims)})"
            )
        if w.stride < 1 or w.lhs_dilation < 1 or w.rhs_dilation < 1:
            raise CannotInfer(
                f"window dimension {i} has stride {w.stride}, lhs_dilate {w.lhs_dilation}, "
                f"rhs_dilate {w.rhs_dilation}: each must be at least 1"
            )
        padded = w.pad_low + w.pad_high + ((d - 1) * w.lhs_dilation + 1 if d else 0)
        span = (size - 1) * w.rhs_dilation + 1 if size else 0
        out[osp[i]] = 0 if padded < span else (padded - span) // w.stride + 1
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
