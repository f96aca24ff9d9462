"""`algsimp` family: dot.

Guards kept from XLA: a dot with a precision algorithm (other than plain f32) or a non-default
operand precision stays a dot (its rounding is part of what the user asked for), no dot
rewrite runs when layouts are fixed (`is-layout-sensitive`), and the rewrites into a
multiply need `enable-dot-to-multiply-rewrite`.
"""

from __future__ import annotations

import math

from hlopass.dialects.hlo import HloOp
from hlopass.ir import attrs as A
from hlopass.ir.shape import ArrayShape
from hlopass.ir.shape import array as shape_array
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import add_reducer, array, et, src
from hlopass.rewriting import owner, value_shape

_PLAIN_ALGORITHMS = (None, "unset", "dot_f32_f32_f32")


def plain_precision(op: HloOp) -> bool:
    """No precision algorithm (or plain f32) and default precision for both operands."""
    if op.attr("algorithm") not in _PLAIN_ALGORITHMS:
        return False
    return all(p == "default" for p in (op.attr("operand_precision") or ()))


def feeds_unreduced_sharding(op: HloOp) -> bool:
    """`op`'s one user is a `Sharding` custom-call marking it unreduced (its sharding, or
    the Shardy `xla.sdy.sharding` frontend attribute, says `unreduced`): XLA then keeps the
    dot as it is (past the empty and no-contraction rewrites), the partial sums it names
    stay those of this dot."""
    if not op.result.has_one_use():
        return False
    user = next(iter(op.result.uses)).operation
    if not isinstance(user, HloOp) or user.OPCODE != "custom-call":
        return False
    if user.attr("custom_call_target") != "Sharding":
        return False
    sharding = user.attr("sharding")
    if sharding is not None and "unreduced" in str(getattr(sharding, "text", sharding)):
        return True
    fa = user.attr("frontend_attributes")
    return fa is not None and "unreduced" in str(getattr(fa, "text", fa))


class DotOfEmpty(Simplification):
    """`dot(a, b)` contracting zero elements -> `broadcast(0)`."""

    OPCODES = ("dot",)

    def rewrite(self, op: HloOp):
        if self.opts.is_layout_sensitive:
            return None
        a = array(value_shape(op.operands[0]))
        shape = array(op.shape)
        if a is None or shape is None:
            return None
        contracting = op.attr("lhs_contracting_dims") or ()
        n = 1
        for d in contracting:
            n *= a.dims[d]
        if n != 0 and a.num_elements != 0:
            return None
        return self.const(0, shape)


class DotOfScalars(Simplification):
    """`dot(a, b)` of two scalars -> `multiply(a, b)` (plain precision)."""

    OPCODES = ("dot",)
    OPTION = "enable_dot_to_multiply_rewrite"

    def rewrite(self, op: HloOp):
        a, b = op.operands
        sa, sb, shape = array(value_shape(a)), array(value_shape(b)), array(op.shape)
        if sa is None or sb is None or shape is None or sa.rank or sb.rank:
            return None
        if self.opts.is_layout_sensitive or not plain_precision(op):
            return None
        if sa.element_type != shape.element_type or sb.element_type != shape.element_type:
            return None
        return self.new("multiply", [a, b], shape, like=op)


class DotToMultiply(Simplification):
    """`dot(a, b)` contracting no dimension -> `multiply(broadcast(a'), broadcast(b'))`,
    a' and b' transposed to batch dims first (an outer product; plain precision, operands
    of the result's element type)."""

    OPCODES = ("dot",)
    OPTION = "enable_dot_to_multiply_rewrite"

    def rewrite(self, op: HloOp):
        if op.attr("lhs_contracting_dims") or op.attr("rhs_contracting_dims"):
            return None
        if self.opts.is_layout_sensitive or not plain_precision(op):
            return None
        a, b = op.operands
        sa, sb, shape = array(value_shape(a)), array(value_shape(b)), array(op.shape)
        if sa is None or sb is None or shape is None or shape.is_dynamic:
            return None
        if not sa.rank and not sb.rank:
            return None  # DotOfScalars
        if et(a) != shape.element_type or et(b) != shape.element_type:
            return None
        lb = tuple(op.attr("lhs_batch_dims") or ())
        rb = tuple(op.attr("rhs_batch_dims") or ())
        nb = len(lb)
        lf = [d for d in range(sa.rank) if d not in lb]
        rf = [d for d in range(sb.rank) if d not in rb]
        a2 = self._batch_major(a, sa, list(lb) + lf)
        b2 = self._batch_major(b, sb, list(rb) + rf)
        ba = self.new("broadcast", [a2], shape, {"dimensions": tuple(range(nb + len(lf)))})
        bdims = tuple(range(nb)) + tuple(range(nb + len(lf), nb + len(lf) + len(rf)))
        bb = self.new("broadcast", [b2], shape, {"dimensions": bdims})
        return self.new("multiply", [ba.result, bb.result], shape, like=op)

    def _batch_major(self, v, s: ArrayShape, perm: list[int]):
        if perm == list(range(s.rank)):
            return v
        t = shape_array(s.element_type, [s.dims[p] for p in perm])
        return self.new("transpose", [v], t, {"dimensions": tuple(perm)}).result


