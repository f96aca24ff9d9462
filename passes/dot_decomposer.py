"""`dot-decomposer`: every dot into the canonical form (XLA's DotDecomposer), which the
GPU pipeline runs before `gemm-fusion`.

`dot(a, b)` -> `reshape(dot(reshape(transpose(a)), reshape(transpose(b))))` where each
operand is transposed to [batch, non-contracting, contracting] (the LHS) or [batch,
contracting, non-contracting] (the RHS) and reshaped to its batch dimensions, one
non-contracting dimension (left out where its size is 1) and one contracting dimension;
the result is reshaped back to the dot's shape. Each output element is the same sum of
the same products (our interpreter gives the same bits; XLA:CPU may round a bf16 dot of
another form differently, within the error analysis' bound).

Guards: a dot is rewritten unless both operands are canonical already (one contracting
dimension, at most one non-contracting dimension, the batch dimensions first and in
order). Differs from XLA's: a dot with dynamic dimensions or control edges is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape, array
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    control_predecessor_names,
    expand_in_post_order,
    new_op,
)


def _arr(value: SSAValue) -> ArrayShape:
    return value.type.data  # type: ignore[attr-defined]


def is_canonical(rank: int, contracting: tuple[int, ...], batch: tuple[int, ...]) -> bool:
    """XLA's IsCanonical of one operand."""
    if len(contracting) != 1 or len(batch) + 2 < rank:
        return False
    return tuple(batch) == tuple(range(len(batch)))


@dataclass
class CanonicalizeDot(RewritePattern):
    """`dot(a, b)` -> `reshape(dot(reshape(transpose(a)), reshape(transpose(b))))` with
    [batch, non-contracting, contracting] x [batch, contracting, non-contracting] operands.

    Guards: not both operands canonical; no dynamic dimensions; no control edges."""

    OPCODES: ClassVar[tuple[str, ...]] = ("dot",)

    ctx: RewriteContext
    pinned: frozenset[str] = frozenset()

    def _operand(self, rewriter: PatternRewriter, dot: HloOp, side: int,
                 minor_contracting: bool) -> tuple[SSAValue, int]:  # fmt: skip
        """XLA's CanonicalizeOperand: the reshaped operand and its contracting dimension."""
        key = "lhs" if side == 0 else "rhs"
        batch = tuple(dot.attr(f"{key}_batch_dims") or ())
        contracting = tuple(dot.attr(f"{key}_contracting_dims") or ())
        v = dot.operands[side]
        s = _arr(v)
        nc = [d for d in range(s.rank) if d not in contracting and d not in batch]
        c_size = nc_size = 1
        for d in contracting:
            c_size *= s.dims[d]
        for d in nc:
            nc_size *= s.dims[d]
        inner = [*nc, *contracting] if minor_contracting else [*contracting, *nc]
        perm = [*batch, *inner]
        src = v.owner if isinstance(v.owner, HloOp) else None
        t = new_op(rewriter, self.ctx, "transpose", [v], array(s.element_type, [s.dims[p] for p in perm]),
                   {"dimensions": tuple(perm)}, like=src, before=dot)  # fmt: skip
        dims = [s.dims[d] for d in batch]
        nc_dims = [nc_size] if nc_size != 1 else []
        dims += [*nc_dims, c_size] if minor_contracting else [c_size, *nc_dims]
        where = len(batch) + (len(nc_dims) if minor_contracting else 0)
        r = new_op(rewriter, self.ctx, "reshape", [t.result], array(s.element_type, dims),
                   like=t, before=dot)  # fmt: skip
        return r.result, where

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        if op.inst_name in self.pinned or op.attr("control-predecessors"):
            return
        shapes = [_arr(op.operands[0]), _arr(op.operands[1]), op.shape]
        if any(not isinstance(s, ArrayShape) or s.is_dynamic for s in shapes):
            return
        if all(
            is_canonical(
                shapes[i].rank,
                tuple(op.attr(f"{k}_contracting_dims") or ()),
                tuple(op.attr(f"{k}_batch_dims") or ()),
            )  # fmt: skip
            for i, k in ((0, "lhs"), (1, "rhs"))
        ):
            return
        n_batch = len(op.attr("lhs_batch_dims") or ())
        lhs, lc = self._operand(rewriter, op, 0, True)
        rhs, rc = self._operand(rewriter, op, 1, False)
        ls, rs = _arr(lhs), _arr(rhs)
        out = list(ls.dims[:n_batch])
        out += [d for i, d in enumerate(ls.dims) if i >= n_batch and i != lc]
        out += [d for i, d in enumerate(rs.dims) if i >= n_batch and i != rc]
        attrs = {
            "lhs_batch_dims": tuple(range(n_batch)),
            "rhs_batch_dims": tuple(range(n_batch)),
            "lhs_contracting_dims": (lc,),
            "rhs_contracting_dims": (rc,),
        }
        for name in ("operand_precision", "algorithm", "frontend_attributes", "sharding"):
            value = op.attr(name)
            if value is not None:
                attrs[name] = value
        dot = new_op(rewriter, self.ctx, "dot", [lhs, rhs], array(op.shape.element_type, out),  # type: ignore[attr-defined]
                     {k: v for k, v in attrs.items() if v != ()}, like=op, before=op)  # fmt: skip
        back = new_op(rewriter, self.ctx, "reshape", [dot.result], op.shape, like=op, before=op)
        op.result.replace_all_uses_with(back.result)
        rewriter.erase(op)


@dataclass(frozen=True)
class DotDecomposerPass(HloModulePass):
    """Rewrite every dot into XLA's canonical [batch, m, k] x [batch, k, n] form."""

    name: ClassVar[str] = "dot-decomposer"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        pattern = CanonicalizeDot(rctx, frozenset(control_predecessor_names(module)))
        return expand_in_post_order(module, {"dot": pattern})
