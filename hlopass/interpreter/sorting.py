"""sort (any comparator, stable), topk and the TopK custom-call."""

from __future__ import annotations

import functools

import numpy as np

from hlopass.interpreter.apply import apply_computation
from hlopass.interpreter.core import handler
from hlopass.interpreter.numeric import is_float_dtype, total_order_key, widen
from hlopass.shape import TupleShape


def _simple_comparator(interp, comp):
    """(operand index, descending, total_order) when `comp` is one compare of p[2k], p[2k+1]."""
    comp = interp.comp(comp)
    root = comp.root
    if root.opcode != "compare" or root.attr("direction") not in ("LT", "GT"):
        return None
    a, b = (v.owner for v in root.operands)
    if a.opcode != "parameter" or b.opcode != "parameter":
        return None
    na, nb = a.attr("number"), b.attr("number")
    if na % 2 or nb != na + 1:
        return None
    return na // 2, root.attr("direction") == "GT", root.attr("type") == "TOTALORDER"


def _sort_key(x: np.ndarray, descending: bool, total: bool) -> np.ndarray:
    if is_float_dtype(x.dtype):
        if total:
            k = total_order_key(x)
            return -k - 1 if descending else k
        w = widen(x).astype(np.float64)
        # Partial order: NaNs compare false both ways; XLA's stable sort leaves them unspecified.
        return -w if descending else w
    w = widen(x)
    if descending:
        return ~w if w.dtype.kind in "iu" else np.logical_not(w)
    return w


@handler("sort")
def _sort(interp, op, args):
    dim = op.attr("dimensions")[0]
    comp = op.attr("to_apply")
    moved = [np.moveaxis(a, dim, -1) for a in args]
    simple = _simple_comparator(interp, comp)
    if simple is not None:
        k, desc, total = simple
        perm = np.argsort(_sort_key(moved[k], desc, total), axis=-1, kind="stable")
    else:
        perm = _generic_perm(interp, comp, moved)
    out = [np.moveaxis(np.take_along_axis(m, perm, axis=-1), -1, dim).copy() for m in moved]
    return tuple(out) if isinstance(op.shape, TupleShape) else out[0]


def _less(interp, comp, a_vals, b_vals) -> np.ndarray:
    args = []
    for a, b in zip(a_vals, b_vals, strict=False):
        args += [a, b]
    (r,) = apply_computation(interp, comp, args)
    return np.asarray(r).astype(bool)


def _generic_perm(interp, comp, moved):
    """Stable sort by rank counting: rank(i) = #{j: j<i} + #{j < i: neither j<i nor i<j}."""
    n = moved[0].shape[-1]
    rows = moved[0].reshape(-1, n).shape[0]
    flat = [m.reshape(rows, n) for m in moved]
    perm = np.empty((rows, n), np.int64)
    if n * n * rows <= 1 << 22:
        chunk_rows = range(0, rows, max(1, (1 << 22) // max(1, n * n)))
    else:
        chunk_rows = None
    if n <= 2048 and chunk_rows is not None:
        step = chunk_rows.step
        pos = np.arange(n)
        for r0 in chunk_rows:
            a = [f[r0 : r0 + step, :, None] for f in flat]  # element j (rows, n, 1)
            b = [f[r0 : r0 + step, None, :] for f in flat]  # element i (rows, 1, n)
            j_lt_i = _less(interp, comp, a, b)  # [r, j, i]
            i_lt_j = np.swapaxes(j_lt_i, 1, 2)
            tie_before = ~j_lt_i & ~i_lt_j & (pos[:, None] < pos[None, :])
            rank = (j_lt_i | tie_before).sum(axis=1)  # (r, i)
            rr = np.arange(rank.shape[0])[:, None]
            perm[r0 + rr, rank] = pos[None, :]
        return perm.reshape(moved[0].shape)
    for r in range(rows):

        def cmp(i, j, r=r):
            if _less(interp, comp, [f[r, i] for f in flat], [f[r, j] for f in flat]):
                return -1
            if _less(interp, comp, [f[r, j] for f in flat], [f[r, i] for f in flat]):
                return 1
            return 0

        perm[r] = sorted(range(n), key=functools.cmp_to_key(cmp))
    return perm.reshape(moved[0].shape)


def _topk(x: np.ndarray, k: int, largest: bool = True):
    key = total_order_key(x) if is_float_dtype(x.dtype) else widen(x)
    if largest:
        key = -key - 1 if key.dtype.kind == "i" else ~key
    perm = np.argsort(key, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, perm, axis=-1), perm.astype(np.int32)


@handler("topk")
def _topk_op(interp, op, args):
    largest = op.attr("largest")
    return _topk(args[0], op.attr("k"), True if largest is None else largest)


def custom_call_topk(interp, op, args):
    values_shape = op.shape.elements[0]
    return _topk(args[0], values_shape.dims[-1], True)
