"""sort (any comparator; stable, or unstable in XLA-CPU's order), topk and the TopK
custom-call."""

from __future__ import annotations

import numpy as np

from hlopass.interpreter.apply import apply_computation
from hlopass.interpreter.core import handler
from hlopass.interpreter.numeric import daz, is_float_dtype, total_order_key, widen
from hlopass.interpreter.stdsort import std_sort_order
from hlopass.ir.shape import TupleShape


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
        w = daz(widen(x)).astype(np.float64)  # the comparator's compare reads denormals as 0
        # Partial order: NaNs compare false both ways; a stable sort leaves them unspecified,
        # the unstable one puts them where std::sort does (`_unstable_perm`).
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
        key = _sort_key(moved[k], desc, total)
        perm = np.argsort(key, axis=-1, kind="stable")
    else:
        perm = _generic_perm(interp, comp, moved)
        key = None
    if not op.attr("is_stable") and perm.size:
        perm = _unstable_perm(interp, comp, moved, perm, key)
    out = [np.moveaxis(np.take_along_axis(m, perm, axis=-1), -1, dim).copy() for m in moved]
    return tuple(out) if isinstance(op.shape, TupleShape) else out[0]


def _unstable_perm(interp, comp, moved, perm: np.ndarray, key: np.ndarray | None) -> np.ndarray:
    """XLA-CPU's order for `is_stable=false`: std::sort's (`stdsort`), replayed on each row
    where it can differ from the stable order, that is a row with equivalent elements (or
    NaN keys, which compare false both ways). The comparator is replayed through keys: the
    simple one's own (`_sort_key`, NaN included), a general one's rank in the stable order
    (equal ranks for neighbours neither of which is less: a strict weak order's classes)."""
    shape = perm.shape
    n = shape[-1] if shape else 1
    rows = perm.reshape(-1, n).copy()
    if key is not None:
        keys = np.asarray(key).reshape(-1, n)
        s = np.take_along_axis(keys, rows, axis=1)
        same = s[:, 1:] == s[:, :-1]
        if len(moved) == 1:  # one operand: ties of identical bits look the same either way
            b = np.take_along_axis(_bits(moved[0]).reshape(-1, n), rows, axis=1)
            same &= b[:, 1:] != b[:, :-1]
        tied = same.any(axis=1)
        if keys.dtype.kind == "f":
            tied |= np.isnan(keys).any(axis=1)
    else:
        in_order = [np.take_along_axis(np.asarray(m).reshape(-1, n), rows, 1) for m in moved]
        apart = _less(interp, comp, [v[:, :-1] for v in in_order], [v[:, 1:] for v in in_order])
        ranks = np.concatenate([np.zeros((rows.shape[0], 1), np.int64),
                                np.cumsum(apart, axis=1)], axis=1)  # fmt: skip
        keys = np.empty_like(ranks)
        np.put_along_axis(keys, rows, ranks, axis=1)
        tied = ~apart.all(axis=1)
    for r in np.flatnonzero(tied):
        k = keys[r].tolist()
        rows[r] = std_sort_order(n, lambda i, j, k=k: k[i] < k[j])
    return rows.reshape(shape)


def _bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}")) if x.dtype.itemsize in (1, 2, 4, 8) else x


def _less(interp, comp, a_vals, b_vals) -> np.ndarray:
    args = []
    for a, b in zip(a_vals, b_vals, strict=False):
        args += [a, b]
    (r,) = apply_computation(interp, comp, args)
    return np.asarray(r).astype(bool)


def _generic_perm(interp, comp, moved):
    """Stable bottom-up merge sort of every row at once with any comparator.

    Merging two sorted runs needs no sequential scan: an element of the left run lands at
    its index plus the number of right-run elements less than it, one of the right run at
    its index plus the number of left-run elements not greater than it; both counts are
    binary searches, done for all elements together. So a sort costs O(log^2 n) comparator
    evaluations on whole arrays (vectorised at any row length)."""
    shape = moved[0].shape
    n = shape[-1] if shape else 1
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if shape else 1
    flat = [np.asarray(m).reshape(rows, n) for m in moved]
    perm = np.broadcast_to(np.arange(n), (rows, n)).copy()
    idx = np.arange(n)
    width = 1
    while width < n:
        start = (idx // (2 * width)) * (2 * width)  # each element's pair of runs
        mid = np.minimum(start + width, n)
        end = np.minimum(start + 2 * width, n)
        left = idx < mid
        # the other run of each element, as [lo, hi) in the current order
        o_lo = np.where(left, mid, start)
        o_hi = np.where(left, end, mid)
        vals = [np.take_along_axis(f, perm, axis=1) for f in flat]
        lo = np.broadcast_to(o_lo, (rows, n)).copy()
        hi = np.broadcast_to(o_hi, (rows, n)).copy()
        rr = np.arange(rows)[:, None]
        while True:
            active = lo < hi
            if not active.any():
                break
            m = np.where(active, (lo + hi) // 2, np.minimum(lo, n - 1))
            other = [v[rr, m] for v in vals]
            # left element x: count right y with y < x; right element y: count left x with
            # not (y < x)
            y_lt_x = _less(interp, comp, other, vals)  # other < self
            self_lt_other = _less(interp, comp, vals, other)
            go_right = np.where(left[None, :], y_lt_x, ~self_lt_other)
            lo = np.where(active & go_right, m + 1, lo)
            hi = np.where(active & ~go_right, m, hi)
        count = lo - o_lo[None, :]
        pos = start[None, :] + (idx - np.where(left, start, mid))[None, :] + count
        new_perm = np.empty_like(perm)
        new_perm[rr, pos] = perm
        perm = new_perm
        width *= 2
    return perm.reshape(shape) if shape else perm.reshape(())


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
