"""`topk-rewriter`: a sort whose every use keeps the first K along the sorted dimension
becomes a `TopK` custom call (XLA's TopkRewriter, which XLA's GPU compiler runs before SPMD
partitioning with every such sort found profitable).

`slice(gte(sort(x, iota), 0))` and `slice(gte(sort(x, iota), 1))` keeping `[0:K]` along the
sort dimension -> the two parts of `custom-call(x), custom_call_target="TopK"` (the call's
backend config records the sort's stability, `{is_stable = true}`). A single-operand
`sort(x)` whose slices read the values works the same. The call takes `[n]` or `[batch, n]`
with the sorted dimension last: a sort along dimension 0 of a matrix is transposed in and
out, a rank > 2 operand reshaped to `[batch, n]` and back.

Guards (XLA's SortIsInTopK and TransformPatternToCustomCall): one operand, or two whose
second is an s32 iota along the sort dimension (or its broadcast); a comparator XLA calls
NaN-safe greater-than (`comparators.is_nan_safe_gt`); every user (of each tuple part) a
unit-stride slice that keeps everything along the other dimensions and the same `[0:K]`
along the sort dimension; f32 or bf16 values; the sort dimension the first or the last.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape, TupleShape, array
from hlopass.passes.topk.common import TOPK_TARGET
from hlopass.passes.topk.comparators import is_nan_safe_gt
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    comps_by_name,
    new_op,
    owner,
    replace_op,
    run_patterns,
    unfused_computations,
)

_TYPES = frozenset({"f32", "bf16"})


def _users(op: HloOp) -> list[HloOp]:
    return [u.operation for u in op.result.uses if isinstance(u.operation, HloOp)]


def _has_iota(sort: HloOp, dim: int) -> bool:
    """The sort's second operand is an s32 iota along `dim`, or a broadcast of a 1-D one."""
    second = owner(sort.operands[1])
    if second is None or second.shape.element_type != "s32":  # type: ignore[attr-defined]
        return False
    if second.opcode == "iota":
        return second.attr("iota_dimension") == dim
    inner = owner(second.operands[0]) if second.opcode == "broadcast" else None
    return (inner is not None and inner.opcode == "iota" and inner.shape.rank == 1  # type: ignore[attr-defined]
            and tuple(second.attr("dimensions") or ()) == (dim,))  # fmt: skip


def _slices(sort: HloOp, dim: int) -> list[HloOp] | None:
    """Every slice reading the sort (through its tuple parts), when each keeps `[0:K]`
    along `dim` with one K and everything along the other dimensions; else None."""
    found: list[HloOp] = []
    for user in _users(sort):
        if len(sort.operands) == 2:
            inner = _users(user)
            if user.opcode != "get-tuple-element" or len(inner) != 1:
                return None
            user = inner[0]
        if user.opcode != "slice":
            return None
        found.append(user)
    ks = set()
    for s in found:
        src = s.operands[0].type.data  # type: ignore[attr-defined]
        for i, w in enumerate(s.attr("slice")):
            if w.stride != 1 or (i != dim and (w.start != 0 or w.limit != src.dims[i])):
                return None
        ks.add(s.attr("slice")[dim].limit)
    return found if len(ks) == 1 else None


@dataclass
class SortToTopK(RewritePattern):
    """`slice(sort(x[, iota]))` keeping the first K -> the parts of a `TopK` custom call.

    Guards: see the module docstring (XLA's SortIsInTopK, f32/bf16, first or last dim)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("sort",)

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        if len(op.operands) not in (1, 2) or op.attr("control-predecessors"):
            return
        data = op.operands[0].type.data  # type: ignore[attr-defined]
        dim = (op.attr("dimensions") or (0,))[0]
        if not isinstance(data, ArrayShape) or data.element_type not in _TYPES:
            return
        if dim not in (0, data.rank - 1) or (len(op.operands) == 2 and not _has_iota(op, dim)):
            return
        comp = comps_by_name(self.ctx.module).get(str(op.attr("to_apply")))
        if comp is None or not is_nan_safe_gt(comp):
            return
        slices = _slices(op, dim)
        if not slices:
            return
        k = slices[0].attr("slice")[dim].limit
        self.ctx.note(self, op, f"k={k}")
        values, indices = self._call(rewriter, op, data, dim, k)
        for s in slices:
            src = owner(s.operands[0])
            part = indices if src is not None and src.attr("index") == 1 else values
            replace_op(rewriter, s, self._restart(rewriter, s, part, dim))
        for user in _users(op):
            rewriter.erase(user)
        rewriter.erase(op)

    def _call(self, rewriter: PatternRewriter, sort: HloOp, data: ArrayShape, dim: int,
              k: int) -> tuple[SSAValue, SSAValue]:  # fmt: skip
        """The TopK call over `[batch, n]` (or `[n]`) and its parts in `data`'s layout."""
        ctx, x, et = self.ctx, sort.operands[0], data.element_type
        n = data.dims[dim]
        batch = math.prod(data.dims) // n

        def mk(opc, vals, shape, attrs=None):
            return new_op(rewriter, ctx, opc, vals, shape, attrs, like=sort, before=sort).result

        if data.rank > 2:
            x = mk("reshape", [x], array(et, (n, batch) if dim == 0 else (batch, n)))
        if data.rank >= 2 and dim == 0:
            x = mk("transpose", [x], array(et, (batch, n)), {"dimensions": (1, 0)})
        lead = (batch,) if data.rank >= 2 else ()
        parts = (array(et, (*lead, k)), array("s32", (*lead, k)))
        stable = "true" if sort.attr("is_stable") else "false"
        call = mk("custom-call", [x], TupleShape(parts),
                  {"custom_call_target": TOPK_TARGET, "called_computations": (sort.attr("to_apply"),),
                   "backend_config": f"{{is_stable = {stable}}}"})  # fmt: skip
        out = [mk("get-tuple-element", [call], parts[i], {"index": i}) for i in (0, 1)]
        for i, part in enumerate(parts):
            v = out[i]
            if data.rank >= 2 and dim == 0:
                v = mk("transpose", [v], array(part.element_type, (k, batch)),
                       {"dimensions": (1, 0)})  # fmt: skip
            if data.rank > 2:
                dims = list(data.dims)
                dims[dim] = k
                v = mk("reshape", [v], array(part.element_type, tuple(dims)))
            out[i] = v
        return out[0], out[1]

    def _restart(self, rewriter: PatternRewriter, s: HloOp, part: SSAValue, dim: int) -> SSAValue:
        """The slice's value read off the TopK part: the part itself when the slice starts
        at 0, else the same slice of the part (XLA retargets the slice)."""
        if s.attr("slice")[dim].start == 0:
            return part
        return new_op(rewriter, self.ctx, "slice", [part], s.shape, {"slice": s.attr("slice")},
                      like=s, before=s).result  # fmt: skip


@dataclass(frozen=True)
class TopkRewriterPass(HloModulePass):
    """Rewrite sorts read only through their first K elements into `TopK` custom calls."""

    name: ClassVar[str] = "topk-rewriter"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        comps = unfused_computations(module)
        return run_patterns(module, [SortToTopK(rctx)], comps)
