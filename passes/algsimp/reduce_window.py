"""`algsimp` family: reduce-window.

XLA-CPU computes `init` into every window, so a trivial window yields `f(init, x)`, not `x`;
the identity patterns (`add(x, 0) -> x`, ...) then drop an init that is the identity.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from hlopass import attrs as A
from hlopass.dialects.hlo import HloOp
from hlopass.literal import numpy_dtype
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
    callee,
    et,
    float_sum_reducer,
    is_scalar_broadcast,
    reduce_inputs,
    reducer_opcode,
    result_shapes,
    src,
    widens_exactly,
)
from hlopass.passes.algsimp.reduce import broadcast_inits, untuple_single_input
from hlopass.rewriting import const_array, is_zero, owner, same_shape, value_shape
from hlopass.shape import ArrayShape, TupleShape, is_float, is_integral


def _trivial_window(op: HloOp) -> bool:
    window = op.attr("window")
    return window is None or all(
        (w.size, w.stride, w.pad_low, w.pad_high, w.lhs_dilation, w.rhs_dilation)
        == (1, 1, 0, 0, 1, 1)
        for w in window.dims
    )


class ReduceWindowTrivial(Simplification):
    """`reduce-window(x, init)`, 1x..x1 window -> `f(broadcast(init), x)` for reducer `f`
    (one of add, multiply, maximum, minimum, and, or; stride 1, no padding or dilation)."""

    OPCODES = ("reduce-window",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2 or not _trivial_window(op):
            return None
        x, init = op.operands
        if array(value_shape(x)) is None or array(value_shape(x)).rank == 0:  # type: ignore[union-attr]
            return None  # (a scalar: ReduceWindowOfScalar, as XLA drops init there)
        kind = reducer_opcode(op)
        shape = array(op.shape)
        if kind is None or shape is None or not same_shape(value_shape(x), shape):
            return None
        b = self.new("broadcast", [init], shape, {"dimensions": ()}, like=op)
        return self.new(kind, [b.result, x], shape, like=op)


def _same_scalar(a: SSAValue, b: SSAValue) -> bool:
    """`a` and `b` are the same value or scalar constants of the same bits."""
    if a is b:
        return True
    ca, cb = const_array(a), const_array(b)
    if ca is None or cb is None or ca.size != 1 or cb.size != 1 or ca.dtype != cb.dtype:
        return False
    return ca.tobytes() == cb.tobytes()


class ReduceWindowOfPad(Simplification):
    """`reduce-window(pad(x, init, lo_hi_interior), init) -> reduce-window(x, init)` with
    the pad's edges added to the window's padding and its interior as base dilation (both
    fill with init, as the pad did)."""

    OPCODES = ("reduce-window",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None  # (variadic reduce-window: one pad per operand, not matched)
        p, init = src(op.operands[0], "pad"), op.operands[1]
        window = op.attr("window")
        if p is None or window is None or not _same_scalar(p.operands[1], init):
            return None
        pads = p.attr("padding")
        if any(d.low < 0 or d.high < 0 for d in pads):
            return None  # negative padding slices: not a window padding
        pairs = list(zip(pads, window.dims, strict=True))
        if any(w.lhs_dilation != 1 and (d.low or d.high or d.interior) for d, w in pairs):
            return None  # window padding comes after its base dilation, the pad's before
        dims = tuple(
            replace(w, pad_low=w.pad_low + d.low, pad_high=w.pad_high + d.high,
                    lhs_dilation=w.lhs_dilation * (d.interior + 1))
            for d, w in pairs
        )  # fmt: skip
        return self.new("reduce-window", [p.operands[0], init], op.shape,
                        {"window": A.Window(dims), "to_apply": op.attr("to_apply")},
                        like=op)  # fmt: skip


class ReduceWindowOfEmpty(Simplification):
    """`reduce-window(x, init)` with a zero-element input or result -> `broadcast(init)`;
    a variadic one -> `tuple(broadcast(init0), ...)`."""

    OPCODES = ("reduce-window",)

    def rewrite(self, op: HloOp):
        xs, outs = reduce_inputs(op), result_shapes(op)
        if xs is None or outs is None:
            return None
        s = array(value_shape(xs[0]))
        if s is None or (s.num_elements != 0 and outs[0].num_elements != 0):
            return None
        return broadcast_inits(self, op, len(xs), outs)


class ReduceWindowOfScalar(Simplification):
    """`reduce-window(x, init)` of a scalar x -> `x` (XLA drops init here, and XLA-CPU's
    values follow); a variadic one whose reducer returns a tuple -> `tuple(x0, ...)`."""

    OPCODES = ("reduce-window",)

    def rewrite(self, op: HloOp):
        xs, outs = reduce_inputs(op), result_shapes(op)
        if xs is None or outs is None or any(o.rank != 0 for o in outs):
            return None
        if any(array(value_shape(x)) is None or array(value_shape(x)).rank != 0 for x in xs):  # type: ignore[union-attr]
            return None
        if not isinstance(op.shape, TupleShape):
            return xs[0]
        comp = callee(op)
        if comp is None or comp.root.OPCODE != "tuple":
            return None
        return self.new("tuple", xs, op.shape, like=op)


_SPLAT_CHAIN = ("reshape", "bitcast", "slice", "copy", "convert")
"""Ops that keep a splat a splat (XLA looks through them to the broadcast)."""


def _through(value: SSAValue, opcodes: tuple[str, ...]) -> SSAValue | None:
    """`value` seen through `opcodes` (exact converts, same-type bitcasts only)."""
    v = value
    while (o := owner(v)) is not None and o.OPCODE in opcodes:
        if o.OPCODE == "convert" and not widens_exactly(et(o.operands[0]), et(o)):
            return None  # (a narrowing convert rounds: the count times c would differ)
        if o.OPCODE == "bitcast" and et(o.operands[0]) != et(o):
            return None
        v = o.operands[0]
    return v


def _splat_through_chain(value: SSAValue) -> np.ndarray | None:
    """The scalar constant that `value` splats: a `broadcast` of a scalar constant seen
    through reshapes, bitcasts, slices, copies and exact converts (XLA's chain), the
    constant itself through converts, reshapes and bitcasts."""
    v = _through(value, _SPLAT_CHAIN)
    b = is_scalar_broadcast(v) if v is not None else None
    c = _through(b.operands[0], ("convert", "reshape", "bitcast")) if b is not None else None
    arr = const_array(c) if c is not None else None
    return arr.reshape(()) if arr is not None and arr.size == 1 else None


def _cumulative_dim(op: HloOp, x: ArrayShape) -> int | None:
    """The one dimension a cumulative-sum window runs along: window as long as x there,
    stride 1, padded low by size-1 and not high, no dilation or reversal; every other
    window dimension size 1, unpadded, without base dilation. None otherwise."""
    window = op.attr("window")
    if window is None or len(window.dims) != x.rank:
        return None
    found = None
    for i, w in enumerate(window.dims):
        if w.size > 1:
            if found is not None or w.size != x.dims[i] or w.stride != 1 or w.reversal:
                return None
            if (w.pad_low, w.pad_high, w.lhs_dilation, w.rhs_dilation) != (w.size - 1, 0, 1, 1):
                return None
            found = i
        elif w.pad_low or w.pad_high or w.lhs_dilation != 1:
            return None
    return found


def _count_times_c_is_exact(c: np.ndarray, n: int, init: np.ndarray) -> bool:
    """Every partial sum `init + c + ... + c` (k <= n terms, in any order) equals `c * k`
    in c's float type, bit for bit: each c*k is exact, and the zero signs agree."""
    if not np.isfinite(c):
        return True  # inf and nan sums are inf (or nan) as c * k is
    if c == 0:
        # +0 + -0 is +0: a -0 sum needs a -0 init and a -0 c
        return not np.signbit(c) or bool(np.signbit(init))
    k = np.arange(1, n + 1, dtype=np.float64)
    exact = c.astype(np.float64) * k  # exact in f64 for f32 and narrower c and small n
    if c.dtype == np.float64:
        from fractions import Fraction

        f = Fraction(float(c))
        return all(Fraction(float(c * np.float64(j))) == f * j for j in range(1, n + 1))
    with np.errstate(over="ignore", invalid="ignore"):  # (an overflow to inf is inexact)
        return bool(np.all(exact.astype(c.dtype).astype(np.float64) == exact))


class ReduceWindowCumSumOfBroadcast(Simplification):
    """`reduce-window(broadcast(c), 0)`, a cumulative-sum window along one dimension ->
    `broadcast(c) * convert(iota + 1)` (the k-th sum adds k copies of c; c seen through
    reshapes, slices, copies and exact converts; for floats only when every c*k is exact,
    which XLA does not check, or with `enable-floats-are-real`)."""

    OPCODES = ("reduce-window",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2 or reducer_opcode(op) != "add" or not is_zero(op.operands[1]):
            return None
        x, shape = array(value_shape(op.operands[0])), array(op.shape)
        if x is None or shape is None or x.is_dynamic or shape.element_type == "pred":
            return None
        d = _cumulative_dim(op, x)
        splat = _splat_through_chain(op.operands[0])
        if d is None or splat is None:
            return None
        t = shape.element_type
        c = splat.astype(numpy_dtype(t))
        init = const_array(op.operands[1])
        exact = self.opts.floats_are_real or (
            init is not None and _count_times_c_is_exact(c, x.dims[d], init)
        )
        if is_float(t) and not exact:
            return None
        if not is_float(t) and not is_integral(t):
            return None  # (complex: not matched)
        it = "s64" if t == "s64" else "s32"
        ishape = shape.with_element_type(it)
        iota = self.new("iota", [], ishape, {"iota_dimension": d}, like=op)
        count = self.new("add", [iota.result, self.const(1, ishape).result], ishape, like=op)
        if it != t:
            count = self.new("convert", [count.result], shape, like=op)
        cb = self.new("broadcast", [self.array_const(c, shape.with_dims(()))
                                    .result], shape, {"dimensions": ()}, like=op)  # fmt: skip
        return self.new("multiply", [cb.result, count.result], shape, like=op)


def window_reduce_dims(op: HloOp, slc: list[A.SliceDim] | None = None) -> tuple[int, ...]:
    """The dims a reduce-window `op` reduces whole (empty when it is not a reduce in
    disguise): each window dim is size 1 or spans its input dim; no stride or dilation.
    Without `slc` there is no padding and a spanning dim has output size 1; with an
    unstrided slice `slc` of `op`, each spanning dim is padded low by size-1 (not high)
    and `slc` keeps its last element, and each size-1 dim is unpadded and kept whole."""
    window, shape = op.attr("window"), array(op.shape)
    x = array(value_shape(op.operands[0]))
    if window is None or shape is None or x is None or x.rank != len(window.dims):
        return ()
    dims = []
    for i, w in enumerate(window.dims):
        if (w.stride, w.lhs_dilation, w.rhs_dilation, w.reversal) != (1, 1, 1, False):
            return ()
        s = slc[i] if slc is not None else A.SliceDim(0, shape.dims[i], 1)
        if s.stride != 1 or s.limit != shape.dims[i]:
            return ()
        pad = (w.pad_low, w.pad_high)
        if w.size == 1 and pad == (0, 0) and s.start == 0:
            continue
        whole = w.size == x.dims[i] and s.limit - s.start == 1
        want = (w.size - 1, 0) if slc is not None else (0, 0)
        if not whole or pad != want or (slc is None and shape.dims[i] != 1):
            return ()
        dims.append(i)
    return tuple(dims)


def reduce_then_reshape(s: Simplification, rw: HloOp, dims: Any, shape: Any, like: HloOp) -> Any:
    """`reshape(reduce(x, init), dims)` to `shape` for the reduce-window `rw(x, init)` whose
    windows span `dims` whole (and one element elsewhere); the new ops take `like`'s
    metadata."""
    x, init = rw.operands
    sx = array(value_shape(x))
    small = sx.with_dims(tuple(n for i, n in enumerate(sx.dims) if i not in dims))  # type: ignore[union-attr]
    r = s.new("reduce", [x, init], small,
              {"dimensions": dims, "to_apply": rw.attr("to_apply")}, like=rw)  # fmt: skip
    return s.new("reshape", [r.result], shape, like=like)


class ReduceWindowToReduce(Simplification):
    """`reduce-window(x, init) -> reshape(reduce(x, init))` when each window spans a whole
    dimension or one element (reducing the spanned dims; no stride, padding or dilation;
    XLA's `enable_window_reduce_to_reduce_replacement`; a float add or multiply reducer
    sums in another order, so it needs `enable-floats-are-real`)."""

    OPCODES = ("reduce-window",)
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2 or reducer_opcode(op) is None:
            return None  # (an unknown reducer may depend on the order of its terms)
        if not self.opts.floats_are_real and float_sum_reducer(op):
            return None
        dims = window_reduce_dims(op)
        shape = array(op.shape)
        if not dims or shape is None:
            return None
        return reduce_then_reshape(self, op, dims, shape, op)


class ReduceWindowVariadicSingle(Simplification):
    """`reduce-window((x), (init)) -> tuple(reduce-window(x, init))` for one input whose
    reducer returns a one-element tuple (a copy of the reducer without its tuple)."""

    OPCODES = ("reduce-window",)

    def rewrite(self, op: HloOp):
        return untuple_single_input(self, op, "window")
