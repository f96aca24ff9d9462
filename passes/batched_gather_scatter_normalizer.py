"""`batched-gather-scatter-normalizer`: gathers and scatters with batching dimensions into
ones without (XLA's BatchedGatherScatterNormalizer, the first rewrite of XLA's GPU
"optimization" pipeline; its emitters take no batching dimensions).

A batching dimension pairs an operand dimension with an indices dimension: slice i of the
indices reads (writes) slice i of the operand. The same access without batching dims
spells that index out: an iota along each indices batching dimension is concatenated in
front of the indices' index vector, the operand batching dims are prepended to the index
map (`start_index_map`, `scatter_dims_to_operand_dims`) and become collapsed (inserted)
window dims. Same elements read and written in the same order: values are bit-identical.

    gather(x, idx), operand_batching_dims={0}, start_indices_batching_dims={0},
      start_index_map={1}, collapsed_slice_dims={1}, index_vector_dim=2
    -> gather(x, concatenate(iota(), idx)), start_index_map={0,1},
      collapsed_slice_dims={0,1}, index_vector_dim=2

Where the index vector dim is past the last indices dim, the indices are reshaped to a
trailing dim of 1 first; where a batching dim's size does not fit the indices' integer
type, they are converted to s32 (or s64) first. `indices_are_sorted` stays only where the
indices batching dims and the new index map are both sorted. Guard (XLA's): a gather
whose operand batching dims overlap its `start_index_map` is left alone (the new map
would name a dim twice). Differs from XLA's: an instruction with control edges is left
alone. New instructions take the default layout (the pass runs before layout assignment).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ELEMENT_BITS, ArrayShape, array, is_integral
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    control_predecessor_names,
    expand_in_post_order,
    new_op,
    replace_with_new,
)


def _fits(size: int, element_type: str) -> bool:
    """XLA's FitsInIntegralType: `size` is a value of the integer type."""
    bits = ELEMENT_BITS[element_type]
    if element_type.startswith("u"):
        return 0 <= size < (1 << bits)
    return -(1 << (bits - 1)) <= size < (1 << (bits - 1))


def _promoted(element_type: str, size: int) -> str:
    """XLA's PromoteTypeForSize: s32 or s64 where `size` does not fit `element_type`."""
    if not is_integral(element_type) or _fits(size, element_type):
        return element_type
    return "s32" if _fits(size, "s32") else "s64"


def _sorted(dims: tuple[int, ...]) -> bool:
    return list(dims) == sorted(dims)


def concat_indices(rewriter: PatternRewriter, ctx: RewriteContext, op: HloOp, indices: SSAValue,
                   index_vector_dim: int, batching: tuple[int, ...]) -> SSAValue:  # fmt: skip
    """XLA's CreateConcatIndices: an iota per indices batching dim, then the indices,
    concatenated along the index vector dim."""
    shape: ArrayShape = indices.type.data  # type: ignore[attr-defined]
    t = shape.element_type
    for d in batching:
        t = _promoted(t, shape.dims[d])
    if t != shape.element_type:
        shape = array(t, shape.dims)
        indices = new_op(rewriter, ctx, "convert", [indices], shape, like=op, before=op).result
    dims = list(shape.dims)
    on_last = index_vector_dim == len(dims)
    if on_last:
        dims.append(1)
        indices = new_op(rewriter, ctx, "reshape", [indices], array(t, dims), like=op,
                         before=op).result  # fmt: skip
    iota_dims = list(dims)
    iota_dims[index_vector_dim] = 1
    parts = [
        new_op(
            rewriter,
            ctx,
            "iota",
            [],
            array(t, iota_dims),
            {"iota_dimension": d},
            like=op,
            before=op,
        ).result  # fmt: skip
        for d in batching
    ]
    out_dims = list(iota_dims)
    out_dims[index_vector_dim] = len(batching) + dims[index_vector_dim]
    cat = new_op(rewriter, ctx, "concatenate", [*parts, indices], array(t, out_dims),
                 {"dimensions": (index_vector_dim,)}, like=op, before=op)  # fmt: skip
    return cat.result


_KEPT = ("sharding", "frontend_attributes")


def _replace(rewriter: PatternRewriter, ctx: RewriteContext, op: HloOp,
             operands: list[SSAValue], attrs: dict) -> None:  # fmt: skip
    """`op` replaced by a new instruction of its opcode (its sharding and frontend
    attributes carried over)."""
    for name in _KEPT:
        value = op.attr(name)
        if value is not None:
            attrs[name] = value
    replace_with_new(rewriter, ctx, op, op.opcode, operands, attrs=attrs)


