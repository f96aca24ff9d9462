"""`algsimp` family: reassociating a dot of a dot (XLA's `AssociativeReorderNestedDot`).

`dot(dot(A, B), C)` becomes `dot(A, dot(B, C))` (and `dot(A, dot(B, C))` becomes
`dot(dot(A, B), C)`) for dots with any batch, free and contracting dims, when the flops of
the two dots drop by more than `associative-reordering-threshold`. Every dim the outer dot
contracts or batches is traced back to the operand of the inner dot it comes from; that
gives the dimension numbers of the three operand pairs (A-B, A-C, B-C), from which the new
inner and outer dots are built; a transpose restores the outer result's dim order where
the new dot orders its batch and free dims differently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape
from hlopass.ir.shape import array as shape_array
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.dot import feeds_unreduced_sharding
from hlopass.passes.algsimp.helpers import array
from hlopass.rewriting import owner, value_shape


@dataclass
class DotDims:
    """The dimension numbers of a dot: batch and contracting dims of each side, in pairs."""

    lb: list[int] = field(default_factory=list)
    rb: list[int] = field(default_factory=list)
    lc: list[int] = field(default_factory=list)
    rc: list[int] = field(default_factory=list)

    @staticmethod
    def of(op: HloOp) -> DotDims:
        dims: list[list[int]] = [list(op.attr(k) or ()) for k in _DIM_KEYS]
        return DotDims(*dims)

    def batch(self, lhs: int, rhs: int) -> None:
        self.lb.append(lhs)
        self.rb.append(rhs)

    def contract(self, lhs: int, rhs: int) -> None:
        self.lc.append(lhs)
        self.rc.append(rhs)

    def attrs(self) -> dict:
        """As dot attributes (empty lists left out, as the parser leaves them)."""
        vals = (self.lb, self.rb, self.lc, self.rc)
        return {k: tuple(v) for k, v in zip(_DIM_KEYS, vals, strict=True) if v}


_DIM_KEYS = ("lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims")


def to_dot_maps(d: DotDims, ra: int, rb: int) -> tuple[list[int], list[int]]:
    """Each dim of a dot's lhs (rank `ra`) and rhs (rank `rb`) to its dim in the result
    (-1: contracted): batch dims first, then lhs free, then rhs free."""
    ma, mb = [-1] * ra, [-1] * rb
    n = 0
    for a, b in zip(d.lb, d.rb, strict=True):
        ma[a], mb[b] = n, n
        n += 1
    for dims, m, rank in ((d.lb + d.lc, ma, ra), (d.rb + d.rc, mb, rb)):
        for i in range(rank):
            if i not in dims:
                m[i] = n
                n += 1
    return ma, mb


def from_dot_maps(d: DotDims, ra: int, rb: int) -> tuple[list[int], list[int]]:
    """Each result dim of a dot to the lhs / rhs dim it comes from (-1: none)."""
    ma, mb = to_dot_maps(d, ra, rb)
    n = 1 + max([*ma, *mb, -1])
    fa, fb = [-1] * n, [-1] * n
    for i, r in enumerate(ma):
        if r >= 0:
            fa[r] = i
    for i, r in enumerate(mb):
        if r >= 0:
            fb[r] = i
    return fa, fb


def dot_dims(d: DotDims, sa: ArrayShape, sb: ArrayShape) -> list[int] | None:
    """The result dims of a dot of `sa` and `sb` (None: the dims do not make a valid dot)."""
    used_a, used_b = d.lb + d.lc, d.rb + d.rc
    if len(set(used_a)) != len(used_a) or len(set(used_b)) != len(used_b):
        return None
    if any(not 0 <= i < sa.rank for i in used_a) or any(not 0 <= i < sb.rank for i in used_b):
        return None
    pairs = zip(d.lb + d.lc, d.rb + d.rc, strict=True)
    if any(sa.dims[a] != sb.dims[b] for a, b in pairs):
        return None
    out = [sa.dims[a] for a in d.lb]
    out += [sa.dims[i] for i in range(sa.rank) if i not in used_a]
    return out + [sb.dims[i] for i in range(sb.rank) if i not in used_b]


def dot_flops(lhs: ArrayShape, result_dims: list[int], d: DotDims) -> int:
    """XLA's `HloCostAnalysis::GetDotFlops`: two per multiply-add."""
    return 2 * math.prod(result_dims) * math.prod(lhs.dims[i] for i in d.lc)


@dataclass
class _Plan:
    """The rewrite worked out: new inner dot (operands, dims, result dims), new outer dims,
    and the transpose of the new outer result back to the old one's order."""

    inner_ops: tuple
    inner_dims: DotDims
    inner_shape: list[int]
    outer_dims: DotDims
    outer_shape: list[int]
    perm: list[int]
    old_flops: int
    new_flops: int


