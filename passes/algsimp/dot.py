"""`algsimp` family: dot.

Guards kept from XLA: a dot with a precision algorithm (other than plain f32) or a non-default
operand precision stays a dot (its rounding is part of what the user asked for), no dot
rewrite runs when layouts are fixed (`is-layout-sensitive`), and the rewrites into a
multiply need `enable-dot-to-multiply-rewrite`.
"""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import add_reducer, array, et, src
from hlopass.rewriting import value_shape
from hlopass.shape import ArrayShape
from hlopass.shape import array as shape_array

_PLAIN_ALGORITHMS = (None, "unset", "dot_f32_f32_f32")


def plain_precision(op: HloOp) -> bool:
    """No precision algorithm (or plain f32) and default precision for both operands."""
    if op.attr("algorithm") not in _PLAIN_ALGORITHMS:
        return False
    return all(p == "default" for p in (op.attr("operand_precision") or ()))


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
        a, b = op.operands
        sa, sb, shape = array(value_shape(a)), array(value_shape(b)), array(op.shape)
        if sa is None or sb is None or shape is None or shape.is_dynamic:
            return None
        t = shape.element_type
        if et(a) != t or et(b) != t or t == "pred" or t in ("c64", "c128"):
            return None
        (lb, lc), (rb, rc) = _dims(op, "lhs"), _dims(op, "rhs")
        lf = [d for d in range(sa.rank) if d not in lb + lc]
        rf = [d for d in range(sb.rank) if d not in rb + rc]
        if (lf and rf) or not lc:
            return None  # a matrix product (or an outer product: DotToMultiply)
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


class DotAssociativeReordering(Simplification):
    """`dot(dot(A, B), C) -> dot(A, dot(B, C))` and `dot(A, dot(B, C)) -> dot(dot(A, B), C)`
    for rank-2 matrix products when the other order needs `associative-reordering-threshold`
    times fewer multiplies (`use-associative-reordering`; the inner dot has no other user,
    one element type; the sums regroup, so floats need `enable-floats-are-real`)."""

    OPCODES = ("dot",)
    OPERAND_FROM = frozenset({"dot"})
    OPTION = "use_associative_reordering"
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        if self.opts.is_layout_sensitive or not _matmul(op):
            return None
        t = et(op)
        lhs, rhs = (src(v, "dot") for v in op.operands)
        for inner, left in ((lhs, True), (rhs, False)):
            if not _matmul(inner) or not inner.result.has_one_use():  # type: ignore[union-attr]
                continue
            if {et(v) for v in (*inner.operands, inner.result)} != {t}:  # type: ignore[union-attr]
                continue
            if left:
                a, b, c = *inner.operands, op.operands[1]  # type: ignore[union-attr]
            else:
                a, b, c = op.operands[0], *inner.operands  # type: ignore[union-attr]
            if et(a) != t or et(c) != t:
                continue
            (m, k), (_, n), (_, p) = (value_shape(v).dims for v in (a, b, c))  # type: ignore[attr-defined]
            ab_c, a_bc = m * k * n + m * n * p, k * n * p + m * k * p
            now, other = (ab_c, a_bc) if left else (a_bc, ab_c)
            if other * self.opts.associative_reordering_threshold > now:
                continue
            attrs = {"lhs_contracting_dims": (1,), "rhs_contracting_dims": (0,)}
            if left:  # A (B C)
                bc = self.new("dot", [b, c], shape_array(t, [k, p]), attrs, like=inner)
                return self.new("dot", [a, bc.result], op.shape, attrs, like=op)
            ab = self.new("dot", [a, b], shape_array(t, [m, n]), attrs, like=inner)
            return self.new("dot", [ab.result, c], op.shape, attrs, like=op)
        return None


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
        if self.opts.is_layout_sensitive or op.attr("sparsity"):
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
        attrs = {"lhs_contracting_dims": rc, "rhs_contracting_dims": lc}
        if nb:
            attrs["lhs_batch_dims"] = tuple(rb[p] for p in perm[:nb])
            attrs["rhs_batch_dims"] = tuple(lb[p] for p in perm[:nb])
        _swapped_precision(d, attrs)
        return self.new("dot", [b, a], op.shape, attrs, like=d)