def _dims(op: HloOp, side: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return (tuple(op.attr(f"{side}_batch_dims") or ()),
            tuple(op.attr(f"{side}_contracting_dims") or ()))  # fmt: skip


class DotStrengthReduction(Simplification):
    """`dot(a, b)` where one operand has only batch and contracting dimensions ->
    `reduce(multiply(broadcast(a'), broadcast(b')), add)` over the contracting dimensions
    (a', b' transposed to batch, free, contracting order; plain precision, one element type;
    the sum's order changes, so for floats it needs `enable-floats-are-real`)."""

    OPCODES = ("dot",)
    OPTION = "enable_dot_strength_reduction"
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        if self.opts.is_layout_sensitive or not plain_precision(op) or op.attr("sparsity"):
            return None
        if feeds_unreduced_sharding(op):
            return None
        a, b = op.operands
        sa, sb, shape = array(value_shape(a)), array(value_shape(b)), array(op.shape)
        if sa is None or sb is None or shape is None or shape.is_dynamic:
            return None
        t = shape.element_type
        if et(a) != t or et(b) != t or t == "pred":
            return None
        (lb, lc), (rb, rc) = _dims(op, "lhs"), _dims(op, "rhs")
        lf = [d for d in range(sa.rank) if d not in lb + lc]
        rf = [d for d in range(sb.rank) if d not in rb + rc]
        if (lf and rf) or not lc:
            return None  # a matrix product (or an outer product: DotToMultiply)
        if self.opts.executing_on_cpu and (lf or rf):
            return None  # (XLA's CPU backend: a matrix-vector product stays a dot)
        nb, nc = len(lb), len(lc)
        full_dims = [sa.dims[d] for d in lb] + [sa.dims[d] for d in lf] + [sb.dims[d] for d in rf]
        full_dims += [sa.dims[d] for d in lc]
        full = shape_array(t, full_dims)
        n_free = len(lf) + len(rf)
        c_dims = tuple(range(nb + n_free, nb + n_free + nc))
        a2 = self._transposed(a, sa, list(lb) + lf + list(lc))
        b2 = self._transposed(b, sb, list(rb) + rf + list(rc))
        a_dims = tuple(range(nb + len(lf))) + c_dims
        b_dims = tuple(range(nb)) + tuple(range(nb + len(lf), nb + n_free)) + c_dims
        ba = self.new("broadcast", [a2], full, {"dimensions": a_dims})
        bb = self.new("broadcast", [b2], full, {"dimensions": b_dims})
        m = self.new("multiply", [ba.result, bb.result], full, like=op)
        zero = self.const(0, shape_array(t, []))
        reducer = add_reducer(self.ctx, op, t)
        return self.new("reduce", [m.result, zero.result], shape,
                        {"dimensions": c_dims, "to_apply": reducer}, like=op)  # fmt: skip

    def _transposed(self, v, s: ArrayShape, perm: list[int]):
        if perm == list(range(s.rank)):
            return v
        t = shape_array(s.element_type, [s.dims[p] for p in perm])
        return self.new("transpose", [v], t, {"dimensions": tuple(perm)}).result


class DotOfTransposes(Simplification):
    """`dot(transpose(a), transpose(b)) -> transpose(dot(b, a))` for rank-2 operands
    contracting lhs dim 1 with rhs dim 0 (A^T B^T = (B A)^T; plain precision)."""

    OPCODES = ("dot",)
    OPERAND_FROM = frozenset({"transpose"})

    def rewrite(self, op: HloOp):
        if self.opts.is_layout_sensitive or not plain_precision(op) or op.attr("sparsity"):
            return None
        if feeds_unreduced_sharding(op):
            return None
        ta, tb = (src(v, "transpose") for v in op.operands)
        shape = array(op.shape)
        if ta is None or tb is None or shape is None or shape.rank != 2:
            return None
        if _dims(op, "lhs") != ((), (1,)) or _dims(op, "rhs") != ((), (0,)):
            return None
        if tuple(ta.attr("dimensions")) != (1, 0) or tuple(tb.attr("dimensions")) != (1, 0):
            return None
        a, b = ta.operands[0], tb.operands[0]
        sa, sb = array(value_shape(a)), array(value_shape(b))
        if sa is None or sb is None or sa.rank != 2 or sb.rank != 2:
            return None
        inner = shape_array(shape.element_type, [shape.dims[1], shape.dims[0]])
        attrs = {"lhs_contracting_dims": (1,), "rhs_contracting_dims": (0,)}
        for k in ("operand_precision", "algorithm"):
            if op.attr(k) is not None:
                attrs[k] = op.attr(k)
        d = self.new("dot", [b, a], inner, attrs, like=op)
        return self.new("transpose", [d.result], shape, {"dimensions": (1, 0)}, like=op)


def _matmul(op: HloOp | None) -> bool:
    """A plain rank-2 matrix product `[m,k] x [k,n]` (contracting lhs 1 with rhs 0)."""
    if op is None or op.OPCODE != "dot" or not plain_precision(op) or op.attr("sparsity"):
        return False
    if _dims(op, "lhs") != ((), (1,)) or _dims(op, "rhs") != ((), (0,)):
        return False
    return all(getattr(value_shape(v), "rank", 0) == 2 for v in op.operands)


def _swapped_precision(op: HloOp, attrs: dict) -> None:
    """Copy `op`'s precision config into `attrs` for a dot of swapped operands (XLA's
    `SwapOperandsInDotPrecisionConfig`)."""
    p = op.attr("operand_precision")
    if p is not None:
        attrs["operand_precision"] = tuple(reversed(tuple(p)))
    if op.attr("algorithm") is not None:
        attrs["algorithm"] = op.attr("algorithm")


class DotOfBatchTransposes(Simplification):
    """`dot(transpose(a, p), transpose(b, p)) -> transpose(dot(b, a), p)` for a batch dot
    `[B..,m,k] x [B..,k,n]` when p swaps the two last dims (and may permute the batch
    dims), or `-> transpose(dot(a, b), p)` when p only permutes the batch dims (XLA's
    `RemoveTransposesFromDotOperands`; one permutation on both sides)."""

    OPCODES = ("dot",)
    OPERAND_FROM = frozenset({"transpose"})

    def rewrite(self, op: HloOp):
        if self.opts.is_layout_sensitive or op.attr("sparsity") or feeds_unreduced_sharding(op):
            return None
        ta, tb = (src(v, "transpose") for v in op.operands)
        shape = array(op.shape)
        if ta is None or tb is None or shape is None or shape.rank < 3:
            return None  # (rank 2: DotOfTransposes)
        perm = tuple(ta.attr("dimensions"))
        if tuple(tb.attr("dimensions")) != perm:
            return None
        r = shape.rank
        (lb, lc), (rb, rc) = _dims(op, "lhs"), _dims(op, "rhs")
        if lb != rb or sorted(lb) != list(range(r - 2)) or lc != (r - 1,) or rc != (r - 2,):
            return None
        if perm[r - 2 :] == (r - 2, r - 1):
            first, second = ta.operands[0], tb.operands[0]
        elif perm[r - 2 :] == (r - 1, r - 2):
            first, second = tb.operands[0], ta.operands[0]
        else:
            return None  # the permutation mixes batch and matrix dims
        inner = shape_array(shape.element_type, [shape.dims[perm.index(d)] for d in range(r)])
        attrs = {"lhs_batch_dims": lb, "rhs_batch_dims": rb,
                 "lhs_contracting_dims": lc, "rhs_contracting_dims": rc}  # fmt: skip
        if first is ta.operands[0]:
            for k in ("operand_precision", "algorithm"):
                if op.attr(k) is not None:
                    attrs[k] = op.attr(k)
        else:
            _swapped_precision(op, attrs)
        d = self.new("dot", [first, second], inner, attrs, like=op)
        return self.new("transpose", [d.result], shape, {"dimensions": perm}, like=op)


class TransposeOfDot(Simplification):
    """`transpose(dot(a, b)) -> dot(b, a)` when the transpose keeps the batch dims first
    and puts b's free dims before a's (the order `dot(b, a)` produces; the dot has no other
    user; contracting dims swap sides, batch dims follow the permutation)."""

    OPCODES = ("transpose",)
    OPERAND_FROM = frozenset({"dot"})

    def rewrite(self, op: HloOp):
        d = src(op.operands[0], "dot")
        if d is None or not d.result.has_one_use() or d.attr("sparsity"):
            return None
        a, b = d.operands
        if self.opts.enable_move_dot_param_to_rhs and _parameter_like(b) and not _parameter_like(a):
            return None  # (as XLA: that order is MoveDotParamToRhs's; swapping back loops)
        sa, sb = array(value_shape(a)), array(value_shape(b))
        if sa is None or sb is None:
            return None
        perm = tuple(op.attr("dimensions"))
        (lb, lc), (rb, rc) = _dims(d, "lhs"), _dims(d, "rhs")
        nb = len(lb)
        n_lhs = sa.rank - len(lb) - len(lc)
        n_rhs = sb.rank - len(rb) - len(rc)
        if any(p >= nb for p in perm[:nb]):
            return None
        if perm[nb : nb + n_rhs] != tuple(range(nb + n_lhs, nb + n_lhs + n_rhs)):
            return None
        if perm[nb + n_rhs :] != tuple(range(nb, nb + n_lhs)):
            return None
        if not self.opts.supports_non_canonical_dots and not (
            lb == rb and sorted(lb) == list(range(nb)) and lc and rc and n_lhs == n_rhs == 1
            and perm == (*range(nb), nb + 1, nb)
        ):  # fmt: skip
            return None  # XLA then swaps only the two free dims of a batch-first dot
        attrs = {"lhs_contracting_dims": rc, "rhs_contracting_dims": lc}
        if nb:
            attrs["lhs_batch_dims"] = tuple(rb[p] for p in perm[:nb])
            attrs["rhs_batch_dims"] = tuple(lb[p] for p in perm[:nb])
        _swapped_precision(d, attrs)
        return self.new("dot", [b, a], op.shape, attrs, like=d)


def _dot_attrs(op: HloOp, **dims: tuple[int, ...]) -> dict:
    """`op`'s dimension numbers and precision config, with `dims` (e.g.
    `lhs_contracting_dims=(1,)`) replacing some; empty dimension lists are left out."""
    out: dict = {}
    for k in ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims",
              "rhs_contracting_dims", "operand_precision", "algorithm"):  # fmt: skip
        v = dims[k] if k in dims else op.attr(k)
        if v is not None and v != ():
            out[k] = v
    return out


