"""`tree-reduction-rewriter`: split a reduction too long for one race-free kernel into two
reductions (XLA's GPU `TreeReductionRewriter`, which XLA runs before fusion, after its
reduction-dimension grouper).

XLA's reduction emitters reduce a row of up to 1024 x 16 elements (at most 8 batched rows)
or a column of up to 32 x 128 elements in one thread block without atomics; a longer
reduction is rewritten as a tree: the reduced dimension `n` is padded to `k1 * k2` (with the
init value), reshaped to `[k1, k2]`, reduced over `k2` and then over `k1`. `k2` is about
`sqrt(n)` (at most the race-free bound), moved down to the divisor that needs the least
padding (a power of two on ties), and `k1`/`k2` are swapped when the larger fits the bound
(always for columns). A batched row reduction with more than 8 rows reduces the rows first,
then the batch. Both rewrites are XLA's rules (race freedom), not a pricing; the cost model
sees the two kernels afterwards, where fusion prices them.

Only reductions the unnested emitter takes (`is_unnested_reduction`: reduced or kept
dimensions contiguous, faster than the loop emitter) are split, single-input ones with the
default layout (the grouping into at most three dimensions is then a plain reshape).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp, computations
from hlopass.ir.attrs import PadDim
from hlopass.ir.shape import ArrayShape, default_layout
from hlopass.kernel_structure.emitter import is_unnested_reduction, physical_groups, reduction_dims
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    fusion_computations,
    new_op,
    run_patterns,
)

MIN_THREADS_X_ROW_REDUCTION = 1024
"""XLA `MinThreadsXRowReduction`."""
ROW_TILE = 16
"""XLA `GetReductionTiling` for rows: 16 elements per thread."""
COLUMN_TILE = 128
"""XLA `GetReductionTiling` for columns: 128 rows per block."""
WARP = 32
BATCHED_RACE_FREE_BOUND = 8
"""XLA `BatchedReductionRaceFreeBound`."""


def race_free_bound(is_row: bool) -> int:
    """XLA `ReductionDimensionRaceFreeBound`."""
    return MIN_THREADS_X_ROW_REDUCTION * ROW_TILE if is_row else WARP * COLUMN_TILE


def is_race_free(is_row: bool, dims: tuple[int, int, int]) -> bool:
    """XLA `ReductionIsRaceFree`."""
    if is_row:
        return dims[2] <= race_free_bound(True) and dims[0] <= BATCHED_RACE_FREE_BOUND
    return dims[1] <= race_free_bound(False)


def split_params(n: int, is_row: bool) -> tuple[int, int]:
    """XLA `ComputeSplitParams`: (k1, k2) with k1 * k2 = n + the least padding."""
    bound = race_free_bound(is_row)
    k2 = min(math.isqrt(n), bound)
    min_pad = (k2 - n % k2) % k2
    k1 = (n + min_pad) // k2
    for i in range(k2 - 1, k2 // 2, -1):
        pad = (i - n % i) % i
        if pad < min_pad or (pad == min_pad and i & (i - 1) == 0):
            min_pad, k1 = pad, (n + pad) // i
    k2 = (n + min_pad) // k1
    if _swap(k1, k2, n, bound, is_row):
        k1, k2 = k2, k1
    return k1, k2


def _swap(k1: int, k2: int, n: int, bound: int, is_row: bool) -> bool:
    """XLA `ShouldSwapInnerAndOuterReducedMinorDimension`."""
    if k1 > bound:
        return False
    if is_row:
        if k2 % 2 == 0 and n % 2 == 0:
            return k2 * 2 < k1 or k1 % 2 == 0
        return n % 2 == 0 or k1 % 2 != 0
    return True


@dataclass(frozen=True)
class Grouped:
    """A reduction seen as XLA's grouper leaves it: input dims and reduced dims."""

    dims: tuple[int, ...]
    reduced: tuple[int, ...]
    is_row: bool
    rdims: tuple[int, int, int]


def grouped(op: HloOp) -> Grouped | None:
    """The grouped form of a splittable reduction (None when it is not one)."""
    if op.opcode != "reduce" or len(op.operands) != 2:
        return None
    inp = op.operands[0].type.data  # type: ignore[attr-defined]
    if not isinstance(inp, ArrayShape) or not isinstance(op.shape, ArrayShape):
        return None
    if (
        inp.layout is not None
        and inp.minor_to_major != default_layout(len(inp.dims)).minor_to_major
    ):
        return None
    if not is_unnested_reduction(op):
        return None
    groups = physical_groups(inp, set(op.attr("dimensions") or ()))
    is_row, rdims = reduction_dims(op)
    if len(groups) > 3 or is_race_free(is_row, rdims):
        return None
    dims = tuple(s for _, s in groups)
    reduced = tuple(i for i, (r, _) in enumerate(groups) if r)
    return Grouped(dims, reduced, is_row, rdims)