@dataclass
class NormalizeBatchGather(RewritePattern):
    """`gather(x, idx)` with batching dims -> `gather(x, concatenate(iota.., idx))` without:
    the operand batching dims prepended to `start_index_map` and added to
    `collapsed_slice_dims`.

    Guards: batching dims present; none of them in `start_index_map`; no control edges."""

    OPCODES: ClassVar[tuple[str, ...]] = ("gather",)

    ctx: RewriteContext
    pinned: frozenset[str] = frozenset()

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        operand_batching = tuple(op.attr("operand_batching_dims") or ())
        start_index_map = tuple(op.attr("start_index_map") or ())
        if not operand_batching or set(operand_batching) & set(start_index_map):
            return
        if op.inst_name in self.pinned or op.attr("control-predecessors"):
            return
        indices_batching = tuple(op.attr("start_indices_batching_dims") or ())
        ivd = op.attr("index_vector_dim")
        x, idx = op.operands[0], op.operands[1]
        new_map = operand_batching + start_index_map
        collapsed: tuple[int, ...] = tuple(op.attr("collapsed_slice_dims") or ())
        attrs = {
            "offset_dims": tuple(op.attr("offset_dims") or ()),
            "collapsed_slice_dims": tuple(sorted(collapsed + operand_batching)),
            "start_index_map": new_map,
            "index_vector_dim": ivd,
            "slice_sizes": tuple(op.attr("slice_sizes") or ()),
        }
        if op.attr("indices_are_sorted") and _sorted(indices_batching) and _sorted(new_map):
            attrs["indices_are_sorted"] = True
        cat = concat_indices(rewriter, self.ctx, op, idx, ivd, indices_batching)
        _replace(rewriter, self.ctx, op, [x, cat], attrs)


@dataclass
class NormalizeBatchScatter(RewritePattern):
    """`scatter(xs.., idx, us..)` with batching dims -> `scatter(xs.., concatenate(iota..,
    idx), us..)` without: the input batching dims prepended to
    `scatter_dims_to_operand_dims` and added to `inserted_window_dims`.

    Guards: batching dims present; no control edges."""

    OPCODES: ClassVar[tuple[str, ...]] = ("scatter",)

    ctx: RewriteContext
    pinned: frozenset[str] = frozenset()

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        input_batching = tuple(op.attr("input_batching_dims") or ())
        if not input_batching:
            return
        if op.inst_name in self.pinned or op.attr("control-predecessors"):
            return
        indices_batching = tuple(op.attr("scatter_indices_batching_dims") or ())
        ivd = op.attr("index_vector_dim")
        n = (len(op.operands) - 1) // 2
        idx = op.operands[n]
        new_map = input_batching + tuple(op.attr("scatter_dims_to_operand_dims") or ())
        inserted: tuple[int, ...] = tuple(op.attr("inserted_window_dims") or ())
        attrs = {
            "update_window_dims": tuple(op.attr("update_window_dims") or ()),
            "inserted_window_dims": tuple(sorted(inserted + input_batching)),
            "scatter_dims_to_operand_dims": new_map,
            "index_vector_dim": ivd,
            "to_apply": op.attr("to_apply"),
        }
        if op.attr("indices_are_sorted") and _sorted(indices_batching) and _sorted(new_map):
            attrs["indices_are_sorted"] = True
        if op.attr("unique_indices"):
            attrs["unique_indices"] = True
        cat = concat_indices(rewriter, self.ctx, op, idx, ivd, indices_batching)
        operands = [*op.operands[:n], cat, *op.operands[n + 1 :]]
        _replace(rewriter, self.ctx, op, operands, attrs)


@dataclass(frozen=True)
class BatchedGatherScatterNormalizerPass(HloModulePass):
    """Rewrite gathers and scatters with batching dims into ones without (XLA's
    BatchedGatherScatterNormalizer)."""

    name: ClassVar[str] = "batched-gather-scatter-normalizer"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        pinned = frozenset(control_predecessor_names(module))
        patterns = {
            "gather": NormalizeBatchGather(rctx, pinned),
            "scatter": NormalizeBatchScatter(rctx, pinned),
        }
        return expand_in_post_order(module, patterns)