def _plain_2d_dot(op: HloOp) -> bool:
    """A dot with a rank-2 result, no batch dimension and one contracting dimension (the
    form XLA's dot-of-concatenate and dot-of-gather rewrites take)."""
    shape = array(op.shape)
    return (
        shape is not None
        and not feeds_unreduced_sharding(op)
        and shape.rank == 2
        and not op.attr("lhs_batch_dims")
        and len(op.attr("lhs_contracting_dims") or ()) == 1
    )


def _plain_2d_contracting_dims(op: HloOp) -> tuple[int, int] | None:
    """The (lhs, rhs) contracting dims of a `_plain_2d_dot`, None for any other dot."""
    if not _plain_2d_dot(op):
        return None
    (lcd,), (rcd,) = op.attr("lhs_contracting_dims"), op.attr("rhs_contracting_dims")
    return lcd, rcd


class DotReorderContractingDims(Simplification):
    """`dot(reshape(transpose(a)), c) -> dot(reshape(a), reshape(transpose(reshape(c))))`
    where the reshape merges a run of dims into the one contracting dim and the transpose
    permutes only that run (c a constant, either side; the same permutation moves to c's
    contracting elements, which constant folding can then do; the order of the sum
    changes, so for floats it needs `enable-floats-are-real`)."""

    OPCODES = ("dot",)
    OPERAND_FROM = frozenset({"reshape"})
    FLOAT_UNSAFE = True
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        if feeds_unreduced_sharding(op):
            return None
        lhs, rhs = op.operands
        side, other = "lhs", "rhs"
        if src(lhs, "constant") is not None:
            lhs, rhs, side, other = rhs, lhs, "rhs", "lhs"
        lcs = op.attr(f"{side}_contracting_dims") or ()
        rcs = op.attr(f"{other}_contracting_dims") or ()
        reshape, const = src(lhs, "reshape"), src(rhs, "constant")
        if reshape is None or const is None or len(lcs) != 1 or len(rcs) != 1:
            return None
        lc, rc = lcs[0], rcs[0]
        transpose = src(reshape.operands[0], "transpose")
        if transpose is None:
            return None
        a = transpose.operands[0]
        ts, rs, sa, sc = (array(value_shape(v)) for v in (transpose.result, lhs, a, rhs))
        if ts is None or rs is None or sa is None or sc is None:
            return None
        run = _merged_run(ts.dims, rs.dims, lc)
        if run is None:
            return None
        first, last = run
        perm = transpose.attr("dimensions")
        if any(p != i for i, p in enumerate(perm) if not first <= i <= last):
            return None  # the transpose moves a dim the dot does not contract
        rel = [perm[i] - first for i in range(first, last + 1)]
        if sorted(rel) != list(range(len(rel))):
            return None
        new_lhs = self.new("reshape", [a], rs, like=reshape)
        t = sc.element_type
        run_t = list(ts.dims[first : last + 1])
        unsquished = list(sc.dims[:rc]) + run_t + list(sc.dims[rc + 1 :])
        r1 = self.new("reshape", [rhs], shape_array(t, unsquished), like=const)
        inverse = [rel.index(j) for j in range(len(rel))]
        tdims = list(range(rc)) + [rc + q for q in inverse]
        tdims += list(range(rc + len(rel), len(unsquished)))
        permuted = [unsquished[d] for d in tdims]
        r2 = self.new("transpose", [r1.result], shape_array(t, permuted),
                      {"dimensions": tuple(tdims)}, like=const)  # fmt: skip
        new_rhs = self.new("reshape", [r2.result], sc, like=const)
        operands = [new_lhs.result, new_rhs.result]
        if side == "rhs":
            operands.reverse()
        return self.new("dot", operands, op.shape, _dot_attrs(op), like=op)