@dataclass
class _Builder:
    ctx: RewriteContext
    rewriter: PatternRewriter
    op: HloOp

    def new(self, opcode: str, operands: list[SSAValue], dims: tuple[int, ...],
            attrs: dict | None = None) -> SSAValue:  # fmt: skip
        if opcode == "reshape" and tuple(operands[0].type.data.dims) == dims:  # type: ignore[attr-defined]
            return operands[0]
        et = self.op.shape.element_type  # type: ignore[attr-defined]
        shape = ArrayShape(et, dims, (False,) * len(dims), default_layout(len(dims)))
        return new_op(
            self.rewriter, self.ctx, opcode, operands, shape, attrs, self.op, self.op
        ).result

    def reduce(self, x: SSAValue, dims: tuple[int, ...], out: tuple[int, ...]) -> SSAValue:
        attrs = {"dimensions": dims, "to_apply": self.op.attr("to_apply")}
        return self.new("reduce", [x, self.op.operands[1]], out, attrs)

    def finish(self, value: SSAValue) -> None:
        """Reshape `value` back to the reduction's shape and replace the reduction."""
        if tuple(value.type.data.dims) != tuple(self.op.shape.dims):  # type: ignore[attr-defined]
            value = new_op(self.rewriter, self.ctx, "reshape", [value], self.op.shape,
                           like=self.op, before=self.op).result  # fmt: skip
        self.op.result.replace_all_uses_with(value)
        self.rewriter.erase(self.op)


def _drop(dims: tuple[int, ...], drop: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(s for i, s in enumerate(dims) if i not in drop)


@dataclass
class SplitBatchedRowReduction(RewritePattern):
    """`reduce([B, K, R], {0, 2})` with B > 8 -> `reduce(reduce(x, {2}), {0})`.

    Guards: a splittable row reduction (see `grouped`) with more than 8 batched rows.
    """

    OPCODES: ClassVar[tuple[str, ...]] = ("reduce",)

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        g = grouped(op) if isinstance(op, HloOp) else None
        if g is None or not g.is_row or g.rdims[0] <= BATCHED_RACE_FREE_BOUND:
            return
        assert isinstance(op, HloOp)
        b = _Builder(self.ctx, rewriter, op)
        x = b.new("reshape", [op.operands[0]], g.dims)
        minor = g.reduced[-1]
        inner = b.reduce(x, (minor,), _drop(g.dims, (minor,)))
        outer = b.reduce(inner, (0,), _drop(g.dims, g.reduced))
        self.ctx.note(self, op, f"batch {g.rdims[0]} reduced after rows of {g.rdims[2]}")
        b.finish(outer)


@dataclass
class SplitReductionDimension(RewritePattern):
    """`reduce(x, {.., d})`, |d| = n too long -> `reduce(reduce(pad(x)[.., k1, k2, ..],
    {.., d + 1}), {d'})` with k1 * k2 = n + padding.

    Guards: a splittable reduction (see `grouped`) that is not a batched row reduction.
    """

    OPCODES: ClassVar[tuple[str, ...]] = ("reduce",)

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        g = grouped(op) if isinstance(op, HloOp) else None
        if g is None or (g.is_row and g.rdims[0] > BATCHED_RACE_FREE_BOUND):
            return
        assert isinstance(op, HloOp)
        b = _Builder(self.ctx, rewriter, op)
        d = g.reduced[-1]
        n = g.dims[d]
        k1, k2 = split_params(n, g.is_row)
        x = op.operands[0]
        if k1 * k2 != n:  # pad with the init value, which the reduction ignores
            x = b.new("reshape", [x], g.dims)
            padded = g.dims[:d] + (k1 * k2,) + g.dims[d + 1 :]
            cfg = tuple(PadDim(0, k1 * k2 - n if i == d else 0) for i in range(len(g.dims)))
            x = b.new("pad", [x, op.operands[1]], padded, {"padding": cfg})
        split = g.dims[:d] + (k1, k2) + g.dims[d + 1 :]
        x = b.new("reshape", [x], split)
        inner_dims = tuple(r + 1 if r == d else r for r in g.reduced)
        inner = b.reduce(x, inner_dims, _drop(split, inner_dims))
        outer_dim = d - g.reduced.index(d)
        outer = b.reduce(inner, (outer_dim,), _drop(g.dims, g.reduced))
        self.ctx.note(self, op, f"split {n} into {k1} x {k2}")
        b.finish(outer)


@dataclass(frozen=True)
class TreeReductionRewriterPass(HloModulePass):
    """Split reductions longer than a race-free kernel into two reductions (to a fixpoint)."""

    name: ClassVar[str] = "tree-reduction-rewriter"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        fused = fusion_computations(module)
        comps = [c for c in computations(module) if c.comp_name not in fused]
        patterns = [SplitBatchedRowReduction(rctx), SplitReductionDimension(rctx)]
        return run_patterns(module, patterns, comps)
