"""`algsimp` family: reduce."""

from __future__ import annotations

from typing import Any

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape, TupleShape, is_float
from hlopass.ir.shape import array as shape_array
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.factors import unmodified_dims
from hlopass.passes.algsimp.helpers import (
    array,
    callee,
    et,
    float_sum_reducer,
    highest,
    is_identity_init,
    is_scalar_broadcast,
    lowest,
    reduce_inputs,
    reducer_opcode,
    result_shapes,
    src,
    untupled_reducer,
)
from hlopass.rewriting import (
    const_array,
    is_zero,
    owner,
    value_shape,
)


def _reduce_of(op: HloOp, opcode: str) -> tuple[HloOp, str | None, ArrayShape] | None:
    """(the `opcode` instruction a one-input reduce reads, its reducer's opcode or None,
    the result's shape) when the result is an array, else None. The operand is checked
    before the reducer is read: most reduces read no such operand."""
    if len(op.operands) != 2:
        return None
    inner = src(op.operands[0], opcode)
    if inner is None:
        return None
    shape = array(op.shape)
    if shape is None:
        return None
    return inner, reducer_opcode(op), shape


class ReduceTrivial(Simplification):
    """`reduce(x, init)` removing no elements -> `reshape(x)`; a variadic
    `reduce(x0.., init0..)` -> `tuple(reshape(x0), ...)`. XLA assumes `init` is the
    reducer's identity here, and XLA-CPU computes `x` for any init (its algsimp drops it):
    unlike reduce-window's, this rewrite keeps XLA-CPU's values."""

    OPCODES = ("reduce",)
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        xs, outs = reduce_inputs(op), result_shapes(op)
        if xs is None or outs is None:
            return None
        s = array(value_shape(xs[0]))
        if s is None or s.is_dynamic or s.num_elements != outs[0].num_elements:
            return None
        if s.num_elements == 0:
            return None
        parts = [
            x
            if array(value_shape(x)).dims == o.dims  # type: ignore[union-attr]
            else self.new("reshape", [x], o, like=op).result
            for x, o in zip(xs, outs, strict=True)
        ]
        if not isinstance(op.shape, TupleShape):
            return parts[0]
        return self.new("tuple", parts, op.shape, like=op)


class ReduceOfEmpty(Simplification):
    """`reduce(x, init)` of a zero-element x -> `broadcast(init)`; a variadic
    `reduce(x0.., init0..)` -> `tuple(broadcast(init0), ...)`."""

    OPCODES = ("reduce",)

    def rewrite(self, op: HloOp):
        xs, outs = reduce_inputs(op), result_shapes(op)
        if xs is None or outs is None:
            return None
        s = array(value_shape(xs[0]))
        if s is None or s.num_elements != 0 or outs[0].num_elements == 0:
            return None
        return broadcast_inits(self, op, len(xs), outs)


def broadcast_inits(s: Simplification, op: HloOp, n_inputs: int, outs: list[Any]) -> Any:
    """`op`'s result when nothing is reduced into it (zero-element input or result): each
    init value broadcast to its output shape, in a tuple for a variadic op."""
    parts = [
        s.new("broadcast", [i], o, {"dimensions": ()}, like=op).result
        for i, o in zip(op.operands[n_inputs:], outs, strict=True)
    ]
    if not isinstance(op.shape, TupleShape):
        return parts[0]
    return s.new("tuple", parts, op.shape, like=op)


_IDEMPOTENT = ("maximum", "minimum", "and", "or")