def _merged_run(before: tuple[int, ...], after: tuple[int, ...], dim: int):
    """(first, last) when reshaping `before` to `after` keeps every dim but merges the run
    before[first..last] (more than one dim) into after[dim], else None."""
    groups = []  # (input dims, output dims) of equal products, in order
    i = j = 0
    while i < len(before) and j < len(after):
        gi, gj = [i], [j]
        pi, pj = before[i], after[j]
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj and i < len(before):
                pi *= before[i]
                gi.append(i)
                i += 1
            elif j < len(after):
                pj *= after[j]
                gj.append(j)
                j += 1
            else:
                return None
        groups.append((gi, gj))
    if i != len(before) or j != len(after) or 0 in before:
        return None
    merged = [(gi, gj) for gi, gj in groups if len(gi) != 1 or len(gj) != 1]
    if len(merged) != 1 or merged[0][1] != [dim] or len(merged[0][0]) < 2:
        return None
    return merged[0][0][0], merged[0][0][-1]


class DotOfConcatenateAndConstant(Simplification):
    """`dot(concatenate(a0, a1, ...), c) -> add(add(dot(a0, slice(c)), dot(a1, slice(c))),
    ...)` where the concatenation runs along the contracting dim and c is a rank-2
    constant (either side; a rank-2 result without batch dims; the sum splits, so for
    floats it needs `enable-floats-are-real`)."""

    OPCODES = ("dot",)
    OPERAND_FROM = frozenset({"concatenate"})
    FLOAT_UNSAFE = True
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        dims = _plain_2d_contracting_dims(op)
        if dims is None:
            return None
        lcd, rcd = dims
        lhs, rhs = op.operands
        for cat_v, cd, const_v, ccd, swapped in ((lhs, lcd, rhs, rcd, False),
                                                 (rhs, rcd, lhs, lcd, True)):  # fmt: skip
            cat, const = src(cat_v, "concatenate"), src(const_v, "constant")
            sc = array(value_shape(const_v))
            if cat is None or const is None or sc is None or sc.rank != 2:
                continue
            if cat.attr("dimensions") != (cd,):
                continue
            total = None
            offset = 0
            for part in cat.operands:
                k = value_shape(part).dims[cd]  # type: ignore[attr-defined]
                sl = [A.SliceDim(0, n, 1) for n in sc.dims]
                sl[ccd] = A.SliceDim(offset, offset + k, 1)
                dims = list(sc.dims)
                dims[ccd] = k
                piece = self.new("slice", [const_v], sc.with_dims(tuple(dims)),
                                 {"slice": tuple(sl)}, like=const)  # fmt: skip
                pair = [piece.result, part] if swapped else [part, piece.result]
                d = self.new("dot", pair, op.shape, _dot_attrs(op), like=op)
                total = (
                    d
                    if total is None
                    else self.new("add", [total.result, d.result], op.shape, like=op)
                )
                offset += k
            return total
        return None


class DotOfDynamicSliceOfConstant(Simplification):
    """`dot(dynamic-slice(ca, s, 0), cb) -> dynamic-slice(dot(ca, cb), s, 0)` when the
    slice takes one row (or column) of constant ca across the whole contracting dim and cb
    is a constant (either side; rank-2, no batch dims; the dot of the constants can fold;
    XLA-CPU may sum a row of the product in another order: for floats it needs
    `enable-floats-are-real`)."""

    OPCODES = ("dot",)
    OPERAND_FROM = frozenset({"dynamic-slice"})
    FLOAT_UNSAFE = True
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        dims = _plain_2d_contracting_dims(op)
        if dims is None:
            return None
        lcd, rcd = dims
        lhs, rhs = op.operands
        lhs_ds = _vector_slice_of_constant(lhs, rhs, lcd)
        if lhs_ds is None and _vector_slice_of_constant(rhs, lhs, rcd) is None:
            return None
        ds = lhs_ds if lhs_ds is not None else src(rhs, "dynamic-slice")
        assert ds is not None
        left = ds.operands[0] if lhs_ds is not None else lhs
        right = rhs if lhs_ds is not None else ds.operands[0]
        sl, sr, shape = array(value_shape(left)), array(value_shape(right)), array(op.shape)
        assert sl is not None and sr is not None and shape is not None
        m, n = sl.dims[1 - lcd], sr.dims[1 - rcd]
        full = self.new("dot", [left, right], shape.with_dims((m, n)), _dot_attrs(op), like=op)
        free = 1 - (lcd if lhs_ds is not None else rcd)
        start, zero = ds.operands[1 + free], ds.operands[2 - free]
        idx = [start, zero] if lhs_ds is not None else [zero, start]
        sizes = (1, n) if lhs_ds is not None else (m, 1)
        return self.new("dynamic-slice", [full.result, *idx], op.shape,
                        {"dynamic_slice_sizes": sizes}, like=op)  # fmt: skip


