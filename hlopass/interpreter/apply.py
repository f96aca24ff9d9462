"""Applying a scalar computation (reduce/scatter/sort/map combiner) to whole arrays at once."""

from __future__ import annotations

import itertools

import numpy as np

from hlopass.dialects.hlo import ComputationOp
from hlopass.interpreter.core import HANDLERS, Interpreter, Value
from hlopass.ir.shape import ArrayShape, TupleShape

_ELEMENTWISE_OK = {"parameter", "constant", "tuple", "get-tuple-element", "call", "fusion"}


def _scalar(shape) -> bool:
    if isinstance(shape, TupleShape):
        return all(_scalar(e) for e in shape.elements)
    return isinstance(shape, ArrayShape) and shape.dims == ()


def vectorizable(interp: Interpreter, comp: ComputationOp) -> bool:
    """True when every instruction is scalar and elementwise, so arrays can stand in for scalars."""
    cache = interp.__dict__.setdefault("_vectorizable", {})
    key = id(comp)
    if key not in cache:
        cache[key] = False  # recursion guard
        ok = True
        for op in interp.schedule(comp)[0]:
            spec = op.spec
            if not _scalar(op.shape):
                ok = False
            elif op.opcode in ("call", "fusion"):
                for callee in op.callees():
                    ok = ok and vectorizable(interp, interp.comp(callee))
            elif op.opcode not in _ELEMENTWISE_OK and not (
                "elementwise" in spec.traits and op.opcode in HANDLERS
            ):
                ok = False
            if not ok:
                break
        cache[key] = ok
    return cache[key]


def apply_computation(
    interp: Interpreter, comp: ComputationOp | str, args: list[np.ndarray]
) -> list[np.ndarray]:
    """Evaluate a scalar computation elementwise over broadcast arrays; returns its leaves."""
    if isinstance(comp, str):
        comp = interp.comp(comp)
    shape = np.broadcast_shapes(*(a.shape for a in args))
    if vectorizable(interp, comp):
        result = interp.call(comp, args)
        leaves = list(result) if isinstance(result, tuple) else [result]
        return [np.broadcast_to(np.asarray(v), shape) for v in leaves]
    root_shape = comp.root.shape
    n_out = len(root_shape.elements) if isinstance(root_shape, TupleShape) else 1
    outs: list[np.ndarray | None] = [None] * n_out
    bargs = [np.broadcast_to(a, shape) for a in args]
    for idx in itertools.product(*(range(n) for n in shape)):
        r: Value = interp.call(comp, [np.asarray(a[idx]) for a in bargs])
        leaves = list(r) if isinstance(r, tuple) else [r]
        for i, leaf in enumerate(leaves):
            out = outs[i]
            if out is None:
                out = outs[i] = np.empty(shape, leaf.dtype)
            out[idx] = leaf
    if outs[0] is None:  # empty shape
        dts = [np.asarray(a).dtype for a in args]
        return [np.empty(shape, dts[i % len(dts)]) for i in range(n_out)]
    return outs  # type: ignore[return-value]


_BINOPS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum,
           "minimum": np.minimum, "and": np.logical_and, "or": np.logical_or}  # fmt: skip


def simple_binop(interp: Interpreter, comp: ComputationOp | str) -> str | None:
    """The opcode when `comp` is `ROOT op(p0, p1)` of two scalar parameters."""
    if isinstance(comp, str):
        comp = interp.comp(comp)
    root = comp.root
    params = comp.parameters()
    if len(params) != 2 or root.opcode not in ("add", "multiply", "maximum", "minimum", "and",
                                                "or", "xor"):  # fmt: skip
        return None
    owners = {id(v.owner) for v in root.operands}
    if owners == {id(params[0]), id(params[1])} and _scalar(root.shape):
        return root.opcode
    return None


def binop_ufunc(opcode: str, dtype: np.dtype):
    if dtype.kind == "b":
        return {"add": np.logical_or, "multiply": np.logical_and, "maximum": np.logical_or,
                "minimum": np.logical_and, "and": np.logical_and, "or": np.logical_or,
                "xor": np.logical_xor}[opcode]  # fmt: skip
    return {"add": np.add, "multiply": np.multiply, "maximum": np.maximum,
            "minimum": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
            "xor": np.bitwise_xor}[opcode]  # fmt: skip


def combine_at(
    interp, comp, targets: list[np.ndarray], index: np.ndarray, updates: list[np.ndarray]
) -> None:
    """targets[i].flat[index[j]] = comp(targets..., updates...[j]) for each j in order (in place)."""
    from hlopass.interpreter.numeric import as_dtype, widen

    if index.size == 0:
        return
    binop = simple_binop(interp, comp) if len(targets) == 1 else None
    if binop is not None:
        t = targets[0]
        w = widen(t.reshape(-1))
        binop_ufunc(binop, w.dtype).at(w, index, widen(updates[0]).astype(w.dtype))
        t.reshape(-1)[...] = as_dtype(w, t.dtype)
        return
    order = np.argsort(index, kind="stable")
    sorted_idx = index[order]
    first = np.r_[0, np.flatnonzero(sorted_idx[1:] != sorted_idx[:-1]) + 1]
    group_start = np.repeat(first, np.diff(np.r_[first, len(sorted_idx)]))
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order)) - group_start
    flats = [t.reshape(-1) for t in targets]
    for r in range(int(rank.max()) + 1):
        sel = np.flatnonzero(rank == r)
        tgt = index[sel]
        vals = apply_computation(interp, comp, [f[tgt] for f in flats] + [u[sel] for u in updates])
        for f, v in zip(flats, vals, strict=False):
            f[tgt] = v