class AssociativeReorderNestedDot(Simplification):
    """`dot(dot(A, B), C) -> dot(A, dot(B, C))` or `dot(A, dot(B, C)) -> dot(dot(A, B), C)`
    (a transpose after it where the dims come out in another order), for dots of any batch
    and contracting dims, when the old flops over the new exceed
    `associative-reordering-threshold` (XLA's `AssociativeReorderNestedDot`).

    Guards (as XLA): `use-associative-reordering`; not with layouts fixed; the lhs is tried
    when it is a dot, else the rhs; no reordering when the outer dot contracts a dim that
    is a batch dim of the inner; not for a dot feeding an unreduced sharding. The new dots
    take the outer dot's precision and element type; the sums regroup, so floats need
    `enable-floats-are-real`. Sparse dots stay."""

    OPCODES = ("dot",)
    OPERAND_FROM = frozenset({"dot"})
    OPTION = "use_associative_reordering"
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        if self.opts.is_layout_sensitive or op.attr("sparsity") or feeds_unreduced_sharding(op):
            return None
        lhs, rhs = (owner(v) for v in op.operands)
        left = lhs is not None and lhs.OPCODE == "dot"
        inner = lhs if left else rhs
        if inner is None or inner.OPCODE != "dot" or inner.attr("sparsity"):
            return None
        shapes = [array(value_shape(v)) for v in (*inner.operands, *op.operands)]
        if any(s is None or s.is_dynamic for s in shapes) or array(op.shape) is None:
            return None
        plan = _plan(op, inner, left)
        if plan is None or plan.new_flops <= 0:
            return None
        if plan.old_flops / plan.new_flops <= self.opts.associative_reordering_threshold:
            return None
        return self._build(op, inner, left, plan)

    def _build(self, op: HloOp, inner: HloOp, left: bool, plan: _Plan):
        t = array(op.shape).element_type  # type: ignore[union-attr]
        precision = {k: op.attr(k) for k in ("operand_precision", "algorithm")
                     if op.attr(k) is not None}  # fmt: skip
        new_inner = self.new("dot", list(plan.inner_ops), shape_array(t, plan.inner_shape),
                             {**plan.inner_dims.attrs(), **precision}, like=inner)  # fmt: skip
        if left:
            operands = [inner.operands[0], new_inner.result]
        else:
            operands = [new_inner.result, inner.operands[1]]
        attrs = {**plan.outer_dims.attrs(), **precision}
        if plan.perm == list(range(len(plan.perm))):
            return self.new("dot", operands, op.shape, attrs, like=op)
        new_outer = self.new("dot", operands, shape_array(t, plan.outer_shape), attrs, like=op)
        return self.new("transpose", [new_outer.result], op.shape,
                        {"dimensions": tuple(plan.perm)}, like=op)  # fmt: skip


def _pair_dims(outer: DotDims, inner_maps, left: bool) -> dict[str, DotDims] | None:
    """The dimension numbers between the operand pairs "ab", "ac", "bc" that the outer
    dot's batch and contracting dims imply (the inner's own pair comes from the inner);
    None where the outer contracts a batch dim of the inner."""
    pairs = {"ab": DotDims(), "ac": DotDims(), "bc": DotDims()}
    # inner lhs / rhs pair with the outer's other operand as: (A-C, B-C) or (A-B, A-C)
    with_other = ("ac", "bc") if left else ("ab", "ac")
    inner_b, other_b = (outer.lb, outer.rb) if left else (outer.rb, outer.lb)
    for i, o in zip(inner_b, other_b, strict=True):
        for side in (0, 1):
            m = inner_maps[side][i]
            if m != -1:
                d = pairs[with_other[side]]
                d.batch(*((m, o) if left else (o, m)))
    inner_c, other_c = (outer.lc, outer.rc) if left else (outer.rc, outer.lc)
    for i, o in zip(inner_c, other_c, strict=True):
        from_l, from_r = inner_maps[0][i] != -1, inner_maps[1][i] != -1
        if from_l and from_r:
            return None  # (XLA stops here: a batch dim of the inner is contracted)
        side = 0 if from_l else 1
        m = inner_maps[side][i]
        if m == -1:
            return None
        pairs[with_other[side]].contract(*((m, o) if left else (o, m)))
    return pairs