def _vector_slice_of_constant(a, b, contracting: int) -> HloOp | None:
    """`a` when it is `dynamic-slice(constant)` of one row across the contracting dim (all
    of it) and `b` a constant, else None."""
    ds = src(a, "dynamic-slice")
    if ds is None or src(ds.operands[0], "constant") is None or src(b, "constant") is None:
        return None
    s, full = array(value_shape(a)), array(value_shape(ds.operands[0]))
    if s is None or full is None or s.rank != 2 or len(ds.operands) != 3:
        return None
    if s.dims[1 - contracting] != 1 or s.dims[contracting] != full.dims[contracting]:
        return None
    return ds


class DotRemoveDegenerateDims(Simplification):
    """`dot(a, b) -> reshape(dot(reshape(a), reshape(b)))` dropping the size-1 dims of
    either operand (their batch or contracting pairing dropped with them; XLA-CPU may pick
    another kernel for the smaller dot and sum in another order: it needs
    `enable-floats-are-real`, for integers too here, where XLA does it always)."""

    OPCODES = ("dot",)
    FLOAT_UNSAFE = True
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        if op.attr("sparsity") or feeds_unreduced_sharding(op):
            return None
        if not self.opts.floats_are_real:
            return None  # (integers too, unlike XLA: lit cases pin dots that keep size-1 dims)
        a, b = op.operands
        sa, sb, shape = array(value_shape(a)), array(value_shape(b)), array(op.shape)
        if sa is None or sb is None or shape is None or sa.is_dynamic or sb.is_dynamic:
            return None
        if 1 not in sa.dims and 1 not in sb.dims:
            return None
        maps = [_kept_dims(s) for s in (sa, sb)]
        new_dims: dict[str, tuple[int, ...]] = {}
        for side, kept in zip(("lhs", "rhs"), maps, strict=True):
            for kind in ("batch", "contracting"):
                key = f"{side}_{kind}_dims"
                new_dims[key] = tuple(kept[d] for d in op.attr(key) or () if d in kept)
        if len(new_dims["lhs_batch_dims"]) != len(new_dims["rhs_batch_dims"]) or len(
            new_dims["lhs_contracting_dims"]
        ) != len(new_dims["rhs_contracting_dims"]):
            return None  # a size-1 dim paired with a larger one (a broadcast-like dot)
        new_a, new_b = (self._squeezed(v, s) for v, s in ((a, sa), (b, sb)))
        nb = len(new_dims["lhs_batch_dims"])
        free_a = [sa.dims[d] for d in range(sa.rank) if d in maps[0]
                  and maps[0][d] not in new_dims["lhs_batch_dims"] + new_dims["lhs_contracting_dims"]]  # fmt: skip
        free_b = [sb.dims[d] for d in range(sb.rank) if d in maps[1]
                  and maps[1][d] not in new_dims["rhs_batch_dims"] + new_dims["rhs_contracting_dims"]]  # fmt: skip
        batch = [sa.dims[d] for d in op.attr("lhs_batch_dims") or () if d in maps[0]]
        assert len(batch) == nb
        out = shape.with_dims(tuple(batch + free_a + free_b))
        attrs = _dot_attrs(op, **new_dims)
        d = self.new("dot", [new_a, new_b], out, attrs, like=op)
        if out.dims == shape.dims:
            return d
        return self.new("reshape", [d.result], shape, like=op)

    def _squeezed(self, v, s: ArrayShape):
        if 1 not in s.dims:
            return v
        dims = tuple(n for n in s.dims if n != 1)
        return self.new("reshape", [v], s.with_dims(dims)).result


def _kept_dims(s: ArrayShape) -> dict[int, int]:
    """Each dim of `s` that is not of size 1 -> its index once the size-1 dims are gone."""
    out: dict[int, int] = {}
    for d, n in enumerate(s.dims):
        if n != 1:
            out[d] = len(out)
    return out


def _parameter_like(v) -> bool:
    """`v` is a parameter, or comes from one through ops of one operand (XLA's
    `IsParameterLike`)."""
    o = owner(v)
    while o is not None:
        if o.OPCODE == "parameter":
            return True
        if len(o.operands) != 1:
            return False
        o = owner(o.operands[0])
    return False


class MoveDotParamToRhs(Simplification):
    """`dot(a, b)` with a parameter-like and b not -> `transpose(dot(b, a))` back to the
    batch, a-free, b-free order (option `enable-move-dot-param-to-rhs`; the products sum in
    another order, so floats need `enable-floats-are-real`)."""

    OPCODES = ("dot",)
    OPTION = "enable_move_dot_param_to_rhs"
    FLOAT_UNSAFE = True
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        a, b = op.operands[0], op.operands[1]
        if len(op.operands) != 2 or not _parameter_like(a) or _parameter_like(b):
            return None
        shape, sa, sb = array(op.shape), array(value_shape(a)), array(value_shape(b))
        if shape is None or sa is None or sb is None:
            return None
        (lb, lc), (rb, rc) = _dims(op, "lhs"), _dims(op, "rhs")
        nb = len(lb)
        a_free = sa.rank - nb - len(lc)
        b_free = sb.rank - nb - len(rc)
        inner_dims = shape.dims[:nb] + shape.dims[nb + a_free :] + shape.dims[nb : nb + a_free]
        attrs: dict = {"lhs_contracting_dims": rc, "rhs_contracting_dims": lc}
        if nb:
            attrs["lhs_batch_dims"], attrs["rhs_batch_dims"] = rb, lb
        _swapped_precision(op, attrs)
        d = self.new("dot", [b, a], shape.with_dims(inner_dims), attrs, like=op)
        perm = (*range(nb), *(nb + b_free + i for i in range(a_free)),
                *(nb + i for i in range(b_free)))  # fmt: skip
        return self.new("transpose", [d.result], op.shape, {"dimensions": perm}, like=op)