class ReduceOfScalarBroadcast(Simplification):
    """`reduce(broadcast(s), init) -> broadcast(f(init, s))` for an idempotent reducer f
    (maximum, minimum, and, or) over a non-empty set of elements."""

    OPCODES = ("reduce",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        b = is_scalar_broadcast(op.operands[0])
        if b is None:  # the cheap guard first: most reduces read no broadcast
            return None
        s, shape = array(value_shape(op.operands[0])), array(op.shape)
        kind = reducer_opcode(op)
        if s is None or shape is None or kind not in _IDEMPOTENT:
            return None
        if s.num_elements == 0 or shape.num_elements == 0:
            return None
        init = op.operands[1]
        f = self.new(kind, [init, b.operands[0]], value_shape(init), like=op)  # type: ignore[arg-type]
        if shape.rank == 0:
            return f  # (a scalar result needs no broadcast: XLA's one sweep leaves none)
        return self.new("broadcast", [f.result], shape, {"dimensions": ()}, like=op)


class ReduceOfConcatenate(Simplification):
    """`reduce(concatenate(a, b, ...), init)` over dims including the concatenated one ->
    `f(reduce(a, init), reduce(b, init), ...)` (reducer f one of add, multiply, maximum,
    minimum, and, or with `init` its identity; for float add/multiply the order of the
    sum changes, so those need `enable-floats-are-real`)."""

    OPCODES = ("reduce",)
    OPERAND_FROM = frozenset({"concatenate"})

    def rewrite(self, op: HloOp):
        found = _reduce_of(op, "concatenate")
        if found is None:
            return None
        cat, kind, shape = found
        if kind is None or len(cat.operands) < 2:
            return None
        dims = tuple(op.attr("dimensions") or ())
        float_sum = kind in ("add", "multiply") and is_float(shape.element_type)
        if float_sum and not self.opts.floats_are_real:
            return None
        # (with floats-are-real a zero of either sign is the sum's identity, as XLA takes it)
        real_zero = float_sum and kind == "add" and is_zero(op.operands[1])
        if cat.attr("dimensions")[0] not in dims:
            return None
        if not (is_identity_init(op, op.operands[1]) or real_zero):
            return None
        parts = [
            self.new("reduce", [v, op.operands[1]], shape,
                     {"dimensions": dims, "to_apply": op.attr("to_apply")}, like=op).result
            for v in cat.operands
        ]  # fmt: skip
        acc = parts[0]
        for p in parts[1:]:
            acc = self.new(kind, [acc, p], shape, like=op).result
        return acc


class ReduceOfBroadcastIdempotent(Simplification):
    """`reduce(broadcast(x, dims), init)` over exactly the dims the broadcast added ->
    `f(broadcast(init), x)` for an idempotent reducer f (maximum, minimum, and, or), at
    least one element per reduced group, broadcast dims in order."""

    OPCODES = ("reduce",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        found = _reduce_of(op, "broadcast")
        if found is None:
            return None
        b, kind, shape = found
        if kind not in _IDEMPOTENT:
            return None
        x = b.operands[0]
        sx, sb = array(value_shape(x)), array(value_shape(op.operands[0]))
        if sx is None or sb is None or sx.rank == 0 or sb.num_elements == 0:
            return None  # (a scalar x: ReduceOfScalarBroadcast)
        bdims = tuple(b.attr("dimensions") or ())
        added = tuple(d for d in range(sb.rank) if d not in bdims)
        if tuple(sorted(op.attr("dimensions") or ())) != added or list(bdims) != sorted(bdims):
            return None
        if sx.dims != shape.dims or sx.element_type != shape.element_type:
            return None
        init = self.new("broadcast", [op.operands[1]], shape, {"dimensions": ()}, like=op)
        return self.new(kind, [init.result, x], shape, like=op)


class ReduceOfBatchDot(Simplification):
    """`reduce(dot(a, b), 0, add) over batch dims -> dot(a, b)` with those batch dims
    contracted instead (single-use dot of plain precision; the sum's order changes, so for
    floats it needs `enable-floats-are-real`)."""

    OPCODES = ("reduce",)
    OPERAND_FROM = frozenset({"dot"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        from hlopass.passes.algsimp.dot import plain_precision

        if len(op.operands) != 2 or self.opts.is_layout_sensitive:
            return None  # (dot rewrites do not run when layouts are fixed)
        if not self.opts.supports_non_canonical_dots or not self.opts.enable_dot_strength_reduction:
            return None  # (the new dot contracts batch dims: a non-canonical dot)
        d, init = src(op.operands[0], "dot"), op.operands[1]
        if d is None or not op.operands[0].has_one_use() or not plain_precision(d):
            return None
        shape = array(op.shape)
        if shape is None or shape.element_type in ("pred", "c64", "c128") or d.attr("sparsity"):
            return None
        if reducer_opcode(op) != "add":
            return None
        if not is_identity_init(op, init) and not (is_float(shape.element_type) and is_zero(init)):
            return None  # (+0 is not add's float identity, but this runs with fast math only)
        lb, rb = list(d.attr("lhs_batch_dims") or ()), list(d.attr("rhs_batch_dims") or ())
        dims = sorted(op.attr("dimensions") or ())
        if not dims or any(k >= len(lb) for k in dims):
            return None  # some reduced dimension is not a batch dimension
        attrs = {
            "lhs_batch_dims": tuple(x for k, x in enumerate(lb) if k not in dims),
            "rhs_batch_dims": tuple(x for k, x in enumerate(rb) if k not in dims),
            "lhs_contracting_dims": tuple(d.attr("lhs_contracting_dims") or ())
            + tuple(lb[k] for k in dims),
            "rhs_contracting_dims": tuple(d.attr("rhs_contracting_dims") or ())
            + tuple(rb[k] for k in dims),
        }
        if d.attr("operand_precision") is not None:
            attrs["operand_precision"] = d.attr("operand_precision")
        return self.new("dot", list(d.operands), shape, attrs, like=d)


# --- arg-max / arg-min: variadic reduce of (values, iota) with XLA's comparator ----------


def _param(v: SSAValue) -> int | None:
    """The parameter number of `v` when a parameter defines it."""
    o = owner(v)
    return o.attr("number", 0) if o is not None and o.OPCODE == "parameter" else None


def _compare(v: SSAValue, a: int, b: int, direction: str) -> bool:
    """`v` is `compare(param a, param b), direction=direction` (operands in that order)."""
    o = owner(v)
    if o is None or o.OPCODE != "compare" or o.attr("direction") != direction:
        return False
    return [_param(x) for x in o.operands] == [a, b]


def _binary(v: SSAValue, opcode: str, left, right, any_order: bool = True) -> bool:
    """`v` is `opcode(l, r)` with `left(l)` and `right(r)` (or swapped, when `any_order`)."""
    o = owner(v)
    if o is None or opcode != o.OPCODE or len(o.operands) != 2:
        return False
    x, y = o.operands
    return (left(x) and right(y)) or (any_order and left(y) and right(x))


def _select_of(v: SSAValue, pred, a: int, b: int) -> bool:
    """`v` is `select(p, param a, param b)` with `pred(p)`."""
    o = owner(v)
    if o is None or o.OPCODE != "select":
        return False
    return pred(o.operands[0]) and [_param(x) for x in o.operands[1:]] == [a, b]


def is_arg_min_max_reducer(op: HloOp, is_max: bool) -> bool:
    """`op`'s reducer is XLA's arg-max (or arg-min) comparator over (value, index) pairs:
    take the greater (lesser) value or a nan, and on equal values the lower index."""
    comp = callee(op)
    if comp is None or len(comp.parameters()) != 4:
        return False
    root = comp.root
    if root.OPCODE != "tuple" or len(root.operands) != 2:
        return False
    d = "GT" if is_max else "LT"

    def value_pred(u: SSAValue) -> bool:
        return _binary(u, "or", lambda w: _compare(w, 0, 2, d), lambda w: _compare(w, 0, 0, "NE"))

    def tie(u: SSAValue) -> bool:
        return _binary(u, "and", lambda w: _compare(w, 0, 2, "EQ"),
                       lambda w: _compare(w, 1, 3, "LT"), any_order=False)  # fmt: skip

    return _select_of(root.operands[0], value_pred, 0, 2) and _select_of(
        root.operands[1], lambda u: _binary(u, "or", value_pred, tie), 1, 3
    )


def _is_scalar_const(v: SSAValue, want) -> bool:
    arr = const_array(v)
    if arr is None or arr.size != 1 or want is None:
        return False
    return bool(arr.reshape(-1)[0] == want)


class ReduceArgMinMaxOfConstantBroadcast(Simplification):
    """`reduce(broadcast(c), iota, init, 0)` with the arg-max (arg-min) comparator ->
    `tuple(broadcast(c), broadcast(0))`: every value is c, so the first index wins
    (XLA's guards: init the type's lowest (highest) value and index 0, c a scalar
    constant, the iota's dimension among the reduced ones, at least one element)."""

    OPCODES = ("reduce",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        outs = result_shapes(op)
        if outs is None or len(op.operands) != 4 or len(outs) != 2:
            return None
        if self.opts.is_layout_sensitive:
            return None  # (as XLA: its reduce rewrites from here on skip fixed layouts)
        values, idx, init, idx_init = op.operands
        b, iota = is_scalar_broadcast(values), src(idx, "iota")
        if b is None or iota is None or const_array(b.operands[0]) is None:
            return None
        sv = array(value_shape(values))
        if sv is None or sv.num_elements == 0 or outs[0].num_elements == 0:
            return None
        if iota.attr("iota_dimension") not in tuple(op.attr("dimensions") or ()):
            return None
        t = outs[0].element_type
        is_max = _is_scalar_const(init, lowest(t))
        if not (is_max or _is_scalar_const(init, highest(t))) or not _is_scalar_const(idx_init, 0):
            return None
        if not is_arg_min_max_reducer(op, is_max):
            return None
        v = self.new("broadcast", [b.operands[0]], outs[0], {"dimensions": ()}, like=op)
        i = self.const(0, outs[1])
        return self.new("tuple", [v.result, i.result], op.shape, like=op)


class ReduceVariadicSingle(Simplification):
    """`reduce((x), (init)) -> tuple(reduce(x, init))` for one input whose reducer
    returns a one-element tuple (a copy of the reducer without its tuple)."""

    OPCODES = ("reduce",)

    def rewrite(self, op: HloOp):
        return untuple_single_input(self, op, "dimensions")


def untuple_single_input(s: Simplification, op: HloOp, window_attr: str) -> HloOp | None:
    """The one-input variadic `op` (reduce or reduce-window) as its plain form, with a copy
    of its reducer that returns the value instead of a one-element tuple, re-tupled; None
    where `op` is not of that form. `window_attr` is the attribute (besides the reducer)
    that says what is reduced: `dimensions` or `window`."""
    outs = result_shapes(op)
    if outs is None or len(outs) != 1 or not isinstance(op.shape, TupleShape):
        return None
    comp = callee(op)
    if comp is None or comp.root.OPCODE != "tuple" or len(comp.root.operands) != 1:
        return None
    name = untupled_reducer(s.ctx, op)
    if name is None:
        return None
    what = op.attr(window_attr)
    attrs = {window_attr: tuple(what or ()) if window_attr == "dimensions" else what,
             "to_apply": name}  # fmt: skip
    r = s.new(op.OPCODE, list(op.operands), outs[0], attrs, like=op)
    return s.new("tuple", [r.result], op.shape, like=op)


class ReduceOfBroadcastCommute(Simplification):
    """`reduce(broadcast(x, bdims), init)` over dims all mapped from x ->
    `broadcast(reduce(x, init), dims')` (the replicas are not reduced again; broadcast dims
    in order, or all of x reduced; a reducer of known kind; a float add or multiply regroups its terms, so it
    needs `enable-floats-are-real`)."""

    OPCODES = ("reduce",)
    OPERAND_FROM = frozenset({"broadcast"})
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        found = _reduce_of(op, "broadcast")
        if found is None:
            return None
        b, kind, shape = found
        if kind is None:
            return None
        if float_sum_reducer(op) and not self.opts.floats_are_real:
            return None
        bdims: tuple[int, ...] = tuple(b.attr("dimensions") or ())
        dims: tuple[int, ...] = tuple(op.attr("dimensions") or ())
        if not dims or any(d not in bdims for d in dims):
            return None
        if list(bdims) != sorted(bdims) and set(dims) != set(bdims):
            return None  # (unsorted: only when all of x is reduced, so no order survives)
        x = b.operands[0]
        sx = array(value_shape(x))
        if sx is None or sx.is_dynamic:
            return None
        xdims = tuple(sorted(bdims.index(d) for d in dims))
        small = sx.with_dims(tuple(n for i, n in enumerate(sx.dims) if i not in xdims))
        r = self.new("reduce", [x, op.operands[1]], small,
                     {"dimensions": xdims, "to_apply": op.attr("to_apply")}, like=op)  # fmt: skip
        kept = [bd for bd in bdims if bd not in dims]
        out_dims = tuple(bd - sum(1 for d in dims if d < bd) for bd in kept)
        return self.new("broadcast", [r.result], shape, {"dimensions": out_dims}, like=op)


class ReduceAddOfBroadcast(Simplification):
    """`reduce(broadcast(x), init, add)` over only dims the broadcast added ->
    `broadcast(init + x * n)` (n elements per sum; broadcast dims in order; for floats the
    product rounds once where the sum rounds n times: it needs `enable-floats-are-real`)."""

    OPCODES = ("reduce",)
    OPERAND_FROM = frozenset({"broadcast"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        found = _reduce_of(op, "broadcast")
        if found is None:
            return None
        b, kind, shape = found
        if kind != "add":
            return None
        if self.opts.is_layout_sensitive:
            return None  # (as XLA: it does not run this with fixed layouts)
        sb = array(value_shape(op.operands[0]))
        bdims: tuple[int, ...] = tuple(b.attr("dimensions") or ())
        dims: tuple[int, ...] = tuple(op.attr("dimensions") or ())
        if sb is None or not dims or list(bdims) != sorted(bdims) or set(dims) & set(bdims):
            return None
        if shape.element_type == "pred" or sb.is_dynamic:
            return None  # (a pred sum is an or: not a multiple)
        x = b.operands[0]
        sx = array(value_shape(x))
        if sx is None or sx.element_type != shape.element_type:
            return None
        n = 1
        for d in dims:
            n *= sb.dims[d]
        times = self.new("multiply", [x, self.const(n, sx).result], sx, like=op)
        init = self.new("broadcast", [op.operands[1]], sx, {"dimensions": ()}, like=op)
        total = self.new("add", [init.result, times.result], sx, like=op)
        out_dims = tuple(bd - sum(1 for d in dims if d < bd) for bd in bdims)
        return self.new("broadcast", [total.result], shape, {"dimensions": out_dims}, like=op)


class ReduceOfNegate(Simplification):
    """`reduce(negate(x), 0, add) -> negate(reduce(x, 0, add))` (floats; the zero's sign
    flips with the negation, so it needs `enable-floats-are-real` or `no-signed-zeros`:
    round-to-nearest is symmetric, so each partial sum is the other's exact negation and
    only a zero's or a NaN's sign can differ)."""

    OPCODES = ("reduce",)
    OPERAND_FROM = frozenset({"negate"})
    FLOAT_UNSAFE = True
    SIGNED_ZEROS_ONLY = True

    def rewrite(self, op: HloOp):
        found = _reduce_of(op, "negate")
        if found is None:
            return None
        n, kind, shape = found
        if kind != "add":
            return None
        if self.opts.is_layout_sensitive:
            return None  # (as XLA: it does not run this with fixed layouts)
        if not is_float(shape.element_type) or not is_zero(op.operands[1]):
            return None
        attrs = {"dimensions": tuple(op.attr("dimensions") or ()), "to_apply": op.attr("to_apply")}
        r = self.new("reduce", [n.operands[0], op.operands[1]], shape, attrs, like=op)
        return self.new("negate", [r.result], shape, like=op)


def is_arg_min_max(op: HloOp, is_max: bool) -> bool:
    """`op` is XLA's arg-max (arg-min) reduce: `reduce(values, iota, init, 0)` with the
    lowest (highest) value as init and the arg-max (arg-min) comparator."""
    outs = result_shapes(op)
    if op.OPCODE != "reduce" or outs is None or len(op.operands) != 4 or len(outs) != 2:
        return False
    t = outs[0].element_type
    bound = lowest(t) if is_max else highest(t)
    if src(op.operands[1], "iota") is None or not _is_scalar_const(op.operands[2], bound):
        return False
    return _is_scalar_const(op.operands[3], 0) and is_arg_min_max_reducer(op, is_max)


class ReduceMaxOfArgMaxOperand(Simplification):
    """`reduce(x, -inf, max) -> get-tuple-element(argmax, 0)` where an arg-max reduce of
    the same x over the same dims comes earlier (and likewise min / arg-min with +inf); on
    floats the two may pick different zeros, so it needs `enable-floats-are-real`."""

    OPCODES = ("reduce",)
    OPERAND_FROM = frozenset({"constant"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        shape, kind = array(op.shape), reducer_opcode(op)
        if shape is None or len(op.operands) != 2 or kind not in ("maximum", "minimum"):
            return None
        if self.opts.is_layout_sensitive:
            return None  # (as XLA: its reduce rewrites from here on skip fixed layouts)
        is_max = kind == "maximum"
        x, init = op.operands
        if not _is_scalar_const(init, lowest(et(op)) if is_max else highest(et(op))):
            return None
        dims = tuple(op.attr("dimensions") or ())
        for use in x.uses:
            u = use.operation
            if u is op or use.index != 0 or not isinstance(u, HloOp) or u.parent is not op.parent:
                continue
            if tuple(u.attr("dimensions") or ()) != dims or not u.is_before_in_block(op):
                continue
            if is_arg_min_max(u, is_max):
                return self.new("get-tuple-element", [u.result], shape, {"index": 0}, like=op)
        return None


_IDEMPOTENT_REDUCERS = frozenset({"maximum", "minimum", "and", "or"})
"""Reducers for which folding the init in twice is folding it in once."""


class ReduceOfReduce(Simplification):
    """`reduce(reduce(x, init, dims1), init, dims2) -> reduce(x, init, dims1 ∪ dims2')`
    (the same reducer kind and init; dims2 renumbered to x's dims). The init must be the
    reducer's identity unless the reducer is idempotent; a float sum or product is
    regrouped, so for floats those need `enable-floats-are-real`."""

    OPCODES = ("reduce",)
    OPERAND_FROM = frozenset({"reduce"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "reduce")
        shape = array(op.shape)
        if inner is None or len(op.operands) != 2 or len(inner.operands) != 2 or shape is None:
            return None
        init = op.operands[1]
        if not _same_init(init, inner.operands[1]):
            return None
        kind = reducer_opcode(op)
        if kind is None or reducer_opcode(inner) != kind or et(inner) != et(op):
            return None
        if kind not in _IDEMPOTENT_REDUCERS:
            if not (is_identity_init(op, init) or (kind == "add" and is_zero(init))):
                return None
            if is_float(shape.element_type) and not self.opts.floats_are_real:
                return None  # (regrouped rounding)
        inner_dims = sorted(inner.attr("dimensions"))
        outer = sorted(op.attr("dimensions"))
        for d in inner_dims:  # renumber the outer dims to x's
            outer = [k + 1 if k >= d else k for k in outer]
        dims = tuple(sorted(inner_dims + outer))
        return self.new("reduce", [inner.operands[0], init], shape,
                        {"dimensions": dims, "to_apply": op.attr("to_apply")}, like=op)  # fmt: skip


def _same_init(a: SSAValue, b: SSAValue) -> bool:
    """The same value, or scalar constants of the same bits and type (XLA's `Identical`)."""
    if a is b:
        return True
    ca, cb = const_array(a), const_array(b)
    if ca is None or cb is None:
        return False
    return ca.dtype == cb.dtype and ca.shape == cb.shape and ca.tobytes() == cb.tobytes()


class ReduceOfReshapeOfKeptDims(Simplification):
    """`reduce(reshape(x), init)` over dims the reshape leaves as they are ->
    `reshape(reduce(x, init))` (the reduce on less data; each output reduces the same
    elements in the same order). The reshape must have no other use unless
    `unconditionally-simplify-reduce-of-transpose-or-reshape`."""

    OPCODES = ("reduce",)
    OPERAND_FROM = frozenset({"reshape"})
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        rs = src(op.operands[0], "reshape")
        shape = array(op.shape)
        if rs is None or len(op.operands) != 2 or shape is None or shape.is_dynamic:
            return None
        one_use = op.operands[0].has_one_use()
        if not (one_use or self.opts.unconditionally_simplify_reduce_of_transpose_or_reshape):
            return None
        x = rs.operands[0]
        sx, sr = array(value_shape(x)), array(rs.shape)
        if sx is None or sr is None or sx.is_dynamic or sr.is_dynamic:
            return None
        to_x = {o: i for i, o in unmodified_dims(sx.dims, sr.dims)}
        dims = op.attr("dimensions")
        if not dims or any(d not in to_x for d in dims):
            return None
        new_dims = tuple(sorted(to_x[d] for d in dims))
        kept = [n for k, n in enumerate(sx.dims) if k not in new_dims]
        small = shape_array(shape.element_type, kept)
        red = self.new("reduce", [x, op.operands[1]], small,
                       {"dimensions": new_dims, "to_apply": op.attr("to_apply")}, like=op)  # fmt: skip
        return self.new("reshape", [red.result], shape, like=op)


PATTERNS: tuple[type[Simplification], ...] = (
    ReduceTrivial, ReduceOfEmpty, ReduceOfScalarBroadcast, ReduceOfConcatenate,
    ReduceOfBroadcastIdempotent, ReduceOfBatchDot, ReduceArgMinMaxOfConstantBroadcast,
    ReduceVariadicSingle, ReduceOfBroadcastCommute, ReduceAddOfBroadcast, ReduceOfNegate,
    ReduceMaxOfArgMaxOperand, ReduceOfReduce, ReduceOfReshapeOfKeptDims,
)  # fmt: skip
"""This family's rewrites, in the order they fire."""