def _plan(op: HloOp, inner: HloOp, left: bool) -> _Plan | None:
    """XLA's construction of the reordered dots (None where it does not apply)."""
    other = op.operands[1] if left else op.operands[0]
    il, ir, ot = (array(value_shape(v)) for v in (*inner.operands, other))
    out, inner_out = array(op.shape), array(inner.shape)
    assert il is not None and ir is not None and ot is not None and out is not None
    inner_d, outer_d = DotDims.of(inner), DotDims.of(op)
    pairs = _pair_dims(outer_d, from_dot_maps(inner_d, il.rank, ir.rank), left)
    if pairs is None or inner_out is None:
        return None
    pairs["ab" if left else "bc"] = inner_d
    # left: il (ir ot), the new inner pairs B with C; right: (ot il) ir, A with B
    ni_l, ni_r = (ir, ot) if left else (ot, il)
    ni_d = pairs["bc" if left else "ab"]
    ni_shape = dot_dims(ni_d, ni_l, ni_r)
    if ni_shape is None:
        return None
    to_l, to_r = to_dot_maps(ni_d, ni_l.rank, ni_r.rank)
    no_d = DotDims()
    for k, key in enumerate(("ab", "ac") if left else ("ac", "bc")):
        d, m = pairs[key], (to_l if k == 0 else to_r)
        for xs, ys, contract in ((d.lb, d.rb, False), (d.lc, d.rc, True)):
            for x, y in zip(xs, ys, strict=True):
                ni, kept = (y, x) if left else (x, y)
                if m[ni] == -1:
                    return None
                li, ri = (kept, m[ni]) if left else (m[ni], kept)
                if contract:
                    no_d.contract(li, ri)
                elif li not in no_d.lb:  # (a batch dim of all three comes twice)
                    no_d.batch(li, ri)
    ni_arr = shape_array(out.element_type, ni_shape)
    no_l, no_r = (il, ni_arr) if left else (ni_arr, ir)
    no_shape = dot_dims(no_d, no_l, no_r)
    if no_shape is None or sorted(no_shape) != sorted(out.dims):
        return None
    outer_lhs = array(value_shape(op.operands[0]))
    assert outer_lhs is not None
    old_flops = dot_flops(il, list(inner_out.dims), inner_d)
    old_flops += dot_flops(outer_lhs, list(out.dims), outer_d)
    new_flops = dot_flops(ni_l, ni_shape, ni_d) + dot_flops(no_l, list(out.dims), no_d)
    perm = _permutation(op, inner, left, (il, ir), ni_d, (ni_l, ni_r), no_d, (no_l, no_r))
    if perm is None or [no_shape[p] for p in perm] != list(out.dims):
        return None
    ops = (inner.operands[1], other) if left else (other, inner.operands[0])
    return _Plan(ops, ni_d, ni_shape, no_d, no_shape, perm, old_flops, new_flops)


def _at(m: list[int], i: int) -> int:
    """`m[i]`, -1 for a dim that is not there (i = -1)."""
    return m[i] if 0 <= i < len(m) else -1


def _permutation(op, inner, left, inner_shapes, ni_d, ni_shapes, no_d, no_shapes):
    """For each dim of the old outer result, the dim of the new outer result holding it
    (XLA's walk through the old and new dots' dim maps); None where one is missing."""
    inner_l, inner_r = from_dot_maps(DotDims.of(inner), *(s.rank for s in inner_shapes))
    ranks = (getattr(value_shape(v), "rank", 0) for v in op.operands)
    outer_l, outer_r = from_dot_maps(DotDims.of(op), *ranks)
    outer_inner, outer_other = (outer_l, outer_r) if left else (outer_r, outer_l)
    inner_kept = inner_l if left else inner_r  # the inner operand that stays outside
    to_l, to_r = to_dot_maps(ni_d, *(s.rank for s in ni_shapes))
    other_to_ni = to_r if left else to_l
    no_l, no_r = to_dot_maps(no_d, *(s.rank for s in no_shapes))
    ni_to_no, kept_to_no = (no_r, no_l) if left else (no_l, no_r)
    perm = []
    for i in range(len(outer_l)):
        if outer_other[i] != -1:  # from the outer's other operand, now in the new inner
            j = _at(ni_to_no, _at(other_to_ni, outer_other[i]))
        elif _at(inner_kept, outer_inner[i]) != -1:  # from the operand staying outside
            j = _at(kept_to_no, inner_kept[outer_inner[i]])
        else:  # from the inner operand that moved into the new inner
            moved = inner_r if left else inner_l
            j = _at(ni_to_no, _at(to_l if left else to_r, _at(moved, outer_inner[i])))
        if j < 0:
            return None
        perm.append(j)
    return perm if sorted(perm) == list(range(len(perm))) else None


PATTERNS: tuple[type[Simplification], ...] = (AssociativeReorderNestedDot,)
"""This family's rewrites, in the order they fire."""