def _dot_result_dims(sa: ArrayShape, sb: ArrayShape, lb, lc, rb, rc) -> list[int]:
    """A dot's result dims: batch, then lhs free, then rhs free."""
    return ([sa.dims[d] for d in lb] + [n for d, n in enumerate(sa.dims) if d not in (*lb, *lc)]
            + [n for d, n in enumerate(sb.dims) if d not in (*rb, *rc)])  # fmt: skip


class DotOperatorReorder(Simplification):
    """`dot(f(a), b) -> dot(a', g(b))` for f a reverse, zero pad or broadcast of one side:
    the part of f on contracted dims moves to the other side, as a reverse, a slice or a
    sum (`reduce`) of it; the rest stays (`use-associative-reordering`; a reverse when the
    reversed side has `associative-reordering-threshold` times the other's elements, a pad
    or broadcast when the flops drop by the threshold, twice it when a part stays; XLA's
    `AssociativeReorderDotOperator`; the products' sum changes order or loses zero terms,
    so floats need `enable-floats-are-real`)."""

    OPCODES = ("dot",)
    OPERAND_FROM = frozenset({"reverse", "pad", "broadcast"})
    OPTION = "use_associative_reordering"
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        if self.opts.is_layout_sensitive or op.attr("sparsity") or feeds_unreduced_sharding(op):
            return None
        lhs, rhs = op.operands
        shape = array(op.shape)
        lo, ro = owner(lhs), owner(rhs)
        kinds = ("reverse", "pad", "broadcast")
        if lo is not None and lo.OPCODE in kinds:
            f, to, left = lo, rhs, True
        elif ro is not None and ro.OPCODE in kinds:
            f, to, left = ro, lhs, False
        else:
            return None
        sf, st = array(f.shape), array(value_shape(to))
        if shape is None or sf is None or st is None or sf.is_dynamic or st.is_dynamic:
            return None
        (lb, lc), (rb, rc) = _dims(op, "lhs"), _dims(op, "rhs")
        planned = self._plan(f, sf, st, *((lc, rc) if left else (rc, lc)))
        if planned is None:
            return None
        plan, multiplier, new_fc, new_tc = planned
        x = f.operands[0]
        # the dims of the new dot, and its flops against the old one's
        nf_shape = self._from_shape(plan, sf, x)
        nt_shape = self._to_shape(plan, st)
        if left:
            nlc, nrc, na, nb = tuple(new_fc), tuple(new_tc), nf_shape, nt_shape
        else:
            nlc, nrc, na, nb = tuple(new_tc), tuple(new_fc), nt_shape, nf_shape
        dims = _dot_result_dims(na, nb, lb, nlc, rb, nrc)
        if tuple(dims) != shape.dims:
            return None
        lhs_shape = array(value_shape(lhs))
        old = shape.num_elements * math.prod(lhs_shape.dims[d] for d in lc)  # type: ignore[union-attr]
        new = shape.num_elements * math.prod(na.dims[d] for d in nlc)
        reorder = old / max(new, 1) > multiplier * self.opts.associative_reordering_threshold
        if not reorder and plan[0] != "reverse":
            return None
        nf, nt = self._build(plan, f, x, to, sf, st, shape.element_type)
        attrs = _dot_attrs(op, lhs_contracting_dims=nlc, rhs_contracting_dims=nrc)
        a, b = (nf, nt) if left else (nt, nf)
        return self.new("dot", [a, b], op.shape, attrs, like=op)

    def _plan(self, f: HloOp, sf: ArrayShape, st: ArrayShape, fc, tc):
        """What moves from `f` (contracting `fc` against the other side's `tc`) to the other
        side: (plan, the flops multiplier the threshold is scaled by, the new contracting
        dims of both sides), or None when nothing can move."""
        if f.OPCODE == "reverse":
            return self._plan_reverse(f, sf, st, fc, tc)
        if f.OPCODE == "pad":
            return self._plan_pad(f, st, fc, tc)
        return self._plan_broadcast(f, sf, fc, tc)

    def _plan_reverse(self, f: HloOp, sf: ArrayShape, st: ArrayShape, fc, tc):
        """The reversed contracted dims move as a reverse of the other side (only when `f`'s
        side has the threshold times the other's elements)."""
        ratio = sf.num_elements / max(st.num_elements, 1)
        if ratio < self.opts.associative_reordering_threshold:
            return None
        fwd = dict(zip(fc, tc, strict=True))
        moved = [fwd[d] for d in f.attr("dimensions") if d in fwd]
        kept = [d for d in f.attr("dimensions") if d not in fwd]
        if not moved:
            return None
        return ("reverse", moved, kept), 1.0, list(fc), list(tc)

    @staticmethod
    def _plan_pad(f: HloOp, st: ArrayShape, fc, tc):
        """A zero pad's padding of contracted dims moves as a slice of the other side; the
        rest stays (twice the threshold then)."""
        from hlopass.rewriting import is_zero

        if not is_zero(f.operands[1]):
            return None  # (XLA does not check: dropping padding of another value is wrong)
        back = dict(zip(tc, fc, strict=True))
        pads = list(f.attr("padding"))
        cut = []
        for d, n in enumerate(st.dims):
            q = pads[back[d]] if d in back else None
            if q is not None and (q.low > 0 or q.high > 0 or q.interior > 0):
                if q.low < 0 or q.high < 0:
                    return None
                cut.append(A.SliceDim(q.low, n - q.high, q.interior + 1))
                pads[back[d]] = type(q)(0, 0, 0)
            else:
                cut.append(A.SliceDim(0, n, 1))
        if all(c == A.SliceDim(0, n, 1) for c, n in zip(cut, st.dims, strict=True)):
            return None
        if any(q.low < 0 or q.high < 0 for q in pads):
            return None
        stays = any(q.low or q.high or q.interior for q in pads)
        return ("pad", cut, pads if stays else None), 2.0 if stays else 1.0, list(fc), list(tc)

    @staticmethod
    def _plan_broadcast(f: HloOp, sf: ArrayShape, fc, tc):
        """The contracted dims a broadcast adds move as a sum (`reduce`) of the other side;
        what stays of the broadcast, if anything, is twice the threshold."""
        fwd = dict(zip(fc, tc, strict=True))
        bdims = tuple(f.attr("dimensions") or ())
        where = {d: k for k, d in enumerate(bdims)}
        sums = [to_d for from_d, to_d in zip(fc, tc, strict=True) if from_d not in where]
        if not sums:
            return None
        keep_from = [d for d in range(sf.rank) if not (d in fwd and d not in where)]
        new_fc, new_tc = [], []
        for from_d, to_d in zip(fc, tc, strict=True):
            if from_d in where:
                new_fc.append(keep_from.index(from_d))
                new_tc.append(to_d - sum(1 for s in sums if s < to_d))
        sx = array(value_shape(f.operands[0]))
        if sx is None:
            return None
        small_dims = tuple(sf.dims[d] for d in keep_from)
        nbd = tuple(keep_from.index(d) for d in bdims)
        # x itself only when the broadcast left is the identity (XLA compares shapes
        # only, which would also take a transposing broadcast for one)
        stays = small_dims != sx.dims or nbd != tuple(range(len(nbd)))
        plan = ("broadcast", sums, (keep_from, small_dims, bdims, stays))
        return plan, 2.0 if stays else 1.0, new_fc, new_tc

    @staticmethod
    def _from_shape(plan, sf: ArrayShape, x) -> ArrayShape:
        if plan[0] == "broadcast":
            keep_from, small_dims, _, stays = plan[2]
            return sf.with_dims(small_dims) if stays else value_shape(x)  # type: ignore[return-value]
        if plan[0] == "pad":
            pads = plan[2]
            if pads is None:
                return value_shape(x)  # type: ignore[return-value]
            xs: ArrayShape = value_shape(x)  # type: ignore[assignment]
            dims = (q.low + q.high + n + q.interior * max(n - 1, 0)
                    for q, n in zip(pads, xs.dims, strict=True))  # fmt: skip
            return xs.with_dims(tuple(dims))
        return sf

    @staticmethod
    def _to_shape(plan, st: ArrayShape) -> ArrayShape:
        if plan[0] == "pad":
            return st.with_dims(tuple(len(range(c.start, c.limit, c.stride)) for c in plan[1]))
        if plan[0] == "broadcast":
            return st.with_dims(tuple(n for d, n in enumerate(st.dims) if d not in plan[1]))
        return st

    def _build(self, plan, f: HloOp, x, to, sf: ArrayShape, st: ArrayShape, t: str):
        kind = plan[0]
        if kind == "reverse":
            _, moved, kept = plan
            nt = self.new("reverse", [to], st, {"dimensions": tuple(sorted(moved))}).result
            nf = x if not kept else self.new("reverse", [x], sf,
                                              {"dimensions": tuple(kept)}).result  # fmt: skip
            return nf, nt
        if kind == "pad":
            _, cut, pads = plan
            nt = self.new("slice", [to], self._to_shape(plan, st), {"slice": tuple(cut)}).result
            if pads is None:
                return x, nt
            pad_shape = self._from_shape(plan, sf, x)
            nf = self.new("pad", [x, f.operands[1]], pad_shape, {"padding": tuple(pads)}).result
            return nf, nt
        _, sums, (keep_from, small_dims, bdims, stays) = plan
        zero = self.const(0, shape_array(et(to), []))
        reducer = add_reducer(self.ctx, f, et(to))
        nt = self.new("reduce", [to, zero.result], self._to_shape(plan, st),
                      {"dimensions": tuple(sorted(sums)), "to_apply": reducer}).result  # fmt: skip
        if not stays:
            return x, nt
        nbd = tuple(keep_from.index(d) for d in bdims)
        nf = self.new("broadcast", [x], sf.with_dims(small_dims), {"dimensions": nbd}).result
        return nf, nt


