"""`dot-dimension-merger` (XLA's DotDimensionMerger): a dot's batch dimensions merged into
one, which XLA's GPU compiler runs right after layout assignment, before GEMM fusion (whose
Triton emitter takes one batch dimension only, and cuBLAS one batch stride).

`dot(a, b)` with batch dimensions i..i+n-1 of `a` and j..j+n-1 of `b` (n >= 2) ->
`reshape(dot(reshape(a), reshape(b)))`: each operand's batch dimensions reshaped into the
first of them (size the product of theirs), the dot's contracting dimensions renumbered, and
the dot's result (batch dimensions first) reshaped back. Each operand's layout is its old
one with the merged dimensions dropped, so where the batch dimensions sit together in
memory each reshape is a bitcast. Every output element is the same sum of the same
products: the values do not change.

Guards (XLA's): two or more batch dimensions, consecutive and in increasing order on each
side, and consecutive in each operand's layout. Differs from XLA's: a dot with dynamic
dimensions, control edges, or a layout with tiles or other extras is left alone (XLA
merges those as well).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape, Layout, default_layout
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


def _m2m(shape: ArrayShape) -> tuple[int, ...]:
    return (shape.layout or default_layout(shape.rank)).minor_to_major


def mergeable(batch: tuple[int, ...], shape: ArrayShape) -> bool:
    """XLA's guard on one side: batch dimensions logically consecutive and sorted, and
    next to each other (in any order) in the layout."""
    if list(batch) != list(range(batch[0], batch[0] + len(batch))):
        return False
    m2m = _m2m(shape)
    where = sorted(m2m.index(d) for d in batch)
    return where[-1] - where[0] == len(where) - 1


def merged(shape: ArrayShape, first: int, count: int) -> ArrayShape:
    """`shape` with dimensions first..first+count-1 merged into `first` (XLA's
    DeleteDimension on the rest: each is dropped from the layout, higher ones renumbered)."""
    size = 1
    for d in shape.dims[first : first + count]:
        size *= d
    dims = (*shape.dims[:first], size, *shape.dims[first + count :])
    gone = count - 1
    m2m = tuple(d if d <= first else d - gone for d in _m2m(shape) if not first < d < first + count)
    return ArrayShape(shape.element_type, dims, (), Layout(m2m))


def _shifted(dims: tuple[int, ...], start: int, shift: int) -> tuple[int, ...]:
    return tuple(d if d < start else d - shift for d in dims)


@dataclass
class MergeBatchDimensions(RewritePattern):
    """`dot(a, b)` with n >= 2 batch dimensions -> `reshape(dot(reshape(a), reshape(b)))`
    with one batch dimension, the product of theirs.

    Guards: at least two batch dimensions; on each side consecutive, sorted, and
    consecutive in the layout; no dynamic dimensions, no layout extras, no control edges."""

    OPCODES: ClassVar[tuple[str, ...]] = ("dot",)

    ctx: RewriteContext
    pinned: frozenset[str] = frozenset()

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        lb: tuple[int, ...] = tuple(op.attr("lhs_batch_dims") or ())
        rb: tuple[int, ...] = tuple(op.attr("rhs_batch_dims") or ())
        if len(lb) < 2 or len(rb) != len(lb):
            return
        if op.inst_name in self.pinned or op.attr("control-predecessors"):
            return
        shapes = [_arr(op.operands[0]), _arr(op.operands[1]), op.shape]
        if any(
            not isinstance(s, ArrayShape)
            or s.is_dynamic
            or (s.layout is not None and s.layout.has_extras())
            for s in shapes
        ):
            return
        if not mergeable(lb, shapes[0]) or not mergeable(rb, shapes[1]):
            return
        n = len(lb)
        operands = []
        for v, s, first in ((op.operands[0], shapes[0], lb[0]), (op.operands[1], shapes[1], rb[0])):
            r = new_op(rewriter, self.ctx, "reshape", [v], merged(s, first, n), like=op, before=op)
            operands.append(r.result)
        attrs = {
            "lhs_batch_dims": (lb[0],),
            "rhs_batch_dims": (rb[0],),
            "lhs_contracting_dims": _shifted(tuple(op.attr("lhs_contracting_dims") or ()), lb[0], n - 1),
            "rhs_contracting_dims": _shifted(tuple(op.attr("rhs_contracting_dims") or ()), rb[0], n - 1),
        }  # fmt: skip
        for name in ("operand_precision", "algorithm"):  # XLA's precision_config
            value = op.attr(name)
            if value is not None:
                attrs[name] = value
        out = merged(shapes[2], 0, n)  # type: ignore[arg-type]
        dot = new_op(rewriter, self.ctx, "dot", operands, out,
                     {k: v for k, v in attrs.items() if v != ()}, like=op, before=op)  # fmt: skip
        back = new_op(rewriter, self.ctx, "reshape", [dot.result], op.shape, like=op, before=op)
        op.result.replace_all_uses_with(back.result)
        rewriter.erase(op)


@dataclass(frozen=True)
class DotDimensionMergerPass(HloModulePass):
    """Merge each dot's consecutive batch dimensions into one."""

    name: ClassVar[str] = "dot-dimension-merger"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        pattern = MergeBatchDimensions(rctx, frozenset(control_predecessor_names(module)))
        return expand_in_post_order(module, {"dot": pattern})
