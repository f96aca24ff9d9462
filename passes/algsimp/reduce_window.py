"""`algsimp` family: reduce-window.

XLA-CPU computes `init` into every window, so a trivial window yields `f(init, x)`, not `x`;
the identity patterns (`add(x, 0) -> x`, ...) then drop an init that is the identity.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.ir import attrs as A
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.shape import ArrayShape, TupleShape, is_float, is_integral
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
    callee,
    et,
    float_sum_reducer,
    is_identity_init,
    is_scalar_broadcast,
    reduce_inputs,
    reducer_opcode,
    result_shapes,
    src,
    widens_exactly,
)
from hlopass.passes.algsimp.reduce import broadcast_inits, untuple_single_input
from hlopass.rewriting import const_array, is_zero, owner, same_shape, value_shape


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
        if not _repeating_init_is_noop(op, init):
            return None
        dims = _window_with_pad(p, window)
        if dims is None:
            return None
        return self.new("reduce-window", [p.operands[0], init], op.shape,
                        {"window": A.Window(dims), "to_apply": op.attr("to_apply")},
                        like=op)  # fmt: skip


def _repeating_init_is_noop(op: HloOp, init: SSAValue) -> bool:
    """Reducing `init` into a result that already holds it changes nothing (init is the
    reducer's identity, zero for add, or the reducer is max, min, and, or). XLA-CPU skips a
    window's padding (it reduces init once), while a pad's elements are reduced one by one:
    folding a pad of init into the window's padding drops those; XLA folds whatever the
    reducer, which for `add` with init 5 changes the sums."""
    kind = reducer_opcode(op)
    if kind in ("maximum", "minimum", "and", "or"):
        return True
    if kind == "add" and is_zero(init):
        return True  # (once +0.0 is in a sum, the sum is not -0.0: adding +0.0 keeps it)
    return is_identity_init(op, init)


def _window_with_pad(p: HloOp, window: Any) -> tuple | None:
    """The window dims of a reduce-window of `pad` p's operand that pad as p did (None when
    p's padding is not a window padding)."""
    pads = p.attr("padding")
    if any(d.low < 0 or d.high < 0 for d in pads):
        return None  # negative padding slices: not a window padding
    pairs = list(zip(pads, window.dims, strict=True))
    if any(d.interior for d in pads) and any(w.lhs_dilation != 1 for w in window.dims):
        return None  # an interior pad is a base dilation: XLA keeps it apart from another
    # an edge of e elements before a base dilation by k spans e * k window positions
    return tuple(
        replace(w, pad_low=w.pad_low + w.lhs_dilation * d.low,
                pad_high=w.pad_high + w.lhs_dilation * d.high,
                lhs_dilation=w.lhs_dilation * (d.interior + 1))
        for d, w in pairs
    )  # fmt: skip


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


def _through(value: SSAValue, opcodes: tuple[str, ...],
             converts: list[str] | None = None) -> SSAValue | None:  # fmt: skip
    """`value` seen through `opcodes` (exact converts, same-type bitcasts only; with
    `converts`, also float-to-float narrowing converts, whose element types it collects,
    outermost first, for the caller to round the splat through)."""
    v = value
    while (o := owner(v)) is not None and o.OPCODE in opcodes:
        narrowing = o.OPCODE == "convert" and not widens_exactly(et(o.operands[0]), et(o))
        floats = is_float(et(o.operands[0])) and is_float(et(o))
        if narrowing and (converts is None or not floats):
            return None  # (a narrowing convert rounds: the caller must round c through it)
        if o.OPCODE == "bitcast" and et(o.operands[0]) != et(o):
            return None
        if o.OPCODE == "convert" and converts is not None:
            converts.append(et(o))
        v = o.operands[0]
    return v


def _splat_through_chain(value: SSAValue) -> np.ndarray | None:
    """The scalar constant that `value` splats: a `broadcast` of a scalar constant seen
    through reshapes, bitcasts, slices, copies and converts between float types (XLA's
    chain; the constant rounded through each convert in turn), the constant itself through
    converts, reshapes and bitcasts."""
    converts: list[str] = []
    v = _through(value, _SPLAT_CHAIN, converts)
    b = is_scalar_broadcast(v) if v is not None else None
    inner: list[str] = []
    c = _through(b.operands[0], ("convert", "reshape", "bitcast"), inner) if b else None
    arr = const_array(c) if c is not None else None
    if arr is None or arr.size != 1:
        return None
    arr = arr.reshape(())
    for t in reversed(inner + converts):  # innermost first, each rounding as XLA's does
        with np.errstate(over="ignore"):
            arr = arr.astype(numpy_dtype(t))
    return arr


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


class ReduceWindowTrivialPadded(Simplification):
    """`reduce-window(x, init)`, 1x..x1 window with edge padding -> `pad(f(x,
    broadcast(init)), init)` for reducer f of add, minimum, maximum (stride 1, no
    dilation or reversal; the padding holds init, each other element f(x, init))."""

    OPCODES = ("reduce-window",)

    def rewrite(self, op: HloOp):
        window = op.attr("window")
        if len(op.operands) != 2 or window is None:
            return None
        dims = window.dims
        if any((w.size, w.stride, w.lhs_dilation, w.rhs_dilation, w.reversal) != (1, 1, 1, 1, False)
               or w.pad_low < 0 or w.pad_high < 0 for w in dims):  # fmt: skip
            return None
        if all(w.pad_low == 0 and w.pad_high == 0 for w in dims):
            return None  # (no padding: ReduceWindowTrivial)
        kind = reducer_opcode(op)
        x, init = op.operands
        sx, shape = array(value_shape(x)), array(op.shape)
        if kind not in ("add", "minimum", "maximum") or sx is None or shape is None:
            return None
        sx = sx.with_element_type(shape.element_type)
        b = self.new("broadcast", [init], sx, {"dimensions": ()}, like=op)
        f = self.new(kind, [x, b.result], sx, like=op)
        pads = tuple(A.PadDim(w.pad_low, w.pad_high, 0) for w in dims)
        return self.new("pad", [f.result, init], shape, {"padding": pads}, like=op)


def _widens_to(v: SSAValue, init: SSAValue) -> bool:
    """`v` and `init` are scalar constants and `v` converted to init's type is `init` (bit
    for bit; XLA compares the pad value converted to the init's shape)."""
    cv, ci = const_array(v), const_array(init)
    if cv is None or ci is None or cv.size != 1 or ci.size != 1:
        return False
    return cv.astype(ci.dtype).tobytes() == ci.tobytes()


class ReduceWindowOfConvertedPad(Simplification):
    """`reduce-window(convert(pad(x, v)), init) -> reduce-window(convert(x), init)` with the
    pad in the window, when v is init and the convert widens exactly (so the padding's
    converted v is init); with one non-trivial window dim, only when the padding is at
    least a tenth of the scanned length (XLA leaves a small pad to its scan rewriter)."""

    OPCODES = ("reduce-window",)
    OPERAND_FROM = frozenset({"convert"})

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        c, init = src(op.operands[0], "convert"), op.operands[1]
        p = None if c is None else src(c.operands[0], "pad")
        window = op.attr("window")
        if c is None or p is None or window is None:
            return None
        x = p.operands[0]
        sx, sc = array(value_shape(x)), array(c.shape)
        if sx is None or sc is None or not widens_exactly(sx.element_type, sc.element_type):
            return None
        if not _same_scalar(p.operands[1], init) and not _widens_to(p.operands[1], init):
            return None
        if not _repeating_init_is_noop(op, init):
            return None
        wide = [k for k, w in enumerate(window.dims) if w.size != 1]
        if len(wide) == 1:
            (k,) = wide
            d = p.attr("padding")[k]
            if (d.low + d.high) / sc.dims[k] < 0.1:
                return None
        dims = _window_with_pad(p, window)
        if dims is None:
            return None
        cx = self.new("convert", [x], sx.with_dims(sx.dims, sc.element_type))
        return self.new("reduce-window", [cx.result, init], op.shape,
                        {"window": A.Window(dims), "to_apply": op.attr("to_apply")},
                        like=op)  # fmt: skip


class ReduceWindowEffectiveBroadcast(Simplification):
    """`reduce-window(x, init) -> broadcast(reshape(x))` when every window holds one
    element of x and padding only (no stride or dilation, symmetric padding on dims where x has
    size 1 and covering the element, windows of size 1 elsewhere; init is the reducer's
    identity: for a float add of +0, which turns -0 into +0, it needs
    `enable-floats-are-real`; XLA's pad/reduce-window effective broadcast, after the pad is
    folded into the window)."""

    OPCODES = ("reduce-window",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        x, init = op.operands
        window, shape, sx = op.attr("window"), array(op.shape), array(value_shape(x))
        if window is None or shape is None or sx is None or sx.is_dynamic:
            return None
        if any(w.stride != 1 or w.lhs_dilation != 1 or w.rhs_dilation != 1 or w.reversal
               for w in window.dims):  # fmt: skip
            return None
        for w, n in zip(window.dims, sx.dims, strict=True):
            if w.pad_low != w.pad_high:
                return None
            if w.pad_low and (n != 1 or w.size < w.pad_low + 1):
                return None
            if n != 1 and w.size != 1:
                return None
        if not any(w.pad_low for w in window.dims):
            return None  # (no padding: a trivial window, ReduceWindowTrivial's case)
        kind = reducer_opcode(op)
        identity = is_identity_init(op, init) or (
            self.opts.floats_are_real
            and kind == "add"
            and is_float(sx.element_type)
            and is_zero(init)
        )
        if not identity or sx.element_type != shape.element_type:
            return None
        kept = [d for d, n in enumerate(sx.dims) if n != 1]
        inner = x
        if len(kept) != sx.rank:
            inner = self.new("reshape", [x], sx.with_dims(tuple(sx.dims[d] for d in kept))).result
        return self.new("broadcast", [inner], shape, {"dimensions": tuple(kept)}, like=op)


PATTERNS: tuple[type[Simplification], ...] = (
    ReduceWindowTrivial, ReduceWindowOfPad, ReduceWindowOfEmpty, ReduceWindowOfScalar,
    ReduceWindowCumSumOfBroadcast, ReduceWindowToReduce, ReduceWindowVariadicSingle,
    ReduceWindowTrivialPadded, ReduceWindowOfConvertedPad, ReduceWindowEffectiveBroadcast,
)  # fmt: skip
"""This family's rewrites, in the order they fire."""
