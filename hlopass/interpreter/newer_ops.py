"""Opcodes newer than the rest of the interpreter: `scan`, `mulhi`, `async-update`."""

from __future__ import annotations

import numpy as np

from hlopass.interpreter.core import dtype_of, handler, unsupported
from hlopass.ir.shape import ArrayShape


@handler("scan")
def _scan(interp, op, args):
    """scan(inputs..., inits...): along dimension d, call the computation on (the inputs'
    slices..., carries...) -> (outputs' slices..., carries...); outputs stack the slices
    along d (in place, also when is_reverse walks the dimension backwards)."""
    carries_n = op.attr("num_carries")
    (dim,) = op.attr("dimensions")
    comp = interp.comp(op.attr("to_apply"))
    inputs, carries = list(args[: len(args) - carries_n]), list(args[len(args) - carries_n :])
    length = inputs[0].shape[dim] if inputs else 0
    shape = op.shape
    out_shapes = list(shape.elements[: len(shape.elements) - carries_n])
    outs = [np.empty(s.dims, dtype_of(s)) for s in out_shapes]
    steps = range(length - 1, -1, -1) if op.attr("is_reverse") else range(length)
    for i in steps:
        result = interp.call(comp, [np.take(x, i, axis=dim) for x in inputs] + carries)
        values = list(result) if isinstance(result, tuple) else [result]
        for o, v, s in zip(outs, values, out_shapes, strict=False):
            np.moveaxis(o, min(dim, s.rank - 1), 0)[i] = v
        carries = values[len(outs) :]
    return (*outs, *carries)


@handler("mulhi")
def _mulhi(interp, op, args):
    """The high half of the double-width product of two integers (signed or unsigned as
    the element type says)."""
    shape = op.shape
    if not isinstance(shape, ArrayShape) or shape.element_type[0] not in "su":
        raise unsupported(op, "mulhi is defined on integers")
    bits = int(shape.element_type[1:])
    a, b = (np.asarray(x).astype(object) for x in args)
    wide = (a * b) >> bits  # Python integers: exact at any width
    mask = (1 << bits) - 1
    low = np.vectorize(lambda v: int(v) & mask, otypes=[object])(wide)
    return low.astype(np.uint64).astype(dtype_of(shape), casting="unsafe")


@handler("async-update")
def _async_update(interp, op, args):
    """The async value passes through unchanged: async-start already ran the computation
    (the interpreter runs one thread, so nothing is left to wait for)."""
    return args[0]


@handler("stochastic-convert")
def _stochastic_convert(interp, op, args):
    """float -> signed integer, rounding |x| up when the unsigned `random` is below the
    fraction of |x| scaled to the random type's range (XLA's StochasticConvertDecomposer,
    the only expansion XLA has: other target types are refused as XLA refuses them):
    sign restored by negation, results at or beyond the target's range clamped."""
    from hlopass.interpreter.elementwise import convert
    from hlopass.interpreter.numeric import int_bits, int_range, is_signed_int

    x, random = args
    out = dtype_of(op.shape)
    if not is_signed_int(out):
        raise unsupported(op, "XLA expands stochastic-convert to signed integers only")
    ft = np.dtype(np.float32) if x.dtype.itemsize < 4 else x.dtype  # f16's 2^16 overflows
    ax = np.abs(x.astype(ft))
    whole = np.floor(ax)
    fixed = convert((ax - whole) * ft.type(2.0 ** int_bits(random.dtype)), random.dtype)
    up = random < fixed
    n = convert(whole, out)
    n = np.where(up, n + out.type(1), n).astype(out)
    n = np.where(x.astype(ft) < 0, (-n.astype(np.int64)).astype(out), n)
    lo, hi = int_range(out)
    xf = x.astype(np.float64)
    return np.where(xf <= lo, out.type(lo), np.where(xf >= hi, out.type(hi), n)).astype(out)