def _to_dot_maps(op: HloOp, sa: ArrayShape, sb: ArrayShape) -> tuple[list[int], list[int]]:
    """For each dim of a dot's lhs and rhs, the result dim it becomes (-1: contracted)."""
    (lb, lc), (rb, rc) = _dims(op, "lhs"), _dims(op, "rhs")
    ma, mb = [-1] * sa.rank, [-1] * sb.rank
    k = 0
    for x, y in zip(lb, rb, strict=True):
        ma[x] = mb[y] = k
        k += 1
    for d in range(sa.rank):
        if d not in lc and d not in lb:
            ma[d] = k
            k += 1
    for d in range(sb.rank):
        if d not in rc and d not in rb:
            mb[d] = k
            k += 1
    return ma, mb


def _true_rank(s: ArrayShape) -> int:
    return sum(1 for n in s.dims if n != 1)


class SliceOfDotToDotOfSlices(Simplification):
    """`slice(dot(a, b)) -> dot(slice(a), slice(b))`: each result dim's slice goes to the
    operand dim it comes from (`raise-slice-and-reduce-through-dot`; not when a sliced
    operand would hold only batch and contracting dims; XLA's rewrite; floats need
    `enable-floats-are-real`: a dot of other sizes may sum in another order on XLA-CPU)."""

    OPCODES = ("slice",)
    OPERAND_FROM = frozenset({"dot"})
    OPTION = "raise_slice_and_reduce_through_dot"
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        d = src(op.operands[0], "dot")
        if self.opts.is_layout_sensitive or d is None or d.attr("sparsity"):
            return None
        a, b = d.operands
        sa, sb = array(value_shape(a)), array(value_shape(b))
        if sa is None or sb is None or sa.is_dynamic or sb.is_dynamic:
            return None
        sl = tuple(op.attr("slice"))
        ma, mb = _to_dot_maps(d, sa, sb)

        def cut(s: ArrayShape, m: list[int]) -> tuple[A.SliceDim, ...]:
            whole = (A.SliceDim(0, n, 1) for n in s.dims)
            return tuple(sl[i] if i >= 0 else w for i, w in zip(m, whole, strict=True))

        ca, cb = cut(sa, ma), cut(sb, mb)

        def sliced(s: ArrayShape, c) -> ArrayShape:
            return s.with_dims(tuple(len(range(x.start, x.limit, x.stride)) for x in c))

        na, nb = sliced(sa, ca), sliced(sb, cb)
        (lb, lc), (rb, rc) = _dims(d, "lhs"), _dims(d, "rhs")
        if len(lb) + len(lc) == _true_rank(na) or len(rb) + len(rc) == _true_rank(nb):
            return None
        if na.dims != sa.dims:
            a = self.new("slice", [a], na, {"slice": ca}).result
        if nb.dims != sb.dims:
            b = self.new("slice", [b], nb, {"slice": cb}).result
        return self.new("dot", [a, b], op.shape, _dot_attrs(d), like=d)


