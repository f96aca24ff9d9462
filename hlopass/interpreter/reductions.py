"""reduce, reduce-window, select-and-scatter and map."""

from __future__ import annotations

import itertools
from typing import cast

import numpy as np

from hlopass.interpreter.apply import apply_computation, binop_ufunc, combine_at, simple_binop
from hlopass.interpreter.core import dtype_of, handler
from hlopass.interpreter.numeric import as_dtype, widen
from hlopass.interpreter.shaping import pad
from hlopass.ir.shape import ArrayShape, TupleShape


def _out_dtypes(op):
    shape = op.shape
    leaves = shape.elements if isinstance(shape, TupleShape) else (shape,)
    return [dtype_of(s) for s in leaves]


def _pack(op, values):
    return tuple(values) if isinstance(op.shape, TupleShape) else values[0]


@handler("reduce")
def _reduce(interp, op, args):
    n = len(args) // 2
    inputs, inits = args[:n], args[n:]
    dims = tuple(op.attr("dimensions"))
    comp = op.attr("to_apply")
    out_dts = _out_dtypes(op)
    kept = [d for d in range(inputs[0].ndim) if d not in dims]
    size = int(np.prod([inputs[0].shape[d] for d in dims], dtype=np.int64))
    kept_shape = tuple(inputs[0].shape[d] for d in kept)
    if size == 0:
        return _pack(
            op,
            [
                np.broadcast_to(i, kept_shape).astype(dt)
                for i, dt in zip(inits, out_dts, strict=False)
            ],
        )
    binop = simple_binop(interp, comp) if n == 1 else None
    if binop is not None:
        w = np.ascontiguousarray(widen(inputs[0]))  # summation order from values, not memory
        fn = binop_ufunc(binop, w.dtype)
        r = fn(widen(inits[0]), fn.reduce(w, axis=dims))
        return as_dtype(r, out_dts[0])
    moved = [np.moveaxis(x, dims, range(x.ndim - len(dims), x.ndim)).reshape(kept_shape + (size,))
             for x in inputs]  # fmt: skip
    vals = _tree_reduce(interp, comp, moved)
    acc = apply_computation(interp, comp, [np.broadcast_to(i, kept_shape) for i in inits] + vals)
    return _pack(op, [np.asarray(a).astype(dt) for a, dt in zip(acc, out_dts, strict=False)])


def _tree_reduce(interp, comp, vals):
    """Combine along the last axis, pairing neighbours so operand order is kept."""
    while vals[0].shape[-1] > 1:
        r = vals[0].shape[-1]
        even = r // 2 * 2
        left = [v[..., 0:even:2] for v in vals]
        right = [v[..., 1:even:2] for v in vals]
        combined = apply_computation(interp, comp, left + right)
        if r % 2:
            combined = [
                np.concatenate([c, v[..., -1:]], axis=-1)
                for c, v in zip(combined, vals, strict=False)
            ]
        vals = [np.asarray(c) for c in combined]
    return [v[..., 0] for v in vals]


def _window_dims(op) -> tuple:
    """The window's dimensions; a scalar operand's window has none (XLA prints no `window=`)."""
    window = op.attr("window")
    return () if window is None else window.dims


def _windows(op, padded, out_dims):
    """(offset, strided view) for each window position offset, in row-major order."""
    window = _window_dims(op)
    for k in itertools.product(*(range(w.size) for w in window)):
        index = tuple(
            slice(ki * w.rhs_dilation, ki * w.rhs_dilation + (o - 1) * w.stride + 1, w.stride)
            for ki, w, o in zip(k, window, out_dims, strict=False)
        )
        yield k, [p[index] for p in padded]


@handler("reduce-window")
def _reduce_window(interp, op, args):
    n = len(args) // 2
    inputs, inits = args[:n], args[n:]
    window = _window_dims(op)
    comp = op.attr("to_apply")
    out_dts = _out_dtypes(op)
    if not window and inputs and np.ndim(inputs[0]) == 0:
        # A scalar operand: XLA:CPU returns the operand, init unused (checked with jaxlib
        # 0.10.2, tests/test_interpreter_trust.py), unlike a 1-wide window (init + x).
        return _pack(op, [np.asarray(x).astype(dt) for x, dt in zip(inputs, out_dts, strict=False)])
    shape = op.shape
    out_shape = shape.elements[0] if isinstance(shape, TupleShape) else shape
    out_dims = cast(ArrayShape, out_shape).dims
    config = [(w.pad_low, w.pad_high, w.lhs_dilation - 1) for w in window]
    padded = [pad(x, i, config) for x, i in zip(inputs, inits, strict=False)]
    # XLA-CPU never reduces padding or lhs-dilation holes into a window (it skips those
    # positions; the accumulator starts at init): a window over k padded positions is not
    # f(init, ..., init, x...) but f(init, x...), which differs when init is no identity
    real = pad(np.ones(np.shape(inputs[0]), bool), np.array(False), config) if inputs else None
    binop = simple_binop(interp, comp) if n == 1 else None
    if binop is not None:
        acc = np.broadcast_to(widen(inits[0]), out_dims)
        fn = binop_ufunc(binop, acc.dtype)
        for _, (view, ok) in _windows(op, [widen(padded[0]), real], out_dims):
            acc = np.where(ok, fn(acc, view), acc)
        return as_dtype(acc, out_dts[0])
    accs = [np.broadcast_to(i, out_dims) for i in inits]
    for _, views in _windows(op, padded + [real], out_dims):
        ok = views.pop()
        new = apply_computation(interp, comp, accs + views)
        accs = [np.where(ok, a_new, a) for a_new, a in zip(new, accs, strict=True)]
    return _pack(op, [np.asarray(a).astype(dt) for a, dt in zip(accs, out_dts, strict=False)])


@handler("select-and-scatter")
def _select_and_scatter(interp, op, args):
    operand, source, init = args
    window = _window_dims(op)
    config = [(w.pad_low, w.pad_high, 0) for w in window]
    padded = pad(operand, np.zeros((), operand.dtype), config)
    valid = pad(np.ones(operand.shape, bool), np.zeros((), bool), config)
    flat_index = np.arange(padded.size).reshape(padded.shape)
    out_dims = source.shape
    sel_val: np.ndarray | None = None
    sel_idx: np.ndarray | None = None
    has = np.zeros(out_dims, bool)
    for _, (v, ok, idx) in _windows(op, [padded, valid, flat_index], out_dims):
        if sel_val is None or sel_idx is None:  # first window (both set together)
            sel_val, sel_idx = v.copy(), idx.copy()
            has = ok.copy()
            continue
        (keep,) = apply_computation(interp, op.attr("select"), [sel_val, v])
        take = ok & (~has | ~keep.astype(bool))
        sel_val = np.where(take, v, sel_val)
        sel_idx = np.where(take, idx, sel_idx)
        has = has | ok
    result = np.full(padded.shape, init, dtype=operand.dtype)
    if sel_idx is not None:
        mask = has.reshape(-1)
        combine_at(interp, op.attr("scatter"), [result], sel_idx.reshape(-1)[mask],
                   [source.reshape(-1)[mask]])  # fmt: skip
    crop = tuple(
        slice(w.pad_low, w.pad_low + n) for w, n in zip(window, operand.shape, strict=False)
    )
    return result[crop].copy()


@handler("map")
def _map(interp, op, args):
    (r,) = apply_computation(interp, op.attr("to_apply"), list(args))
    return np.asarray(r).astype(dtype_of(op.shape))
