"""Data movement: constant, iota, broadcast, reshape, transpose, bitcast, slices, pad, concat."""

from __future__ import annotations

import numpy as np

from hlopass.interpreter.core import dtype_of, handler, unsupported
from hlopass.interpreter.numeric import widen


@handler("constant")
def _constant(interp, op, args):
    value = op.attr("value")
    lit = value.literal if hasattr(value, "literal") else value
    if lit.elided:
        raise unsupported(op, "the constant's value is elided ({...})")
    return _literal_value(lit)


def _literal_value(lit):
    if lit.elements is not None:
        return tuple(_literal_value(e) for e in lit.elements)
    return lit.array


@handler("iota")
def _iota(interp, op, args):
    dims = op.shape.dims
    d = op.attr("iota_dimension")
    shape = [1] * len(dims)
    shape[d] = dims[d]
    ramp = np.arange(dims[d]).reshape(shape)
    return np.broadcast_to(ramp, dims).astype(dtype_of(op.shape))


@handler("broadcast")
def _broadcast(interp, op, args):
    (x,) = args
    return broadcast_in_dim(x, op.shape.dims, op.attr("dimensions") or ())


def broadcast_in_dim(x: np.ndarray, dims, mapping) -> np.ndarray:
    mapping = list(mapping)
    order = sorted(range(len(mapping)), key=lambda i: mapping[i])
    shape = [1] * len(dims)
    for i, d in enumerate(mapping):
        shape[d] = x.shape[i]
    xt = np.transpose(x, order) if order != sorted(order) else x
    return np.broadcast_to(xt.reshape(shape), tuple(dims)).copy()


@handler("reshape")
def _reshape(interp, op, args):
    return np.reshape(args[0], op.shape.dims)


@handler("transpose")
def _transpose(interp, op, args):
    return np.ascontiguousarray(np.transpose(args[0], op.attr("dimensions")))


def _physical(x: np.ndarray, shape) -> np.ndarray:
    """The elements in memory order of `shape`'s layout."""
    major_to_minor = list(reversed(shape.minor_to_major))
    return np.transpose(x, major_to_minor).reshape(-1) if x.ndim else x.reshape(-1)


@handler("bitcast")
def _bitcast(interp, op, args):
    (x,) = args
    src = op.operands[0].type.data
    dst = op.shape
    flat = _physical(x, src)
    out = dtype_of(dst)
    if flat.dtype != out:
        flat = np.ascontiguousarray(flat).view(out)
    major_to_minor = list(reversed(dst.minor_to_major))
    phys_dims = [dst.dims[d] for d in major_to_minor]
    arr = flat.reshape(phys_dims)
    inverse = np.argsort(major_to_minor)
    return np.ascontiguousarray(np.transpose(arr, inverse)) if arr.ndim else arr


@handler("reverse")
def _reverse(interp, op, args):
    return np.flip(args[0], axis=tuple(op.attr("dimensions"))).copy()


@handler("slice")
def _slice(interp, op, args):
    index = tuple(slice(s.start, s.limit, s.stride) for s in op.attr("slice"))
    return args[0][index].copy()


def _starts(x_dims, sizes, index_values):
    starts = []
    for dim, size, v in zip(x_dims, sizes, index_values, strict=False):
        s = int(widen(np.asarray(v)).reshape(()))
        starts.append(min(max(s, 0), dim - size))
    return starts


@handler("dynamic-slice")
def _dynamic_slice(interp, op, args):
    x, *idx = args
    sizes = op.attr("dynamic_slice_sizes")
    if len(idx) == 1 and x.ndim != 1:  # old form: one index vector
        idx = list(idx[0])
    starts = _starts(x.shape, sizes, idx)
    return x[tuple(slice(s, s + n) for s, n in zip(starts, sizes, strict=False))].copy()


@handler("dynamic-update-slice")
def _dynamic_update_slice(interp, op, args):
    x, update, *idx = args
    if len(idx) == 1 and x.ndim != 1:
        idx = list(idx[0])
    starts = _starts(x.shape, update.shape, idx)
    out = x.copy()
    out[tuple(slice(s, s + n) for s, n in zip(starts, update.shape, strict=False))] = update
    return out


@handler("concatenate")
def _concatenate(interp, op, args):
    return np.concatenate(args, axis=op.attr("dimensions")[0])


@handler("pad")
def _pad(interp, op, args):
    x, value = args
    return pad(x, value, [(p.low, p.high, p.interior) for p in op.attr("padding")])


def pad(x: np.ndarray, value, config) -> np.ndarray:
    """XLA pad: low/high may be negative (crop); interior inserts between elements."""
    grown = []
    for n, (lo, hi, interior) in zip(x.shape, config, strict=False):
        core = n + max(n - 1, 0) * interior
        grown.append(max(lo, 0) + core + max(hi, 0))
    out = np.full(grown, np.asarray(value).reshape(()), dtype=x.dtype)
    place = tuple(
        slice(max(lo, 0), max(lo, 0) + n + max(n - 1, 0) * interior, interior + 1)
        for n, (lo, hi, interior) in zip(x.shape, config, strict=False)
    )
    out[place] = x
    crop = tuple(
        slice(-min(lo, 0), g + min(hi, 0)) for g, (lo, hi, _) in zip(grown, config, strict=False)
    )
    return out[crop].copy()
