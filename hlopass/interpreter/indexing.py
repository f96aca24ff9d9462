"""gather and scatter with XLA's dimension numbers (including batching dims)."""

from __future__ import annotations

import numpy as np

from hlopass.interpreter.apply import combine_at
from hlopass.interpreter.core import handler
from hlopass.interpreter.numeric import widen
from hlopass.ir.shape import TupleShape


def _index_rows(indices: np.ndarray, ivd: int) -> np.ndarray:
    """Indices as (batch..., index vector), the vector dim moved last (added when absent)."""
    idx = widen(indices).astype(np.int64)
    if ivd == idx.ndim:
        return idx[..., None]
    return np.moveaxis(idx, ivd, -1)


def _batch_position(dim: int, ivd: int) -> int:
    return dim if dim < ivd else dim - 1


def _starts(idx, ivd, rank, start_map, operand_batching, indices_batching):
    """(batch..., rank) start coordinates for each batch element."""
    batch_shape = idx.shape[:-1]
    starts = np.zeros(batch_shape + (rank,), np.int64)
    for k, d in enumerate(start_map):
        starts[..., d] = idx[..., k]
    for od, idim in zip(operand_batching, indices_batching, strict=False):
        pos = _batch_position(idim, ivd)
        shape = [1] * len(batch_shape)
        shape[pos] = batch_shape[pos]
        starts[..., od] = np.arange(batch_shape[pos]).reshape(shape)
    return starts


@handler("gather")
def _gather(interp, op, args):
    operand, indices = args
    offset_dims = list(op.attr("offset_dims"))
    collapsed = set(op.attr("collapsed_slice_dims"))
    obatch = list(op.attr("operand_batching_dims") or ())
    ibatch = list(op.attr("start_indices_batching_dims") or ())
    start_map = list(op.attr("start_index_map"))
    ivd = op.attr("index_vector_dim")
    sizes = list(op.attr("slice_sizes"))
    rank = operand.ndim
    idx = _index_rows(indices, ivd)
    starts = _starts(idx, ivd, rank, start_map, obatch, ibatch)
    limits = np.array([operand.shape[d] - sizes[d] for d in range(rank)])
    starts = np.clip(starts, 0, limits)
    out_rank = len(op.shape.dims)
    offset_operand_dims = [d for d in range(rank) if d not in collapsed and d not in obatch]
    coords = []
    for d in range(rank):
        c = np.expand_dims(starts[..., d], offset_dims) if offset_dims else starts[..., d]
        if d in offset_operand_dims:
            j = offset_operand_dims.index(d)
            shape = [1] * out_rank
            shape[offset_dims[j]] = sizes[d]
            c = c + np.arange(sizes[d]).reshape(shape)
        coords.append(c)
    return np.broadcast_to(operand[tuple(coords)], op.shape.dims).copy()


@handler("scatter")
def _scatter(interp, op, args):
    n = (len(args) - 1) // 2
    operands, indices, updates = args[:n], args[n], args[n + 1 :]
    window_dims = list(op.attr("update_window_dims"))
    inserted = set(op.attr("inserted_window_dims"))
    obatch = list(op.attr("input_batching_dims") or ())
    ibatch = list(op.attr("scatter_indices_batching_dims") or ())
    start_map = list(op.attr("scatter_dims_to_operand_dims"))
    ivd = op.attr("index_vector_dim")
    operand = operands[0]
    rank = operand.ndim
    upd = updates[0]
    idx = _index_rows(indices, ivd)
    starts = _starts(idx, ivd, rank, start_map, obatch, ibatch)  # (batch..., rank)
    window_operand_dims = [d for d in range(rank) if d not in inserted and d not in obatch]
    window_size = [1] * rank
    for j, d in enumerate(window_operand_dims):
        window_size[d] = upd.shape[window_dims[j]]
    # A window that does not fit entirely in the operand is skipped (XLA's rule).
    limits = np.array([operand.shape[d] - window_size[d] for d in range(rank)])
    in_bounds = np.all((starts >= 0) & (starts <= limits), axis=-1)  # (batch...)
    # Per update element: operand coordinate = start(batch part) + window offset.
    ushape = upd.shape
    coords = []
    for d in range(rank):
        s = starts[..., d]
        c = np.expand_dims(s, window_dims) if window_dims else s
        if d in window_operand_dims:
            j = window_operand_dims.index(d)
            shape = [1] * upd.ndim
            shape[window_dims[j]] = ushape[window_dims[j]]
            c = c + np.arange(ushape[window_dims[j]]).reshape(shape)
        coords.append(np.broadcast_to(c, ushape))
    ok = np.broadcast_to(
        np.expand_dims(in_bounds, window_dims) if window_dims else in_bounds, ushape
    )
    flat = np.ravel_multi_index(tuple(np.where(ok, c, 0) for c in coords), operand.shape)
    mask = ok.reshape(-1)
    flat = flat.reshape(-1)[mask]
    results = [o.copy() for o in operands]
    combine_at(interp, op.attr("to_apply"), results, flat, [u.reshape(-1)[mask] for u in updates])
    return tuple(results) if isinstance(op.shape, TupleShape) else results[0]
