"""`algsimp` family: gather and scatter (XLA's `HandleGather`, `HandleScatter`, and the
scatter combining of `HandleAdd`)."""

from __future__ import annotations

import math

from hlopass.dialects.hlo import HloOp
from hlopass.ir.attrs import PadDim, SliceDim
from hlopass.ir.shape import ArrayShape, scalar
from hlopass.ir.shape import array as shape_array
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, et, reducer_opcode, src
from hlopass.rewriting import owner, same_shape, value_shape


class GatherOfEffectiveScalar(Simplification):
    """`gather(x, i) -> broadcast(reshape(x))` when x has exactly one element (every index
    clamps to it)."""

    OPCODES = ("gather",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s, shape = array(value_shape(x)), array(op.shape)
        if s is None or shape is None or s.is_dynamic or s.num_elements != 1:
            return None
        v = x
        if s.rank:
            v = self.new("reshape", [x], scalar(s.element_type), like=op).result
        return self.new("broadcast", [v], shape, {"dimensions": ()}, like=op)


class ScatterEmptyUpdates(Simplification):
    """`scatter(x, i, u) -> x` when the updates have no elements (single operand)."""

    OPCODES = ("scatter",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 3:
            return None
        u = array(value_shape(op.operands[2]))
        return op.operands[0] if u is not None and u.num_elements == 0 else None


def _passthrough_output_dims(op: HloOp, operand: ArrayShape) -> dict[int, int] | None:
    """Operand dim -> output dim for each dim that `op` (a gather) copies whole: not
    collapsed, not a batching dim, sliced at its full size (whatever the index, the start
    clamps to 0). None when a dim list does not fit the operand."""
    collapsed = set(op.attr("collapsed_slice_dims") or ())
    batching = set(op.attr("operand_batching_dims") or ())
    sizes = tuple(op.attr("slice_sizes") or ())
    offsets = tuple(op.attr("offset_dims") or ())
    window = [d for d in range(operand.rank) if d not in collapsed and d not in batching]
    if len(sizes) != operand.rank or len(window) != len(offsets):
        return None
    return {d: offsets[k] for k, d in enumerate(window) if sizes[d] == operand.dims[d]}


class GatherOfEmpty(Simplification):
    """`gather(x, i) -> broadcast(0)` when x has no elements (nothing can be read; the
    result has no elements either)."""

    OPCODES = ("gather",)

    def rewrite(self, op: HloOp):
        s, shape = array(value_shape(op.operands[0])), array(op.shape)
        if s is None or shape is None or s.is_dynamic or s.num_elements != 0:
            return None
        return self.const(0, shape)


class GatherOfPad(Simplification):
    """`gather(pad(x, v), i) -> pad(gather(x, i), v)` when only dims the gather copies whole
    are padded (full slice size, not collapsed or batching): the gather moves those dims
    unchanged, so padding before or after gives the same array."""

    OPCODES = ("gather",)
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        pad = src(op.operands[0], "pad")
        shape = array(op.shape)
        if pad is None or shape is None or shape.is_dynamic:
            return None
        x, sp = pad.operands[0], array(pad.shape)
        sx = array(value_shape(x))
        if sx is None or sp is None or sx.is_dynamic:
            return None
        config = tuple(pad.attr("padding"))
        padded = [d for d, p in enumerate(config) if (p.low, p.high, p.interior) != (0, 0, 0)]
        through = _passthrough_output_dims(op, sp)
        if not padded or through is None or any(d not in through for d in padded):
            return None
        sizes = list(op.attr("slice_sizes"))
        dims = list(shape.dims)
        out_pad = [PadDim(0, 0, 0)] * shape.rank
        for d in padded:
            sizes[d] = sx.dims[d]
            dims[through[d]] = sx.dims[d]
            out_pad[through[d]] = config[d]
        attrs = {s.name: v for s, v in op.hlo_attrs() if s.name not in _NOT_COPIED}
        attrs["slice_sizes"] = tuple(sizes)
        g = self.new("gather", [x, op.operands[1]], shape.with_dims(tuple(dims)), attrs, like=op)
        return self.new("pad", [g.result, pad.operands[1]], shape,
                        {"padding": tuple(out_pad)}, like=op)  # fmt: skip


def one_to_one_dims(before: tuple[int, ...], after: tuple[int, ...]) -> dict[int, int]:
    """Dim of `before` -> dim of `after` for each dim a reshape keeps as it is: leaving out
    size-1 dims (they do not move elements), it forms a group of its own when both dim lists
    are cut where their running products agree (the row-major order before and after the
    group is then the same, whatever its size). Empty when a dim has size 0."""
    if 0 in before or 0 in after:
        return {}
    bs = [d for d, n in enumerate(before) if n != 1]
    as_ = [d for d, n in enumerate(after) if n != 1]
    out: dict[int, int] = {}
    i = j = 0
    while i < len(bs) and j < len(as_):
        gi, gj, pi, pj = [bs[i]], [as_[j]], before[bs[i]], after[as_[j]]
        while pi != pj:
            if pi < pj and i + 1 < len(bs):
                i += 1
                gi.append(bs[i])
                pi *= before[bs[i]]
            elif pi > pj and j + 1 < len(as_):
                j += 1
                gj.append(as_[j])
                pj *= after[as_[j]]
            else:
                return out
        if len(gi) == 1 and len(gj) == 1:
            out[gi[0]] = gj[0]
        i, j = i + 1, j + 1
    return out


class GatherOfReshapeOfPad(Simplification):
    """`gather(reshape(pad(x, v)), i) -> pad(gather(reshape(x), i), v)` when each padded dim
    is kept as it is by the reshape and copied whole by the gather (XLA's gather of a
    reshape of a pad)."""

    OPCODES = ("gather",)
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        r = src(op.operands[0], "reshape")
        pad = src(r.operands[0], "pad") if r is not None else None
        shape = array(op.shape)
        if r is None or pad is None or shape is None or shape.is_dynamic:
            return None
        x = pad.operands[0]
        sx, sp, sr = array(value_shape(x)), array(pad.shape), array(r.shape)
        if sx is None or sp is None or sr is None or sx.is_dynamic or sr.is_dynamic:
            return None
        config = tuple(pad.attr("padding"))
        padded = [d for d, p in enumerate(config) if (p.low, p.high, p.interior) != (0, 0, 0)]
        kept = one_to_one_dims(tuple(sp.dims), tuple(sr.dims))
        through = _passthrough_output_dims(op, sr)
        if not padded or through is None or any(kept.get(d) not in through for d in padded):
            return None
        r_dims, sizes, dims = list(sr.dims), list(op.attr("slice_sizes")), list(shape.dims)
        out_pad = [PadDim(0, 0, 0)] * shape.rank
        for d in padded:
            to = kept[d]
            r_dims[to] = sizes[to] = dims[through[to]] = sx.dims[d]
            out_pad[through[to]] = config[d]
        if math.prod(r_dims) != sx.num_elements:
            return None  # (x has a size-0 dim: the new reshape would not fit)
        x2 = self.new("reshape", [x], sr.with_dims(tuple(r_dims)), like=r)
        attrs = {s.name: v for s, v in op.hlo_attrs() if s.name not in _NOT_COPIED}
        attrs["slice_sizes"] = tuple(sizes)
        g = self.new("gather", [x2.result, op.operands[1]], shape.with_dims(tuple(dims)), attrs,
                     like=op)  # fmt: skip
        return self.new("pad", [g.result, pad.operands[1]], shape,
                        {"padding": tuple(out_pad)}, like=op)  # fmt: skip


VERY_SMALL_GATHER_SIZE = 4
"""XLA's `very_small_gather_size` default: a gather from a vector of at most this many
elements becomes a chain of selects."""


class GatherOfVerySmallVector(Simplification):
    """`gather(x, i)` of scalar indices into a vector x of n <= 4 elements ->
    `select(i >= n-1, x[n-1], ... select(i >= 1, x[1], x[0]))` (the index clamps into
    [0, n-1] as the gather's does)."""

    OPCODES = ("gather",)

    def rewrite(self, op: HloOp):
        x, i = op.operands
        sx, si, shape = array(value_shape(x)), array(value_shape(i)), array(op.shape)
        if sx is None or si is None or shape is None or shape.is_dynamic or si.is_dynamic:
            return None
        if sx.rank != 1 or not 1 < sx.dims[0] <= VERY_SMALL_GATHER_SIZE:
            return None  # (one element: GatherOfEffectiveScalar)
        collapsed = tuple(op.attr("collapsed_slice_dims") or ())
        if op.attr("index_vector_dim") != si.rank or collapsed != (0,):
            return None
        if tuple(shape.dims) != tuple(si.dims):
            return None
        t = sx.element_type
        pred = shape.with_element_type("pred")

        def element(k: int):
            s = self.new("slice", [x], shape_array(t, [1]), {"slice": (SliceDim(k, k + 1, 1),)})
            r = self.new("reshape", [s.result], scalar(t))
            return self.new("broadcast", [r.result], shape, {"dimensions": ()}).result

        result = element(0)
        for k in range(1, sx.dims[0]):
            bound = self.const(k, si)
            mask = self.new("compare", [i, bound.result], pred, {"direction": "GE"})
            result = self.new("select", [mask.result, element(k), result], shape).result
        return owner(result)


class ScatterOfWholeWindowToMap(Simplification):
    """`scatter(x, i, u) -> map(x, u)` applying the scatter's combiner, when the indices
    have no elements and x, u and the result have one shape (one update window covering
    all of x)."""

    OPCODES = ("scatter",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 3:
            return None
        x, i, u = op.operands
        si, sx, su = (array(value_shape(v)) for v in (i, x, u))
        if si is None or sx is None or su is None or si.num_elements != 0:
            return None
        if not same_shape(sx, op.shape) or not same_shape(su, op.shape):
            return None
        attrs = {"dimensions": tuple(range(sx.rank)), "to_apply": op.attr("to_apply")}
        return self.new("map", [x, u], op.shape, attrs, like=op)


_NOT_COPIED = ("metadata", "sharding", "indices_are_sorted", "unique_indices")
"""Attributes a rebuilt gather or scatter does not take over (the base class carries the
sharding; new indices are neither sorted nor unique)."""


def _add_scatter(value) -> HloOp | None:
    """The scatter defining `value` when it has one operand, combines with `add`, and has
    no other user (XLA's guard: the add then consumes it entirely)."""
    s = src(value, "scatter")
    if s is None or len(s.operands) != 3 or not s.result.has_one_use():
        return None
    return s if reducer_opcode(s) == "add" else None


def _scatter_guards(self: Simplification, op: HloOp) -> bool:
    """Common guards of the add-of-scatter rewrites: layouts free (XLA skips them when
    layout-sensitive), a numeric element type (pred's add is an or)."""
    t = et(op)
    return not self.opts.is_layout_sensitive and t != "pred" and array(op.shape) is not None


_SCATTER_DNUMS = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                  "index_vector_dim", "input_batching_dims", "scatter_indices_batching_dims")  # fmt: skip


def _concat_dims(l_s: HloOp, r_s: HloOp) -> tuple[int, int] | None:
    """(indices dim, updates dim) along which two scatters' indices and updates can be
    concatenated: the only dim of unequal size, else the first equal one (XLA's search);
    None when there is none or more than one unequal dim."""
    li, ri = (array(value_shape(s.operands[1])) for s in (l_s, r_s))
    lu = array(value_shape(l_s.operands[2]))
    if li is None or ri is None or lu is None or li.rank != ri.rank:
        return None
    ivd = l_s.attr("index_vector_dim")
    window = set(l_s.attr("update_window_dims") or ())
    batching = set(l_s.attr("scatter_indices_batching_dims") or ())
    first, found = (li.rank, lu.rank), None
    u = lu.rank - 1
    for d in range(li.rank - 1, -1, -1):
        if d == ivd:
            continue
        while u in window:
            u -= 1
        if d in batching:
            if li.dims[d] != ri.dims[d]:
                return None
            u -= 1
            continue
        if li.dims[d] == ri.dims[d]:
            first, u = (d, u), u - 1
            continue
        if found is not None:
            return None
        found, u = (d, u), u - 1
    found = found or first
    return None if found[0] == li.rank else found


class AddOfScatters(Simplification):
    """`add(scatter(a, i, u), scatter(b, j, v)) -> scatter(add(a, b), concat(i, j),
    concat(u, v))` for add-combining scatters of one dimension numbers (neither claims
    sorted or unique indices, updates fewer than the result's elements), else ->
    `scatter(scatter(add(a, b), j, v), i, u)`; each scatter used only here (the sums
    regroup, so floats need `enable-floats-are-real`)."""

    OPCODES = ("add",)
    FLOAT_UNSAFE = True
    OPERAND_FROM = frozenset({"scatter"})

    def rewrite(self, op: HloOp):
        if not _scatter_guards(self, op):
            return None
        l_s, r_s = (_add_scatter(v) for v in op.operands)
        if l_s is None or r_s is None or l_s is r_s:
            return None
        dims = _concat_dims(l_s, r_s)
        if dims is None:
            return None  # (XLA leaves the add as it is then)
        lu, ru = (array(value_shape(s.operands[2])) for s in (l_s, r_s))
        if lu.num_elements + ru.num_elements >= array(op.shape).num_elements:  # type: ignore[union-attr]
            return None  # concatenating the updates would cost more than the add saves
        base = self.new("add", [l_s.operands[0], r_s.operands[0]], op.shape, like=op)
        if _concatenable(l_s, r_s):
            i = self._concat(l_s.operands[1], r_s.operands[1], dims[0])
            u = self._concat(l_s.operands[2], r_s.operands[2], dims[1])
            return self.new("scatter", [base.result, i, u], op.shape, _attrs(l_s), like=op)
        inner = self.new("scatter", [base.result, *r_s.operands[1:]], op.shape, _attrs(r_s, True),
                         like=r_s)  # fmt: skip
        return self.new("scatter", [inner.result, *l_s.operands[1:]], op.shape, _attrs(l_s, True),
                        like=l_s)  # fmt: skip

    def _concat(self, a, b, dim: int):
        sa, sb = array(value_shape(a)), array(value_shape(b))
        dims = list(sa.dims)  # type: ignore[union-attr]
        dims[dim] += sb.dims[dim]  # type: ignore[union-attr]
        shape = sa.with_dims(tuple(dims))  # type: ignore[union-attr]
        return self.new("concatenate", [a, b], shape, {"dimensions": (dim,)}).result


def _concatenable(l_s: HloOp, r_s: HloOp) -> bool:
    """Both scatters' indices and updates can be concatenated into one scatter."""
    if any(s.attr("indices_are_sorted") or s.attr("unique_indices") for s in (l_s, r_s)):
        return False  # a concatenation is neither sorted nor free of repeats
    if any(tuple(_norm(l_s.attr(k))) != tuple(_norm(r_s.attr(k))) for k in _SCATTER_DNUMS):
        return False
    if et(l_s.operands[1]) != et(r_s.operands[1]):
        return False
    lu, ru = (array(value_shape(s.operands[2])) for s in (l_s, r_s))
    window = tuple(l_s.attr("update_window_dims") or ())
    return [lu.dims[d] for d in window] == [ru.dims[d] for d in window]  # type: ignore[union-attr]


def _norm(v) -> tuple:
    return (v,) if isinstance(v, int) else tuple(v or ())


def _attrs(s: HloOp, keep_flags: bool = False) -> dict:
    """The attributes of scatter `s` for a rebuilt scatter (its sortedness and uniqueness
    claims only when its own indices and updates are kept)."""
    drop = ("metadata", "sharding") if keep_flags else _NOT_COPIED
    return {spec.name: v for spec, v in s.hlo_attrs() if spec.name not in drop}


class AddOfScatter(Simplification):
    """`add(x, scatter(b, j, v)) -> scatter(add(x, b), j, v)` (either operand order) for an
    add-combining scatter used only here (the sum regroups, so floats need
    `enable-floats-are-real`)."""

    OPCODES = ("add",)
    FLOAT_UNSAFE = True
    OPERAND_FROM = frozenset({"scatter"})

    def rewrite(self, op: HloOp):
        if not _scatter_guards(self, op):
            return None
        l_s, r_s = (_add_scatter(v) for v in op.operands)
        if (l_s is None) == (r_s is None):
            return None  # (two scatters: AddOfScatters)
        s = l_s or r_s
        x = op.operands[1] if l_s is not None else op.operands[0]
        pair = [s.operands[0], x] if l_s is not None else [x, s.operands[0]]  # type: ignore[union-attr]
        base = self.new("add", pair, op.shape, like=op)
        return self.new("scatter", [base.result, *s.operands[1:]], op.shape, _attrs(s, True),  # type: ignore[union-attr]
                        like=s)  # fmt: skip


class TransposeOfScatter(Simplification):
    """`transpose(scatter(o, i, u), p)` -> `scatter(transpose(o, p), i, transpose(u, q))`
    with the scatter's operand dims renumbered by p (q keeps the update's scatter dim
    first and permutes its window dims by p): one operand, a simplified scatter (index
    vector dim last, at most one scatter dim, the window dims sorted and not 0, none
    inserted), no batching dims, the scatter used only here (option
    `enable-fold-transpose-into-scatter`; as XLA)."""

    OPCODES = ("transpose",)
    OPERAND_FROM = frozenset({"scatter"})
    OPTION = "enable_fold_transpose_into_scatter"

    def rewrite(self, op: HloOp):
        s = src(op.operands[0], "scatter")
        if s is None or len(s.operands) != 3 or not s.result.has_one_use():
            return None
        o, idx, u = s.operands
        so, si, su = (array(value_shape(v)) for v in (o, idx, u))
        if so is None or si is None or su is None or so.rank == 0:
            return None
        window = tuple(s.attr("update_window_dims") or ())
        if s.attr("index_vector_dim") + 1 != si.rank or su.rank - len(window) > 1:
            return None
        if 0 in window or list(window) != sorted(window) or s.attr("inserted_window_dims"):
            return None
        if s.attr("input_batching_dims") or s.attr("scatter_indices_batching_dims"):
            return None
        if su.rank != so.rank + 1:
            return None  # (the update permutation below needs the leading scatter dim)
        perm = tuple(op.attr("dimensions"))
        inverse = [0] * len(perm)
        for j, d in enumerate(perm):
            inverse[d] = j
        to = self.new("transpose", [o], op.shape, {"dimensions": perm}, like=op)
        q = (0, *(d + 1 for d in perm))
        tu = self.new("transpose", [u], su.with_dims(tuple(su.dims[d] for d in q)),
                      {"dimensions": q}, like=op)  # fmt: skip
        attrs = {
            spec.name: v for spec, v in s.hlo_attrs() if spec.name not in ("metadata", "sharding")
        }
        attrs["scatter_dims_to_operand_dims"] = tuple(
            inverse[d] for d in s.attr("scatter_dims_to_operand_dims") or ()
        )
        return self.new("scatter", [to.result, idx, tu.result], op.shape, attrs, like=s)


class GatherOfPadWithPaddedBatchDims(Simplification):
    """`gather(pad(x, v), pad(i, w)) -> pad(gather(x, i), v)` when the operand is padded only
    on dims the gather copies whole and on batching dims, and the indices only on their
    batching dims, each exactly as its operand batching dim (edges only): a padded batch
    position reads nothing but v, whatever its index."""

    OPCODES = ("gather",)
    OPERAND_FROM = frozenset({"pad"})
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        pad, ipad = src(op.operands[0], "pad"), src(op.operands[1], "pad")
        shape = array(op.shape)
        if pad is None or ipad is None or shape is None or shape.is_dynamic:
            return None
        x, i = pad.operands[0], ipad.operands[0]
        sx, sp, si = array(value_shape(x)), array(pad.shape), array(value_shape(i))
        if sx is None or sp is None or si is None or sx.is_dynamic or si.is_dynamic:
            return None
        obatch = tuple(op.attr("operand_batching_dims") or ())
        ibatch = tuple(op.attr("start_indices_batching_dims") or ())
        ivd = op.attr("index_vector_dim")
        config, iconfig = tuple(pad.attr("padding")), tuple(ipad.attr("padding"))
        through = _passthrough_output_dims(op, sp)
        if through is None or not obatch or len(obatch) != len(ibatch):
            return None
        pairs = dict(zip(ibatch, obatch, strict=True))
        for d, p in enumerate(iconfig):
            if (p.low, p.high, p.interior) == (0, 0, 0):
                continue
            q = config[pairs[d]] if d in pairs else None
            if q is None or p.interior or (q.low, q.high, q.interior) != (p.low, p.high, 0):
                return None  # (an index dim padded unlike its operand batching dim)
        padded_batch = False
        for d, p in enumerate(config):
            if (p.low, p.high, p.interior) == (0, 0, 0) or d in through:
                continue
            if d not in obatch:
                return None
            k = ibatch[obatch.index(d)]
            if (iconfig[k].low, iconfig[k].high, iconfig[k].interior) != (p.low, p.high, 0):
                return None
            padded_batch = True
        if not padded_batch:
            return None  # (GatherOfPad's case)
        offsets = tuple(op.attr("offset_dims") or ())
        batch_out = [d for d in range(shape.rank) if d not in offsets]
        index_dims = [d for d in range(si.rank + (1 if ivd == si.rank else 0)) if d != ivd]
        if len(batch_out) != len(index_dims):
            return None
        dims, out_pad = list(shape.dims), [PadDim(0, 0, 0)] * shape.rank
        for o, d in zip(batch_out, index_dims, strict=True):
            if d < si.rank and (iconfig[d].low or iconfig[d].high):
                dims[o] = si.dims[d]
                out_pad[o] = PadDim(iconfig[d].low, iconfig[d].high, 0)
        sizes = list(op.attr("slice_sizes"))
        for d, o in through.items():
            p = config[d]
            if (p.low, p.high, p.interior) != (0, 0, 0):
                sizes[d] = sx.dims[d]
                dims[o] = sx.dims[d]
                out_pad[o] = p
        attrs = {s.name: v for s, v in op.hlo_attrs() if s.name not in _NOT_COPIED}
        attrs["slice_sizes"] = tuple(sizes)
        g = self.new("gather", [x, i], shape.with_dims(tuple(dims)), attrs, like=op)
        return self.new("pad", [g.result, pad.operands[1]], shape,
                        {"padding": tuple(out_pad)}, like=op)  # fmt: skip


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
GATHERS: tuple[type[Simplification], ...] = (
    GatherOfEffectiveScalar, ScatterEmptyUpdates, GatherOfEmpty, GatherOfPad,
    GatherOfReshapeOfPad, GatherOfVerySmallVector, ScatterOfWholeWindowToMap,
    GatherOfPadWithPaddedBatchDims,
)  # fmt: skip
"""Empty, scalar, padded and small gathers; empty and whole-window scatters."""

COMBINING: tuple[type[Simplification], ...] = (AddOfScatters, AddOfScatter, TransposeOfScatter)
"""Adds of scatters and transposes of a scatter (after the add and transpose families)."""

PATTERNS: tuple[type[Simplification], ...] = (*GATHERS, *COMBINING)
"""This family's rewrites, in the order they fire."""