class ReduceOfDotToDotOfReduces(Simplification):
    """`reduce(dot(a, b), 0, add)` over some result dims -> `dot(reduce(a), reduce(b))`, each
    operand summed over the dims those come from, when that saves
    `raise-slice-and-reduce-through-dot-threshold` times the flops (no batch dims; XLA's
    rewrite; floats need `enable-floats-are-real`: the sums regroup)."""

    OPCODES = ("reduce",)
    OPERAND_FROM = frozenset({"dot"})
    OPTION = "raise_slice_and_reduce_through_dot"
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        from hlopass.passes.algsimp.helpers import reducer_opcode
        from hlopass.rewriting import is_zero

        if len(op.operands) != 2:
            return None
        d, init = src(op.operands[0], "dot"), op.operands[1]
        shape = array(op.shape)
        if d is None or shape is None or d.attr("sparsity") or _dims(d, "lhs")[0]:
            return None
        if not is_zero(init) or owner(init) is None or owner(init).OPCODE != "constant":  # type: ignore[union-attr]
            return None
        if reducer_opcode(op) != "add":
            return None
        a, b = d.operands
        sa, sb, sd = array(value_shape(a)), array(value_shape(b)), array(d.shape)
        if sa is None or sb is None or sd is None or sa.is_dynamic or sb.is_dynamic:
            return None
        ma, mb = _to_dot_maps(d, sa, sb)
        dims = tuple(op.attr("dimensions"))
        ra = [i for i, r in enumerate(ma) if r in dims]  # the operand dims summed
        rb_ = [i for i, r in enumerate(mb) if r in dims]
        lc, rc = _dims(d, "lhs")[1], _dims(d, "rhs")[1]
        ka = [x for x in range(sa.rank) if x not in ra]
        kb = [x for x in range(sb.rank) if x not in rb_]
        nlc = tuple(i for i, x in enumerate(ka) if x in lc)
        nrc = tuple(i for i, x in enumerate(kb) if x in rc)
        sra = sa.with_dims(tuple(sa.dims[x] for x in ka))
        srb = sb.with_dims(tuple(sb.dims[x] for x in kb))

        def reduce_flops(s: ArrayShape, rdims, out_elems: int) -> int:
            return out_elems * (math.prod(s.dims[x] for x in rdims) - 1)

        old = 2 * sd.num_elements * math.prod(sa.dims[x] for x in lc)
        old += reduce_flops(sd, dims, shape.num_elements)
        new = reduce_flops(sa, ra, sra.num_elements) + reduce_flops(sb, rb_, srb.num_elements)
        new += 2 * shape.num_elements * math.prod(sra.dims[x] for x in nlc)
        if old / max(new, 1) <= self.opts.raise_slice_and_reduce_through_dot_threshold:
            return None
        reducer = op.attr("to_apply")
        na = self.new("reduce", [a, init], sra, {"dimensions": tuple(ra), "to_apply": reducer})
        nb = self.new("reduce", [b, init], srb, {"dimensions": tuple(rb_), "to_apply": reducer})
        attrs = _dot_attrs(d, lhs_contracting_dims=nlc, rhs_contracting_dims=nrc)
        return self.new("dot", [na.result, nb.result], op.shape, attrs, like=d)


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
EMPTY_AND_SCALAR: tuple[type[Simplification], ...] = (
    DotOfEmpty, DotOfScalars, DotToMultiply, TransposeOfDot, SliceOfDotToDotOfSlices,
    ReduceOfDotToDotOfReduces,
)  # fmt: skip
"""Empty and scalar dots, outer products, and ops of a dot moved onto its operands
(before `dot_reorder`)."""

REWRITES: tuple[type[Simplification], ...] = (
    DotStrengthReduction, DotOfTransposes, DotOfBatchTransposes, DotOperatorReorder,
    DotReorderContractingDims, DotOfConcatenateAndConstant, DotOfDynamicSliceOfConstant,
    DotRemoveDegenerateDims, MoveDotParamToRhs,
)  # fmt: skip
"""Strength reduction, transposes, reordering and degenerate dims (after `dot_reorder`)."""

PATTERNS: tuple[type[Simplification], ...] = (*EMPTY_AND_SCALAR, *REWRITES)
"""This family's rewrites, in the order they fire."""
